#!/usr/bin/env bash
# The overload curve (issue 31): offered against served, at multiples of a capacity you give,
# for a solo node or a 4-validator localnet, each run on a fresh node or network, driven by
# `walras loadgen --presign` (the load is signed before the clock starts, so the generator is
# not the limit). Prints one line per run: factor, rate, run, offered/s, sent, admitted,
# refused by reason, committed/s, goodput/s, expired, p50/p99 ms of what committed, and the
# sends skipped because every account was waiting for an answer; for a solo node also the
# node's own counts (its committed total, what it shed as expired, blocks committed late and
# the largest age at commit, from /metrics).
# Usage: [MODE=node|localnet] [ACCOUNTS=20000] [WALRAS=binary] [THREADS=N] [NODE_CPUS=0-11]
#        [LOADGEN_CPUS=12-15] scripts/bench-overload.sh SECONDS RUNS CAPACITY FACTORS...
#   e.g. scripts/bench-overload.sh 8 3 40000 0.5 1 2 3 5 10
# THREADS is the node's --threads (localnet: each validator's); NODE_CPUS and LOADGEN_CPUS pin
# the node (or the whole localnet) and the load generator to separate cores with taskset, so
# that on a large machine the load generator never takes the node's cores (and the reverse).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=$1; runs=$2; capacity=$3; shift 3
factors=${*:-0.5 1 2 3 5 10}
mode=${MODE:-node}
accounts=${ACCOUNTS:-20000}
target=${CARGO_TARGET_DIR:-target}
threads_args=()
[ -n "${THREADS:-}" ] && threads_args=(--threads "$THREADS")
node_pin=()
[ -n "${NODE_CPUS:-}" ] && node_pin=(taskset -c "$NODE_CPUS")
loadgen_pin=()
[ -n "${LOADGEN_CPUS:-}" ] && loadgen_pin=(taskset -c "$LOADGEN_CPUS")
# WALRAS=path/to/walras measures that binary as it is (no build).
walras=${WALRAS:-}
if [ -z "$walras" ]; then
  cargo build --release -p walras-cli >&2
  walras=$target/release/walras
fi
echo "# $(date -u '+%F %H:%M') UTC commit $(git rev-parse --short HEAD 2>/dev/null || echo -), $(nproc) cores: MODE=$mode ACCOUNTS=$accounts THREADS=${THREADS:-} NODE_CPUS=${NODE_CPUS:-} LOADGEN_CPUS=${LOADGEN_CPUS:-} scripts/bench-overload.sh $seconds $runs $capacity $factors"
echo "factor rate run offered_tx_s sent admitted refused committed_tx_s goodput_tx_s expired p50_ms p99_ms skipped_busy | node: committed shed_expired late_blocks age_max_ms"
report() {
  python3 -c "
import json,sys
r=json.load(sys.stdin); l=r['latency']
refused=','.join(f'{k.replace(\" \",\":\")}={v}' for k,v in sorted(r['rejected_by_reason'].items())) or '-'
print($1, round($2), $3, round(r['offered_tx_per_s']), r['sent'], r['admitted'], refused, round(r['committed_tx_per_s']), round(r['goodput_tx_per_s']), r['expired'], round(l['p50_ms']), round(l['p99_ms']), r['skipped_busy'], end=' ')"
}
# The values of the named samples in URL's /metrics, space-separated (0 for one absent).
metrics() {
  local url=$1; shift
  curl -s "$url/metrics" | python3 -c "
import sys
m = {}
for line in sys.stdin:
    if not line.startswith('#'):
        name, _, value = line.rpartition(' ')
        m[name] = value.strip()
print(' '.join(m.get(name, '0') for name in sys.argv[1:]))" "$@"
}
for factor in $factors; do
  rate=$(python3 -c "print($capacity * $factor)")
  for run in $(seq 1 "$runs"); do
    dir=$(mktemp -d)
    if [ "$mode" = localnet ]; then
      "${node_pin[@]}" "$walras" localnet --validators 4 --dir "$dir/net" --cometbft-bin "$(scripts/install-cometbft.sh)" \
        --dev-accounts "$accounts" "${threads_args[@]}" >/dev/null 2>&1
      url=$(python3 -c "import json; print(json.load(open('$dir/net/localnet.json'))['nodes'][0]['api'])")
    else
      "${node_pin[@]}" "$walras" node --data "$dir/node" --listen 127.0.0.1:0 --dev --dev-accounts "$accounts" \
        --rate-limit-rps 0 "${threads_args[@]}" >"$dir/log" 2>/dev/null &
      node=$!
      for _ in $(seq 100); do grep -q listening "$dir/log" && break; sleep 0.1; done
      url=$(sed -n 's/^walras node listening on //p' "$dir/log")
    fi
    # Pre-sign what 1.5x the capacity commits in the run (refused ones are sent again).
    presign=$(python3 -c "print(int(min($rate, 1.5 * $capacity) * $seconds) + 8 * $accounts)")
    "${loadgen_pin[@]}" "$walras" loadgen --node "$url" --rate "$rate" --seconds "$seconds" --accounts "$accounts" \
      --seed "$run" --presign --presign-count "$presign" --json 2>/dev/null | report "$factor" "$rate" "$run"
    echo "| $(metrics "$url" walras_transactions_committed_total 'walras_transactions_shed_total{reason="expired"}' \
      walras_blocks_committed_late_total walras_commit_age_max_ms)"
    if [ "$mode" = localnet ]; then
      # Every validator's own view: commit-rate estimate, what CheckTx shed as expired, what
      # it refused as mempool_full, what node 0's forwarder gave up on. (Its own name: reading
      # it into `rate` set the offered rate of this factor's later runs to node 3's estimate.)
      for api in $(python3 -c "import json; print(' '.join(n['api'] for n in json.load(open('$dir/net/localnet.json'))['nodes']))"); do
        read -r node_rate shed rejected forgotten committed <<<"$(metrics "$api" \
          walras_commit_rate_tx_per_s 'walras_transactions_shed_total{reason="expired"}' \
          'walras_admission_rejected_total{code="mempool_full"}' walras_forward_refused_total \
          walras_transactions_committed_total)"
        echo "#   $api rate $node_rate shed_expired $shed rejected_mempool_full $rejected forward_refused $forgotten committed $committed"
      done
      "$walras" localnet down --dir "$dir/net" >/dev/null 2>&1 || true
    else
      kill -TERM "$node"; wait "$node" || true
    fi
    rm -rf "$dir"
  done
done

#!/usr/bin/env bash
# End-to-end benchmark of a 4-validator CometBFT network on loopback (`walras localnet`), all
# validators and the load generator on this machine: for each offered rate, RUNS fresh
# networks, each driven by `walras loadgen` against node 0 for SECONDS. Committed means in a
# block that node 0 stored after CometBFT decided it; latency runs from sending to node 0's
# SSE event for that block. Prints one line per run, like scripts/bench-node.sh, plus the
# blocks per second of the run.
# Usage: [VALIDATORS=4] [TIMEOUT_COMMIT_MS=500] scripts/bench-localnet.sh [SECONDS] [RUNS] [RATES...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}; runs=${2:-3}; shift 2 || true
rates=${*:-250 500 1000 2000 4000}
validators=${VALIDATORS:-4}
timeout_commit_ms=${TIMEOUT_COMMIT_MS:-200}
cometbft=$(scripts/install-cometbft.sh)
cargo build --release -p walras-cli >&2
walras=./target/release/walras
echo "# $(date -u +%F) commit $(git rev-parse --short HEAD): VALIDATORS=$validators TIMEOUT_COMMIT_MS=$timeout_commit_ms scripts/bench-localnet.sh $seconds $runs $rates"
echo "rate run offered_tx_s committed_tx_s p50_ms p99_ms p999_ms blocks accepted dropped skipped_busy rejected"
for rate in $rates; do
  for run in $(seq 1 "$runs"); do
    dir=$(mktemp -d)
    "$walras" localnet --validators "$validators" --dir "$dir/net" --cometbft-bin "$cometbft" \
      --dev-accounts 20000 --timeout-commit-ms "$timeout_commit_ms" >/dev/null 2>&1
    url=$(python3 -c "import json,sys; print(json.load(open('$dir/net/localnet.json'))['nodes'][0]['api'])")
    "$walras" loadgen --node "$url" --rate "$rate" --seconds "$seconds" --accounts 10000 --seed "$run" --json 2>/dev/null \
      | python3 -c "import json,sys; r=json.load(sys.stdin); l=r['latency']; print($rate, $run, round(r['offered_tx_per_s']), round(r['committed_tx_per_s']), round(l['p50_ms']), round(l['p99_ms']), round(l['p999_ms']), r['blocks'], r['accepted'], r['dropped'], r['skipped_busy'], r['rejected'])"
    "$walras" localnet down --dir "$dir/net" >/dev/null 2>&1 || true
    rm -rf "$dir"
  done
done

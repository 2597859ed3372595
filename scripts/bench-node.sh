#!/usr/bin/env bash
# End-to-end benchmark of a solo node over HTTP on loopback, persistence on (LMDB, synchronous
# commits): for each offered rate, RUNS fresh nodes, each driven by `walras loadgen` for SECONDS.
# Prints one line per run: rate, run, offered, committed tx/s, p50/p99/p999 ms, blocks, skipped.
# Usage: scripts/bench-node.sh [SECONDS] [RUNS] [RATES...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}; runs=${2:-3}; shift 2 || true
rates=${*:-2000 5000 10000 20000 40000 60000}
cargo build --release -p walras-cli >&2
walras=./target/release/walras
echo "# $(date -u +%F) commit $(git rev-parse --short HEAD): scripts/bench-node.sh $seconds $runs $rates"
echo "rate run offered_tx_s committed_tx_s p50_ms p99_ms p999_ms blocks accepted dropped skipped_busy rejected"
for rate in $rates; do
  for run in $(seq 1 "$runs"); do
    data=$(mktemp -d)
    log=$(mktemp)
    "$walras" node --data "$data/node" --listen 127.0.0.1:0 --dev --dev-accounts 20000 --rate-limit-rps 0 >"$log" 2>/dev/null &
    node=$!
    for _ in $(seq 100); do grep -q listening "$log" && break; sleep 0.1; done
    url=$(sed -n 's/^walras node listening on //p' "$log")
    "$walras" loadgen --node "$url" --rate "$rate" --seconds "$seconds" --accounts 10000 --seed "$run" --json 2>/dev/null \
      | python3 -c "import json,sys; r=json.load(sys.stdin); l=r['latency']; print($rate, $run, round(r['offered_tx_per_s']), round(r['committed_tx_per_s']), round(l['p50_ms']), round(l['p99_ms']), round(l['p999_ms']), r['blocks'], r['accepted'], r['dropped'], r['skipped_busy'], r['rejected'])"
    kill -TERM "$node"; wait "$node" || true
    rm -rf "$data" "$log"
  done
done

#!/usr/bin/env bash
# A fresh node's first checkpoint under load (issue 32): a new store of ACCOUNTS dev accounts,
# 15 s of `walras loadgen` at 8,000 tx/s (>= 100,000 transactions, so a checkpoint is drafted),
# then loadgen's latency and the node's log line for that checkpoint (what the block path copied
# and in how many ms; the writer's assembly, sealing and writing), and the node's RSS after it.
# Usage: scripts/first-checkpoint.sh [ACCOUNTS] [THREADS]
# Env: WALRAS=path to the binary (default: build ./target/release/walras).
set -uo pipefail
cd "$(dirname "$0")/.."
accounts=${1:-10000000}; threads=${2:-2}
if [ -z "${WALRAS:-}" ]; then
  cargo build --release -p walras-cli >&2
  WALRAS=./target/release/walras
fi
dir=$(mktemp -d); log=$dir/log
"$WALRAS" node --data "$dir/node" --listen 127.0.0.1:0 --dev --dev-accounts "$accounts" \
  --rate-limit-rps 0 --threads "$threads" >"$log" 2>&1 &
node=$!
for _ in $(seq 60000); do grep -q listening "$log" && break; sleep 0.01; done
url=$(sed -n 's/^walras node listening on //p' "$log" | tail -1)
until curl -sf "$url/v1/status" >/dev/null; do sleep 0.05; done
"$WALRAS" loadgen --node "$url" --rate 8000 --seconds 15 --accounts 10000 --seed 1 --json 2>/dev/null |
  python3 -c 'import json, sys; r = json.load(sys.stdin); l = r["latency"]; print("loadgen", round(r["committed_tx_per_s"]), "tx/s, p50", round(l["p50_ms"]), "ms, p99", round(l["p99_ms"]), "ms")'
for _ in $(seq 300); do grep -q "checkpoint at height" "$log" && break; sleep 0.1; done
grep -o "checkpoint at height.*" "$log" | head -1
echo "node RSS $(awk '/^VmRSS/ { print int($2 / 1024) }' "/proc/$node/status") MB"
kill -TERM "$node"; wait "$node" 2>/dev/null; rm -rf "$dir"

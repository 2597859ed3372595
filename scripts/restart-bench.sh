#!/usr/bin/env bash
# Restart benchmark (issue 32): a solo node with ACCOUNTS dev accounts, 15 s of loadgen at
# 8,000 tx/s (>= 100,000 transactions, so the store writes a background checkpoint), then
# three times: SIGKILL (a crash) and the time until the restarted node answers /v1/status.
# Prints the node log's recovery lines at the end.
# Usage: scripts/restart-bench.sh ACCOUNTS [THREADS]
# Env: WALRAS=path to the binary (default: build ./target/release/walras), DATA=store directory
# (default: a fresh temporary one, removed at the end), LOAD_SECONDS=seconds of load (default
# 15; 24 leaves ~90,000 transactions after the checkpoint, near the most a restart replays).
set -uo pipefail
cd "$(dirname "$0")/.."
accounts=${1:?usage: scripts/restart-bench.sh ACCOUNTS [THREADS]}; threads=${2:-2}
if [ -z "${WALRAS:-}" ]; then
  cargo build --release -p walras-cli >&2
  WALRAS=./target/release/walras
fi
data=${DATA:-$(mktemp -d)/node}
log=$(mktemp)
start_node() { # the number of nodes started so far, this one included
  "$WALRAS" node --data "$data" --listen 127.0.0.1:0 --dev --dev-accounts "$accounts" \
    --rate-limit-rps 0 --threads "$threads" >>"$log" 2>&1 &
  node=$!
  for _ in $(seq 60000); do [ "$(grep -c listening "$log")" -ge "$1" ] && break; sleep 0.01; done
  url=$(sed -n 's/^walras node listening on //p' "$log" | tail -1)
}
metric() { curl -sf "$url/metrics" | awk -v name="$1" '$1 == name { print $2 }'; }
seconds_since() { python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 2))" "$1"; }
started=$(date +%s.%N); start_node 1
until curl -sf "$url/v1/status" >/dev/null; do sleep 0.05; done
echo "# first start (creates the genesis of $accounts accounts): $(seconds_since "$started") s"
"$WALRAS" loadgen --node "$url" --rate 8000 --seconds "${LOAD_SECONDS:-15}" --accounts 10000 --seed 1 --json \
  2>/dev/null | python3 -c 'import json, sys; r = json.load(sys.stdin); print("# loadgen committed", round(r["committed_tx_per_s"]), "tx/s")'
for _ in $(seq 600); do c=$(metric walras_checkpoint_height); [ "${c%.*}" -gt 0 ] 2>/dev/null && break; sleep 0.1; done
echo "# height $(metric walras_height), newest checkpoint $(metric walras_checkpoint_height), RSS $(awk '/^VmRSS/ { print int($2 / 1024) }' "/proc/$node/status") MB"
for run in 1 2 3; do
  kill -KILL "$node"; wait "$node" 2>/dev/null
  started=$(date +%s.%N); start_node $((run + 1))
  until curl -sf "$url/v1/status" >/dev/null; do sleep 0.01; done
  echo "restart $run after SIGKILL: $(seconds_since "$started") s to serve /v1/status"
done
grep -E "recovering|loaded the checkpoint|recovered height" "$log" | tail -3
kill -TERM "$node"; wait "$node" 2>/dev/null
[ -n "${DATA:-}" ] || rm -rf "$(dirname "$data")"
rm -f "$log"

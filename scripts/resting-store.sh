#!/usr/bin/env bash
# Builds a node store holding many open offers (issue 32: block cost and restart at millions
# of open offers), through the node's real path: a solo node with ACCOUNTS dev accounts on
# DATA, driven by `walras loadgen --mix resting` (offers 10^3 to 10^6 times above the price
# ratio, which rest) from LOAD_ACCOUNTS of them at RATE tx/s until /metrics counts OFFERS open
# offers; then the node is killed with SIGKILL (a crash: what a restart then faces). Prints
# progress every 10 s (open offers, committed tx/s, RSS, store size). Time the restart after
# with scripts/restart-time.sh DATA ACCOUNTS.
# Usage: scripts/resting-store.sh DATA ACCOUNTS OFFERS [RATE] [LOAD_ACCOUNTS]
# Env: WALRAS=path to the binary (default: build ./target/release/walras).
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/resting-store.sh DATA ACCOUNTS OFFERS [RATE] [LOAD_ACCOUNTS]"
data=${1:?$usage}; accounts=${2:?$usage}; offers=${3:?$usage}
rate=${4:-15000}; load_accounts=${5:-100000}
if [ "$load_accounts" -gt "$accounts" ]; then load_accounts=$accounts; fi
if [ -z "${WALRAS:-}" ]; then
  cargo build --release -p walras-cli >&2
  WALRAS=./target/release/walras
fi
log="$data.log"
mkdir -p "$(dirname "$data")"; touch "$log"
node=""; loadgen=""
trap 'kill "$loadgen" 2>/dev/null || true; kill -9 "$node" 2>/dev/null || true' EXIT
"$WALRAS" node --data "$data" --listen 127.0.0.1:0 --dev --dev-accounts "$accounts" \
  --rate-limit-rps 0 --threads "$(nproc)" >>"$log" 2>&1 &
node=$!
url=""
until [ -n "$url" ] && curl -sf "$url/v1/status" >/dev/null; do
  kill -0 "$node" 2>/dev/null || { echo "the node exited; its log: $log" >&2; exit 1; }
  url=$(sed -n 's/^walras node listening on //p' "$log" | tail -1)
  sleep 0.2
done
metric() { curl -sf "$url/metrics" | awk -v name="$1" '$1 == name { print $2 }'; }
echo "# $(date -u '+%F %H:%M') UTC, $(nproc) cores: scripts/resting-store.sh $*"
"$WALRAS" loadgen --node "$url" --rate "$rate" --seconds 100000 --accounts "$load_accounts" \
  --mix resting --seed 11 >"$data.loadgen.log" 2>&1 &
loadgen=$!
started=$(date +%s); last_tx=$(metric walras_transactions_committed_total); last_at=$started
while :; do
  sleep 10
  kill -0 "$loadgen" 2>/dev/null || { echo "loadgen stopped: $data.loadgen.log" >&2; exit 1; }
  open=$(metric walras_state_open_offers); tx=$(metric walras_transactions_committed_total)
  now=$(date +%s)
  echo "$((now - started)) s: open offers $open, committed $(( (tx - last_tx) / (now - last_at) )) tx/s," \
    "height $(metric walras_height), RSS $(awk '/^VmRSS/ { print int($2 / 1024) }' "/proc/$node/status") MB," \
    "store $(du -sm "$data" | cut -f1) MB"
  last_tx=$tx; last_at=$now
  [ "$open" -ge "$offers" ] && break
done
kill "$loadgen"; wait "$loadgen" 2>/dev/null || true
height=$(metric walras_height); open=$(metric walras_state_open_offers)
kill -9 "$node"; wait "$node" 2>/dev/null || true
echo "killed the node (SIGKILL) at height $height with $open open offers; store $(du -sm "$data" | cut -f1) MB in $data"

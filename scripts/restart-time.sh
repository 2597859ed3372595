#!/usr/bin/env bash
# One timed restart of an existing store (issue 32): starts a solo node on DATA, prints the
# seconds until /v1/status answers, the node's CPU (user + system) and RSS at that moment
# (and its peak so far),
# and its recovery lines, then kills it with SIGKILL (the store is left as it was found).
# Runs alternating two builds on one store compare them: the figures of one run are noisy.
# Usage: scripts/restart-time.sh DATA ACCOUNTS [THREADS]
# Env: WALRAS=path to the binary (default ./target/release/walras). ACCOUNTS must be the
# --dev-accounts the store was created with.
set -uo pipefail
data=${1:?usage: scripts/restart-time.sh DATA ACCOUNTS [THREADS]}
accounts=${2:?usage: scripts/restart-time.sh DATA ACCOUNTS [THREADS]}; threads=${3:-2}
walras=${WALRAS:-./target/release/walras}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
started=$(date +%s.%N)
"$walras" node --dev --dev-accounts "$accounts" --data "$data" --listen 127.0.0.1:0 \
  --threads "$threads" --rate-limit-rps 0 >"$log" 2>&1 &
node=$!
url=
for _ in $(seq 12000); do
  kill -0 "$node" 2>/dev/null || { echo "the node exited:" >&2; cat "$log" >&2; exit 1; }
  url=$(sed -n 's/^walras node listening on //p' "$log" | head -1)
  if [ -n "$url" ] && curl -sf "$url/v1/status" >/dev/null; then break; fi
  sleep 0.05
done
ended=$(date +%s.%N)
ticks=$(getconf CLK_TCK)
read -r user system < <(awk '{ print $14, $15 }' "/proc/$node/stat")
rss_kb=$(awk '/^VmRSS/ { print $2 }' "/proc/$node/status")
hwm_kb=$(awk '/^VmHWM/ { print $2 }' "/proc/$node/status")
kill -9 "$node"; wait "$node" 2>/dev/null
python3 - "$started" "$ended" "$user" "$system" "$ticks" "$rss_kb" "$hwm_kb" <<'PY'
import sys
started, ended, user, system, ticks, rss_kb, hwm_kb = map(float, sys.argv[1:])
print(f"serve {ended - started:.2f} s; cpu user {user / ticks:.2f} s, system {system / ticks:.2f} s; "
      f"rss {rss_kb / 1024:.0f} MB (peak {hwm_kb / 1024:.0f} MB)")
PY
grep -oE "(loaded the checkpoint|recovered height).*" "$log"

#!/usr/bin/env bash
# What a solo node's store writes per block (issue 32: LMDB page churn): starts `walras node`
# on a copy of STORE (the data directory of an earlier node, e.g. one a soak kept with
# DATA=...; the copy is synced first, so that its write-back is not counted) or on a fresh
# store (`fresh`), drives it with `walras loadgen` at RATE tx/s for
# SECONDS seconds, and from the 8th second on measures: bytes the node wrote (`wchar` of
# /proc/<pid>/io: what LMDB and the checkpoint files handed the kernel) and sectors the disk
# received (/proc/diskstats of the store's device), per committed block; the persist time per
# transaction (walras_block_persist_seconds_total over walras_transactions_committed_total);
# and each block's persist time from the block events (median, p90, max: a slow block shows
# here, not in the mean), with loadgen's p50/p99 latency.
# Usage: scripts/store-writes.sh STORE|fresh [SECONDS] [RATE] [ACCOUNTS]
# Env: WALRAS=path to the binary (default: build ./target/release/walras).
set -euo pipefail
cd "$(dirname "$0")/.."
store=$1; seconds=${2:-30}; rate=${3:-8000}; accounts=${4:-10000}
if [ -z "${WALRAS:-}" ]; then
  cargo build --release -p walras-cli >&2
  WALRAS=./target/release/walras
fi
work=$(mktemp -d)
node=""; events_reader=""
trap 'kill "$node" "$events_reader" 2>/dev/null || true; rm -rf "$work"' EXIT
[ "$store" = fresh ] || { cp -r "$store" "$work/node"; sync; }
"$WALRAS" node --data "$work/node" --listen 127.0.0.1:0 --dev --dev-accounts "$accounts" \
  --rate-limit-rps 0 --threads 2 >"$work/log" 2>&1 &
node=$!
for _ in $(seq 12000); do grep -q listening "$work/log" && break; sleep 0.01; done
url=$(sed -n 's/^walras node listening on //p' "$work/log" | tail -1)
until curl -sf "$url/v1/status" >/dev/null; do sleep 0.05; done
metric() { curl -sf "$url/metrics" | awk -v name="$1" '$1 == name { print $2 }'; }
device=$(df --output=source "$work" | tail -1 | sed 's|^/dev/||')
sectors() { awk -v device="$device" '$3 == device { print $10 }' /proc/diskstats; }
curl -sN "$url/v1/events" >"$work/events" 2>/dev/null &
events_reader=$!
echo "# $(date -u '+%F %H:%M') UTC, $(nproc) cores, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'): scripts/store-writes.sh $store $seconds $rate $accounts"
"$WALRAS" loadgen --node "$url" --rate "$rate" --seconds "$seconds" --accounts "$accounts" \
  --seed 77 --json >"$work/report.json" 2>/dev/null &
loadgen=$!
sleep 8
w0=$(awk '/^wchar/ { print $2 }' "/proc/$node/io"); s0=$(sectors)
p0=$(metric walras_block_persist_seconds_total); t0=$(metric walras_transactions_committed_total)
h0=$(metric walras_height)
wait "$loadgen"
w1=$(awk '/^wchar/ { print $2 }' "/proc/$node/io"); s1=$(sectors)
p1=$(metric walras_block_persist_seconds_total); t1=$(metric walras_transactions_committed_total)
h1=$(metric walras_height)
kill "$events_reader" 2>/dev/null || true
python3 - "$work" "$w0" "$w1" "${s0:-0}" "${s1:-0}" "$p0" "$p1" "$t0" "$t1" "$h0" "$h1" <<'PY'
import json, sys
work, w0, w1, s0, s1, p0, p1, t0, t1, h0, h1 = sys.argv[1:]
report = json.load(open(f"{work}/report.json"))
blocks = max(int(h1) - int(h0), 1)
tx = max(float(t1) - float(t0), 1.0)
persist = []
for line in open(f"{work}/events", errors="replace"):
    if line.startswith("data:"):
        try:
            event = json.loads(line[5:])
        except ValueError:
            continue
        if "persist_ms" in event:
            persist.append(event["persist_ms"])
persist.sort()
n = len(persist)
print("blocks tx_per_block written_kb_per_block disk_kb_per_block persist_us_per_tx "
      "persist_ms_median persist_ms_p90 persist_ms_max p50_ms p99_ms")
print(blocks, round(tx / blocks), round((int(w1) - int(w0)) / blocks / 1024),
      round((int(s1) - int(s0)) * 512 / blocks / 1024),
      round((float(p1) - float(p0)) / tx * 1e6, 2),
      round(persist[n // 2], 1) if n else "-", round(persist[n * 9 // 10], 1) if n else "-",
      round(persist[-1], 1) if n else "-",
      round(report["latency"]["p50_ms"]), round(report["latency"]["p99_ms"]))
PY

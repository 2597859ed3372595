#!/usr/bin/env bash
# Soak benchmark of a solo node (issue 32): a constant open-loop load for MINUTES minutes, one
# `walras loadgen` run of 60 s per minute (each its own open-loop schedule, so a slow minute
# cannot hide in an average), then a timed restart on the same store.
# Per minute it prints: offered and committed tx/s and p50/p99 latency (loadgen's), blocks, the
# node's execution time per committed transaction (walras_block_execute_seconds_total over
# walras_transactions_committed_total, both deltas of the minute), persist time per
# transaction, the time reporting each block to admission (the account view and the mempool,
# walras_block_publish_seconds_total; serial work on the block path outside the block
# timings) per transaction, RSS (anonymous: the process's own memory; file: pages of the mapped store it
# touched), what the state says it holds (state_mb: the sum of walras_state_memory_bytes), the
# checkpoint writer's kept buffer and the recent-transaction index (buffer_mb, recent_mb), the
# store file, open offers and accounts (the /metrics gauges), the node's CPU (% of
# one core) and the machine's steal time (% of all its CPU time taken by the hypervisor: on a
# shared VM, a minute with steal ran on a slower machine); then, per minute,
# each engine phase's milliseconds per block and microseconds per transaction, from the
# block events (/v1/events), to see which phase grows.
# Then SIGKILL (a crash, not a clean stop) and the time until the restarted node serves
# /v1/status (recovery from the newest checkpoint included).
# iters_per_block is tâtonnement's iterations per cleared block in the minute (the clearing's
# work grows with them, not with the offers, so a growing plan phase is read against it).
# Usage: scripts/soak.sh [MINUTES] [RATE] [ACCOUNTS] [THREADS]
# Env: WALRAS=path to the binary (default: build ./target/release/walras), DATA=store directory
# (default: a fresh temporary one, removed at the end), LOG=file for the node's log (default: a
# temporary one, removed at the end; the soak's part is kept as LOG.soak, and its checkpoint
# lines say what each checkpoint cost), LOAD_ACCOUNTS=how many of the ACCOUNTS loadgen sends
# from (default: all; on a store of millions of accounts, e.g. one scripts/resting-store.sh
# built, a few thousand keep loadgen's start short).
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-10}; rate=${2:-8000}; accounts=${3:-10000}; threads=${4:-2}
load_accounts=${LOAD_ACCOUNTS:-$accounts}
if [ -z "${WALRAS:-}" ]; then
  cargo build --release -p walras-cli >&2
  WALRAS=./target/release/walras
fi
data=${DATA:-$(mktemp -d)/node}
log=${LOG:-$(mktemp)}
echo "# $(date -u '+%F %H:%M') UTC, $(nproc) cores, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'): scripts/soak.sh $minutes $rate $accounts $threads (loadgen from $load_accounts accounts)"

start_node() {
  "$WALRAS" node --data "$data" --listen 127.0.0.1:0 --dev --dev-accounts "$accounts" \
    --rate-limit-rps 0 --threads "$threads" >"$log" 2>&1 &
  node=$!
  for _ in $(seq 12000); do grep -q listening "$log" && break; sleep 0.01; done
  url=$(sed -n 's/^walras node listening on //p' "$log" | tail -1)
}

cpu_ticks() { # "node_ticks steal_ticks total_ticks": the node's user+system time, the machine's
  # steal and all its time, in clock ticks since boot
  local node_ticks; node_ticks=$(awk '{ print $14 + $15 }' "/proc/$node/stat")
  awk -v node="$node_ticks" '$1 == "cpu" { total = 0; for (i = 2; i <= NF; i++) total += $i;
    print node, $9, total }' /proc/stat
}

metric() { # name: the sample's value from /metrics
  curl -sf "$url/metrics" | awk -v name="$1" '$1 == name { print $2 }'
}

state_bytes() { # the sum of walras_state_memory_bytes over its parts
  curl -sf "$url/metrics" | awk '$1 ~ /^walras_state_memory_bytes[{]/ { sum += $2 } END { print sum + 0 }'
}

start_node
events=$(mktemp)
curl -sN "$url/v1/events" >"$events" 2>/dev/null &
events_reader=$!
bounds=""
echo "minute offered_tx_s committed_tx_s p50_ms p99_ms blocks exec_us_per_tx persist_us_per_tx publish_us_per_tx iters_per_block rss_mb rss_anon_mb rss_file_mb state_mb buffer_mb recent_mb store_mb open_offers accounts node_cpu_pct steal_pct"
ticks0=$(cpu_ticks)
exec0=$(metric walras_block_execute_seconds_total); persist0=$(metric walras_block_persist_seconds_total)
publish0=$(metric walras_block_publish_seconds_total)
tx0=$(metric walras_transactions_committed_total)
iters0=$(metric walras_clearing_iterations_total); clearings0=$(metric walras_clearing_blocks_total)
for minute in $(seq 1 "$minutes"); do
  bounds="$bounds $(date +%s%3N)"
  report=$("$WALRAS" loadgen --node "$url" --rate "$rate" --seconds 60 --accounts "$load_accounts" \
    --seed "$minute" --json 2>/dev/null)
  exec1=$(metric walras_block_execute_seconds_total); persist1=$(metric walras_block_persist_seconds_total)
  publish1=$(metric walras_block_publish_seconds_total)
  tx1=$(metric walras_transactions_committed_total)
  iters1=$(metric walras_clearing_iterations_total); clearings1=$(metric walras_clearing_blocks_total)
  rss_kb=$(awk '/^VmRSS/ { print $2 }' "/proc/$node/status")
  anon_kb=$(awk '/^RssAnon/ { print $2 }' "/proc/$node/status")
  file_kb=$(awk '/^RssFile/ { print $2 }' "/proc/$node/status")
  store=$(stat -c %s "$data/data.mdb"); state=$(state_bytes)
  buffer=$(metric walras_checkpoint_buffer_bytes); recent=$(metric walras_recent_index_bytes)
  offers=$(metric walras_state_open_offers); accts=$(metric walras_state_accounts)
  ticks1=$(cpu_ticks)
  python3 - "$minute" "$report" "$exec0" "$exec1" "$persist0" "$persist1" "${publish0:-0}" "${publish1:-0}" "$tx0" "$tx1" "$iters0" "$iters1" "$clearings0" "$clearings1" "$rss_kb" "$anon_kb" "$file_kb" "$state" "${buffer:-0}" "${recent:-0}" "$store" "$offers" "$accts" "$ticks0" "$ticks1" "$(nproc)" <<'EOF'
import json, sys
minute, report, e0, e1, p0, p1, u0, u1, t0, t1, i0, i1, c0, c1, rss_kb, anon_kb, file_kb, state, buffer, recent, store, offers, accounts, k0, k1, cores = sys.argv[1:]
(n0, s0, a0), (n1, s1, a1) = [[int(x) for x in k.split()] for k in (k0, k1)]
all_ticks = max(a1 - a0, 1)
node_cpu_pct = (n1 - n0) / all_ticks * int(cores) * 100
steal_pct = (s1 - s0) / all_ticks * 100
r = json.loads(report); l = r["latency"]
tx = max(float(t1) - float(t0), 1.0)
print(minute, round(r["offered_tx_per_s"]), round(r["committed_tx_per_s"]), round(l["p50_ms"]),
      round(l["p99_ms"]), r["blocks"], round((float(e1) - float(e0)) / tx * 1e6, 1),
      round((float(p1) - float(p0)) / tx * 1e6, 1), round((float(u1) - float(u0)) / tx * 1e6, 1),
      round((float(i1) - float(i0)) / max(float(c1) - float(c0), 1.0), 1), round(int(rss_kb) / 1024),
      round(int(anon_kb) / 1024), round(int(file_kb) / 1024), round(float(state) / 2**20),
      round(float(buffer) / 2**20), round(float(recent) / 2**20),
      round(int(store) / 2**20), offers, accounts, round(node_cpu_pct), round(steal_pct, 1))
EOF
  exec0=$exec1; persist0=$persist1; publish0=$publish1; tx0=$tx1; ticks0=$ticks1; iters0=$iters1; clearings0=$clearings1
done
bounds="$bounds $(date +%s%3N)"
kill "$events_reader" 2>/dev/null || true
echo "minute blocks tx_per_block sig_ms filter_ms plan_ms clear_ms apply_ms commit_ms sig_us_tx filter_us_tx plan_us_tx clear_us_tx apply_us_tx commit_us_tx"
python3 - "$events" $bounds <<'EOF'
import json, sys
path, bounds = sys.argv[1], [int(b) for b in sys.argv[2:]]
phases = ["signatures", "filter", "plan", "clearing", "apply", "commit"]
minutes = [[] for _ in bounds[:-1]]
for line in open(path, errors="replace"):
    if not line.startswith("data:"):
        continue
    try:
        event = json.loads(line[5:])
    except ValueError:
        continue
    at = event.get("committed_unix_ms", 0)
    for index in range(len(bounds) - 1):
        if bounds[index] <= at < bounds[index + 1] and event.get("phases"):
            minutes[index].append(event)
for index, events in enumerate(minutes, 1):
    if not events:
        print(index, 0)
        continue
    tx = max(sum(e["transactions"] for e in events), 1)
    totals = [sum(e["phases"][p] for e in events) for p in phases]
    print(index, len(events), round(tx / len(events)),
          *[round(t / len(events), 2) for t in totals], *[round(t / tx * 1e3, 2) for t in totals])
EOF
height=$(metric walras_height); checkpoint=$(metric walras_checkpoint_height)
kill -KILL "$node"; wait "$node" 2>/dev/null || true
# The restarted node writes the log afresh: the soak's own log is kept beside it.
[ -z "${LOG:-}" ] || cp "$log" "$log.soak"
started=$(date +%s.%N)
start_node
until curl -sf "$url/v1/status" >/dev/null; do sleep 0.01; done
served=$(date +%s.%N)
echo "# restart after SIGKILL at height $height (newest background checkpoint $checkpoint): $(python3 -c "print(round($served - $started, 2))") s to serve /v1/status; $(grep -m1 -o 'loaded the checkpoint.*\|replayed.*' "$log" || true)"
kill -TERM "$node"; wait "$node" 2>/dev/null || true
[ -n "${DATA:-}" ] || rm -rf "$(dirname "$data")"
[ -n "${LOG:-}" ] || rm -f "$log"
rm -f "$events"

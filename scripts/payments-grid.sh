#!/usr/bin/env bash
# The fast-payments benchmark grid (issue 14): `walras payments bench` (release build, real
# validator processes on loopback, all on this machine) for every validators × shards × scheme
# cell, short runs. Prints one markdown row per cell with the exact command that produced it.
# A cell the bench refuses or that fails prints its error in the row instead of figures.
#
# tx/s per validator core = certified tx/s / shards (each validator runs one signing thread per
# shard and processes every payment). All validators share this machine: where validators ×
# shards exceeds its cores the row is marked "oversubscribed" and the per-core figure is a floor.
#
# Usage: [VALIDATORS="4 10 28"] [SHARDS="1 2 4"] [SCHEMES="naive merkle bls"] [GRID_SECONDS=5]
#        [RATE=1000] [KEYS=1000] [CELL_TIMEOUT=300] [WALRAS=path/to/walras] scripts/payments-grid.sh
# WALRAS skips the build and uses that binary (it needs the dev tools: default features).
set -euo pipefail
cd "$(dirname "$0")/.."
validators=${VALIDATORS:-4 10 28}
shards=${SHARDS:-1 2 4}
schemes=${SCHEMES:-naive merkle bls}
seconds=${GRID_SECONDS:-5}
rate=${RATE:-1000}
keys=${KEYS:-1000}
cell_timeout=${CELL_TIMEOUT:-300}
if [ -z "${WALRAS:-}" ]; then
  cargo build --release -p walras-cli >&2
  WALRAS="${CARGO_TARGET_DIR:-target}/release/walras"
fi
echo "# $(date -u +%F) commit $(git rev-parse --short HEAD), $(nproc) cores: VALIDATORS=\"$validators\" SHARDS=\"$shards\" SCHEMES=\"$schemes\" GRID_SECONDS=$seconds RATE=$rate KEYS=$keys scripts/payments-grid.sh"
echo
echo "| validators | shards | scheme | certified tx/s | tx/s per validator core | p50 ms | p99 ms | p999 ms | certificate bytes | sent / certified / failed / unanswered | command |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for v in $validators; do
  for s in $shards; do
    for scheme in $schemes; do
      command=("$WALRAS" payments bench --validators "$v" --shards "$s" --scheme "$scheme" \
        --rate "$rate" --seconds "$seconds" --keys "$keys" --json)
      errors=$(mktemp)
      if output=$(timeout "$cell_timeout" "${command[@]}" 2>"$errors"); then
        printf '%s' "$output" | python3 -c '
import json, sys
r = json.loads(sys.stdin.read().strip().splitlines()[-1])
l = r["latency_ms"]
per_core = str(r["tx_per_s_per_validator_core"]) + (" (oversubscribed)" if r["cores_oversubscribed"] else "")
counts = "%d / %d / %d / %d" % (r["sent"], r["certified"], r["failed"], r["unanswered"])
cert = str(r["certificate_bytes"])
if r.get("compact_certificate_bytes") is not None:
    cert += " (compact %d)" % r["compact_certificate_bytes"]
print("| %d | %d | %s | %d | %s | %.1f | %.1f | %.1f | %s | %s | `%s` |" % (
    r["validators"], r["shards"], r["scheme"], r["certified_tx_per_s"], per_core,
    l["p50"], l["p99"], l["p999"], cert, counts, r["command"]))
'
      else
        status=$?
        reason=$(tail -n 1 "$errors" | tr '|' '/')
        [ "$status" -eq 124 ] && reason="timed out after ${cell_timeout}s"
        echo "| $v | $s | $scheme | failed: ${reason:-exit $status} | | | | | | | \`${command[*]}\` |"
      fi
      rm -f "$errors"
    done
  done
done

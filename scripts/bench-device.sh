#!/usr/bin/env bash
# The 16-core measurements of issues 27 and 31 in one run, for the `device` machine (or any
# large Linux machine): each part writes its own file under OUT as soon as it ends, so a run
# cut short still returns what it finished.
#
#   1. `walras replay` per thread count (1, 2, 4, 8, 16), with and without signature checks,
#      per phase: scripts/bench_scaling.py, node part skipped (part 2 does it pinned);
#   2. the solo node's overload curve: node on cores 0-11 (`--threads 12`), pre-signed load
#      generator on cores 12-15, at multiples of NODE_CAPACITY;
#   3. the 4-validator localnet's curve: the network on cores 0-11 (`--threads 3` each), load
#      generator on cores 12-15, at multiples of LOCALNET_CAPACITY;
#   4. `walras payments bench`, 4 validators x 8 shards, at the rates PAYMENTS_RATES.
#   5. persist (only when named): the solo node saturated (NODE_CAPACITY x 1.5) with its store
#      on disk and on tmpfs (/dev/shm: a sync costs nothing), alternating, PERSIST_ROUNDS
#      rounds: whether the store's sync is worth taking off the producer's critical path
#      (on the 2-core VM it was not: BENCHMARKS.md, "Is the producer's persist worth ...").
#   6. clearing (only when named): settling and one clearing of a 50-asset batch (100k and
#      500k offers) on pools of 1, 2, 4, 8, 16 threads, alternating, medians of 41: the
#      example `settle_threads` (CLEARING_EXAMPLE: its binary, built with
#      `cargo build --release -p walras-clearing --example settle_threads`).
# Environment knobs (defaults in the code below): REPLAY_THREADS, REPLAY_BLOCKS; NODE_CORES,
# NODE_ACCOUNTS, NODE_SECONDS, NODE_CAPACITY, NODE_FACTORS; LOCALNET_BINARIES,
# LOCALNET_SECONDS, LOCALNET_CAPACITY, LOCALNET_FACTORS; PAYMENTS_RATES.
#
# Usage: OUT=/tmp/out WALRAS=target/devbin/walras WALRAS_COMETBFT=target/devbin/cometbft \
#          scripts/bench-device.sh [PARTS]        # PARTS: any of "replay node localnet payments
#                                                  # persist clearing" (default: the first four)
# The binary is measured as it is (build it with `cargo build --release -p walras-cli`).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT to a directory for the results}
walras=$(realpath "${WALRAS:?set WALRAS to the walras binary}")
export WALRAS_COMETBFT=$(realpath "${WALRAS_COMETBFT:-$(command -v cometbft)}")
parts=${*:-replay node localnet payments}
cores=$(nproc)
# NODE_CORES of the machine's cores (default three quarters) run the node or the network, the
# rest the load generator.
node_cores=${NODE_CORES:-$((cores * 3 / 4))}
node_cpus="0-$((node_cores - 1))"
loadgen_cpus="$node_cores-$((cores - 1))"
node_threads=$node_cores
mkdir -p "$out"
{
  echo "date_utc $(date -u '+%F %H:%M:%S')"
  echo "commit ${COMMIT:-unknown}"
  echo "cores $cores node_cpus $node_cpus loadgen_cpus $loadgen_cpus"
  uname -a
  grep -m1 'model name' /proc/cpuinfo
  free -g | head -2
} >"$out/machine.txt"

for part in $parts; do
  started=$(date +%s)
  case $part in
    replay)
      python3 scripts/bench_scaling.py --walras "$walras" --threads "${REPLAY_THREADS:-1,2,4,8,16}" \
        --runs 1 --accounts 200000 --blocks "${REPLAY_BLOCKS:-4}" --txs-per-block 100000 \
        --node-threads none --json "$out/replay.json" >"$out/replay.txt" 2>"$out/replay.log"
      ;;
    node)
      MODE=node ACCOUNTS=${NODE_ACCOUNTS:-20000} WALRAS=$walras THREADS=$node_threads NODE_CPUS=$node_cpus \
        LOADGEN_CPUS=$loadgen_cpus scripts/bench-overload.sh "${NODE_SECONDS:-5}" 1 \
        "${NODE_CAPACITY:-100000}" ${NODE_FACTORS:-0.5 1 1.5 3 10} >"$out/node.txt" 2>"$out/node.log"
      ;;
    localnet)
      # LOCALNET_BINARIES: the binaries to compare, alternating per factor (default WALRAS).
      for factor in ${LOCALNET_FACTORS:-0.25 1 3}; do
        for binary in ${LOCALNET_BINARIES:-$walras}; do
          echo "# binary $binary"
          MODE=localnet ACCOUNTS=20000 WALRAS=$(realpath "$binary") \
            THREADS=$(( node_threads >= 8 ? node_threads / 4 : 1 )) NODE_CPUS=$node_cpus \
            LOADGEN_CPUS=$loadgen_cpus scripts/bench-overload.sh "${LOCALNET_SECONDS:-8}" 1 \
            "${LOCALNET_CAPACITY:-20000}" "$factor"
        done
      done >"$out/localnet.txt" 2>"$out/localnet.log"
      ;;
    persist)
      for round in $(seq "${PERSIST_ROUNDS:-2}"); do
        for store in "${TMPDIR:-/tmp}" /dev/shm; do
          echo "# round $round, store under $store"
          TMPDIR=$store MODE=node ACCOUNTS=${NODE_ACCOUNTS:-20000} WALRAS=$walras THREADS=$node_threads \
            NODE_CPUS=$node_cpus LOADGEN_CPUS=$loadgen_cpus scripts/bench-overload.sh \
            "${NODE_SECONDS:-5}" 1 "${NODE_CAPACITY:-100000}" 1.5
        done
      done >"$out/persist.txt" 2>"$out/persist.log"
      ;;
    clearing)
      example=$(realpath "${CLEARING_EXAMPLE:?set CLEARING_EXAMPLE to the settle_threads binary}")
      for offers in 100000 500000; do
        "$example" 50 "$offers" 1,2,4,8,16
      done >"$out/clearing.txt" 2>"$out/clearing.log"
      ;;
    payments)
      for rate in ${PAYMENTS_RATES:-5000 20000 100000 400000}; do
        echo "# walras payments bench --validators 4 --shards 8 --scheme merkle --rate $rate --seconds 5 --json"
        timeout 60 "$walras" payments bench --validators 4 --shards 8 --scheme merkle --rate "$rate" \
          --seconds 5 --json 2>>"$out/payments.log" || echo "exit $?"
      done >"$out/payments.txt"
      ;;
  esac
  echo "$part $(( $(date +%s) - started )) s" >>"$out/machine.txt"
done

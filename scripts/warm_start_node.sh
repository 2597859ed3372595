#!/bin/bash
# Warm-start starts measured in the node: same dev genesis, same seeded trading load, one run per start.
set -u
W=$(realpath "${WALRAS:-./target/release/walras}")
mkdir -p "${DIR:-/tmp/walras-warm-start}" && cd "${DIR:-/tmp/walras-warm-start}"
[ -f feed.jsonl ] || $W gen feed --venues 5 --assets 4 --seconds 60 --seed 1 --faults 0.01 --out feed.jsonl
for start in fit previous oracle; do
  rm -rf data-$start
  $W node --data data-$start --listen 127.0.0.1:18480 --dev --dev-assets 4 --oracle-feed feed.jsonl --warm-start $start --block-interval-ms 250 > node-$start.out 2> node-$start.err &
  NODE=$!
  sleep 3
  $W loadgen --node http://127.0.0.1:18480 --rate 400 --seconds 20 --mix trading --seed 7 > load-$start.out 2>&1
  sleep 1
  curl -s http://127.0.0.1:18480/metrics > metrics-$start.txt
  kill -TERM $NODE; wait $NODE
  echo "== $start (load avg $(cut -d' ' -f1 /proc/loadavg))"
  grep -E "^walras_(clearing_blocks_total|clearing_converged_total|clearing_iterations_total|clearing_seconds_total|warm_start_total|blocks_total)" metrics-$start.txt
done

#!/usr/bin/env bash
# The fair-access gateway under attack for SECONDS (default 600): a `walras node --block-source
# gateway` (rate limit 50/s per client), a `walras gateway` process, three honest participants
# (one payment per block each) and a hostile one (trades stamped 10^15 blocks ahead, copies and
# replays, unknown accounts, more valid trades than its share), while a local client bursts 500
# requests at the node every half second. It is the test
# `honest_participants_get_every_trade_into_blocks_beside_a_hostile_one` of
# crates/cli/tests/gateway_soak.rs run longer; it fails unless every honest trade committed,
# blocks kept coming (no gap of 3 s) and the gateway kept running, and prints the figures:
# blocks, honest trades sent and committed, the hostile's refusals by reason, node 429s,
# the gateway's RSS at start, at most and at end.
# Usage: scripts/gateway-soak.sh [SECONDS]   (CARGO_TARGET_DIR is honoured)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD): scripts/gateway-soak.sh $seconds"
WALRAS_GATEWAY_SOAK_SECS="$seconds" cargo test -p walras-cli --test gateway_soak -- \
  --exact honest_participants_get_every_trade_into_blocks_beside_a_hostile_one --nocapture 2>&1 \
  | grep -E '^gateway soak:|^test |panicked|test result'

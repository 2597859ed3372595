#!/usr/bin/env bash
# A 4-validator localnet driven past capacity, per binary given (alternating, ROUNDS rounds):
# goodput, p50, and the CPU time per committed transaction of all walras and all cometbft
# processes together, sampled from /proc over the load window (after pre-signing). For A/B
# comparisons of what a network spends per transaction, which on a small machine moves less
# with the machine's speed than goodput does.
# Usage: [RATE=6000] [ROUNDS=3] [COMETBFT=path] scripts/localnet-cpu.sh WALRAS_BINARY...
set -uo pipefail
cometbft=${COMETBFT:-$(command -v cometbft || echo "$HOME/go/bin/cometbft")}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() { # binary
  local W=$1; rm -rf $dir/net
  $W localnet --validators 4 --dir $dir/net --cometbft-bin $cometbft --dev-accounts 20000 --timeout-commit-ms 200 > $dir/log 2>&1
  local url=$(python3 -c "import json; print(json.load(open('$dir/net/localnet.json'))['nodes'][0]['api'])")
  local pids=$(pgrep -f "$dir/net")
  for p in $pids; do echo "$p $(cat /proc/$p/comm)"; done > $dir/pids
  snap() { for p in $pids; do echo "$p $(awk '{print $14+$15}' /proc/$p/stat)"; done; }
  $W loadgen --node $url --rate ${RATE:-6000} --seconds 15 --accounts 10000 --presign --json 2>/dev/null > $dir/report.json &
  local lg=$!
  # The clock starts after pre-signing: sample CPU over the load window only.
  sleep 1; while ! ss -tn state established 2>/dev/null | grep -q ":${url##*:}"; do sleep 0.2; done
  snap > $dir/cpu.a; wait $lg; snap > $dir/cpu.b
  python3 - "$W" "$dir" "$(getconf CLK_TCK)" <<'PY'
import json, sys
binary, out, ticks = sys.argv[1], sys.argv[2], int(sys.argv[3])
r=json.load(open(f'{out}/report.json'))
a=dict(l.split() for l in open(f'{out}/cpu.a')); b=dict(l.split() for l in open(f'{out}/cpu.b'))
names=dict(l.split(' ',1) for l in open(f'{out}/pids').read().strip().split('\n'))
tot={'walras':0.0,'cometbft':0.0}
for p in a:
    d=(int(b[p])-int(a[p]))/ticks
    tot['cometbft' if 'cometbft' in names[p] else 'walras']+=d
c=r['committed']
print(binary.split('/')[-1], 'goodput', round(r['goodput_tx_per_s']), 'p50', round(r['latency']['p50_ms']), 'committed', c,
      'walras_us_per_tx', round(tot['walras']/c*1e6), 'cometbft_us_per_tx', round(tot['cometbft']/c*1e6))
PY
  $W localnet down --dir $dir/net >/dev/null 2>&1
}
for r in $(seq ${ROUNDS:-3}); do for b in "$@"; do run $b; done; done

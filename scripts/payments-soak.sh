#!/usr/bin/env bash
# Payments soak (issue 26 acceptance): a 4-validator `walras payments localnet` under payment
# load from concurrent `walras payments pay` commands, validators killed with SIGKILL at random
# (KILLS kills in all; most rounds one validator down, f = 1, so payments go on; every fourth
# round two down, so payments fail for lack of quorum and stay pending until a later command
# resends them), each round restarted with `localnet --dir` alone. Then every wallet pays every
# other one 1 with all validators up (resending what is pending, delivering what is kept), and
# the checks: nothing pending or undelivered, the coins of all wallet files add up exactly to
# genesis, and no input was spent by two certified payments (the payers' histories list each
# sent payment's inputs). Exits non-zero if a check fails. Everything stays on 127.0.0.1.
#
# Usage: [KILLS=20] [WALLETS=6] [WORKERS=3] [SEED=n] [KEEP=1] [WALRAS=path/to/walras] scripts/payments-soak.sh
# KEEP=1 keeps the work directory (localnet, wallets, every command's output).
# WALRAS skips the build and uses that binary (it needs the dev tools: default features).
set -euo pipefail
cd "$(dirname "$0")/.."
kills=${KILLS:-20}
wallets=${WALLETS:-6}
workers=${WORKERS:-3}
RANDOM=${SEED:-$$}
if [ -z "${WALRAS:-}" ]; then
  cargo build -p walras-cli >&2
  WALRAS="${CARGO_TARGET_DIR:-target}/debug/walras"
fi
work=$(mktemp -d)
dir=$work/net
cleanup() {
  touch "$work/stop"
  wait 2>/dev/null || true
  "$WALRAS" payments localnet down --dir "$dir" >/dev/null 2>&1 || true
  if [ -n "${KEEP:-}" ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
coins=4
amount=1000
"$WALRAS" payments localnet --validators 4 --dir "$dir" --wallets "$wallets" --coins "$coins" \
  --amount "$amount" >/dev/null
genesis=$((wallets * coins * amount))
wallet() { echo "$dir/wallets/wallet$1.json"; }

# One load worker: random payer, payee and amount, until told to stop; counts outcomes.
worker() {
  local id=$1 ok=0 failed=0
  while [ ! -e "$work/stop" ]; do
    local payer=$((RANDOM % wallets)) payee=$(((RANDOM % (wallets - 1) + 1)))
    payee=$(((payer + payee) % wallets))
    if timeout 120 "$WALRAS" payments pay --wallet "$(wallet $payer)" --committee "$dir/committee.json" \
      --to "$(wallet $payee)" --amount $((RANDOM % 50 + 1)) >>"$work/pay$id.log" 2>&1; then
      ok=$((ok + 1))
    else
      failed=$((failed + 1))
    fi
    echo "$ok $failed" >"$work/count$id"
  done
}
for id in $(seq 1 "$workers"); do worker "$id" & done

killed=0 round=0 double_rounds=0 restart_failures=0
while [ "$killed" -lt "$kills" ]; do
  round=$((round + 1))
  sleep "0.$((RANDOM % 9 + 1))"
  victims=$((RANDOM % 4))
  if [ $((round % 4)) -eq 0 ] && [ $((killed + 2)) -le "$kills" ]; then
    victims="$victims $(((victims + RANDOM % 3 + 1) % 4))"
    double_rounds=$((double_rounds + 1))
  fi
  for victim in $victims; do
    kill -KILL "$(cat "$dir/validator$victim/pid")" 2>/dev/null || true
    killed=$((killed + 1))
  done
  sleep "1.$((RANDOM % 9))"
  date +%s.%N >>"$work/restart.log"
  if ! "$WALRAS" payments localnet --dir "$dir" >>"$work/restart.log" 2>&1; then
    restart_failures=$((restart_failures + 1))
    "$WALRAS" payments localnet --dir "$dir" >>"$work/restart.log" 2>&1
  fi
done
touch "$work/stop"
wait
ok=0 failed=0
for id in $(seq 1 "$workers"); do
  read -r a b <"$work/count$id" || true
  ok=$((ok + ${a:-0})) failed=$((failed + ${b:-0}))
done
pending_before=$(python3 -c 'import json,sys; print(sum(len(json.load(open(p)).get("pending", [])) for p in sys.argv[1:]))' "$dir"/wallets/*.json)

# Settle with all validators up: each wallet pays every other one 1.
"$WALRAS" payments localnet --dir "$dir" >/dev/null
settled=0
for payer in $(seq 0 $((wallets - 1))); do
  for payee in $(seq 0 $((wallets - 1))); do
    [ "$payer" = "$payee" ] && continue
    "$WALRAS" payments pay --wallet "$(wallet "$payer")" --committee "$dir/committee.json" \
      --to "$(wallet "$payee")" --amount 1 >>"$work/settle.log" 2>&1 && settled=$((settled + 1))
  done
done

echo "kills $killed (rounds $round, $double_rounds with two validators down), restarts that failed once: $restart_failures"
echo "load payments: $ok certified, $failed failed (no quorum while two were down, or waited for a busy wallet)"
echo "pending after the load (resent by the settling round): $pending_before"
echo "settling payments: $settled of $((wallets * (wallets - 1))) certified"
python3 - "$dir/wallets" "$genesis" "$ok" "$settled" <<'PY'
import json, os, sys
folder, genesis, load_ok, settled = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
total, pending, undelivered, spent, conflicts, payments = 0, 0, 0, {}, 0, set()
for name in sorted(os.listdir(folder)):
    if not name.endswith(".json"):
        continue
    wallet = json.load(open(os.path.join(folder, name)))
    total += sum(int(coin["amount"]) for coin in wallet["coins"])
    pending += len(wallet.get("pending", []))
    undelivered += len(wallet.get("undelivered", []))
    for entry in wallet.get("history", []):
        if entry["direction"] != "sent":
            continue
        payments.add(entry["payment"])
        for coin in entry.get("inputs", []):
            if spent.setdefault(coin, entry["payment"]) != entry["payment"]:
                conflicts += 1
print(f"wallets hold {total} of genesis {genesis}; pending {pending}, undelivered {undelivered}; "
      f"{len(payments)} certified payments in the histories, {len(spent)} inputs spent, "
      f"{conflicts} inputs certified in two payments")
print(f"payments that failed, stayed pending and certified when resent later: "
      f"{len(payments) - load_ok - settled}")
ok = total == genesis and pending == 0 and undelivered == 0 and conflicts == 0
print("soak: " + ("OK" if ok else "FAILED"))
sys.exit(0 if ok else 1)
PY

#!/usr/bin/env python3
"""The scaling table of issue 27 in one command: `walras replay` per thread count (with and
without signature checks, per phase), a solo node over HTTP per thread count, and optionally a
4-validator localnet, printed as a table and written as JSON.

Usage (from the repository root; builds the release binary unless --walras is given):

    scripts/bench_scaling.py                       # threads 1,2,4,... up to this machine's cores
    scripts/bench_scaling.py --threads 1,2 --runs 3 --json /tmp/scaling.json
    scripts/bench_scaling.py --localnet-rates 5000,20000

What each figure is:
- replay: `walras gen workload --no-faults` once (the trading mix of SPEEDEX §7, every
  transaction valid, as the node's load is; `--faults` injects the generator's ~1% invalid
  ones, whose failed signature batches cost extra), then `walras replay DIR
  --threads T --json [--no-verify-signatures]`, RUNS runs each, alternating; the figure is the
  median over runs of `steady_tx_per_s_median` (blocks after the first), the phases the median
  over runs of each phase's median over blocks after the first (ms per block: signatures,
  filter, plan, clearing, apply, commit);
- node: a fresh `walras node --dev --threads T` per run, driven by `walras loadgen --presign`
  (signed before the clock starts, so the generator is not what limits) at NODE_FACTOR times
  the replay rate with signatures at that thread count (a rate above saturation: what is
  committed is the node's capacity); committed tx/s, p50/p99 of what committed, and the ratio
  to replay with signatures at the same thread count (the issue's 80% bar on 2 cores);
- localnet: `walras localnet --validators 4 --threads T`, loadgen against node 0, per offered
  rate.

Nothing here is timed against a bar: it prints what it measured and the exact commands. Only
the Python standard library is used.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PHASES = ["signatures", "filter", "plan", "clearing", "apply", "commit"]
ROOT = Path(__file__).resolve().parent.parent


def log(message):
    print(message, file=sys.stderr, flush=True)


def run(command, **kwargs):
    """Runs a command, echoing it, and returns its stdout; a failure stops the benchmark."""
    log("$ " + " ".join(str(part) for part in command))
    result = subprocess.run(
        [str(part) for part in command], stdout=subprocess.PIPE, text=True, **kwargs
    )
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(map(str, command))}")
    return result.stdout


def thread_list(text):
    if text:
        return [int(part) for part in text.split(",")]
    cores, threads, count = os.cpu_count() or 1, [], 1
    while count < cores:
        threads.append(count)
        count *= 2
    return threads + [cores]


def replay_row(walras, workload, threads, verify, runs):
    reports = []
    for _ in range(runs):
        command = [walras, "replay", workload, "--threads", threads, "--json"]
        if not verify:
            command.append("--no-verify-signatures")
        reports.append(json.loads(run(command, stderr=subprocess.DEVNULL)))
    steady = [report["steady_tx_per_s_median"] for report in reports]
    phases = {}
    for index, name in enumerate(PHASES):
        per_run = [
            statistics.median(block["phases_millis"][index] for block in report["per_block"][1:])
            for report in reports
            if len(report["per_block"]) > 1
        ]
        phases[name] = statistics.median(per_run) if per_run else None
    roots = sorted({report["state_root"] for report in reports})
    return {
        "threads": threads,
        "verify_signatures": verify,
        "tx_per_s_runs": steady,
        "tx_per_s": statistics.median(steady),
        "phases_ms_per_block": phases,
        "state_roots": roots,
    }


def start_node(walras, data, threads, accounts):
    log_path = data / "log"
    process = subprocess.Popen(
        [str(walras), "node", "--data", str(data / "node"), "--listen", "127.0.0.1:0", "--dev",
         "--dev-accounts", str(accounts), "--rate-limit-rps", "0", "--threads", str(threads)],
        stdout=open(log_path, "w"), stderr=subprocess.DEVNULL,
    )
    for _ in range(300):
        for line in log_path.read_text().splitlines():
            if line.startswith("walras node listening on "):
                return process, line.removeprefix("walras node listening on ").strip()
        if process.poll() is not None:
            sys.exit(f"the node exited ({process.returncode}); see {log_path}")
        time.sleep(0.1)
    process.kill()
    sys.exit("the node did not start listening within 30 s")


def loadgen(walras, url, rate, seconds, accounts, seed):
    presign = int(rate * seconds) + 8 * accounts
    report = json.loads(run(
        [walras, "loadgen", "--node", url, "--rate", int(rate), "--seconds", seconds,
         "--accounts", accounts, "--seed", seed, "--presign", "--presign-count", presign,
         "--json"],
        stderr=subprocess.DEVNULL,
    ))
    latency = report["latency"]
    return {
        "offered_tx_per_s": report["offered_tx_per_s"],
        "committed_tx_per_s": report["committed_tx_per_s"],
        "p50_ms": latency["p50_ms"],
        "p99_ms": latency["p99_ms"],
        "refused": report["rejected_by_reason"],
    }


def node_row(walras, threads, rate, args):
    runs = []
    for run_index in range(args.runs):
        data = Path(tempfile.mkdtemp(prefix="walras-scaling-"))
        process, url = start_node(walras, data, threads, args.node_accounts)
        try:
            runs.append(loadgen(walras, url, rate, args.seconds, args.node_accounts // 2,
                                run_index + 1))
        finally:
            process.terminate()
            process.wait()
            shutil.rmtree(data, ignore_errors=True)
    committed = [r["committed_tx_per_s"] for r in runs]
    best = max(runs, key=lambda r: r["committed_tx_per_s"])
    return {"threads": threads, "offered_tx_per_s": rate, "committed_tx_per_s_runs": committed,
            "committed_tx_per_s": statistics.median(committed), "p50_ms": best["p50_ms"],
            "p99_ms": best["p99_ms"], "runs": runs}


def localnet_row(walras, threads, rate, args):
    cometbft = run([ROOT / "scripts" / "install-cometbft.sh"]).strip()
    net = Path(tempfile.mkdtemp(prefix="walras-scaling-net-"))
    run([walras, "localnet", "--validators", 4, "--dir", net / "net", "--cometbft-bin", cometbft,
         "--dev-accounts", args.node_accounts, "--threads", threads], stderr=subprocess.DEVNULL)
    try:
        url = json.loads((net / "net" / "localnet.json").read_text())["nodes"][0]["api"]
        result = loadgen(walras, url, rate, args.seconds, args.node_accounts // 2, 1)
    finally:
        subprocess.run([str(walras), "localnet", "down", "--dir", str(net / "net")],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(net, ignore_errors=True)
    return {"threads": threads, **result}


def fmt(value, digits=0):
    return "-" if value is None else f"{value:,.{digits}f}"


def print_tables(result):
    replay = result["replay"]
    for verify in (True, False):
        rows = [row for row in replay if row["verify_signatures"] == verify]
        if not rows:
            continue
        base = rows[0]["tx_per_s"]
        print(f"\nwalras replay, signatures {'checked' if verify else 'not checked'}"
              f" ({result['workload_command']})")
        print(f"{'threads':>7} {'tx/s':>10} {'speedup':>8}  " +
              " ".join(f"{name:>10}" for name in PHASES) + "   (ms per block)")
        for row in rows:
            phases = " ".join(f"{fmt(row['phases_ms_per_block'][n], 1):>10}" for n in PHASES)
            print(f"{row['threads']:>7} {fmt(row['tx_per_s']):>10} "
                  f"{row['tx_per_s'] / base:>7.2f}x  {phases}")
    if result["node"]:
        print("\nsolo node over HTTP (walras loadgen --presign, trading mix)")
        print(f"{'threads':>7} {'offered':>10} {'committed':>10} {'p50 ms':>8} {'p99 ms':>8}"
              f" {'of replay':>10}")
        for row in result["node"]:
            print(f"{row['threads']:>7} {fmt(row['offered_tx_per_s']):>10} "
                  f"{fmt(row['committed_tx_per_s']):>10} {fmt(row['p50_ms']):>8} "
                  f"{fmt(row['p99_ms']):>8} {row['of_replay_with_signatures']:>9.0%}")
    if result["localnet"]:
        print("\n4-validator localnet (CometBFT), loadgen against node 0")
        print(f"{'threads':>7} {'offered':>10} {'committed':>10} {'p50 ms':>8} {'p99 ms':>8}")
        for row in result["localnet"]:
            print(f"{row['threads']:>7} {fmt(row['offered_tx_per_s']):>10} "
                  f"{fmt(row['committed_tx_per_s']):>10} {fmt(row['p50_ms']):>8} "
                  f"{fmt(row['p99_ms']):>8}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--walras", help="binary to measure (default: build the release one)")
    parser.add_argument("--threads", help="comma-separated (default: 1,2,4,... and all cores)")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--accounts", type=int, default=200_000)
    parser.add_argument("--assets", type=int, default=50)
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--txs-per-block", type=int, default=100_000)
    parser.add_argument("--faults", action="store_true",
                        help="let the workload inject its ~1%% invalid transactions")
    parser.add_argument("--no-replay-without-signatures", action="store_true")
    parser.add_argument("--node-threads", help="comma-separated (default: the replay's; "
                        "'none' skips the node)")
    parser.add_argument("--node-factor", type=float, default=1.5,
                        help="offered = this x replay's rate with signatures (default 1.5)")
    parser.add_argument("--node-accounts", type=int, default=20_000)
    parser.add_argument("--seconds", type=int, default=10, help="per node/localnet run")
    parser.add_argument("--localnet-rates", help="comma-separated offered rates (default: skip)")
    parser.add_argument("--json", help="write the whole result here")
    args = parser.parse_args()

    walras = args.walras
    if walras is None:
        run(["cargo", "build", "--release", "-p", "walras-cli"], cwd=ROOT)
        target = os.environ.get("CARGO_TARGET_DIR", ROOT / "target")
        walras = str(Path(target) / "release" / "walras")
    threads = thread_list(args.threads)
    workload = Path(tempfile.mkdtemp(prefix="walras-scaling-wl-")) / "wl"
    workload_args = ["--accounts", args.accounts, "--assets", args.assets, "--blocks",
                     args.blocks, "--txs-per-block", args.txs_per_block, "--seed", 1]
    if not args.faults:
        workload_args.append("--no-faults")
    run([walras, "gen", "workload", *workload_args, "--out", workload],
        stderr=subprocess.DEVNULL)
    result = {
        "machine": {"cores": os.cpu_count(), "uname": " ".join(os.uname())},
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "walras": walras,
        "workload_command": "walras gen workload " + " ".join(map(str, workload_args)),
        "replay": [], "node": [], "localnet": [],
    }
    modes = [True] if args.no_replay_without_signatures else [True, False]
    for verify in modes:
        for count in threads:
            result["replay"].append(replay_row(walras, workload, count, verify, args.runs))
    replay_rate = {row["threads"]: row["tx_per_s"] for row in result["replay"]
                   if row["verify_signatures"]}
    node_threads = [] if args.node_threads == "none" else thread_list(args.node_threads or
                                                                     ",".join(map(str, threads)))
    for count in node_threads:
        reference = replay_rate.get(count) or max(replay_rate.values())
        row = node_row(walras, count, reference * args.node_factor, args)
        row["of_replay_with_signatures"] = row["committed_tx_per_s"] / reference
        result["node"].append(row)
    if args.localnet_rates:
        for rate in (int(part) for part in args.localnet_rates.split(",")):
            result["localnet"].append(localnet_row(walras, max(1, threads[-1] // 4), rate, args))
    shutil.rmtree(workload.parent, ignore_errors=True)
    print_tables(result)
    print("\ncommand: " + " ".join(sys.argv))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
        print(f"JSON: {args.json}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Two (or more) `walras` binaries side by side on one workload: `walras replay` without
signature checks at 1 and 2 threads (or --threads), runs alternating between the binaries so
each sees the same machine, per-phase medians printed per binary and thread count.

Usage (from the repository root):

    walras gen workload --accounts 20000 --assets 10 --blocks 4 --txs-per-block 200000 \\
        --seed 1 --no-faults --out /tmp/wl200
    scripts/replay_ab.py --runs 5 /tmp/wl200 /tmp/walras-before /tmp/walras-after

Per run: `walras replay DIR --threads T --no-verify-signatures --json`; the figure is the
median over runs of `steady_tx_per_s_median` (blocks after the first), each phase the median
over runs of its median over blocks after the first (ms per block). The state root of each
binary's first run is printed: binaries that disagree on it are not comparable.
"""

import argparse
import json
import statistics
import subprocess

PHASES = ["signatures", "filter", "plan", "clearing", "apply", "commit"]


def run_once(binary, workload, threads):
    command = [binary, "replay", workload, "--threads", str(threads),
               "--no-verify-signatures", "--json"]
    report = json.loads(subprocess.run(command, capture_output=True, text=True,
                                       check=True).stdout)
    steady = report["per_block"][1:] or report["per_block"]
    phases = [statistics.median(block["phases_millis"][i] for block in steady)
              for i in range(len(PHASES))]
    return report["steady_tx_per_s_median"], phases, report["state_root"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload")
    parser.add_argument("binaries", nargs="+")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    results = {}
    for _ in range(args.runs):
        for count in threads:
            for binary in args.binaries:
                results.setdefault((binary, count), []).append(
                    run_once(binary, args.workload, count))
    for binary in args.binaries:
        for count in threads:
            rows = results[(binary, count)]
            rate = statistics.median(row[0] for row in rows)
            phases = [statistics.median(row[1][i] for row in rows) for i in range(len(PHASES))]
            runs = ", ".join(f"{row[0]:,.0f}" for row in rows)
            phase_text = " ".join(f"{name} {value:.1f}" for name, value in zip(PHASES, phases))
            print(f"{binary} threads {count}: tx/s median {rate:,.0f} (runs {runs}) | "
                  f"{phase_text} ms | root {rows[0][2][:16]}")
    print("command: scripts/replay_ab.py --runs", args.runs, "--threads", args.threads,
          args.workload, " ".join(args.binaries))


if __name__ == "__main__":
    main()

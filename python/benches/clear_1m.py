"""walras.clear against `walras clear` on the same batch (BENCHMARKS.md, "The Python package").

    python benches/clear_1m.py --walras ../target/release/walras --offers 1000000 --runs 5

Generates the batch with the CLI (`walras gen offers --model cycles --assets 50`), then
alternates runs of `walras clear --json` (its `millis`, `prepare_millis`, `read_millis`) and of
`walras.clear` on the CSV path, on a DataFrame of exact decimal strings and on a DataFrame of
float64 limits (`millis`, `prepare_millis`, the conversion, the whole call's wall time). Checks
that every run gives the CLI's prices, and prints medians as one JSON object.
`overhead_millis` is a call's wall time less its conversion, reading, books and `millis`.
"""

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd

import walras


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--walras", required=True, help="the walras binary (a release build)")
    parser.add_argument("--offers", type=int, default=1_000_000)
    parser.add_argument("--assets", type=int, default=50)
    parser.add_argument("--model", default="cycles")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="walras-bench-"))
    path = folder / "offers.csv"
    with path.open("w") as out:
        subprocess.run(
            [
                args.walras,
                "gen",
                "offers",
                "--assets",
                str(args.assets),
                "--offers",
                str(args.offers),
                "--seed",
                "1",
                "--model",
                args.model,
            ],
            stdout=out,
            check=True,
        )
    exact = pd.read_csv(path, dtype={"min_price": str})
    floats = walras.gen_offers(args.assets, args.offers, seed=1, model=args.model)

    runs = {"cli": [], "csv": [], "exact": [], "floats": []}
    reference = None
    for _ in range(args.runs):
        done = subprocess.run(
            [args.walras, "clear", "--offers", str(path), "--assets", str(args.assets), "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        cli = json.loads(done.stdout)
        reference = cli["prices"]
        runs["cli"].append(
            {
                "millis": cli["millis"],
                "prepare_millis": cli["prepare_millis"],
                "read_millis": cli["read_millis"],
            }
        )
        for name, offers in (("csv", path), ("exact", exact), ("floats", floats)):
            started = time.perf_counter()
            result = walras.clear(offers, args.assets)
            wall = (time.perf_counter() - started) * 1e3
            if name != "floats":
                assert result.prices.tolist() == reference, name
            runs[name].append(
                {
                    "millis": result.millis,
                    "prepare_millis": result.prepare_millis,
                    "convert_millis": result.convert_millis,
                    "read_millis": result.report["read_millis"],
                    "wall_millis": wall,
                    # What the call spends beyond the CLI's own phases: argument checks,
                    # building the result (fills DataFrame, trades), crossing the boundary.
                    "overhead_millis": wall
                    - result.convert_millis
                    - result.report["read_millis"]
                    - result.prepare_millis
                    - result.millis,
                }
            )
    medians = {
        name: {key: round(statistics.median(run[key] for run in rows), 1) for key in rows[0]}
        for name, rows in runs.items()
    }
    print(
        json.dumps(
            {
                "offers": args.offers,
                "assets": args.assets,
                "model": args.model,
                "runs": args.runs,
                "median": medians,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

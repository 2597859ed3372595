#!/usr/bin/env python3
"""Convergence sweep over the `market` class (issue 10): draws N instances (asset count, size,
spread, pair choice, valuation span, seed) from a seeded random stream, generates each with
`walras gen offers --model market`, clears it with `walras clear --json` and counts the
instances that did not converge.

    python3 scripts/clearing_sweep.py --class thin --seed 23 --count 100
    python3 scripts/clearing_sweep.py --class all --seed 5 --count 100

`thin`: 10-100 assets, 1k-10k offers, power-law pairs twice as likely (most pairs empty or
holding one offer). `all`: 2-100 assets, 1k-50k offers. Uses ./target/release/walras unless
--walras names another binary. Prints one line per failure and the totals.
"""
import argparse, json, os, random, subprocess, sys, tempfile

def draw(rng, kind):
    if kind == "thin":
        assets = rng.choice([10, 20, 27, 40, 50, 75, 100])
        offers = rng.choice([1000, 2000, 3000, 5000, 7000, 10000])
        spread = rng.choice(["0.05%", "0.1%", "0.5%", "1%", "2%"])
        pairs = rng.choice(["uniform", "power-law", "power-law"])
    else:
        assets = rng.choice([2, 3, 5, 10, 20, 27, 40, 50, 75, 100])
        offers = rng.choice([1000, 2000, 5000, 10000, 20000, 50000])
        spread = rng.choice(["0.05%", "0.1%", "0.3%", "0.5%", "1%", "2%"])
        pairs = rng.choice(["uniform", "power-law"])
    return assets, offers, spread, pairs, rng.randint(0, 6), rng.randrange(1 << 63)

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--class", dest="kind", choices=["thin", "all"], default="thin")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--walras", default="./target/release/walras")
    args = parser.parse_args()
    print("# command: " + " ".join(sys.argv), flush=True)
    rng = random.Random(args.seed)
    failures, millis = 0, []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "offers.csv")
        for _ in range(args.count):
            assets, offers, spread, pairs, decades, seed = draw(rng, args.kind)
            with open(path, "w") as out:
                subprocess.run([args.walras, "gen", "offers", "--assets", str(assets),
                                "--offers", str(offers), "--seed", str(seed), "--model", "market",
                                "--spread", spread, "--pairs", pairs,
                                "--valuation-decades", str(decades)], stdout=out, check=True)
            result = subprocess.run([args.walras, "clear", "--offers", path, "--assets",
                                     str(assets), "--json"], capture_output=True, text=True,
                                    check=True)
            report = json.loads(result.stdout)
            millis.append(report["millis"])
            if not report["converged"]:
                failures += 1
                print(f"not converged: --assets {assets} --offers {offers} --seed {seed} "
                      f"--spread {spread} --pairs {pairs} --valuation-decades {decades} "
                      f"(iterations {report['iterations']}, cut steps {report['cut_steps']}, "
                      f"unrealized {report['unrealized_utility_ratio']:.4f})", flush=True)
    millis.sort()
    print(f"{failures} of {args.count} not converged; millis median {millis[len(millis) // 2]:.1f}, "
          f"max {millis[-1]:.1f}")
    return 1 if failures else 0

if __name__ == "__main__":
    sys.exit(main())

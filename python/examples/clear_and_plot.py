"""Clear a generated market in-process and plot it: the clearing valuations against the
generator's "true" ones, the depth of one pair with its clearing rate, and the fills.

    python examples/clear_and_plot.py --out market.png

Writes a PNG (matplotlib's Agg backend: no display needed) and prints a summary line.
"""

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import walras  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assets", type=int, default=6)
    parser.add_argument("--offers", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="walras_market.png")
    args = parser.parse_args()

    offers = walras.gen_offers(args.assets, args.offers, seed=args.seed, model="market")
    result = walras.clear(offers, args.assets)
    print(
        f"{args.offers} offers over {args.assets} assets: converged={result.converged} "
        f"after {result.iterations} iterations in {result.millis:.1f} ms; "
        f"{len(result.fills)} offers traded"
    )

    figure, (values, depth, fills) = plt.subplots(1, 3, figsize=(15, 4.5))
    plot_valuations(values, result, offers.attrs["valuations"])
    plot_depth(depth, offers, result, sell=0, buy=1)
    plot_fills(fills, offers, result)
    figure.tight_layout()
    figure.savefig(args.out, dpi=80)
    print(f"wrote {args.out}")


def plot_valuations(axes, result: walras.ClearResult, model: np.ndarray) -> None:
    """Clearing prices next to the generator's valuations, both relative to the largest."""
    assets = np.arange(len(result.prices))
    axes.bar(assets - 0.2, result.prices, width=0.4, label="clearing")
    axes.bar(assets + 0.2, model / model.max(), width=0.4, label="model")
    axes.set_xticks(assets)
    axes.set_xlabel("asset")
    axes.set_ylabel("valuation (relative to the largest)")
    axes.set_yscale("log")
    axes.set_title("valuations")
    axes.legend()


def plot_depth(axes, offers, result: walras.ClearResult, sell: int, buy: int) -> None:
    """Cumulative amount offered by limit price in both directions of one pair."""
    rate = result.prices[sell] / result.prices[buy]
    asks = offers[(offers.sell == sell) & (offers.buy == buy)].sort_values("min_price")
    bids = offers[(offers.sell == buy) & (offers.buy == sell)].copy()
    # A bid sells `buy` for `sell`: its limit in units of `buy` per `sell` is the inverse.
    bids["limit"] = 1.0 / bids.min_price
    bids = bids.sort_values("limit", ascending=False)
    axes.step(asks.min_price, asks.amount.cumsum(), where="post", label=f"sell {sell} for {buy}")
    axes.step(
        bids.limit,
        (bids.amount / bids.limit).cumsum(),
        where="post",
        label=f"sell {buy} for {sell} (in {sell})",
    )
    axes.axvline(rate, color="black", linestyle="--", label=f"clearing rate {rate:.4g}")
    axes.set_xlabel(f"limit price ({buy} per {sell})")
    axes.set_ylabel("cumulative amount")
    axes.set_title(f"depth of pair {sell}/{buy}")
    axes.legend(fontsize="small")


def plot_fills(axes, offers, result: walras.ClearResult) -> None:
    """How much of each traded offer sold."""
    traded = result.fills.merge(offers, on="offer_id")
    share = traded.sold.astype(float) / traded.amount.astype(float)
    axes.hist(share, bins=20)
    axes.set_xlabel("share of the offer sold")
    axes.set_ylabel("offers")
    axes.set_title(f"fills ({len(traded)} of {len(offers)} offers traded)")


if __name__ == "__main__":
    main()

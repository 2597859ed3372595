"""A small market-making bot against a node (for example `walras demo`'s, or
`walras node --dev`): each round it quotes both directions of one pair around the last clearing
rate, waits for the next block, reads what traded, and cancels what did not.

    python examples/bot.py --node http://127.0.0.1:8080 --account 1 --rounds 3

Signs with the node's development key of the account (a node started with --dev); pass
--key FILE for a real key. Prints one line per round and a summary.
"""

import argparse

import walras


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node", default="http://127.0.0.1:8080")
    parser.add_argument("--account", type=int, default=1)
    parser.add_argument("--key", default="dev")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sell", type=int, default=0)
    parser.add_argument("--buy", type=int, default=1)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument(
        "--spread", type=float, default=0.01, help="each quote's distance from the rate"
    )
    args = parser.parse_args()

    client = walras.Client(args.node, key=args.key, account=args.account)
    traded = 0
    for round_number in range(1, args.rounds + 1):
        rate = last_rate(client, args.sell, args.buy)
        with client.events(timeout_s=30) as events:
            ask = client.submit_offer(args.sell, args.buy, args.size, rate * (1 + args.spread))
            bid = client.submit_offer(
                args.buy, args.sell, args.size, (1 / rate) * (1 + args.spread)
            )
            block = next(events)  # the block our quotes landed in (or a later one)
        heights = [client.wait(quote.hash)["height"] for quote in (ask, bid)]
        fills = [
            fill
            for height in sorted(set(heights))
            for fill in client.fills(height, account=args.account)["fills"]
        ]
        traded += len(fills)
        still_open = {offer["offer_id"] for offer in client.open_offers()["offers"]}
        for quote in (ask, bid):
            if quote["offer_id"] in still_open:
                try:
                    client.cancel_offer(quote["offer_id"], wait=True)
                except walras.ApiError as error:
                    if error.code != "unknown_offer":  # it traded meanwhile
                        raise
        print(
            f"round {round_number}: rate {rate:.6g}, quotes in block {max(heights)} "
            f"(event for block {block['height']}), {len(fills)} fills"
        )
    print(f"bot done: {args.rounds} rounds, {traded} fills")


def last_rate(client: walras.Client, sell: int, buy: int) -> float:
    """Units of `buy` per unit of `sell`: the pair's last clearing rate, else the ratio of the
    assets' reference prices (in units of asset 0), else 1.0 before anything traded."""
    reference = client.prices().get("reference") or {}
    for pair in reference.get("pairs", []):
        if (pair["sell"], pair["buy"]) == (sell, buy) and pair.get("rate"):
            return float(pair["rate"])
    prices = {entry["asset"]: entry["price"] for entry in reference.get("assets", [])}
    if prices.get(sell) and prices.get(buy):
        return float(prices[sell]) / float(prices[buy])
    return 1.0


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Counts the offers a running node holds at or below their pair's last traded rate (issue 32).

Such offers are what every block's settlement walks. Before the rest rule (docs/prices.md) the
rests of 1-2 units that near-limit fills leave piled up among them. Reads `/v1/prices` (each
pair's last traded rate) and `/v1/books/{sell}/{buy}?levels=1000` of every pair that traded,
and prints one JSON object: pairs, offers in the money, those in levels holding at most 2
units per offer, and the first 5 levels of the first pair's book.

Usage: scripts/in_the_money.py URL   (e.g. http://127.0.0.1:8080; a node started on a soak's
store with DATA=..., see scripts/soak.sh). Levels beyond the first 1,000 of a book are not read.
"""
import json
import sys
import urllib.request


def get(url, path):
    with urllib.request.urlopen(url + path) as response:
        return json.load(response)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/in_the_money.py URL")
    url = sys.argv[1].rstrip("/")
    prices = get(url, "/v1/prices")
    rates = {(p["sell"], p["buy"]): float(p["rate"]) for p in prices["reference"]["pairs"]}
    in_money = tiny = 0
    first = None
    for (sell, buy), rate in sorted(rates.items()):
        book = get(url, f"/v1/books/{sell}/{buy}?levels=1000")
        for level in book["levels"]:
            if float(level["min_price"]) <= rate:
                in_money += level["offers"]
                if level["amount"] <= 2 * level["offers"]:
                    tiny += level["offers"]
        if first is None:
            first = {"sell": sell, "buy": buy, "rate": rate, "levels": book["levels"][:5]}
    print(json.dumps({
        "pairs": len(rates),
        "in_the_money_offers": in_money,
        "in_levels_of_at_most_2_units_per_offer": tiny,
        "first_book": first,
    }))


if __name__ == "__main__":
    main()

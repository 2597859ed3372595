"""``walras.gen_offers``: the workload generators of ``walras gen offers``."""

from typing import Union

import numpy as np
import pandas as pd

from . import _walras

__all__ = ["gen_offers", "MODELS"]

#: The generator models (``walras gen offers --model``).
MODELS = ("market", "cycles", "skewed", "wide")


def gen_offers(
    assets: int,
    offers: int,
    seed: int = 1,
    model: str = "cycles",
    spread: Union[str, float] = "1%",
    pairs: str = "uniform",
    valuation_decades: int = 2,
    exact_prices: bool = False,
) -> pd.DataFrame:
    """Generates offers as ``walras gen offers`` does: the same seed gives the same offers.

    Args:
        assets: the number of assets N (2..=1024).
        offers: how many offers.
        seed: the random seed.
        model: ``market`` (two-sided books around the rate), ``cycles`` (SPEEDEX §7),
            ``skewed`` (§6.2-like volume) or ``wide`` (valuations 1e-6..1e6).
        spread: ``market`` model: standard deviation of limits around the rate, as a
            percentage text (``"0.1%"``) or a fraction (``0.001``).
        pairs: ``market`` model: ``uniform`` or ``power-law``.
        valuation_decades: ``market`` model: valuations spread over 10^-D..=10^D (0..=6).
        exact_prices: give ``min_price`` as the exact decimal strings the CSV writer prints
            (clearing them equals ``walras clear`` on ``walras gen offers``'s CSV bit for bit)
            instead of float64 (the nearest double: handy for analysis and plots).

    Returns:
        A DataFrame with the offers CSV's columns ``offer_id``, ``account``, ``sell``,
        ``buy``, ``amount`` (int64) and ``min_price``; ``attrs["valuations"]`` holds the
        model's final "true" valuation of each asset (float64 array).

    Raises:
        ValueError: a parameter outside its range, naming it.
    """
    if isinstance(spread, bool) or not isinstance(spread, (str, int, float)):
        raise ValueError(f"spread must be a percentage text or a fraction, not {spread!r}")
    spread_text = spread if isinstance(spread, str) else repr(float(spread))
    raw = _walras.gen_offers(
        assets, offers, seed, model, spread_text, pairs, valuation_decades, exact_prices
    )
    frame = pd.DataFrame(
        {
            name: np.frombuffer(raw[name], dtype=np.uint64).astype(np.int64)
            for name in ("offer_id", "account", "sell", "buy", "amount")
        }
    )
    if exact_prices:
        text = raw["min_price_text"]
        frame["min_price"] = pd.Series(text.split("\n") if text else [], dtype=object)
    else:
        frame["min_price"] = np.frombuffer(raw["min_price"], dtype=np.float64).copy()
    frame.attrs["valuations"] = np.asarray(raw["valuations"], dtype=np.float64)
    return frame

"""``walras.oracle``: the valuation oracle (``walras_oracle``): one book valued, and a
recorded feed replayed through the parallel pipeline."""

import json
import os
from typing import Any, Dict, Iterable, Optional, Sequence, Tuple, Union

from . import _walras

__all__ = ["value", "replay", "METHODS"]

#: The valuation methods.
METHODS = ("mid", "weighted-mid", "depth-vwap")

Levels = Union[str, Iterable[Tuple[float, float]]]


def _levels_text(name: str, levels: Levels) -> str:
    if isinstance(levels, str):
        return levels
    parts = []
    for index, level in enumerate(levels):
        if not isinstance(level, Sequence) or len(level) != 2:
            raise ValueError(f"{name}[{index}]: a level is (price, quantity), not {level!r}")
        price, quantity = level
        parts.append(
            f"{price!r}:{quantity!r}" if isinstance(price, float) else f"{price}:{quantity}"
        )
    return ",".join(parts)


def value(
    bids: Levels,
    asks: Levels,
    method: str = "mid",
    depth: Optional[float] = None,
    step: Optional[float] = None,
) -> Dict[str, Any]:
    """Values one order book, as ``walras oracle value`` does.

    Args:
        bids: levels best first, as ``"P:Q,P:Q"`` text or ``[(price, quantity), ...]``.
        asks: likewise.
        method: ``mid``, ``weighted-mid`` or ``depth-vwap``.
        depth: ``depth-vwap``: the depth D to average over.
        step: ``depth-vwap``: the step S, 0 < S <= D.

    Returns:
        ``{"method", "price", "error", "mid", "weighted_mid", "crossed"}``: ``price`` is
        ``None`` (and ``error`` says why) when the method cannot value the book.

    Raises:
        ValueError: malformed levels or an unknown method.
    """
    text = _walras.oracle_value(
        _levels_text("bids", bids), _levels_text("asks", asks), method, depth, step
    )
    return json.loads(text)


def replay(path: Union[str, "os.PathLike[str]"], threads: int = 1) -> Dict[str, Any]:
    """Replays a recorded feed (``walras gen feed``) through the oracle's pipeline, as
    ``walras oracle replay --json`` does, as fast as it goes.

    Returns:
        The report: ``digest`` (the same for any thread count), ``prices`` (the last tick's
        per-asset prices with their status), ``events``, ``events_per_s``, ``elapsed_ms``, ...

    Raises:
        ValueError: an unreadable feed or a thread count outside 1..=64.
    """
    return json.loads(_walras.oracle_replay(os.fspath(path), threads))

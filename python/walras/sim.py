"""``walras.sim``: deterministic simulators. ``dbo`` runs the fair-access gateway's
delivery-based ordering (the gateway's own release and ordering buffers) against direct
delivery, the max-RTT bound and CloudEx, as ``walras sim dbo`` does."""

import json
import os
from typing import Iterable, Optional, Union

import pandas as pd

from . import _walras

__all__ = ["dbo", "SCHEMES"]

#: The schemes ``dbo`` compares.
SCHEMES = ("direct", "dbo", "max-rtt", "cloudex")


def dbo(
    scheme: Union[str, Iterable[str]] = SCHEMES,
    participants: int = 10,
    seconds: float = 1.0,
    seed: int = 1,
    delta_us: Optional[int] = None,
    kappa: Optional[float] = None,
    tau_us: Optional[int] = None,
    threshold_us: Optional[int] = None,
    trace: Union[None, str, "os.PathLike[str]"] = None,
) -> pd.DataFrame:
    """Simulates each scheme and returns one row per scheme (the index).

    Args:
        scheme: one scheme or several, of ``direct``, ``dbo``, ``max-rtt``, ``cloudex``
            (default: all four).
        participants: market participants (1..=1000).
        seconds: simulated seconds.
        seed: the random seed (the same seed gives the same figures).
        delta_us: δ, the least time between two deliveries of a release buffer, µs.
        kappa: κ, how much faster than δ a release buffer may deliver a backlog.
        tau_us: τ, the heartbeat interval, µs.
        threshold_us: CloudEx's hold-and-release threshold, µs.
        trace: a latency trace CSV (``time_us,participant,down_us,up_us``) instead of the
            synthetic model.

    Returns:
        A DataFrame of the fields of ``walras sim dbo --json`` (``fairness``,
        ``latency_us_mean``, ``latency_us_p50``, ``latency_us_p99``, ``latency_us_p999``,
        ``latency_us_max``, ...), nested fields joined with ``_``.

    Raises:
        ValueError: an unknown scheme or a parameter the simulator refuses.
    """
    schemes = [scheme] if isinstance(scheme, str) else list(scheme)
    if not schemes:
        raise ValueError("scheme: name at least one scheme")
    trace_path = None if trace is None else os.fspath(trace)
    rows = []
    for name in schemes:
        text = _walras.sim_dbo(
            name, participants, seconds, seed, delta_us, kappa, tau_us, threshold_us, trace_path
        )
        rows.append(json.loads(text))
    frame = pd.json_normalize(rows, sep="_")
    frame.index = pd.Index(schemes, name="scheme")
    return frame

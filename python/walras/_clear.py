"""``walras.clear``: one batch of limit sell offers cleared in-process by the exchange's own
clearing (tâtonnement, LP, integer settlement), exactly as ``walras clear`` clears it."""

import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np
import pandas as pd

from . import _walras

__all__ = ["ClearResult", "clear", "OFFER_COLUMNS"]

#: The columns of an offers table, in the order of the CSV header.
OFFER_COLUMNS = ("offer_id", "account", "sell", "buy", "amount", "min_price")
_INTEGER_COLUMNS = OFFER_COLUMNS[:5]

#: The CLI's defaults: commission 2^-15, smoothing 2^-10, a 2 s tâtonnement limit.
DEFAULT_EPSILON = "2^-15"
DEFAULT_MU = "2^-10"
DEFAULT_TIMEOUT_MS = 2000

Offers = Union[pd.DataFrame, Mapping[str, Any], str, "os.PathLike[str]"]


@dataclass
class ClearResult:
    """The result of :func:`clear`; the fields of ``walras clear --json``.

    Attributes:
        prices: one float64 per asset, its price in units of asset 0 (``prices[0]`` is 1.0),
            NaN for an asset that did not trade in one group with asset 0 (the CLI's ``null``):
            each the double nearest the exact rate, which the CLI's ``prices`` give as decimal
            strings of 12 significant digits.
        valuations: the exact integer valuations the trades were computed with (Python ints).
        fills: one row per offer that traded: ``offer_id``, ``sold``, ``bought`` (uint64),
            the CLI's ``--fills`` file.
        trades: one row per pair that traded: ``sell``, ``buy``, ``sold``, ``bought``, ``rate``.
        converged: tâtonnement converged and the settlement meets μ-completeness.
        iterations: tâtonnement iterations of the instance whose prices were used.
        unrealized_utility_ratio: unrealized over realized utility (SPEEDEX §6.2); ``None``
            when nothing traded although something could have.
        millis: price computation and clearing (tâtonnement, LP, fills), as the CLI's
            ``millis``: books already sorted and indexed.
        prepare_millis: sorting and indexing the books (the CLI's ``prepare_millis``).
        convert_millis: turning the input into the native columns (0 for a CSV path, whose
            reading is ``report["read_millis"]``).
        report: every field of the CLI's JSON (``burned``, ``achieved_epsilon``, ``mu``, ...).
    """

    prices: np.ndarray
    valuations: List[int]
    fills: pd.DataFrame
    trades: pd.DataFrame
    converged: bool
    iterations: int
    unrealized_utility_ratio: Optional[float]
    millis: float
    prepare_millis: float
    convert_millis: float
    report: Dict[str, Any] = field(repr=False)


def clear(
    offers: Offers,
    assets: int,
    epsilon: Union[None, str, float] = None,
    mu: Union[None, str, float] = None,
    threads: int = 1,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
) -> ClearResult:
    """Clears one batch of limit sell offers, as ``walras clear --json`` does.

    Args:
        offers: a pandas DataFrame or a dict of numpy arrays with the columns ``offer_id``,
            ``account``, ``sell``, ``buy``, ``amount`` (integers) and ``min_price`` (units of
            ``buy`` per unit of ``sell``: floats, each read as the decimal Python prints for
            it, or decimal strings, read exactly as the CSV's); or the path of an offers CSV
            (read by the CLI's own reader).
        assets: the number of assets N (assets are ``0..N-1``).
        epsilon: the commission ε, a decimal or ``"2^-K"`` (default ``2^-15``).
        mu: the smoothing width μ, a decimal or ``"2^-K"`` (default ``2^-10``).
        threads: threads racing tâtonnement instances and sorting the books.
        timeout_ms: tâtonnement's time limit (the CLI's ``--timeout-ms``).

    Returns:
        A :class:`ClearResult`.

    Raises:
        ValueError: a missing column, a value no offer can have (naming its column and row),
            a bad parameter.
        walras.InternalError: a defect inside walras (never an interpreter crash).

    The GIL is released while the batch is read and cleared. Columns are passed as whole
    buffers (no Python object per row).
    """
    eps_text = _fraction_text("epsilon", epsilon, DEFAULT_EPSILON)
    mu_text = _fraction_text("mu", mu, DEFAULT_MU)
    _check_int("assets", assets)
    _check_int("threads", threads)
    _check_int("timeout_ms", timeout_ms)
    if isinstance(offers, (str, bytes, os.PathLike)):
        path = os.fsdecode(offers)
        raw = _walras.clear_csv(path, assets, eps_text, mu_text, threads, timeout_ms)
        return _result(raw, 0.0)
    started = time.perf_counter()
    columns = _native_columns(offers)
    convert_millis = (time.perf_counter() - started) * 1e3
    raw = _walras.clear_columns(*columns, assets, eps_text, mu_text, threads, timeout_ms)
    return _result(raw, convert_millis)


def _check_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, not {value!r}")


def _fraction_text(name: str, value: Union[None, str, float], default: str) -> str:
    if value is None:
        return default
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool):
        return repr(float(value))
    raise ValueError(f"{name} must be a decimal, '2^-K' or a number, not {value!r}")


def _column(offers: Any, name: str) -> np.ndarray:
    if isinstance(offers, pd.DataFrame):
        if name not in offers.columns:
            raise ValueError(f"offers has no column '{name}' (needs {', '.join(OFFER_COLUMNS)})")
        return offers[name].to_numpy()
    if isinstance(offers, Mapping):
        if name not in offers:
            raise ValueError(f"offers has no key '{name}' (needs {', '.join(OFFER_COLUMNS)})")
        return np.asarray(offers[name])
    raise ValueError(
        "offers must be a pandas DataFrame, a dict of numpy arrays or a CSV path, "
        f"not {type(offers).__name__}"
    )


def _native_columns(offers: Any) -> Tuple[bytes, bytes, bytes, bytes, bytes, bytes, str, int]:
    arrays = {name: _column(offers, name) for name in OFFER_COLUMNS}
    rows = len(arrays["offer_id"])
    for name, array in arrays.items():
        if array.ndim != 1:
            raise ValueError(f"column '{name}' must be one-dimensional, not {array.ndim}-D")
        if len(array) != rows:
            raise ValueError(f"column '{name}' has {len(array)} rows, 'offer_id' has {rows}")
    offer_id, account, sell, buy, amount = (
        _integer_bytes(name, arrays[name]) for name in _INTEGER_COLUMNS
    )
    prices, kind = _price_bytes(arrays["min_price"])
    return offer_id, account, sell, buy, amount, prices, kind, rows


def _bad_row(name: str, array: np.ndarray, bad: np.ndarray, why: str) -> ValueError:
    row = int(np.flatnonzero(bad)[0])
    value = array[row].item() if isinstance(array[row], np.generic) else array[row]
    return ValueError(f"row {row}: column '{name}': {value!r} {why}")


def _integer_bytes(name: str, array: np.ndarray) -> bytes:
    """The column as native-endian uint64 bytes (one copy, no per-row objects)."""
    kind = array.dtype.kind
    if kind == "u":
        pass
    elif kind == "i":
        negative = array < 0
        if negative.any():
            raise _bad_row(name, array, negative, "is negative")
    elif kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~(
                np.isfinite(array) & (array >= 0) & (array == np.floor(array)) & (array < 2.0**64)
            )
        if bad.any():
            raise _bad_row(name, array, bad, "is not a non-negative integer")
    elif kind == "O":
        return _object_integer_bytes(name, array)
    else:
        raise ValueError(f"column '{name}' holds {array.dtype}, not integers")
    return np.ascontiguousarray(array, dtype=np.uint64).tobytes()


def _is_u64(value: Any) -> bool:
    return bool(
        isinstance(value, (int, np.integer)) and not isinstance(value, bool) and 0 <= value < 2**64
    )


def _object_integer_bytes(name: str, array: np.ndarray) -> bytes:
    """Python objects (big ints, None, text): already one object per row; the first that is
    not a u64 is named."""
    for row, value in enumerate(array):
        if not _is_u64(value):
            raise ValueError(f"row {row}: column '{name}': {value!r} is not a non-negative integer")
    return np.array([int(value) for value in array], dtype=np.uint64).tobytes()


def _price_bytes(array: np.ndarray) -> Tuple[bytes, str]:
    kind = array.dtype.kind
    if kind in "fiu":
        return np.ascontiguousarray(array, dtype=np.float64).tobytes(), "float"
    if kind in "OUST" or pd.api.types.is_string_dtype(array.dtype):
        if kind == "O":
            try:  # Python strings already: joined as they are (astype(str) would copy them)
                return "\n".join(array).encode(), "text"
            except TypeError:
                pass  # other objects (Decimal, float, ...): their str()
        return "\n".join(array.astype(str)).encode(), "text"
    raise ValueError(f"column 'min_price' holds {array.dtype}: use floats or decimal strings")


def _u64(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint64).copy()


def _result(raw: Dict[str, Any], convert_millis: float) -> ClearResult:
    fills = pd.DataFrame(
        {
            "offer_id": _u64(raw.pop("fill_offer_id")),
            "sold": _u64(raw.pop("fill_sold")),
            "bought": _u64(raw.pop("fill_bought")),
        }
    )
    trades = pd.DataFrame(raw["trades"], columns=["sell", "buy", "sold", "bought", "rate"])
    raw["trades"] = [
        dict(zip(("sell", "buy", "sold", "bought", "rate"), trade)) for trade in raw["trades"]
    ]
    return ClearResult(
        prices=np.asarray(raw["prices"], dtype=np.float64),
        valuations=list(raw["valuations"]),
        fills=fills,
        trades=trades,
        converged=bool(raw["converged"]),
        iterations=int(raw["iterations"]),
        unrealized_utility_ratio=raw["unrealized_utility_ratio"],
        millis=float(raw["millis"]),
        prepare_millis=float(raw["prepare_millis"]),
        convert_millis=convert_millis,
        report=raw,
    )

"""Walras from Python: the batch exchange's own Rust code, in-process.

Offline: :func:`clear` (one batch cleared as ``walras clear`` clears it), :func:`gen_offers`,
:func:`walras.sim.dbo`, :func:`walras.oracle.value`, :func:`walras.oracle.replay`.
Online: :class:`Client` (and :class:`AsyncClient`) signs with the exchange's own code and talks
to a node. Errors: :class:`ValueError` for bad input, :class:`ApiError` for a node's refusal,
:class:`InternalError` for a defect inside walras (a Rust panic never reaches the interpreter).

    >>> import walras
    >>> offers = walras.gen_offers(assets=4, offers=1000, seed=1)
    >>> walras.clear(offers, assets=4).prices   # doctest: +SKIP
"""

from . import oracle, sim
from ._clear import OFFER_COLUMNS, ClearResult, clear
from ._gen import MODELS, gen_offers
from ._walras import Signer, hash_transaction, transaction_json
from .client import AsyncClient, Client, Submitted
from .errors import ApiError, InternalError

__version__ = "0.1.0"

__all__ = [
    "ApiError",
    "AsyncClient",
    "ClearResult",
    "Client",
    "InternalError",
    "MODELS",
    "OFFER_COLUMNS",
    "Signer",
    "Submitted",
    "clear",
    "gen_offers",
    "hash_transaction",
    "oracle",
    "sim",
    "transaction_json",
]

"""Type stubs of ``walras._walras``, the native half of the package (PyO3). Users call the
Python API (``walras.clear``, ``walras.Client``, ...), which wraps these."""

import os
from typing import Any, Dict, List, Optional, Union

class InternalError(RuntimeError):
    """A defect inside walras: a Rust panic caught at the boundary (never a crash)."""

def _panic_for_test() -> None:
    """Panics inside Rust on purpose; raises InternalError (the boundary test)."""

def clear_columns(
    offer_id: bytes,
    account: bytes,
    sell: bytes,
    buy: bytes,
    amount: bytes,
    prices: bytes,
    price_kind: str,
    rows: int,
    assets: int,
    epsilon: str,
    mu: str,
    threads: int,
    timeout_ms: int,
) -> Dict[str, Any]:
    """Clears offers given as columns: five buffers of ``rows`` native-endian uint64, and the
    limits as ``rows`` float64 (``price_kind="float"``) or UTF-8 decimals joined by newlines
    (``"text"``). Returns the fields of ``walras clear --json`` plus ``fill_offer_id``,
    ``fill_sold``, ``fill_bought`` (uint64 buffers). Raises ValueError naming column and row."""

def clear_csv(
    path: Union[str, "os.PathLike[str]"],
    assets: int,
    epsilon: str,
    mu: str,
    threads: int,
    timeout_ms: int,
) -> Dict[str, Any]:
    """Clears an offers CSV read by the CLI's own reader; as :func:`clear_columns`."""

class Signer:
    """One account's Ed25519 signing key; signs the canonical encoding as the CLI does."""

    @staticmethod
    def from_seed(seed: bytes) -> "Signer":
        """A signer from a 32-byte secret seed."""
    @staticmethod
    def from_key_file(path: Union[str, "os.PathLike[str]"]) -> "Signer":
        """A signer from a key file written by ``walras keygen``."""
    @property
    def public_key(self) -> str:
        """The public key, 64 hex digits."""
    def payment(self, source: int, sequence: int, to: int, asset: int, amount: int) -> bytes:
        """A signed payment (the canonical signed bytes)."""
    def create_offer(
        self, source: int, sequence: int, sell: int, buy: int, amount: int, min_price: str
    ) -> bytes:
        """A signed offer; ``min_price`` a decimal text, rounded up to Q48.80."""
    def cancel_offer(
        self, source: int, sequence: int, sell: int, buy: int, min_price: str, offer_id: int
    ) -> bytes:
        """A signed cancel of an offer (its pair and limit as created)."""
    def create_account(
        self, source: int, sequence: int, new_account: int, public_key: str
    ) -> bytes:
        """A signed account creation for ``public_key`` (64 hex digits)."""

def hash_transaction(signed: bytes) -> str:
    """The transaction's id: BLAKE2b-256 of the signed bytes under ``walras/tx``, hex."""

def transaction_json(signed: bytes) -> str:
    """The transaction's JSON form (as ``POST /v1/transactions`` accepts it), as text."""

def dev_seed(dev_genesis: str, account: int) -> bytes:
    """The development key seed of ``account`` under ``/v1/status``'s ``dev_genesis`` (JSON)."""

class Node:
    """A connection pool to one node (the CLI's HTTP client). Raises walras.ApiError."""

    def __init__(self, url: str) -> None: ...
    @property
    def url(self) -> str:
        """``http://host:port``."""
    def get(self, path: str) -> str:
        """GET ``path``; the JSON body as text."""
    def submit(self, signed: bytes, as_json: bool = False) -> str:
        """Submits one signed transaction; the answer as JSON text."""
    def submit_batch(self, signed: List[bytes]) -> str:
        """Submits 1..=10,000 signed transactions in one request; the answer as JSON text."""
    def events(self) -> "EventStream":
        """Subscribes to ``/v1/events`` now."""

class EventStream:
    """An open ``/v1/events`` subscription."""

    def next(self, timeout_s: Optional[float] = None) -> Optional[str]:
        """The next block event as JSON text; None once closed; TimeoutError on timeout."""
    def close(self) -> None:
        """Ends the subscription."""

def gen_offers(
    assets: int,
    offers: int,
    seed: int,
    model: str,
    spread: str,
    pairs: str,
    valuation_decades: int,
    exact: bool,
) -> Dict[str, Any]:
    """Generated offers as column buffers, ``min_price_text`` with ``exact``, and the model's
    ``valuations``."""

def sim_dbo(
    scheme: str,
    participants: int,
    seconds: float,
    seed: int,
    delta_us: Optional[int] = None,
    kappa: Optional[float] = None,
    tau_us: Optional[int] = None,
    threshold_us: Optional[int] = None,
    trace: Optional[str] = None,
) -> str:
    """One DBO simulation; ``walras sim dbo --json``'s report as text."""

def oracle_value(
    bids: str, asks: str, method: str, depth: Optional[float] = None, step: Optional[float] = None
) -> str:
    """One book valued (``walras oracle value``); the valuation as JSON text."""

def oracle_replay(path: Union[str, "os.PathLike[str]"], threads: int) -> str:
    """A recorded feed replayed (``walras oracle replay --json``); the report as JSON text."""

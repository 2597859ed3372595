"""``walras.Client``: a node's HTTP API from Python, signing with the exchange's own code.

Transactions are built, encoded and signed by the Rust crates the CLI uses (the canonical bytes
of ``docs/formats.md``); requests go through the CLI's own HTTP client. Answers are Python
objects (the API's JSON, parsed). Every failed request raises :class:`walras.ApiError` with the
API's code; nothing is swallowed.
"""

import asyncio
import functools
import json
import os
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

from . import _walras
from .errors import ApiError

__all__ = ["Client", "AsyncClient", "Events", "AsyncEvents", "Submitted"]

Key = Union[None, str, bytes, "os.PathLike[str]", "_walras.Signer"]

#: How often :meth:`Client.wait` polls a transaction's status.
_WAIT_POLL_S = 0.1


class Submitted(dict):
    """What a submission returns: ``hash``, ``sequence``, ``status`` (``pending``, or after
    ``wait=True`` the transaction's final status with ``height``), and for a new offer its
    ``offer_id`` (the sequence number of the transaction that created it)."""

    @property
    def hash(self) -> str:
        return self["hash"]


def _price_text(value: Any) -> str:
    if isinstance(value, bool):
        raise ValueError(f"min_price must be a decimal, not {value!r}")
    if isinstance(value, float):
        return repr(value)
    return str(value)


class Client:
    """A client of one node (``http://HOST:PORT``), signing as one account.

    Args:
        url: the node's address.
        key: the signing key: a key file's path (``walras keygen``), a 32-byte secret seed
            (bytes, or 64 hex digits), ``"dev"`` for the development key of ``account`` on a
            node started with ``--dev``, or ``None`` for a read-only client.
        account: the account that signs (the ``source`` of every transaction).

    Sequence numbers are the node's ``next_sequence`` for the account at the first
    submission, then counted here, so several transactions can be in flight; after a refusal
    the next submission asks the node again.
    """

    def __init__(self, url: str, key: Key = None, account: Optional[int] = None) -> None:
        self._node = _walras.Node(url)
        self.account = account
        self._key = key
        self._signer: Optional[_walras.Signer] = None
        self._next_sequence: Optional[int] = None

    @property
    def url(self) -> str:
        """The node's address, normalised (``http://host:port``)."""
        return self._node.url

    # Reads -----------------------------------------------------------------------------

    def _get(self, path: str) -> Any:
        return json.loads(self._node.get(path))

    def status(self) -> Dict[str, Any]:
        """``GET /v1/status``: height, mempool, development genesis, ..."""
        return self._get("/v1/status")

    def get_account(self, account: Optional[int] = None) -> Dict[str, Any]:
        """``GET /v1/accounts/{id}`` (default: this client's account): key, sequence numbers,
        balances."""
        return self._get(f"/v1/accounts/{self._account_id(account)}")

    def open_offers(self, account: Optional[int] = None) -> Dict[str, Any]:
        """``GET /v1/accounts/{id}/offers``: the account's open offers."""
        return self._get(f"/v1/accounts/{self._account_id(account)}/offers")

    def book(self, sell: int, buy: int, levels: Optional[int] = None) -> Dict[str, Any]:
        """``GET /v1/books/{sell}/{buy}``: the open offers selling ``sell`` for ``buy``."""
        query = "" if levels is None else f"?levels={int(levels)}"
        return self._get(f"/v1/books/{int(sell)}/{int(buy)}{query}")

    def block(self, height: int) -> Dict[str, Any]:
        """``GET /v1/blocks/{height}``: header, prices, clearing quality, drops."""
        return self._get(f"/v1/blocks/{int(height)}")

    def fills(self, height: int, account: Optional[int] = None) -> Dict[str, Any]:
        """``GET /v1/blocks/{height}/fills[?account=A]``: per-offer fills of a block."""
        query = "" if account is None else f"?account={int(account)}"
        return self._get(f"/v1/blocks/{int(height)}/fills{query}")

    def prices(self) -> Dict[str, Any]:
        """``GET /v1/prices``: the last clearing prices, ``reference`` and ``traded``."""
        return self._get("/v1/prices")

    def explain(self, offer_id: int, account: Optional[int] = None) -> Dict[str, Any]:
        """``GET /v1/offers/{id}/explain``: why an offer did (not) trade."""
        account = self.account if account is None else account
        query = "" if account is None else f"?account={int(account)}"
        return self._get(f"/v1/offers/{int(offer_id)}/explain{query}")

    def transaction(self, hash_hex: str) -> Dict[str, Any]:
        """``GET /v1/transactions/{hash}``: ``pending``, ``accepted`` or ``dropped``."""
        return self._get(f"/v1/transactions/{hash_hex}")

    def get(self, path: str) -> Any:
        """Any ``GET`` of the API (``/v1/...``), parsed."""
        return self._get(path)

    def events(self, timeout_s: Optional[float] = None) -> "Events":
        """Subscribes to ``GET /v1/events`` now and returns an iterator of block events (one
        per committed block from now on, as dicts).

        The iterator stops when the node closes the stream and raises ``TimeoutError`` when no
        event comes within ``timeout_s`` (``None``: wait as long as it takes). Close it (or
        use it in a ``with`` block) to end the subscription.
        """
        return Events(self._node.events(), timeout_s)

    def wait(self, hash_hex: str, timeout_s: float = 30.0) -> Dict[str, Any]:
        """Waits until a transaction leaves ``pending`` and returns its status.

        Raises:
            ApiError: the block dropped it (``code`` is the drop reason, ``status`` None).
            TimeoutError: still pending after ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                status = self.transaction(hash_hex)
            except ApiError as error:
                if error.status != 404:  # briefly unknown right after admission
                    raise
                status = {"status": "pending"}
            if status["status"] == "dropped":
                reason = status.get("reason") or "dropped"
                raise ApiError(
                    f"transaction {hash_hex} was dropped in block {status.get('height')}: {reason}",
                    reason,
                )
            if status["status"] != "pending":
                return status
            if time.monotonic() >= deadline:
                raise TimeoutError(f"transaction {hash_hex} is still pending after {timeout_s} s")
            time.sleep(_WAIT_POLL_S)

    # Signing and submitting -------------------------------------------------------------

    @property
    def public_key(self) -> str:
        """The signing key's public key (64 hex digits)."""
        return self._signing_key().public_key

    def submit_offer(
        self,
        sell: int,
        buy: int,
        amount: int,
        min_price: Union[str, float, int],
        wait: bool = False,
        sequence: Optional[int] = None,
    ) -> Submitted:
        """Sells ``amount`` of ``sell`` for ``buy`` at no less than ``min_price`` units of
        ``buy`` per unit of ``sell`` (a decimal; a float is read as the decimal Python prints).
        The offer's id is the transaction's sequence number (``result["offer_id"]``)."""
        price = _price_text(min_price)
        result = self._sign_and_submit(
            lambda signer, seq: signer.create_offer(self._source(), seq, sell, buy, amount, price),
            wait,
            sequence,
        )
        result["offer_id"] = result["sequence"]
        return result

    def cancel_offer(
        self,
        offer_id: int,
        sell: Optional[int] = None,
        buy: Optional[int] = None,
        min_price: Union[None, str, float] = None,
        wait: bool = False,
        sequence: Optional[int] = None,
    ) -> Submitted:
        """Cancels an open offer of this account. Without its pair and limit, they are read
        from the node's list of the account's open offers."""
        if sell is None or buy is None or min_price is None:
            sell, buy, min_price = self._open_offer_terms(offer_id)
        price = _price_text(min_price)
        return self._sign_and_submit(
            lambda signer, seq: signer.cancel_offer(
                self._source(), seq, sell, buy, price, offer_id
            ),
            wait,
            sequence,
        )

    def pay(
        self, to: int, asset: int, amount: int, wait: bool = False, sequence: Optional[int] = None
    ) -> Submitted:
        """Pays ``amount`` units of ``asset`` to account ``to``."""
        return self._sign_and_submit(
            lambda signer, seq: signer.payment(self._source(), seq, to, asset, amount),
            wait,
            sequence,
        )

    def pay_batch(self, payments: Iterable[Tuple[int, int, int]]) -> List[Dict[str, Any]]:
        """Pays several ``(to, asset, amount)`` in one request (``/v1/transactions/batch``),
        with consecutive sequence numbers (at most 64 ahead of the account's last committed:
        the node's window).

        Returns:
            One ``{"hash", "sequence"}`` per payment, in order.

        Raises:
            ApiError: the request failed, or the node refused one of the payments (its
                ``code``; ``results`` holds every payment's outcome).
        """
        payments = list(payments)
        if not payments:
            raise ValueError("payments: give at least one (to, asset, amount)")
        signer = self._signing_key()
        first = self._take_sequences(len(payments))
        signed = [
            signer.payment(self._source(), first + index, to, asset, amount)
            for index, (to, asset, amount) in enumerate(payments)
        ]
        response = self._submit_or_forget(lambda: json.loads(self._node.submit_batch(signed)))
        results = []
        for index, item in enumerate(response["results"]):
            results.append(
                {"hash": item["hash"], "sequence": first + index, "error": item.get("error")}
            )
        refused = [result for result in results if result["error"]]
        if refused:
            self._next_sequence = None
            error = refused[0]["error"]
            failure = ApiError(
                f"node refused {len(refused)} of {len(results)} payments; the first "
                f"(sequence {refused[0]['sequence']}): {error.get('message')}",
                error.get("code", "refused"),
            )
            failure.results = results  # type: ignore[attr-defined]
            raise failure
        return [{"hash": result["hash"], "sequence": result["sequence"]} for result in results]

    def create_account(
        self, new_account: int, public_key: str, wait: bool = False, sequence: Optional[int] = None
    ) -> Submitted:
        """Creates account ``new_account`` controlled by ``public_key`` (64 hex digits)."""
        return self._sign_and_submit(
            lambda signer, seq: signer.create_account(self._source(), seq, new_account, public_key),
            wait,
            sequence,
        )

    def submit_signed(self, signed: bytes) -> Dict[str, Any]:
        """Submits a transaction signed elsewhere (its canonical bytes)."""
        return json.loads(self._node.submit(signed))

    # Internals -------------------------------------------------------------------------

    def _account_id(self, account: Optional[int]) -> int:
        account = self.account if account is None else account
        if account is None:
            raise ValueError("name an account: this client was made without account=")
        return int(account)

    def _source(self) -> int:
        return self._account_id(None)

    def _signing_key(self) -> "_walras.Signer":
        if self._signer is None:
            self._signer = self._load_signer(self._key)
        return self._signer

    def _load_signer(self, key: Key) -> "_walras.Signer":
        if key is None:
            raise ValueError("this client has no key: pass key= (a key file, a seed or 'dev')")
        if isinstance(key, _walras.Signer):
            return key
        if isinstance(key, bytes):
            return _walras.Signer.from_seed(key)
        if isinstance(key, str) and key == "dev":
            dev = self.status().get("dev_genesis")
            if dev is None:
                raise ValueError(
                    f"the node at {self.url} runs no development genesis, so key='dev' does not "
                    "apply: use a key file"
                )
            return _walras.Signer.from_seed(_walras.dev_seed(json.dumps(dev), self._source()))
        if isinstance(key, str) and len(key) == 64 and not os.path.exists(key):
            try:
                seed = bytes.fromhex(key)
            except ValueError:
                raise ValueError("key: 64 characters that are not hex digits") from None
            return _walras.Signer.from_seed(seed)
        return _walras.Signer.from_key_file(os.fspath(key))

    def _take_sequences(self, count: int) -> int:
        if self._next_sequence is None:
            account = self.get_account()
            signer = self._signing_key()
            if account["public_key"] != signer.public_key:
                raise ValueError(
                    f"the key ({signer.public_key}) does not control account {self._source()} "
                    f"(its key is {account['public_key']})"
                )
            self._next_sequence = int(account["next_sequence"])
        first = self._next_sequence
        self._next_sequence += count
        return first

    def _submit_or_forget(self, submit: Callable[[], Any]) -> Any:
        try:
            return submit()
        except ApiError:
            self._next_sequence = None  # the node's count is the truth again
            raise

    def _sign_and_submit(
        self, sign: Callable[["_walras.Signer", int], bytes], wait: bool, sequence: Optional[int]
    ) -> Submitted:
        signer = self._signing_key()
        seq = self._take_sequences(1) if sequence is None else int(sequence)
        signed = sign(signer, seq)
        answer = self._submit_or_forget(lambda: json.loads(self._node.submit(signed)))
        result = Submitted(hash=answer["hash"], sequence=seq, status=answer["status"])
        if wait:
            result.update(self.wait(result["hash"]))
        return result

    def _open_offer_terms(self, offer_id: int) -> Tuple[int, int, str]:
        for offer in self.open_offers()["offers"]:
            if offer["offer_id"] == offer_id:
                return offer["sell"], offer["buy"], offer["min_price"]
        raise ValueError(
            f"account {self._source()} has no open offer with id {offer_id}: it may have traded "
            "in full or been cancelled (see Client.explain)"
        )


class Events:
    """An open ``/v1/events`` subscription: iterate it for block events (dicts)."""

    def __init__(self, stream: "_walras.EventStream", timeout_s: Optional[float]) -> None:
        self._stream = stream
        self.timeout_s = timeout_s

    def __iter__(self) -> "Events":
        return self

    def __next__(self) -> Dict[str, Any]:
        text = self._stream.next(self.timeout_s)
        if text is None:
            raise StopIteration
        return json.loads(text)

    def close(self) -> None:
        """Ends the subscription."""
        self._stream.close()

    def __enter__(self) -> "Events":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncEvents:
    """:class:`Events` for ``asyncio``: ``async for event in await client.events()``."""

    def __init__(self, events: Events) -> None:
        self._events = events

    def __aiter__(self) -> "AsyncEvents":
        return self

    async def __anext__(self) -> Dict[str, Any]:
        text = await asyncio.to_thread(self._events._stream.next, self._events.timeout_s)
        if text is None:
            raise StopAsyncIteration
        return json.loads(text)

    def close(self) -> None:
        """Ends the subscription."""
        self._events.close()


class AsyncClient:
    """:class:`Client` for ``asyncio``: the same methods as coroutines, each run in a worker
    thread (the native code releases the GIL), and ``events()`` as an async iterator."""

    def __init__(self, url: str, key: Key = None, account: Optional[int] = None) -> None:
        self.sync = Client(url, key=key, account=account)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.sync, name)
        if name.startswith("_") or not callable(method) or name == "events":
            return method

        @functools.wraps(method)
        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        return call

    async def events(self, timeout_s: Optional[float] = None) -> AsyncEvents:
        """Subscribes now; block events as an async iterator (see :meth:`Client.events`)."""
        return AsyncEvents(await asyncio.to_thread(self.sync.events, timeout_s))

"""The exceptions of the ``walras`` package.

Bad input raises :class:`ValueError` (naming the column, row or field). A node's refusal, or a
node that cannot be reached, raises :class:`ApiError`, one class for every request, carrying the
API's error code. A defect inside the native code (a Rust panic, caught before it reaches the
interpreter) raises :class:`InternalError`.
"""

from typing import Optional

from ._walras import InternalError

__all__ = ["ApiError", "InternalError"]


class ApiError(Exception):
    """A request to a node failed.

    Attributes:
        code: the API's error code (``replayed``, ``unknown_account``, ``mempool_full``,
            ``rate_limited``, ``not_found``, ...), or ``unreachable`` when no answer came, or
            ``protocol`` when the answer was not the API's, or the drop reason of a
            transaction that a block dropped (``account_overdraft``, ...).
        status: the HTTP status when the node answered, else ``None``.
        retry_after_s: seconds the node asked to wait before retrying (503, 429), else ``None``.
        message: the whole message, as ``str(error)`` gives it.
    """

    def __init__(
        self,
        message: str,
        code: str,
        status: Optional[int] = None,
        retry_after_s: Optional[float] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.retry_after_s = retry_after_s

    def __repr__(self) -> str:
        return f"ApiError(code={self.code!r}, status={self.status!r}, message={self.message!r})"

"""Errors: what berthd answered when it said no, and the connection's end.

An error answer of berthd (PROTOCOL.md, "Errors") is raised as a
:class:`BerthError` carrying the protocol's ``code``, ``message`` and
``data``; each code has its own subclass, so that ``except berth.NotFound``
reads as what it catches. A connection that breaks, or that cannot be
made, is an :class:`OSError` as everywhere in Python: requests that were
waiting for an answer fail with :class:`ConnectionClosed`. The split is the
one of the ``berth`` command's exit status: 1 when berthd refused, 3 when it
cannot be reached.
"""
from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "BerthError",
    "ParseError",
    "InvalidRequest",
    "MethodNotFound",
    "InvalidParams",
    "InternalError",
    "Unauthorized",
    "NotFound",
    "Conflict",
    "Overloaded",
    "StorageFailure",
    "ConnectionClosed",
    "RegistrationError",
]


class BerthError(Exception):
    """An error answer of berthd: ``code``, ``message`` and ``data``.

    ``BerthError(code, message, data)`` builds the subclass of ``code``
    when there is one, so ``BerthError(-32011, "...")`` is a
    :class:`NotFound`.
    """

    code: int
    message: str
    data: Any
    #: The protocol code of the subclass (None on BerthError itself).
    CODE: ClassVar[int | None] = None

    def __new__(cls, code: int, message: str = "", data: Any = None):
        if cls is BerthError:
            cls = _BY_CODE.get(code, BerthError)
        return super().__new__(cls)

    def __init__(self, code: int, message: str = "", data: Any = None):
        super().__init__(code, message, data)
        self.code = code
        self.message = message
        self.data = data

    def __str__(self) -> str:
        return "%s (%d)" % (self.message or "error", self.code)

    def __repr__(self) -> str:
        return "%s(%d, %r, %r)" % (type(self).__name__, self.code,
                                   self.message, self.data)

    def __reduce__(self):
        return (BerthError, (self.code, self.message, self.data))

    @classmethod
    def from_wire(cls, error: Any) -> "BerthError":
        """The exception of a JSON-RPC error object as berthd sent it.

        A malformed object still gives an error (-32603) that says what
        arrived, rather than a second exception.
        """
        if not isinstance(error, dict):
            return BerthError(-32603, "berthd answered with a malformed "
                              "error: %r" % (error,))
        code = error.get("code")
        if not isinstance(code, int) or isinstance(code, bool):
            code = -32603
        message = error.get("message")
        if not isinstance(message, str):
            message = "berthd answered error %d with no message" % code
        return BerthError(code, message, error.get("data"))

    @property
    def errors(self) -> list[dict[str, Any]]:
        """The schema errors of ``data.errors`` (``instancePath``,
        ``keyword``, ``message``), or an empty list."""
        if isinstance(self.data, dict):
            errs = self.data.get("errors")
            if isinstance(errs, list):
                return errs
        return []


class ParseError(BerthError):
    """-32700: berthd could not parse a line."""
    CODE = -32700


class InvalidRequest(BerthError):
    """-32600: not JSON-RPC, or over a limit (``data.limit``)."""
    CODE = -32600


class MethodNotFound(BerthError):
    """-32601: berthd has no such method."""
    CODE = -32601


class InvalidParams(BerthError):
    """-32602: bad params, including input that fails a tool's schema;
    :attr:`errors` lists each schema error."""
    CODE = -32602


class InternalError(BerthError):
    """-32603: berthd failed inside."""
    CODE = -32603


class Unauthorized(BerthError):
    """-32010: no token yet on TCP, a wrong token, or a role the caller
    lacks."""
    CODE = -32010


class NotFound(BerthError):
    """-32011: no such job, tool or subscription (``data.id``)."""
    CODE = -32011


class Conflict(BerthError):
    """-32012: the job's status does not allow this (``data.status``)."""
    CODE = -32012

    @property
    def status(self) -> str | None:
        """The status that refused the request (``data.status``)."""
        if isinstance(self.data, dict):
            s = self.data.get("status")
            return s if isinstance(s, str) else None
        return None


class Overloaded(BerthError):
    """-32013: a queue or connection limit (``data.limit``)."""
    CODE = -32013


class StorageFailure(BerthError):
    """-32014: the store failed (disk full, database locked); nothing was
    changed, so the same request may be sent again."""
    CODE = -32014


_BY_CODE: dict[int, type[BerthError]] = {
    c.CODE: c for c in (ParseError, InvalidRequest, MethodNotFound,
                        InvalidParams, InternalError, Unauthorized, NotFound,
                        Conflict, Overloaded, StorageFailure)
    if c.CODE is not None
}


class ConnectionClosed(ConnectionError):
    """The connection to berthd closed while a request waited for its
    answer (or before it could be sent).

    Whether a mutation sent before the close took effect is unknown: send
    it again with the same ``idempotency_key`` (submit), or read the job
    (the others are refused with :class:`Conflict` when already done).
    """


class RegistrationError(Exception):
    """berthd refused a worker's ``worker/register`` for good: a definition
    that does not check, a tool id that is one of berthd's own, a role the
    worker lacks. ``error`` is berthd's answer."""

    def __init__(self, error: BerthError):
        super().__init__("berthd refused to register the tools: %s"
                         % error)
        self.error = error

"""The wire: PROTOCOL.md's framing and JSON-RPC 2.0 over one connection.

One message per line: UTF-8 JSON without a raw newline, ended by ``\\n`` (a
``\\r`` before it is tolerated). Both sides may send requests; answers come
in any order and are matched by id. :class:`Connection` is an asyncio
``Protocol`` rather than a stream reader, because the hot path of a worker
is "a line arrives, a run starts, an outcome leaves", and it should cost
one ``json.loads`` per line, no task per message and one ``write`` per loop
turn, however many messages that turn produced.

Lines that berthd would refuse are refused here, before they are sent,
with the error berthd would have answered (a line over 16 MiB, nesting
deeper than 64, a string holding U+0000, an integer outside 64 bits): berthd
answers those with ``id: null``, which no request could be matched with,
so sending them would leave the request waiting for ever.
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable

from .errors import BerthError, ConnectionClosed, InvalidRequest

__all__ = ["Address", "Connection", "MAX_LINE", "MAX_DEPTH", "encode",
           "open_connection", "parse_address", "default_address",
           "safe_text", "scrub"]

log = logging.getLogger("berth")

#: berthd's line limit (PROTOCOL.md, "Limits"): a longer line is refused.
MAX_LINE = 16 * 1024 * 1024
#: berthd's nesting limit of arrays and objects in one line.
MAX_DEPTH = 64
#: The longest line this side accepts from berthd before it gives up on
#: the connection: far above anything berthd sends (a page of 1,000 jobs),
#: so that only a peer that is not berthd ever reaches it.
READ_LIMIT = 256 * 1024 * 1024



def _default(o: Any) -> Any:
    """The JSON of what json cannot encode by itself: pydantic models (as
    their JSON, by alias, as their JSON Schema names the fields: the
    schema a tool registers is the model's), dataclass instances (as
    dicts)."""
    dump = getattr(o, "model_dump", None)
    if dump is not None and not isinstance(o, type):
        return dump(mode="json", by_alias=True)
    if hasattr(o, "__fields__") and hasattr(o, "json") and \
            not isinstance(o, type):
        return json.loads(o.json(by_alias=True))  # pydantic 1
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return {f.name: getattr(o, f.name) for f in dataclasses.fields(o)}
    if isinstance(o, Mapping):
        # The read-only views the SDK hands a tool (ctx.request_context,
        # ctx.metadata: MappingProxyType) go back as the dicts they show.
        return dict(o)
    raise TypeError("Object of type %s is not JSON serializable"
                    % type(o).__name__)


def _make_dumps() -> Callable[[Any], str]:
    """The encoder of every line: compact, UTF-8 as it is, no NaN. With
    json's C accelerator it is made once, not once per message as
    json.dumps does, and without markers (what makes it safe to share
    between threads): a circular structure is a RecursionError, turned
    into a ValueError by encode."""
    make = getattr(json.encoder, "c_make_encoder", None)
    basestring = getattr(json.encoder, "c_encode_basestring", None)
    if make is None or basestring is None:
        return json.JSONEncoder(ensure_ascii=False, separators=(",", ":"),
                                allow_nan=False, default=_default).encode
    c_encoder = make(None, _default, basestring, None, ":", ",", False,
                     False, False)
    return lambda o: "".join(c_encoder(o, 0))


_dumps = _make_dumps()
# The C scanner of a JSON text, without json.loads' wrappers (which detect
# the encoding of bytes and check what follows in Python).
_scan = getattr(json.JSONDecoder(), "scan_once")
_SPACE = frozenset(" \t\r\n")


def _loads(line: bytes) -> Any:
    """_loads parses one line; a line that is not one JSON value raises
    ValueError (json.loads' own, with its message)."""
    try:
        text = line.decode()
        value, end = _scan(text, 0)
    except (StopIteration, ValueError):
        return json.loads(line)
    if end != len(text) and not all(c in _SPACE for c in text[end:]):
        return json.loads(line)
    return value

# A JSON string, so that what is inside strings is skipped, or a bracket.
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_BRACKETS = re.compile(_STRING + rb'|[\[\]{}]')
# A JSON string, or an integer of 19 digits or more (2**63 has 19).
_BIG_INT = re.compile(_STRING + rb'|-?\d{19,}(?![.eE\d])')
_LONG_DIGITS = re.compile(rb'\d{19}')
# \u0000 as an escape: an odd number of backslashes before "u0000".
_NUL = re.compile(rb'(?<!\\)(?:\\\\)*\\u0000')
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def encode(msg: Any, what: str = "the message",
           max_line: int = MAX_LINE) -> bytes:
    """encode returns msg as one line of the wire, newline included.

    Raises TypeError or ValueError for what is not JSON (an object json
    cannot encode, NaN, a lone surrogate), and the BerthError berthd would
    answer for a line it refuses (InvalidRequest, -32600: over a limit, or
    holding what its parser rejects). ``what`` names the message in errors,
    and an error about a string names where in msg it is.
    """
    try:
        text = _dumps(msg)
    except TypeError as e:
        raise TypeError("%s is not JSON: %s" % (what, e)) from None
    except ValueError as e:
        raise ValueError("%s is not JSON: %s" % (what, e)) from None
    except RecursionError:
        raise ValueError("%s is not JSON: it contains itself, or is nested "
                         "too deeply to encode" % what) from None
    try:
        line = text.encode()
    except UnicodeEncodeError as e:
        raise ValueError("%s is not JSON: %s holds %r, a lone surrogate, "
                         "which is not Unicode"
                         % (what, _where(msg, _SURROGATE) or "a string",
                            e.object[e.start:e.end])) from None
    try:
        check_line(line, what, max_line)
    except _BigInteger as e:
        where = _where_integer(msg)
        if where is None:
            raise InvalidRequest(e.code, e.message, e.data) from None
        raise InvalidRequest(e.code, "%s holds the integer %d at %s, "
                             "outside the 64 bits berthd's JSON parser "
                             "takes" % (what, e.integer, where)) from None
    except InvalidRequest as e:
        where = _where(msg, _NUL_CHAR) if _NUL.search(line) else None
        if where is None:
            raise
        raise InvalidRequest(e.code, "%s holds U+0000 (NUL) in %s, which "
                             "berthd's JSON parser refuses"
                             % (what, where)) from None
    return line + b"\n"


class _BigInteger(InvalidRequest):
    """check_line's refusal of an integer beyond 64 bits, which encode
    tells where it is."""

    def __init__(self, code: int, message: str, integer: int):
        super().__init__(code, message)
        self.integer = integer


def _where_integer(value: Any) -> str | None:
    """_where_integer is the JSON pointer of the first integer in value
    that is outside 64 bits ("/a/0", or "the top level"), or None."""
    try:
        found = _find(value, None, "")
    except RecursionError:
        return None
    if found is None:
        return None
    return found[0] or "the top level"


# What a Python str may hold that berthd refuses: U+0000, and surrogates,
# which are not Unicode (no UTF-8 carries one, and berthd's parser refuses
# one written as an escape).
_UNSAFE = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_NUL_CHAR = re.compile("\x00")


def safe_text(text: str) -> str:
    """safe_text returns text with U+FFFD, the replacement character, in
    place of each U+0000 and surrogate: text berthd takes, for what is
    only read (an error's message, a log line)."""
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub("\ufffd", text)


def scrub(value: Any) -> Any:
    """scrub returns value with :func:`safe_text` applied to each string
    in it, keys included (a copy; dataclasses and pydantic models become
    their JSON). What it cannot look into is left as it is."""
    try:
        return _scrub(value)
    except RecursionError:
        return value


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return safe_text(value)
    if value is None or isinstance(value, (int, float)):
        return value
    if isinstance(value, dict):
        return {safe_text(k) if isinstance(k, str) else k: _scrub(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub(v) for v in value]
    try:
        return _scrub(_default(value))
    except TypeError:
        return value


def _where(value: Any, bad: re.Pattern) -> str | None:
    """_where says where in value the first string that bad matches in is:
    "the string at /a/0", "the key at /a/b" (a JSON pointer, with what bad
    matches in it escaped), or None when there is none."""
    try:
        found = _find(value, bad, "")
    except RecursionError:
        return None
    if found is None:
        return None
    pointer, key = found
    return "the %s at %s" % ("key" if key else "string",
                             pointer or "the top level")


def _find(value: Any, bad: re.Pattern | None, pointer: str
          ) -> tuple[str, bool] | None:
    """_find finds the first string that bad matches in, or, with bad
    None, the first integer outside 64 bits."""
    if isinstance(value, str):
        return (pointer, False) if bad is not None and bad.search(value) \
            else None
    if isinstance(value, int) and not isinstance(value, bool):
        return (pointer, False) if bad is None and not \
            _INT64_MIN <= value <= _INT64_MAX else None
    if value is None or isinstance(value, float):
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            part = "%s/%s" % (pointer, _pointer_part(k))
            if isinstance(k, str) and bad is not None and bad.search(k):
                return part, True
            found = _find(v, bad, part)
            if found is not None:
                return found
        return None
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _find(v, bad, "%s/%d" % (pointer, i))
            if found is not None:
                return found
        return None
    try:
        return _find(_default(value), bad, pointer)
    except TypeError:
        return None


def _pointer_part(key: Any) -> str:
    """A member's name in a JSON pointer, with U+0000 and surrogates
    written as escapes (the pointer is read in an error message)."""
    if not isinstance(key, str):
        key = json.dumps(key)
    key = key.replace("~", "~0").replace("/", "~1")
    return _UNSAFE.sub(lambda m: "\\u%04x" % ord(m.group()), key)


def check_line(line: bytes, what: str = "the message",
               max_line: int = MAX_LINE, max_depth: int = MAX_DEPTH) -> None:
    """check_line raises the error berthd would answer for line, or
    returns. Each check starts with a test of C speed (a length, a count,
    a substring search), so a line that passes costs next to nothing."""
    if len(line) > max_line:
        raise InvalidRequest(-32600, "%s is %d bytes, longer than berthd's "
                             "line limit of %d bytes"
                             % (what, len(line), max_line),
                             {"limit": max_line})
    if line.count(b"[") + line.count(b"{") > max_depth:
        depth = 0
        for m in _BRACKETS.finditer(line):
            c = m.group()[0]
            if c == 0x5B or c == 0x7B:
                depth += 1
                if depth > max_depth:
                    raise InvalidRequest(
                        -32600, "%s nests arrays and objects deeper than "
                        "berthd's limit of %d" % (what, max_depth),
                        {"limit": max_depth})
            elif c != 0x22:
                depth -= 1
    if b"\\u0000" in line and _NUL.search(line):
        raise InvalidRequest(-32600, "%s holds a string with U+0000 "
                             "(NUL), which berthd's JSON parser refuses"
                             % what)
    if _LONG_DIGITS.search(line):
        for m in _BIG_INT.finditer(line):
            t = m.group()
            if t[0] != 0x22 and not _INT64_MIN <= int(t) <= _INT64_MAX:
                raise _BigInteger(-32600, "%s holds the integer %s, "
                                  "outside the 64 bits berthd's JSON "
                                  "parser takes" % (what, t.decode()),
                                  int(t))


# ---- addresses --------------------------------------------------------------

@dataclass(frozen=True)
class Address:
    """Where berthd listens: a Unix socket path, or TCP host and port."""
    path: str | None = None
    host: str | None = None
    port: int | None = None

    @property
    def is_tcp(self) -> bool:
        return self.path is None

    def __str__(self) -> str:
        if self.path is not None:
            return self.path
        host = "[%s]" % self.host if ":" in (self.host or "") else self.host
        return "tcp://%s:%s" % (host, self.port)


def _parse_hostport(spec: str, given: str) -> Address:
    if spec.startswith("["):
        host, sep, rest = spec[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ValueError("%r: expected tcp://[IPV6]:PORT" % given)
        port = rest[1:]
    else:
        host, sep, port = spec.rpartition(":")
        if not sep:
            raise ValueError("%r: expected tcp://HOST:PORT" % given)
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("%r: the port must be a number from 1 to 65535"
                         % given)
    return Address(host=host or "127.0.0.1", port=int(port))


def parse_address(where: str) -> Address:
    """parse_address reads a Unix socket path, ``unix:PATH``,
    ``tcp://HOST:PORT`` or the ``berth`` command's ``tcp:HOST:PORT``."""
    if not isinstance(where, str) or not where:
        raise ValueError("berthd's address must be a non-empty string, not "
                         "%r" % (where,))
    if where.startswith("tcp://"):
        return _parse_hostport(where[6:].rstrip("/"), where)
    if where.startswith("tcp:"):
        return _parse_hostport(where[4:], where)
    if where.startswith("unix://"):
        return Address(path=where[7:])
    if where.startswith("unix:"):
        return Address(path=where[5:])
    if "://" in where:
        raise ValueError("%r: berthd is reached by a Unix socket path, "
                         "unix:PATH or tcp://HOST:PORT" % where)
    return Address(path=where)


def default_address() -> Address:
    """The address the ``berth`` command uses: $BERTH_SOCKET, else
    $XDG_RUNTIME_DIR/berth/berth.sock, else ./berth.sock."""
    env = os.environ.get("BERTH_SOCKET")
    if env:
        return parse_address(env)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return Address(path=os.path.join(xdg, "berth", "berth.sock"))
    return Address(path="./berth.sock")


def resolve_address(socket: str | None, url: str | None) -> Address:
    """The address of ``socket=`` or ``url=`` (not both), or the default."""
    if socket is not None and url is not None:
        raise ValueError("give berthd's address once: socket= or url=, "
                         "not both")
    if socket is not None:
        return parse_address(socket)
    if url is not None:
        return parse_address(url)
    return default_address()


# ---- the connection ---------------------------------------------------------

RequestHandler = Callable[["Connection", dict], None]
NotificationHandler = Callable[[str, Any], None]


#: How long Connection.close() waits for berthd to take any of the lines
#: still queued before it drops them with the connection.
CLOSE_GRACE = 1.0


class Connection(asyncio.Protocol):
    """One JSON-RPC connection to berthd.

    ``on_request(conn, msg)`` is called for each request of berthd (a
    message with ``method`` and ``id``), in the loop and without a task;
    it answers with :meth:`respond` or :meth:`respond_error`, now or later.
    Without one, ``ping`` is answered ``{}`` and anything else -32601.
    ``routes`` maps a subscription id to the function that takes its
    ``events/event`` and ``events/progress`` notifications; others go to
    ``on_notification(method, params)``. ``on_close`` callbacks run once
    when the connection is gone, with the exception that ended it.
    """

    def __init__(self, *, on_request: RequestHandler | None = None,
                 on_notification: NotificationHandler | None = None,
                 max_line: int = MAX_LINE, read_limit: int = READ_LIMIT):
        self.on_request = on_request
        self.on_notification = on_notification
        self.routes: dict[str, Callable[[str, dict], None]] = {}
        self.max_line = max_line
        self.read_limit = read_limit
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, asyncio.Future] = {}
        self._on_result: dict[int, Callable[[Any], None]] = {}
        self._next_id = 0
        self._wbuf: list[bytes] = []
        self._flush_handle: asyncio.Handle | None = None
        self._parts: list[bytes] = []
        self._plen = 0
        self._paused = False
        self._drained: asyncio.Future | None = None
        self._close_callbacks: list[Callable[[BaseException | None], None]] = []
        self.closed = False
        self.close_reason: BaseException | None = None
        self._lost = self._loop.create_future()
        #: The loop's time when berthd last sent anything (heartbeats).
        self.last_seen = self._loop.time()

    # -- asyncio.Protocol ---------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.last_seen = self._loop.time()
        start = 0
        nl = data.find(b"\n")
        if nl < 0:
            self._keep(data)
            return
        if self._parts:
            self._parts.append(data[:nl])
            line = b"".join(self._parts)
            self._parts.clear()
            self._plen = 0
            self._line(line)
            start = nl + 1
            nl = data.find(b"\n", start)
        while nl >= 0 and not self.closed:
            if nl > start:
                self._line(data[start:nl])
            start = nl + 1
            nl = data.find(b"\n", start)
        if start < len(data) and not self.closed:
            self._keep(data[start:])

    def eof_received(self) -> bool:
        if self._parts:
            line = b"".join(self._parts)
            self._parts.clear()
            self._line(line)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._gone(exc if exc is not None else self.close_reason)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    # -- reading --------------------------------------------------------------

    def _keep(self, part: bytes) -> None:
        self._plen += len(part)
        if self._plen > self.read_limit:
            self.abort(ConnectionClosed(
                "berthd sent a line longer than %d bytes; closed the "
                "connection" % self.read_limit))
            return
        self._parts.append(part)

    def _line(self, line: bytes) -> None:
        try:
            msg = _loads(line)
        except ValueError as e:
            if not line.strip():
                return
            self.abort(ConnectionClosed(
                "berthd sent a line that is not JSON (%s): %r"
                % (e, line[:200])))
            return
        if type(msg) is dict:
            self._message(msg)
        elif type(msg) is list:
            for m in msg:
                if type(m) is dict:
                    self._message(m)
        else:
            log.warning("berth: dropped a message of berthd that is not "
                        "an object: %r", line[:200])

    def _message(self, msg: dict) -> None:
        method = msg.get("method")
        if method is None:
            rid: Any = msg.get("id")
            fut = self._pending.pop(rid, None) if type(rid) is int else None
            if fut is None:
                if rid is None and "error" in msg:
                    log.warning("berth: berthd refused a line of ours: %s",
                                BerthError.from_wire(msg["error"]))
                return
            if fut.done():
                return
            if "error" in msg:
                self._on_result.pop(rid, None)
                fut.set_exception(BerthError.from_wire(msg["error"]))
            else:
                result = msg.get("result")
                cb = self._on_result.pop(rid, None)
                if cb is not None:
                    cb(result)
                fut.set_result(result)
        elif "id" in msg:
            if self.on_request is not None:
                self.on_request(self, msg)
            elif method == "ping":
                self.respond(msg["id"], {})
            else:
                self.respond_error(msg["id"], -32601,
                                   "method not found: %s" % method)
        else:
            params = msg.get("params")
            if type(params) is dict:
                sub = params.get("subscription")
                if sub is not None:
                    route = self.routes.get(sub)
                    if route is not None:
                        route(method, params)
                    return
            if self.on_notification is not None:
                self.on_notification(method, params)

    # -- writing --------------------------------------------------------------

    def send_line(self, line: bytes) -> None:
        """send_line queues one encoded line; the lines queued in one turn
        of the loop leave in one write."""
        if self.closed:
            raise ConnectionClosed("the connection to berthd is closed")
        self._wbuf.append(line)
        if self._flush_handle is None:
            self._flush_handle = self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_handle = None
        if self._wbuf and self._transport is not None and not self.closed:
            data = self._wbuf[0] if len(self._wbuf) == 1 else \
                b"".join(self._wbuf)
            self._wbuf.clear()
            self._transport.write(data)

    def flush(self) -> None:
        """flush writes what is queued now rather than at the end of the
        loop's turn."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
        self._flush()

    async def writable(self) -> None:
        """writable returns once the transport's buffer is below its high
        mark (berthd reads what was sent)."""
        while self._paused and not self.closed:
            if self._drained is None:
                self._drained = self._loop.create_future()
            await asyncio.shield(self._drained)

    def start_request(self, method: str, params: Any = None,
                      on_result: Callable[[Any], None] | None = None
                      ) -> tuple[int, asyncio.Future]:
        """start_request sends a request and returns its id and the future
        of its result. ``on_result`` runs with the result as soon as the
        answer is read, before any later message is handled (a
        subscription's route is in place before its first event)."""
        self._next_id += 1
        rid = self._next_id
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        line = encode(msg, "the request %s" % method, self.max_line)
        if self.closed:
            raise ConnectionClosed("the connection to berthd is closed")
        fut = self._loop.create_future()
        self._pending[rid] = fut
        if on_result is not None:
            self._on_result[rid] = on_result
        self.send_line(line)
        return rid, fut

    async def request(self, method: str, params: Any = None,
                      on_result: Callable[[Any], None] | None = None) -> Any:
        """request sends a request and returns its result, or raises the
        BerthError berthd answered, or ConnectionClosed. Cancelling the
        caller forgets the request: its answer is dropped when it comes."""
        if self._paused:
            await self.writable()
        rid, fut = self.start_request(method, params, on_result)
        try:
            return await fut
        finally:
            self._pending.pop(rid, None)
            self._on_result.pop(rid, None)

    def notify(self, method: str, params: Any = None) -> None:
        """notify sends a notification (no answer)."""
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send_line(encode(msg, "the notification %s" % method,
                              self.max_line))

    def respond(self, rid: Any, result: Any) -> None:
        """respond answers berthd's request rid with result."""
        self.send_line(encode({"jsonrpc": "2.0", "id": rid,
                               "result": result},
                              "the answer", self.max_line))

    def respond_error(self, rid: Any, code: int, message: str,
                      data: Any = None) -> None:
        """respond_error answers berthd's request rid with an error."""
        err: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            err["data"] = data
        self.send_line(encode({"jsonrpc": "2.0", "id": rid, "error": err},
                              "the error answer", self.max_line))

    # -- closing --------------------------------------------------------------

    def on_close(self, cb: Callable[[BaseException | None], None]) -> None:
        """on_close registers cb to run once when the connection is gone
        (at once when it already is)."""
        if self.closed:
            self._loop.call_soon(cb, self.close_reason)
        else:
            self._close_callbacks.append(cb)

    def abort(self, reason: BaseException | None = None) -> None:
        """abort drops the connection now, unsent lines included."""
        if self.close_reason is None:
            self.close_reason = reason
        if self._transport is not None:
            self._transport.abort()
        self._gone(reason)

    async def close(self, grace: float = CLOSE_GRACE) -> None:
        """close sends what is queued, closes, and returns once the
        connection is gone. While berthd takes what is queued, close()
        waits; once it has taken nothing for ``grace`` seconds (a berthd
        that stopped reading), the rest is dropped with the connection,
        so that close() never waits for ever."""
        transport = self._transport
        if not self.closed and transport is not None:
            self.flush()
            transport.close()
            left = transport.get_write_buffer_size()
            while not self._lost.done():
                try:
                    await asyncio.wait_for(asyncio.shield(self._lost), grace)
                except asyncio.TimeoutError:
                    now = transport.get_write_buffer_size()
                    if now >= left:
                        self.abort(ConnectionClosed(
                            "berthd took none of the last %d bytes within "
                            "%g s; the connection was dropped" % (now, grace)))
                    left = now
        await asyncio.shield(self._lost)

    async def wait_closed(self) -> BaseException | None:
        """wait_closed returns, once the connection is gone, the exception
        that ended it (None for a clean close)."""
        await asyncio.shield(self._lost)
        return self.close_reason

    def _gone(self, exc: BaseException | None) -> None:
        if self.closed:
            return
        self.closed = True
        if self.close_reason is None:
            self.close_reason = exc
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        self._wbuf.clear()
        self._parts.clear()
        if isinstance(exc, ConnectionClosed):
            err: ConnectionClosed = exc
        else:
            err = ConnectionClosed("the connection to berthd closed"
                                   + (": %s" % exc if exc else ""))
            if exc is not None:
                err.__cause__ = exc
        pending, self._pending = self._pending, {}
        self._on_result.clear()
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(err)
                # Retrieved by its caller; this keeps asyncio from
                # reporting a caller that was cancelled meanwhile.
                fut.exception()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        callbacks, self._close_callbacks = self._close_callbacks, []
        for cb in callbacks:
            try:
                cb(exc)
            except Exception:  # a callback must not stop the others
                log.exception("berth: an on_close callback raised")
        if not self._lost.done():
            self._lost.set_result(None)


async def open_connection(address: Address, **kw: Any) -> Connection:
    """open_connection connects to address and returns the Connection.
    Raises OSError when berthd cannot be reached."""
    loop = asyncio.get_running_loop()
    conn = Connection(**kw)
    if address.path is not None:
        await loop.create_unix_connection(lambda: conn, address.path)
    else:
        assert address.host is not None and address.port is not None
        await loop.create_connection(lambda: conn, address.host,
                                     address.port)
    return conn


#: How long an attempt to connect (the socket and server/auth) may take.
CONNECT_TIMEOUT = 10.0


def check_connect_timeout(timeout: Any) -> float | None:
    """check_connect_timeout returns timeout, a number of seconds above 0
    or None (no bound), or raises ValueError naming it."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not timeout > 0 or timeout == math.inf:
        raise ValueError("connect_timeout must be a number of seconds above "
                         "0 (or None), not %r" % (timeout,))
    return float(timeout)


async def dial(address: Address, token: str | None,
               timeout: float | None, **kw: Any) -> Connection:
    """dial connects to address and, given a token, authenticates with it
    (server/auth, the first request berthd's TCP listener takes), within
    timeout seconds: a host that drops the connection's packets, or a
    berthd that never answers server/auth, would otherwise hold the
    attempt for minutes or for ever. Raises OSError when berthd cannot be
    reached (TimeoutError, one of them, naming the timeout), and the
    BerthError of a refused token."""
    conn: Connection | None = None
    try:
        async with asyncio.timeout(timeout) as limit:
            conn = await open_connection(address, **kw)
            if token is not None:
                await conn.request("server/auth", {"token": token})
    except TimeoutError:
        if conn is not None:
            conn.abort()
        if not limit.expired():
            raise
        raise TimeoutError("no answer from berthd at %s within %g s (the "
                           "connect_timeout)" % (address, timeout)) from None
    except BaseException:
        if conn is not None:
            conn.abort()
        raise
    return conn

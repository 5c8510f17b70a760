"""The client: every method of PROTOCOL.md, as coroutines on one connection.

    async with berth.Client("/run/user/1000/berth/berth.sock") as client:
        job = await client.submit("weather-tool", {"location": "Paris"})
        job = await client.wait(job["id"], timeout=30)

Requests are pipelined: any number of coroutines may call the same client
at once, each answer goes to its caller whatever order berthd answers in.
Durations are seconds (int, float or ``datetime.timedelta``), as everywhere
in asyncio; berthd's objects come back as the dicts it sent (berth.types).

The connection is opened on first use and again after it broke: a request
that was waiting when it broke fails with ConnectionClosed (its outcome is
unknown, so nothing is sent twice behind the caller's back), the next one
connects again. Only reads that are safe to repeat go on by themselves
across a reconnect: :meth:`Client.wait` and :meth:`Client.events`.
"""
from __future__ import annotations

import asyncio
import collections
import datetime
import logging
import random
from typing import Any, AsyncIterator, Iterable, Iterator, Literal

from .errors import BerthError, ConnectionClosed
from .types import (TERMINAL, Event, EventPage, Job, JobPage, LogLine,
                    LogPage, ProgressEvent, ServerInfo, Tool)
from .wire import (CONNECT_TIMEOUT, MAX_LINE, Address, Connection,
                   check_connect_timeout, dial, resolve_address)

__all__ = ["Client", "connect", "EventStream", "Duration"]

log = logging.getLogger("berth")

Duration = float | int | datetime.timedelta

#: A wait is sent to berthd in pieces of at most this long, so that a wait
#: its caller gave up (cancelled) holds berthd's side for at most this
#: long: the protocol has no way to call a wait off.
WAIT_PIECE = 30.0
#: How long after the end of its timeout a wait gives up on berthd's
#: answer (which berthd sends at that end): a wait with a timeout returns
#: or raises by then, whatever berthd does.
WAIT_ANSWER_GRACE = 1.0
#: Reconnecting: the first delay, doubled up to the last (WORKERS.md).
BACKOFF_FIRST, BACKOFF_MAX = 0.1, 5.0
#: Events a stream keeps for a consumer that does not read; past it, the
#: stream stops taking more and reads them again from the log once the
#: consumer has caught up (the log is durable, so none is lost).
EVENT_QUEUE_MAX = 10_000


def ms(value: Duration | None, name: str) -> int | None:
    """ms turns a duration in seconds (or a timedelta) into whole
    milliseconds, refusing what is not a non-negative number."""
    if value is None:
        return None
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("%s must be a number of seconds or a timedelta, "
                        "not %r" % (name, value))
    if not value >= 0 or value == float("inf"):
        raise ValueError("%s must be a finite number of seconds >= 0, not "
                         "%r" % (name, value))
    return round(value * 1000)


def _seconds(value: Duration | None) -> str:
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    return "%g" % value if value is not None else "none"


def iso_time(value: datetime.datetime | str, name: str) -> str:
    """iso_time renders an aware datetime as berthd's UTC time format."""
    if isinstance(value, str):
        return value
    if not isinstance(value, datetime.datetime):
        raise TypeError("%s must be a datetime or an ISO 8601 string, not "
                        "%r" % (name, value))
    if value.tzinfo is None:
        raise ValueError("%s must be an aware datetime (one with a "
                         "timezone), so that it names one moment" % name)
    v = value.astimezone(datetime.timezone.utc)
    return v.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (v.microsecond
                                                          // 1000)


def backoff_delays() -> Iterator[float]:
    """The delays between reconnects: 100 ms doubling to 5 s, each with
    up to a fifth added at random so that clients do not come back at
    once."""
    d = BACKOFF_FIRST
    while True:
        yield d * (1 + random.random() / 5)
        d = min(d * 2, BACKOFF_MAX)


def _put(params: dict, key: str, value: Any) -> None:
    if value is not None:
        params[key] = value


def _statuses(value: str | Iterable[str] | None) -> str | list | None:
    if value is None or isinstance(value, str):
        return value
    return list(value)


def _names(value: str | Iterable[str] | None, name: str
           ) -> str | list | None:
    """_names returns a name as it is and the names of an iterable as a
    list, raising TypeError for what is neither."""
    if value is None or isinstance(value, str):
        return value
    try:
        return list(value)
    except TypeError:
        raise TypeError("%s must be a str or an iterable of str, not %r"
                        % (name, value)) from None


class Client:
    """A connection to berthd and its methods.

    ``Client(socket)`` takes a Unix socket path, ``unix:PATH``,
    ``tcp://HOST:PORT`` or ``tcp:HOST:PORT``; ``Client(url=...)`` the same;
    with neither, the ``berth`` command's default ($BERTH_SOCKET, else
    $XDG_RUNTIME_DIR/berth/berth.sock, else ./berth.sock). ``token`` is sent
    with ``server/auth`` as the first request of every connection; TCP
    needs one. ``connect_timeout`` bounds an attempt to connect, the socket
    and ``server/auth`` (seconds, default 10; None for no bound): past it
    the attempt raises TimeoutError. Use it as ``async with Client(...) as
    client`` or ``client = await berth.connect(...)`` and ``await
    client.close()``.
    """

    def __init__(self, socket: str | None = None, *, url: str | None = None,
                 token: str | None = None, max_line: int = MAX_LINE,
                 connect_timeout: float | None = CONNECT_TIMEOUT):
        self.address: Address = resolve_address(socket, url)
        if self.address.is_tcp and not token:
            raise ValueError("berthd's TCP listener needs a token (the one "
                             "of berthd's --token-file): give token=")
        if token is not None and not isinstance(token, str):
            raise TypeError("token must be a string")
        self._token = token
        self._max_line = max_line
        self._connect_timeout = check_connect_timeout(connect_timeout)
        self._conn: Connection | None = None
        self._connecting: asyncio.Future | None = None
        self._closed = False
        self._streams: set[EventStream] = set()

    def __repr__(self) -> str:
        state = "closed" if self._closed else (
            "connected" if self._conn and not self._conn.closed else "idle")
        return "<berth.Client %s %s>" % (self.address, state)

    # -- the connection -------------------------------------------------------

    async def connect(self) -> "Client":
        """connect opens the connection now (it is otherwise opened on
        first use). Raises OSError when berthd cannot be reached."""
        await self._connection()
        return self

    async def __aenter__(self) -> "Client":
        return await self.connect()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """close ends the event streams and closes the connection, or
        gives up the attempt to make one: the calls in flight, those
        waiting for the attempt too, raise ConnectionClosed. The client
        cannot be used again."""
        self._closed = True
        # An attempt to connect under way is given up, and with it the
        # calls that wait for it (ConnectionClosed, in _connection), rather
        # than left to its connect_timeout (for ever with None).
        if self._connecting is not None:
            self._connecting.cancel()
        for s in list(self._streams):
            s._end()
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    async def _connection(self) -> Connection:
        """The open connection, opening one if there is none. Concurrent
        callers share one attempt."""
        if self._closed:
            raise ConnectionClosed("the client is closed")
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._open())
            self._connecting.add_done_callback(self._opened)
        attempt = self._connecting
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            # close() gave the attempt up, and this caller was not
            # cancelled itself (the shield was, with the attempt).
            task = asyncio.current_task()
            if attempt.cancelled() and self._closed and \
                    (task is None or not task.cancelling()):
                raise ConnectionClosed("the client is closed") from None
            raise

    def _opened(self, fut: asyncio.Future) -> None:
        self._connecting = None
        if not fut.cancelled():
            fut.exception()  # retrieved by the callers that awaited it

    async def _open(self) -> Connection:
        conn = await dial(self.address, self._token, self._connect_timeout,
                          max_line=self._max_line)
        if self._closed:
            conn.abort()
            raise ConnectionClosed("the client is closed")
        self._conn = conn
        return conn

    async def call(self, method: str, params: dict | None = None) -> Any:
        """call sends any method of the protocol and returns its result,
        or raises the BerthError berthd answered."""
        conn = await self._connection()
        return await conn.request(method, params)

    # -- server and tools -----------------------------------------------------

    async def info(self) -> ServerInfo:
        """``server/info``: name, version, durability, job counts..."""
        return await self.call("server/info")

    async def ping(self) -> None:
        await self.call("ping")

    async def tools(self) -> list[Tool]:
        """Every tool, all pages of ``tools/list`` read."""
        out: list[Tool] = []
        cursor = None
        while True:
            page = await self.call("tools/list",
                                   {"cursor": cursor} if cursor else {})
            out.extend(page.get("tools", ()))
            cursor = page.get("nextCursor")
            if not cursor:
                return out

    async def pause(self, tool: str) -> None:
        """``tools/pause``: no job of the tool starts until unpaused."""
        await self.call("tools/pause", {"name": tool})

    async def unpause(self, tool: str) -> None:
        await self.call("tools/unpause", {"name": tool})

    # -- jobs -----------------------------------------------------------------

    async def submit(self, tool: str, input: Any, *,
                     request_context: dict | None = None,
                     metadata: dict | None = None,
                     run_id: str | None = None,
                     tool_call_id: str | None = None,
                     idempotency_key: str | None = None,
                     priority: int | None = None,
                     run_at: datetime.datetime | str | None = None,
                     delay: Duration | None = None,
                     timeout: Duration | None = None,
                     max_retries: int | None = None,
                     ttl: Duration | None = None) -> Job:
        """``jobs/submit``: the job as submitted (``pending`` or
        ``awaiting_approval``). The same ``idempotency_key`` again returns
        the first job, which makes a submission safe to send again after
        ConnectionClosed. Input that fails the tool's schema raises
        InvalidParams, whose ``errors`` say where."""
        p: dict[str, Any] = {"tool": tool, "input": input}
        _put(p, "requestContext", request_context)
        _put(p, "metadata", metadata)
        _put(p, "runId", run_id)
        _put(p, "toolCallId", tool_call_id)
        _put(p, "idempotencyKey", idempotency_key)
        _put(p, "priority", priority)
        if run_at is not None:
            p["runAt"] = iso_time(run_at, "run_at")
        _put(p, "delayMs", ms(delay, "delay"))
        _put(p, "timeoutMs", ms(timeout, "timeout"))
        _put(p, "maxRetries", max_retries)
        _put(p, "ttlMs", ms(ttl, "ttl"))
        return await self.call("jobs/submit", p)

    async def get(self, id: str, *,
                  view: Literal["raw", "display", "transcript"] | None = None
                  ) -> Job:
        """``jobs/get``, raw or through the tool's display or transcript
        transform."""
        p = {"id": id}
        _put(p, "view", view)
        return await self.call("jobs/get", p)

    async def list_page(self, *, status: str | Iterable[str] | None = None,
                        tool: str | None = None, run_id: str | None = None,
                        limit: int | None = None,
                        cursor: str | None = None) -> JobPage:
        """One page of ``jobs/list``: ``{"jobs": [...], "nextCursor"?}``."""
        p: dict[str, Any] = {}
        _put(p, "status", _statuses(status))
        _put(p, "tool", tool)
        _put(p, "runId", run_id)
        _put(p, "limit", limit)
        _put(p, "cursor", cursor)
        return await self.call("jobs/list", p)

    async def list(self, *, status: str | Iterable[str] | None = None,
                   tool: str | None = None, run_id: str | None = None,
                   page_size: int | None = None) -> AsyncIterator[Job]:
        """Every job that matches, page after page of ``jobs/list``, each
        page read when the one before is used up."""
        cursor = None
        while True:
            page = await self.list_page(status=status, tool=tool,
                                        run_id=run_id, limit=page_size,
                                        cursor=cursor)
            for job in page.get("jobs", ()):
                yield job
            cursor = page.get("nextCursor")
            if not cursor:
                return

    async def wait(self, id: str, *, timeout: Duration | None = None,
                   until: str | Iterable[str] | None = None,
                   reconnect: bool = True) -> Job:
        """``jobs/wait``: the job once its status is in ``until`` (default:
        any but ``pending`` and ``running``), or terminal, or as it is when
        ``timeout`` seconds have passed (check its ``status``). Without a
        timeout it waits for as long as it takes, across reconnects to
        berthd unless ``reconnect=False``. With one it returns or raises
        by then: when berthd cannot be reached until the timeout, the
        last attempt's OSError; when berthd took the connection and does
        not answer (stopped, hung), TimeoutError a second after it. Cancel
        the calling task to stop waiting."""
        loop = asyncio.get_running_loop()
        left_ms = ms(timeout, "timeout")
        deadline = None if left_ms is None else loop.time() + left_ms / 1000
        want = _statuses(until)
        if isinstance(want, str):
            want = [want]
        delays = None
        while True:
            piece = WAIT_PIECE
            if deadline is not None:
                piece = max(0.0, min(piece, deadline - loop.time()))
            p: dict[str, Any] = {"id": id, "timeoutMs": round(piece * 1000)}
            _put(p, "until", want)
            try:
                if deadline is None:
                    job: Job = await self.call("jobs/wait", p)
                else:
                    # Bounded here too: a berthd that takes the connection
                    # and does not answer (stopped, hung) would hold the
                    # wait past its timeout.
                    job = await self._bounded_wait(p, piece, timeout)
            except (ConnectionClosed, OSError):
                if not reconnect or self._closed:
                    raise
                if deadline is not None and loop.time() >= deadline:
                    raise  # berthd could not be asked in time
                if delays is None:
                    delays = backoff_delays()
                delay = next(delays)
                if deadline is not None:
                    delay = min(delay, deadline - loop.time())
                await asyncio.sleep(delay)
                continue
            delays = None
            status = job.get("status")
            if status in TERMINAL or (
                    status not in ("pending", "running") if want is None
                    else status in want):
                return job
            if deadline is not None and loop.time() >= deadline:
                return job

    async def _bounded_wait(self, params: dict, piece: float,
                            timeout: Duration | None) -> Job:
        """_bounded_wait is one jobs/wait of piece seconds, given up
        WAIT_ANSWER_GRACE after berthd should have answered it (with
        TimeoutError)."""
        try:
            async with asyncio.timeout(piece + WAIT_ANSWER_GRACE) as bound:
                return await self.call("jobs/wait", params)
        except TimeoutError:
            if not bound.expired():
                raise  # connect_timeout's
            raise TimeoutError(
                "berthd at %s did not answer jobs/wait within %g s of its "
                "timeout (%s s): it is stopped or overloaded"
                % (self.address, WAIT_ANSWER_GRACE, _seconds(timeout))
            ) from None

    async def resume(self, id: str, data: Any) -> Job:
        """``jobs/resume`` of a suspended job with resume data (checked
        against the tool's resumeSchema: InvalidParams when it fails)."""
        return await self.call("jobs/resume", {"id": id, "resumeData": data})

    async def approve(self, id: str, *, note: str | None = None) -> Job:
        p = {"id": id}
        _put(p, "note", note)
        return await self.call("jobs/approve", p)

    async def decline(self, id: str, *, reason: str | None = None) -> Job:
        p = {"id": id}
        _put(p, "reason", reason)
        return await self.call("jobs/decline", p)

    async def cancel(self, id: str, *, reason: str | None = None) -> Job:
        p = {"id": id}
        _put(p, "reason", reason)
        return await self.call("jobs/cancel", p)

    async def retry(self, id: str) -> Job:
        """``jobs/retry``: a new job with the same tool, input and request
        context (its ``retryOf`` is id)."""
        return await self.call("jobs/retry", {"id": id})

    async def logs_page(self, id: str, *, after: int | None = None,
                        limit: int | None = None) -> LogPage:
        """One page of ``jobs/logs``: ``{"lines": [...], "next": N}``."""
        p: dict[str, Any] = {"id": id}
        _put(p, "after", after)
        _put(p, "limit", limit)
        return await self.call("jobs/logs", p)

    async def logs(self, id: str, *, after: int = 0) -> AsyncIterator[LogLine]:
        """Every log line of the job after line ``after``, oldest first, to
        the end there is now."""
        while True:
            page = await self.logs_page(id, after=after, limit=1000)
            lines = page.get("lines", ())
            for line in lines:
                yield line
            nxt = page.get("next", after)
            if not lines or nxt <= after:
                return
            after = nxt

    # -- events ---------------------------------------------------------------

    async def poll_events(self, *, since: int | None = None,
                          limit: int | None = None,
                          wait: Duration | None = None,
                          job_id: str | None = None,
                          types: str | Iterable[str] | None = None
                          ) -> EventPage:
        """One page of ``events/poll``: ``{"events": [...], "next": SEQ}``,
        waiting up to ``wait`` seconds for an event newer than ``since``.
        Poll on from ``next`` until it equals ``since``.

        ``types`` (an event type, or an iterable of them: berth.types's
        EventType) makes berthd read only events of those types: ``limit``
        counts them alone, ``next`` passes over the others (a page may be
        empty while the log goes on: berthd looks through at most 10,000
        seqs a poll), and ``wait`` waits for one of them. berthd refuses an
        empty list or an unknown name (InvalidParams naming ``/types``);
        what is neither a str nor an iterable is a TypeError."""
        p: dict[str, Any] = {}
        _put(p, "since", since)
        _put(p, "limit", limit)
        _put(p, "waitMs", ms(wait, "wait"))
        _put(p, "jobId", job_id)
        _put(p, "types", _names(types, "types"))
        return await self.call("events/poll", p)

    async def _head_seq(self) -> int:
        """_head_seq is the seq of the newest event in the log (0 when it
        is empty), found by bisection over events/poll, as the TypeScript
        SDK's headSeq does: berthd has no method that says it."""
        async def after(x: int) -> int | None:
            page = await self.poll_events(since=x, limit=1)
            events = page.get("events") or ()
            return events[0].get("seq") if events else None

        first = await after(0)
        if first is None:
            return 0
        lo, step = first, 1024
        while True:
            s = await after(lo + step)
            if s is None:
                hi = lo + step
                break
            lo, step = s, step * 2
        while lo < hi:
            mid = (lo + hi) // 2
            s = await after(mid)
            if s is None:
                hi = mid
            else:
                lo = s
        return lo

    def events(self, *, since: int | None = None, job_id: str | None = None,
               progress: bool = False,
               types: str | Iterable[str] | None = None,
               reconnect: bool = True) -> "EventStream":
        """The event log as an async iterator (``events/subscribe``).

        With ``since`` it replays the events after that seq, then goes
        live; without, it starts with the next event, and looks up where
        the log ends (events/poll) for a reconnect that comes before its
        first event. After a reconnect it subscribes again from the last
        event it handed out, so none is lost or repeated. The subscription starts at once when the client
        is connected, else at ``async with`` or the first read.
        ``types`` (an event type, or an iterable of them: berth.types's
        EventType) makes it hand out only events of those types, replayed
        and live; ``types=("completed", "failed", "timed_out", "declined",
        "cancelled", "expired")`` waits for jobs to end. berthd refuses an
        empty list or an unknown name (InvalidParams naming ``/types``,
        raised by the first read). ``progress=True`` adds the live
        progress reports (ProgressEvent dicts, which have no ``seq`` and
        are not in the log: those sent while disconnected are gone),
        whatever ``types`` says."""
        return EventStream(self, since=since, job_id=job_id,
                           progress=progress, types=types,
                           reconnect=reconnect)


async def connect(socket: str | None = None, *, url: str | None = None,
                  token: str | None = None, **kw: Any) -> Client:
    """connect returns a connected Client (see Client for the arguments).
    Raises OSError when berthd cannot be reached."""
    return await Client(socket, url=url, token=token, **kw).connect()


class EventStream:
    """An ``events/subscribe`` subscription as an async iterator.

        async with client.events(since=0) as events:
            async for event in events:
                ...

    ``async for`` works without ``async with`` too; :meth:`close` (or the
    end of ``async with``, or the client's close) unsubscribes and ends the
    iteration. ``last_seq`` is the seq of the last event handed out, to
    pass as ``since`` to a later stream.
    """

    def __init__(self, client: Client, *, since: int | None,
                 job_id: str | None, progress: bool,
                 types: str | Iterable[str] | None, reconnect: bool):
        if since is not None and (isinstance(since, bool) or
                                  not isinstance(since, int) or since < 0):
            raise ValueError("since must be an event seq (an integer >= 0)")
        self._client = client
        self._job_id = job_id
        self._progress = progress
        # A list, so that an iterator given once is read once, and every
        # subscription of the stream (after a reconnect too) asks for the
        # same types; berthd judges the names.
        self._types = _names(types, "types")
        self._reconnect = reconnect
        self._since = since          # where the next subscription starts
        self.last_seq: int | None = since
        self._queued_seq = since     # the last seq queued, for duplicates
        self._queue: collections.deque = collections.deque()
        self._waiter: asyncio.Future | None = None
        self._conn: Connection | None = None
        self._sub: str | None = None
        self._watched: Connection | None = None
        self._lost: BaseException | None = None
        self._ended = False
        self._starting: asyncio.Future | None = None
        #: The lookup of the end of the log, for a stream that started
        #: live: where it resumes from until it has an event.
        self._head: asyncio.Future | None = None
        client._streams.add(self)
        # Subscribed at once when the client is connected, so that the
        # stream sees what the caller does next; else at async with or at
        # the first read.
        if client.connected:
            self._starting = self._start(client._conn)  # type: ignore

    def __aiter__(self) -> "EventStream":
        return self

    async def __aenter__(self) -> "EventStream":
        """Subscribes now: the events that follow are the stream's."""
        if self._sub is None and not self._ended:
            await self._subscribe()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def __anext__(self) -> Event | ProgressEvent:
        delays = None
        while True:
            if self._queue:
                item = self._queue.popleft()
                seq = item.get("seq")
                if seq is not None:
                    self.last_seq = seq
                    self._since = seq
                return item
            if self._ended:
                raise StopAsyncIteration
            if self._sub is None:
                if self._lost is not None and not self._reconnect:
                    err, self._lost = self._lost, None
                    self._end()
                    raise err
                try:
                    await self._subscribe()
                    self._lost = None
                    delays = None
                except (ConnectionClosed, OSError):
                    if not self._reconnect or self._client._closed:
                        if self._client._closed:
                            self._end()
                            raise StopAsyncIteration from None
                        raise
                    if delays is None:
                        delays = backoff_delays()
                    await asyncio.sleep(next(delays))
                continue
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def _start(self, conn: Connection) -> asyncio.Future:
        """_start queues the subscribe request on conn now, so that it
        goes before whatever the caller sends next."""
        p: dict[str, Any] = {}
        _put(p, "since", self._since)
        _put(p, "jobId", self._job_id)
        _put(p, "types", self._types)
        if self._progress:
            p["progress"] = True
        self._queued_seq = self._since

        def route_in(result: Any) -> None:
            sub = result.get("subscription") if isinstance(result, dict) \
                else None
            if isinstance(sub, str) and not self._ended:
                self._sub = sub
                self._conn = conn
                conn.routes[sub] = self._deliver
                if self._watched is not conn:
                    self._watched = conn
                    conn.on_close(self._connection_lost)
                if self._since is None and self._reconnect and (
                        self._head is None or self._head.done()):
                    # Started live: find where the log ends, so that a
                    # reconnect before the first event resumes from there
                    # rather than live again, which would lose what was
                    # committed meanwhile.
                    self._head = asyncio.ensure_future(self._find_head())

        _, fut = conn.start_request("events/subscribe", p, on_result=route_in)
        # Retrieved here too, for a stream nobody iterates.
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())
        return fut

    async def _subscribe(self) -> None:
        fut, self._starting = self._starting, None
        if fut is None:
            fut = self._start(await self._client._connection())
        await fut
        if self._sub is None:
            raise ConnectionClosed("berthd answered events/subscribe "
                                   "without a subscription id")
        head = self._head
        if head is not None and not head.done():
            # The stream's position is known once it is subscribed.
            await asyncio.shield(head)

    async def _find_head(self) -> None:
        try:
            head = await self._client._head_seq()
        except (BerthError, OSError) as e:
            log.debug("berth: events: the end of the log was not found "
                      "(%s); a reconnect before the first event goes on "
                      "live", e)
            return
        if self._since is None:
            self._since = head

    def _deliver(self, method: str, params: dict) -> None:
        if method == "events/event":
            seq = params.get("seq")
            if isinstance(seq, int):
                if self._queued_seq is not None and seq <= self._queued_seq:
                    return  # already handed out before a resubscription
                if self._since is None:
                    # The stream started live: from now on it resumes
                    # from just before its first event.
                    self._since = seq - 1
                self._queued_seq = seq
        elif method != "events/progress":
            return
        if len(self._queue) >= EVENT_QUEUE_MAX:
            self._let_go()
            return
        self._queue.append(params)
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _let_go(self) -> None:
        """The consumer is too far behind: keep what is queued, let go of
        the subscription (what berthd sends for it is dropped); once the
        queue is used up the next read subscribes again from the last
        event handed out. Each round hands out a full queue, so a replay
        larger than the queue still gets through."""
        self._unroute(unsubscribe=True)

    def _unroute(self, unsubscribe: bool) -> None:
        conn, sub = self._conn, self._sub
        self._conn = self._sub = None
        if conn is not None and sub is not None:
            conn.routes.pop(sub, None)
            if unsubscribe and not conn.closed:
                try:
                    conn.notify("events/unsubscribe", {"subscription": sub})
                except ConnectionClosed:
                    pass

    def _connection_lost(self, exc: BaseException | None) -> None:
        if self._conn is None or not self._conn.closed:
            return
        self._conn = self._sub = None
        self._lost = exc if isinstance(exc, ConnectionClosed) else \
            ConnectionClosed("the connection to berthd closed"
                             + (": %s" % exc if exc else ""))
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _end(self) -> None:
        if self._ended:
            return
        self._ended = True
        self._client._streams.discard(self)
        self._unroute(unsubscribe=True)
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def close(self) -> None:
        """close unsubscribes and ends the iteration (events already
        queued are dropped)."""
        self._queue.clear()
        self._end()

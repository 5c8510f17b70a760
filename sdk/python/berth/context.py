"""What a tool's functions get: execute's context, and the arguments of the
hooks and transforms.

``execute(input, ctx)`` is Mastra's ``execute(inputData, context)`` in
Python's idioms:

=============================================  ==============================
Mastra                                         berth
=============================================  ==============================
``context.requestContext``                     ``ctx.request_context`` (a
                                               read-only Mapping)
``context.abortSignal``                        the task is cancelled
                                               (``CancelledError`` at its next
                                               ``await``); ``ctx.cancelled``,
                                               ``ctx.abort_reason``
``context.agent.suspend(payload)``             ``ctx.suspend(payload)``: ends
                                               the run (it raises Suspend)
``context.agent.resumeData``                   ``ctx.resume_data``
``context.agent.toolCallId``                   ``ctx.tool_call_id``
``context.workflow.state``/``setState``        ``ctx.state`` /
                                               ``await ctx.set_state(v)``
``context.observe`` logs                       ``ctx.log(message, ...)``
``context.mcp``                                ``ctx.mcp``
=============================================  ==============================

and berth's own: ``job_id``, ``attempt``, ``run_id``, ``metadata``,
``checkpoint`` and ``await ctx.save_checkpoint(v)`` (durable before it
returns), ``ctx.progress(...)``, ``suspend_payload`` (the last one, on a
run after a resume), ``approval``, ``deadline``.

A synchronous ``execute`` runs in a thread and gets a :class:`SyncContext`:
the same, except that ``save_checkpoint`` and ``set_state`` block until the
checkpoint is durable, and abort cannot interrupt a thread, so the function
looks at ``ctx.cancelled`` or sleeps with ``ctx.wait_cancelled(seconds)``.
"""
from __future__ import annotations

import asyncio
import contextvars
import datetime
import logging
import threading
import traceback
import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Mapping, NoReturn

from .errors import InvalidRequest
from .wire import encode, scrub

if TYPE_CHECKING:
    from .worker import _Run

__all__ = ["Context", "SyncContext", "CallInfo", "TransformContext",
           "JobLogHandler",
           "Suspend", "ToolError", "LogLevel"]

LogLevel = Literal["debug", "info", "warn", "error"]
_LEVELS = {"debug": "debug", "info": "info", "warn": "warn",
           "warning": "warn", "error": "error"}
_EMPTY: Mapping[str, Any] = types.MappingProxyType({})
_UNSET = object()


class Suspend(BaseException):
    """Raised by ``ctx.suspend(payload)`` to end the run with a suspend
    payload. It is a BaseException, as CancelledError is, so that a tool's
    ``except Exception`` does not swallow it."""

    def __init__(self, payload: Any = None):
        super().__init__(payload)
        self.payload = payload


class ToolError(Exception):
    """An error outcome with berth's fields: raise it from execute to set
    the job's ``error.code`` and ``error.data``, and ``retryable=False`` to
    fail the job at once whatever retries are left. Any other exception is
    an error outcome too (its type and message), retried while retries are
    left."""

    def __init__(self, message: str, *, code: str | None = None,
                 data: Any = None, retryable: bool | None = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.data = data
        self.retryable = retryable


def _mapping(value: Any) -> Mapping[str, Any]:
    if isinstance(value, dict):
        return types.MappingProxyType(value)
    return _EMPTY


def _parse_time(value: Any) -> datetime.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass(frozen=True)
class CallInfo:
    """What ``require_approval``, ``on_input_available`` and ``on_output``
    get beside the payload: the call they are about."""
    tool: str
    job_id: str
    tool_call_id: str | None = None
    run_id: str | None = None
    attempt: int = 1
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    request_context: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    mcp: Mapping[str, Any] | None = None

    @classmethod
    def of_job(cls, tool: str, job: dict) -> "CallInfo":
        mcp = job.get("mcp")
        return cls(tool=tool, job_id=job.get("id", ""),
                   tool_call_id=job.get("toolCallId"),
                   run_id=job.get("runId"), attempt=job.get("attempt", 1),
                   metadata=_mapping(job.get("metadata")),
                   request_context=_mapping(job.get("requestContext")),
                   mcp=_mapping(mcp) if isinstance(mcp, dict) else None)


@dataclass(frozen=True)
class TransformContext:
    """The one argument of a transform function, as Mastra's
    ToolPayloadTransformContext: the ``target`` (display or transcript),
    the ``stage``, and the payloads known at that stage (``payload`` is
    the stage's own: the input, output, error, suspend payload or resume
    data; the approval stage's is the input, what the approver decides
    on)."""
    target: str  # "display" or "transcript"
    stage: str
    tool: str
    job_id: str | None = None
    tool_call_id: str | None = None
    payload: Any = None
    input: Any = None
    output: Any = None
    error: Any = None
    suspend_payload: Any = None
    resume_data: Any = None
    approval: Any = None
    request_context: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


class Context:
    """The context of one run of an async ``execute`` (see the module's
    table). The fields are read-only; ``checkpoint`` and ``state`` follow
    what the run saved."""

    # The fields are read from the job when asked for, not copied into
    # the context when a run starts: a run costs what its tool reads.
    __slots__ = ("_run", "_job", "_resume", "_checkpoint", "abort_reason",
                 "__weakref__")

    def __init__(self, run: "_Run", job: dict):
        self._run = run
        self._job = job
        self._resume: Any = _UNSET
        self._checkpoint: Any = _UNSET
        #: Why the run was aborted: "cancelled", "timed_out", "shutdown" or
        #: "disconnected" (the connection to berthd was lost); else None.
        self.abort_reason: str | None = None

    def __repr__(self) -> str:
        return "<berth.%s %s job %s attempt %d>" % (
            type(self).__name__, self.tool, self.job_id, self.attempt)

    @property
    def job_id(self) -> str:
        return self._job.get("id", "")

    @property
    def tool(self) -> str:
        return self._job.get("tool", "")

    @property
    def attempt(self) -> int:
        """1 on the first run, one more with each retry and each re-run
        after an interruption."""
        return self._job.get("attempt", 1)

    @property
    def max_retries(self) -> int:
        return self._job.get("maxRetries", 0)

    @property
    def timeout(self) -> float | None:
        """The job's timeout in seconds."""
        t = self._job.get("timeoutMs")
        return t / 1000 if isinstance(t, (int, float)) else None

    @property
    def deadline(self) -> datetime.datetime | None:
        """When berthd times the run out (an aware datetime)."""
        return _parse_time(self._job.get("deadline"))

    @property
    def request_context(self) -> Mapping[str, Any]:
        """The job's request context (its schema's defaults applied), read
        only."""
        return _mapping(self._job.get("requestContext"))

    @property
    def resume_data(self) -> Any:
        """The resume data on a run after ``jobs/resume`` (a model instance
        when the resume schema is a pydantic model), else None."""
        if self._resume is _UNSET:
            return self._job.get("resumeData")
        return self._resume

    @property
    def suspend_payload(self) -> Any:
        """The last suspend payload, on a run after a resume."""
        return self._job.get("suspendPayload")

    @property
    def checkpoint(self) -> Any:
        """The last checkpoint saved (by this run or one before it)."""
        if self._checkpoint is _UNSET:
            return self._job.get("checkpoint")
        return self._checkpoint

    @property
    def approval(self) -> Mapping[str, Any] | None:
        """The approval decision, on a job that was approved."""
        a = self._job.get("approval")
        return _mapping(a) if isinstance(a, dict) else None

    @property
    def tool_call_id(self) -> str | None:
        return self._job.get("toolCallId")

    @property
    def run_id(self) -> str | None:
        return self._job.get("runId")

    @property
    def metadata(self) -> Mapping[str, Any]:
        return _mapping(self._job.get("metadata"))

    @property
    def mcp(self) -> Mapping[str, Any] | None:
        """``{"_meta", "clientInfo"}`` when the job came through MCP
        (the ``tools/call``'s ``_meta`` and the client that sent it, the
        job's ``metadata.mcp``), else None."""
        m = self._job.get("mcp")
        return _mapping(m) if isinstance(m, dict) else None

    @property
    def cancelled(self) -> bool:
        """True once berthd aborted the run (cancel, timeout, shutdown),
        the connection to it was lost, or the worker's close() aborted it
        at its timeout (``abort_reason`` says which)."""
        return self.abort_reason is not None

    @property
    def is_resume(self) -> bool:
        """True on a run after ``jobs/resume``."""
        return "resumeData" in self._job

    @property
    def state(self) -> Any:
        """Mastra's workflow state; berth keeps it as the job's
        checkpoint, so it is the same value as :attr:`checkpoint`."""
        return self.checkpoint

    def _abort(self, reason: str) -> None:
        if self.abort_reason is None:
            self.abort_reason = reason

    def suspend(self, payload: Any = None) -> NoReturn:
        """suspend ends the run with payload (checked against the tool's
        suspendSchema). The job waits ``suspended`` until ``jobs/resume``,
        then execute runs again from the top with ``ctx.resume_data``."""
        raise Suspend(payload)

    async def save_checkpoint(self, value: Any) -> None:
        """save_checkpoint stores value as the job's checkpoint and returns
        once it is durable: a run after a crash or a resume starts with it
        in ``ctx.checkpoint``. Raises a BerthError when the run is no
        longer this worker's (cancelled, timed out)."""
        await self._run.save_checkpoint(value)
        self._checkpoint = value

    async def set_state(self, value: Any) -> None:
        """set_state is Mastra's workflow ``setState``: the state replaces
        the checkpoint (see :attr:`state`)."""
        await self.save_checkpoint(value)

    def progress(self, progress: float, total: float | None = None,
                 message: str | None = None) -> None:
        """progress reports how far the run is (live, not in the log; the
        last report of a loop turn wins). U+0000 and lone surrogates in
        message become U+FFFD."""
        self._run.send_progress(_progress_params(self.job_id, progress,
                                                 total, message))

    def log(self, message: str, data: Any = None, *,
            level: LogLevel | str = "info") -> None:
        """log adds a line to the job's log (``jobs/logs``); level is
        debug, info, warn (or warning) or error. U+0000 and lone
        surrogates in its text, which berthd refuses, become U+FFFD."""
        self._run.send_log(_log_params(self.job_id, message, data, level))


def _progress_params(job_id: str, progress: Any, total: Any,
                     message: Any) -> dict:
    for name, v in (("progress", progress), ("total", total)):
        if v is not None and (isinstance(v, bool) or
                              not isinstance(v, (int, float))):
            raise TypeError("%s must be a number, not %r" % (name, v))
    if message is not None and not isinstance(message, str):
        raise TypeError("message must be a string, not %r" % (message,))
    p: dict[str, Any] = {"jobId": job_id, "progress": progress}
    if total is not None:
        p["total"] = total
    if message is not None:
        p["message"] = message
    return p


def _log_params(job_id: str, message: Any, data: Any, level: str) -> dict:
    lv = _LEVELS.get(level)
    if lv is None:
        raise ValueError("level must be debug, info, warn or error, not %r"
                         % (level,))
    p: dict[str, Any] = {"jobId": job_id, "level": lv,
                         "message": message if isinstance(message, str)
                         else str(message)}
    if data is not None:
        p["data"] = data
    return p


class SyncContext(Context):
    """The context of a synchronous ``execute``, which runs in a thread:
    every method may be called from that thread; ``save_checkpoint`` and
    ``set_state`` block until the checkpoint is durable."""

    __slots__ = ("_loop", "_aborted")

    def __init__(self, run: "_Run", job: dict,
                 loop: asyncio.AbstractEventLoop):
        super().__init__(run, job)
        self._loop = loop
        self._aborted = threading.Event()

    def _in_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def save_checkpoint(self, value: Any) -> None:  # type: ignore[override]
        """save_checkpoint stores value as the job's checkpoint and returns
        once it is durable (it blocks its thread meanwhile)."""
        if self._in_loop():
            raise RuntimeError("SyncContext.save_checkpoint blocks: call it "
                               "from the tool's thread, not the event loop")
        asyncio.run_coroutine_threadsafe(
            self._run.save_checkpoint(value), self._loop).result()
        self._checkpoint = value

    def set_state(self, value: Any) -> None:  # type: ignore[override]
        self.save_checkpoint(value)

    def progress(self, progress: float, total: float | None = None,
                 message: str | None = None) -> None:
        self._loop.call_soon_threadsafe(
            self._run.send_progress,
            _progress_params(self.job_id, progress, total, message))

    def log(self, message: str, data: Any = None, *,
            level: LogLevel | str = "info") -> None:
        p = _log_params(self.job_id, message, data, level)
        try:
            encode(p, "the log line")  # not JSON: raised here, in the tool
        except (ValueError, InvalidRequest):
            # U+0000 or a lone surrogate, as _Run.send_log takes them.
            p = scrub(p)
            encode(p, "the log line")
        self._loop.call_soon_threadsafe(self._run.send_log, p)

    def _abort(self, reason: str) -> None:
        super()._abort(reason)
        self._aborted.set()

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """wait_cancelled sleeps up to timeout seconds, or until the run is
        aborted; it returns True when it was."""
        return self._aborted.wait(timeout)


# The run whose code is running: set by the worker in each run's task, and
# so in the copy of its context that a plain execute's thread runs in.
current_run: contextvars.ContextVar["_Run | None"] = contextvars.ContextVar(
    "berth_current_run", default=None)

_LOG_LEVELS = ((logging.ERROR, "error"), (logging.WARNING, "warn"),
               (logging.INFO, "info"))


class JobLogHandler(logging.Handler):
    """A logging handler that adds each record logged while a tool runs
    (in execute, its hooks and transforms, and the threads of plain
    functions) to that job's log, as ``ctx.log`` does:

        logging.getLogger().addHandler(berth.JobLogHandler())

    Records logged outside a run, and the SDK's own (logger ``berth``,
    which logs on the job itself where it should), are left alone. The
    line's ``data`` holds the logger's name, and the traceback when the
    record has one.
    """

    def __init__(self, level: int = logging.NOTSET):
        super().__init__(level)

    def emit(self, record: logging.LogRecord) -> None:
        run = current_run.get()
        if run is None or record.name == "berth" or \
                record.name.startswith("berth."):
            return
        try:
            level = next((name for n, name in _LOG_LEVELS
                          if record.levelno >= n), "debug")
            data: dict[str, Any] = {"logger": record.name}
            if record.exc_info:
                data["traceback"] = "".join(
                    traceback.format_exception(*record.exc_info))
            line = {"jobId": run.job_id, "level": level,
                    "message": record.getMessage(), "data": data}
            loop = run.session.worker._loop
            try:
                here = asyncio.get_running_loop() is loop
            except RuntimeError:
                here = False
            if here:
                run.send_log(line)
            else:
                loop.call_soon_threadsafe(run.send_log, line)
        except Exception:
            self.handleError(record)


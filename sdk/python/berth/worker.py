"""The worker: serve tools to berthd (docs/WORKERS.md).

    asyncio.run(berth.serve([weather], socket="/run/user/1000/berth/berth.sock"))

A worker connects, registers its tools with ``worker/register``, and runs
the jobs berthd pushes with ``run``, up to ``concurrency`` at once. The
connection is the lease on those jobs: when it drops, every running
``execute`` is aborted (berthd applies each tool's ``onInterrupt``), and the
worker connects again with backoff (100 ms doubling to 5 s) and registers
again, for as long as it runs. ``close()`` drains: it asks berthd for no new
run (``worker/drain``), lets the running ones finish and closes (BullMQ's
``Worker.close()``); ``serve()`` does that on SIGTERM or Ctrl-C, and aborts
the runs on a second one. Once ``close()`` has begun the worker registers
on no new connection: a connection attempt under way is given up, and a
``worker/register`` under way is answered and drained like the registered
connection (berthd may have pushed it runs). A run that close() aborts
(at its timeout) answers what it returns within the abort grace; one that
stops by the abort is left unanswered, to its tool's ``onInterrupt``
(docs/WORKERS.md, "Shutdown").

Abort (cancel, timeout, shutdown) reaches an async ``execute`` as asyncio's
own cancellation: ``CancelledError`` at its next ``await``, which it may
catch to clean up and return what it has. A synchronous ``execute`` runs in
a thread, which nothing can interrupt: it sees ``ctx.cancelled`` turn true
(and ``ctx.wait_cancelled()`` return), and berthd ends the run after its
kill grace if the function goes on.
"""
from __future__ import annotations

import asyncio
import collections.abc
import concurrent.futures
import contextvars
import functools
import inspect
import logging
import math
import os
import signal
import socket as socket_module
import sys
import threading
import traceback
from typing import Any, Callable, Generator, Iterable

from . import __version__
from .client import backoff_delays
from .context import (CallInfo, Context, Suspend, SyncContext,
                      TransformContext, ToolError, _mapping, current_run)
from .errors import (BerthError, Conflict, ConnectionClosed, InvalidParams,
                     InvalidRequest, MethodNotFound, RegistrationError,
                     Unauthorized)
from .tool import Tool, _Fn, parse_model
from .wire import CONNECT_TIMEOUT, MAX_LINE, Address, Connection, \
    check_connect_timeout, dial, encode, resolve_address, safe_text, scrub

__all__ = ["Worker", "serve"]

log = logging.getLogger("berth.worker")

#: The heartbeat berthd names in its answer to worker/register, until it
#: has answered.
HEARTBEAT = 10.0
#: How long close() waits for berthd to answer worker/drain, or a
#: worker/register under way when it began. berthd answers both at once;
#: one that does not is not waited for (the runs still are).
DRAIN_ANSWER = 5.0
#: How long a run that was aborted has to answer: berthd's default
#: --kill-grace, the time berthd gives a run it aborts. close() gives it to
#: the runs it aborts at its timeout, and waits no longer for a run that
#: berthd aborted, or that a dropped connection did: berthd has given the
#: run up by then, or will not take its answer.
ABORT_GRACE = 5.0
#: How long the last lines may take to leave once close() closes the
#: connection; then it is dropped (a berthd that stopped reading).
FLUSH_GRACE = 1.0
#: The reason of close()'s own aborts (berthd's are cancelled, timed_out and
#: shutdown; a lost connection's is disconnected).
CLOSING = "closing"
#: The log lines an answer to input or transform carries at most (berthd
#: keeps 100, docs/WORKERS.md).
ANSWER_LOGS = 100
#: The longest error code berthd takes, in bytes (docs/WORKERS.md); it
#: puts tool_error in place of a longer one, or an empty one.
MAX_CODE = 128

_BEFORE, _EXECUTE, _AFTER = 0, 1, 2


def _placeholder(stage: str) -> dict[str, str]:
    """The view of a stage whose transform failed or returned None: a raw
    payload never stands in for a view the tool transforms (Mastra puts
    the same placeholder there)."""
    return {"message": "Tool %s payload unavailable" % stage}


def _error_of(e: BaseException,
              dropped: list[str] | None = None) -> dict[str, Any]:
    """_error_of is the error outcome of e: a ToolError's fields, or
    "Type: message" of any other exception. It never raises, whatever e
    does (a __str__ or an attribute that raises), and what it returns can
    be sent, so that the failure reaches berthd: U+0000 and lone
    surrogates in its text, which berthd refuses, are U+FFFD; data that
    cannot be sent (not JSON, over the line limit), and a code berthd
    would put tool_error in place of (not 1 to 128 bytes), are left out,
    and what was and why is appended to dropped. retryable is the
    ToolError's."""
    try:
        if isinstance(e, ToolError):
            return _tool_error_of(e, dropped)
        name = _type_name(e)
        try:
            text = str(e)
        except Exception as x:
            # The message it was made with, when str() of it fails.
            text = _first_arg(e)
            if text is None:
                return {"message": safe_text("%s (str() of it raised %s)"
                                             % (name, _type_name(x)))}
        return {"message": safe_text("%s: %s" % (name, text) if text
                                     else name)}
    except Exception:
        return {"message": "%s (the worker could not read it)"
                % _type_name(e)}


def _tool_error_of(e: ToolError, dropped: list[str] | None) -> dict[str, Any]:
    message = _field(e, "message")
    if not isinstance(message, str):
        message = _first_arg(e) if message is None else _text(message)
    err: dict[str, Any] = {"message": safe_text(message or _type_name(e))}
    code = _field(e, "code")
    if code is not None:
        code = safe_text(code if isinstance(code, str)
                         else _text(code) or "")
        size = len(code.encode())
        if 1 <= size <= MAX_CODE:
            err["code"] = code
        elif dropped is not None:
            dropped.append("the code of the error was left out: %s, and "
                           "berthd takes 1 to %d bytes (the job's code is "
                           "tool_error)" % ("it is empty" if not size else
                                            "it is %d bytes" % size,
                                            MAX_CODE))
    data = _field(e, "data")
    if data is not None:
        data = scrub(data)
        try:
            encode(data, "its data")
            err["data"] = data
        except (TypeError, ValueError, BerthError) as x:
            if dropped is not None:
                dropped.append("the data of the error was left out: "
                               + safe_text(x.message if isinstance(
                                   x, BerthError) else str(x)))
    retryable = _field(e, "retryable")
    if retryable is not None:
        try:
            err["retryable"] = bool(retryable)
        except Exception:
            err["retryable"] = False
    return err


def _field(e: BaseException, name: str) -> Any:
    try:
        return getattr(e, name, None)
    except Exception:
        return None


def _first_arg(e: BaseException) -> str | None:
    try:
        first = e.args[0] if e.args else None
    except Exception:
        return None
    return first if isinstance(first, str) else None


def _text(value: Any) -> str:
    try:
        return str(value)
    except Exception:
        return ""


def _type_name(o: Any) -> str:
    try:
        return type(o).__name__
    except Exception:
        return "an exception"


def _why(e: BaseException) -> str:
    """_why is what a refusal of encode() says (a BerthError's message
    without its code)."""
    return e.message if isinstance(e, BerthError) else str(e)


def _aborted(reason: str | None) -> dict[str, Any]:
    return {"error": {"message": "execute was aborted (%s)"
                      % (reason or "cancelled"), "code": "aborted"}}


def _describe_jobs(ids: list[str]) -> str:
    """_describe_jobs names jobs in a log line: "job A", or "3 jobs (A, B,
    C)"."""
    if len(ids) == 1:
        return "job %s" % ids[0]
    return "%d jobs (%s%s)" % (len(ids), ", ".join(ids[:10]),
                               ", ..." if len(ids) > 10 else "")


def _input_of(tool: Tool, job: dict) -> Any:
    """The input as the tool's hooks take it: a model instance when the
    input schema is a pydantic model (the raw input if the model refuses
    it: a hook is told, not checked)."""
    model = tool.models.get("inputSchema")
    if model is None:
        return job.get("input")
    try:
        return parse_model(model, job.get("input"))
    except Exception:
        return job.get("input")


class _Refused(Exception):
    """_Refused ends a run with an error outcome of the SDK's own,
    before execute: its views are made as for any error."""

    def __init__(self, error: dict[str, Any]):
        super().__init__(error["message"])
        self.error = error


def _parsed(model: Any, value: Any, code: str) -> Any:
    """_parsed is value as an instance of the tool's pydantic model, or
    raises _Refused with code (invalid_input, invalid_resume_data) when
    the model refuses what berthd validated."""
    try:
        return parse_model(model, value)
    except Exception as e:
        raise _Refused({"message": safe_text(
            "the tool's pydantic model refused what berthd validated: %s"
            % _text(e)), "code": code, "retryable": False}) from None


def _stage_payload(job: dict, stage: str) -> Any:
    # The approval stage's payload is the input the approver decides on
    # (docs/WORKERS.md).
    return job.get({"input": "input", "approval": "input",
                    "resume": "resumeData", "suspend": "suspendPayload",
                    "output": "output", "error": "error"}[stage])


class _Run:
    """One run berthd pushed: its request id, job and task."""

    __slots__ = ("session", "rid", "job", "job_id", "tool", "pending", "ctx",
                 "task", "phase", "answered", "grace_end", "stopped",
                 "decided", "superseded", "early_views")

    def __init__(self, session: "_Session", rid: Any, job: dict, tool: Tool,
                 pending: Any):
        self.session = session
        self.rid = rid
        self.job = job
        self.job_id: str = job["id"]
        self.tool = tool
        self.pending = pending if isinstance(pending, dict) else None
        loop = session.worker._loop
        self.ctx: Context = (Context(self, job) if tool.execute.is_async
                             else SyncContext(self, job, loop))
        self.task: asyncio.Task | None = None
        self.phase = _BEFORE
        self.answered = False
        #: When the abort grace of the run ends (the loop's time):
        #: ABORT_GRACE after it was first aborted; None until then.
        #: given_up() and the timer of _close_wait compare this one number
        #: with the clock, so that they never disagree about a moment.
        self.grace_end: float | None = None
        #: True when the run ended by its abort: the outcome is the SDK's
        #: ``aborted``, not one the tool returned or raised.
        self.stopped = False
        #: True once berthd aborted the run (a cancel, a timeout, its
        #: shutdown): berthd has decided its job, and may push the job's
        #: next run to this connection while this one goes on.
        self.decided = False
        #: True once berthd pushed a later run of the job to this
        #: connection: this one is given up, and what it still sends
        #: (a log line, progress, a checkpoint) would be taken for the
        #: later run's, so it sends nothing more; its answer, which goes
        #: by its own request id, only within its abort grace.
        self.superseded = False
        #: The views pending.views asked for, once made (None when none
        #: were): an error sent in place of an outcome berthd could not
        #: take carries them (_Session._fail_answer).
        self.early_views: dict[str, dict] | None = None

    @property
    def live(self) -> bool:
        return not self.answered and not self.superseded and \
            not self.session.conn.closed

    def send_progress(self, params: dict) -> None:
        if self.live:
            self.session.progress(params)

    def send_log(self, params: dict) -> None:
        if self.live:
            try:
                self.session.conn.notify("worker/log", params)
            except (ValueError, InvalidRequest):
                # U+0000 or a lone surrogate, which berthd refuses: a log
                # line is read, so it goes with U+FFFD in their place.
                # What scrub() cannot cure (NaN, an integer beyond 64
                # bits) raises again.
                self.session.conn.notify("worker/log", scrub(params))

    async def save_checkpoint(self, value: Any) -> None:
        if self.superseded:
            raise ConnectionClosed("berthd gave this run up and started a "
                                   "later run of the job; the checkpoint "
                                   "was not saved")
        if not self.live:
            raise ConnectionClosed("the run is over or its connection to "
                                   "berthd is gone; the checkpoint was not "
                                   "saved")
        await self.session.conn.request("worker/checkpoint",
                                        {"jobId": self.job_id,
                                         "value": value})

    def done(self, task: asyncio.Task) -> None:
        self.session._run_done(self, task)

    def abort(self, reason: str) -> None:
        """abort aborts the run with reason; the first abort's reason is
        the one the run sees, and starts its abort grace."""
        worker = self.session.worker
        if self.grace_end is None:
            self.grace_end = worker._loop.time() + ABORT_GRACE
        self.ctx._abort(reason)
        # Only an async execute is cancelled: what runs before it checks
        # ctx.cancelled, what runs after it keeps the outcome it has, and
        # a thread cannot be interrupted.
        if self.phase == _EXECUTE and self.tool.execute.is_async and \
                self.task is not None:
            self.task.cancel(reason)
        worker._poke()

    def given_up(self, now: float) -> bool:
        """given_up says whether the run was aborted longer than the abort
        grace ago: close() waits for it no longer."""
        return self.grace_end is not None and now >= self.grace_end


class _Session:
    """One connection of a worker to berthd, from register to close."""

    def __init__(self, worker: "Worker", conn: Connection):
        self.worker = worker
        self.conn = conn
        self.runs: dict[str, _Run] = {}
        #: How many of the runs berthd aborted (their ``decided``).
        self.aborted = 0
        self.calls: set[asyncio.Task] = set()  # input and transform
        self.worker_id: str | None = None
        self.heartbeat = HEARTBEAT
        self._progress: dict[str, dict] = {}
        self._progress_handle: asyncio.Handle | None = None
        self._hb_handle: asyncio.TimerHandle | None = None
        conn.on_request = self.on_request
        conn.on_notification = self.on_notification
        conn.on_close(self.closed)

    # -- berthd's requests and notifications ----------------------------------

    def on_request(self, conn: Connection, msg: dict) -> None:
        method, rid = msg["method"], msg["id"]
        params = msg.get("params")
        if method == "run":
            self._start_run(rid, params)
        elif method == "ping":
            conn.respond(rid, {})
        elif method == "transform":
            self._call(rid, self.worker._transform(self, params))
        elif method == "input":
            self._call(rid, self.worker._input(self, params))
        elif method == "abort":
            self.on_notification(method, params)
            conn.respond(rid, {})
        else:
            conn.respond_error(rid, -32601, "method not found: %s (a "
                               "worker serves run, input, transform, abort "
                               "and ping)" % method)

    def on_notification(self, method: str, params: Any) -> None:
        if method == "abort" and isinstance(params, dict):
            run = self.runs.get(params.get("jobId"))  # type: ignore[arg-type]
            if run is not None:
                reason = params.get("reason")
                if not run.decided:
                    run.decided = True
                    self.aborted += 1
                run.abort(reason if isinstance(reason, str) else "cancelled")
        elif method != "abort":
            log.debug("berth: dropped berthd's notification %s", method)

    def _start_run(self, rid: Any, params: Any) -> None:
        job = params.get("job") if isinstance(params, dict) else None
        if not isinstance(job, dict) or not isinstance(job.get("id"), str) \
                or not isinstance(job.get("tool"), str):
            self.conn.respond_error(rid, -32602, "run: params.job must be a "
                                    "job with an id and a tool")
            return
        tool = self.worker.tools.get(job["tool"])
        if tool is None:
            self.conn.respond(rid, {"error": {
                "message": "this worker does not serve the tool %s"
                % job["tool"], "code": "unknown_tool", "retryable": True}})
            return
        earlier = self.runs.get(job["id"])
        if earlier is not None and not earlier.decided:
            self.conn.respond_error(rid, -32012, "run: job %s is already "
                                    "running on this connection" % job["id"],
                                    {"status": "running"})
            return
        if earlier is not None:
            # berthd aborted the earlier run (its timeout) and pushes the
            # job's retry here while its execute goes on (once berthd gave
            # it up at its kill grace; an older berthd, at once when the
            # connection had a free run). Refused, the retry would fail
            # as worker_error; berthd has given the earlier run up, so
            # does the worker, and the new run starts.
            log.warning("berth: job %s: berthd started attempt %s while "
                        "the execute of the run it aborted (%s) has not "
                        "returned; that run is given up, and what it still "
                        "sends is dropped", job["id"], job.get("attempt"),
                        earlier.ctx.abort_reason)
            earlier.superseded = True
            del self.runs[job["id"]]
            self.aborted -= 1
            self._progress.pop(job["id"], None)
        # A run berthd aborted does not count: berthd keeps that count
        # (it frees the run's room at its answer or its kill grace, and
        # pushes nothing beyond the concurrency before), and an execute
        # that ignores its abort must not make the worker refuse a run
        # berthd is entitled to send, which would fail as worker_error.
        running = len(self.runs) - self.aborted
        if running >= self.worker.concurrency:
            self.conn.respond_error(rid, -32013, "run: this worker already "
                                    "runs %d jobs, its concurrency"
                                    % running,
                                    {"limit": self.worker.concurrency})
            return
        run = _Run(self, rid, job, tool, params.get("pending"))
        self.runs[run.job_id] = run
        self.worker._live.add(run)
        if self.worker._closing and \
                self.worker._loop.time() >= self.worker._deadline:
            # Pushed before berthd took the drain, after close()'s
            # timeout: it does not start, and is left to berthd.
            run.abort(CLOSING)
        run.task = self.worker._loop.create_task(self.worker._run_job(run))
        run.task.add_done_callback(run.done)

    def _run_done(self, run: _Run, task: asyncio.Task) -> None:
        if self.runs.get(run.job_id) is run:
            del self.runs[run.job_id]
            if run.decided:
                self.aborted -= 1
        self.worker._live.discard(run)
        self.worker._poke()
        if task.cancelled():
            run.stopped = True
            outcome = _aborted(run.ctx.abort_reason)
        elif task.exception() is not None:
            e = task.exception()
            log.error("berth: the run of job %s failed inside the worker",
                      run.job_id, exc_info=e)
            outcome = {"error": _error_of(e)}  # type: ignore[arg-type]
        else:
            outcome = task.result()
        if self.conn.closed:
            run.answered = True
            log.debug("berth: job %s ended after its connection; its "
                      "outcome is dropped", run.job_id)
            return
        if run.superseded:
            # Its answer goes by its own request id: within the abort
            # grace berthd takes it (and frees the run's room), after it
            # berthd would drop it, logged on the job its later run has.
            run.answered = True
            if run.given_up(self.worker._loop.time()):
                log.debug("berth: job %s: the run berthd gave up ended "
                          "after its abort grace; its outcome is dropped",
                          run.job_id)
            else:
                self._answer(run, outcome)
            return
        p = self._progress.pop(run.job_id, None)
        if run.stopped and run.ctx.abort_reason == CLOSING:
            # Stopped by close()'s own abort: not answered, so that berthd
            # ends the job by its tool's onInterrupt once the connection
            # closes, as for any run a worker leaves. An `aborted` error
            # would be retried by its retryable, whatever onInterrupt says.
            run.answered = True
            log.debug("berth: job %s stopped at close()'s abort; left to "
                      "berthd (onInterrupt)", run.job_id)
            return
        if p is not None:
            self._notify("worker/progress", p)
        run.answered = True
        self._answer(run, outcome)

    def _answer(self, run: _Run, outcome: dict) -> None:
        """_answer sends the outcome, or, when berthd would refuse it,
        what berthd takes. An output or a suspend payload that is not
        JSON, holds U+0000 or a lone surrogate, or is over berthd's line
        limit fails the run (invalid_output, invalid_suspend), saying
        what and where. An error is sendable already (_error_of), but its
        views may make the answer too long: then it goes without them,
        and only an error that cannot be sent at all is invalid_error.
        The error sent in place of the outcome carries the views the tool
        declares for it (_fail_answer)."""
        try:
            self.conn.respond(run.rid, outcome)
            return
        except (TypeError, ValueError, BerthError) as e:
            why = _why(e)
        if "output" in outcome or "suspend" in outcome:
            if "output" in outcome:
                code = "invalid_output"
                parts = (("output", "output"), ("modelOutput", "model output"))
            else:
                code, parts = "invalid_suspend", (("suspend",
                                                   "suspend payload"),)
            what = parts[0][1]
            for key, name in parts:
                if key not in outcome:
                    continue
                try:
                    encode(outcome[key], "the " + name, self.conn.max_line)
                except (TypeError, ValueError, BerthError) as e:
                    what, why = name, _why(e)
                    break
        else:
            code, what = "invalid_error", "error"
            error = outcome.get("error")
            tries = [{"error": error}]
            if isinstance(error, dict) and "data" in error:
                tries.append({"error": {k: v for k, v in error.items()
                                        if k != "data"}})
            for answer in tries:
                try:
                    self.conn.respond(run.rid, answer)
                except (TypeError, ValueError, BerthError) as e:
                    why = _why(e)
                    continue
                log.warning("berth: job %s: its error went without %s: %s",
                            run.job_id, "its views" if answer is tries[0]
                            else "its views and data", why)
                return
        err = {"message": safe_text("the worker could not send the %s: %s"
                                    % (what, why)),
               "code": code, "retryable": False}
        log.error("berth: job %s: %s", run.job_id, err["message"])
        self._fail_answer(run, err)

    def _fail_answer(self, run: _Run, err: dict[str, Any]) -> None:
        """_fail_answer answers run with err, an error of the SDK's own in
        place of an outcome berthd could not take, and with the views the
        tool declares for it, as any error outcome has: those pending.views
        asked for, and the error's (made in a task, as transforms may be
        async; counted among the questions close() waits for)."""
        if not run.tool.transforms:
            self._send_failure(run, {"error": err})
            return
        task = self.worker._loop.create_task(self.worker._error_views(
            run, err))
        self.calls.add(task)
        task.add_done_callback(functools.partial(self._failure_views, run,
                                                 err))

    def _failure_views(self, run: _Run, err: dict[str, Any],
                       task: asyncio.Task) -> None:
        self.calls.discard(task)
        self.worker._poke()
        if self.conn.closed:
            return
        outcome: dict[str, Any] = {"error": err}
        if not task.cancelled() and task.exception() is None:
            outcome["views"] = task.result()
            try:
                self.conn.respond(run.rid, outcome)
                return
            except (TypeError, ValueError, BerthError) as e:
                log.warning("berth: job %s: its error went without its "
                            "views: %s", run.job_id, _why(e))
        self._send_failure(run, {"error": err})

    def _send_failure(self, run: _Run, outcome: dict[str, Any]) -> None:
        try:
            self.conn.respond(run.rid, outcome)
        except (TypeError, ValueError, BerthError) as e:
            log.error("berth: job %s: no answer could be sent: %s",
                      run.job_id, e)

    def _call(self, rid: Any, coro: Any) -> None:
        task = self.worker._loop.create_task(coro)
        self.calls.add(task)
        task.add_done_callback(functools.partial(self._call_done, rid))

    def _call_done(self, rid: Any, task: asyncio.Task) -> None:
        self.calls.discard(task)
        self.worker._poke()
        if self.conn.closed:
            return
        if task.cancelled():
            self.conn.respond_error(rid, -32603, "the worker is stopping")
        elif isinstance(task.exception(), BerthError):
            e = task.exception()
            self.conn.respond_error(rid, e.code, e.message, e.data)  # type: ignore[union-attr]
        elif task.exception() is not None:
            e = task.exception()
            log.error("berth: a request of berthd failed inside the worker",
                      exc_info=e)
            self.conn.respond_error(rid, -32603, "the worker failed: %s"
                                    % _error_of(e)["message"])  # type: ignore[arg-type]
        else:
            try:
                self.conn.respond(rid, task.result())
            except (TypeError, ValueError, BerthError) as e:
                self.conn.respond_error(rid, -32603, safe_text(
                    "the worker could not send its answer: %s" % e))

    def quiet(self, now: float) -> bool:
        """quiet says whether a draining connection has nothing left to
        wait for: every request of berthd's is answered, but runs aborted
        longer than the abort grace ago, which berthd has given up too."""
        if self.calls:
            return False
        return all(run.given_up(now) for run in self.runs.values())

    # -- progress and heartbeats ------------------------------------------------

    def progress(self, params: dict) -> None:
        """progress keeps the last report of each job and sends them at the
        end of the loop's turn."""
        self._progress[params["jobId"]] = params
        if self._progress_handle is None:
            self._progress_handle = self.worker._loop.call_soon(
                self._send_progress)

    def _send_progress(self) -> None:
        self._progress_handle = None
        reports, self._progress = self._progress, {}
        for p in reports.values():
            self._notify("worker/progress", p)

    def _notify(self, method: str, params: dict) -> None:
        try:
            try:
                self.conn.notify(method, params)
            except (ValueError, InvalidRequest):
                # U+0000 or a lone surrogate in a progress message: sent
                # with U+FFFD in their place, as a log line is.
                self.conn.notify(method, scrub(params))
        except ConnectionClosed:
            pass
        except (TypeError, ValueError, BerthError) as e:
            log.warning("berth: job %s: %s not sent: %s",
                        params.get("jobId"), method, e)

    def registered(self, result: Any) -> None:
        if isinstance(result, dict):
            wid = result.get("worker")
            self.worker_id = wid if isinstance(wid, str) else None
            hb = result.get("heartbeatMs")
            if isinstance(hb, int) and not isinstance(hb, bool) and hb > 0:
                self.heartbeat = hb / 1000
        self._hb_handle = self.worker._loop.call_later(self.heartbeat / 2,
                                                       self._beat)

    def _beat(self) -> None:
        """_beat runs every half heartbeat: berthd silent for two
        heartbeats is taken for dead (a network cut that TCP has not
        noticed); silent for one, it is pinged."""
        if self.conn.closed:
            return
        silent = self.worker._loop.time() - self.conn.last_seen
        if silent >= 2 * self.heartbeat:
            log.warning("berth: berthd sent nothing for %.1f s (two "
                        "heartbeats); dropping the connection", silent)
            self.conn.abort(ConnectionClosed(
                "berthd did not answer two heartbeats"))
            return
        if silent >= self.heartbeat:
            try:
                _, fut = self.conn.start_request("ping")
                fut.add_done_callback(lambda f: f.cancelled() or
                                      f.exception())
            except ConnectionClosed:
                return
        self._hb_handle = self.worker._loop.call_later(self.heartbeat / 2,
                                                       self._beat)

    def closed(self, exc: BaseException | None) -> None:
        if self._hb_handle is not None:
            self._hb_handle.cancel()
        if self._progress_handle is not None:
            self._progress_handle.cancel()
            self._progress_handle = None
        self._progress.clear()
        for run in list(self.runs.values()):
            run.abort("disconnected")
        for task in list(self.calls):
            task.cancel()
        self.worker._poke()


class _Closing(collections.abc.Coroutine):
    """_Closing is what close() returns: the close has begun already, so
    that a caller that does not await it (a tool's execute that makes its
    worker leave) closes the worker all the same. Awaiting it waits for
    the end of the close. It is a coroutine, so that create_task() and
    wait_for() take it as they take one, and it makes its inner coroutine
    only when awaited: left alone, it leaves no "never awaited"
    warning."""

    __slots__ = ("_worker", "_coro")

    def __init__(self, worker: "Worker"):
        self._worker = worker
        self._coro: Any = None

    def _inner(self) -> Any:
        if self._coro is None:
            self._coro = self._worker._wait_closed()
        return self._coro

    def __await__(self) -> Generator[Any, None, None]:
        return self._inner().__await__()

    def send(self, value: Any) -> Any:
        return self._inner().send(value)

    def throw(self, *exc: Any) -> Any:
        return self._inner().throw(*exc)

    def close(self) -> None:
        if self._coro is not None:
            self._coro.close()


class Worker:
    """A worker serving ``tools`` to berthd (see the module's text).

    ``socket``/``url``/``token``/``connect_timeout`` as for
    :class:`~berth.Client` (an attempt that times out is tried again);
    ``concurrency`` is how many runs berthd may push at once (1 to 1024);
    ``name`` shows in berthd's logs and ``server/info`` (default
    ``PROGRAM@HOST:PID``). ``await worker.run()`` serves until
    :meth:`close`; ``async with Worker(...)`` runs it in a task.
    """

    def __init__(self, tools: Iterable[Tool], *, socket: str | None = None,
                 url: str | None = None, token: str | None = None,
                 concurrency: int = 16, name: str | None = None,
                 max_line: int = MAX_LINE,
                 connect_timeout: float | None = CONNECT_TIMEOUT):
        self.tools: dict[str, Tool] = {}
        for t in tools:
            if not isinstance(t, Tool):
                raise TypeError("serve takes berth.Tool objects (made with "
                                "@berth.tool or berth.Tool), not %r" % (t,))
            if t.id in self.tools:
                raise ValueError("two tools have the id %r" % t.id)
            self.tools[t.id] = t
        if not 1 <= len(self.tools) <= 1000:
            raise ValueError("a worker serves 1 to 1000 tools, not %d"
                             % len(self.tools))
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) \
                or not 1 <= concurrency <= 1024:
            raise ValueError("concurrency must be an integer from 1 to 1024, "
                             "not %r" % (concurrency,))
        self.concurrency = concurrency
        self.address: Address = resolve_address(socket, url)
        if self.address.is_tcp and not token:
            raise ValueError("berthd's TCP listener needs a token (the one "
                             "of berthd's --token-file): give token=")
        self._token = token
        self._max_line = max_line
        self._connect_timeout = check_connect_timeout(connect_timeout)
        self.name = name or "%s@%s:%d" % (
            os.path.basename(sys.argv[0] or "") or "python",
            socket_module.gethostname(), os.getpid())
        self._definitions = [t.definition() for t in self.tools.values()]
        self._session: _Session | None = None
        self._closing = False
        #: When close() stops waiting for the runs and aborts those left
        #: (the loop's time): the earliest of its calls' timeouts.
        self._deadline = math.inf
        #: The close under way, one for every close() call.
        self._closer: asyncio.Task | None = None
        #: What _close_wait waits on; _poke wakes them.
        self._wakers: list[asyncio.Future] = []
        #: Every run whose task has not ended, of any connection.
        self._live: set[_Run] = set()
        #: run()'s attempt to connect and register, while it is under way.
        self._opening: asyncio.Task | None = None
        #: Its connection while its worker/register is unanswered.
        self._registering: Connection | None = None
        self._running = False
        self._task: asyncio.Task | None = None
        self._wake: asyncio.Future | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop = None  # type: ignore
        #: Set while the worker is registered with berthd.
        self.registered = asyncio.Event()
        #: berthd's id of this worker on the current connection.
        self.worker_id: str | None = None

    def __repr__(self) -> str:
        return "<berth.Worker %s: %d tools, %s>" % (
            self.name, len(self.tools),
            "registered" if self.registered.is_set() else "not registered")

    @property
    def running_jobs(self) -> list[str]:
        """The ids of the jobs running now on the current connection."""
        return list(self._session.runs) if self._session else []

    # -- running ----------------------------------------------------------------

    async def __aenter__(self) -> "Worker":
        self._task = asyncio.ensure_future(self.run())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        """The end of ``async with``: close(), then what run() raised
        (a RegistrationError), which close() itself never raises."""
        await self.close()
        task = self._task
        if task is not None:
            await asyncio.wait([task])
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    async def run(self) -> None:
        """run serves until close(): connects, registers, runs jobs, and
        connects again whenever the connection drops. Once the connection
        is gone for good, it waits for the executes still going to return
        from their abort (the abort grace at most), and returns. After
        close() it returns at once, without connecting. Raises
        RegistrationError when berthd refuses the tools for good."""
        if self._running:
            raise RuntimeError("the worker is already running")
        if self._closing:
            return  # close() came first: a closed worker never connects
        self._running = True
        self._loop = asyncio.get_running_loop()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.concurrency + 4,
            thread_name_prefix="berth-worker")
        delays = None
        down_since = None
        try:
            while not self._closing:
                # A task of its own, so that close() can give up a
                # connection attempt without cancelling run().
                opening = self._opening = self._loop.create_task(
                    self._open_session())
                opening.add_done_callback(lambda _: self._poke())
                try:
                    await asyncio.wait([opening])
                except asyncio.CancelledError:
                    opening.cancel()
                    raise
                finally:
                    self._opening = None
                if opening.cancelled():
                    break  # close() gave up the connection attempt
                try:
                    session = opening.result()
                except (OSError, ConnectionClosed, BerthError) as e:
                    if self._closing:
                        break
                    if delays is None:
                        delays = backoff_delays()
                        down_since = self._loop.time()
                        log.warning("berth: cannot serve through berthd at "
                                    "%s: %s; trying again", self.address, e)
                    else:
                        log.debug("berth: still cannot reach berthd at %s "
                                  "(%.0f s): %s", self.address,
                                  self._loop.time() - down_since, e)
                    await self._sleep(next(delays))
                    continue
                if session is None:
                    break  # close() began before worker/register was sent
                delays = None
                if self._closing:
                    # Registered while close() waited for the answer:
                    # close() drains this connection and closes it.
                    log.debug("berth: registered as worker %s while "
                              "closing; draining it", session.worker_id)
                    await session.conn.wait_closed()
                    break
                log.info("berth: serving %d tools (%s) to berthd at %s as "
                         "worker %s", len(self.tools),
                         ", ".join(self.tools), self.address,
                         session.worker_id)
                self.worker_id = session.worker_id
                self.registered.set()
                reason = await session.conn.wait_closed()
                self.registered.clear()
                self._session = None
                if not self._closing:
                    log.warning("berth: lost the connection to berthd at %s "
                                "(%s); reconnecting", self.address,
                                reason or "closed by berthd")
            await self._settle()
        finally:
            self._closing = True
            self.registered.clear()
            last, self._session = self._session, None
            if last is not None:
                last.conn.abort()
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._running = False
            self._poke()

    async def _sleep(self, delay: float) -> None:
        self._wake = self._loop.create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._wake), delay)
        except asyncio.TimeoutError:
            pass
        finally:
            self._wake = None

    async def _settle(self) -> None:
        """_settle waits, once run()'s last connection is gone, for the
        executes still going (aborted by the drop or by close()) to
        return, each for the abort grace at most: run() and close() return
        after those that honour their abort, and without those that do
        not."""
        for run in list(self._live):
            if run.grace_end is None:  # its connection is gone
                run.abort("disconnected")
        await self._close_wait(lambda now: all(
            run.given_up(now) for run in self._live), bounded=False)
        if self._live:
            log.warning("berth: closed while the execute of %s had not "
                        "returned from its abort: berthd ends or re-queues "
                        "the jobs (onInterrupt)",
                        _describe_jobs(list(dict.fromkeys(
                            r.job_id for r in self._live))))

    async def _open_session(self) -> _Session | None:
        """_open_session connects, authenticates and registers, and
        returns the registered session, now self._session; None when
        close() began before worker/register could be sent."""
        try:
            conn = await dial(self.address, self._token,
                              self._connect_timeout, max_line=self._max_line)
        except BerthError as e:
            raise self._refusal(e) from None
        session = _Session(self, conn)
        params = {"tools": self._definitions,
                  "concurrency": self.concurrency, "name": self.name,
                  "sdk": {"name": "berth-python", "version": __version__}}
        try:
            if self._closing:
                conn.abort()
                return None
            self._registering = conn
            result = await conn.request("worker/register", params)
        except BerthError as e:
            conn.abort()
            raise self._refusal(e) from None
        except BaseException:
            conn.abort()
            raise
        finally:
            self._registering = None
        session.registered(result)
        self._session = session
        return session

    def _refusal(self, e: BerthError) -> BaseException:
        """_refusal is what a refused registration raises: a
        RegistrationError when trying again cannot help, else the error
        itself (run() tries again)."""
        if isinstance(e, MethodNotFound):
            return RegistrationError(type(e)(
                e.code, "berthd at %s does not serve workers (no method "
                "worker/register): it is older than the worker protocol"
                % self.address, e.data))
        if isinstance(e, (InvalidParams, Unauthorized)):
            return RegistrationError(e)
        if isinstance(e, Conflict) and e.status != "conflict":
            return RegistrationError(e)
        if isinstance(e, Conflict):
            # Another worker serves one of the tools with a different
            # definition: a deployment under way. Keep trying, loudly.
            log.error("berth: berthd refused the tools: %s", e.message)
        return e

    def close(self, timeout: float | None = None) -> "_Closing":
        """close begins to drain and stop the worker, at once, and returns
        an awaitable that is done once run() has returned.

        berthd pushes no new run (``worker/drain``, whose answer is waited
        for 5 s at most); the runs and berthd's questions under way are
        answered as they end; then the connection closes and run()
        returns. ``timeout`` (seconds; None waits as long as the runs take)
        bounds those waits: then the runs still going are aborted (reason
        ``closing``), and each has the abort grace, 5 s, to return: what it
        returns is answered, while a run that stops by the abort itself
        (``CancelledError``), or does not stop in time, is left unanswered
        to berthd, which ends or re-queues its job by its tool's
        ``onInterrupt`` once the connection closes. A run berthd aborts
        meanwhile is waited for the abort grace at most. From the start of
        close() the worker registers on no new connection: a connection
        attempt under way is given up, a registration under way is waited
        for (5 s at most, and ``timeout``) and drained, and a connection
        that drops meanwhile leaves its runs to berthd (close() waits for
        their executes the abort grace at most).

        Every call joins the close under way, the earliest timeout wins,
        and cancelling a caller's await does not stop the close. A tool's
        execute may call it to make its worker leave, without awaiting it:
        the close waits for that run as for any other. Raises ValueError
        for a timeout that is not a number of seconds, 0 or more (and
        begins nothing); never what run() raises."""
        if timeout is not None and (
                isinstance(timeout, bool) or
                not isinstance(timeout, (int, float)) or not timeout >= 0):
            raise ValueError("close()'s timeout must be a number of seconds, "
                             "0 or more (or None), not %r" % (timeout,))
        loop = asyncio.get_running_loop()
        if timeout is not None:
            self._deadline = min(self._deadline, loop.time() + timeout)
        self._closing = True
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)
        if self._closer is None:
            self._closer = loop.create_task(self._close())
        self._poke()
        return _Closing(self)

    async def _wait_closed(self) -> None:
        """_wait_closed is what awaiting close() does."""
        run = current_run.get()
        if run is not None and run.session.worker is self and \
                not run.answered:
            log.warning("berth: job %s awaits close() in its own run: the "
                        "close waits for that run to answer, so this await "
                        "ends only at close()'s timeout or berthd's abort "
                        "of the run; call worker.close() without awaiting "
                        "it", run.job_id)
        assert self._closer is not None
        await asyncio.shield(self._closer)

    async def _close(self) -> None:
        """_close is the close under way: it ends run()'s connection attempt,
        drains the registered connection and waits for run() to return."""
        try:
            await self._stop_opening()
            session = self._session
            if session is not None and not session.conn.closed:
                await self._drain(session)
            # run() returns once its connection is gone, after the executes
            # that were aborted have returned (the abort grace at most).
            await self._close_wait(lambda _: not self._running, bounded=False)
        except Exception:
            log.exception("berth: close() failed; the worker stops")
            session = self._session
            if session is not None:
                session.conn.abort()

    async def _stop_opening(self) -> None:
        """_stop_opening ends run()'s connection attempt under way, if
        any, for close(): before worker/register it is given up; after, it
        is waited for (DRAIN_ANSWER at most, and close()'s timeout), since
        berthd may have registered the worker and pushed it runs, which
        close() then drains rather than leaves to the lease."""
        opening = self._opening
        if opening is None or opening.done():
            return
        conn = self._registering
        if conn is None:
            opening.cancel()
        elif not await self._close_wait(
                lambda _: opening.done(), self._loop.time() + DRAIN_ANSWER):
            log.warning("berth: berthd did not answer worker/register "
                        "within %g s of close(); closing", DRAIN_ANSWER)
            conn.abort(ConnectionClosed(
                "berthd did not answer worker/register before close()"))
        await asyncio.wait([opening])

    async def _drain(self, session: _Session) -> None:
        """_drain ends the serving of a registered connection as BullMQ's
        close() does: worker/drain first (berthd pushes no run once it has
        answered, and the runs it pushed before arrive ahead of the
        answer), then the answers to every request of berthd's, then a
        clean close. At close()'s deadline the runs still going are
        aborted and have the abort grace to answer; then the connection is
        closed under what is left, which berthd takes as its
        interruption."""
        conn = session.conn
        try:
            _, answer = conn.start_request("worker/drain", {})
        except ConnectionClosed:
            return
        answer.add_done_callback(self._drain_answered)
        await self._close_wait(lambda _: answer.done() or conn.closed,
                               self._loop.time() + DRAIN_ANSWER)
        if not await self._close_wait(
                lambda now: conn.closed or session.quiet(now)):
            runs = list(session.runs.values())
            if runs:
                log.warning("berth: aborting %s at close()'s timeout; each "
                            "has %g s to answer", _describe_jobs(
                                [r.job_id for r in runs]), ABORT_GRACE)
            for run in runs:
                run.abort(CLOSING)
            for task in list(session.calls):
                task.cancel()
            await self._close_wait(lambda now: conn.closed or
                                   session.quiet(now),
                                   self._loop.time() + ABORT_GRACE,
                                   bounded=False)
        if conn.closed:
            return
        if session.runs:
            log.warning("berth: closing with %s still running: aborted, and "
                        "left to berthd (onInterrupt)", _describe_jobs(
                            list(session.runs)))
        try:
            await asyncio.wait_for(conn.close(), FLUSH_GRACE)
        except asyncio.TimeoutError:
            log.warning("berth: berthd did not take the worker's last "
                        "lines within %g s; dropping the connection",
                        FLUSH_GRACE)
            conn.abort(ConnectionClosed("berthd did not read the worker's "
                                        "last lines"))

    def _drain_answered(self, answer: asyncio.Future) -> None:
        if not answer.cancelled() and answer.exception() is not None:
            log.debug("berth: worker/drain: %s", answer.exception())
        self._poke()

    async def _close_wait(self, done: Callable[[float], bool],
                          limit: float = math.inf,
                          bounded: bool = True) -> bool:
        """_close_wait waits while the worker closes until done(now) holds,
        looking again whenever _poke() is called (a run or a question of
        berthd's ended, a run was aborted, the connection closed, an answer
        came, a close() moved the deadline) and when an aborted run's grace
        ends. It gives up at limit (the loop's time), and when bounded at
        close()'s deadline too, whichever is first, and says whether
        done(now) held. Each look reads the clock once: a grace that ended
        between two reads would be over for the timer and not yet for
        done(), and nothing would wake the wait again. The loop is the
        running one, not self._loop: a close() before run(), or one that
        run() returned at once for, waits too, and run() never set it."""
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            if done(now):
                return True
            end = min(limit, self._deadline) if bounded else limit
            if end <= now:
                return False
            wake = min(end, self._grace_end(now))
            waker = loop.create_future()
            self._wakers.append(waker)
            try:
                # A timer may fire a little early: the loop looks again.
                await asyncio.wait([waker], timeout=None if wake == math.inf
                                   else wake - now)
            finally:
                if not waker.done():
                    waker.cancel()
                    self._wakers.remove(waker)

    def _grace_end(self, now: float) -> float:
        """_grace_end is when the next abort grace of a live run ends."""
        ends = [run.grace_end for run in self._live
                if run.grace_end is not None and run.grace_end > now]
        return min(ends) if ends else math.inf

    def _poke(self) -> None:
        """_poke wakes _close_wait to look again."""
        if not self._wakers:
            return
        wakers, self._wakers = self._wakers, []
        for waker in wakers:
            if not waker.done():
                waker.set_result(None)

    # -- running a job ------------------------------------------------------------

    async def _call_fn(self, fn: _Fn, args: tuple) -> Any:
        """_call_fn calls a user function with as many of args as it
        takes: on the loop when it is async, in a thread when not."""
        args = args[:fn.nargs]
        if fn.is_async:
            return await fn.fn(*args)
        ctx = contextvars.copy_context()
        r = await self._loop.run_in_executor(
            self._executor, lambda: ctx.run(fn.fn, *args))
        if inspect.isawaitable(r):
            r = await r
        return r

    async def _hook(self, run: _Run | None, fn: _Fn, payload: Any,
                    info: CallInfo, logs: list | None = None) -> None:
        """_hook runs on_input_available or on_output: one that raises is
        logged (on the job when it is running here, else in logs) and
        changes nothing."""
        try:
            await self._call_fn(fn, (payload, info))
        except Exception as e:
            self._report(run, info.job_id, "%s raised %s" % (
                fn.name.split(": ", 1)[-1], _error_of(e)["message"]), e,
                logs)

    def _report(self, run: _Run | None, job_id: str, message: str,
                e: BaseException | None, logs: list | None = None,
                level: str = "error") -> None:
        """_report logs a failure of a tool's function on the worker's
        logger, and on the job: with worker/log while it runs here, else
        in logs, the ``logs`` of the answer to input or transform, which
        berthd adds to the job's log once the stage is committed
        (docs/WORKERS.md). Its text is made safe (safe_text): it holds
        what the tool's exception says."""
        log.warning("berth: job %s: %s", job_id, message,
                    exc_info=e if e is not None and
                    log.isEnabledFor(logging.DEBUG) else None)
        line: dict[str, Any] = {"level": level,
                                "message": safe_text(message)}
        if e is not None:
            try:
                tb = "".join(traceback.format_exception(e))
            except Exception:
                tb = None
            if tb is not None:
                line["data"] = {"traceback": safe_text(tb)}
        if run is not None and run.live:
            try:
                run.send_log({"jobId": job_id, **line})
            except (TypeError, ValueError, BerthError, ConnectionClosed):
                pass
        elif logs is not None and len(logs) < ANSWER_LOGS:
            logs.append(line)

    async def _views(self, views: dict, tool: Tool, stage: str,
                     t: dict[str, Any], run: _Run | None,
                     logs: list | None = None) -> None:
        """_views adds to views (VIEWS of WORKERS.md) the view of stage of
        each target the tool transforms it for. t holds the fields of the
        TransformContext."""
        for target, fns in tool.transforms.items():
            fn = fns.get(stage)
            if fn is None:
                continue
            tc = TransformContext(target=target, stage=stage, tool=tool.id,
                                  **t)
            try:
                v = await self._call_fn(fn, (tc,))
                if v is not None:
                    encode(v, "the view", self._max_line)
                else:
                    self._report(run, t.get("job_id") or "",
                                 "transform.%s.%s returned None; the view "
                                 "is a placeholder" % (target, stage), None,
                                 logs, level="warn")
            except Exception as e:
                self._report(run, t.get("job_id") or "", "transform.%s.%s "
                             "raised %s" % (target, stage,
                                            _error_of(e)["message"]), e,
                             logs)
                v = None
            views.setdefault(target, {})[stage] = \
                _placeholder(stage) if v is None else v

    async def _error_views(self, run: _Run, err: dict[str, Any]
                           ) -> dict[str, dict]:
        """_error_views is VIEWS of an error the SDK sends in place of
        run's outcome: the views pending.views asked for, and the error's
        of each target the tool transforms it for."""
        views = {target: dict(v)
                 for target, v in (run.early_views or {}).items()}
        t = self._tfields(run.job, "error", err)
        t["error"] = err
        await self._views(views, run.tool, "error", t, run)
        return views

    @staticmethod
    def _tfields(job: dict, stage: str, payload: Any) -> dict[str, Any]:
        return {"job_id": job.get("id"), "tool_call_id": job.get("toolCallId"),
                "payload": payload, "input": job.get("input"),
                "resume_data": job.get("resumeData"),
                "suspend_payload": job.get("suspendPayload"),
                "approval": job.get("approval"),
                "request_context": _mapping(job.get("requestContext"))}

    async def _run_job(self, run: _Run) -> dict[str, Any]:
        """_run_job is one run: what berthd still lacks (pending), then
        execute, its hooks and the views of its outcome. It returns the
        outcome (the answer to ``run``)."""
        tool, job, ctx = run.tool, run.job, run.ctx
        current_run.set(run)  # in this task's own context only
        if ctx.cancelled:
            # Aborted before it began (with the run, or after close()'s
            # timeout): nothing of the tool's runs.
            run.stopped = True
            return _aborted(ctx.abort_reason)
        views: dict[str, dict] = {}
        info = None
        try:
            if run.pending is not None:
                if run.pending.get("onInputAvailable") and \
                        tool.on_input_available is not None:
                    info = CallInfo.of_job(tool.id, job)
                    await self._hook(run, tool.on_input_available,
                                     _input_of(tool, job), info)
                stages = run.pending.get("views")
                if isinstance(stages, list) and tool.transforms:
                    for stage in stages:
                        if stage in ("input", "approval", "resume",
                                     "suspend"):
                            await self._views(
                                views, tool, stage, self._tfields(
                                    job, stage, _stage_payload(job, stage)),
                                run)
            if views:
                # Kept for an outcome that cannot be sent: the error sent
                # in its place carries them too.
                run.early_views = {target: dict(v)
                                   for target, v in views.items()}
            if ctx.cancelled:
                run.stopped = True
                return _aborted(ctx.abort_reason)
            value = job.get("input")
            model = tool.models.get("inputSchema")
            if model is not None:
                value = _parsed(model, value, "invalid_input")
            model = tool.models.get("resumeSchema")
            if model is not None and "resumeData" in job:
                ctx._resume = _parsed(model, job["resumeData"],
                                      "invalid_resume_data")
            fn = tool.execute
            run.phase = _EXECUTE
            try:
                if fn.is_async:
                    if fn.nargs >= 2:
                        result = await fn.fn(value, ctx)
                    elif fn.nargs == 1:
                        result = await fn.fn(value)
                    else:
                        result = await fn.fn()
                else:
                    result = await self._call_fn(fn, (value, ctx))
            finally:
                run.phase = _AFTER
        except Suspend as s:
            outcome: dict[str, Any] = {"suspend": s.payload}
            stage, payload = "suspend", s.payload
        except _Refused as r:
            outcome = {"error": r.error}
            stage, payload = "error", r.error
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            run.stopped = True
            return _aborted(ctx.abort_reason)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:
            # Any other BaseException of the tool's is its error too.
            dropped: list[str] = []
            err = _error_of(e, dropped)
            if not isinstance(e, ToolError):
                self._report(run, run.job_id, "execute raised " +
                             err["message"], e)
            for why in dropped:
                self._report(run, run.job_id, why, None, level="warn")
            outcome = {"error": err}
            stage, payload = "error", err
        else:
            outcome = {"output": result}
            stage, payload = "output", result
            if tool.to_model_output is not None:
                try:
                    outcome["modelOutput"] = await self._call_fn(
                        tool.to_model_output, (result,))
                except Exception as e:
                    self._report(run, run.job_id, "to_model_output raised "
                                 + _error_of(e)["message"], e)
                    payload = {"message": "to_model_output raised %s"
                               % _error_of(e)["message"],
                               "code": "to_model_output_failed",
                               "retryable": False}
                    outcome, stage = {"error": payload}, "error"
            if stage == "output" and tool.on_output is not None:
                await self._hook(run, tool.on_output, result,
                                 info or CallInfo.of_job(tool.id, job))
        if tool.transforms:
            t = self._tfields(job, stage, payload)
            if stage == "output":
                t["output"] = payload
            elif stage == "error":
                t["error"] = payload
            else:
                t["suspend_payload"] = payload
            await self._views(views, tool, stage, t, run)
        if views:
            outcome["views"] = views
        return outcome

    # -- berthd's questions before a stage commits ----------------------------

    async def _input(self, session: _Session, params: Any) -> dict[str, Any]:
        """``input``: requireApproval as a function, onInputAvailable, and
        the views of the input (and of the approval request, whose payload
        is the input the approver decides on)."""
        job = params.get("job") if isinstance(params, dict) else None
        if not isinstance(job, dict) or not isinstance(job.get("tool"), str):
            raise InvalidParams(-32602, "input: params.job must be a job "
                                "with a tool")
        tool = self.tools.get(job["tool"])
        if tool is None:
            raise BerthError(-32011, "this worker does not serve the tool %s"
                             % job["tool"], {"id": job["tool"]})
        info = CallInfo.of_job(tool.id, job)
        out: dict[str, Any] = {}
        logs: list[dict[str, Any]] = []
        needs = tool._def.get("requireApproval") is True
        if tool.require_approval is not None:
            try:
                model = tool.models.get("inputSchema")
                value = job.get("input") if model is None else \
                    parse_model(model, job.get("input"))
                needs = bool(await self._call_fn(tool.require_approval,
                                                 (value, info)))
            except Exception as e:
                # Fail safe: a person decides.
                self._report(None, info.job_id, "require_approval raised %s;"
                             " the job asks for approval"
                             % _error_of(e)["message"], e, logs)
                needs = True
            out["requireApproval"] = needs
        if tool.on_input_available is not None:
            await self._hook(None, tool.on_input_available,
                             _input_of(tool, job), info, logs)
        views: dict[str, dict] = {}
        stages = tool.transformed_stages()
        if "input" in stages:
            await self._views(views, tool, "input", self._tfields(
                job, "input", job.get("input")), None, logs)
        if "approval" in stages and needs:
            await self._views(views, tool, "approval", self._tfields(
                job, "approval", job.get("input")), None, logs)
        if views:
            out["views"] = views
        if logs:
            out["logs"] = logs
        return out

    async def _transform(self, session: _Session,
                         params: Any) -> dict[str, Any]:
        """``transform``: the views of a stage berthd is about to commit
        (an approval decision, resume data)."""
        if not isinstance(params, dict) or not isinstance(
                params.get("tool"), str) or params.get("stage") not in (
                "input", "output", "error", "approval", "suspend", "resume"):
            raise InvalidParams(-32602, "transform: params must have a "
                                "tool, a stage and a payload")
        tool = self.tools.get(params["tool"])
        if tool is None:
            raise BerthError(-32011, "this worker does not serve the tool %s"
                             % params["tool"], {"id": params["tool"]})
        stage, payload = params["stage"], params.get("payload")
        job = params.get("job")
        if not isinstance(job, dict):
            job = {"id": params.get("jobId")}
        # The job gives the rest of the transform's context; the approval
        # stage's payload is the input (docs/WORKERS.md).
        t = self._tfields(job, stage, payload)
        t[{"input": "input", "output": "output", "error": "error",
           "approval": "input", "suspend": "suspend_payload",
           "resume": "resume_data"}[stage]] = payload
        views: dict[str, dict] = {}
        logs: list[dict[str, Any]] = []
        await self._views(views, tool, stage, t, None, logs)
        return {"views": views, "logs": logs} if logs else {"views": views}


async def serve(tools: Iterable[Tool], *, socket: str | None = None,
                url: str | None = None, token: str | None = None,
                concurrency: int = 16, name: str | None = None,
                handle_signals: bool = True, **kw: Any) -> None:
    """serve runs a :class:`Worker` for tools until it is closed: on
    SIGTERM or SIGINT (when ``handle_signals`` and on the main thread) it
    drains and returns; a second signal is ``close(timeout=0)``: it aborts
    the runs, which have the abort grace to answer, and returns. Raises
    RegistrationError when berthd refuses the tools."""
    worker = Worker(tools, socket=socket, url=url, token=token,
                    concurrency=concurrency, name=name, **kw)
    loop = asyncio.get_running_loop()
    installed: list[int] = []
    closing: list[asyncio.Task] = []

    def on_signal(signum: int) -> None:
        if not closing:
            log.info("berth: %s: draining (again to abort the runs)",
                     signal.Signals(signum).name)
            closing.append(loop.create_task(worker.close()))
        else:
            log.info("berth: %s: aborting the runs",
                     signal.Signals(signum).name)
            closing.append(loop.create_task(worker.close(timeout=0)))

    if handle_signals and threading.current_thread() is \
            threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(signum, on_signal, signum)
                installed.append(signum)
            except (NotImplementedError, RuntimeError):
                pass
    try:
        await worker.run()
        for t in closing:
            await t
    finally:
        for installed_signal in installed:
            loop.remove_signal_handler(installed_signal)

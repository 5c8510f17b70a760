"""Python tools served by real worker processes to a real berthd, through
docs/WORKERS.md: approval, decline, suspend/resume with schema errors,
cancel and timeout reaching execute, retries, hooks that raise, transforms
in views and events, kill -9 of the worker and of berthd, two workers
sharing a tool, TCP with a token, a drain on SIGTERM, answers berthd would
refuse, odd exceptions, a run that ignores its timeout.

These need berthd's side of the worker protocol. A berthd without it
(worker/register is -32601) skips them all, with the reason printed,
unless BERTH_REQUIRE_WORKERS=1, which makes that a failure.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import unittest

import support
import berth

APP = os.path.join(support.HERE, "worker_app.py")


async def berthd_serves_workers(d: support.Berthd) -> bool:
    """berthd_serves_workers asks berthd whether it knows worker/register
    (with params it must refuse, so that nothing is registered)."""
    async with berth.Client(d.socket) as c:
        try:
            await c.call("worker/register", {})
        except berth.MethodNotFound:
            return False
        except berth.BerthError:
            return True
        return True


class WorkerProc:
    """A worker_app.py process."""

    def __init__(self, d: support.Berthd, marks: str, *, tcp: bool = False,
                 variant: bool = False, concurrency: int = 8):
        self.argv = [sys.executable, APP, "--marks", marks,
                     "--concurrency", str(concurrency)]
        if tcp:
            self.argv += ["--url", d.url, "--token", d.token]
        else:
            self.argv += ["--socket", d.socket]
        if variant:
            self.argv.append("--variant")
        self.logpath = os.path.join(marks, "..", "worker-%d.log" % id(self))
        self.proc: subprocess.Popen | None = None

    def start(self) -> "WorkerProc":
        with open(self.logpath, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv, stdout=log, stderr=log,
                preexec_fn=support.die_with_this_process())
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def term(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(support.DEADLINE)

    def log(self) -> str:
        try:
            with open(self.logpath, errors="replace") as f:
                return f.read()[-3000:]
        except OSError:
            return ""


class WorkerTest(unittest.IsolatedAsyncioTestCase):
    """A berthd per test (with TCP), and the worker processes it starts."""

    async def asyncSetUp(self) -> None:
        self.dir = support.TempDir("berth-sdk-py-workers.")
        self.marks = os.path.join(self.dir.path, "marks")
        os.mkdir(self.marks)
        self.d = support.Berthd(self.dir.path, listen=True).start()
        if not await berthd_serves_workers(self.d):
            self.d.stop()
            self.dir.cleanup()
            if os.environ.get("BERTH_REQUIRE_WORKERS") == "1":
                self.fail("berthd does not serve workers (worker/register "
                          "is -32601)")
            self.skipTest("berthd does not serve workers yet (worker/"
                          "register is -32601); BERTH_REQUIRE_WORKERS=1 "
                          "makes this a failure")
        self.workers: list[WorkerProc] = []
        self.c = await berth.connect(self.d.socket)

    async def asyncTearDown(self) -> None:
        await self.c.close()
        for w in self.workers:
            w.kill()
        rc = self.d.stop()
        if rc != 0 or not getattr(self._outcome, "success", True):
            print("\n--- berthd (exit %s) ---\n%s" % (rc, self.d.log()),
                  file=sys.stderr)
            for w in self.workers:
                print("--- worker %d ---\n%s" % (w.proc.pid, w.log()),
                      file=sys.stderr)
        self.dir.cleanup()
        self.assertEqual(rc, 0, "berthd's exit status")

    def worker(self, **kw) -> WorkerProc:
        w = WorkerProc(self.d, self.marks, **kw).start()
        self.workers.append(w)
        return w

    async def connected(self, n: int = 1, tool: str = "py-echo") -> dict:
        """connected waits until n workers serve tool and returns it."""
        async def check():
            for t in await self.c.tools():
                if t["name"] == tool and \
                        t.get("workers", {}).get("connected", 0) >= n:
                    return t
            return None
        return await support.until(check, "%d workers serving %s" % (n, tool))

    async def mark(self, *parts: str) -> None:
        path = os.path.join(self.marks, "-".join(parts))
        await support.until(lambda: os.path.exists(path), "mark %s" % path)

    async def done(self, job: dict, **kw) -> dict:
        return await self.c.wait(job["id"], timeout=support.DEADLINE, **kw)


class Basics(WorkerTest):

    async def test_worker_tool__listed_submitted_and_run_by_the_worker(self):
        w = self.worker()
        t = await self.connected()
        self.assertEqual(t["kind"], "worker")
        self.assertEqual(t["inputSchema"], {"type": "object"})
        job = await self.c.submit("py-echo", {"a": 1},
                                  request_context={"user": "ada"})
        job = await self.done(job)
        self.assertEqual(job["status"], "completed", job)
        self.assertEqual(job["output"], {"input": {"a": 1}, "pid": w.pid,
                                         "attempt": 1,
                                         "requestContext": {"user": "ada"}})

    async def test_approval__approved_runs_and_declined_never_runs(self):
        self.worker()
        await self.connected(tool="py-approve")
        job = await self.c.submit("py-approve", {})
        self.assertEqual(job["status"], "awaiting_approval")
        await self.c.approve(job["id"], note="ok")
        done = await self.done(job)
        self.assertEqual(done["status"], "completed", done)
        self.assertEqual(done["output"]["approval"]["decision"], "approved")
        no = await self.c.submit("py-approve", {})
        no = await self.c.decline(no["id"], reason="not today")
        self.assertEqual(no["status"], "declined")
        self.assertEqual(no["approval"]["reason"], "not today")
        # Nothing ran it; the approved one did.
        self.assertTrue(os.path.exists(os.path.join(
            self.marks, "executed-" + job["id"])))
        self.assertFalse(os.path.exists(os.path.join(
            self.marks, "executed-" + no["id"])))

    async def test_require_approval_function__decides_per_input(self):
        self.worker()
        await self.connected(tool="py-approve-fn")
        small = await self.c.submit("py-approve-fn", {"amount": 5})
        big = await self.c.submit("py-approve-fn", {"amount": 500})
        self.assertEqual(big["status"], "awaiting_approval")
        self.assertEqual((await self.done(small))["output"], {"paid": 5})
        await self.c.approve(big["id"])
        self.assertEqual((await self.done(big))["output"], {"paid": 500})

    async def test_suspend_resume__schema_errors_then_resume_data(self):
        self.worker()
        await self.connected(tool="py-ask")
        bad = await self.done(await self.c.submit("py-ask",
                                                  {"bad_suspend": True}))
        self.assertEqual(bad["status"], "failed")
        self.assertEqual(bad["error"]["code"], "invalid_suspend")
        job = await self.done(await self.c.submit("py-ask", {}))
        self.assertEqual(job["status"], "suspended")
        self.assertEqual(job["suspendPayload"],
                         {"question": "What is your name?"})
        for wrong in ({}, {"answer": ""}, {"answer": "A", "extra": 1}):
            with self.assertRaises(berth.InvalidParams):
                await self.c.resume(job["id"], wrong)
        self.assertEqual((await self.c.get(job["id"]))["status"],
                         "suspended")
        await self.c.resume(job["id"], {"answer": "Ada"})
        done = await self.done(job, until="completed")
        self.assertEqual(done["output"], {
            "message": "Hello, Ada! (asked: What is your name?)"})


class Aborts(WorkerTest):

    async def test_cancel__reaches_the_running_execute(self):
        self.worker()
        await self.connected(tool="py-slow")
        for tool in ("py-slow", "py-sync-slow"):
            job = await self.c.submit(tool, {})
            await self.mark("started", job["id"], "1")
            job = await self.c.cancel(job["id"], reason="stop")
            self.assertEqual(job["status"], "cancelled")
            await self.mark("aborted", job["id"], "cancelled")

    async def test_timeout__reaches_the_execute_and_times_out(self):
        self.worker()
        await self.connected(tool="py-slow")
        job = await self.c.submit("py-slow", {}, timeout=0.5, max_retries=0)
        done = await self.done(job)
        self.assertEqual(done["status"], "timed_out", done)
        await self.mark("aborted", job["id"], "timed_out")

    async def test_retry__a_retryable_error_retries_a_fatal_one_fails(self):
        self.worker()
        await self.connected(tool="py-flaky")
        job = await self.done(await self.c.submit("py-flaky", {}))
        self.assertEqual(job["status"], "completed", job)
        self.assertEqual(job["output"], {"attempt": 2})
        fatal = await self.done(await self.c.submit("py-flaky",
                                                    {"fatal": True}))
        self.assertEqual(fatal["status"], "failed")
        self.assertEqual(fatal["attempt"], 1)
        self.assertEqual(fatal["error"]["code"], "fatal")
        self.assertEqual(fatal["error"]["data"], {"why": "test"})


class Answers(WorkerTest):
    """What berthd would refuse in an answer of the worker's, exceptions
    that are hard to make an error of, a run that ignores its timeout:
    each job ends as it should, never held running until its timeout by
    an answer that berthd dropped, nor failed by a refusal of the
    worker's."""

    async def logs(self, job: dict) -> list:
        return [line async for line in self.c.logs(job["id"])]

    async def test_text_berthd_refuses__in_an_error_and_log_lines__is_made_safe_and_the_error_retried(
            self):
        self.worker()
        await self.connected(tool="py-odd-text")
        job = await self.c.submit("py-odd-text", {"kind": "error"})
        done = await self.done(job)
        self.assertEqual(done["status"], "failed", done)
        # The tool's own error, retryable: it reached berthd both times.
        self.assertEqual(done["attempt"], 2, done)
        self.assertEqual(done["error"]["message"],
                         "ValueError: boom \ufffd \ufffd")
        self.assertEqual(done["error"]["code"], "tool_error")
        self.assertEqual(done["progress"]["message"], "progress \ufffd")
        lines = [(line["message"], line.get("data"))
                 for line in await self.logs(job)]
        self.assertEqual(lines.count(("log \ufffd line \ufffd",
                                      {"k": "v\ufffd"})), 2, lines)

    async def test_text_berthd_refuses__in_an_output_or_suspend_payload__fails_the_run_saying_where(
            self):
        self.worker()
        await self.connected(tool="py-odd-text")
        for kind, code, says in (
                ("output", "invalid_output",
                 "the output holds U+0000 (NUL) in the string at /s/1"),
                ("output-surrogate", "invalid_output",
                 "the string at /s holds '\\ud800', a lone surrogate"),
                ("suspend", "invalid_suspend",
                 "the suspend payload holds U+0000 (NUL) in the string at "
                 "/q")):
            done = await self.done(await self.c.submit("py-odd-text",
                                                       {"kind": kind}))
            self.assertEqual(done["status"], "failed", done)
            self.assertEqual(done["attempt"], 1, done)  # not retried
            self.assertEqual(done["error"]["code"], code, done)
            self.assertIn(says, done["error"]["message"])

    async def test_odd_exceptions__keep_their_message_and_retryable(self):
        self.worker()
        await self.connected(tool="py-odd-raise")
        for kind, attempts, error in (
                ("str", 2, {"message": "StrRaises: the real message",
                            "code": "tool_error"}),
                ("base", 2, {"message": "BaseStrRaises: the real message",
                             "code": "tool_error"}),
                ("data", 1, {"message": "the real message", "code": "odd"}),
                ("data-retryable", 2, {"message": "the real message",
                                       "code": "tool_error"}),
                ("surrogate", 1, {"message": "lone \ufffd surrogate",
                                  "code": "odd"})):
            job = await self.c.submit("py-odd-raise", {"kind": kind})
            done = await self.done(job)
            self.assertEqual((kind, done["status"], done["attempt"],
                              done.get("error")),
                             (kind, "failed", attempts, error))
            if kind.startswith("data"):
                self.assertTrue(any(
                    line["message"].startswith("the data of the error was "
                                               "left out: its data is not "
                                               "JSON")
                    for line in await self.logs(job)))

    async def test_run_that_ignores_its_timeout__its_retry_runs_on_the_same_worker_beside_it(
            self):
        # berthd pushes the retry once it gave the aborted run up, at the
        # kill grace (5 s), while that run's execute still goes on: the
        # worker takes it.
        self.worker()
        await self.connected(tool="py-deaf")
        job = await self.c.submit("py-deaf", {"seconds": 2})
        done = await self.done(job)
        self.assertEqual(done["status"], "completed", done)
        self.assertEqual(done["output"], {"attempt": 2})
        await self.mark("ended", job["id"], "1")

    async def test_run_that_ignores_its_timeout__its_retry_after_the_kill_grace_runs_and_the_late_answer_is_dropped(
            self):
        # With one run, the retry takes the room berthd freed at the kill
        # grace (5 s); the first attempt returns after that, and its
        # answer, too late for berthd, is not sent.
        self.worker(concurrency=1)
        await self.connected(tool="py-deaf")
        job = await self.c.submit("py-deaf", {"seconds": 6.5})
        done = await self.done(job)
        self.assertEqual(done["status"], "completed", done)
        self.assertEqual(done["output"], {"attempt": 2})
        await self.mark("ended", job["id"], "1")
        await asyncio.sleep(0.5)
        lines = [line["message"] for line in await self.logs(job)]
        self.assertFalse([m for m in lines if "kill grace" in m], lines)

    async def test_run_that_ignores_its_timeout__another_jobs_run_at_the_kill_grace_runs(
            self):
        # berthd frees the room of the run it gave up at its kill grace
        # (5 s) and pushes the next job there, while the first execute
        # still sleeps: the worker runs it rather than refusing it as
        # beyond its concurrency (which would fail it as worker_error).
        self.worker(concurrency=1)
        await self.connected(tool="py-deaf")
        deaf = await self.c.submit("py-deaf", {"seconds": 8},
                                   max_retries=0)
        await self.c.wait(deaf["id"], until="running",
                          timeout=support.DEADLINE)
        other = await self.c.submit("py-echo", {"after": "deaf"})
        done = await self.done(deaf)
        self.assertEqual(done["status"], "timed_out", done)
        echoed = await self.done(other)
        self.assertEqual(echoed["status"], "completed", echoed)
        self.assertEqual(echoed["output"]["input"], {"after": "deaf"})


class Functions(WorkerTest):

    async def test_hooks_that_raise__are_logged_and_never_fail_the_job(self):
        self.worker()
        await self.connected(tool="py-hooks")
        job = await self.done(await self.c.submit("py-hooks", {}))
        self.assertEqual(job["status"], "completed", job)
        self.assertEqual(job["output"], {"fine": True})
        lines = [x["message"] async for x in self.c.logs(job["id"])]
        self.assertTrue(any("on_output raised RuntimeError" in m
                            for m in lines), lines)

    async def test_transforms__in_views_events_and_model_output(self):
        self.worker()
        await self.connected(tool="py-transform")
        events = self.c.events()
        job = await self.c.submit("py-transform", {"customerId": "c-1",
                                                   "internalPath": "/x"})
        done = await self.done(job)
        self.assertEqual(done["output"]["apiKey"], "secret-value")
        self.assertEqual(done["modelOutput"],
                         {"type": "text", "value": "customer Acme"})
        display = await self.c.get(job["id"], view="display")
        self.assertEqual(display["output"], {"displayName": "Acme"})
        self.assertEqual(display["input"], {"customerId": "c-1"})
        transcript = await self.c.get(job["id"], view="transcript")
        self.assertEqual(transcript["output"], {"name": "Acme"})
        seen = {e["type"]: e.get("data") for e in await support.collect(
            events, lambda e: e["jobId"] == job["id"] and
            e["type"] == "completed") if e["jobId"] == job["id"]}
        await events.close()
        self.assertEqual(seen["completed"], {"displayName": "Acme"})
        self.assertNotIn("secret-value", json.dumps(seen))
        failed = await self.done(await self.c.submit("py-transform",
                                                     {"fail": True}))
        self.assertEqual(failed["status"], "failed")
        shown = await self.c.get(failed["id"], view="display")
        self.assertNotIn("hunter2", json.dumps(shown["error"]))


class Crashes(WorkerTest):

    async def test_kill_9_of_the_worker__its_jobs_follow_on_interrupt(self):
        w = self.worker()
        await self.connected(tool="py-slow")
        retry = await self.c.submit("py-slow", {"seconds": 1})
        fail = await self.c.submit("py-interrupt-fail", {})
        await self.mark("started", retry["id"], "1")
        await self.mark("started", fail["id"], "1")
        w.kill()
        failed = await self.done(fail)
        self.assertEqual(failed["status"], "failed")
        self.assertEqual(failed["error"]["code"], "interrupted")
        pending = await self.c.wait(retry["id"], until="pending",
                                    timeout=support.DEADLINE)
        self.assertEqual(pending["status"], "pending")
        self.assertEqual(pending["attempt"], 2)
        w2 = self.worker()
        done = await self.done(retry)
        self.assertEqual(done["status"], "completed", done)
        self.assertEqual(done["output"]["pid"], w2.pid)
        self.assertEqual(done["output"]["attempt"], 2)

    async def test_kill_9_of_berthd__suspended_and_running_jobs_go_on(self):
        self.worker()
        await self.connected(tool="py-count")
        asked = await self.done(await self.c.submit("py-ask", {}))
        self.assertEqual(asked["status"], "suspended")
        counting = await self.c.submit("py-count", {"to": 40,
                                                    "stepSeconds": 0.05})
        async def saved_some():
            return ((await self.c.get(counting["id"])).get("checkpoint")
                    or {}).get("n", 0) >= 3
        await support.until(saved_some, "some checkpoints")
        await self.c.close()
        self.d.kill()
        self.d.start()
        self.c = await berth.connect(self.d.socket)
        # The worker comes back by itself.
        await self.connected(tool="py-count")
        await self.c.resume(asked["id"], {"answer": "Bo"})
        self.assertEqual((await self.done(asked, until="completed"))
                         ["output"]["message"][:10], "Hello, Bo!")
        done = await self.done(counting)
        self.assertEqual(done["status"], "completed", done)
        self.assertEqual(done["output"]["attempt"], 2)
        self.assertGreaterEqual(done["output"]["resumedFrom"], 3)

    async def test_kill_9_of_berthd_while_draining__the_worker_leaves(self):
        w = self.worker()
        await self.connected(tool="py-slow")
        job = await self.c.submit("py-slow", {})
        await self.mark("started", job["id"], "1")
        w.proc.send_signal(signal.SIGTERM)  # serve() drains

        async def serving() -> int:
            for t in await self.c.tools():
                if t["name"] == "py-slow":
                    return t.get("workers", {}).get("connected", 0)
            return 0

        async def drained() -> bool:
            return await serving() == 0
        # berthd counts a draining connection out of its tool's workers.
        await support.until(drained, "berthd to take the drain")
        await self.c.close()
        self.d.kill()
        self.d.start()
        self.c = await berth.connect(self.d.socket)
        # The drop aborts the run, and the closing worker exits instead of
        # registering again.
        rc = await asyncio.get_running_loop().run_in_executor(
            None, w.proc.wait, support.DEADLINE)
        self.assertEqual(rc, 0, w.log())
        await self.mark("aborted", job["id"], "disconnected")
        self.assertEqual(await serving(), 0)
        back = await self.c.get(job["id"])
        self.assertEqual((back["status"], back["attempt"]), ("pending", 2))
        # The job waited for the next worker, which takes it.
        self.worker()
        await self.mark("started", job["id"], "2")
        await self.c.cancel(job["id"])

    async def test_berthd_restarted_without_workers__tools_wait_for_one(self):
        w = self.worker()
        await self.connected()
        w.term()
        await self.c.close()
        self.d.stop()
        self.d.start()
        self.c = await berth.connect(self.d.socket)
        tools = {t["name"]: t for t in await self.c.tools()}
        self.assertEqual(tools["py-echo"]["kind"], "worker")
        with self.assertRaises(berth.InvalidParams):
            await self.c.submit("py-approve-fn", {"amount": "many"})
        # requireApproval as a function, and no worker to ask: a person
        # decides (it fails safe).
        unsure = await self.c.submit("py-approve-fn", {"amount": 5})
        self.assertEqual(unsure["status"], "awaiting_approval")
        job = await self.c.submit("py-echo", {"later": True})
        approval = await self.c.submit("py-approve", {})
        await self.c.approve(approval["id"])
        self.assertEqual((await self.c.wait(job["id"], timeout=0.5))
                         ["status"], "pending")
        self.worker()
        self.assertEqual((await self.done(job))["status"], "completed")
        self.assertEqual((await self.done(approval))["status"], "completed")


class Close(WorkerTest):

    async def test_second_sigterm__what_aborted_runs_return_completes_the_rest_follow_on_interrupt(
            self):
        w = self.worker()
        await self.connected(tool="py-tidy")
        tidy = await self.c.submit("py-tidy", {})
        fail = await self.c.submit("py-interrupt-fail", {})
        retry = await self.c.submit("py-slow", {})
        for job in (tidy, fail, retry):
            await self.mark("started", job["id"], "1")
        w.proc.send_signal(signal.SIGTERM)  # serve() drains

        async def drained() -> bool:
            for t in await self.c.tools():
                if t["name"] == "py-tidy":
                    return t.get("workers", {}).get("connected", 0) == 0
            return False
        await support.until(drained, "berthd to take the drain")
        w.proc.send_signal(signal.SIGTERM)  # close(timeout=0)
        rc = await asyncio.get_running_loop().run_in_executor(
            None, w.proc.wait, support.DEADLINE)
        self.assertEqual(rc, 0, w.log())
        # py-tidy returned what it had within the abort grace: its outcome.
        done = await self.done(tidy)
        self.assertEqual(done["status"], "completed", done)
        self.assertEqual(done["output"], {"partial": True,
                                          "reason": "closing"})
        # The others stopped by the abort and were left unanswered: berthd
        # applied their onInterrupt, as when a worker goes away.
        failed = await self.done(fail)
        self.assertEqual(failed["status"], "failed", failed)
        self.assertEqual(failed["error"]["code"], "interrupted")
        back = await self.c.wait(retry["id"], until="pending",
                                 timeout=support.DEADLINE)
        self.assertEqual((back["status"], back["attempt"]), ("pending", 2))
        await self.c.cancel(retry["id"])


class Sharing(WorkerTest):

    async def test_two_workers__share_a_tool(self):
        a = self.worker(concurrency=2)
        b = self.worker(concurrency=2)
        await self.connected(2)
        jobs = [await self.c.submit("py-echo", {"sleep": 0.3, "i": i})
                for i in range(8)]
        pids = {(await self.done(j))["output"]["pid"] for j in jobs}
        self.assertEqual(pids, {a.pid, b.pid})

    async def test_a_different_definition__is_refused_naming_it(self):
        self.worker()
        await self.connected()
        with self.assertRaises(berth.Conflict) as cm:
            await self.c.call("worker/register", {"tools": [
                {"id": "py-echo", "inputSchema": {"type": "object",
                                                  "required": ["x"]}}],
                "concurrency": 1})
        self.assertEqual(cm.exception.status, "conflict")
        fields = [d["field"] for d in cm.exception.data["differences"]]
        self.assertTrue(any(f.startswith("/inputSchema") for f in fields),
                        fields)
        self.assertIn("inputSchema", cm.exception.message)

    async def test_tcp_with_a_token__serves(self):
        w = self.worker(tcp=True)
        await self.connected()
        done = await self.done(await self.c.submit("py-echo", {"tcp": 1}))
        self.assertEqual(done["output"]["pid"], w.pid)

    async def test_sigterm__drains_the_running_job_then_exits_0(self):
        w = self.worker()
        await self.connected(tool="py-slow")
        job = await self.c.submit("py-slow", {"seconds": 1.0})
        await self.mark("started", job["id"], "1")
        rc = await asyncio.get_running_loop().run_in_executor(None, w.term)
        self.assertEqual(rc, 0, w.log())
        done = await self.done(job)
        self.assertEqual(done["status"], "completed", done)
        self.assertEqual(done["attempt"], 1)


if __name__ == "__main__":
    unittest.main()

"""The worker against a scripted berthd: framing and state of serve().

This is a unit test of the SDK's side of docs/WORKERS.md (what it sends,
how it answers, what it does when the connection drops), with the test
playing berthd line by line. It does not stand in for the tests against a
real berthd (test_worker_berthd.py).
"""
# No "from __future__ import annotations": pydantic 1 must see the
# annotations of the models made inside the tests as types.
import asyncio
import logging
import os
import signal
import sys
import threading
import time
import unittest
from unittest import mock

import support
import berth
import berth.worker as worker_module
from berth import ToolError

try:
    import pydantic
except ImportError:
    pydantic = None

logging.getLogger("berth").setLevel(logging.CRITICAL)


def job(jid: str, tool: str, input: object = None, **more: object) -> dict:
    j = {"id": jid, "tool": tool, "attempt": 1, "maxRetries": 0,
         "timeoutMs": 60000, "deadline": "2030-01-01T00:00:00.000Z",
         "input": {} if input is None else input}
    j.update(more)
    return j


#: A heartbeat that never comes within a test (see PeerTest.serve).
HOUR_MS = 3600 * 1000


def answers(c: support.PeerConn, rid: str) -> list:
    """answers lists the answers to berthd's request rid among what c
    holds (read and not taken)."""
    return [m for m in c.held if "method" not in m and m.get("id") == rid]


@berth.tool(id="echo", input_schema={"type": "object"})
async def echo(input, ctx):
    return {"echo": input, "job": ctx.job_id, "attempt": ctx.attempt}


class PeerTest(unittest.IsolatedAsyncioTestCase):
    """A fresh scripted berthd per test, and the worker under test."""

    async def asyncSetUp(self) -> None:
        self.dir = support.TempDir("berth-sdk-py-peer.")
        self.peer = await support.Peer(os.path.join(self.dir.path,
                                                    "s")).start()
        self.worker: berth.Worker | None = None
        self.task: asyncio.Task | None = None

    async def asyncTearDown(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            await asyncio.wait([self.task])
        await self.peer.stop()
        self.dir.cleanup()

    async def serve(self, tools, heartbeat_ms: int = 10000,
                    **kw) -> support.PeerConn:
        """serve starts a Worker for tools and returns its registered
        connection. A test of a wait that must end by itself gives an hour's
        heartbeat_ms, so that the worker's heartbeat, which drops a silent
        connection after two, cannot end it instead."""
        kw.setdefault("concurrency", 4)
        self.worker = berth.Worker(tools, socket=self.peer.path, **kw)
        self.task = asyncio.ensure_future(self.worker.run())
        c = await self.peer.accept()
        self.register = await c.register({
            "worker": "W-1", "tools": [t.id for t in tools],
            "heartbeatMs": heartbeat_ms})
        await support.until(self.worker.registered.is_set, "registered")
        return c

    async def started(self, c: support.PeerConn, job_id: str,
                      tool: str) -> str:
        """started sends a run of job job_id of tool and returns its request
        id once the worker runs it."""
        rid = c.request("run", {"job": job(job_id, tool)})
        await support.until(lambda: self.worker.running_jobs, "the run")
        return rid

    async def answer_drain(self, c: support.PeerConn) -> None:
        """answer_drain waits for the worker's worker/drain and answers
        it, as berthd does."""
        drain = await c.expect("worker/drain")
        c.reply(drain["id"], {})

    async def begin_close(self, c: support.PeerConn,
                          **kw) -> asyncio.Future:
        """begin_close starts the worker's close(**kw), answers its
        worker/drain and returns the close under way."""
        closing = asyncio.ensure_future(self.worker.close(**kw))
        await self.answer_drain(c)
        return closing

    async def run_job(self, c: support.PeerConn, j: dict,
                      pending: dict | None = None) -> dict:
        params = {"job": j}
        if pending:
            params["pending"] = pending
        rid = c.request("run", params)
        m = await c.answer(rid)
        self.assertIn("result", m, m)
        return m["result"]


class Register(PeerTest):

    async def test_register__sends_every_definition_its_concurrency_and_name(
            self):
        def approve_big(input, info):
            return input["amount"] > 100

        payment = berth.Tool(
            "pay", lambda i: {"ok": True}, description="Pay",
            input_schema={"type": "object",
                          "properties": {"amount": {"type": "number"}}},
            require_approval=approve_big,
            background=berth.Background(timeout=2.5, max_retries=3,
                                        on_interrupt="fail"),
            mcp={"annotations": {"destructiveHint": True}},
            input_examples=[{"input": {"amount": 5}}],
            transform={"display": {"output": lambda t: {},
                                   "input": lambda t: {}},
                       "transcript": {"error": lambda t: {}}},
            to_model_output=lambda o: "paid",
            on_input_available=lambda i: None,
            on_output=lambda o: None)
        c = await self.serve([echo, payment], concurrency=7, name="test@here")
        p = self.register["params"]
        self.assertEqual(p["concurrency"], 7)
        self.assertEqual(p["name"], "test@here")
        self.assertEqual(p["sdk"]["name"], "berth-python")
        defs = {d["id"]: d for d in p["tools"]}
        self.assertEqual(defs["echo"], {"id": "echo",
                                        "inputSchema": {"type": "object"}})
        self.assertEqual(defs["pay"]["requireApproval"], "function")
        self.assertEqual(defs["pay"]["background"],
                         {"timeoutMs": 2500, "maxRetries": 3,
                          "onInterrupt": "fail"})
        self.assertEqual(defs["pay"]["functions"], {
            "toModelOutput": True,
            "transform": {"display": ["input", "output"],
                          "transcript": ["error"]},
            "onInputAvailable": True, "onOutput": True})
        self.assertEqual(self.worker.worker_id, "W-1")
        c.close()

    async def test_register__refused_definition__raises_registration_error(
            self):
        self.worker = berth.Worker([echo], socket=self.peer.path)
        task = asyncio.ensure_future(self.worker.run())
        c = await self.peer.accept()
        m = await c.expect("worker/register")
        c.reply_error(m["id"], -32602, "invalid params", {"errors": [
            {"instancePath": "/tools/0/inputSchema", "keyword": "type",
             "message": "must be an object"}]})
        with self.assertRaises(berth.RegistrationError) as cm:
            await asyncio.wait_for(task, support.DEADLINE)
        self.assertIsInstance(cm.exception.error, berth.InvalidParams)
        self.assertEqual(cm.exception.error.errors[0]["instancePath"],
                         "/tools/0/inputSchema")

    async def test_register__berthd_without_workers__says_so(self):
        self.worker = berth.Worker([echo], socket=self.peer.path)
        task = asyncio.ensure_future(self.worker.run())
        c = await self.peer.accept()
        m = await c.expect("worker/register")
        c.reply_error(m["id"], -32601, "method not found: worker/register")
        with self.assertRaises(berth.RegistrationError) as cm:
            await asyncio.wait_for(task, support.DEADLINE)
        self.assertIn("does not serve workers", str(cm.exception))

    async def test_register__conflict__keeps_trying_until_accepted(self):
        self.worker = berth.Worker([echo], socket=self.peer.path)
        self.task = asyncio.ensure_future(self.worker.run())
        c = await self.peer.accept()
        m = await c.expect("worker/register")
        c.reply_error(m["id"], -32012, "tool echo: another worker serves "
                      "it with a different inputSchema",
                      {"status": "conflict", "differences": [
                          {"field": "/inputSchema", "registered": {},
                           "offered": {"type": "object"}}]})
        await c.closed()
        c2 = await self.peer.accept()
        await c2.register()
        await support.until(self.worker.registered.is_set, "registered")
        c2.close()

    async def test_register__tcp__authenticates_first_with_the_token(self):
        await self.peer.stop()
        self.peer = await support.Peer(tcp=True).start()
        with self.assertRaises(ValueError):
            berth.Worker([echo], url="tcp://127.0.0.1:%d" % self.peer.port)
        self.worker = berth.Worker([echo], url="tcp://127.0.0.1:%d"
                                   % self.peer.port, token="s3cret")
        self.task = asyncio.ensure_future(self.worker.run())
        c = await self.peer.accept()
        first = await c.next()
        self.assertEqual(first["method"], "server/auth")
        self.assertEqual(first["params"], {"token": "s3cret"})
        c.reply(first["id"], {})
        await c.register()
        await support.until(self.worker.registered.is_set, "registered")
        self.assertEqual(await self.run_job(c, job("J1", "echo", {"a": 1})),
                         {"output": {"echo": {"a": 1}, "job": "J1",
                                     "attempt": 1}})

    async def test_register__berthd_that_never_answers_server_auth__is_tried_again_after_connect_timeout(
            self):
        # Without a bound, the worker waited for that answer for ever and
        # never served.
        await self.peer.stop()
        self.peer = await support.Peer(tcp=True).start()
        self.worker = berth.Worker([echo], url="tcp://127.0.0.1:%d"
                                   % self.peer.port, token="s3cret",
                                   connect_timeout=0.3)
        self.task = asyncio.ensure_future(self.worker.run())
        hung = await self.peer.accept()
        await hung.expect("server/auth")  # and never answered
        c = await self.peer.accept()
        await hung.closed()
        c.reply((await c.expect("server/auth"))["id"], {})
        await c.register()
        await support.until(self.worker.registered.is_set, "registered")


class Runs(PeerTest):

    async def test_run__pipelined_runs__answered_by_id_in_any_order(self):
        gate = asyncio.Event()

        @berth.tool(id="gated")
        async def gated(input, ctx):
            if input.get("wait"):
                await gate.wait()
            return input["n"]

        c = await self.serve([gated])
        # Three runs in one write: the first waits, the others answer.
        c.send(c.req("berth-a", "run", {"job": job("A", "gated",
                                                   {"n": 1, "wait": True})}),
               c.req("berth-b", "run", {"job": job("B", "gated", {"n": 2})}),
               c.req("berth-c", "run", {"job": job("C", "gated", {"n": 3})}))
        self.assertEqual((await c.answer("berth-b"))["result"],
                         {"output": 2})
        self.assertEqual((await c.answer("berth-c"))["result"],
                         {"output": 3})
        gate.set()
        self.assertEqual((await c.answer("berth-a"))["result"],
                         {"output": 1})

    async def test_run__lines_split_anywhere_and_crlf__are_one_message_each(
            self):
        c = await self.serve([echo])
        line = ('{"jsonrpc":"2.0","id":"berth-x","method":"run","params":'
                '{"job":{"id":"X","tool":"echo","input":{"s":"\\u00e9\\n"}}}}'
                '\r\n').encode()
        for i in range(0, len(line), 7):
            c.writer.write(line[i:i + 7])
            await c.writer.drain()
        m = await c.answer("berth-x")
        self.assertEqual(m["result"]["output"]["echo"], {"s": "\u00e9\n"})
        # berthd's own ids are strings; the answer is one line of JSON.
        self.assertTrue(all(raw.endswith(b"\n") and raw.count(b"\n") == 1
                            for raw in c.lines))

    async def test_run__answers_of_one_loop_turn__leave_in_one_write(self):
        c = await self.serve([echo], concurrency=64)
        transport = self.worker._session.conn._transport
        writes = []
        write = transport.write
        transport.write = lambda data: (writes.append(data), write(data))
        c.send(*[c.req("berth-%d" % i, "run",
                       {"job": job("J%d" % i, "echo", {"i": i})})
                 for i in range(50)])
        for i in range(50):
            self.assertEqual((await c.answer("berth-%d" % i))["result"],
                             {"output": {"echo": {"i": i}, "job": "J%d" % i,
                                         "attempt": 1}})
        # 50 runs that arrived together end in the same turn of the loop,
        # and their answers leave together: a handful of writes, not 50.
        self.assertEqual(sum(d.count(b"\n") for d in writes), 50)
        self.assertLessEqual(len(writes), 10)

    async def test_run__suspend__answers_the_payload_and_its_views(self):
        @berth.tool(id="ask", transform={"display": {
            "suspend": lambda t: {"q": t.payload["question"].upper()}}})
        async def ask(input, ctx):
            if ctx.resume_data is None:
                ctx.suspend({"question": "name?"})
            return {"hello": ctx.resume_data["answer"],
                    "asked": ctx.suspend_payload}

        c = await self.serve([ask])
        out = await self.run_job(c, job("S", "ask"))
        self.assertEqual(out, {"suspend": {"question": "name?"},
                               "views": {"display": {
                                   "suspend": {"q": "NAME?"}}}})
        out = await self.run_job(c, job(
            "S", "ask", resumeData={"answer": "Ada"},
            suspendPayload={"question": "name?"}))
        self.assertEqual(out, {"output": {"hello": "Ada",
                                          "asked": {"question": "name?"}}})

    async def test_run__errors__carry_code_data_retryable_and_a_log_line(self):
        @berth.tool(id="bad")
        async def bad(input, ctx):
            if input["kind"] == "tool":
                raise ToolError("quota exhausted", code="quota",
                                data={"left": 0}, retryable=False)
            raise ValueError("no such city")

        c = await self.serve([bad])
        out = await self.run_job(c, job("E1", "bad", {"kind": "tool"}))
        self.assertEqual(out, {"error": {"message": "quota exhausted",
                                         "code": "quota", "data": {"left": 0},
                                         "retryable": False}})
        out = await self.run_job(c, job("E2", "bad", {"kind": "other"}))
        self.assertEqual(out, {"error": {
            "message": "ValueError: no such city"}})
        logline = await c.expect("worker/log")
        self.assertEqual(logline["params"]["jobId"], "E2")
        self.assertEqual(logline["params"]["level"], "error")
        self.assertIn("no such city", logline["params"]["message"])
        self.assertIn("Traceback",
                      logline["params"]["data"]["traceback"])

    async def test_run__output_not_json_or_too_long__is_a_clear_error(self):
        @berth.tool(id="odd")
        async def odd(input, ctx):
            return {1, 2} if input["kind"] == "set" else "x" * 5000

        c = await self.serve([odd], max_line=4096)
        out = await self.run_job(c, job("O1", "odd", {"kind": "set"}))
        self.assertEqual(out["error"]["code"], "invalid_output")
        self.assertFalse(out["error"]["retryable"])
        self.assertIn("not JSON", out["error"]["message"])
        out = await self.run_job(c, job("O2", "odd", {"kind": "long"}))
        self.assertEqual(out["error"]["code"], "invalid_output")
        self.assertIn("line limit", out["error"]["message"])

    async def test_run__tool_it_does_not_serve__is_a_retryable_error(self):
        c = await self.serve([echo])
        out = await self.run_job(c, job("U", "nope"))
        self.assertEqual(out["error"]["code"], "unknown_tool")
        self.assertTrue(out["error"]["retryable"])

    async def test_run__context__maps_the_job_fields(self):
        seen = {}

        @berth.tool(id="ctx")
        async def ctx_tool(input, ctx):
            seen.update(job_id=ctx.job_id, tool=ctx.tool,
                        attempt=ctx.attempt, rc=dict(ctx.request_context),
                        tcid=ctx.tool_call_id, run=ctx.run_id,
                        meta=dict(ctx.metadata), mcp=dict(ctx.mcp),
                        ckpt=ctx.checkpoint, state=ctx.state,
                        timeout=ctx.timeout, deadline=ctx.deadline.year,
                        resume=ctx.is_resume,
                        approval=dict(ctx.approval))
            with self.assertRaises(TypeError):
                ctx.request_context["x"] = 1  # a read-only Mapping
            return None

        c = await self.serve([ctx_tool])
        await self.run_job(c, job(
            "C1", "ctx", attempt=2, requestContext={"user": "ada"},
            toolCallId="call-1", runId="run-1", metadata={"m": 1},
            mcp={"_meta": {"progressToken": 3}, "clientInfo": {"name": "x"}},
            checkpoint={"step": 4}, approval={"decision": "approved"}))
        self.assertEqual(seen, {
            "job_id": "C1", "tool": "ctx", "attempt": 2,
            "rc": {"user": "ada"}, "tcid": "call-1", "run": "run-1",
            "meta": {"m": 1},
            "mcp": {"_meta": {"progressToken": 3}, "clientInfo": {"name": "x"}},
            "ckpt": {"step": 4}, "state": {"step": 4}, "timeout": 60.0,
            "deadline": 2030, "resume": False,
            "approval": {"decision": "approved"}})

    async def test_run__checkpoint__waits_for_berthd_and_reports_refusal(self):
        steps = []

        @berth.tool(id="ck")
        async def ck(input, ctx):
            await ctx.save_checkpoint({"step": 1})
            steps.append(ctx.checkpoint)
            await ctx.set_state({"step": 2})
            steps.append(ctx.state)
            try:
                await ctx.save_checkpoint({"step": 3})
            except berth.Conflict as e:
                return {"refused": e.code}
            return {"refused": None}

        c = await self.serve([ck])
        rid = c.request("run", {"job": job("K", "ck")})
        m = await c.expect("worker/checkpoint")
        self.assertEqual(m["params"], {"jobId": "K", "value": {"step": 1}})
        self.assertEqual(steps, [])  # not before berthd said it is durable
        c.reply(m["id"], {})
        m = await c.expect("worker/checkpoint")
        self.assertEqual(m["params"]["value"], {"step": 2})
        c.reply(m["id"], {})
        m = await c.expect("worker/checkpoint")
        c.reply_error(m["id"], -32012, "not running here",
                      {"status": "cancelled"})
        self.assertEqual((await c.answer(rid))["result"],
                         {"output": {"refused": -32012}})
        self.assertEqual(steps, [{"step": 1}, {"step": 2}])

    async def test_run__progress_and_logs__reach_berthd_before_the_outcome(
            self):
        @berth.tool(id="busy")
        async def busy(input, ctx):
            for i in range(1, 1001):
                ctx.progress(i, 1000, "step %d" % i)
            ctx.log("done counting", {"n": 1000}, level="warning")
            with self.assertRaises(ValueError):
                ctx.log("x", level="loud")
            with self.assertRaises(TypeError):
                ctx.progress("half")
            return "ok"

        c = await self.serve([busy])
        rid = c.request("run", {"job": job("P", "busy")})
        await c.answer(rid)
        lines = [m for m in c.held if m.get("method")]
        progress = [m["params"] for m in lines
                    if m["method"] == "worker/progress"]
        # Coalesced: the last report of the turn, not a thousand lines.
        self.assertLess(len(progress), 10)
        self.assertEqual(progress[-1], {"jobId": "P", "progress": 1000,
                                        "total": 1000,
                                        "message": "step 1000"})
        logs = [m["params"] for m in lines if m["method"] == "worker/log"]
        self.assertEqual(logs, [{"jobId": "P", "level": "warn",
                                 "message": "done counting",
                                 "data": {"n": 1000}}])

    async def test_run__python_logging__goes_to_the_job_log(self):
        logger = logging.getLogger("app.tools")
        logger.setLevel(logging.DEBUG)
        handler = berth.JobLogHandler()
        logger.addHandler(handler)
        self.addCleanup(logger.removeHandler, handler)

        @berth.tool(id="logs")
        async def logs(input, ctx):
            logger.info("fetching %s", input["city"])
            try:
                raise KeyError("x")
            except KeyError:
                logger.exception("lookup failed")
            return "ok"

        def sync_logs(input, ctx):
            logger.warning("from a thread")
            return "ok"

        c = await self.serve([logs, berth.Tool("sync-logs", sync_logs)])
        logger.info("not in a run: nowhere")
        await self.run_job(c, job("G1", "logs", {"city": "Oslo"}))
        await self.run_job(c, job("G2", "sync-logs"))
        lines = [m["params"] for m in c.held
                 if m.get("method") == "worker/log"]
        self.assertEqual([(x["jobId"], x["level"], x["message"])
                          for x in lines],
                         [("G1", "info", "fetching Oslo"),
                          ("G1", "error", "lookup failed"),
                          ("G2", "warn", "from a thread")])
        self.assertEqual(lines[0]["data"], {"logger": "app.tools"})
        self.assertIn("KeyError", lines[1]["data"]["traceback"])

    async def test_run__sync_execute__runs_in_a_thread_not_on_the_loop(self):
        release = threading.Event()
        threads = []

        def blocking(input, ctx):
            threads.append(threading.current_thread())
            ctx.progress(1)
            ctx.log("from a thread")
            ctx.save_checkpoint({"from": "thread"})
            # Held until an async run on the loop sets it: with execute
            # on the loop this would never return.
            if not release.wait(support.DEADLINE):
                raise RuntimeError("never released")
            return "unblocked"

        @berth.tool(id="release")
        async def releaser(input, ctx):
            release.set()
            return "released"

        c = await self.serve([berth.Tool("blocking", blocking), releaser])
        rid = c.request("run", {"job": job("B1", "blocking")})
        m = await c.expect("worker/checkpoint")
        c.reply(m["id"], {})
        self.assertEqual(await self.run_job(c, job("R1", "release")),
                         {"output": "released"})
        self.assertEqual((await c.answer(rid))["result"],
                         {"output": "unblocked"})
        self.assertIsNot(threads[0], threading.main_thread())

    async def test_run__pydantic_models__parse_input_and_dump_output(self):
        if pydantic is None:
            self.skipTest("pydantic is not installed")

        class In(pydantic.BaseModel):
            city: str
            days: int = 1

        class Out(pydantic.BaseModel):
            city: str
            temps: list[float]

        seen = []

        def big(input, info):
            seen.append(("require_approval", type(input)))
            return input.days > 5

        def available(input, info):
            seen.append(("on_input_available", type(input)))

        def output(out, info):
            seen.append(("on_output", type(out)))

        @berth.tool(id="forecast", input_schema=In, output_schema=Out,
                    require_approval=big, on_input_available=available,
                    on_output=output)
        async def forecast(input: In, ctx) -> Out:
            assert isinstance(input, In)
            return Out(city=input.city, temps=[20.5] * input.days)

        c = await self.serve([forecast])
        rid = c.request("input", {"job": job("F0", "forecast",
                                             {"city": "Oslo", "days": 9})})
        self.assertEqual((await c.answer(rid))["result"],
                         {"requireApproval": True})
        defs = self.register["params"]["tools"][0]
        self.assertEqual(defs["inputSchema"]["required"], ["city"])
        self.assertEqual(await self.run_job(c, job(
            "F", "forecast", {"city": "Oslo", "days": 2})),
            {"output": {"city": "Oslo", "temps": [20.5, 20.5]}})
        out = await self.run_job(c, job("F2", "forecast", {"days": 2}))
        self.assertEqual(out["error"]["code"], "invalid_input")
        # The functions get the models too, as execute does.
        self.assertEqual(seen, [("require_approval", In),
                                ("on_input_available", In),
                                ("on_output", Out)])


    async def test_run__pydantic_aliases__outputs_suspends_and_checkpoints_by_alias(
            self):
        # The schema sent is pydantic's, which names the fields by alias:
        # what is sent must too, or the tool's own output fails it.
        if pydantic is None:
            self.skipTest("pydantic is not installed")

        class In(pydantic.BaseModel):
            first_name: str = pydantic.Field(alias="firstName")

        class Out(pydantic.BaseModel):
            full_name: str = pydantic.Field(alias="fullName")

        class Ask(pydantic.BaseModel):
            ask_me: str = pydantic.Field(alias="askMe")

        @berth.tool(id="alias", input_schema=In, output_schema=Out,
                    suspend_schema=Ask)
        async def alias(input: In, ctx) -> Out:
            if input.first_name == "s":
                ctx.suspend(Ask(askMe="why?"))
            await ctx.save_checkpoint(Out(fullName="cp"))
            return Out(fullName=input.first_name + " Smith")

        c = await self.serve([alias])
        defs = self.register["params"]["tools"][0]
        self.assertEqual(defs["inputSchema"]["required"], ["firstName"])
        self.assertEqual(defs["outputSchema"]["required"], ["fullName"])
        self.assertEqual(defs["suspendSchema"]["required"], ["askMe"])
        rid = c.request("run", {"job": job("AL", "alias",
                                           {"firstName": "Ann"})})
        ck = await c.expect("worker/checkpoint")
        self.assertEqual(ck["params"]["value"], {"fullName": "cp"})
        c.reply(ck["id"], {})
        self.assertEqual((await c.answer(rid))["result"],
                         {"output": {"fullName": "Ann Smith"}})
        self.assertEqual(await self.run_job(c, job("AS", "alias",
                                                   {"firstName": "s"})),
                         {"suspend": {"askMe": "why?"}})

    async def test_run__pydantic_1_aliases__outputs_by_alias(self):
        try:
            from pydantic import v1 as pydantic_v1
        except ImportError:
            self.skipTest("pydantic.v1 is not installed")

        class Out(pydantic_v1.BaseModel):
            full_name: str = pydantic_v1.Field(alias="fullName")

        @berth.tool(id="alias1", output_schema=Out)
        async def alias1(input, ctx):
            return Out(fullName="Bo")

        c = await self.serve([alias1])
        defs = self.register["params"]["tools"][0]
        self.assertEqual(defs["outputSchema"]["required"], ["fullName"])
        self.assertEqual(await self.run_job(c, job("A1", "alias1")),
                         {"output": {"fullName": "Bo"}})

    async def test_run__pydantic_resume_model_refusing__is_invalid_resume_data(
            self):
        if pydantic is None:
            self.skipTest("pydantic is not installed")

        class Res(pydantic.BaseModel):
            answer: str

            @pydantic.field_validator("answer")
            @classmethod
            def not_x(cls, v):
                if v == "x":
                    raise ValueError("x is no answer")
                return v

        @berth.tool(id="res", resume_schema=Res)
        async def res(input, ctx):
            return {"answer": ctx.resume_data.answer}

        c = await self.serve([res])
        out = await self.run_job(c, job("R", "res", resumeData={"answer":
                                                               "x"}))
        self.assertEqual(out["error"]["code"], "invalid_resume_data", out)
        self.assertEqual(out["error"]["retryable"], False)
        self.assertIn("x is no answer", out["error"]["message"])
        self.assertEqual(await self.run_job(c, job(
            "R2", "res", resumeData={"answer": "y"})),
            {"output": {"answer": "y"}})

    async def test_run__error_code_berthd_would_not_take__left_out_and_logged(
            self):
        # berthd takes a code of 1 to 128 bytes, and would put tool_error
        # in place of another without a word.
        @berth.tool(id="coded")
        async def coded(input, ctx):
            raise ToolError("declined", code=input["code"], retryable=False)

        c = await self.serve([coded])
        for code, says in (("x" * 129, "it is 129 bytes"),
                           ("", "it is empty")):
            out = await self.run_job(c, job("C", "coded", {"code": code}))
            self.assertEqual(out, {"error": {"message": "declined",
                                             "retryable": False}})
            line = await c.expect("worker/log")
            self.assertEqual(line["params"]["level"], "warn")
            self.assertIn("the code of the error was left out: " + says,
                          line["params"]["message"])
        out = await self.run_job(c, job("C", "coded", {"code": "é" * 64}))
        self.assertEqual(out["error"]["code"], "é" * 64)  # 128 bytes


class Abort(PeerTest):

    async def test_abort__cancels_an_async_execute_which_may_answer(self):
        started = asyncio.Event()
        seen = []

        @berth.tool(id="slow")
        async def slow(input, ctx):
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                seen.append(ctx.abort_reason)
                if input.get("partial"):
                    return {"partial": True}
                raise
            return "never"

        c = await self.serve([slow])
        rid = c.request("run", {"job": job("A1", "slow")})
        await started.wait()
        c.notify("abort", {"jobId": "A1", "reason": "cancelled"})
        self.assertEqual((await c.answer(rid))["result"],
                         {"error": {"message": "execute was aborted "
                                    "(cancelled)", "code": "aborted"}})
        started.clear()
        rid = c.request("run", {"job": job("A2", "slow", {"partial": True})})
        await started.wait()
        c.notify("abort", {"jobId": "A2", "reason": "timed_out"})
        self.assertEqual((await c.answer(rid))["result"],
                         {"output": {"partial": True}})
        self.assertEqual(seen, ["cancelled", "timed_out"])

    async def test_abort__sync_execute__sees_cancelled(self):
        started = threading.Event()

        def looping(input, ctx):
            started.set()
            if ctx.wait_cancelled(support.DEADLINE):
                return {"stopped": ctx.abort_reason, "flag": ctx.cancelled}
            return "never aborted"

        c = await self.serve([berth.Tool("loop", looping)])
        rid = c.request("run", {"job": job("L", "loop")})
        await support.until(started.is_set, "the thread to start")
        c.notify("abort", {"jobId": "L", "reason": "shutdown"})
        self.assertEqual((await c.answer(rid))["result"],
                         {"output": {"stopped": "shutdown", "flag": True}})

    async def test_abort__before_the_run_started__answers_aborted(self):
        c = await self.serve([echo])
        c.send(c.req("berth-r", "run", {"job": job("Q", "echo")}),
               {"jsonrpc": "2.0", "method": "abort",
                "params": {"jobId": "Q", "reason": "cancelled"}})
        out = (await c.answer("berth-r"))["result"]
        self.assertEqual(out["error"]["code"], "aborted")

    def stubborn(self, gate: asyncio.Event, refused: list):
        """stubborn is a tool whose first attempt ignores its abort until
        gate is set, then tries to log, report progress and save a
        checkpoint (refused are the checkpoint's refusals) and returns."""

        @berth.tool(id="stubborn")
        async def stubborn(input, ctx):
            if ctx.attempt > 1:
                return {"attempt": ctx.attempt}
            while not gate.is_set():
                try:
                    await gate.wait()
                except asyncio.CancelledError:
                    pass  # a call that does not honour its abort
            ctx.log("late line")
            ctx.progress(1, 1, "late")
            try:
                await ctx.save_checkpoint({"late": True})
            except berth.ConnectionClosed as e:
                refused.append(str(e))
            return {"attempt": 1}

        return stubborn

    async def test_run_again__of_a_job_running_here__refused_unless_berthd_aborted_it(
            self):
        gate, refused = asyncio.Event(), []
        self.addCleanup(gate.set)  # the run ends, whatever the test did
        c = await self.serve([self.stubborn(gate, refused)],
                             heartbeat_ms=HOUR_MS)
        first = await self.started(c, "J", "stubborn")
        again = c.request("run", {"job": job("J", "stubborn", attempt=2)})
        self.assertEqual((await c.answer(again))["error"]["code"], -32012)
        # berthd times the run out, and pushes the retry here at once
        # (the connection has a free run): it runs.
        c.notify("abort", {"jobId": "J", "reason": "timed_out"})
        retry = c.request("run", {"job": job("J", "stubborn", attempt=2)})
        self.assertEqual((await c.answer(retry))["result"],
                         {"output": {"attempt": 2}})
        # The earlier run, within its abort grace, is answered by its own
        # request id; what it sent by the job's id would be taken for the
        # retry's, and is not sent.
        gate.set()
        self.assertEqual((await c.answer(first))["result"],
                         {"output": {"attempt": 1}})
        self.assertEqual([m for m in c.held if m.get("method")], [])
        self.assertEqual(len(refused), 1, refused)
        self.assertEqual(self.worker.running_jobs, [])

    async def test_run_again__the_earlier_run_ending_after_its_abort_grace__is_not_answered(
            self):
        gate, refused = asyncio.Event(), []
        self.addCleanup(gate.set)  # the run ends, whatever the test did
        c = await self.serve([self.stubborn(gate, refused)],
                             heartbeat_ms=HOUR_MS)
        with mock.patch.object(worker_module, "ABORT_GRACE", 0.2):
            first = await self.started(c, "J", "stubborn")
            c.notify("abort", {"jobId": "J", "reason": "timed_out"})
            await asyncio.sleep(0.3)
        retry = c.request("run", {"job": job("J", "stubborn", attempt=2)})
        self.assertEqual((await c.answer(retry))["result"],
                         {"output": {"attempt": 2}})
        gate.set()
        await support.until(lambda: not self.worker._live, "the first run")
        await c.answer(c.request("ping"))
        self.assertEqual(answers(c, first), [])
        self.assertEqual([m for m in c.held if m.get("method")], [])

    async def test_run_berthd_aborted_that_goes_on__does_not_count_against_concurrency(
            self):
        # berthd frees the room of a run it gave up (at the answer or its
        # kill grace) and pushes another job's run: the worker runs it.
        gate = asyncio.Event()
        self.addCleanup(gate.set)  # the run ends, whatever the test did

        @berth.tool(id="deaf")
        async def deaf(input, ctx):
            while not gate.is_set():
                try:
                    await gate.wait()
                except asyncio.CancelledError:
                    pass  # a call that does not honour its abort
            return {"attempt": ctx.attempt}

        c = await self.serve([deaf, echo], heartbeat_ms=HOUR_MS,
                             concurrency=1)
        first = await self.started(c, "J", "deaf")
        full = c.request("run", {"job": job("K0", "echo")})
        self.assertEqual((await c.answer(full))["error"]["code"], -32013)
        c.notify("abort", {"jobId": "J", "reason": "timed_out"})
        other = c.request("run", {"job": job("K", "echo")})
        self.assertEqual((await c.answer(other))["result"]["output"]["job"],
                         "K")
        # Berthd still counts a run it aborted while it has not given it
        # up, and sends nothing beyond the concurrency meanwhile; that
        # count is berthd's, so the worker does not refuse either.
        gate.set()
        self.assertEqual((await c.answer(first))["result"],
                         {"output": {"attempt": 1}})
        self.assertEqual(self.worker.running_jobs, [])

    async def test_connection_drop__aborts_runs_and_registers_again(self):
        started = asyncio.Event()
        reasons = []

        @berth.tool(id="slow")
        async def slow(input, ctx):
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                reasons.append(ctx.abort_reason)
                raise

        c = await self.serve([slow])
        c.request("run", {"job": job("D", "slow")})
        await started.wait()
        c.writer.transport.abort()  # the network fails
        await support.until(lambda: reasons, "the run to be aborted")
        self.assertEqual(reasons, ["disconnected"])
        c2 = await self.peer.accept()
        await c2.register()
        await support.until(self.worker.registered.is_set, "registered again")
        self.assertEqual(self.worker.running_jobs, [])
        rid = c2.request("run", {"job": job("D2", "slow")})
        await support.until(lambda: self.worker.running_jobs == ["D2"],
                            "the run on the new connection")
        c2.notify("abort", {"jobId": "D2", "reason": "cancelled"})
        self.assertEqual((await c2.answer(rid))["result"]["error"]["code"],
                         "aborted")
        c2.close()

    async def test_heartbeat__silent_berthd__is_pinged_then_dropped(self):
        self.worker = berth.Worker([echo], socket=self.peer.path)
        self.task = asyncio.ensure_future(self.worker.run())
        c = await self.peer.accept()
        await c.register({"worker": "W-9", "tools": ["echo"],
                          "heartbeatMs": 200})
        ping = await c.expect("ping")
        self.assertEqual(ping.get("params"), None)
        # No answer: two heartbeats later the worker drops the connection
        # and comes back.
        await c.closed()
        c2 = await self.peer.accept()
        # A berthd that answers keeps the connection (a heartbeat of 1 s,
        # so that a stall of this loaded process does not look like a
        # dead berthd).
        m = await c2.register({"worker": "W-10", "tools": ["echo"],
                               "heartbeatMs": 1000})
        self.assertEqual(m["method"], "worker/register")
        for _ in range(2):
            ping = await c2.expect("ping")
            c2.reply(ping["id"], {})
        self.assertFalse(c2.eof)

    async def test_ping__from_berthd__is_answered(self):
        c = await self.serve([echo])
        rid = c.request("ping", {})
        self.assertEqual((await c.answer(rid))["result"], {})
        rid = c.request("worker/frobnicate", {})
        self.assertEqual((await c.answer(rid))["error"]["code"], -32601)


class Drain(PeerTest):

    async def test_close__drains_finishes_the_runs_then_closes(self):
        gate = asyncio.Event()

        @berth.tool(id="gated")
        async def gated(input, ctx):
            await gate.wait()
            return "finished"

        c = await self.serve([gated])
        rid = await self.started(c, "G", "gated")
        closing = await self.begin_close(c)
        await asyncio.sleep(0)
        self.assertFalse(closing.done())
        gate.set()
        self.assertEqual((await c.answer(rid))["result"],
                         {"output": "finished"})
        await c.closed()
        await asyncio.wait_for(closing, support.DEADLINE)
        await asyncio.wait_for(self.task, support.DEADLINE)

    async def test_close_timeout__a_run_that_stops_by_its_abort__is_left_to_berthd_unanswered(
            self):
        @berth.tool(id="stuck")
        async def stuck(input, ctx):
            await asyncio.sleep(3600)

        c = await self.serve([stuck], heartbeat_ms=HOUR_MS)
        rid = await self.started(c, "T", "stuck")
        closing = await self.begin_close(c, timeout=0.2)
        # No `aborted` error, which berthd would retry whatever the tool's
        # onInterrupt says: the connection closes under the run, and
        # berthd applies onInterrupt.
        await c.closed()
        self.assertEqual(answers(c, rid), [])
        await asyncio.wait_for(closing, support.DEADLINE)
        await asyncio.wait_for(self.task, support.DEADLINE)

    async def test_close_timeout__a_run_that_returns_what_it_has_within_the_grace__is_answered(
            self):
        @berth.tool(id="tidy")
        async def tidy(input, ctx):
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                # Its cleanup takes longer than the second the worker
                # used to give, and less than the abort grace.
                await asyncio.sleep(2)
                return {"partial": True, "reason": ctx.abort_reason}

        c = await self.serve([tidy])
        rid = await self.started(c, "P", "tidy")
        closing = await self.begin_close(c, timeout=0.1)
        self.assertEqual((await c.answer(rid))["result"],
                         {"output": {"partial": True, "reason": "closing"}})
        await c.closed()
        await asyncio.wait_for(closing, support.DEADLINE)

    async def test_close_timeout__a_sync_execute_that_returns_when_cancelled__is_answered(
            self):
        def careful(input, ctx):
            if ctx.wait_cancelled(support.DEADLINE):
                time.sleep(0.3)  # its cleanup
                return {"stopped": ctx.abort_reason}
            return "never aborted"

        c = await self.serve([berth.Tool("careful", careful)])
        rid = await self.started(c, "S", "careful")
        closing = await self.begin_close(c, timeout=0.1)
        self.assertEqual((await c.answer(rid))["result"],
                         {"output": {"stopped": "closing"}})
        await c.closed()
        await asyncio.wait_for(closing, support.DEADLINE)

    async def test_close__a_run_berthd_aborts_that_goes_on__is_waited_for_the_grace_only(
            self):
        gate = threading.Event()
        self.addCleanup(gate.set)

        def deaf(input, ctx):
            gate.wait(support.DEADLINE)  # a call that nothing interrupts
            return "late"

        c = await self.serve([berth.Tool("deaf", deaf)], heartbeat_ms=HOUR_MS)
        rid = await self.started(c, "B", "deaf")
        closing = await self.begin_close(c)
        # berthd cancels the job: it gives the run its kill grace, then
        # gives it up; so does the closing worker.
        c.notify("abort", {"jobId": "B", "reason": "cancelled"})
        await c.closed()
        await asyncio.wait_for(closing, support.DEADLINE)
        await asyncio.wait_for(self.task, support.DEADLINE)
        self.assertEqual(answers(c, rid), [])

    async def test_close_timeout__a_run_pushed_after_it__is_not_started_and_left_to_berthd(
            self):
        gate = threading.Event()
        self.addCleanup(gate.set)
        started = []

        def deaf(input, ctx):
            gate.wait(support.DEADLINE)
            return "late"

        @berth.tool(id="note")
        async def note(input, ctx):
            started.append(ctx.job_id)
            return "ran"

        c = await self.serve([berth.Tool("deaf", deaf), note],
                             heartbeat_ms=HOUR_MS)
        c.request("run", {"job": job("D1", "deaf")})
        await support.until(lambda: self.worker.running_jobs, "the run")
        closing = asyncio.ensure_future(self.worker.close(timeout=0))
        # berthd has not taken the drain yet, and pushes one more run,
        # while the aborted run keeps the connection open for its grace.
        await c.expect("worker/drain")
        rid = c.request("run", {"job": job("N1", "note")})
        await c.closed()
        await asyncio.wait_for(closing, support.DEADLINE)
        self.assertEqual(started, [], "a run after close()'s timeout ran")
        self.assertEqual(answers(c, rid), [])

    async def test_close_twice_at_once__both_return_once_run_has_returned(
            self):
        gate = asyncio.Event()

        @berth.tool(id="gated")
        async def gated(input, ctx):
            await gate.wait()
            return "finished"

        c = await self.serve([gated], heartbeat_ms=HOUR_MS)
        rid = await self.started(c, "G2", "gated")
        first = asyncio.ensure_future(self.worker.close())
        second = await self.begin_close(c)
        self.assertFalse(first.done() or second.done())
        gate.set()
        self.assertEqual((await c.answer(rid))["result"],
                         {"output": "finished"})
        await c.closed()
        await asyncio.wait_for(first, support.DEADLINE)
        self.assertTrue(self.task.done(), "close() returned before run()")
        await asyncio.wait_for(second, support.DEADLINE)
        # One drain, not two.
        self.assertFalse([m for m in c.held
                          if m.get("method") == "worker/drain"])

    async def test_close_twice__the_second_timeout_stops_the_first_too(self):
        @berth.tool(id="stuck")
        async def stuck(input, ctx):
            await asyncio.sleep(3600)

        c = await self.serve([stuck], heartbeat_ms=HOUR_MS)
        rid = await self.started(c, "T2", "stuck")
        first = await self.begin_close(c)
        second = asyncio.ensure_future(self.worker.close(timeout=0))
        await c.closed()
        self.assertEqual(answers(c, rid), [])
        await asyncio.wait_for(second, support.DEADLINE)
        await asyncio.wait_for(first, support.DEADLINE)
        await asyncio.wait_for(self.task, support.DEADLINE)
        self.assertFalse([m for m in c.held
                          if m.get("method") == "worker/drain"])

    async def test_close__a_cancelled_caller__does_not_stop_the_close(self):
        gate = asyncio.Event()

        @berth.tool(id="gated")
        async def gated(input, ctx):
            await gate.wait()
            return "finished"

        c = await self.serve([gated], heartbeat_ms=HOUR_MS)
        rid = await self.started(c, "G3", "gated")
        closing = await self.begin_close(c)
        closing.cancel()  # say, a timeout of the caller's own
        gate.set()
        self.assertEqual((await c.answer(rid))["result"],
                         {"output": "finished"})
        await c.closed()
        await asyncio.wait_for(self.task, support.DEADLINE)

    async def test_close__timeout_that_is_not_seconds__raises_and_closes_nothing(
            self):
        c = await self.serve([echo])
        for bad in (-1, "soon", float("nan"), True):
            with self.assertRaises(ValueError) as cm:
                await self.worker.close(timeout=bad)
            self.assertIn(repr(bad), str(cm.exception))
        self.assertTrue(self.worker.registered.is_set())
        self.assertEqual((await self.run_job(c, job("E", "echo")))["output"],
                         {"echo": {}, "job": "E", "attempt": 1})
        self.assertFalse([m for m in c.held
                          if m.get("method") == "worker/drain"])

    async def test_close_timeout__bounds_the_wait_for_berthds_answer_to_worker_drain(
            self):
        c = await self.serve([echo], heartbeat_ms=HOUR_MS)
        with mock.patch.object(worker_module, "DRAIN_ANSWER", 3600.0):
            closing = asyncio.ensure_future(self.worker.close(timeout=0.2))
            await c.expect("worker/drain")  # and never answered
            await c.closed()
            await asyncio.wait_for(closing, support.DEADLINE)
        await asyncio.wait_for(self.task, support.DEADLINE)

    async def test_close__berthd_that_stops_reading__has_the_connection_dropped(
            self):
        answered = []

        @berth.tool(id="big")
        async def big(input, ctx):
            answered.append(ctx.job_id)
            return "x" * (8 << 20)

        c = await self.serve([big], heartbeat_ms=HOUR_MS)
        # berthd stops reading: the answer fills the socket, then the
        # worker's buffer, and the last lines can never leave.
        c.writer.transport.pause_reading()
        c.request("run", {"job": job("BIG", "big")})
        await support.until(lambda: answered and
                            not self.worker.running_jobs, "the answer")
        await asyncio.wait_for(self.worker.close(timeout=0.5),
                               support.DEADLINE)
        await asyncio.wait_for(self.task, support.DEADLINE)


class CloseWhileConnecting(PeerTest):
    """close() while the connection changes under it: once close() has
    begun, the worker registers on no new connection, drains the
    registration it finds under way, and returns."""

    async def test_close__connection_drops_while_draining__never_connects_again(
            self):
        gate = threading.Event()
        self.addCleanup(gate.set)

        @berth.tool(id="stubborn")
        def stubborn(input, ctx):
            # A thread: nothing interrupts it, so its run outlives the drop.
            gate.wait(support.DEADLINE)
            return "late"

        c = await self.serve([stubborn])
        c.request("run", {"job": job("DD", "stubborn")})
        await support.until(lambda: self.worker.running_jobs, "the run")
        closing = await self.begin_close(c)
        c.writer.transport.abort()  # berthd restarts, the network fails
        await asyncio.wait_for(closing, support.DEADLINE)
        await asyncio.wait_for(self.task, support.DEADLINE)
        self.assertEqual(len(self.peer.all), 1, "the closing worker "
                         "connected again")
        self.assertFalse(self.worker.registered.is_set())

    async def test_close__abort_grace_that_ends_between_two_reads_of_the_clock__returns(
            self):
        # The worker's reads of the loop's clock (asyncio's own keep the
        # real time) stand still until the drop has aborted the run, so its
        # abort grace ends ABORT_GRACE after that moment. Then the first
        # read of the wait for that grace is just before its end, and every
        # later read just after it. A close() that read the clock twice in
        # one look found the run not given up by the first read and no
        # grace left to time by the second, and waited for ever.
        gate = threading.Event()
        self.addCleanup(gate.set)
        loop = asyncio.get_running_loop()
        real = loop.time
        start = real()
        end = start + worker_module.ABORT_GRACE
        reads = None

        def in_settle(frame) -> bool:
            while frame is not None:
                if frame.f_code.co_name == "_settle":
                    return True
                frame = frame.f_back
            return False

        def clock() -> float:
            nonlocal reads
            caller = sys._getframe(1)
            if caller.f_globals.get("__name__") != "berth.worker":
                return real()
            if reads is None:
                return start
            if not in_settle(caller):
                return end + 0.0005
            reads += 1
            return end - 0.0005 if reads == 1 else end + 0.0005

        loop.time = clock
        self.addCleanup(delattr, loop, "time")

        @berth.tool(id="stubborn")
        def stubborn(input, ctx):
            gate.wait(support.DEADLINE)  # a thread: it ignores the abort
            return "late"

        c = await self.serve([stubborn])
        c.request("run", {"job": job("GR", "stubborn")})
        await support.until(lambda: self.worker.running_jobs, "the run")
        closing = await self.begin_close(c)
        c.writer.transport.abort()
        await support.until(lambda: not self.worker.registered.is_set(),
                            "the drop")
        # run() waits for the grace of the run the drop aborted; a poke
        # makes it look again, as the end of any other run would.
        reads = 0
        self.worker._poke()
        await asyncio.wait_for(closing, 5.0)
        await asyncio.wait_for(self.task, 5.0)
        self.assertGreaterEqual(reads, 2)

    async def test_close__while_authenticating__registers_nothing(self):
        await self.peer.stop()
        self.peer = await support.Peer(tcp=True).start()
        self.worker = berth.Worker([echo], url="tcp://127.0.0.1:%d"
                                   % self.peer.port, token="s3cret")
        self.task = asyncio.ensure_future(self.worker.run())
        c = await self.peer.accept()
        auth = await c.next()
        self.assertEqual(auth["method"], "server/auth")
        closing = asyncio.ensure_future(self.worker.close())
        # berthd takes the token as close() begins.
        c.reply(auth["id"], {})
        await c.closed()
        self.assertFalse([m for m in c.held
                          if m.get("method") == "worker/register"],
                         "the closing worker registered")
        await asyncio.wait_for(closing, support.DEADLINE)
        await asyncio.wait_for(self.task, support.DEADLINE)
        self.assertEqual(len(self.peer.all), 1)

    async def test_close__while_registering__drains_it_and_answers_its_run(
            self):
        self.worker = berth.Worker([echo], socket=self.peer.path)
        self.task = asyncio.ensure_future(self.worker.run())
        c = await self.peer.accept()
        reg = await c.expect("worker/register")
        closing = asyncio.ensure_future(self.worker.close())
        await asyncio.sleep(0)
        # berthd registered the worker and pushed it a waiting job in one
        # write: a run that close() must answer, not close the
        # connection on.
        c.send({"jsonrpc": "2.0", "id": reg["id"],
                "result": {"worker": "W-1", "tools": ["echo"],
                           "heartbeatMs": 10000}},
               c.req("berth-r", "run", {"job": job("R", "echo", {"a": 1})}))
        await self.answer_drain(c)
        self.assertEqual((await c.answer("berth-r"))["result"],
                         {"output": {"echo": {"a": 1}, "job": "R",
                                     "attempt": 1}})
        await c.closed()
        await asyncio.wait_for(closing, support.DEADLINE)
        await asyncio.wait_for(self.task, support.DEADLINE)
        self.assertEqual(len(self.peer.all), 1)

    async def test_close__registration_never_answered__returns_at_timeout(
            self):
        self.worker = berth.Worker([echo], socket=self.peer.path)
        self.task = asyncio.ensure_future(self.worker.run())
        c = await self.peer.accept()
        await c.expect("worker/register")
        await asyncio.wait_for(self.worker.close(timeout=0.2),
                               support.DEADLINE)
        await c.closed()
        await asyncio.wait_for(self.task, support.DEADLINE)
        self.assertEqual(len(self.peer.all), 1)


class CloseAndRun(PeerTest):
    """close() and the run() it ends: close() returns once run() has
    returned, however run() was started, and whoever calls it."""

    async def test_close__run_started_outside_async_with__returns_once_run_has_returned(
            self):
        returned = threading.Event()

        def slow_to_stop(input, ctx):
            ctx.wait_cancelled(support.DEADLINE)
            time.sleep(0.5)  # it stops, though not at once
            returned.set()
            return "stopped"

        c = await self.serve([berth.Tool("slow-stop", slow_to_stop)],
                             heartbeat_ms=HOUR_MS)
        c.request("run", {"job": job("R", "slow-stop")})
        await support.until(lambda: self.worker.running_jobs, "the run")
        closing = await self.begin_close(c)
        c.writer.transport.abort()  # the connection drops while it drains
        await asyncio.wait_for(closing, support.DEADLINE)
        self.assertTrue(returned.is_set(),
                        "close() returned before the aborted execute did")
        self.assertTrue(self.task.done(), "close() returned before run()")
        self.assertEqual(len(self.peer.all), 1)

    async def test_close_before_run__run_returns_at_once_without_connecting(
            self):
        self.worker = berth.Worker([echo], socket=self.peer.path)
        await asyncio.wait_for(self.worker.close(), support.DEADLINE)
        await asyncio.wait_for(self.worker.run(), support.DEADLINE)
        self.assertEqual(self.peer.all, [])

    async def test_close_before_run_and_async_with_left_at_once__log_no_error(
            self):
        # run() never began, or returned at once (close() came first), so
        # the worker has no loop of its own: the close still has to wait
        # on the running one rather than fail and say so.
        with self.assertNoLogs("berth.worker", logging.ERROR):
            self.worker = berth.Worker([echo], socket=self.peer.path)
            await asyncio.wait_for(self.worker.close(), support.DEADLINE)
            async with berth.Worker([echo], socket=self.peer.path):
                pass
        self.assertEqual(self.peer.all, [])

    async def test_close_inside_execute_without_await__answers_the_run_then_closes(
            self):
        @berth.tool(id="last")
        async def last(input, ctx):
            self.worker.close()  # begins the close; the run goes on
            return "bye"

        c = await self.serve([last], heartbeat_ms=HOUR_MS)
        rid = c.request("run", {"job": job("L1", "last")})
        self.assertEqual((await c.answer(rid))["result"], {"output": "bye"})
        await self.answer_drain(c)
        await c.closed()
        await asyncio.wait_for(self.task, support.DEADLINE)

    async def test_close_awaited_inside_execute__waits_for_its_own_run_until_the_timeout(
            self):
        @berth.tool(id="selfish")
        async def selfish(input, ctx):
            await self.worker.close(timeout=0.2)
            return "never answered"

        c = await self.serve([selfish], heartbeat_ms=HOUR_MS)
        with self.assertLogs("berth.worker", logging.WARNING) as cm:
            rid = c.request("run", {"job": job("W1", "selfish")})
            await self.answer_drain(c)
            await c.closed()
            await asyncio.wait_for(self.task, support.DEADLINE)
        self.assertEqual(answers(c, rid), [])
        self.assertTrue([m for m in cm.output if "waits for that run" in m],
                        cm.output)

    async def test_close_while_berthd_refuses_the_registration__returns_and_run_raises(
            self):
        self.worker = berth.Worker([echo], socket=self.peer.path)
        self.task = asyncio.ensure_future(self.worker.run())
        c = await self.peer.accept()
        reg = await c.expect("worker/register")
        closing = asyncio.ensure_future(self.worker.close())
        c.reply_error(reg["id"], -32602, "invalid params", {"errors": [
            {"instancePath": "/tools/0/inputSchema", "keyword": "type",
             "message": "must be an object"}]})
        self.assertIsNone(await asyncio.wait_for(closing, support.DEADLINE))
        with self.assertRaises(berth.RegistrationError):
            await asyncio.wait_for(self.task, support.DEADLINE)

    async def test_close_while_berthd_cannot_be_reached__ends_run_without_an_error(
            self):
        await self.peer.stop()  # nothing listens: every attempt fails
        self.worker = berth.Worker([echo], socket=self.peer.path)
        with self.assertLogs("berth.worker", logging.WARNING) as cm:
            self.task = asyncio.ensure_future(self.worker.run())
            await support.until(lambda: cm.records, "a failed attempt")
            await asyncio.wait_for(self.worker.close(), support.DEADLINE)
        self.assertIsNone(await asyncio.wait_for(self.task,
                                                 support.DEADLINE))


class Signals(PeerTest):
    """serve() in a real process (worker_app.py), stopped by signals."""

    async def start_app(self) -> tuple:
        marks = os.path.join(self.dir.path, "marks")
        os.mkdir(marks)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, os.path.join(support.HERE, "worker_app.py"),
            "--marks", marks, "--socket", self.peer.path,
            stderr=asyncio.subprocess.DEVNULL,
            preexec_fn=support.die_with_this_process())
        self.addCleanup(lambda: proc.returncode is None and proc.kill())
        c = await self.peer.accept()
        await c.register()
        return proc, c

    async def test_sigterm__drains_finishes_the_run_and_exits_0(self):
        proc, c = await self.start_app()
        rid = c.request("run", {"job": job("S1", "py-slow", {"seconds": 0.5})})
        proc.send_signal(signal.SIGTERM)
        await self.answer_drain(c)
        out = (await c.answer(rid))["result"]
        self.assertEqual(out["output"]["slept"], 0.5)
        await c.closed()
        self.assertEqual(await asyncio.wait_for(proc.wait(),
                                                support.DEADLINE), 0)

    async def test_second_sigterm__aborts_the_runs_and_exits_0(self):
        proc, c = await self.start_app()
        rid = c.request("run", {"job": job("S2", "py-slow", {})})
        marks = os.path.join(self.dir.path, "marks")
        await support.until(lambda: os.path.exists(
            os.path.join(marks, "started-S2-1")), "the run to start")
        proc.send_signal(signal.SIGTERM)
        await self.answer_drain(c)
        proc.send_signal(signal.SIGTERM)
        # The run stops by its abort: it is left to berthd (onInterrupt).
        await c.closed()
        self.assertEqual(answers(c, rid), [])
        await support.until(lambda: os.path.exists(
            os.path.join(marks, "aborted-S2-closing")), "the abort")
        self.assertEqual(await asyncio.wait_for(proc.wait(),
                                                support.DEADLINE), 0)


class Functions(PeerTest):

    def make(self) -> berth.Tool:
        self.calls: list[tuple] = []

        def needs_approval(input, info):
            self.calls.append(("require_approval", info.job_id))
            if input.get("explode"):
                raise RuntimeError("approval policy is broken")
            return input["amount"] > 100

        async def available(input, info):
            self.calls.append(("on_input_available", info.job_id))
            if input.get("hook_raises"):
                raise KeyError("hook")

        def on_output(output, info):
            self.calls.append(("on_output", info.tool))
            raise RuntimeError("on_output is broken")

        def display_output(t):
            if t.output.get("secret") == "explode":
                raise ValueError("transform is broken")
            return {"shown": t.output["public"]}

        return berth.Tool(
            "pay", self.pay_execute,
            require_approval=needs_approval,
            on_input_available=available, on_output=on_output,
            to_model_output=lambda o: "paid %s" % o["public"],
            transform={
                "display": {"input": lambda t: {"amount": t.input["amount"]},
                            "approval": lambda t: {"ask": t.payload["amount"]},
                            "output": display_output,
                            "resume": lambda t: {"by": t.resume_data["by"]},
                            "error": lambda t: {"failed": True}},
                "transcript": {"output": lambda t: None}})

    async def pay_execute(self, input, ctx):
        self.calls.append(("execute", ctx.job_id))
        if input.get("fail"):
            raise ToolError("card declined", retryable=False)
        return {"public": input["amount"], "secret": input.get("secret", "k")}

    async def test_input__require_approval_views_and_hook(self):
        c = await self.serve([self.make()])
        rid = c.request("input", {"job": job("I1", "pay", {"amount": 500})})
        self.assertEqual((await c.answer(rid))["result"], {
            "requireApproval": True,
            "views": {"display": {"input": {"amount": 500},
                                  "approval": {"ask": 500}}}})
        rid = c.request("input", {"job": job("I2", "pay", {"amount": 5})})
        self.assertEqual((await c.answer(rid))["result"], {
            "requireApproval": False,
            "views": {"display": {"input": {"amount": 5}}}})
        self.assertEqual(self.calls, [
            ("require_approval", "I1"), ("on_input_available", "I1"),
            ("require_approval", "I2"), ("on_input_available", "I2")])

    async def test_input__functions_that_raise__fail_safe(self):
        c = await self.serve([self.make()])
        rid = c.request("input", {"job": job(
            "I3", "pay", {"amount": 5, "explode": True,
                          "hook_raises": True})})
        out = (await c.answer(rid))["result"]
        # A broken approval function asks a person; a broken hook changes
        # nothing; both are in the answer's logs.
        self.assertTrue(out["requireApproval"])
        self.assertIn("approval", out["views"]["display"])
        self.assertEqual(len(out["logs"]), 2, out["logs"])
        self.assertTrue(all(x["level"] == "error" and "traceback" in
                            x["data"] for x in out["logs"]), out["logs"])

    async def test_transform__stage_views_and_a_broken_one_is_a_placeholder(
            self):
        c = await self.serve([self.make()])
        rid = c.request("transform", {"jobId": "T1", "tool": "pay",
                                      "stage": "resume",
                                      "payload": {"by": "ada"}})
        self.assertEqual((await c.answer(rid))["result"],
                         {"views": {"display": {"resume": {"by": "ada"}}}})
        rid = c.request("transform", {"jobId": "T1", "tool": "pay",
                                      "stage": "resume", "payload": {}})
        out = (await c.answer(rid))["result"]
        self.assertEqual(out["views"], {
            "display": {"resume": {"message":
                                   "Tool resume payload unavailable"}}})
        # The broken transform goes back in the answer's logs, for the
        # job's log (docs/WORKERS.md).
        self.assertEqual([(x["level"], x["message"]) for x in out["logs"]],
                         [("error", "transform.display.resume raised "
                           "KeyError: 'by'")])
        rid = c.request("transform", {"jobId": "T1", "tool": "nope",
                                      "stage": "resume", "payload": {}})
        self.assertEqual((await c.answer(rid))["error"]["code"], -32011)
        rid = c.request("transform", {"jobId": "T1", "tool": "pay",
                                      "stage": "inputDelta", "payload": {}})
        self.assertEqual((await c.answer(rid))["error"]["code"], -32602)

    async def test_run__views_model_output_and_hooks_that_raise(self):
        c = await self.serve([self.make()])
        out = await self.run_job(c, job("R1", "pay", {"amount": 7}))
        self.assertEqual(out, {
            "output": {"public": 7, "secret": "k"},
            "modelOutput": "paid 7",
            "views": {"display": {"output": {"shown": 7}},
                      "transcript": {"output": {
                          "message": "Tool output payload unavailable"}}}})
        # on_output raised: logged on the job, the outcome unchanged.
        logline = await c.expect("worker/log")
        self.assertIn("on_output raised RuntimeError",
                      logline["params"]["message"])
        out = await self.run_job(c, job("R2", "pay", {"amount": 7,
                                                      "secret": "explode"}))
        self.assertEqual(out["views"]["display"]["output"],
                         {"message": "Tool output payload unavailable"})
        out = await self.run_job(c, job("R3", "pay", {"amount": 7,
                                                      "fail": True}))
        self.assertEqual(out, {"error": {"message": "card declined",
                                         "retryable": False},
                               "views": {"display": {"error": {
                                   "failed": True}}}})

    async def test_run__errors_the_sdk_makes__carry_the_pending_and_error_views(
            self):
        # An error outcome of the SDK's own (a pydantic model refusing, a
        # to_model_output that raises, an output or suspend payload
        # berthd cannot take) carries the views as any error does, or
        # they stay pending for good.
        if pydantic is None:
            self.skipTest("pydantic is not installed")

        class In(pydantic.BaseModel):
            name: str

            @pydantic.field_validator("name")
            @classmethod
            def not_bob(cls, v):
                if v == "bob":
                    raise ValueError("no bob")
                return v

        def to_model(output):
            if output["name"] == "tmo":
                raise RuntimeError("no model output")
            return "ok"

        @berth.tool(id="v", input_schema=In, to_model_output=to_model,
                    transform={"display": {
                        "input": lambda t: {"shown": t.input["name"]},
                        "error": lambda t: {"code": t.error.get("code")}}})
        async def v(input, ctx):
            if input.name == "set":
                return {"name": {1, 2}}
            if input.name == "nul":
                ctx.suspend({"q": "\x00"})
            return {"name": input.name}

        c = await self.serve([v])
        for name, code in (("bob", "invalid_input"),
                           ("tmo", "to_model_output_failed"),
                           ("set", "invalid_output"),
                           ("nul", "invalid_suspend")):
            out = await self.run_job(c, job("V-" + name, "v",
                                            {"name": name}),
                                     pending={"views": ["input"]})
            self.assertEqual(out["error"]["code"], code, out)
            self.assertEqual(out.get("views"), {"display": {
                "input": {"shown": name}, "error": {"code": code}}},
                (name, out))

    async def test_transform_returning_none__is_a_placeholder_logged_on_the_job(
            self):
        c = await self.serve([self.make()])
        out = await self.run_job(c, job("N1", "pay", {"amount": 3}))
        self.assertEqual(out["views"]["transcript"]["output"],
                         {"message": "Tool output payload unavailable"})
        lines = [(await c.expect("worker/log"))["params"] for _ in range(2)]
        self.assertIn(("warn", "transform.transcript.output returned None; "
                       "the view is a placeholder"),
                      [(x["level"], x["message"]) for x in lines], lines)
        # In the answer's logs where berthd asks before the stage commits.
        rid = c.request("transform", {"jobId": "N2", "tool": "pay",
                                      "stage": "output",
                                      "payload": {"public": 1}})
        out = (await c.answer(rid))["result"]
        self.assertEqual([(x["level"], x["message"]) for x in out["logs"]],
                         [("warn", "transform.transcript.output returned "
                           "None; the view is a placeholder")])

    async def test_run__pending__runs_the_hook_and_returns_missing_views(self):
        c = await self.serve([self.make()])
        out = await self.run_job(
            c, job("P1", "pay", {"amount": 9},
                   resumeData={"by": "bob"}),
            pending={"onInputAvailable": True,
                     "views": ["input", "resume"]})
        self.assertEqual(out["views"]["display"],
                         {"input": {"amount": 9}, "resume": {"by": "bob"},
                          "output": {"shown": 9}})
        self.assertEqual(self.calls[:2], [("on_input_available", "P1"),
                                          ("execute", "P1")])


if __name__ == "__main__":
    unittest.main()

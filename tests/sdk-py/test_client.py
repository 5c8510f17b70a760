"""The client against a real berthd: every method of PROTOCOL.md, its
errors, pipelining, waits, event streams across restarts, TCP."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import unittest

import support
import berth
from berth import client as client_module

# An external tool that logs two lines and reports progress, then answers.
LOGGER = {
    "id": "logger",
    "description": "Logs two lines, then answers",
    "inputSchema": {"type": "object"},
    "command": ["/bin/sh", "-c",
                "read line; "
                "echo '{\"log\":{\"level\":\"info\",\"message\":\"one\","
                "\"n\":1}}'; "
                "echo '{\"log\":{\"level\":\"warn\",\"message\":\"two\"}}'; "
                "echo '{\"output\":{\"logged\":2}}'"],
}


class Daemon(unittest.IsolatedAsyncioTestCase):
    """One berthd for the class (example tools, a logging tool, TCP)."""

    listen = True
    dir: support.TempDir
    d: support.Berthd

    @classmethod
    def setUpClass(cls) -> None:
        cls.dir = support.TempDir("berth-sdk-py-client.")
        tools = os.path.join(cls.dir.path, "tools")
        os.mkdir(tools)
        with open(os.path.join(tools, "logger.json"), "w") as f:
            json.dump(LOGGER, f)
        cls.d = support.Berthd(cls.dir.path,
                               tools=(support.EXAMPLES, tools),
                               listen=cls.listen).start()

    @classmethod
    def tearDownClass(cls) -> None:
        rc = cls.d.stop()
        cls.dir.cleanup()
        if rc != 0:
            raise AssertionError("berthd exited %d:\n%s" % (rc, cls.d.log()))

    async def asyncSetUp(self) -> None:
        self.c = await berth.connect(self.d.socket)

    async def asyncTearDown(self) -> None:
        await self.c.close()


class Methods(Daemon):

    async def test_info_ping_and_tools__answer_the_protocol_objects(self):
        info = await self.c.info()
        self.assertEqual(info["name"], "berth")
        self.assertEqual(info["protocolVersion"], "1")
        self.assertIsNone(await self.c.ping())
        tools = {t["name"]: t for t in await self.c.tools()}
        self.assertIn("weather-tool", tools)
        self.assertIn("noop", tools)
        self.assertTrue(tools["write-note"]["requireApproval"])
        self.assertIn("connected", repr(self.c))

    async def test_submit_wait_get__completes_and_reads_its_views(self):
        job = await self.c.submit("weather-tool", {"location": "Paris"},
                                  metadata={"who": "test"},
                                  tool_call_id="call-1", run_id="run-1",
                                  priority=5, timeout=30, max_retries=1)
        self.assertEqual(job["status"], "pending")
        self.assertEqual(job["timeoutMs"], 30000)
        done = await self.c.wait(job["id"], timeout=support.DEADLINE)
        self.assertEqual(done["status"], "completed", done)
        self.assertEqual(done["output"]["location"], "Paris")
        got = await self.c.get(job["id"], view="display")
        self.assertEqual(got["toolCallId"], "call-1")
        self.assertEqual(got["metadata"], {"who": "test"})

    async def test_submit__bad_input_and_unknown_tool__raise_their_codes(self):
        with self.assertRaises(berth.InvalidParams) as cm:
            await self.c.submit("weather-tool", {"location": 3})
        self.assertEqual(cm.exception.code, -32602)
        self.assertEqual(cm.exception.errors[0]["instancePath"], "/location")
        with self.assertRaises(berth.NotFound) as cm:
            await self.c.submit("no-such-tool", {})
        self.assertEqual(cm.exception.data, {"id": "no-such-tool"})
        with self.assertRaises(berth.NotFound):
            await self.c.get("0190d6f4-0000-7000-8000-000000000000")
        with self.assertRaises(ValueError):
            await self.c.submit("noop", {}, timeout=-1)
        with self.assertRaises(TypeError):
            await self.c.submit("noop", {"x": {1, 2}})
        with self.assertRaises(ValueError):
            await self.c.submit("noop", {"x": float("nan")})
        # Nothing of that broke the connection.
        self.assertIsNone(await self.c.ping())

    async def test_submit__same_idempotency_key__returns_the_first_job(self):
        a = await self.c.submit("noop", {"n": 1}, idempotency_key="k-1")
        b = await self.c.submit("noop", {"n": 2}, idempotency_key="k-1")
        self.assertEqual(a["id"], b["id"])
        self.assertEqual(b["input"], {"n": 1})

    async def test_submit__delay_and_run_at__set_when_it_runs(self):
        import datetime
        at = datetime.datetime.now(datetime.timezone.utc) + \
            datetime.timedelta(hours=1)
        job = await self.c.submit("noop", {}, run_at=at)
        self.assertEqual(job["runAt"][:16], at.strftime("%Y-%m-%dT%H:%M"))
        with self.assertRaises(ValueError):
            await self.c.submit("noop", {}, run_at=at.replace(tzinfo=None))
        job = await self.c.submit("noop", {},
                                  delay=datetime.timedelta(hours=1))
        self.assertEqual((await self.c.wait(job["id"], timeout=0))["status"],
                         "pending")
        await self.c.cancel(job["id"])

    async def test_approve_and_decline__end_where_the_protocol_says(self):
        path = os.path.join(self.dir.path, "note.txt")
        job = await self.c.submit("write-note", {"path": path, "text": "hi"})
        self.assertEqual(job["status"], "awaiting_approval")
        job = await self.c.approve(job["id"], note="fine")
        self.assertEqual(job["status"], "pending")
        with self.assertRaises(berth.Conflict) as cm:
            await self.c.approve(job["id"])
        self.assertIn(cm.exception.status, ("pending", "running",
                                            "completed"))
        done = await self.c.wait(job["id"], timeout=support.DEADLINE)
        self.assertEqual(done["status"], "completed", done)
        job = await self.c.submit("write-note", {"path": path, "text": "no"})
        job = await self.c.decline(job["id"], reason="not now")
        self.assertEqual(job["status"], "declined")
        self.assertEqual(job["approval"]["reason"], "not now")

    async def test_resume__bad_data_keeps_it_suspended_good_data_finishes(
            self):
        job = await self.c.submit("ask-name", {})
        job = await self.c.wait(job["id"], timeout=support.DEADLINE)
        self.assertEqual(job["status"], "suspended")
        self.assertEqual(job["suspendPayload"],
                         {"question": "What is your name?"})
        with self.assertRaises(berth.InvalidParams) as cm:
            await self.c.resume(job["id"], {"answer": ""})
        self.assertEqual(cm.exception.errors[0]["instancePath"], "/answer")
        self.assertEqual((await self.c.get(job["id"]))["status"],
                         "suspended")
        await self.c.resume(job["id"], {"answer": "Ada"})
        done = await self.c.wait(job["id"], timeout=support.DEADLINE)
        self.assertEqual(done["output"], {"message": "Hello, Ada!"})

    async def test_cancel_and_retry__make_what_the_protocol_says(self):
        job = await self.c.submit("sleep", {"ms": 600000})
        await self.c.wait(job["id"], until="running",
                          timeout=support.DEADLINE)
        job = await self.c.cancel(job["id"], reason="enough")
        self.assertEqual(job["status"], "cancelled")
        failed = await self.c.submit("fail", {"message": "boom"})
        failed = await self.c.wait(failed["id"], timeout=support.DEADLINE)
        self.assertEqual(failed["status"], "failed")
        self.assertEqual(failed["error"]["message"], "boom")
        again = await self.c.retry(failed["id"])
        self.assertEqual(again["retryOf"], failed["id"])
        self.assertNotEqual(again["id"], failed["id"])

    async def test_logs__pages_and_iterates_every_line(self):
        job = await self.c.submit("logger", {})
        await self.c.wait(job["id"], timeout=support.DEADLINE)
        lines = [line async for line in self.c.logs(job["id"])]
        self.assertEqual([(x["level"], x["message"]) for x in lines],
                         [("info", "one"), ("warn", "two")])
        self.assertEqual(lines[0]["data"], {"n": 1})
        page = await self.c.logs_page(job["id"], after=lines[0]["n"],
                                      limit=1)
        self.assertEqual([x["message"] for x in page["lines"]], ["two"])

    async def test_list__iterates_across_pages(self):
        run = "list-run-%d" % os.getpid()
        ids = [(await self.c.submit("noop", {"i": i}, run_id=run))["id"]
               for i in range(7)]
        seen = [j["id"] async for j in self.c.list(run_id=run, page_size=2)]
        self.assertEqual(sorted(seen), sorted(ids))
        page = await self.c.list_page(run_id=run, limit=3)
        self.assertEqual(len(page["jobs"]), 3)
        self.assertIn("nextCursor", page)
        with self.assertRaises(berth.InvalidParams):
            await self.c.list_page(cursor="not-a-cursor-berthd-gave")
        for j in [j async for j in self.c.list(status=["completed"],
                                               run_id=run)]:
            self.assertEqual(j["status"], "completed")

    async def test_pause__holds_the_tool_until_unpaused(self):
        await self.c.pause("noop")
        try:
            job = await self.c.submit("noop", {})
            self.assertEqual((await self.c.wait(job["id"], timeout=0.3))
                             ["status"], "pending")
        finally:
            await self.c.unpause("noop")
        done = await self.c.wait(job["id"], timeout=support.DEADLINE)
        self.assertEqual(done["status"], "completed")


class Pipelining(Daemon):

    async def test_requests__pipelined_on_one_connection__each_gets_its_answer(
            self):
        jobs = await asyncio.gather(*[self.c.submit("noop", {"i": i})
                                      for i in range(300)])
        self.assertEqual([j["input"]["i"] for j in jobs], list(range(300)))
        self.assertEqual(len({j["id"] for j in jobs}), 300)
        done = await asyncio.gather(*[self.c.wait(j["id"],
                                                  timeout=support.DEADLINE)
                                      for j in jobs])
        self.assertTrue(all(j["status"] == "completed" for j in done))

    async def test_answers__out_of_order__go_to_their_callers(self):
        job = await self.c.submit("sleep", {"ms": 600000})
        waiting = asyncio.ensure_future(self.c.wait(job["id"]))
        # Sent after the wait, answered before it.
        self.assertEqual((await self.c.get(job["id"]))["id"], job["id"])
        self.assertFalse(waiting.done())
        await self.c.cancel(job["id"])
        self.assertEqual((await asyncio.wait_for(
            waiting, support.DEADLINE))["status"], "cancelled")

    async def test_wait__cancelled__leaves_the_client_usable(self):
        job = await self.c.submit("sleep", {"ms": 600000})
        waiting = asyncio.ensure_future(self.c.wait(job["id"]))
        await asyncio.sleep(0.05)
        waiting.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await waiting
        with self.assertRaises(TimeoutError):
            await asyncio.wait_for(self.c.wait(job["id"]), 0.2)
        self.assertIsNone(await self.c.ping())
        await self.c.cancel(job["id"])

    async def test_wait__timeout__returns_the_job_as_it_is(self):
        job = await self.c.submit("sleep", {"ms": 600000})
        got = await self.c.wait(job["id"], timeout=0.2)
        self.assertIn(got["status"], ("pending", "running"))
        await self.c.cancel(job["id"])

    async def test_request__over_the_line_limit__refused_before_sending(self):
        small = berth.Client(self.d.socket, max_line=1000)
        async with small:
            with self.assertRaises(berth.InvalidRequest) as cm:
                await small.submit("noop", {"x": "y" * 2000})
            self.assertEqual(cm.exception.data, {"limit": 1000})
            deep: dict = {}
            cur = deep
            for _ in range(70):
                cur["a"] = {}
                cur = cur["a"]
            with self.assertRaises(berth.InvalidRequest):
                await small.submit("noop", deep)
            with self.assertRaises(berth.InvalidRequest):
                await small.submit("noop", {"x": "nul\x00"})
            with self.assertRaises(berth.InvalidRequest):
                await small.submit("noop", {"x": 1 << 64})
            self.assertEqual((await small.submit("noop", {"x": 1 << 62}))
                             ["input"], {"x": 1 << 62})


class Events(Daemon):

    async def test_events__replay_since_then_live(self):
        job = await self.c.submit("noop", {"e": 1})
        await self.c.wait(job["id"], timeout=support.DEADLINE)
        async with self.c.events(since=0, job_id=job["id"]) as events:
            seen = await support.collect(
                events, lambda e: e["type"] == "completed")
        self.assertEqual([e["type"] for e in seen],
                         ["created", "started", "completed"])
        self.assertEqual(events.last_seq, seen[-1]["seq"])
        # Live, from the next event on.
        stream = self.c.events()
        job2 = await self.c.submit("noop", {"e": 2})
        first = await asyncio.wait_for(stream.__anext__(), support.DEADLINE)
        self.assertEqual(first["jobId"], job2["id"])
        await stream.close()
        with self.assertRaises(StopAsyncIteration):
            await stream.__anext__()

    async def test_events__progress__comes_with_progress_true(self):
        job = await self.c.submit("sleep", {"ms": 600000})
        async with self.c.events(job_id=job["id"], progress=True) as events:
            got = await support.collect(events, lambda e: "seq" not in e)
        self.assertEqual(got[-1]["jobId"], job["id"])
        self.assertIn("progress", got[-1])
        await self.c.cancel(job["id"])

    async def test_events__consumer_far_behind__still_gets_every_event(self):
        saved = client_module.EVENT_QUEUE_MAX
        client_module.EVENT_QUEUE_MAX = 5
        try:
            start = (await self.c.poll_events(since=0, limit=1000))
            since = start["next"]
            while start["events"]:
                start = await self.c.poll_events(since=since, limit=1000)
                since = start["next"]
            stream = self.c.events(since=since)
            jobs = [await self.c.submit("noop", {"i": i}) for i in range(20)]
            for j in jobs:
                await self.c.wait(j["id"], timeout=support.DEADLINE)
            seqs = [e["seq"] for e in await support.collect(
                stream, lambda e: e["seq"] >= since + 60)]
            await stream.close()
        finally:
            client_module.EVENT_QUEUE_MAX = saved
        self.assertEqual(seqs, list(range(since + 1, since + 61)))

    async def test_events__types__only_those_replayed_then_live(self):
        since = (await self.c.poll_events(since=0, limit=1))["next"]
        while True:
            page = await self.c.poll_events(since=since, limit=1000)
            if not page["events"]:
                break
            since = page["next"]
        note = await self.c.submit("write-note", {
            "path": os.path.join(self.dir.path, "note-types"), "text": "x"})
        await self.c.cancel(note["id"])
        done = await self.c.submit("noop", {"t": 1})
        await self.c.wait(done["id"], timeout=support.DEADLINE)
        ends = ["completed", "cancelled"]
        mine = {note["id"], done["id"]}
        got: list = []

        async def read(events: berth.EventStream) -> None:
            live = None
            async for e in events:
                self.assertIn(e["type"], ends)
                if e["jobId"] not in mine:
                    continue  # another test's late job
                got.append((e["jobId"], e["type"]))
                if e["jobId"] == done["id"]:
                    # Live now: its created and started come first, and
                    # pass by.
                    live = await self.c.submit("noop", {"t": 2})
                    mine.add(live["id"])
                elif live and e["jobId"] == live["id"]:
                    got[-1] = ("live", e["type"])
                    return

        # Any iterable of names: a generator is read once.
        async with self.c.events(since=since,
                                 types=(t for t in ends)) as events:
            await asyncio.wait_for(read(events), support.DEADLINE)
        self.assertEqual(got, [(note["id"], "cancelled"),
                               (done["id"], "completed"),
                               ("live", "completed")])
        # One name, as a str.
        async with self.c.events(since=since, types="cancelled") as events:
            first = await asyncio.wait_for(events.__anext__(),
                                           support.DEADLINE)
        self.assertEqual((first["jobId"], first["type"]),
                         (note["id"], "cancelled"))

        # What berthd does not take is its InvalidParams naming /types.
        for types in ([], ["finished"], "progress", ["completed", ""], [5]):
            with self.subTest(types=types):
                with self.assertRaises(berth.InvalidParams) as cm:
                    async with self.c.events(types=types) as events:
                        pass
                self.assertEqual(cm.exception.errors[0]["instancePath"],
                                 "/types")
        with self.assertRaisesRegex(TypeError, "types must be a str or an "
                                    "iterable of str, not 5"):
            self.c.events(types=5)  # type: ignore[arg-type]
        self.assertIsNone(await self.c.ping())


    async def _head(self) -> int:
        """_head returns the seq of the newest event: polls without types
        until next stops moving."""
        since = 0
        while True:
            page = await self.c.poll_events(since=since, limit=1000)
            if page["next"] == since:
                return since
            since = page["next"]

    async def test_poll_events__types__only_those_and_next_passes_the_rest(self):
        since = await self._head()
        note = await self.c.submit("write-note", {
            "path": os.path.join(self.dir.path, "note-poll"), "text": "x"})
        await self.c.cancel(note["id"])
        done = await self.c.submit("noop", {"p": 1})
        await self.c.wait(done["id"], timeout=support.DEADLINE)
        asked = ["cancelled", "completed"]
        mine = {note["id"], done["id"]}

        def of_mine(page: berth.EventPage) -> list:
            return [(e["jobId"], e["type"]) for e in page["events"]
                    if e["jobId"] in mine]

        # Only those types (another test's late job may add its own); any
        # iterable of names.
        page = await self.c.poll_events(since=since, types=iter(asked))
        for e in page["events"]:
            self.assertIn(e["type"], asked)
        self.assertEqual(of_mine(page), [(note["id"], "cancelled"),
                                         (done["id"], "completed")])
        # next passes over the others: reading on from it finds none of
        # these events again, and the end is where next stops moving.
        at = page["next"]
        for _ in range(100):
            more = await self.c.poll_events(since=at, types=asked)
            self.assertEqual(of_mine(more), [])
            if more["next"] == at:
                break
            at = more["next"]
        self.assertEqual(at, await self._head())

        # limit counts the events of those types; one name as a str.
        one = await self.c.poll_events(since=since, job_id=done["id"],
                                       types="completed", limit=1)
        self.assertEqual(of_mine(one), [(done["id"], "completed")])
        self.assertEqual(one["next"], one["events"][0]["seq"])

        # wait waits for those types: the approval and the start of a
        # write-note pass by, its completion ends the wait.
        later = await self.c.submit("write-note", {
            "path": os.path.join(self.dir.path, "note-poll-2"), "text": "y"})
        head = await self._head()
        waiting = asyncio.ensure_future(self.c.poll_events(
            since=head, job_id=later["id"], types=["completed"], wait=120))
        await self.c.approve(later["id"])
        woke = await asyncio.wait_for(waiting, support.DEADLINE)
        self.assertEqual([(e["jobId"], e["type"]) for e in woke["events"]],
                         [(later["id"], "completed")])

        # What berthd does not take is its InvalidParams naming /types.
        for types in ([], ["finished"], "progress", ["completed", ""], [5]):
            with self.subTest(types=types):
                with self.assertRaises(berth.InvalidParams) as cm:
                    await self.c.poll_events(types=types)
                self.assertEqual(cm.exception.errors[0]["instancePath"],
                                 "/types")
        with self.assertRaisesRegex(TypeError, "types must be a str or an "
                                    "iterable of str, not 5"):
            await self.c.poll_events(types=5)  # type: ignore[arg-type]
        self.assertIsNone(await self.c.ping())


class Restarts(unittest.IsolatedAsyncioTestCase):
    """A berthd of its own per test, killed and started again."""

    async def asyncSetUp(self) -> None:
        self.dir = support.TempDir("berth-sdk-py-restart.")
        self.d = support.Berthd(self.dir.path, tools=(support.EXAMPLES,),
                                listen=True).start()

    async def asyncTearDown(self) -> None:
        self.d.stop()
        self.dir.cleanup()

    async def test_events__berthd_killed__stream_resumes_without_loss(self):
        c = berth.Client(self.d.socket)
        async with c:
            stream = c.events(since=0)
            first = [await c.submit("noop", {"i": i}) for i in range(3)]
            got = [e["seq"] for e in await support.collect(
                stream, lambda e: e["seq"] >= 4)]
            self.d.kill()
            await support.until(lambda: not c.connected,
                                "the client to see berthd gone")
            self.d.start()
            more = [await c.submit("noop", {"i": i}) for i in range(3)]
            for j in first + more:
                await c.wait(j["id"], timeout=support.DEADLINE)
            polled = await c.poll_events(since=0, limit=1000)
            last = polled["events"][-1]["seq"]
            got += [e["seq"] for e in await support.collect(
                stream, lambda e: e["seq"] >= last)]
            await stream.close()
        self.assertEqual(got, list(range(1, last + 1)))

    async def test_events__live_stream_that_handed_out_nothing__resumes_from_where_it_began(
            self):
        # A stream without since knows where in the log it began, so that
        # what was committed while berthd was down, or before the stream
        # subscribed again, is not lost.
        c = berth.Client(self.d.socket)
        async with c:
            before = await c.submit("noop", {"before": True})
            await c.wait(before["id"], timeout=support.DEADLINE)
            async with c.events() as stream:
                self.d.kill()
                await support.until(lambda: not c.connected,
                                    "the client to see berthd gone")
                self.d.start()
                async with berth.Client(self.d.socket) as other:
                    after = await other.submit("noop", {"after": True})
                    await other.wait(after["id"], timeout=support.DEADLINE)
                got = await support.collect(
                    stream, lambda e: e["jobId"] == after["id"] and
                    e["type"] == "completed", timeout=10)
        self.assertEqual([e["type"] for e in got],
                         ["created", "started", "completed"])
        self.assertEqual({e["jobId"] for e in got}, {after["id"]})

    async def test_events__types__asked_for_again_after_a_restart(self):
        c = berth.Client(self.d.socket)
        async with c:
            before = await c.submit("noop", {"before": True})
            await c.wait(before["id"], timeout=support.DEADLINE)
            stream = c.events(since=0, types=iter(["completed"]))
            got = await support.collect(
                stream, lambda e: e["jobId"] == before["id"])
            self.d.kill()
            await support.until(lambda: not c.connected,
                                "the client to see berthd gone")
            self.d.start()
            after = await c.submit("noop", {"after": True})
            got += await support.collect(
                stream, lambda e: e["jobId"] == after["id"])
            await stream.close()
        self.assertEqual([(e["jobId"], e["type"]) for e in got],
                         [(before["id"], "completed"),
                          (after["id"], "completed")])

    async def test_wait__across_a_restart__returns_when_done(self):
        c = berth.Client(self.d.socket)
        async with c:
            job = await c.submit("ask-name", {})
            await c.wait(job["id"], until="suspended",
                         timeout=support.DEADLINE)
            waiting = asyncio.ensure_future(c.wait(job["id"],
                                                   until="completed"))
            await asyncio.sleep(0.1)
            self.d.kill()
            self.d.start()
            async with berth.Client(self.d.socket) as other:
                await other.resume(job["id"], {"answer": "Bo"})
            done = await asyncio.wait_for(waiting, support.DEADLINE)
            self.assertEqual(done["output"], {"message": "Hello, Bo!"})

    async def test_requests__berthd_killed__fail_with_connection_closed(self):
        c = berth.Client(self.d.socket)
        async with c:
            job = await c.submit("sleep", {"ms": 600000})
            waiting = asyncio.ensure_future(c.wait(job["id"],
                                                   reconnect=False))
            await support.until(lambda: c._conn and c._conn._pending,
                                "the wait to be sent")
            self.d.kill()
            with self.assertRaises(berth.ConnectionClosed):
                await asyncio.wait_for(waiting, support.DEADLINE)
            with self.assertRaises(OSError):
                await c.ping()  # nobody listens: the reconnect fails
            self.d.start()
            self.assertIsNone(await c.ping())  # and comes back

    async def test_wait__timeout__bounded_with_berthd_gone_or_stopped(self):
        loop = asyncio.get_running_loop()
        gone = berth.Client(os.path.join(self.dir.path, "nobody.sock"))
        start = loop.time()
        with self.assertRaises(OSError):
            await asyncio.wait_for(gone.wait("x", timeout=2),
                                   support.DEADLINE)
        self.assertLess(loop.time() - start, 2.5)
        await gone.close()
        # A berthd that takes the connection and never answers.
        c = await berth.connect(self.d.socket)
        os.kill(self.d.proc.pid, signal.SIGSTOP)
        try:
            start = loop.time()
            with self.assertRaisesRegex(TimeoutError, "jobs/wait"):
                await asyncio.wait_for(c.wait("x", timeout=1), 10)
            took = loop.time() - start
            self.assertGreaterEqual(took, 1)
            self.assertLess(took, 2.5)
        finally:
            os.kill(self.d.proc.pid, signal.SIGCONT)
        # The connection is still good for what follows.
        self.assertIsNone(await c.ping())
        await c.close()

    async def test_tcp__token__authenticates_and_a_wrong_one_is_refused(self):
        async with berth.Client(url=self.d.url, token=self.d.token) as c:
            self.assertEqual((await c.info())["name"], "berth")
            job = await c.submit("noop", {"tcp": True})
            self.assertEqual((await c.wait(job["id"],
                                           timeout=support.DEADLINE))
                             ["output"], {"tcp": True})
        with self.assertRaises(berth.Unauthorized):
            await berth.connect(url="tcp:127.0.0.1:%d" % self.d.port,
                                token="wrong")
        with self.assertRaises(ValueError):
            berth.Client(url=self.d.url)

    async def test_connect__no_berthd__raises_oserror(self):
        with self.assertRaises(OSError):
            await berth.connect(os.path.join(self.dir.path, "nobody.sock"))

    async def test_default_address__is_berth_socket(self):
        saved = os.environ.get("BERTH_SOCKET")
        os.environ["BERTH_SOCKET"] = self.d.socket
        try:
            async with berth.Client() as c:
                self.assertIsNone(await c.ping())
            os.environ["BERTH_SOCKET"] = "tcp:127.0.0.1:%d" % self.d.port
            async with berth.Client(token=self.d.token) as c:
                self.assertIsNone(await c.ping())
        finally:
            if saved is None:
                del os.environ["BERTH_SOCKET"]
            else:
                os.environ["BERTH_SOCKET"] = saved


class CloseWhileConnecting(unittest.IsolatedAsyncioTestCase):
    """close() while the client connects again, against a scripted berthd
    (support.Peer)."""

    async def test_close__while_a_reconnect_waits_for_server_auth__fails_its_callers_and_ends_it(
            self):
        # berthd answers the first connection's server/auth, and the
        # connection drops; it never answers the next one's (a berthd that
        # hangs, a network that does). close() must end the calls that
        # wait for that connection, and the attempt with them: the attempt
        # has no timeout of its own, so they waited for ever.
        peer = await support.Peer(tcp=True).start()
        self.addAsyncCleanup(peer.stop)
        client = berth.Client(url="tcp://127.0.0.1:%d" % peer.port,
                              token="unused")
        connecting = asyncio.ensure_future(client.connect())
        first = await peer.accept()
        auth = await first.expect("server/auth")
        first.reply(auth["id"], {})
        await asyncio.wait_for(connecting, support.DEADLINE)
        first.writer.transport.abort()
        await support.until(lambda: not client.connected, "the drop")
        ping = asyncio.ensure_future(client.ping())
        again = await peer.accept()
        await again.expect("server/auth")  # and never answered
        await asyncio.wait_for(client.close(), support.DEADLINE)
        with self.assertRaises(berth.ConnectionClosed):
            try:
                await asyncio.wait_for(ping, 10)
            except asyncio.TimeoutError:
                self.fail("ping() still waited 10 s after close()")
        await again.closed()



class ConnectTimeout(unittest.IsolatedAsyncioTestCase):
    """connect_timeout bounds an attempt to connect, the socket and
    server/auth, against a scripted berthd (support.Peer)."""

    async def test_connect__berthd_that_never_answers_server_auth__raises_timeout_error_naming_it(
            self):
        # A berthd that hangs, or a network that does, after the accept:
        # without a bound every call waited for ever.
        peer = await support.Peer(tcp=True).start()
        self.addAsyncCleanup(peer.stop)
        client = berth.Client(url="tcp://127.0.0.1:%d" % peer.port,
                              token="unused", connect_timeout=0.3)
        self.addAsyncCleanup(client.close)
        ping = asyncio.ensure_future(client.ping())
        conn = await peer.accept()
        await conn.expect("server/auth")  # and never answered
        with self.assertRaises(TimeoutError) as raised:
            await asyncio.wait_for(ping, support.DEADLINE)
        self.assertIsInstance(raised.exception, OSError)
        self.assertIn("within 0.3 s", str(raised.exception))
        self.assertIn("connect_timeout", str(raised.exception))
        await conn.closed()
        # The next call tries again, and gets through.
        ping = asyncio.ensure_future(client.ping())
        conn = await peer.accept()
        conn.reply((await conn.expect("server/auth"))["id"], {})
        conn.reply((await conn.expect("ping"))["id"], {})
        await asyncio.wait_for(ping, support.DEADLINE)

    async def test_connect_timeout__not_seconds_above_0__raises_value_error_naming_it(
            self):
        for bad in (0, -1, True, "10", float("nan"), float("inf")):
            with self.subTest(bad=bad):
                with self.assertRaisesRegex(ValueError, "connect_timeout"):
                    berth.Client("/nonexistent", connect_timeout=bad)
        berth.Client("/nonexistent", connect_timeout=None)
        berth.Client("/nonexistent", connect_timeout=2)

if __name__ == "__main__":
    unittest.main()

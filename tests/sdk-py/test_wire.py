"""The wire without a daemon: encoding, berthd's limits checked before a
line leaves, addresses, framing of what arrives, errors."""
# No "from __future__ import annotations": pydantic 1 must see the
# annotations of the models made inside the tests as types.
import asyncio
import dataclasses
import json
import logging
import os
import pickle
import tempfile
import unittest

import support  # noqa: F401  (puts sdk/python on the path)
import berth
from berth.wire import Address, Connection, check_line, encode, \
    open_connection, parse_address

logging.getLogger("berth").setLevel(logging.CRITICAL)


class Encode(unittest.TestCase):

    def test_encode__is_one_compact_utf8_line(self):
        line = encode({"a": [1, 2], "s": "é\n"})
        self.assertEqual(line, '{"a":[1,2],"s":"é\\n"}\n'.encode())
        self.assertEqual(line.count(b"\n"), 1)

    def test_encode__the_read_only_mappings_of_a_context__go_as_dicts(self):
        # ctx.request_context and ctx.metadata are MappingProxyType: a
        # tool that returned, suspended with or checkpointed one failed
        # its job (invalid_output) though it holds only JSON.
        import types
        view = types.MappingProxyType({"tenant": "a", "n": [1]})
        self.assertEqual(encode({"rc": view}),
                         b'{"rc":{"tenant":"a","n":[1]}}\n')

    def test_encode__what_is_not_json__names_the_message(self):
        with self.assertRaisesRegex(TypeError, "the input is not JSON"):
            encode({"x": {1}}, "the input")
        with self.assertRaisesRegex(ValueError, "not JSON"):
            encode({"x": float("inf")})
        with self.assertRaisesRegex(ValueError, "surrogate"):
            encode({"x": "\ud800"})
        loop: list = []
        loop.append(loop)
        with self.assertRaisesRegex(ValueError, "contains itself"):
            encode({"x": loop})

    def test_encode__nul_or_lone_surrogate__says_where_it_is(self):
        with self.assertRaisesRegex(berth.InvalidRequest, "the output holds "
                                    "U\\+0000 \\(NUL\\) in the string "
                                    "at /a/1/b,"):
            encode({"a": [1, {"b": "x\x00"}]}, "the output")
        with self.assertRaisesRegex(berth.InvalidRequest,
                                    r"in the key at /k\\u0000~1"):
            encode({"k\x00/": 1})
        with self.assertRaisesRegex(ValueError, "not JSON: the string at "
                                    "the top level holds '.ud800', a lone "
                                    "surrogate"):
            encode("\ud800")
        with self.assertRaisesRegex(ValueError, "the string at /s/0 holds"):
            encode({"n": "\x00 is only seen second", "s": ["\udc80"]})

    def test_encode__integer_beyond_64_bits__says_where_it_is(self):
        with self.assertRaisesRegex(berth.InvalidRequest, "the output holds "
                                    "the integer 18446744073709551616 at "
                                    "/a/1/b, outside the 64 bits"):
            encode({"a": [1, {"b": 2 ** 64}]}, "the output")
        with self.assertRaisesRegex(berth.InvalidRequest, "integer "
                                    "-9223372036854775809 at the top level"):
            encode(-(2 ** 63) - 1)

    def test_safe_text_and_scrub__put_u_fffd_for_what_berthd_refuses(self):
        from berth.wire import safe_text, scrub
        self.assertEqual(safe_text("a\x00b\ud800c\udfff"),
                         "a\ufffdb\ufffdc\ufffd")
        same = "é ok"
        self.assertIs(safe_text(same), same)

        @dataclasses.dataclass
        class Line:
            text: str

        self.assertEqual(scrub({"k\x00": ["\ud800", ("t",), Line("\x00")],
                                "n": [1, 2.5, None, True]}),
                         {"k\ufffd": ["\ufffd", ["t"], {"text": "\ufffd"}],
                          "n": [1, 2.5, None, True]})
        encode(scrub({"x": "\x00\ud800"}))
        loop: list = []
        loop.append(loop)
        self.assertIs(scrub(loop), loop)  # left for encode to refuse

    def test_encode__dataclasses_and_models__as_their_json(self):
        @dataclasses.dataclass
        class Point:
            x: int
            y: int

        self.assertEqual(encode({"p": Point(1, 2)}),
                         b'{"p":{"x":1,"y":2}}\n')
        try:
            import pydantic
        except ImportError:
            return

        class M(pydantic.BaseModel):
            name: str
            at: list[Point] = []

        self.assertEqual(json.loads(encode(M(name="n", at=[Point(3, 4)]))),
                         {"name": "n", "at": [{"x": 3, "y": 4}]})

    def test_check_line__size_limit__counts_the_line_without_newline(self):
        check_line(b"x" * 100, max_line=100)
        with self.assertRaises(berth.InvalidRequest) as cm:
            check_line(b"x" * 101, max_line=100)
        self.assertEqual(cm.exception.data, {"limit": 100})

    def test_check_line__nesting__counts_brackets_outside_strings(self):
        check_line(b"[" * 64 + b"]" * 64)
        with self.assertRaises(berth.InvalidRequest):
            check_line(b"[" * 65 + b"]" * 65)
        # Brackets inside strings, with escaped quotes, are text.
        check_line(b'{"a":"' + b"[{" * 100 + b'\\"[[[[","b":[]}')
        check_line(b"[" * 63 + b"]" * 63 + b"[" * 63 + b"]" * 63)
        with self.assertRaises(berth.InvalidRequest):
            check_line(b'{"s":"\\\\"' + b",[" * 64 + b"]" * 64 + b"}")

    def test_check_line__nul__only_as_an_escape(self):
        with self.assertRaises(berth.InvalidRequest):
            check_line(b'{"s":"a\\u0000"}')
        with self.assertRaises(berth.InvalidRequest):
            check_line(b'{"s":"\\\\\\u0000"}')  # \\ then \u0000
        check_line(b'{"s":"\\\\u0000"}')  # a backslash, then text u0000

    def test_check_line__integers__within_64_bits(self):
        check_line(b'{"n":9223372036854775807,"m":-9223372036854775808}')
        with self.assertRaises(berth.InvalidRequest):
            check_line(b'{"n":9223372036854775808}')
        with self.assertRaises(berth.InvalidRequest):
            check_line(b'{"n":-9223372036854775809}')
        check_line(b'{"s":"99999999999999999999999","f":1.5e+300,'
                   b'"g":12345678901234567890.5}')


class Addresses(unittest.TestCase):

    def test_parse_address__every_form(self):
        self.assertEqual(parse_address("/run/b.sock"), Address(path="/run/b.sock"))
        self.assertEqual(parse_address("unix:/x"), Address(path="/x"))
        self.assertEqual(parse_address("unix:///x"), Address(path="/x"))
        self.assertEqual(parse_address("tcp://h:1"), Address(host="h", port=1))
        self.assertEqual(parse_address("tcp:h:2"), Address(host="h", port=2))
        self.assertEqual(parse_address("tcp://[::1]:3"),
                         Address(host="::1", port=3))
        self.assertEqual(parse_address("tcp::4"),
                         Address(host="127.0.0.1", port=4))
        self.assertEqual(str(parse_address("tcp://[::1]:3")),
                         "tcp://[::1]:3")
        for bad in ("tcp://h", "tcp://h:0", "tcp://h:x", "http://h:1", "",
                    "tcp://[::1]3"):
            with self.assertRaises(ValueError, msg=bad):
                parse_address(bad)
        with self.assertRaises(ValueError):
            berth.Client("/a", url="tcp://h:1", token="t")


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


class Framing(unittest.IsolatedAsyncioTestCase):

    async def asyncSetUp(self) -> None:
        self.requests: list[dict] = []
        self.notes: list[tuple] = []
        self.conn = Connection(
            on_request=lambda c, m: self.requests.append(m),
            on_notification=lambda m, p: self.notes.append((m, p)),
            read_limit=1000)
        self.t = FakeTransport()
        self.conn.connection_made(self.t)

    def sent(self) -> list[dict]:
        return [json.loads(x) for w in self.t.writes
                for x in w.splitlines()]

    async def test_lines__split_joined_crlf_blank_and_batches(self):
        data = (b'{"jsonrpc":"2.0","id":"berth-1","method":"ping"}\r\n\n'
                b'[{"jsonrpc":"2.0","method":"abort","params":{"jobId":"a"}},'
                b'{"jsonrpc":"2.0","id":"berth-2","method":"run"}]\n'
                b'{"jsonrpc":"2.0","method":"x","params":1}')
        for i in range(0, len(data), 5):
            self.conn.data_received(data[i:i + 5])
        self.conn.data_received(b"\n")
        self.assertEqual([m["id"] for m in self.requests],
                         ["berth-1", "berth-2"])
        self.assertEqual(self.notes, [("abort", {"jobId": "a"}), ("x", 1)])

    async def test_answers__out_of_order__resolve_their_own_requests(self):
        a = asyncio.ensure_future(self.conn.request("jobs/wait", {"id": "a"}))
        b = asyncio.ensure_future(self.conn.request("jobs/get", {"id": "b"}))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        # One write for both requests, sent in one turn of the loop.
        self.assertEqual(len(self.t.writes), 1)
        ids = [m["id"] for m in self.sent()]
        self.conn.data_received(
            b'{"jsonrpc":"2.0","id":%d,"error":{"code":-32011,'
            b'"message":"no job b","data":{"id":"b"}}}\n'
            b'{"jsonrpc":"2.0","id":%d,"result":{"id":"a"}}\n'
            % (ids[1], ids[0]))
        self.assertEqual(await a, {"id": "a"})
        with self.assertRaises(berth.NotFound) as cm:
            await b
        self.assertEqual(cm.exception.data, {"id": "b"})

    async def test_answers__unknown_ids_and_id_null__change_nothing(self):
        a = asyncio.ensure_future(self.conn.request("ping"))
        await support.until(lambda: self.t.writes, "the request")
        self.conn.data_received(
            b'{"jsonrpc":"2.0","id":999,"result":{}}\n'
            b'{"jsonrpc":"2.0","id":[1],"result":{}}\n'
            b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,'
            b'"message":"parse error"}}\n'
            b'"a string"\n')
        self.assertFalse(a.done())
        self.conn.data_received(b'{"jsonrpc":"2.0","id":%d,"result":{}}\n'
                                % self.sent()[0]["id"])
        self.assertEqual(await a, {})

    async def test_lines__spaces_around_a_value__are_still_one_message(
            self):
        self.conn.data_received(b'  {"jsonrpc":"2.0","method":"a"}  \t\r\n'
                                b'{"jsonrpc":"2.0","method":"b"}\n')
        self.assertEqual([m for m, _ in self.notes], ["a", "b"])
        self.assertFalse(self.t.closed)

    async def test_a_value_with_text_after_it__is_not_json(self):
        a = asyncio.ensure_future(self.conn.request("ping"))
        await support.until(lambda: self.t.writes, "the request")
        self.conn.data_received(b'{"jsonrpc":"2.0","method":"a"} trailing\n')
        with self.assertRaisesRegex(berth.ConnectionClosed, "not JSON"):
            await a
        self.assertEqual(self.notes, [])

    async def test_a_line_not_json__closes_and_fails_the_requests(self):
        a = asyncio.ensure_future(self.conn.request("ping"))
        await asyncio.sleep(0)
        self.conn.data_received(b"HTTP/1.1 400 Bad Request\r\n")
        with self.assertRaisesRegex(berth.ConnectionClosed, "not JSON"):
            await a
        self.assertTrue(self.t.closed)
        with self.assertRaises(berth.ConnectionClosed):
            await self.conn.request("ping")

    async def test_a_line_over_the_read_limit__closes(self):
        a = asyncio.ensure_future(self.conn.request("ping"))
        await asyncio.sleep(0)
        for _ in range(11):
            self.conn.data_received(b"x" * 100)
        with self.assertRaisesRegex(berth.ConnectionClosed, "longer than"):
            await a

    async def test_requests_of_berthd__without_a_handler__ping_and_32601(self):
        conn = Connection()
        t = FakeTransport()
        conn.connection_made(t)
        conn.data_received(b'{"jsonrpc":"2.0","id":"berth-1","method":"ping"}'
                           b'\n{"jsonrpc":"2.0","id":"berth-2",'
                           b'"method":"elicitation/create"}\n')
        await asyncio.sleep(0)
        got = [json.loads(x) for w in t.writes for x in w.splitlines()]
        self.assertEqual(got[0], {"jsonrpc": "2.0", "id": "berth-1",
                                  "result": {}})
        self.assertEqual(got[1]["error"]["code"], -32601)

    async def test_subscription_notifications__go_to_their_route(self):
        got = []
        self.conn.routes["S1"] = lambda m, p: got.append((m, p["seq"]))
        self.conn.data_received(
            b'{"jsonrpc":"2.0","method":"events/event","params":'
            b'{"subscription":"S1","seq":4}}\n'
            b'{"jsonrpc":"2.0","method":"events/event","params":'
            b'{"subscription":"S2","seq":5}}\n')
        self.assertEqual(got, [("events/event", 4)])
        self.assertEqual(self.notes, [])

    async def test_cancelled_request__its_late_answer_is_dropped(self):
        a = asyncio.ensure_future(self.conn.request("jobs/wait", {"id": "x"}))
        await support.until(lambda: self.t.writes, "the request")
        a.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await a
        self.assertEqual(self.conn._pending, {})
        self.conn.data_received(b'{"jsonrpc":"2.0","id":%d,"result":{}}\n'
                                % self.sent()[0]["id"])


class Errors(unittest.TestCase):

    def test_berth_error__is_the_subclass_of_its_code(self):
        for code, cls in ((-32700, berth.ParseError),
                          (-32600, berth.InvalidRequest),
                          (-32601, berth.MethodNotFound),
                          (-32602, berth.InvalidParams),
                          (-32603, berth.InternalError),
                          (-32010, berth.Unauthorized),
                          (-32011, berth.NotFound),
                          (-32012, berth.Conflict),
                          (-32013, berth.Overloaded),
                          (-32014, berth.StorageFailure)):
            e = berth.BerthError(code, "m", {"x": 1})
            self.assertIs(type(e), cls)
            self.assertEqual((e.code, e.message, e.data), (code, "m",
                                                           {"x": 1}))
            again = pickle.loads(pickle.dumps(e))
            self.assertIs(type(again), cls)
        self.assertIs(type(berth.BerthError(-1, "other")), berth.BerthError)
        self.assertEqual(berth.BerthError(-32012, "c",
                                          {"status": "running"}).status,
                         "running")
        self.assertEqual(str(berth.BerthError(-32011, "no job x")),
                         "no job x (-32011)")

    def test_from_wire__a_malformed_error_still_says_what_came(self):
        self.assertEqual(berth.BerthError.from_wire("boom").code, -32603)
        e = berth.BerthError.from_wire({"code": "x"})
        self.assertEqual(e.code, -32603)
        self.assertIn("no message", e.message)
        self.assertIsInstance(berth.ConnectionClosed("x"), OSError)


class Closing(unittest.IsolatedAsyncioTestCase):
    """close() on a real socket, against a peer that never reads."""

    async def asyncSetUp(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "s.sock")
        self.peers: list[asyncio.StreamWriter] = []

        async def accept(r: asyncio.StreamReader,
                         w: asyncio.StreamWriter) -> None:
            self.peers.append(w)  # and never reads

        self.server = await asyncio.start_unix_server(accept, self.path)

    async def asyncTearDown(self) -> None:
        for w in self.peers:
            w.close()
        self.server.close()
        await self.server.wait_closed()
        self.dir.cleanup()

    async def test_close__a_peer_that_stops_reading__is_dropped_not_waited_for(
            self):
        conn = await open_connection(parse_address(self.path))
        # More than the socket's buffers hold: the rest stays queued.
        pad = "p" * (1 << 19)
        for _ in range(8):
            conn.notify("x", {"pad": pad})
        started = asyncio.get_running_loop().time()
        # Before, close() waited for the peer to read, i.e. for ever.
        await asyncio.wait_for(conn.close(), 30)
        self.assertTrue(conn.closed)
        self.assertIsInstance(conn.close_reason, berth.ConnectionClosed)
        self.assertIn("took none of the last", str(conn.close_reason))
        self.assertLess(asyncio.get_running_loop().time() - started, 30)

    async def test_close__a_peer_that_reads__gets_every_line(self):
        conn = await open_connection(parse_address(self.path))
        for i in range(4):
            conn.notify("x", {"i": i})
        await asyncio.wait_for(conn.close(), 30)
        self.assertIsNone(conn.close_reason)


if __name__ == "__main__":
    unittest.main()

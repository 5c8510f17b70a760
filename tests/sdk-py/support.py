"""What the SDK's tests share: a real berthd in a temporary folder, a
scripted berthd for the worker's unit tests, and waiting on conditions.

berthd is $BERTHD (meson sets it), else the first of build-test/ and build/
of this clone that has one. Nothing here sleeps a fixed time to let
something happen: every wait is on a condition, with a generous deadline,
so that the tests hold on a slow, loaded machine.
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from typing import Any, Callable

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HERE = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.join(ROOT, "sdk", "python")
if SDK not in sys.path:
    sys.path.insert(0, SDK)
# die_with_this_process: every process these tests start dies with the
# test process, even when it dies before tearDown (tests/harness/child.py).
HARNESS = os.path.join(ROOT, "tests", "harness")
if HARNESS not in sys.path:
    sys.path.insert(0, HARNESS)
from child import die_with_this_process  # noqa: E402

#: How long any wait in these tests may take before it fails: far above
#: what anything needs on an idle machine.
DEADLINE = 60.0


def find_berthd() -> str | None:
    env = os.environ.get("BERTHD")
    if env:
        return env
    for build in ("build-test", "build"):
        p = os.path.join(ROOT, build, "berthd", "berthd")
        if os.access(p, os.X_OK):
            return p
    return None


def find_berth() -> str | None:
    env = os.environ.get("BERTH")
    if env:
        return env
    for build in ("build-test", "build"):
        p = os.path.join(ROOT, build, "cli", "berth")
        if os.access(p, os.X_OK):
            return p
    return None


EXAMPLES = os.environ.get("BERTH_EXAMPLES",
                          os.path.join(ROOT, "examples", "tools"))


def free_port() -> int:
    """free_port returns a port of 127.0.0.1 that was free a moment ago,
    below the range the kernel gives connections their local ports from:
    a port from bind(0) could be taken by another test's connection while
    berthd is down between a kill and its restart."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            high = int(f.read().split()[0]) - 1
    except (OSError, ValueError, IndexError):
        high = 32767
    low = max(1024, high - 8000)
    for _ in range(1000):
        port = random.randint(low, high)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError("no free TCP port between %d and %d" % (low, high))


class Berthd:
    """A real berthd on a temporary database and socket (and, with
    ``listen=True``, a loopback TCP port with a token)."""

    def __init__(self, tmp: str, *, tools: tuple[str, ...] = (),
                 listen: bool = False, args: tuple[str, ...] = ()):
        exe = find_berthd()
        if exe is None:
            raise unittest.SkipTest("no berthd: set BERTHD or build one in "
                                    "build-test/")
        self.exe = exe
        self.tmp = tmp
        self.db = os.path.join(tmp, "berth.db")
        self.socket = os.path.join(tmp, "berth.sock")
        self.logpath = os.path.join(tmp, "berthd.log")
        self.tools = tools
        self.args = list(args)
        self.token = None
        self.port = None
        if listen:
            self.token = "sdk-py-test-token-%d-0123456789abcdef" % os.getpid()
            tf = os.path.join(tmp, "token")
            with open(tf, "w") as f:
                f.write(self.token + "\n")
            os.chmod(tf, 0o600)
            self.port = free_port()
            self.args += ["--listen", "127.0.0.1:%d" % self.port,
                          "--token-file", tf]
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return "tcp://127.0.0.1:%d" % self.port

    def start(self) -> "Berthd":
        argv = [self.exe, "--db", self.db, "--socket", self.socket,
                "--quiet", "--workers", "4"] + self.args
        for t in self.tools:
            argv += ["--tools", t]
        with open(self.logpath, "ab") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=log,
                preexec_fn=die_with_this_process())
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("berthd exited with %d:\n%s"
                                   % (self.proc.returncode, self.log()))
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.settimeout(5)
                    s.connect(self.socket)
                    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
                    if s.recv(4096):
                        return self
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError("berthd did not answer in %d s:\n%s"
                           % (DEADLINE, self.log()))

    def stop(self) -> int:
        """stop sends SIGTERM and returns the exit status."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(DEADLINE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode
        self.proc = None
        return rc

    def kill(self) -> None:
        """kill is kill -9."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def log(self) -> str:
        try:
            with open(self.logpath, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""


class TempDir:
    """A temporary folder, removed unless BERTH_KEEP is set."""

    def __init__(self, prefix: str):
        self.path = tempfile.mkdtemp(prefix=prefix)

    def cleanup(self) -> None:
        if os.environ.get("BERTH_KEEP"):
            print("kept %s" % self.path, file=sys.stderr)
        else:
            shutil.rmtree(self.path, ignore_errors=True)


async def until(cond: Callable[[], Any], what: str,
                timeout: float = DEADLINE, step: float = 0.02) -> Any:
    """until returns cond()'s first true value, calling it (a function or
    a coroutine function) every step seconds; it fails the test after
    timeout seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        v = cond()
        if asyncio.iscoroutine(v):
            v = await v
        if v:
            return v
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("waited %.0f s for %s" % (timeout, what))
        await asyncio.sleep(step)


async def collect(stream: Any, last: Callable[[Any], bool],
                  timeout: float = DEADLINE) -> list:
    """collect reads items of an async iterator until last(item) is true
    (that item included), failing the test after timeout seconds."""
    items: list = []

    async def read() -> None:
        async for item in stream:
            items.append(item)
            if last(item):
                return
        raise AssertionError("the stream ended after %r" % items[-3:])

    try:
        await asyncio.wait_for(read(), timeout)
    except asyncio.TimeoutError:
        raise AssertionError("waited %.0f s for the stream; it gave %r"
                             % (timeout, items[-3:])) from None
    return items


# ---- the scripted berthd ----------------------------------------------------

class PeerConn:
    """One connection to the scripted berthd: the test reads what the
    worker sent and writes what berthd would."""

    def __init__(self, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer
        self.held: list[dict] = []
        self.lines: list[bytes] = []  # every line received, raw
        self.chunks = 0               # reads that returned data
        self._next = 0
        self.eof = False

    async def _read_one(self, timeout: float) -> dict | None:
        try:
            line = await asyncio.wait_for(self.reader.readline(), timeout)
        except asyncio.TimeoutError:
            return None
        if not line:
            self.eof = True
            return None
        self.lines.append(line)
        return json.loads(line)

    async def next(self, pred: Callable[[dict], bool] = lambda m: True,
                   timeout: float = DEADLINE) -> dict:
        """next returns the first message (held or new) that pred takes."""
        for i, m in enumerate(self.held):
            if pred(m):
                return self.held.pop(i)
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise AssertionError("the worker did not send the message "
                                     "waited for; held: %r" % self.held[-5:])
            m = await self._read_one(left)
            if m is None:
                if self.eof:
                    raise AssertionError("the worker closed the connection; "
                                         "held: %r" % self.held[-5:])
                continue
            if pred(m):
                return m
            self.held.append(m)

    async def expect(self, method: str, timeout: float = DEADLINE) -> dict:
        return await self.next(lambda m: m.get("method") == method, timeout)

    async def answer(self, rid: Any, timeout: float = DEADLINE) -> dict:
        return await self.next(lambda m: "method" not in m and
                               m.get("id") == rid, timeout)

    def send(self, *msgs: dict) -> None:
        """send writes msgs in one write (so that several arrive in one
        read of the worker)."""
        self.writer.write(b"".join(json.dumps(m).encode() + b"\n"
                                   for m in msgs))

    def request(self, method: str, params: Any = None) -> str:
        self._next += 1
        rid = "berth-%d" % self._next
        self.send(self.req(rid, method, params))
        return rid

    def req(self, rid: str, method: str, params: Any = None) -> dict:
        m = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            m["params"] = params
        return m

    def reply(self, rid: Any, result: Any) -> None:
        self.send({"jsonrpc": "2.0", "id": rid, "result": result})

    def reply_error(self, rid: Any, code: int, message: str,
                    data: Any = None) -> None:
        err = {"code": code, "message": message}
        if data is not None:
            err["data"] = data
        self.send({"jsonrpc": "2.0", "id": rid, "error": err})

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def closed(self, timeout: float = DEADLINE) -> None:
        """closed returns once the worker closed the connection, failing
        on anything but EOF... messages meanwhile are held."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not self.eof:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise AssertionError("the worker did not close the "
                                     "connection")
            m = await self._read_one(left)
            if m is not None:
                self.held.append(m)

    def close(self) -> None:
        self.writer.close()

    async def register(self, result: dict | None = None) -> dict:
        """register takes the worker's worker/register and accepts it."""
        m = await self.expect("worker/register")
        tools = [t["id"] for t in m["params"]["tools"]]
        self.reply(m["id"], result or {"worker": "W-1", "tools": tools,
                                       "heartbeatMs": 10000})
        return m


class Peer:
    """The scripted berthd: a Unix socket (or TCP) server whose
    connections come out of :attr:`conns` for the test to drive."""

    def __init__(self, path: str | None = None, tcp: bool = False):
        self.path = path
        self.tcp = tcp
        self.port: int | None = None
        self.conns: asyncio.Queue[PeerConn] = asyncio.Queue()
        self.server: asyncio.base_events.Server | None = None
        self.all: list[PeerConn] = []

    async def start(self) -> "Peer":
        async def accept(r: asyncio.StreamReader,
                         w: asyncio.StreamWriter) -> None:
            c = PeerConn(r, w)
            self.all.append(c)
            await self.conns.put(c)

        if self.tcp:
            self.server = await asyncio.start_server(accept, "127.0.0.1", 0,
                                                     limit=1 << 26)
            self.port = self.server.sockets[0].getsockname()[1]
        else:
            self.server = await asyncio.start_unix_server(accept, self.path,
                                                          limit=1 << 26)
        return self

    async def accept(self, timeout: float = DEADLINE) -> PeerConn:
        return await asyncio.wait_for(self.conns.get(), timeout)

    async def stop(self) -> None:
        for c in self.all:
            c.writer.close()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

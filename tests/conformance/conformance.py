#!/usr/bin/env python3
"""Black-box conformance test of berthd against PROTOCOL.md.

Speaks the socket protocol the way an outside client would (stdlib only)
and checks every method of PROTOCOL.md's table, its objects and its error
codes, against a real berthd started here in a temporary directory.

    conformance.py [BERTHD [EXAMPLES_TOOLS_DIR]]

or the environment: BERTHD, BERTH_EXAMPLES. Exit status 0 when every check
passed, 1 otherwise (each failed check is printed), 77 when berthd is
missing.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

# Every berthd this test starts dies with it, even when it dies before its
# cleanup (tests/harness/child.py), imported without writing a
# __pycache__ into the source tree.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "harness"))
from child import die_with_this_process  # noqa: E402

BERTHD = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("BERTHD")
EXAMPLES = (sys.argv[2] if len(sys.argv) > 2
            else os.environ.get("BERTH_EXAMPLES"))

TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
UUID7_RE = re.compile(
    r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
STATUSES = ["pending", "awaiting_approval", "running", "suspended",
            "completed", "failed", "timed_out", "declined", "cancelled",
            "expired"]
TERMINAL = {"completed", "failed", "timed_out", "declined", "cancelled",
            "expired"}
EVENT_TYPES = {"created", "approval_requested", "approved", "declined",
               "started", "suspended", "resumed", "retrying", "completed",
               "failed", "timed_out", "cancelled", "expired"}

failures = []
passes = 0
current = "setup"


def check(cond, what, detail=None):
    global passes
    if cond:
        passes += 1
        return True
    msg = "%s: %s" % (current, what)
    if detail is not None:
        msg += " -- " + (detail if isinstance(detail, str)
                         else json.dumps(detail)[:600])
    failures.append(msg)
    print("FAIL " + msg, flush=True)
    return False


def section(name):
    global current
    current = name
    print("-- " + name, flush=True)


# ---- the client -----------------------------------------------------------

class Client:
    def __init__(self, path, timeout=15.0):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = b""
        self.held = []  # messages read while looking for another
        self.next_id = 0

    def close(self):
        self.s.close()

    def send_raw(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.s.sendall(data)

    def send(self, msg, eol="\n"):
        self.send_raw(json.dumps(msg) + eol)

    def read_msg(self, timeout=None):
        """The next message off the wire (None on timeout)."""
        old = self.s.gettimeout()
        if timeout is not None:
            self.s.settimeout(timeout)
        try:
            while b"\n" not in self.buf:
                try:
                    chunk = self.s.recv(65536)
                except socket.timeout:
                    return None
                if not chunk:
                    raise EOFError("berthd closed the connection")
                self.buf += chunk
        finally:
            self.s.settimeout(old)
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def next_msg(self, pred, timeout=15.0):
        for i, m in enumerate(self.held):
            if pred(m):
                return self.held.pop(i)
        deadline = time.time() + timeout
        while True:
            left = deadline - time.time()
            if left <= 0:
                return None
            m = self.read_msg(left)
            if m is None:
                return None
            if pred(m):
                return m
            self.held.append(m)

    def reply_to(self, rid, timeout=15.0):
        return self.next_msg(
            lambda m: isinstance(m, dict) and "method" not in m
            and m.get("id") == rid and ("result" in m or "error" in m),
            timeout)

    def request(self, method, params=None, rid=None, timeout=15.0):
        if rid is None:
            self.next_id += 1
            rid = self.next_id
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        r = self.reply_to(rid, timeout)
        if r is None:
            raise TimeoutError("no reply to %s %s" % (method, params))
        return r

    def call(self, method, params=None, timeout=15.0):
        """The result, or a failed check and None on an error."""
        r = self.request(method, params, timeout=timeout)
        if "error" in r:
            check(False, "%s %s answered an error" % (method,
                                                      json.dumps(params)[:200]),
                  r["error"])
            return None
        return r["result"]

    def error(self, method, params, code, what=None):
        """Expects an error with code; returns the error object."""
        r = self.request(method, params)
        err = r.get("error")
        check(err is not None and err.get("code") == code,
              (what or "%s %s" % (method, json.dumps(params)[:160]))
              + " -> %d" % code, r)
        if err is not None:
            check(isinstance(err.get("message"), str) and err["message"],
                  "error has a message", err)
        return err or {}

    def notifications(self, method):
        out = [m for m in self.held if m.get("method") == method]
        self.held = [m for m in self.held if m.get("method") != method]
        return out


# ---- shape checks -----------------------------------------------------------

JOB_FIELDS = {
    "id": str, "tool": str, "status": str, "input": None,
    "requestContext": dict, "metadata": dict, "runId": str,
    "toolCallId": str, "idempotencyKey": str, "priority": int,
    "runAt": "time", "attempt": int, "maxRetries": int, "timeoutMs": int,
    "expiresAt": "time", "output": None, "modelOutput": None,
    "error": dict, "suspendPayload": None, "resumeData": None,
    "checkpoint": None, "approval": dict, "progress": dict,
    "retryOf": str, "createdAt": "time", "updatedAt": "time",
    "startedAt": "time", "finishedAt": "time",
    # A berth extension (docs/API.md): the job's tool is not registered.
    "toolMissing": bool,
    # Berth extensions (docs/API.md, "Principals and roles"): who
    # submitted the job and how.
    "submittedBy": str, "submittedVia": str,
}

VIAS = ("socket", "tcp", "http", "mcp", "worker", "berthd")


def is_time(v):
    return isinstance(v, str) and bool(TIME_RE.match(v))


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def check_job(j, what="job"):
    if not check(isinstance(j, dict), what + " is an object", j):
        return False
    ok = True
    for k in j:
        ok &= check(k in JOB_FIELDS, "%s has only Job fields (%s)" % (what, k),
                    j)
    for k in ("id", "tool", "status", "input", "createdAt", "updatedAt"):
        ok &= check(k in j, "%s has %s" % (what, k), j)
    for k, t in JOB_FIELDS.items():
        if k not in j:
            continue
        v = j[k]
        ok &= check(v is not None or k == "input" or k in (
            "output", "modelOutput", "suspendPayload", "resumeData",
            "checkpoint"),
            "%s.%s is omitted rather than null" % (what, k), j)
        if t == "time":
            ok &= check(is_time(v), "%s.%s is an ISO 8601 UTC time with ms"
                        % (what, k), v)
        elif t is int:
            ok &= check(is_int(v), "%s.%s is an integer" % (what, k), v)
        elif t is not None:
            ok &= check(isinstance(v, t), "%s.%s is a %s" % (what, k,
                                                              t.__name__), v)
    ok &= check(UUID7_RE.match(j.get("id", "")) is not None,
                what + ".id is a UUIDv7", j.get("id"))
    ok &= check(j.get("status") in STATUSES, what + ".status is a status",
                j.get("status"))
    if "retryOf" in j:
        ok &= check(UUID7_RE.match(j["retryOf"]) is not None,
                    what + ".retryOf is a UUIDv7", j["retryOf"])
    if isinstance(j.get("error"), dict):
        e = j["error"]
        ok &= check(set(e) <= {"message", "code", "data"},
                    what + ".error has only message, code, data", e)
        ok &= check(isinstance(e.get("message"), str),
                    what + ".error.message is a string", e)
    if isinstance(j.get("approval"), dict):
        a = j["approval"]
        # "note" is a berth extension (docs/API.md): an approval's note,
        # where a decline has its reason.
        # decidedBy, quorum and approvals are berth's audit (docs/API.md,
        # "Principals and roles").
        ok &= check(set(a) <= {"required", "decision", "reason", "note",
                               "decidedAt", "decidedBy", "quorum",
                               "approvals"},
                    what + ".approval has only its fields", a)
        if a.get("decision") is not None:
            by = a.get("decidedBy")
            ok &= check(isinstance(by, dict) and isinstance(by.get("name"), str)
                        and by.get("via", "berthd") in VIAS,
                        what + ".approval.decidedBy is {name, via} once decided",
                        a)
        if a.get("required"):
            ok &= check(is_int(a.get("quorum")) and a["quorum"] >= 1,
                        what + ".approval.quorum is a count", a)
            ok &= check(isinstance(a.get("approvals"), list) and all(
                isinstance(x, dict) and isinstance(x.get("by"), str)
                and is_time(x.get("at")) for x in a["approvals"]),
                what + ".approval.approvals are [{by, via, at}]", a)
        ok &= check(isinstance(a.get("required"), bool),
                    what + ".approval.required is a boolean", a)
        ok &= check(a.get("decision") in ("approved", "declined", None),
                    what + ".approval.decision is approved|declined|null", a)
        if "decidedAt" in a:
            ok &= check(is_time(a["decidedAt"]),
                        what + ".approval.decidedAt is a time", a)
        if "reason" in a:
            ok &= check(isinstance(a["reason"], str),
                        what + ".approval.reason is a string", a)
        if "note" in a:
            ok &= check(isinstance(a["note"], str)
                        and a.get("decision") == "approved",
                        what + ".approval.note is an approval's string", a)
    if isinstance(j.get("progress"), dict):
        p = j["progress"]
        ok &= check(set(p) <= {"progress", "total", "message"},
                    what + ".progress has only progress, total, message", p)
        ok &= check(isinstance(p.get("progress"), (int, float)),
                    what + ".progress.progress is a number", p)
    return ok


def check_event(e, what="event"):
    if not check(isinstance(e, dict), what + " is an object", e):
        return
    # by, via and client are berth's audit (docs/API.md, "Principals and
    # roles").
    check(set(e) <= {"seq", "jobId", "tool", "type", "status", "at", "data",
                     "subscription", "by", "via", "client"},
          what + " has only Event fields", e)
    check(isinstance(e.get("by"), str), what + ".by names who caused it", e)
    check(e.get("via", "berthd") in VIAS, what + ".via is a way", e)
    for k in ("seq", "jobId", "tool", "type", "status", "at"):
        check(k in e, "%s has %s" % (what, k), e)
    check(is_int(e.get("seq")), what + ".seq is an integer", e)
    check(e.get("type") in EVENT_TYPES, what + ".type is an event type", e)
    check(e.get("status") in STATUSES, what + ".status is a status", e)
    check(is_time(e.get("at")), what + ".at is a time", e)
    check(UUID7_RE.match(str(e.get("jobId"))) is not None,
          what + ".jobId is a UUIDv7", e)


def check_schema_error(err, path=None, what="schema error data"):
    data = err.get("data")
    if not check(isinstance(data, dict) and isinstance(data.get("errors"),
                                                       list)
                 and data["errors"], what + " has errors[]", err):
        return
    for e in data["errors"]:
        check(isinstance(e, dict) and isinstance(e.get("instancePath"), str)
              and isinstance(e.get("keyword"), str)
              and isinstance(e.get("message"), str),
              what + ": each error has instancePath, keyword, message", e)
    if path is not None:
        check(any(e.get("instancePath") == path for e in data["errors"]),
              what + " names " + path, data)


# ---- the daemon -------------------------------------------------------------

class Daemon:
    def __init__(self, tmp):
        self.tmp = tmp
        self.db = os.path.join(tmp, "berth.db")
        self.sock = os.path.join(tmp, "berth.sock")
        self.proc = None
        self.log = open(os.path.join(tmp, "berthd.log"), "ab")
        self.token = "conformance-token-%d" % os.getpid()
        self.token_file = os.path.join(tmp, "token")
        with open(self.token_file, "w") as f:
            f.write(self.token + "\n")
        os.chmod(self.token_file, 0o600)
        self.tools = os.path.join(tmp, "tools")
        write_tools(self.tools)
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()

    def start(self):
        self.proc = subprocess.Popen(
            [BERTHD, "--db", self.db, "--socket", self.sock, "--tools",
             EXAMPLES, "--tools", self.tools, "--workers", "4", "--quiet",
             "--listen", "127.0.0.1:%d" % self.port,
             "--token-file", self.token_file],
            stdout=self.log, stderr=self.log,
            preexec_fn=die_with_this_process())
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("berthd exited with %d; see %s"
                                   % (self.proc.returncode, self.log.name))
            try:
                c = Client(self.sock)
                c.request("ping")
                c.close()
                return
            except (OSError, EOFError, TimeoutError):
                time.sleep(0.05)
        raise RuntimeError("berthd did not answer in 30 s")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode if self.proc else 0
        self.proc = None
        return rc

    def restart(self):
        rc = self.stop()
        check(rc == 0, "berthd exits 0 on SIGTERM", str(rc))
        self.start()

    def client(self):
        return Client(self.sock)

    def tcp_client(self):
        c = Client.__new__(Client)
        c.s = socket.create_connection(("127.0.0.1", self.port), 15)
        c.s.settimeout(15)
        c.buf = b""
        c.held = []
        c.next_id = 0
        return c


# ---- the tests --------------------------------------------------------------

def submit(c, tool, inp, **kw):
    p = {"tool": tool, "input": inp}
    p.update(kw)
    j = c.call("jobs/submit", p)
    if j is not None:
        check_job(j, "submitted " + tool)
    return j or {}


def wait(c, jid, until=None, timeout_ms=20000):
    p = {"id": jid, "timeoutMs": timeout_ms}
    if until is not None:
        p["until"] = until
    j = c.call("jobs/wait", p, timeout=timeout_ms / 1000 + 15)
    return j or {}


def test_framing(d):
    section("framing")
    c = d.client()
    # A malformed line: -32700 with id null, and the connection goes on.
    c.send_raw(b"{this is not json\n")
    m = c.read_msg(10)
    check(m is not None and m.get("error", {}).get("code") == -32700
          and "id" in m and m["id"] is None and m.get("jsonrpc") == "2.0",
          "malformed line -> -32700 with id null", m)
    r = c.request("ping")
    check(r.get("result") == {}, "connection usable after -32700", r)
    # \r\n line ending.
    c.send_raw(b'{"jsonrpc":"2.0","id":"crlf","method":"ping"}\r\n')
    r = c.reply_to("crlf", 10)
    check(r is not None and r.get("result") == {}, "\\r\\n is tolerated", r)
    # Ids echoed: string, number, zero, negative, float, null, and the
    # ends of 64 bits (docs/API.md).
    for rid in ("abc", 7, 0, -3, "", 12345678901, 1.5,
                2 ** 63 - 1, -2 ** 63, 2 ** 53 + 1):
        r = c.request("ping", rid=rid)
        check(r.get("id") == rid and type(r.get("id")) is type(rid)
              and r.get("jsonrpc") == "2.0",
              "id %r echoed as it was" % (rid,), r)
    c.send({"jsonrpc": "2.0", "id": None, "method": "ping"})
    m = c.read_msg(10)
    check(m and "id" in m and m["id"] is None and m.get("result") == {},
          "id null is a request, answered with id null", m)
    # An integer past 64 bits is JSON berth does not take (docs/API.md: JSON
    # lets a parser limit its numbers): -32600, with id null when it is the
    # id itself, else with the request's id; the connection goes on.
    c.send_raw(b'{"jsonrpc":"2.0","id":100000000000000000000,'
               b'"method":"ping"}\n')
    m = c.read_msg(10)
    check(m and m.get("error", {}).get("code") == -32600 and m["id"] is None,
          "an id past 64 bits -> -32600 with id null", m)
    c.send_raw(b'{"jsonrpc":"2.0","id":"big","method":"ping",'
               b'"params":{"n":100000000000000000000}}\n')
    m = c.read_msg(10)
    check(m and m.get("error", {}).get("code") == -32600 and m["id"] == "big",
          "an integer past 64 bits in params -> -32600 with the request's id", m)
    # Empty and blank lines are skipped, unanswered (docs/API.md).
    c.send_raw(b"\n  \t\r\n\r\n")
    r = c.request("ping", rid="after-blank")
    check(r.get("result") == {} and not c.held,
          "blank lines get no answer", c.held)
    c.held = []
    # The last line may end without its newline when the client closes
    # its sending side; its answer still comes.
    e = d.client()
    e.send_raw(b'{"jsonrpc":"2.0","id":"eof","method":"ping"}')
    e.s.shutdown(socket.SHUT_WR)
    r = e.reply_to("eof", 10)
    check(r is not None and r.get("result") == {},
          "a last line without newline at EOF is answered", r)
    e.close()
    # A reply has exactly jsonrpc, id and result or error.
    r = c.request("ping")
    check(set(r) == {"jsonrpc", "id", "result"}, "reply members", r)
    # Not JSON-RPC: -32600.
    c.send({"id": 50, "method": "ping"})
    r = c.reply_to(50)
    check(r and r.get("error", {}).get("code") == -32600,
          "missing jsonrpc -> -32600", r)
    c.send({"jsonrpc": "1.0", "id": 51, "method": "ping"})
    r = c.reply_to(51)
    check(r and r.get("error", {}).get("code") == -32600,
          "jsonrpc 1.0 -> -32600", r)
    c.send({"jsonrpc": "2.0", "id": 52, "method": 5})
    r = c.reply_to(52)
    check(r and r.get("error", {}).get("code") == -32600,
          "method not a string -> -32600", r)
    c.send_raw(b'"just a string"\n')
    m = c.read_msg(10)
    check(m and m.get("error", {}).get("code") == -32600 and m["id"] is None,
          "a non-object request -> -32600 with id null", m)
    c.send({"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"})
    m = c.read_msg(10)
    check(m and m.get("error", {}).get("code") == -32600 and m["id"] is None,
          "an object id -> -32600 with id null", m)
    # Unknown method.
    c.error("no/such", None, -32601, "unknown method")
    # params that is not an object.
    err = c.error("jobs/get", ["x"], -32602, "positional params")
    # Notifications get no answer.
    c.send({"jsonrpc": "2.0", "method": "ping"})
    c.send({"jsonrpc": "2.0", "method": "no/such"})
    c.send({"jsonrpc": "2.0", "method": "jobs/get", "params": {}})
    c.send({"jsonrpc": "2.0", "method": "jobs/submit",
            "params": {"tool": "noop", "input": {"via": "notification"}}})
    r = c.request("ping", rid="after-notes")
    check(r.get("result") == {} and not c.held,
          "notifications get no answer", c.held)
    c.held = []
    # Batches.
    c.send_raw(b"[]\n")
    m = c.read_msg(10)
    check(isinstance(m, dict) and m.get("error", {}).get("code") == -32600
          and m.get("id") is None, "empty batch -> one -32600, id null", m)
    c.send([{"jsonrpc": "2.0", "id": "b1", "method": "ping"},
            {"jsonrpc": "2.0", "method": "ping"},
            {"jsonrpc": "2.0", "id": "b2", "method": "no/such"},
            {"jsonrpc": "2.0", "id": "b3", "method": "server/info"},
            5])
    m = c.read_msg(10)
    if check(isinstance(m, list), "a batch is answered with an array", m):
        ids = sorted(str(x.get("id")) for x in m)
        check(len(m) == 4, "batch: one reply per request, none for "
              "notifications", m)
        byid = {x.get("id"): x for x in m}
        check(byid.get("b1", {}).get("result") == {}, "batch ping", m)
        check(byid.get("b2", {}).get("error", {}).get("code") == -32601,
              "batch unknown method", m)
        check("result" in byid.get("b3", {}), "batch server/info", m)
        check(byid.get(None, {}).get("error", {}).get("code") == -32600,
              "batch: a non-object element -> -32600 id null", ids)
    c.send([{"jsonrpc": "2.0", "method": "ping"},
            {"jsonrpc": "2.0", "method": "ping"}])
    r = c.request("ping", rid="after-note-batch")
    check(r.get("result") == {} and not c.held,
          "a batch of notifications only gets no answer", c.held)
    c.held = []
    # Pipelining: many requests at once, each answered.
    c.send_raw("".join(json.dumps({"jsonrpc": "2.0", "id": "p%d" % i,
                                   "method": "ping"}) + "\n"
                       for i in range(200)))
    got = set()
    for _ in range(200):
        m = c.read_msg(10)
        if m is None:
            break
        got.add(m.get("id"))
    check(got == {"p%d" % i for i in range(200)}, "200 pipelined pings",
          str(len(got)))
    # Nesting deeper than the limit (64 by docs/API.md).
    c.send_raw(b"[" * 200 + b"]" * 200 + b"\n")
    m = c.read_msg(10)
    check(isinstance(m, dict) and m.get("error", {}).get("code") == -32600
          and isinstance(m["error"].get("data", {}).get("limit"), int),
          "deep nesting -> -32600 {limit}", m)
    r = c.request("ping")
    check(r.get("result") == {}, "usable after deep nesting", r)
    # A half line, finished later.
    c.send_raw(b'{"jsonrpc":"2.0","id":"half",')
    time.sleep(0.1)
    c.send_raw(b'"method":"ping"}\n')
    r = c.reply_to("half", 10)
    check(r and r.get("result") == {}, "a line in two writes", r)
    c.close()


def test_server(d):
    section("server/info, ping, server/auth")
    c = d.client()
    info = c.call("server/info")
    if check(isinstance(info, dict), "server/info result", info):
        # principal, who asks, is berth's (docs/API.md).
        check(set(info) == {"name", "version", "protocolVersion",
                            "durability", "database", "uptimeMs", "jobs",
                            "workers", "principal"},
              "server/info has exactly its members", sorted(info))
        p = info.get("principal")
        check(isinstance(p, dict) and isinstance(p.get("name"), str)
              and isinstance(p.get("roles"), list)
              and p.get("via") in VIAS,
              "server/info.principal is {name, roles, via}", p)
        for k in ("name", "version", "protocolVersion", "durability",
                  "database"):
            check(isinstance(info.get(k), str), "server/info.%s string" % k,
                  info)
        check(info.get("protocolVersion") == "1", "protocolVersion 1", info)
        check(info.get("durability") in ("full", "normal"),
              "durability full|normal", info)
        check(is_int(info.get("uptimeMs")) and info["uptimeMs"] >= 0,
              "uptimeMs", info)
        jobs = info.get("jobs", {})
        check(isinstance(jobs, dict) and set(jobs) <= set(STATUSES)
              and all(is_int(v) for v in jobs.values()),
              "jobs: {STATUS: count}", jobs)
        w = info.get("workers", {})
        check(isinstance(w, dict) and set(w) == {"size", "busy"}
              and is_int(w.get("size")) and is_int(w.get("busy")),
              "workers: {size, busy}", w)
    check(c.call("server/info", {}) is not None, "server/info with {}")
    check(c.call("ping") == {}, "ping -> {}")
    check(c.call("ping", {}) == {}, "ping {} -> {}")
    # On the Unix socket no token is configured: server/auth is refused
    # or accepted, but it must be a well-formed answer.
    r = c.request("server/auth", {"token": "x"})
    check("result" in r or r.get("error", {}).get("code") == -32010,
          "server/auth answers {} or -32010", r)
    c.error("server/auth", {}, -32602, "server/auth without token")
    c.close()


def test_tools(d):
    section("tools/list")
    c = d.client()
    res = c.call("tools/list")
    tools = (res or {}).get("tools", [])
    check(isinstance(tools, list), "tools/list.tools is an array", res)
    names = [t.get("name") for t in tools]
    for n in ("noop", "sleep", "fail", "weather-tool", "write-note",
              "ask-name", "count-to"):
        check(n in names, "tools/list has " + n, names)
    allowed = {"name", "title", "description", "inputSchema", "outputSchema",
               "annotations", "_meta", "execution", "suspendSchema",
               "resumeSchema", "requestContextSchema", "requireApproval",
               "background", "inputExamples", "strict", "providerOptions",
               "paused", "icons", "approvalPolicy",
               # Berth extensions (docs/API.md, docs/WORKERS.md): how the
               # tool runs, and a worker tool's connected workers.
               "kind", "workers"}
    for t in tools:
        w = "tool " + str(t.get("name"))
        check(set(t) <= allowed, w + " has only Tool members",
              sorted(set(t) - allowed))
        check(t.get("kind") in ("c", "external", "worker"),
              w + ".kind is c, external or worker", t.get("kind"))
        if t.get("kind") == "worker":
            ws = t.get("workers")
            check(isinstance(ws, dict) and is_int(ws.get("connected"))
                  and is_int(ws.get("capacity")),
                  w + ".workers is {connected, capacity}", ws)
        else:
            check("workers" not in t, w + " has workers only as a worker "
                  "tool", t.get("workers"))
        check(isinstance(t.get("name"), str), w + ".name", t)
        check(isinstance(t.get("inputSchema"), dict)
              and t["inputSchema"].get("type") == "object",
              w + ".inputSchema is an object schema", t.get("inputSchema"))
        check(isinstance(t.get("paused"), bool), w + ".paused is a boolean",
              t.get("paused"))
        ex = t.get("execution")
        check(isinstance(ex, dict) and ex.get("taskSupport") in
              ("forbidden", "optional", "required"),
              w + ".execution.taskSupport", ex)
        if "background" in t:
            b = t["background"]
            check(isinstance(b, dict), w + ".background is an object", b)
            every = ("enabled", "timeoutMs", "maxRetries", "concurrency",
                     "backoffMs", "backoffMaxMs", "onInterrupt")
            for k in b:
                check(k in every,
                      w + ".background member " + k + " is listed", b)
            check(all(k in b for k in every),
                  w + ".background lists every setting", b)
            check(b.get("onInterrupt") in ("retry", "fail"),
                  w + ".background.onInterrupt", b)
        if "requireApproval" in t:
            check(isinstance(t["requireApproval"], bool),
                  w + ".requireApproval is a boolean", t["requireApproval"])
        if "annotations" in t:
            check(isinstance(t["annotations"], dict), w + ".annotations", t)
        for k in ("outputSchema", "suspendSchema", "resumeSchema",
                  "requestContextSchema", "_meta", "providerOptions"):
            if k in t:
                check(isinstance(t[k], dict), w + "." + k + " object", t[k])
        if "inputExamples" in t:
            check(isinstance(t["inputExamples"], list),
                  w + ".inputExamples array", t["inputExamples"])
    byname = {t.get("name"): t for t in tools}
    check(byname.get("write-note", {}).get("requireApproval") is True,
          "write-note requireApproval true", byname.get("write-note"))
    check(isinstance(byname.get("ask-name", {}).get("resumeSchema"), dict),
          "ask-name has resumeSchema", byname.get("ask-name"))
    check(byname.get("weather-tool", {}).get("_meta", {}).get("category")
          == "weather", "weather-tool _meta", byname.get("weather-tool"))
    check(byname.get("weather-tool", {}).get("annotations", {}).get("title")
          == "Weather Lookup", "weather-tool annotations",
          byname.get("weather-tool"))
    check("nextCursor" not in (res or {}), "one page: no nextCursor", res)
    c.error("tools/list", {"cursor": 5}, -32602, "cursor not a string")
    c.close()


def test_submit(d):
    section("jobs/submit")
    c = d.client()
    t0 = time.time()
    j = submit(c, "noop", {"a": 1}, requestContext={"user": "u"},
               metadata={"m": True}, runId="run-1", toolCallId="call-1",
               priority=5, timeoutMs=5000, maxRetries=2)
    check(j.get("status") == "pending", "noop submit -> pending", j)
    check(j.get("tool") == "noop" and j.get("input") == {"a": 1},
          "tool and input", j)
    check(j.get("requestContext") == {"user": "u"}
          and j.get("metadata") == {"m": True} and j.get("runId") == "run-1"
          and j.get("toolCallId") == "call-1" and j.get("priority") == 5
          and j.get("timeoutMs") == 5000 and j.get("maxRetries") == 2,
          "submit fields echoed", j)
    check(j.get("approval") == {"required": False, "decision": None}
          and j.get("attempt") == 1,
          "a fresh job: approval {required: false, decision: null}, "
          "attempt 1 (docs/API.md)", j)
    for k in ("output", "error", "finishedAt", "retryOf", "resumeData",
              "suspendPayload", "expiresAt", "startedAt"):
        check(k not in j, "fresh job omits " + k, j)
    done = wait(c, j.get("id"))
    check_job(done, "finished noop")
    check(done.get("status") == "completed", "noop completes", done)
    check(done.get("output") == {"a": 1}, "noop output is its input", done)
    check(is_time(done.get("startedAt")) and is_time(done.get("finishedAt")),
          "completed job has startedAt and finishedAt", done)
    check("error" not in done, "completed job has no error", done)
    # Input that fails the tool's schema: -32602 with errors, no job.
    before = (c.call("jobs/list", {"tool": "sleep", "limit": 1000}) or
              {}).get("jobs", [])
    err = c.error("jobs/submit", {"tool": "sleep", "input": {"ms": "x"}},
                  -32602, "schema failure")
    check_schema_error(err, "/ms")
    err = c.error("jobs/submit", {"tool": "sleep", "input": {}}, -32602,
                  "missing required input member")
    check_schema_error(err)
    err = c.error("jobs/submit", {"tool": "sleep",
                                  "input": {"ms": 1, "extra": 2}},
                  -32602, "additionalProperties")
    check_schema_error(err)
    after = (c.call("jobs/list", {"tool": "sleep", "limit": 1000}) or
             {}).get("jobs", [])
    check(len(before) == len(after), "refused input stores no job",
          "%d vs %d" % (len(before), len(after)))
    # Params errors.
    err = c.error("jobs/submit", {"input": {}}, -32602, "tool missing")
    check_schema_error(err, "/tool", "missing tool")
    err = c.error("jobs/submit", {"tool": "noop"}, -32602, "input missing")
    check_schema_error(err, "/input", "missing input")
    err = c.error("jobs/submit", {"tool": 3, "input": {}}, -32602,
                  "tool not a string")
    check_schema_error(err, "/tool")
    err = c.error("jobs/submit", {"tool": "nope-no-tool", "input": {}},
                  -32011, "unknown tool")
    check(isinstance(err.get("data"), dict)
          and err["data"].get("id") == "nope-no-tool",
          "-32011 for an unknown tool has {id}", err)
    for bad in ({"priority": "high"}, {"priority": 1.5},
                {"timeoutMs": -1}, {"timeoutMs": 0}, {"maxRetries": -1},
                {"ttlMs": "x"}, {"delayMs": -5}, {"runAt": "tomorrow"},
                {"requestContext": [1]}, {"metadata": "m"},
                {"runId": 5}, {"idempotencyKey": 5}, {"toolCallId": False}):
        p = {"tool": "noop", "input": {}}
        p.update(bad)
        err = c.error("jobs/submit", p, -32602, "submit %s" % json.dumps(bad))
        check_schema_error(err, "/" + list(bad)[0], "submit " + list(bad)[0])
    # runAt and delayMs together.
    err = c.error("jobs/submit", {"tool": "noop", "input": {},
                                  "runAt": "2030-01-01T00:00:00.000Z",
                                  "delayMs": 10},
                  -32602, "runAt with delayMs")
    check_schema_error(err)
    # delayMs: runAt is now + delay, and the job waits for it.
    j = submit(c, "noop", {"d": 1}, delayMs=1500)
    ra = j.get("runAt")
    check(is_time(ra), "a delayed job has runAt", j)
    w = wait(c, j.get("id"), timeout_ms=500)
    check(w.get("status") == "pending", "delayed job still pending at 0.5 s",
          w)
    w = wait(c, j.get("id"), timeout_ms=10000)
    check(w.get("status") == "completed", "delayed job runs after its delay",
          w)
    if is_time(w.get("startedAt")) and is_time(ra):
        check(w["startedAt"] >= ra, "started no earlier than runAt", w)
    # runAt in the near future.
    at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + 1.5))
    at += ".000Z"
    j = submit(c, "noop", {"r": 1}, runAt=at)
    check(j.get("runAt") == at, "runAt echoed as given", j)
    w = wait(c, j.get("id"), timeout_ms=10000)
    check(w.get("status") == "completed" and w.get("startedAt", "") >= at,
          "runAt job runs at its time", w)
    # A runAt in the past runs now.
    j = submit(c, "noop", {}, runAt="2001-01-01T00:00:00.000Z")
    w = wait(c, j.get("id"))
    check(w.get("status") == "completed", "runAt in the past runs", w)
    # Idempotency.
    k = "key-%d" % os.getpid()
    a = submit(c, "noop", {"first": True}, idempotencyKey=k)
    b = submit(c, "noop", {"second": True}, idempotencyKey=k)
    check(a.get("id") and a.get("id") == b.get("id"),
          "same idempotencyKey -> the first job", [a.get("id"), b.get("id")])
    check(b.get("input") == {"first": True}, "the first job's input", b)
    check(a.get("idempotencyKey") == k, "idempotencyKey echoed", a)
    # Same key after the first finished: still the first job.
    wait(c, a.get("id"))
    e = submit(c, "noop", {"third": True}, idempotencyKey=k)
    check(e.get("id") == a.get("id"),
          "same key after completion -> the first job", e)
    # Different keys: different jobs.
    f = submit(c, "noop", {}, idempotencyKey=k + "-other")
    check(f.get("id") != a.get("id"), "other key -> other job", f)
    # A key belongs to its tool (docs/API.md): the same key with another
    # tool is another job.
    g = submit(c, "sleep", {"ms": 1}, idempotencyKey=k)
    check(g.get("id") not in (None, a.get("id")) and g.get("tool") == "sleep",
          "the same key with another tool -> another job", g)
    # Ids are UUIDv7 and time-ordered.
    ids = [submit(c, "noop", {"n": i}).get("id", "") for i in range(5)]
    check(ids == sorted(ids), "ids are time-ordered", ids)
    # timeoutMs → timed_out (sleep honours the abort flag).
    j = submit(c, "sleep", {"ms": 10000}, timeoutMs=300, maxRetries=0)
    w = wait(c, j.get("id"))
    check(w.get("status") == "timed_out", "timeoutMs -> timed_out", w)
    check(isinstance(w.get("error"), dict), "timed_out job has an error", w)
    # maxRetries: a retryable failure runs attempts then fails.
    j = submit(c, "fail", {"message": "boom", "retryable": True},
               maxRetries=1)
    w = wait(c, j.get("id"), until=["failed"], timeout_ms=30000)
    check(w.get("status") == "failed", "retryable failure ends failed", w)
    check(w.get("attempt") == 2, "attempt counts runs (2 with 1 retry)", w)
    check(w.get("error", {}).get("message", "").find("boom") >= 0,
          "error.message is the tool's", w)
    c.close()


def test_get(d):
    section("jobs/get")
    c = d.client()
    j = submit(c, "noop", {"x": 1})
    for view in (None, "raw", "display", "transcript"):
        p = {"id": j.get("id")}
        if view:
            p["view"] = view
        g = c.call("jobs/get", p)
        check_job(g, "jobs/get view=%s" % view)
        check((g or {}).get("id") == j.get("id"), "get returns the job", g)
    c.error("jobs/get", {"id": j.get("id"), "view": "fancy"}, -32602,
            "bad view")
    check_schema_error(c.error("jobs/get", {}, -32602, "get without id"),
                       "/id")
    c.error("jobs/get", {"id": 5}, -32602, "id not a string")
    missing = "01890000-0000-7000-8000-000000000000"
    err = c.error("jobs/get", {"id": missing}, -32011, "unknown id")
    check(err.get("data") == {"id": missing}, "-32011 data {id}", err)
    err = c.error("jobs/get", {"id": "not-a-uuid"}, -32011, "junk id")
    check(err.get("data") == {"id": "not-a-uuid"}, "-32011 data {id}", err)
    c.error("jobs/get", {"id": "x" * 65}, -32602, "a 65-byte id")
    c.close()


def test_list(d):
    section("jobs/list")
    c = d.client()
    run = "list-run-%d" % os.getpid()
    made = [submit(c, "noop", {"i": i}, runId=run).get("id") for i in range(7)]
    for jid in made:
        wait(c, jid)
    res = c.call("jobs/list", {"runId": run})
    jobs = (res or {}).get("jobs", [])
    check(sorted(x.get("id") for x in jobs) == sorted(made),
          "runId filter lists exactly the run's jobs", len(jobs))
    for x in jobs:
        check_job(x, "listed job")
    check("nextCursor" not in (res or {}), "no nextCursor on the last page",
          res)
    check([x.get("id") for x in jobs] == sorted(made, reverse=True),
          "jobs/list lists newest first (docs/API.md)",
          [x.get("id") for x in jobs])
    # Paging with a cursor.
    seen = []
    cursor = None
    for _ in range(10):
        p = {"runId": run, "limit": 3}
        if cursor:
            p["cursor"] = cursor
        page = c.call("jobs/list", p) or {}
        check(len(page.get("jobs", [])) <= 3, "limit respected", page)
        seen += [x["id"] for x in page.get("jobs", [])]
        cursor = page.get("nextCursor")
        if not cursor:
            break
        check(isinstance(cursor, str), "nextCursor is a string", cursor)
    check(sorted(seen) == sorted(made) and len(seen) == len(set(seen)),
          "cursor paging lists every job once", seen)
    # Filters.
    res = c.call("jobs/list", {"runId": run, "status": "completed"}) or {}
    check(len(res.get("jobs", [])) == 7, "status filter (string)", res)
    res = c.call("jobs/list", {"runId": run, "status": ["pending"]}) or {}
    check(len(res.get("jobs", [])) == 0, "status filter (array)", res)
    res = c.call("jobs/list", {"runId": run, "tool": "sleep"}) or {}
    check(len(res.get("jobs", [])) == 0, "tool filter", res)
    res = c.call("jobs/list", {"tool": "noop", "limit": 1000}) or {}
    check(all(x.get("tool") == "noop" for x in res.get("jobs", [])),
          "tool filter lists only that tool", "")
    res = c.call("jobs/list", {"status": "completed", "limit": 1000}) or {}
    check(all(x.get("status") == "completed" for x in res.get("jobs", [])),
          "status filter lists only that status", "")
    res = c.call("jobs/list", {}) or {}
    check(isinstance(res.get("jobs"), list), "list without params", res)
    # Invalid params.
    for bad in ({"status": "nope"}, {"status": ["completed", "nope"]},
                {"limit": 0}, {"limit": 1001}, {"limit": "5"},
                {"cursor": "garbage-cursor"}, {"tool": 5}, {"runId": 5}):
        err = c.error("jobs/list", bad, -32602, "list %s" % json.dumps(bad))
        check_schema_error(err, "/" + list(bad)[0])
    c.close()


def test_wait(d):
    section("jobs/wait")
    c = d.client()
    j = submit(c, "sleep", {"ms": 800})
    t = time.time()
    w = c.call("jobs/wait", {"id": j.get("id"), "timeoutMs": 200})
    el = time.time() - t
    check(w and w.get("status") in ("pending", "running"),
          "timeoutMs passes: the job as it is", w)
    check(0.15 <= el < 2.0, "wait took about timeoutMs", str(el))
    w = c.call("jobs/wait", {"id": j.get("id"), "until": ["running"],
                             "timeoutMs": 10000})
    check(w and w.get("status") in ("running", "completed"),
          "until running", w)
    w = c.call("jobs/wait", {"id": j.get("id"), "timeoutMs": 10000})
    check(w and w.get("status") == "completed",
          "default until: not pending/running", w)
    t = time.time()
    w = c.call("jobs/wait", {"id": j.get("id"), "until": ["running"],
                             "timeoutMs": 5000})
    check(time.time() - t < 1.0 and w and w.get("status") == "completed",
          "wait on a terminal job returns at once", w)
    t = time.time()
    w = c.call("jobs/wait", {"id": j.get("id"), "timeoutMs": 0})
    check(time.time() - t < 1.0, "timeoutMs 0 returns at once", w)
    # Default until covers awaiting_approval and suspended.
    a = submit(c, "write-note", {"path": "/nonexistent/x", "text": "t"})
    w = c.call("jobs/wait", {"id": a.get("id"), "timeoutMs": 3000})
    check(w and w.get("status") == "awaiting_approval",
          "default until includes awaiting_approval", w)
    c.call("jobs/cancel", {"id": a.get("id")})
    c.error("jobs/wait", {"id": j.get("id"), "until": ["bogus"]}, -32602,
            "until with a bad status")
    c.error("jobs/wait", {"id": j.get("id"), "timeoutMs": -1}, -32602,
            "negative timeoutMs")
    c.error("jobs/wait", {"id": j.get("id"), "until": "completed,failed"},
            -32602, "until as a joined string")
    c.error("jobs/wait", {}, -32602, "wait without id")
    c.error("jobs/wait", {"id": "01890000-0000-7000-8000-000000000001"},
            -32011, "wait on an unknown job")
    c.close()


def test_lifecycle(d):
    section("lifecycle: approval")
    c = d.client()
    mark = os.path.join(d.tmp, "note-approved.txt")
    j = submit(c, "write-note", {"path": mark, "text": "hello"})
    check(j.get("status") == "awaiting_approval",
          "requireApproval -> awaiting_approval", j)
    check(j.get("approval", {}).get("required") is True
          and j.get("approval", {}).get("decision") is None,
          "approval {required: true, decision: null}", j)
    a = c.call("jobs/approve", {"id": j.get("id"), "note": "ok"})
    check_job(a or {}, "approved job")
    check((a or {}).get("status") == "pending", "approve -> pending", a)
    check((a or {}).get("approval", {}).get("decision") == "approved"
          and is_time((a or {}).get("approval", {}).get("decidedAt")),
          "approval.decision approved with decidedAt", a)
    err = c.error("jobs/approve", {"id": j.get("id")}, -32012,
                  "a second approve")
    check(isinstance(err.get("data", {}).get("status"), str),
          "-32012 data {status}", err)
    err = c.error("jobs/decline", {"id": j.get("id")}, -32012,
                  "decline after approve")
    w = wait(c, j.get("id"))
    check(w.get("status") == "completed", "approved job runs", w)
    check(os.path.exists(mark), "approved write-note wrote its file")
    err = c.error("jobs/approve", {"id": j.get("id")}, -32012,
                  "approve a completed job")
    check(err.get("data") == {"status": "completed"},
          "-32012 data is {status: completed}", err)

    section("lifecycle: decline")
    mark = os.path.join(d.tmp, "note-declined.txt")
    j = submit(c, "write-note", {"path": mark, "text": "never"})
    dd = c.call("jobs/decline", {"id": j.get("id"), "reason": "no way"})
    check_job(dd or {}, "declined job")
    check((dd or {}).get("status") == "declined", "decline -> declined", dd)
    check((dd or {}).get("approval", {}).get("decision") == "declined"
          and (dd or {}).get("approval", {}).get("reason") == "no way",
          "decline reason stored", dd)
    check(is_time((dd or {}).get("finishedAt")), "declined has finishedAt",
          dd)
    err = c.error("jobs/decline", {"id": j.get("id")}, -32012,
                  "a second decline")
    check(err.get("data") == {"status": "declined"}, "{status: declined}",
          err)
    c.error("jobs/approve", {"id": j.get("id")}, -32012,
            "approve after decline")
    time.sleep(0.5)
    check(not os.path.exists(mark), "a declined tool never runs")
    g = c.call("jobs/get", {"id": j.get("id")}) or {}
    check(g.get("status") == "declined" and "startedAt" not in g,
          "declined job never started", g)
    # approve/decline a job that asks no approval.
    p = submit(c, "sleep", {"ms": 3000})
    c.error("jobs/approve", {"id": p.get("id")}, -32012,
            "approve a job without approval")
    c.error("jobs/decline", {"id": p.get("id")}, -32012,
            "decline a job without approval")
    c.call("jobs/cancel", {"id": p.get("id")})
    for m in ("jobs/approve", "jobs/decline", "jobs/cancel", "jobs/retry",
              "jobs/logs"):
        c.error(m, {}, -32602, m + " without id")
        c.error(m, {"id": "01890000-0000-7000-8000-000000000002"}, -32011,
                m + " unknown id")
    c.error("jobs/approve", {"id": j.get("id"), "note": 5}, -32602,
            "note not a string")
    c.error("jobs/decline", {"id": j.get("id"), "reason": 5}, -32602,
            "reason not a string")

    section("lifecycle: suspend and resume")
    s = submit(c, "ask-name", {"greeting": "Hi"})
    w = wait(c, s.get("id"))
    check(w.get("status") == "suspended", "ask-name suspends", w)
    check(w.get("suspendPayload") == {"question": "What is your name?"},
          "suspendPayload", w)
    err = c.error("jobs/resume", {"id": s.get("id"), "resumeData": {}},
                  -32602, "resumeData failing resumeSchema")
    check_schema_error(err)
    g = c.call("jobs/get", {"id": s.get("id")}) or {}
    check(g.get("status") == "suspended", "invalid resume leaves suspended",
          g)
    c.error("jobs/resume", {"id": s.get("id")}, -32602, "resume without "
            "resumeData")
    r = c.call("jobs/resume", {"id": s.get("id"),
                               "resumeData": {"answer": "Ada"}})
    check_job(r or {}, "resumed job")
    check((r or {}).get("status") == "pending", "resume -> pending", r)
    check((r or {}).get("resumeData") == {"answer": "Ada"},
          "resumeData stored", r)
    err = c.error("jobs/resume", {"id": s.get("id"),
                                  "resumeData": {"answer": "Bob"}},
                  -32012, "a second resume")
    check(isinstance(err.get("data", {}).get("status"), str),
          "second resume -32012 {status}", err)
    w = wait(c, s.get("id"))
    check(w.get("status") == "completed"
          and w.get("output") == {"message": "Hi, Ada!"},
          "resumed run finishes with its own data", w)
    c.error("jobs/resume", {"id": s.get("id"),
                            "resumeData": {"answer": "Cy"}},
            -32012, "resume a completed job")
    # Two suspended calls resumed in reverse order.
    s1 = submit(c, "ask-name", {"greeting": "A"})
    s2 = submit(c, "ask-name", {"greeting": "B"})
    wait(c, s1.get("id"))
    wait(c, s2.get("id"))
    c.call("jobs/resume", {"id": s2.get("id"), "resumeData": {"answer": "2"}})
    c.call("jobs/resume", {"id": s1.get("id"), "resumeData": {"answer": "1"}})
    w1 = wait(c, s1.get("id"), until=["completed"])
    w2 = wait(c, s2.get("id"), until=["completed"])
    check(w1.get("output") == {"message": "A, 1!"}
          and w2.get("output") == {"message": "B, 2!"},
          "each resumed with its own data", [w1.get("output"),
                                             w2.get("output")])
    # resume of a job that is not suspended.
    p = submit(c, "noop", {})
    wait(c, p.get("id"))
    c.error("jobs/resume", {"id": p.get("id"), "resumeData": {}}, -32012,
            "resume a job that never suspended")

    section("lifecycle: cancel")
    # pending (delayed)
    p = submit(c, "noop", {}, delayMs=60000)
    x = c.call("jobs/cancel", {"id": p.get("id"), "reason": "changed mind"})
    check_job(x or {}, "cancelled pending")
    check((x or {}).get("status") == "cancelled", "cancel pending", x)
    check(is_time((x or {}).get("finishedAt")), "cancelled has finishedAt",
          x)
    err = c.error("jobs/cancel", {"id": p.get("id")}, -32012,
                  "cancel a cancelled job")
    check(err.get("data") == {"status": "cancelled"}, "{status: cancelled}",
          err)
    # awaiting_approval
    p = submit(c, "write-note", {"path": os.path.join(d.tmp, "c.txt"),
                                 "text": "c"})
    x = c.call("jobs/cancel", {"id": p.get("id")})
    check((x or {}).get("status") == "cancelled", "cancel awaiting_approval",
          x)
    c.error("jobs/approve", {"id": p.get("id")}, -32012,
            "approve a cancelled job")
    # suspended
    p = submit(c, "ask-name", {})
    wait(c, p.get("id"))
    x = c.call("jobs/cancel", {"id": p.get("id")})
    check((x or {}).get("status") == "cancelled", "cancel suspended", x)
    c.error("jobs/resume", {"id": p.get("id"), "resumeData": {"answer": "z"}},
            -32012, "resume a cancelled job")
    # running
    p = submit(c, "sleep", {"ms": 20000})
    w = wait(c, p.get("id"), until=["running"])
    check(w.get("status") == "running", "sleep is running", w)
    t = time.time()
    x = c.call("jobs/cancel", {"id": p.get("id")})
    check((x or {}).get("status") == "cancelled", "cancel running", x)
    time.sleep(0.5)
    g = c.call("jobs/get", {"id": p.get("id")}) or {}
    check(g.get("status") == "cancelled" and "output" not in g,
          "a cancelled run's late output is discarded", g)
    # terminal: completed
    p = submit(c, "noop", {})
    wait(c, p.get("id"))
    err = c.error("jobs/cancel", {"id": p.get("id")}, -32012,
                  "cancel a completed job")
    check(err.get("data") == {"status": "completed"}, "{status: completed}",
          err)

    section("jobs/retry")
    f = submit(c, "fail", {"message": "nope", "retryable": False},
               requestContext={"k": "v"})
    w = wait(c, f.get("id"))
    check(w.get("status") == "failed", "fail -> failed", w)
    check(isinstance(w.get("error"), dict)
          and w["error"].get("message", "").find("nope") >= 0,
          "failed error.message", w)
    r = c.call("jobs/retry", {"id": f.get("id")})
    check_job(r or {}, "retry job")
    r = r or {}
    check(r.get("id") != f.get("id") and r.get("retryOf") == f.get("id"),
          "retry: a new job with retryOf", r)
    check(r.get("tool") == "fail" and r.get("input") == f.get("input")
          and r.get("requestContext") == {"k": "v"},
          "retry keeps tool, input, requestContext", r)
    check(r.get("status") in ("pending", "running", "failed"),
          "retry job starts pending", r)
    g = c.call("jobs/get", {"id": f.get("id")}) or {}
    check(g.get("status") == "failed", "the failed job never changes", g)
    # timed_out
    t = submit(c, "sleep", {"ms": 5000}, timeoutMs=200, maxRetries=0)
    wait(c, t.get("id"))
    r = c.call("jobs/retry", {"id": t.get("id")}) or {}
    check(r.get("retryOf") == t.get("id"), "retry a timed_out job", r)
    c.call("jobs/cancel", {"id": r.get("id")})
    # Not allowed from completed, cancelled, declined, pending, suspended.
    p = submit(c, "noop", {})
    wait(c, p.get("id"))
    err = c.error("jobs/retry", {"id": p.get("id")}, -32012,
                  "retry a completed job")
    check(err.get("data") == {"status": "completed"}, "{status}", err)
    c.error("jobs/retry", {"id": x.get("id") if x else ""}, -32012,
            "retry a cancelled job")
    c.error("jobs/retry", {"id": j.get("id")}, -32012, "retry a declined job")
    p = submit(c, "noop", {}, delayMs=60000)
    err = c.error("jobs/retry", {"id": p.get("id")}, -32012,
                  "retry a pending job")
    check(err.get("data") == {"status": "pending"}, "{status: pending}", err)
    c.call("jobs/cancel", {"id": p.get("id")})

    section("ttlMs expiry")
    e = submit(c, "write-note", {"path": os.path.join(d.tmp, "e.txt"),
                                 "text": "e"}, ttlMs=500)
    check(is_time(e.get("expiresAt")), "ttlMs sets expiresAt", e)
    w = wait(c, e.get("id"), until=["expired"], timeout_ms=10000)
    check(w.get("status") == "expired", "approval past its ttl -> expired", w)
    c.error("jobs/approve", {"id": e.get("id")}, -32012,
            "approve an expired job")
    r = c.call("jobs/retry", {"id": e.get("id")}) or {}
    check(r.get("retryOf") == e.get("id")
          and r.get("status") == "awaiting_approval",
          "retry an expired job -> a new awaiting_approval job", r)
    if r.get("id"):
        c.call("jobs/cancel", {"id": r["id"]})
    e = submit(c, "ask-name", {}, ttlMs=1000)
    w = wait(c, e.get("id"), until=["expired"], timeout_ms=10000)
    check(w.get("status") == "expired", "suspended past its ttl -> expired",
          w)
    # ttl bounds a wait for a person, never a job's time pending
    # (docs/API.md): a job of a paused tool outlives its ttl.
    c.call("tools/pause", {"name": "noop"})
    e = submit(c, "noop", {"ttl": 1}, ttlMs=300)
    check("expiresAt" not in e, "no expiresAt while a job waits for no one",
          e)
    w = c.call("jobs/wait", {"id": e.get("id"), "until": ["expired"],
                             "timeoutMs": 1200}) or {}
    check(w.get("status") == "pending", "a pending job past its ttl stays "
          "pending", w)
    c.call("tools/unpause", {"name": "noop"})
    w = wait(c, e.get("id"))
    check(w.get("status") == "completed", "... and runs once unpaused", w)
    c.close()


def test_logs(d):
    section("jobs/logs")
    c = d.client()
    j = submit(c, "count-to", {"to": 3, "delayMs": 10})
    wait(c, j.get("id"))
    res = c.call("jobs/logs", {"id": j.get("id")}) or {}
    check(set(res) == {"lines", "next"}, "logs result {lines, next}", res)
    check(isinstance(res.get("lines"), list) and is_int(res.get("next")),
          "lines array, next integer", res)
    prev = 0
    for ln in res.get("lines", []):
        check(set(ln) <= {"n", "at", "level", "message", "data"}
              and is_int(ln.get("n")) and is_time(ln.get("at"))
              and isinstance(ln.get("level"), str)
              and isinstance(ln.get("message"), str),
              "log line {n, at, level, message, data?}", ln)
        check(ln.get("n", 0) > prev, "log lines oldest first", ln)
        prev = ln.get("n", prev)
    if res.get("lines"):
        more = c.call("jobs/logs", {"id": j.get("id"),
                                    "after": res["next"]}) or {}
        check(more.get("lines") == [], "after next: nothing more", more)
        one = c.call("jobs/logs", {"id": j.get("id"), "limit": 1}) or {}
        check(len(one.get("lines", [])) == 1
              and one.get("next") == one["lines"][0]["n"],
              "limit 1 -> one line, next its n", one)
    n = submit(c, "noop", {})
    res = c.call("jobs/logs", {"id": n.get("id")}) or {}
    check(res.get("lines") == [] and is_int(res.get("next")),
          "a job without logs", res)
    c.error("jobs/logs", {"id": j.get("id"), "after": -1}, -32602, "after -1")
    c.error("jobs/logs", {"id": j.get("id"), "limit": 0}, -32602, "limit 0")
    c.close()


def test_events(d):
    section("events/poll")
    c = d.client()
    res = c.call("events/poll", {"limit": 1000}) or {}
    check(set(res) == {"events", "next"}, "poll result {events, next}", res)
    evs = res.get("events", [])
    check(len(evs) > 0, "there are events", res)
    for e in evs[:50]:
        check_event(e)
    seqs = [e.get("seq") for e in evs]
    check(seqs == sorted(seqs) and len(set(seqs)) == len(seqs),
          "poll: seq ascending", seqs[:20])
    check(all(b - a == 1 for a, b in zip(seqs, seqs[1:])),
          "seq grows by one per event", seqs[:20])
    check(res.get("next") == (seqs[-1] if seqs else 0),
          "next is the last seq", res.get("next"))
    last = res.get("next", 0)
    more = c.call("events/poll", {"since": 0, "limit": 1000}) or {}
    check(more.get("events", [None])[0] == (evs[0] if evs else None),
          "since 0 reads from the start", "")
    # Type/status pairs of a noop job: created pending, started running,
    # completed completed.
    j = submit(c, "noop", {"ev": 1})
    wait(c, j.get("id"))
    res = c.call("events/poll", {"since": last, "jobId": j.get("id")}) or {}
    types = [(e.get("type"), e.get("status")) for e in res.get("events", [])]
    check(types == [("created", "pending"), ("started", "running"),
                    ("completed", "completed")],
          "a noop job's events", types)
    if res.get("events"):
        e0 = res["events"][0]
        check(e0.get("jobId") == j.get("id") and e0.get("tool") == "noop",
              "event jobId and tool", e0)
        check(e0.get("data") is not None, "created event carries data", e0)
    # jobId filter lists only that job.
    check(all(e.get("jobId") == j.get("id") for e in res.get("events", [])),
          "jobId filter", res)
    # waitMs: wakes on a new event.
    top = (c.call("events/poll", {"since": 0, "limit": 1000}) or {})
    seq = top.get("next", 0)
    while top.get("events"):
        top = c.call("events/poll", {"since": seq, "limit": 1000}) or {}
        seq = top.get("next", seq)
    t = time.time()
    res = c.call("events/poll", {"since": seq, "waitMs": 300}) or {}
    el = time.time() - t
    check(res.get("events") == [] and res.get("next") == seq,
          "poll with nothing new: empty, next = since", res)
    check(0.25 <= el < 3, "waitMs waits when nothing is new", str(el))
    c2 = d.client()
    c.send({"jsonrpc": "2.0", "id": "pw", "method": "events/poll",
            "params": {"since": seq, "waitMs": 10000}})
    time.sleep(0.3)
    t = time.time()
    submit(c2, "noop", {"wake": 1})
    r = c.reply_to("pw", 12)
    el = time.time() - t
    check(r is not None and len(r.get("result", {}).get("events", [])) >= 1,
          "poll with waitMs wakes on a new event", r)
    check(el < 3, "woke promptly", str(el))
    c2.close()
    for bad in ({"since": -1}, {"limit": 0}, {"waitMs": "x"},
                {"jobId": 5}, {"since": "1"}):
        c.error("events/poll", bad, -32602, "poll %s" % json.dumps(bad))

    section("events/subscribe")
    last = c.call("events/poll", {"since": 0, "limit": 1000}) or {}
    s = last.get("next", 0)
    while last.get("events"):
        last = c.call("events/poll", {"since": s, "limit": 1000}) or {}
        s = last.get("next", s)
    since = max(0, s - 3)
    sub = c.call("events/subscribe", {"since": since})
    check(isinstance(sub, dict) and set(sub) == {"subscription"}
          and isinstance(sub.get("subscription"), str),
          "subscribe -> {subscription}", sub)
    sid = (sub or {}).get("subscription")
    got = []
    deadline = time.time() + 5
    while len(got) < s - since and time.time() < deadline:
        m = c.next_msg(lambda m: m.get("method") == "events/event", 5)
        if m is None:
            break
        got.append(m)
    check([m["params"].get("seq") for m in got] == list(range(since + 1,
                                                              s + 1)),
          "replay from since", [m["params"].get("seq") for m in got])
    for m in got:
        check("id" not in m and m.get("jsonrpc") == "2.0",
              "events/event is a notification", m)
        check_event(m.get("params"), "events/event params")
    # Live.
    j = submit(c, "noop", {"live": 1})
    live = []
    deadline = time.time() + 10
    while time.time() < deadline and len(live) < 3:
        m = c.next_msg(lambda m: m.get("method") == "events/event", 5)
        if m is None:
            break
        if m["params"].get("jobId") == j.get("id"):
            live.append(m["params"])
    check([e.get("type") for e in live] == ["created", "started",
                                            "completed"],
          "live events of a new job", [e.get("type") for e in live])
    check(all(e.get("subscription") == sid for e in live) or
          all("subscription" not in e for e in live),
          "notifications name the subscription", live[:1])
    seqs = [e.get("seq") for e in live]
    check(seqs == sorted(seqs), "live seq ascending", seqs)
    # Unsubscribe: no more events.
    check(c.call("events/unsubscribe", {"subscription": sid}) == {},
          "unsubscribe -> {}")
    submit(c, "noop", {"after-unsub": 1})
    time.sleep(0.5)
    m = c.next_msg(lambda m: m.get("method") == "events/event", 0.5)
    check(m is None, "no events after unsubscribe", m)
    err = c.error("events/unsubscribe", {"subscription": sid}, -32011,
                  "unsubscribe twice")
    check(err.get("data") == {"id": sid}, "-32011 {id} for a subscription",
          err)
    c.error("events/unsubscribe", {}, -32602, "unsubscribe without "
            "subscription")
    c.error("events/subscribe", {"since": "x"}, -32602, "subscribe bad since")
    c.error("events/subscribe", {"progress": "yes"}, -32602,
            "subscribe bad progress")
    # jobId and progress.
    c.held = []
    j = submit(c, "sleep", {"ms": 1500}, delayMs=300)
    sub = c.call("events/subscribe", {"jobId": j.get("id"),
                                      "progress": True}) or {}
    w = wait(c, j.get("id"))
    while c.next_msg(lambda m: False, 0.3) is not None:
        pass
    evs = [m["params"] for m in c.notifications("events/event")]
    prog = [m["params"] for m in c.notifications("events/progress")]
    check(all(e.get("jobId") == j.get("id") for e in evs) and
          [e.get("type") for e in evs] == ["started", "completed"],
          "jobId subscription: that job's live events", evs)
    check(len(prog) >= 1, "progress: true -> events/progress", prog)
    for p in prog[:3]:
        check(p.get("jobId") == j.get("id")
              and isinstance(p.get("progress"), (int, float))
              and set(p) <= {"subscription", "jobId", "progress", "total",
                             "message"},
              "events/progress {jobId, progress, total, message}", p)
    # The progress notifications are not in the log.
    res = c.call("events/poll", {"jobId": j.get("id")}) or {}
    check(all(e.get("type") in EVENT_TYPES for e in res.get("events", [])),
          "no progress in the log", res)
    c.close()


def test_pause(d):
    section("tools/pause")
    c = d.client()
    check(c.call("tools/pause", {"name": "sleep"}) == {}, "pause -> {}")
    t = {x["name"]: x for x in (c.call("tools/list") or {}).get("tools", [])}
    check(t.get("sleep", {}).get("paused") is True, "paused shows", t.get(
        "sleep"))
    j = submit(c, "sleep", {"ms": 1})
    check(j.get("status") == "pending", "submissions accepted while paused",
          j)
    w = c.call("jobs/wait", {"id": j.get("id"), "timeoutMs": 700}) or {}
    check(w.get("status") == "pending", "no job of a paused tool starts", w)
    c.error("tools/pause", {"name": "no-such-tool"}, -32011,
            "pause an unknown tool")
    c.error("tools/pause", {}, -32602, "pause without name")
    c.error("tools/unpause", {"name": 5}, -32602, "unpause name not a string")
    c.close()
    d.restart()
    c = d.client()
    t = {x["name"]: x for x in (c.call("tools/list") or {}).get("tools", [])}
    check(t.get("sleep", {}).get("paused") is True, "pause survives restart",
          t.get("sleep"))
    w = c.call("jobs/wait", {"id": j.get("id"), "timeoutMs": 700}) or {}
    check(w.get("status") == "pending", "still not started after restart", w)
    check(c.call("tools/unpause", {"name": "sleep"}) == {}, "unpause -> {}")
    w = wait(c, j.get("id"))
    check(w.get("status") == "completed", "unpause lets it run", w)
    t = {x["name"]: x for x in (c.call("tools/list") or {}).get("tools", [])}
    check(t.get("sleep", {}).get("paused") is False, "unpaused shows",
          t.get("sleep"))
    c.close()


def test_restart(d):
    section("restart: durability")
    c = d.client()
    a = submit(c, "write-note", {"path": os.path.join(d.tmp, "r.txt"),
                                 "text": "r"})
    s = submit(c, "ask-name", {})
    wait(c, s.get("id"))
    res = c.call("events/poll", {"since": 0, "limit": 1000}) or {}
    seq = res.get("next", 0)
    while res.get("events"):
        res = c.call("events/poll", {"since": seq, "limit": 1000}) or {}
        seq = res.get("next", seq)
    c.close()
    d.restart()
    c = d.client()
    g = c.call("jobs/get", {"id": a.get("id")}) or {}
    check(g.get("status") == "awaiting_approval",
          "awaiting_approval survives restart", g)
    g = c.call("jobs/get", {"id": s.get("id")}) or {}
    check(g.get("status") == "suspended", "suspended survives restart", g)
    j = submit(c, "noop", {})
    wait(c, j.get("id"))
    res = c.call("events/poll", {"since": seq}) or {}
    check(res.get("events") and res["events"][0].get("seq") == seq + 1,
          "seq survives restarts", res.get("events", [None])[:1])
    c.call("jobs/cancel", {"id": a.get("id")})
    c.call("jobs/cancel", {"id": s.get("id")})
    c.close()


def test_more_params(d):
    section("params: one place, one shape")
    c = d.client()
    # params that is not an object: -32602 with data.errors (docs/API.md).
    err = c.error("jobs/get", ["x"], -32602, "positional params")
    check_schema_error(err, None, "positional params")
    err = c.error("ping", "x", -32602, "params a string")
    check_schema_error(err, None, "params a string")
    # A notification with params that are not an object gets no answer.
    c.send({"jsonrpc": "2.0", "method": "jobs/get", "params": ["x"]})
    c.send({"jsonrpc": "2.0", "method": "ping", "params": "bar"})
    r = c.request("ping", rid="after-bad-note")
    check(r.get("result") == {} and not c.held,
          "a notification with non-object params gets no answer", c.held)
    c.held = []
    # Members a method does not know are ignored.
    r = c.request("ping", {"_meta": {"x": 1}, "later": True})
    check(r.get("result") == {}, "unknown members are ignored", r)
    j = submit(c, "noop", {}, _meta={"progressToken": 1}, somethingNew=5)
    check(j.get("status") == "pending", "submit ignores unknown members", j)
    # An integer param written with a zero fraction is an integer, as
    # JSON Schema counts it (a Python client's seconds * 1000 is 5000.0);
    # a fraction is still refused.
    j = submit(c, "noop", {}, timeoutMs=5000.0, priority=2.0,
               delayMs=600000.0)
    check(j.get("timeoutMs") == 5000 and is_int(j.get("timeoutMs"))
          and j.get("priority") == 2,
          "integer params written as 5000.0 are integers", j)
    if j.get("id"):
        c.call("jobs/cancel", {"id": j["id"]})
    res = c.call("events/poll", {"since": 0, "limit": 2.0}) or {}
    check(len(res.get("events", [])) == 2, "events/poll limit 2.0", res)
    # Without limit a poll answers at most 100 events (docs/API.md).
    res = c.call("events/poll", {"since": 0}) or {}
    most = c.call("events/poll", {"since": 0, "limit": 1000}) or {}
    check(len(res.get("events", [])) == min(100, len(most.get("events", [])))
          and len(most.get("events", [])) > 100,
          "events/poll answers 100 events without limit",
          [len(res.get("events", [])), len(most.get("events", []))])
    err = c.error("jobs/submit", {"tool": "noop", "input": {},
                                  "timeoutMs": 5000.5}, -32602,
                  "timeoutMs 5000.5")
    check_schema_error(err, "/timeoutMs", "timeoutMs with a fraction")
    # A cursor the server did not give out is -32602, for both lists.
    err = c.error("tools/list", {"cursor": "not-a-cursor-we-gave"}, -32602,
                  "tools/list with a cursor never given out")
    check_schema_error(err, "/cursor", "tools/list bad cursor")
    # Not-found data.
    err = c.error("tools/pause", {"name": "no-such-tool"}, -32011,
                  "pause an unknown tool")
    check(err.get("data") == {"id": "no-such-tool"},
          "-32011 for a tool has {id}", err)
    err = c.error("tools/unpause", {"name": "no-such-tool"}, -32011,
                  "unpause an unknown tool")
    check(err.get("data") == {"id": "no-such-tool"},
          "-32011 for a tool has {id}", err)
    # A line over the maximum size: -32600 {limit}, id null, and the
    # connection goes on.
    big = b'{"jsonrpc":"2.0","id":"big","method":"ping","params":{"x":"' + \
        b"a" * (16 * 1024 * 1024 + 16) + b'"}}\n'
    c.send_raw(big)
    m = c.read_msg(60)
    check(isinstance(m, dict) and m.get("error", {}).get("code") == -32600
          and m.get("id") is None
          and is_int(m["error"].get("data", {}).get("limit")),
          "a line over 16 MiB -> -32600 {limit} id null", str(m)[:300])
    r = c.request("ping", rid="after-big")
    check(r.get("result") == {}, "usable after an oversize line", r)
    # Invalid UTF-8 is a parse error.
    c.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":'
               b'{"x":"\xff"}}\n')
    m = c.read_msg(10)
    check(m and m.get("error", {}).get("code") == -32700 and m["id"] is None,
          "invalid UTF-8 -> -32700", m)
    c.close()

    section("limits: unanswered requests per connection")
    c = d.client()
    hold = submit(c, "noop", {}, delayMs=600000)
    n = 1100
    c.send_raw("".join(json.dumps({
        "jsonrpc": "2.0", "id": "w%d" % i, "method": "jobs/wait",
        "params": {"id": hold.get("id"), "timeoutMs": 600000}}) + "\n"
        for i in range(n)))
    # Past 1024 unanswered, berthd stops reading the connection instead
    # of refusing (docs/API.md): nothing is answered while the job holds.
    m = c.read_msg(2)
    check(m is None, "past 1024 unanswered: nothing refused, reading waits",
          m)
    k = d.client()
    k.call("jobs/cancel", {"id": hold.get("id")})
    k.close()
    got = []
    deadline = time.time() + 60
    while time.time() < deadline and len(got) < n:
        m = c.read_msg(10)
        if m is None:
            break
        got.append(m)
    check(len(got) == n
          and all(x.get("result", {}).get("status") == "cancelled"
                  for x in got),
          "past 1024 unanswered: every wait answered once they drain",
          "%d answers: %s" % (len(got), str(got[-1:])))
    c.close()

    section("TCP and server/auth")
    t = d.tcp_client()
    r = t.request("ping")
    check(r.get("error", {}).get("code") == -32010,
          "TCP: ping before server/auth -> -32010", r)
    r = t.request("jobs/submit", {"tool": "noop", "input": {}})
    check(r.get("error", {}).get("code") == -32010,
          "TCP: submit before server/auth -> -32010", r)
    r = t.request("server/auth", {"token": "wrong"})
    check(r.get("error", {}).get("code") == -32010,
          "TCP: a wrong token -> -32010", r)
    t.send({"jsonrpc": "2.0", "method": "ping"})
    r = t.request("server/auth", {"token": d.token})
    # Before login a line may hold 64 KiB: a longer one is answered
    # -32600 {limit: 65536} and its connection closed (docs/API.md).
    s = d.tcp_client()
    s.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"server/auth","params":'
               b'{"token":"' + b"a" * 70000 + b'"}}\n')
    m = s.read_msg(10)
    check(m and m.get("error", {}).get("code") == -32600
          and m["error"].get("data", {}).get("limit") == 65536
          and m.get("id") is None,
          "TCP: a line over 64 KiB before login -> -32600 {limit: 65536}", m)
    try:
        m = s.read_msg(10)
        check(False, "TCP: ... and the connection is closed", m)
    except (EOFError, OSError):
        pass
    s.close()
    check(r.get("result") == {}, "TCP: server/auth -> {}", r)
    check(not t.held, "TCP: a notification before auth gets no answer",
          t.held)
    r = t.request("server/info")
    check("result" in r, "TCP: after auth, requests are served", r)
    t.close()
    c = d.client()
    r = c.request("server/auth", {"token": d.token})
    check(r.get("result") == {}, "Unix: server/auth with the token -> {}", r)
    c.close()


EVENT_STATUS = {"created": {"pending", "awaiting_approval"},
                "approval_requested": {"awaiting_approval"},
                "approved": {"pending"}, "declined": {"declined"},
                "started": {"running"}, "suspended": {"suspended"},
                "resumed": {"pending"}, "retrying": {"pending"},
                "completed": {"completed"}, "failed": {"failed"},
                "timed_out": {"timed_out"}, "cancelled": {"cancelled"},
                "expired": {"expired"}}


def test_event_log(d):
    section("the event log: every transition")
    c = d.client()
    res = c.call("events/poll", {"since": 0, "limit": 1000}) or {}
    evs = res.get("events", [])
    seq = res.get("next", 0)
    while res.get("events"):
        res = c.call("events/poll", {"since": seq, "limit": 1000}) or {}
        evs += res.get("events", [])
        seq = res.get("next", seq)
    seqs = [e.get("seq") for e in evs]
    check(seqs == list(range(1, len(seqs) + 1)),
          "the whole log: seq 1, 2, 3, ... across restarts", seqs[-5:])
    types = set()
    byjob = {}
    for e in evs:
        check_event(e)
        types.add(e.get("type"))
        check(e.get("status") in EVENT_STATUS.get(e.get("type"), ()),
              "event %s has status %s" % (e.get("type"), e.get("status")), e)
        byjob.setdefault(e.get("jobId"), []).append(e)
        if e.get("type") in ("approved", "declined", "cancelled") and \
                isinstance(e.get("data"), dict):
            check(None not in e["data"].values(),
                  "%s event data: absent values are omitted, not null"
                  % e.get("type"), e)
    check(types >= EVENT_TYPES, "every event type was seen",
          sorted(EVENT_TYPES - types))
    terminal_seen = 0
    for jid, es in byjob.items():
        check(es[0].get("type") == "created", "a job's first event is "
              "created", es[0])
        ends = [i for i, e in enumerate(es) if e.get("status") in TERMINAL]
        if ends:
            terminal_seen += 1
            check(ends == [len(es) - 1], "nothing after a terminal event",
                  [e.get("type") for e in es])
        g = c.call("jobs/get", {"id": jid}) or {}
        check(g.get("status") == es[-1].get("status"),
              "the job's status is its last event's", [g.get("status"),
                                                       es[-1].get("type")])
        for e in es:
            ty = e.get("type")
            if ty == "completed":
                check(e.get("data") == g.get("output"),
                      "completed event carries the output", [e, g])
            if ty in ("failed", "timed_out"):
                check(isinstance(e.get("data"), dict)
                      and "message" in e["data"],
                      ty + " event carries the error", e)
            if ty == "suspended":
                check(e.get("data") is not None,
                      "suspended event carries the payload", e)
            if ty == "created":
                check(e.get("data") == g.get("input"),
                      "created event carries the input", [e, g])
    check(terminal_seen > 10, "many terminal jobs in the log",
          str(terminal_seen))
    info = c.call("server/info") or {}
    total = sum((info.get("jobs") or {}).values())
    check(total == len(byjob), "server/info jobs count every job",
          [total, len(byjob)])
    c.close()


def test_logs_content(d):
    section("jobs/logs content")
    c = d.client()
    j = submit(c, "count-to", {"to": 2, "delayMs": 0})
    w = wait(c, j.get("id"))
    check(w.get("status") == "completed", "count-to completes", w)
    check(w.get("output", {}).get("counted") == 2, "count-to output", w)
    check(w.get("checkpoint") == {"i": 2}, "checkpoint stored", w)
    check(w.get("progress") == {"progress": 2, "total": 2,
                                "message": "counted to 2"},
          "progress stored", w)
    res = c.call("jobs/logs", {"id": j.get("id")}) or {}
    lines = res.get("lines", [])
    done = [x for x in lines if x.get("message") == "done"]
    check(len(done) == 1 and done[0].get("level") == "info"
          and done[0].get("data") == {"from": 0},
          "the tool's structured log line, its data apart", lines)
    c.close()


def test_mcp(d):
    section("MCP")
    c = d.client()
    for ver in ("2025-11-25", "2025-06-18", "2025-03-26"):
        r = c.call("initialize", {"protocolVersion": ver, "capabilities": {},
                                  "clientInfo": {"name": "conf",
                                                 "version": "0"}}) or {}
        check(r.get("protocolVersion") == ver,
              "initialize accepts " + ver, r)
        check(isinstance(r.get("serverInfo"), dict)
              and isinstance(r.get("capabilities"), dict),
              "initialize result has serverInfo and capabilities", r)
    r = c.call("initialize", {"protocolVersion": "1999-01-01",
                              "capabilities": {},
                              "clientInfo": {"name": "conf",
                                             "version": "0"}}) or {}
    check(r.get("protocolVersion") == "2025-11-25",
          "an unknown revision is answered with the latest", r)
    c.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    # A plain tools/call: the result of the job.
    r = c.call("tools/call", {"name": "noop", "arguments": {"q": 1}}) or {}
    check(isinstance(r.get("content"), list) and not r.get("isError"),
          "tools/call noop -> a CallToolResult", r)
    check(r.get("structuredContent") in (None, {"q": 1}),
          "structuredContent is the output", r)
    r = c.call("tools/call", {"name": "fail",
                              "arguments": {"message": "x"}}) or {}
    check(r.get("isError") is True, "tools/call of a failing tool: isError",
          r)
    # Task-augmented calls: the task id is the job id; status mapping.
    def task_of(name, args):
        res = c.call("tools/call", {"name": name, "arguments": args,
                                    "task": {}}) or {}
        t = res.get("task", {})
        check(isinstance(t.get("taskId"), str)
              and isinstance(t.get("status"), str),
              "tools/call with task -> {task: {taskId, status}}", res)
        return t.get("taskId")

    def job_of(tid, until):
        return wait(c, tid, until=until)

    def task_status(tid):
        t = c.call("tasks/get", {"taskId": tid}) or {}
        check(t.get("taskId") == tid, "tasks/get answers the task", t)
        return t.get("status")

    tid = task_of("noop", {"t": 1})
    check(c.call("jobs/get", {"id": tid}) is not None,
          "a task id is a job id")
    job_of(tid, ["completed"])
    check(task_status(tid) == "completed", "completed -> completed")
    r = c.call("tasks/result", {"taskId": tid}) or {}
    check(isinstance(r.get("content"), list), "tasks/result of a completed "
          "task is its CallToolResult", r)
    tid = task_of("fail", {"message": "f"})
    job_of(tid, ["failed"])
    check(task_status(tid) == "failed", "failed -> failed")
    tid = task_of("write-note", {"path": os.path.join(d.tmp, "m.txt"),
                                 "text": "m"})
    job_of(tid, ["awaiting_approval"])
    check(task_status(tid) == "input_required",
          "awaiting_approval -> input_required")
    c.call("jobs/decline", {"id": tid})
    check(task_status(tid) == "failed", "declined -> failed")
    tid = task_of("ask-name", {})
    job_of(tid, ["suspended"])
    check(task_status(tid) == "input_required", "suspended -> input_required")
    r = c.call("tasks/cancel", {"taskId": tid}) or {}
    check(r.get("status") == "cancelled", "tasks/cancel -> cancelled", r)
    g = c.call("jobs/get", {"id": tid}) or {}
    check(g.get("status") == "cancelled", "tasks/cancel cancels the job", g)
    tid = task_of("sleep", {"ms": 5000})
    job_of(tid, ["running"])
    check(task_status(tid) == "working", "running -> working")
    c.call("jobs/cancel", {"id": tid})
    tid = task_of("sleep", {"ms": 5000})
    c.call("tools/pause", {"name": "sleep"})
    c.call("jobs/cancel", {"id": tid})
    c.call("tools/unpause", {"name": "sleep"})
    r = c.call("tasks/list", {}) or {}
    check(isinstance(r.get("tasks"), list) and r["tasks"],
          "tasks/list lists tasks", r)
    c.close()


def test_subscribe_more(d):
    section("events/subscribe: since with jobId, progress off, batches")
    c = d.client()
    j = submit(c, "noop", {"s": 1})
    wait(c, j.get("id"))
    sub = c.call("events/subscribe", {"since": 0, "jobId": j.get("id")}) or {}
    got = []
    while len(got) < 3:
        m = c.next_msg(lambda m: m.get("method") == "events/event", 5)
        if m is None:
            break
        got.append(m["params"])
    check([e.get("type") for e in got] == ["created", "started", "completed"]
          and all(e.get("jobId") == j.get("id") for e in got),
          "since 0 with jobId replays that job's events only",
          [e.get("type") for e in got])
    c.call("events/unsubscribe", {"subscription": sub.get("subscription")})
    # Without progress: true there are no progress notifications.
    sub = c.call("events/subscribe", {}) or {}
    j = submit(c, "sleep", {"ms": 600})
    wait(c, j.get("id"))
    c.next_msg(lambda m: False, 0.3)
    check(not c.notifications("events/progress"),
          "no events/progress without progress: true")
    c.call("events/unsubscribe", {"subscription": sub.get("subscription")})
    c.held = []
    # Another connection's subscription is not found here.
    other = d.client()
    osub = other.call("events/subscribe", {}) or {}
    c.error("events/unsubscribe", {"subscription": osub.get("subscription")},
            -32011, "unsubscribe another connection's subscription")
    other.close()
    # Subscribe inside a batch.
    c.send([{"jsonrpc": "2.0", "id": "bs", "method": "events/subscribe",
             "params": {"since": 0}},
            {"jsonrpc": "2.0", "id": "bp", "method": "ping"}])
    r = c.next_msg(lambda m: isinstance(m, list), 10)
    check(isinstance(r, list) and len(r) == 2
          and {x.get("id") for x in r} == {"bs", "bp"},
          "a batch with a subscribe is answered as one array", r)
    c.close()

    section("jobs/wait across a restart")
    c = d.client()
    j = submit(c, "ask-name", {})
    wait(c, j.get("id"))
    c.send({"jsonrpc": "2.0", "id": "long", "method": "jobs/wait",
            "params": {"id": j.get("id"), "until": ["completed"]}})
    time.sleep(0.2)
    d.restart()
    try:
        m = c.read_msg(5)
        check(m is None or "id" in m, "a wait cut by a restart", m)
    except (EOFError, OSError):
        pass
    c.close()
    c = d.client()
    c.send({"jsonrpc": "2.0", "id": "w2", "method": "jobs/wait",
            "params": {"id": j.get("id"), "until": ["completed"],
                       "timeoutMs": 20000}})
    c2 = d.client()
    c2.call("jobs/resume", {"id": j.get("id"),
                            "resumeData": {"answer": "after"}})
    r = c.reply_to("w2", 25)
    check(r and r.get("result", {}).get("status") == "completed"
          and r["result"].get("output") == {"message": "Hello, after!"},
          "a suspended job waits across a restart and finishes when "
          "resumed", r)
    c2.close()
    c.close()


def cancel_all(c, ids):
    """Cancels ids, pipelined, and waits for every answer."""
    c.send_raw("".join(json.dumps({
        "jsonrpc": "2.0", "id": "cancel-%s" % x, "method": "jobs/cancel",
        "params": {"id": x}}) + "\n" for x in ids))
    for x in ids:
        r = c.reply_to("cancel-%s" % x, 20)
        check(r is not None and "result" in r, "cancel answered", r)


def head_seq(c):
    res = c.call("events/poll", {"since": 0, "limit": 1000}) or {}
    seq = res.get("next", 0)
    while res.get("events"):
        res = c.call("events/poll", {"since": seq, "limit": 1000}) or {}
        seq = res.get("next", seq)
    return seq


def test_wakeups(d):
    section("waits wake on the transition")
    c = d.client()
    other = d.client()
    # jobs/wait wakes on approve+run promptly.
    j = submit(c, "write-note", {"path": os.path.join(d.tmp, "w.txt"),
                                 "text": "w"})
    c.send({"jsonrpc": "2.0", "id": "wk", "method": "jobs/wait",
            "params": {"id": j.get("id"), "until": ["pending"],
                       "timeoutMs": 20000}})
    time.sleep(0.3)
    t = time.time()
    other.call("jobs/approve", {"id": j.get("id")})
    r = c.reply_to("wk", 25)
    check(r and r.get("result", {}).get("status") in ("pending", "running",
                                                      "completed")
          and time.time() - t < 2, "jobs/wait wakes on approve", r)
    wait(c, j.get("id"))
    # events/poll with jobId waits for that job, not for any event.
    p = submit(c, "noop", {}, delayMs=60000)
    seq = head_seq(c)
    c.send({"jsonrpc": "2.0", "id": "pj", "method": "events/poll",
            "params": {"since": seq, "jobId": p.get("id"), "waitMs": 1500}})
    time.sleep(0.2)
    t0 = time.time()
    for i in range(3):
        submit(other, "noop", {"other": i})
    r = c.reply_to("pj", 10)
    el = time.time() - t0
    evs = (r or {}).get("result", {}).get("events")
    check(evs == [] and el > 1.0,
          "events/poll {jobId, waitMs}: other jobs' events do not end the "
          "wait early", [evs, round(el, 2)])
    c.call("jobs/cancel", {"id": p.get("id")})
    other.close()
    c.close()

    section("subscribe: no gap and no duplicate at the switch")
    writer = d.client()
    sub = d.client()
    n = 60
    writer.send_raw("".join(json.dumps({
        "jsonrpc": "2.0", "id": "s%d" % i, "method": "jobs/submit",
        "params": {"tool": "noop", "input": {"i": i}}}) + "\n"
        for i in range(n)))
    time.sleep(0.01)
    r = sub.call("events/subscribe", {"since": 0}) or {}
    got = 0
    for i in range(n):
        m = writer.reply_to("s%d" % i, 20)
        got += m is not None and "result" in m
    check(got == n, "pipelined submits all answered", str(got))
    time.sleep(1.0)
    top = head_seq(writer)
    seqs = []
    while True:
        m = sub.next_msg(lambda m: m.get("method") == "events/event", 3)
        if m is None:
            break
        seqs.append(m["params"].get("seq"))
        if seqs[-1] >= top:
            break
    check(seqs == list(range(1, top + 1)),
          "replay then live: every seq once, in order",
          "%d events, head %d, dups %d, first gaps %s" % (
              len(seqs), top, len(seqs) - len(set(seqs)),
              sorted(set(range(1, top + 1)) - set(seqs))[:5]))
    writer.close()
    sub.close()


def test_counts_and_pages(d):
    section("server/info busy, jobs/list default page, subscription limit")
    c = d.client()
    js = [submit(c, "sleep", {"ms": 1500}) for _ in range(2)]
    for j in js:
        wait(c, j.get("id"), until=["running"])
    info = c.call("server/info") or {}
    check(info.get("workers", {}).get("size") == 4,
          "workers.size is --workers", info.get("workers"))
    check(info.get("workers", {}).get("busy", 0) >= 2,
          "workers.busy counts running jobs", info.get("workers"))
    check(info.get("jobs", {}).get("running", 0) >= 2,
          "jobs.running counts running jobs", info.get("jobs"))
    for j in js:
        c.call("jobs/cancel", {"id": j.get("id")})
    run = "page-run-%d" % os.getpid()
    c.send_raw("".join(json.dumps({
        "jsonrpc": "2.0", "id": "pg%d" % i, "method": "jobs/submit",
        "params": {"tool": "noop", "input": {}, "runId": run,
                   "delayMs": 600000}}) + "\n" for i in range(55)))
    for i in range(55):
        c.reply_to("pg%d" % i, 20)
    page = c.call("jobs/list", {"runId": run}) or {}
    check(len(page.get("jobs", [])) == 50 and page.get("nextCursor"),
          "jobs/list pages 50 by default, with nextCursor",
          len(page.get("jobs", [])))
    rest = c.call("jobs/list", {"runId": run,
                                "cursor": page.get("nextCursor", "")}) or {}
    check(len(rest.get("jobs", [])) == 5 and "nextCursor" not in rest,
          "the second page has the rest", len(rest.get("jobs", [])))
    cancel_all(c, [x["id"] for x in page.get("jobs", []) +
                   rest.get("jobs", [])])
    c.close()
    c = d.client()
    subs = [c.request("events/subscribe", {}) for _ in range(257)]
    check(all("result" in r for r in subs[:256]),
          "256 subscriptions on one connection", subs[255])
    err = subs[256].get("error", {})
    check(err.get("code") == -32013 and err.get("data") == {"limit": 256},
          "the 257th subscription -> -32013 {limit: 256}", subs[256])
    c.close()


def test_daemon(d):
    section("the socket, one daemon per database, kill -9")
    import stat
    st = os.stat(d.sock)
    check(stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600,
          "the socket is created 0600", oct(st.st_mode))
    # A second berthd on the same database refuses to start.
    other_sock = os.path.join(d.tmp, "other.sock")
    p = subprocess.run([BERTHD, "--db", d.db, "--socket", other_sock,
                        "--tools", EXAMPLES, "--quiet"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30, preexec_fn=die_with_this_process())
    check(p.returncode != 0 and p.stderr.strip(),
          "a second berthd on the same database refuses, with a message",
          [p.returncode, p.stderr.decode(errors="replace")[-300:]])
    # A live socket is not taken over.
    other_db = os.path.join(d.tmp, "other.db")
    p = subprocess.run([BERTHD, "--db", other_db, "--socket", d.sock,
                        "--tools", EXAMPLES, "--quiet"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30, preexec_fn=die_with_this_process())
    check(p.returncode != 0 and p.stderr.strip(),
          "a live socket is refused, with a message",
          [p.returncode, p.stderr.decode(errors="replace")[-300:]])
    c = d.client()
    check(c.call("ping") == {}, "the first berthd still answers")
    # The default socket path under XDG_RUNTIME_DIR, in a 0700 directory.
    xdg = os.path.join(d.tmp, "xdg")
    os.mkdir(xdg, 0o700)
    env = dict(os.environ, XDG_RUNTIME_DIR=xdg)
    q = subprocess.Popen([BERTHD, "--db", os.path.join(d.tmp, "x.db"),
                          "--tools", EXAMPLES, "--quiet"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         preexec_fn=die_with_this_process())
    path = os.path.join(xdg, "berth", "berth.sock")
    for _ in range(300):
        if os.path.exists(path):
            break
        time.sleep(0.05)
    check(os.path.exists(path), "default socket $XDG_RUNTIME_DIR/berth/"
          "berth.sock", path)
    if os.path.exists(path):
        check(stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700,
              "its directory is created 0700")
    q.send_signal(signal.SIGTERM)
    q.wait(30)
    # kill -9 while jobs run, wait for approval, are suspended or delayed:
    # the restart (over the stale socket) loses none and finishes them.
    r = submit(c, "count-to", {"to": 15, "delayMs": 100})
    a = submit(c, "write-note", {"path": os.path.join(d.tmp, "k.txt"),
                                 "text": "k"})
    s = submit(c, "ask-name", {})
    dl = submit(c, "noop", {"late": 1}, delayMs=1500)
    wait(c, r.get("id"), until=["running"])
    wait(c, s.get("id"))
    # Kill only once count-to has a durable checkpoint: on a loaded
    # machine its first step can take longer than any fixed sleep.
    deadline = time.time() + 30
    while time.time() < deadline:
        g = c.call("jobs/get", {"id": r.get("id")}) or {}
        if g.get("checkpoint") is not None:
            break
        time.sleep(0.05)
    c.close()
    d.proc.kill()
    d.proc.wait()
    d.proc = None
    d.start()
    c = d.client()
    check(c.call("jobs/approve", {"id": a.get("id")}) is not None,
          "awaiting_approval after kill -9")
    check(c.call("jobs/resume", {"id": s.get("id"),
                                 "resumeData": {"answer": "K"}}) is not None,
          "suspended after kill -9")
    for j, want in ((r, "completed"), (a, "completed"), (s, "completed"),
                    (dl, "completed")):
        w = wait(c, j.get("id"), until=[want], timeout_ms=30000)
        check(w.get("status") == want, "%s finishes after kill -9"
              % j.get("tool"), w)
    w = c.call("jobs/get", {"id": r.get("id")}) or {}
    check(w.get("attempt", 0) >= 2 and
          w.get("output", {}).get("resumedFrom", 0) > 0,
          "the interrupted run is re-queued with attempt raised and "
          "resumes from its checkpoint", w)
    c.close()


def test_races(d):
    section("races: same key, double approve, double resume, durable replies")
    c = d.client()
    c2 = d.client()
    k = "race-key-%d" % os.getpid()
    msgs = "".join(json.dumps({
        "jsonrpc": "2.0", "id": "k%d" % i, "method": "jobs/submit",
        "params": {"tool": "noop", "input": {"i": i}, "idempotencyKey": k}})
        + "\n" for i in range(10))
    c.send_raw(msgs)
    c2.send_raw(msgs)
    ids = set()
    for cl in (c, c2):
        for i in range(10):
            r = cl.reply_to("k%d" % i, 20) or {}
            ids.add(r.get("result", {}).get("id"))
    check(len(ids) == 1 and None not in ids,
          "20 concurrent submits with one key -> one job", sorted(map(str,
                                                                      ids)))
    # approve, approve, decline at once from two connections: one wins.
    mark = os.path.join(d.tmp, "race-note.txt")
    j = submit(c, "write-note", {"path": mark, "text": "once"})
    c.send({"jsonrpc": "2.0", "id": "a1", "method": "jobs/approve",
            "params": {"id": j.get("id")}})
    c2.send({"jsonrpc": "2.0", "id": "a2", "method": "jobs/decline",
             "params": {"id": j.get("id")}})
    c.send({"jsonrpc": "2.0", "id": "a3", "method": "jobs/approve",
            "params": {"id": j.get("id")}})
    rs = [c.reply_to("a1"), c2.reply_to("a2"), c.reply_to("a3")]
    ok = [r for r in rs if r and "result" in r]
    bad = [r for r in rs if r and r.get("error", {}).get("code") == -32012]
    check(len(ok) == 1 and len(bad) == 2,
          "approve/decline/approve at once: one wins, two -32012", rs)
    w = wait(c, j.get("id"))
    evs = (c.call("events/poll", {"jobId": j.get("id")}) or {}).get(
        "events", [])
    check([e.get("type") for e in evs].count("started") <= 1,
          "never a second run", [e.get("type") for e in evs])
    # Two resumes at once: one wins, the tool runs once more.
    s_ = submit(c, "ask-name", {})
    wait(c, s_.get("id"))
    c.send({"jsonrpc": "2.0", "id": "r1", "method": "jobs/resume",
            "params": {"id": s_.get("id"), "resumeData": {"answer": "one"}}})
    c2.send({"jsonrpc": "2.0", "id": "r2", "method": "jobs/resume",
             "params": {"id": s_.get("id"), "resumeData": {"answer": "two"}}})
    rs = [c.reply_to("r1"), c2.reply_to("r2")]
    ok = [r for r in rs if r and "result" in r]
    check(len(ok) == 1 and sum(1 for r in rs if r and r.get("error", {})
                               .get("code") == -32012) == 1,
          "two resumes at once: one wins, one -32012", rs)
    w = wait(c, s_.get("id"), until=["completed"])
    won = ok[0]["result"]["resumeData"]["answer"] if ok else None
    check(w.get("output") == {"message": "Hello, %s!" % won},
          "the winner's data is the one used", [won, w.get("output")])
    evs = (c.call("events/poll", {"jobId": s_.get("id")}) or {}).get(
        "events", [])
    check([e.get("type") for e in evs].count("started") == 2,
          "two runs: before suspend and after one resume",
          [e.get("type") for e in evs])
    c2.close()
    # A reply to a mutation means the change is durable: kill -9 at once.
    run = "durable-%d" % os.getpid()
    c.send_raw("".join(json.dumps({
        "jsonrpc": "2.0", "id": "d%d" % i, "method": "jobs/submit",
        "params": {"tool": "noop", "input": {}, "runId": run,
                   "delayMs": 600000}}) + "\n" for i in range(30)))
    acked = [((c.reply_to("d%d" % i, 20) or {}).get("result") or {})
             .get("id") for i in range(30)]
    d.proc.kill()
    d.proc.wait()
    d.proc = None
    c.close()
    d.start()
    c = d.client()
    res = c.call("jobs/list", {"runId": run, "limit": 100}) or {}
    have = {x["id"] for x in res.get("jobs", [])}
    check(all(a in have for a in acked) and None not in acked,
          "every acknowledged submit survives kill -9",
          "%d acked, %d found" % (len(acked), len(have)))
    cancel_all(c, list(have))
    c.close()


def write_tools(folder):
    """Tools of the test's own, as an outsider writes them (issue 4's
    manifest and line protocol)."""
    os.makedirs(folder, exist_ok=True)
    tools = {
        "conf-stderr": ('printf "to stderr 1\\nto stderr 2\\n" >&2\n'
                        'echo \'{"log":{"level":"warn","message":"hi",'
                        '"k":1}}\'\n'
                        'echo \'{"error":{"message":"bad","retryable":false,'
                        '"data":{"why":42}}}\'\n', {}),
        "conf-ctx": ('touch "$0.ran"\necho \'{"output":{}}\'\n',
                     {"requestContextSchema": {
                         "type": "object", "required": ["user"],
                         "properties": {"user": {"type": "string"}}}}),
        "conf-badout": ('echo \'{"output":{"n":"not a number"}}\'\n',
                        {"outputSchema": {
                            "type": "object", "required": ["n"],
                            "properties": {"n": {"type": "integer"}}}}),
        "conf-silent": ('echo "dying" >&2\nexit 3\n', {}),
    }
    for name, (body, extra) in tools.items():
        script = os.path.join(folder, name + ".sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\ncat >/dev/null\n" + body)
        os.chmod(script, 0o755)
        m = {"id": name, "description": "conformance test tool " + name,
             "inputSchema": {"type": "object"},
             "background": {"maxRetries": 0},
             "command": ["./" + name + ".sh"]}
        m.update(extra)
        with open(os.path.join(folder, name + ".json"), "w") as f:
            json.dump(m, f)


def test_own_tools(d):
    section("external tools of our own")
    c = d.client()
    j = submit(c, "conf-stderr", {})
    w = wait(c, j.get("id"))
    check(w.get("status") == "failed"
          and w.get("error", {}).get("message") == "bad"
          and w.get("error", {}).get("data") == {"why": 42},
          "a tool's error: message and data", w)
    res = c.call("jobs/logs", {"id": j.get("id")}) or {}
    msgs = [x.get("message") for x in res.get("lines", [])]
    check(any("to stderr 1" in (m or "") for m in msgs),
          "jobs/logs has the captured stderr", res)
    warn = [x for x in res.get("lines", []) if x.get("message") == "hi"]
    check(len(warn) == 1 and warn[0].get("level") == "warn"
          and warn[0].get("data") == {"k": 1},
          "jobs/logs has the structured line with its data", res)
    mark = os.path.join(d.tools, "conf-ctx.sh.ran")
    err = c.error("jobs/submit", {"tool": "conf-ctx", "input": {},
                                  "requestContext": {"user": 5}}, -32602,
                  "requestContext failing its schema")
    check_schema_error(err, "/user", "requestContext failing its schema")
    check(not os.path.exists(mark), "... without running the tool")
    j = submit(c, "conf-ctx", {}, requestContext={"user": "u"})
    w = wait(c, j.get("id"))
    check(w.get("status") == "completed", "a valid requestContext runs", w)
    j = submit(c, "conf-badout", {})
    w = wait(c, j.get("id"))
    check(w.get("status") == "failed", "output failing outputSchema fails",
          w)
    j = submit(c, "conf-silent", {})
    w = wait(c, j.get("id"))
    msg = w.get("error", {}).get("message", "")
    check(w.get("status") == "failed" and "3" in msg and "dying" in msg,
          "exit without a final line: an error quoting the exit status and "
          "stderr", w)
    c.close()


def test_order_and_ttl_restart(d):
    section("priority order (docs/API.md), ttl across a restart")
    c = d.client()
    c.call("tools/pause", {"name": "noop"})
    prio = {}
    for p in (1, 10, -5, 0, 3):
        prio[submit(c, "noop", {"p": p}, priority=p).get("id")] = p
    seq = head_seq(c)
    c.call("tools/unpause", {"name": "noop"})
    for jid in prio:
        wait(c, jid)
    evs = (c.call("events/poll", {"since": seq, "limit": 1000}) or {}).get(
        "events", [])
    order = [prio[e["jobId"]] for e in evs
             if e.get("type") == "started" and e.get("jobId") in prio]
    check(order == [10, 3, 1, 0, -5], "higher priority starts first", order)
    e = submit(c, "ask-name", {}, ttlMs=2500)
    wait(c, e.get("id"))
    c.close()
    d.restart()
    c = d.client()
    w = wait(c, e.get("id"), until=["expired"], timeout_ms=15000)
    check(w.get("status") == "expired", "ttl expiry survives a restart", w)
    c.close()


def main():
    if not BERTHD or not os.access(BERTHD, os.X_OK) or not EXAMPLES:
        print("SKIP: set BERTHD and BERTH_EXAMPLES")
        return 77
    tmp = tempfile.mkdtemp(prefix="berth-conf-")
    d = Daemon(tmp)
    ok = False
    try:
        d.start()
        tests = [test_framing, test_server, test_tools, test_submit,
                 test_get, test_list, test_wait, test_lifecycle, test_logs,
                 test_events, test_pause, test_restart, test_more_params,
                 test_logs_content, test_mcp, test_subscribe_more,
                 test_wakeups, test_counts_and_pages, test_daemon,
                 test_races, test_own_tools, test_order_and_ttl_restart,
                 test_event_log]
        only = os.environ.get("CONFORMANCE_ONLY")
        for t in tests:
            if only and t.__name__ not in only.split(","):
                continue
            try:
                t(d)
            except Exception as e:  # a broken test is a failure, go on
                check(False, "%s raised %s: %s" % (t.__name__,
                                                  type(e).__name__, e))
                if d.proc is None or d.proc.poll() is not None:
                    d.start()
        rc = d.stop()
        check(rc == 0, "berthd exits 0 at the end", str(rc))
        ok = not failures
    finally:
        if d.proc:
            d.proc.kill()
        print("%d checks passed, %d failed" % (passes, len(failures)))
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("berthd's log and database: " + tmp)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

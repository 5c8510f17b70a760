#!/usr/bin/env python3
"""worker.py: a worker process for the C side's tests of docs/WORKERS.md,
written against the wire protocol alone (standard library only), so that
berthd is tested without the SDKs.

    worker.py (--socket PATH | --tcp HOST:PORT --token TOKEN)
              [--concurrency N] [--name NAME] [--tools NAME,...]
              [--variant] [--ignore-abort] [--deaf-after-register]
              [--marks DIR] [--no-functions]

It registers the tools below (or the ones --tools names), prints
"registered WORKER-ID" (or "refused JSON" and exits 3) on stdout, and
serves runs until berthd closes the connection (exit 0) or it is killed.
What a run did that berthd cannot show (it started, it was aborted and
why) is left as an empty file in --marks, named WHAT-JOBID.

--variant registers wp-echo with another inputSchema (a conflicting
definition); --ignore-abort answers no abort (its runs go on, and answer
late); --deaf-after-register stops reading and answering once registered
(a worker on a network that vanished); --no-functions registers wp-views
without its functions.
"""
import argparse
import asyncio
import json
import os
import sys

OBJECT = {"type": "object"}


def definitions(args):
    echo_input = {"type": "object", "properties": {
        "text": {"type": "string"},
        "unit": {"type": "string", "default": "C"}}}
    if args.variant:
        echo_input = {"type": "object", "required": ["words"],
                      "properties": {"words": {"type": "string"}}}
    views = {
        "id": "wp-views",
        "description": "transforms with functions, approval by a function",
        "inputSchema": {"type": "object", "properties": {
            "amount": {"type": "number"}, "secret": {"type": "string"}}},
        "outputSchema": {"type": "object"},
        "suspendSchema": {"type": "object"},
        "resumeSchema": {"type": "object", "properties": {
            "answer": {"type": "string"}}, "required": ["answer"]},
        "requireApproval": "function",
        "functions": {
            "toModelOutput": True,
            "onInputAvailable": True,
            "transform": {
                "display": ["input", "output", "approval", "resume",
                            "suspend", "error"],
                "transcript": ["output"]}}}
    if args.no_functions:
        views.pop("functions")
        views["requireApproval"] = True
    defs = [
        {"id": "wp-echo", "description": "echoes its input",
         "inputSchema": echo_input,
         "outputSchema": {"type": "object", "required": ["echo"]},
         "background": {"maxRetries": 2, "backoffMs": 10,
                        "backoffMaxMs": 20}},
        {"id": "wp-ask", "inputSchema": OBJECT,
         "suspendSchema": {"type": "object", "required": ["question"]},
         "resumeSchema": {"type": "object", "required": ["name"],
                          "properties": {"name": {"type": "string",
                                                  "minLength": 1}}}},
        {"id": "wp-block", "inputSchema": OBJECT,
         "background": {"maxRetries": 1, "onInterrupt": "retry"}},
        {"id": "wp-once", "inputSchema": OBJECT,
         "background": {"maxRetries": 3, "onInterrupt": "fail"}},
        views,
    ]
    if args.tools:
        keep = set(args.tools.split(","))
        # Served only when named: a tool with a concurrency limit.
        defs.append({"id": "wp-capped", "inputSchema": OBJECT,
                     "background": {"concurrency": 1}})
        defs = [d for d in defs if d["id"] in keep]
    return defs


def mark(args, *parts):
    if not args.marks:
        return
    path = os.path.join(args.marks, "-".join(parts))
    with open(path + ".tmp", "w"):
        pass
    os.rename(path + ".tmp", path)


class Worker:
    def __init__(self, args, reader, writer):
        self.args = args
        self.reader = reader
        self.writer = writer
        self.next_id = 0
        self.waiting = {}     # our request id -> future
        self.runs = {}        # job id -> (task, abort event)

    def send(self, msg):
        self.writer.write(json.dumps(msg).encode() + b"\n")

    async def request(self, method, params):
        self.next_id += 1
        fut = asyncio.get_running_loop().create_future()
        self.waiting[self.next_id] = fut
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                   "params": params})
        return await fut

    def notify(self, method, params):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def serve(self):
        while True:
            line = await self.reader.readline()
            if not line:
                return
            msg = json.loads(line)
            if "method" not in msg:
                fut = self.waiting.pop(msg.get("id"), None)
                if fut and not fut.done():
                    fut.set_result(msg)
                continue
            self.dispatch(msg)

    def dispatch(self, msg):
        method, params = msg["method"], msg.get("params") or {}
        rid = msg.get("id")
        if method == "ping":
            self.send({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif method == "abort":
            job = params.get("jobId")
            mark(self.args, "abort", job, params.get("reason", ""))
            run = self.runs.get(job)
            if run and not self.args.ignore_abort:
                run[1].set()
        elif method == "run":
            job = params["job"]
            ev = asyncio.Event()
            task = asyncio.ensure_future(self.run(rid, params, ev))
            self.runs[job["id"]] = (task, ev)
        elif method == "input":
            self.answer(rid, self.input(params["job"]))
        elif method == "transform":
            self.answer(rid, self.transform(params))
        else:
            self.send({"jsonrpc": "2.0", "id": rid, "error": {
                "code": -32601, "message": "no method " + method}})

    def answer(self, rid, result):
        self.send({"jsonrpc": "2.0", "id": rid, "result": result})

    # -- functions at the stages berthd sees -------------------------------

    def input(self, job):
        inp = job.get("input") or {}
        mark(self.args, "input", job["id"])
        out = {"logs": [{"level": "info", "message": "onInputAvailable ran",
                         "data": {"keys": sorted(inp)}}]}
        if job["tool"] == "wp-views":
            if inp.get("slowInput"):
                # Longer than berthd waits for an answer.
                import time
                time.sleep(6)
            need = inp.get("amount", 0) > 100
            out["requireApproval"] = need
            views = {"display": {"input": {"amount": inp.get("amount")}}}
            if need:
                views["display"]["approval"] = {
                    "approve": "pay %s" % inp.get("amount")}
            out["views"] = views
        return out

    def transform(self, params):
        stage, payload = params["stage"], params.get("payload")
        mark(self.args, "transform", params["jobId"], stage)
        if stage == "resume":
            return {"views": {"display": {"resume": {
                "answered": bool(payload.get("answer"))}}},
                "logs": [{"message": "made the resume view"}]}
        return {"views": {"display": {stage: {"stage": stage}}}}

    # -- runs ----------------------------------------------------------------

    async def run(self, rid, params, aborted):
        job = params["job"]
        jid = job["id"]
        mark(self.args, "run", jid, str(job["attempt"]))
        if (job.get("input") or {}).get("noResult"):
            # An answer with neither result nor error.
            self.runs.pop(jid, None)
            self.send({"jsonrpc": "2.0", "id": rid})
            return
        if (job.get("input") or {}).get("rpcError"):
            self.runs.pop(jid, None)
            self.send({"jsonrpc": "2.0", "id": rid, "error": {
                "code": -32603, "message": "internal trouble s-rpc"}})
            return
        try:
            outcome = await self.execute(job, params.get("pending") or {},
                                         aborted)
        except Exception as e:  # noqa: BLE001
            outcome = {"error": {"message": "execute raised %r" % e}}
        self.runs.pop(jid, None)
        if outcome is not None:
            self.send({"jsonrpc": "2.0", "id": rid, "result": outcome})

    async def execute(self, job, pending, aborted):
        tool, inp, jid = job["tool"], job.get("input") or {}, job["id"]
        if tool == "wp-echo":
            if "progress" in inp:
                self.notify("worker/progress", {
                    "jobId": jid, "progress": inp["progress"], "total": 10,
                    "message": "step %s" % inp["progress"]})
            if "log" in inp:
                self.notify("worker/log", {"jobId": jid, "level": "warn",
                                           "message": inp["log"],
                                           "data": {"n": 1}})
            if "checkpoint" in inp:
                r = await self.request("worker/checkpoint", {
                    "jobId": jid, "value": inp["checkpoint"]})
                if "error" in r:
                    return {"error": {"message": "checkpoint refused",
                                      "retryable": False}}
            if inp.get("sleep"):
                try:
                    await asyncio.wait_for(aborted.wait(), inp["sleep"])
                    return {"error": {"message": "aborted",
                                      "code": "aborted"}}
                except asyncio.TimeoutError:
                    pass
            if "fail" in inp:
                if job["attempt"] <= inp.get("failTimes", 99):
                    return {"error": {"message": inp["fail"],
                                      "code": "wp_failed",
                                      "data": {"attempt": job["attempt"]},
                                      "retryable": inp.get("retryable",
                                                           True)}}
            if inp.get("badOutput"):
                return {"output": {"no_echo": True}}
            if inp.get("badShape"):
                return {"result": "neither"}
            out = {"echo": inp, "attempt": job["attempt"], "pid": os.getpid(),
                   "checkpoint": job.get("checkpoint"),
                   "requestContext": job.get("requestContext"),
                   "mcp": job.get("mcp")}
            return {"output": out, "modelOutput": {
                "type": "text", "value": "echo of %s" % inp.get("text")}}
        if tool == "wp-ask":
            if "resumeData" not in job:
                return {"suspend": {"question": "name?"}}
            return {"output": {"hello": job["resumeData"]["name"],
                               "asked": job.get("suspendPayload")}}
        if tool in ("wp-block", "wp-once"):
            mark(self.args, "started", jid, str(job["attempt"]))
            steps = inp.get("steps")
            n = (job.get("checkpoint") or {}).get("n", 0)
            while steps is None or n < steps:
                if aborted.is_set():
                    mark(self.args, "aborted", jid)
                    return {"error": {"message": "aborted",
                                      "code": "aborted"}}
                n += 1
                if inp.get("checkpoints"):
                    await self.request("worker/checkpoint",
                                       {"jobId": jid, "value": {"n": n}})
                try:
                    await asyncio.wait_for(aborted.wait(), 0.05)
                except asyncio.TimeoutError:
                    pass
                if self.args.ignore_abort and aborted.is_set():
                    aborted.clear()
            return {"output": {"steps": n, "attempt": job["attempt"]}}
        if tool == "wp-views":
            views = {"display": {}, "transcript": {}}
            for stage in pending.get("views", []):
                views["display"][stage] = {"late": stage}
            if pending.get("onInputAvailable"):
                self.notify("worker/log", {
                    "jobId": jid, "message": "onInputAvailable ran late"})
            if inp.get("sleep"):
                try:
                    await asyncio.wait_for(aborted.wait(), inp["sleep"])
                    return {"error": {"message": "aborted s-abort",
                                      "code": "aborted"}}
                except asyncio.TimeoutError:
                    pass
            if inp.get("suspend") and "resumeData" not in job:
                views["display"]["suspend"] = {"asking": True}
                return {"suspend": {"q": "answer?", "secret": "s-susp"},
                        "views": views}
            if inp.get("fail"):
                views["display"]["error"] = {"message": "it failed"}
                return {"error": {"message": "secret failure s-err",
                                  "retryable": False}, "views": views}
            out = {"amount": inp.get("amount"), "secret": "s-out",
                   "answer": (job.get("resumeData") or {}).get("answer")}
            views["display"]["output"] = {"amount": inp.get("amount")}
            views["transcript"]["output"] = {"said": "done"}
            if inp.get("noViews"):
                views = {"display": {}, "transcript": {}}
            return {"output": out, "views": views,
                    "modelOutput": {"type": "text", "value": "paid"}}
        if tool == "wp-capped":
            await asyncio.sleep(inp.get("sleep", 0))
            return {"output": {"done": True}}
        return {"error": {"message": "unknown tool " + tool,
                          "code": "unknown_tool"}}

async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--socket")
    p.add_argument("--tcp")
    p.add_argument("--token")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--name", default="wp-test")
    p.add_argument("--tools")
    p.add_argument("--variant", action="store_true")
    p.add_argument("--ignore-abort", action="store_true")
    p.add_argument("--deaf-after-register", action="store_true")
    p.add_argument("--no-functions", action="store_true")
    p.add_argument("--marks")
    args = p.parse_args()
    if args.socket:
        reader, writer = await asyncio.open_unix_connection(
            args.socket, limit=1 << 24)
    else:
        host, port = args.tcp.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port),
                                                       limit=1 << 24)
    w = Worker(args, reader, writer)
    serving = asyncio.ensure_future(w.serve())
    if args.token:
        r = await w.request("server/auth", {"token": args.token})
        if "error" in r:
            print("refused " + json.dumps(r["error"]), flush=True)
            sys.exit(3)
    r = await w.request("worker/register", {
        "tools": definitions(args), "concurrency": args.concurrency,
        "name": args.name, "sdk": {"name": "worker.py", "version": "1"}})
    if "error" in r:
        print("refused " + json.dumps(r["error"]), flush=True)
        sys.exit(3)
    print("registered " + r["result"]["worker"] + " " +
          json.dumps(r["result"]), flush=True)
    if args.deaf_after_register:
        serving.cancel()
        await asyncio.sleep(3600)
    await serving


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except (ConnectionError, KeyboardInterrupt):
        pass

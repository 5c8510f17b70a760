"""A worker process for test_worker_berthd.py: the test tools, served with
berth.serve() the way a user's program does it.

    worker_app.py --marks DIR (--socket PATH | --url URL --token T)
                  [--concurrency N] [--variant]

What a tool did that the test cannot see through berthd (it started, it
was aborted and why, it ran at all) is left as an empty file in DIR, named
``WHAT-JOBID[-DETAIL]``.
"""
import argparse
import asyncio
import logging
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "sdk", "python"))

import berth  # noqa: E402
from berth import ToolError  # noqa: E402

MARKS = "."


def mark(*parts: str) -> None:
    path = os.path.join(MARKS, "-".join(parts))
    with open(path + ".tmp", "w"):
        pass
    os.rename(path + ".tmp", path)


OBJECT = {"type": "object"}


@berth.tool(id="py-echo", input_schema=OBJECT)
async def echo(input, ctx):
    if input.get("sleep"):
        await asyncio.sleep(input["sleep"])
    return {"input": input, "pid": os.getpid(), "attempt": ctx.attempt,
            "requestContext": dict(ctx.request_context)}


@berth.tool(id="py-approve", input_schema=OBJECT, require_approval=True)
async def approve(input, ctx):
    mark("executed", ctx.job_id)
    return {"done": True, "approval": dict(ctx.approval or {})}


@berth.tool(id="py-approve-fn", input_schema={
    "type": "object", "properties": {"amount": {"type": "number"}},
    "required": ["amount"]},
    require_approval=lambda input: input["amount"] > 100)
async def approve_fn(input, ctx):
    return {"paid": input["amount"]}


@berth.tool(
    id="py-ask", input_schema=OBJECT,
    output_schema={"type": "object", "properties": {
        "message": {"type": "string"}}, "required": ["message"]},
    suspend_schema={"type": "object", "properties": {
        "question": {"type": "string"}}, "required": ["question"]},
    resume_schema={"type": "object", "properties": {
        "answer": {"type": "string", "minLength": 1}},
        "required": ["answer"], "additionalProperties": False})
async def ask(input, ctx):
    if ctx.resume_data is None:
        if input.get("bad_suspend"):
            ctx.suspend({"no_question": True})
        ctx.suspend({"question": "What is your name?"})
    return {"message": "Hello, %s! (asked: %s)"
            % (ctx.resume_data["answer"], ctx.suspend_payload["question"])}


@berth.tool(id="py-slow", input_schema=OBJECT,
            background={"onInterrupt": "retry", "maxRetries": 3})
async def slow(input, ctx):
    mark("started", ctx.job_id, str(ctx.attempt))
    try:
        await asyncio.sleep(input.get("seconds", 3600))
    except asyncio.CancelledError:
        mark("aborted", ctx.job_id, ctx.abort_reason or "none")
        raise
    return {"slept": input.get("seconds"), "attempt": ctx.attempt,
            "pid": os.getpid()}


@berth.tool(id="py-tidy", input_schema=OBJECT)
async def tidy(input, ctx):
    mark("started", ctx.job_id, str(ctx.attempt))
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        # It cleans up for longer than a second, and returns what it has.
        await asyncio.sleep(1.5)
        return {"partial": True, "reason": ctx.abort_reason}


def sync_slow(input, ctx):
    mark("started", ctx.job_id, str(ctx.attempt))
    if ctx.wait_cancelled(input.get("seconds", 3600)):
        mark("aborted", ctx.job_id, ctx.abort_reason or "none")
        return {"stopped": ctx.abort_reason}
    return {"slept": input.get("seconds")}


@berth.tool(id="py-interrupt-fail", input_schema=OBJECT,
            background={"onInterrupt": "fail"})
async def interrupt_fail(input, ctx):
    mark("started", ctx.job_id, str(ctx.attempt))
    await asyncio.sleep(3600)


@berth.tool(id="py-flaky", input_schema=OBJECT,
            background=berth.Background(max_retries=2, backoff=0.01))
async def flaky(input, ctx):
    if input.get("fatal"):
        raise ToolError("no retry will help", code="fatal",
                        data={"why": "test"}, retryable=False)
    if ctx.attempt == 1:
        raise RuntimeError("first attempt fails")
    return {"attempt": ctx.attempt}


def raising_on_output(output, info):
    raise RuntimeError("on_output is broken")


async def raising_on_input(input, info):
    raise RuntimeError("on_input_available is broken")


@berth.tool(id="py-hooks", input_schema=OBJECT,
            on_output=raising_on_output,
            on_input_available=raising_on_input)
async def hooks(input, ctx):
    return {"fine": True}


@berth.tool(
    id="py-transform",
    input_schema={"type": "object", "properties": {
        "customerId": {"type": "string"},
        "internalPath": {"type": "string"}}},
    to_model_output=lambda o: {"type": "text",
                               "value": "customer %s" % o["displayName"]},
    transform={
        "display": {
            "input": lambda t: {"customerId": t.input.get("customerId")},
            "output": lambda t: {"displayName": t.output["displayName"]},
            "error": lambda t: {"message": "Customer lookup failed"},
        },
        "transcript": {
            "output": lambda t: {"name": t.output["displayName"]},
        }})
async def transform(input, ctx):
    if input.get("fail"):
        raise ToolError("database password is hunter2", retryable=False)
    return {"displayName": "Acme", "apiKey": "secret-value",
            "debugScore": 0.97}


@berth.tool(id="py-count", input_schema={
    "type": "object", "properties": {"to": {"type": "integer"},
                                     "stepSeconds": {"type": "number"}},
    "required": ["to"]},
    background={"onInterrupt": "retry", "maxRetries": 3})
async def count(input, ctx):
    start = (ctx.checkpoint or {}).get("n", 0)
    mark("started", ctx.job_id, str(ctx.attempt), str(start))
    for n in range(start + 1, input["to"] + 1):
        await asyncio.sleep(input.get("stepSeconds", 0.05))
        await ctx.save_checkpoint({"n": n})
        ctx.progress(n, input["to"])
    return {"counted": input["to"], "resumedFrom": start,
            "attempt": ctx.attempt}


@berth.tool(id="py-odd-text", input_schema=OBJECT,
            background=berth.Background(max_retries=1, backoff=0.01))
async def odd_text(input, ctx):
    """Text that berthd refuses, U+0000 and a lone surrogate (a str holds
    one as easily as a tool's subprocess output does), where input says."""
    kind = input["kind"]
    if kind == "output":
        return {"s": ["fine", "nul \x00"]}
    if kind == "output-surrogate":
        return {"s": "lone \ud800"}
    if kind == "suspend":
        ctx.suspend({"q": "nul \x00"})
    ctx.log("log \x00 line \ud800", {"k": "v\x00"})
    ctx.progress(1, 2, "progress \ud800")
    await asyncio.sleep(0.05)
    raise ValueError("boom \ud800 \x00")


def deaf(input, ctx):
    """deaf ignores the abort of its first attempt (a call that nothing
    interrupts), for input["seconds"]; later attempts return at once."""
    if ctx.attempt == 1:
        time.sleep(input["seconds"])
        mark("ended", ctx.job_id, "1")
    return {"attempt": ctx.attempt}


class StrRaises(Exception):
    def __str__(self):
        raise RuntimeError("str() is broken")


class BaseStrRaises(BaseException):
    def __str__(self):
        raise RuntimeError("str() is broken")


@berth.tool(id="py-odd-raise", input_schema=OBJECT,
            background=berth.Background(timeout=3, max_retries=1,
                                        backoff=0.01))
async def odd_raise(input, ctx):
    """Exceptions that are hard to make an error of, as input says."""
    kind = input["kind"]
    if kind == "str":
        raise StrRaises("the real message")
    if kind == "base":
        raise BaseStrRaises("the real message")
    if kind == "data":
        raise ToolError("the real message", code="odd",
                        data={"set": {1, 2}}, retryable=False)
    if kind == "data-retryable":
        raise ToolError("the real message", data=object())
    raise ToolError("lone \ud800 surrogate", code="odd", retryable=False)


TOOLS = [echo, approve, approve_fn, ask, slow, tidy,
         berth.Tool("py-sync-slow", sync_slow, input_schema=OBJECT),
         interrupt_fail, flaky, hooks, transform, count, odd_text,
         berth.Tool("py-deaf", deaf, input_schema=OBJECT,
                    background=berth.Background(timeout=0.5, max_retries=1,
                                                backoff=0.01)),
         odd_raise]


def main() -> None:
    global MARKS
    ap = argparse.ArgumentParser()
    ap.add_argument("--marks", required=True)
    ap.add_argument("--socket")
    ap.add_argument("--url")
    ap.add_argument("--token")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--variant", action="store_true",
                    help="serve py-echo with a different input schema")
    a = ap.parse_args()
    MARKS = a.marks
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="worker %(process)d: %(message)s")
    tools = list(TOOLS)
    if a.variant:
        tools[0] = berth.Tool("py-echo", echo.execute.fn, input_schema={
            "type": "object", "required": ["x"]})
    asyncio.run(berth.serve(tools, socket=a.socket, url=a.url,
                            token=a.token, concurrency=a.concurrency,
                            name="test-worker-%d" % os.getpid()))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""min-worker.py: the least a worker process can do (docs/WORKERS.md), for
berth-bench's worker scenario: it registers bench-noop and answers each run
with its input, in one blocking loop with Python's standard library, every
answer of one read in one write. What it costs is berthd's cost per job
plus a little; the SDKs' workers add theirs.

    BERTH_SOCKET=PATH bench/workers/min-worker.py [CONCURRENCY]
"""
import json
import os
import socket
import sys

TOOL = {"id": "bench-noop", "description": "Returns its input.",
        "inputSchema": {"type": "object"}}


def main() -> None:
    concurrency = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ["BERTH_SOCKET"])
    s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1,
                          "method": "worker/register",
                          "params": {"tools": [TOOL],
                                     "concurrency": concurrency,
                                     "name": "min-worker"}}).encode() + b"\n")
    loads, dumps = json.JSONDecoder().decode, json.JSONEncoder().encode
    rest = b""
    while True:
        data = s.recv(1 << 20)
        if not data:
            return
        *lines, rest = (rest + data).split(b"\n")
        out = []
        for line in lines:
            m = loads(line.decode())
            method = m.get("method")
            if method == "run":
                out.append(dumps({"jsonrpc": "2.0", "id": m["id"], "result": {
                    "output": m["params"]["job"]["input"]}}))
            elif method == "ping":
                out.append(dumps({"jsonrpc": "2.0", "id": m["id"],
                                  "result": {}}))
            elif "error" in m:
                sys.exit("min-worker: %s" % m["error"]["message"])
        if out:
            s.sendall(("\n".join(out) + "\n").encode())


if __name__ == "__main__":
    try:
        main()
    except (KeyboardInterrupt, BrokenPipeError, ConnectionResetError):
        pass

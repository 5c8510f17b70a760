"""berth: the Python SDK of berthd, a durable job server for agent tools.

Serve tools (docs/WORKERS.md)::

    import asyncio, berth

    @berth.tool(id="weather-tool", input_schema={...})
    async def weather(input, ctx):
        return {"location": input["location"], "temperatureCelsius": 21}

    asyncio.run(berth.serve([weather]))

and use berthd as a client (docs/PROTOCOL.md)::

    async with berth.Client() as client:
        job = await client.submit("weather-tool", {"location": "Paris"})
        print((await client.wait(job["id"]))["output"])

Standard library only; Python 3.11 or later.
"""
__version__ = "0.1.0"

from .errors import (BerthError, Conflict, ConnectionClosed, InternalError,
                     InvalidParams, InvalidRequest, MethodNotFound, NotFound,
                     Overloaded, ParseError, RegistrationError,
                     StorageFailure, Unauthorized)
from .types import (TERMINAL, Approval, Event, EventPage, Job, JobError,
                    JobPage, LogLine, LogPage, Progress, ProgressEvent,
                    ServerInfo, Stage, Status, Tool as ToolInfo)
from .client import Client, EventStream, connect
from .context import (CallInfo, Context, JobLogHandler, Suspend,
                      SyncContext, ToolError, TransformContext)
from .tool import STAGES, Background, Tool, Transform, tool
from .worker import Worker, serve

__all__ = [
    "__version__",
    # the client
    "Client", "connect", "EventStream",
    # the worker
    "serve", "Worker", "Tool", "tool", "Background", "Transform", "STAGES",
    "Context", "SyncContext", "CallInfo", "TransformContext", "Suspend",
    "ToolError", "JobLogHandler",
    # errors
    "BerthError", "ParseError", "InvalidRequest", "MethodNotFound",
    "InvalidParams", "InternalError", "Unauthorized", "NotFound", "Conflict",
    "Overloaded", "StorageFailure", "ConnectionClosed", "RegistrationError",
    # the protocol's objects
    "Job", "JobPage", "JobError", "Approval", "Progress", "ToolInfo",
    "Event", "EventPage", "ProgressEvent", "LogLine", "LogPage",
    "ServerInfo", "Status", "Stage", "TERMINAL",
]

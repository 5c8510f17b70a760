"""berth: the Python SDK of berthd, a durable job server for agent tools.

Use berthd as a client (docs/PROTOCOL.md)::

    async with berth.Client() as client:
        job = await client.submit("weather-tool", {"location": "Paris"})
        print((await client.wait(job["id"]))["output"])

Standard library only; Python 3.11 or later.
"""
__version__ = "0.1.0"

from .errors import (BerthError, Conflict, ConnectionClosed, InternalError,
                     InvalidParams, InvalidRequest, MethodNotFound, NotFound,
                     Overloaded, ParseError, StorageFailure, Unauthorized)
from .types import (TERMINAL, Approval, Event, Job, JobError, JobPage,
                    LogLine, LogPage, Progress, ProgressEvent, ServerInfo,
                    Stage, Status, Tool as ToolInfo)
from .client import Client, EventStream, connect

__all__ = [
    "__version__",
    # the client
    "Client", "connect", "EventStream",
    # errors
    "BerthError", "ParseError", "InvalidRequest", "MethodNotFound",
    "InvalidParams", "InternalError", "Unauthorized", "NotFound", "Conflict",
    "Overloaded", "StorageFailure", "ConnectionClosed",
    # the protocol's objects
    "Job", "JobPage", "JobError", "Approval", "Progress", "ToolInfo",
    "Event", "ProgressEvent", "LogLine", "LogPage", "ServerInfo", "Status",
    "Stage", "TERMINAL",
]

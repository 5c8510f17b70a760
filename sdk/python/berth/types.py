"""The protocol's objects, as the dicts berthd sends (PROTOCOL.md, "Objects").

They are TypedDicts: what a method returns is the parsed JSON itself, with
its camelCase keys, so nothing is copied on the way and a field a later
berthd adds is simply there. Absent values are absent keys (use ``.get``).
Times are ISO 8601 UTC strings with milliseconds; ids are UUIDv7 strings.
"""
from __future__ import annotations

from typing import Any, Literal, TypedDict

__all__ = [
    "Status", "TERMINAL", "EventType", "Stage",
    "Approval", "JobError", "Progress", "Job", "JobPage",
    "Tool", "Event", "EventPage", "ProgressEvent", "LogLine", "LogPage",
    "ServerInfo",
]

Status = Literal["pending", "awaiting_approval", "running", "suspended",
                 "completed", "failed", "timed_out", "declined", "cancelled",
                 "expired"]

#: The statuses a job never leaves.
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "timed_out",
                                      "declined", "cancelled", "expired"})

EventType = Literal["created", "approval_requested", "approved", "declined",
                    "started", "suspended", "resumed", "retrying",
                    "completed", "failed", "timed_out", "cancelled",
                    "expired"]

#: The stages of a tool's transforms that berth has (docs/WORKERS.md).
Stage = Literal["input", "output", "error", "approval", "suspend", "resume"]


class Approval(TypedDict, total=False):
    required: bool
    decision: Literal["approved", "declined"] | None
    reason: str
    decidedAt: str


class JobError(TypedDict, total=False):
    message: str
    code: str
    data: Any


class Progress(TypedDict, total=False):
    progress: float
    total: float
    message: str


class Job(TypedDict, total=False):
    id: str
    tool: str
    status: Status
    input: Any
    requestContext: dict[str, Any]
    metadata: dict[str, Any]
    runId: str
    toolCallId: str
    idempotencyKey: str
    priority: int
    runAt: str
    attempt: int
    maxRetries: int
    timeoutMs: int
    expiresAt: str
    output: Any
    modelOutput: Any
    error: JobError
    suspendPayload: Any
    resumeData: Any
    checkpoint: Any
    approval: Approval
    progress: Progress
    retryOf: str
    createdAt: str
    updatedAt: str
    startedAt: str
    finishedAt: str


class JobPage(TypedDict, total=False):
    jobs: list[Job]
    nextCursor: str


class Tool(TypedDict, total=False):
    """An MCP ``Tool``, extended with berth's fields."""
    name: str
    title: str
    description: str
    inputSchema: dict[str, Any]
    outputSchema: dict[str, Any]
    suspendSchema: dict[str, Any]
    resumeSchema: dict[str, Any]
    requestContextSchema: dict[str, Any]
    annotations: dict[str, Any]
    _meta: dict[str, Any]
    execution: dict[str, Any]
    requireApproval: bool | str
    background: dict[str, Any]
    inputExamples: list[dict[str, Any]]
    strict: bool
    providerOptions: dict[str, Any]
    paused: bool
    kind: str
    workers: dict[str, int]


class Event(TypedDict, total=False):
    """One entry of the durable event log; ``seq`` grows by one per event
    and survives restarts of berthd."""
    seq: int
    jobId: str
    tool: str
    type: EventType
    status: Status
    at: str
    data: Any


class EventPage(TypedDict):
    """A page of ``events/poll``. ``next`` is where the next poll starts:
    the seq of the last event returned, else the poll's ``since``; with
    ``types``, the end of what berthd looked through, which may be past
    ``since`` on an empty page. The log has been read to its end when
    ``next`` equals ``since``."""
    events: list[Event]
    next: int


class ProgressEvent(TypedDict, total=False):
    """A live progress report (``events(progress=True)``); not in the log."""
    jobId: str
    progress: float
    total: float
    message: str


class LogLine(TypedDict, total=False):
    n: int
    at: str
    level: Literal["debug", "info", "warn", "error"]
    message: str
    data: Any


class LogPage(TypedDict):
    lines: list[LogLine]
    next: int


class ServerInfo(TypedDict, total=False):
    name: str
    version: str
    protocolVersion: str
    durability: str
    database: str
    uptimeMs: int
    jobs: dict[str, int]
    workers: dict[str, int]

/** A JSON value, as it travels on the wire. */
export type Json = null | boolean | number | string | Json[] | {
    [key: string]: Json;
};
export type JobStatus = 'pending' | 'awaiting_approval' | 'running' | 'suspended' | 'completed' | 'failed' | 'timed_out' | 'declined' | 'cancelled' | 'expired';
/** The statuses a job never leaves. */
export declare const TERMINAL_STATUSES: readonly JobStatus[];
export declare function isTerminal(status: JobStatus | string): boolean;
export interface JobError {
    message: string;
    code?: string;
    data?: unknown;
}
/** Who caused something, and how (docs/API.md, "The audit"). */
export interface Principal {
    /** A principal's name, `berthd`, or `unknown` for what was stored before berth recorded it. */
    name: string;
    /** `socket`, `tcp`, `http`, `mcp`, `worker` or `berthd`; absent when not recorded. */
    via?: string;
}
/** One approval given towards a job's quorum. */
export interface ApprovalEntry {
    by: string;
    via?: string;
    at: string;
    note?: string;
    /** The MCP client's, for an approval that came through berth's MCP server. */
    client?: {
        name?: string;
        version?: string;
        [key: string]: unknown;
    };
}
/** A job's approval (docs/API.md): always there; `required` says whether the tool asked for one. */
export interface Approval {
    required: boolean;
    decision: 'approved' | 'declined' | null;
    /** The approver's note, with an approval. */
    note?: string;
    /** The decline's reason. */
    reason?: string;
    decidedAt?: string;
    /** Once a decision was made: who made it (the approval that met the quorum, or the decline). */
    decidedBy?: Principal;
    /** When the job needs approval: how many approvals it takes. */
    quorum?: number;
    /** When the job needs approval: the approvals given so far. */
    approvals?: ApprovalEntry[];
}
export interface Progress {
    progress: number;
    total?: number;
    message?: string;
}
/** A job (PROTOCOL.md's Job). `I` and `O` type the input and the output. */
export interface Job<I = unknown, O = unknown> {
    id: string;
    tool: string;
    status: JobStatus;
    input?: I;
    requestContext?: Record<string, unknown>;
    metadata?: unknown;
    /** Who submitted the job (`unknown` for a job stored before berth recorded it). */
    submittedBy?: string;
    /** How: `socket`, `tcp`, `http`, `mcp` or `worker`. */
    submittedVia?: string;
    runId?: string;
    toolCallId?: string;
    idempotencyKey?: string;
    priority?: number;
    runAt?: string;
    attempt: number;
    maxRetries?: number;
    timeoutMs?: number;
    expiresAt?: string;
    output?: O;
    modelOutput?: unknown;
    error?: JobError;
    suspendPayload?: unknown;
    resumeData?: unknown;
    checkpoint?: unknown;
    approval?: Approval;
    progress?: Progress;
    retryOf?: string;
    createdAt: string;
    updatedAt: string;
    startedAt?: string;
    finishedAt?: string;
    /** Stages whose view is not computed yet (a worker tool's transform, WORKERS.md). */
    viewsPending?: ViewStage[];
}
export type EventType = 'created' | 'approval_requested' | 'approved' | 'declined' | 'started' | 'suspended' | 'resumed' | 'retrying' | 'completed' | 'failed' | 'timed_out' | 'cancelled' | 'expired';
/** An entry of the durable event log. */
export interface Event {
    seq: number;
    jobId: string;
    tool: string;
    type: EventType;
    status: JobStatus;
    at: string;
    data?: unknown;
    /** Who caused it: a principal's name, or `berthd` for berthd's own transitions. */
    by?: string;
    /** How: `socket`, `tcp`, `http`, `mcp`, `worker` or `berthd`. */
    via?: string;
    /** The MCP client's name and version, for an event an MCP client caused. */
    client?: {
        name?: string;
        version?: string;
        [key: string]: unknown;
    };
}
/** A live progress report of `events({progress: true})`; not in the log. */
export interface ProgressUpdate extends Progress {
    type: 'progress';
    jobId: string;
}
export interface ToolAnnotations {
    title?: string;
    readOnlyHint?: boolean;
    destructiveHint?: boolean;
    idempotentHint?: boolean;
    openWorldHint?: boolean;
    [key: string]: unknown;
}
export interface Background {
    enabled?: boolean;
    timeoutMs?: number;
    maxRetries?: number;
    concurrency?: number;
    backoffMs?: number;
    backoffMaxMs?: number;
    onInterrupt?: 'retry' | 'fail';
}
/**
 * Mastra's older RetryConfig, a tool's `background.retries`: berthd reads
 * it into `maxRetries`, `backoffMs` and `backoffMaxMs` (docs/TOOLS.md); a
 * value given both ways must agree, and `backoffMultiplier` may only be 2.
 */
export interface RetryConfig {
    maxRetries?: number;
    retryDelayMs?: number;
    maxRetryDelayMs?: number;
    backoffMultiplier?: number;
}
/** A tool as `tools/list` shows it: an MCP Tool with berth's fields beside it. */
export interface Tool {
    name: string;
    title?: string;
    description?: string;
    inputSchema?: JsonSchema;
    outputSchema?: JsonSchema;
    suspendSchema?: JsonSchema;
    resumeSchema?: JsonSchema;
    requestContextSchema?: JsonSchema;
    annotations?: ToolAnnotations;
    _meta?: Record<string, unknown>;
    execution?: {
        taskSupport?: 'optional' | 'forbidden' | 'required';
    };
    requireApproval?: boolean | 'function';
    background?: Background;
    inputExamples?: Array<{
        input: Record<string, unknown>;
    }>;
    strict?: boolean;
    providerOptions?: Record<string, Record<string, unknown>>;
    paused?: boolean;
    /** `"worker"` for a tool a worker serves, `"c"` and `"external"` for the daemon's own. */
    kind?: 'c' | 'external' | 'worker';
    workers?: {
        connected: number;
        capacity: number;
    };
}
/** A JSON Schema document (draft 2020-12, or draft-07). */
export type JsonSchema = Record<string, unknown> | boolean;
export interface ServerInfo {
    name: string;
    version: string;
    protocolVersion: string;
    durability: string;
    database: string;
    uptimeMs: number;
    jobs: Partial<Record<JobStatus, number>>;
    workers: {
        size: number;
        busy: number;
    };
    [key: string]: unknown;
}
export interface LogLine {
    n: number;
    at: string;
    level: 'debug' | 'info' | 'warn' | 'error' | string;
    message: string;
    data?: unknown;
}
export interface LogPage {
    lines: LogLine[];
    next: number;
}
export interface JobPage<I = unknown, O = unknown> {
    jobs: Job<I, O>[];
    nextCursor?: string;
}
export interface EventPage {
    events: Event[];
    /**
     * Where the next poll starts: the seq of the last event returned, else
     * the poll's since; with types, the end of what berthd looked through,
     * which may be past since on an empty page. The log has been read to its
     * end when next equals since.
     */
    next: number;
}
/** A stage of a tool payload's life that berth stores a view of (WORKERS.md). */
export type ViewStage = 'input' | 'output' | 'error' | 'approval' | 'suspend' | 'resume';
export declare const VIEW_STAGES: readonly ViewStage[];
export type ViewTarget = 'display' | 'transcript';
/** Views of a payload per target and stage, as a worker hands them to berthd. */
export type Views = Partial<Record<ViewTarget, Partial<Record<ViewStage, unknown>>>>;

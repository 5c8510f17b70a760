import { EventEmitter } from 'node:events';
import type { ReconnectOptions } from './client.js';
import { type ToolLike } from './definition.js';
import { Endpoint, type Address, type Logger } from './rpc.js';
import type { Job, JobError, Views } from './types.js';
export type { Logger };
export interface ServeOptions extends Endpoint {
    /** The tools to serve: createTool() results or plain objects of that shape, as a list or a record. */
    tools: ToolLike[] | Record<string, ToolLike>;
    /** How many jobs berthd may run here at once (1 to 1024). Default 16. */
    concurrency?: number;
    /** A name for berthd's logs and server/info. Default "SCRIPT@HOST:PID". */
    name?: string;
    /** Aborting it closes the worker as close() does. */
    signal?: AbortSignal;
    /** Default: registrations, drops and errors on stderr. */
    logger?: Logger | false;
    /** The reconnect backoff (default 100 ms doubling to 5 s). */
    reconnect?: ReconnectOptions;
    /** How long one connection attempt may take. Default 10 s. */
    connectTimeoutMs?: number;
    /** Given to execute as `context.mastra` (else the tool's own `mastra`, set when a Mastra instance registered it). */
    mastra?: unknown;
    /**
     * berthd's line limit in bytes, 16 MiB (docs/API.md, "Limits"; berthd
     * does not announce it): a run whose answer would be longer fails as
     * `invalid_output` (or `invalid_suspend`), saying so.
     */
    maxSendLineBytes?: number;
}
/** The job a run is about, as berthd pushes it (WORKERS.md, `run`). */
export interface RunJob {
    id: string;
    tool: string;
    attempt: number;
    maxRetries?: number;
    timeoutMs?: number;
    deadline?: string;
    input?: unknown;
    requestContext?: Record<string, unknown>;
    resumeData?: unknown;
    suspendPayload?: unknown;
    checkpoint?: unknown;
    /** When a person approved the job (WORKERS.md): the note is the approver's. */
    approval?: {
        decision?: 'approved';
        note?: string;
        decidedAt?: string;
        [key: string]: unknown;
    };
    toolCallId?: string;
    runId?: string;
    metadata?: unknown;
    /** When the job came through MCP: the tools/call's `_meta` and the client's `clientInfo` (the job's metadata.mcp). */
    mcp?: {
        _meta?: Record<string, unknown>;
        clientInfo?: Record<string, unknown>;
    };
}
/** What a run answers with (WORKERS.md, the result of `run`). */
export type Outcome = {
    output: unknown;
    modelOutput?: unknown;
    views?: Views;
} | {
    suspend: unknown;
    views?: Views;
} | {
    error: {
        message: string;
        code?: string;
        data?: unknown;
        retryable?: boolean;
    };
    views?: Views;
};
/** berth's own part of a tool's execute context: `context.berth`. */
export interface BerthRunContext {
    jobId: string;
    tool: string;
    attempt: number;
    maxRetries?: number;
    /** When berthd times the run out. */
    deadline?: Date;
    approval?: RunJob['approval'];
    metadata?: unknown;
    /** The last checkpoint saved (the workflow state). */
    checkpoint: unknown;
    /** Reports progress (coalesced by berthd, shown by `berth wait` and events). */
    progress(progress: number, total?: number, message?: string): void;
    /** A line of the job's log (`berth logs`). */
    log(level: 'debug' | 'info' | 'warn' | 'error', message: string, data?: unknown): void;
    /** Saves a checkpoint; resolves once it is durable. The next attempt gets it back. */
    saveCheckpoint(value: unknown): Promise<void>;
}
/**
 * ExecuteContext is the second argument of a tool's execute under berth,
 * for tools written as plain objects (a createTool() tool has Mastra's own
 * type, which this matches).
 */
export interface ExecuteContext<Suspend = unknown, Resume = unknown> {
    requestContext: {
        get(key: string): unknown;
        set(key: string, value: unknown): void;
        entries(): IterableIterator<[string, unknown]>;
    };
    abortSignal: AbortSignal;
    agent: {
        agentId: string;
        toolCallId: string;
        messages: unknown[];
        suspend(payload: Suspend): Promise<void>;
        resumeData?: Resume;
        suspendPayload?: Suspend;
    };
    workflow: {
        workflowId: string;
        runId: string;
        state: unknown;
        setState(state: unknown): Promise<void>;
        suspend(payload: Suspend): Promise<void>;
        resumeData?: Resume;
        suspendPayload?: Suspend;
    };
    suspend(payload: Suspend): Promise<void>;
    resumeData?: Resume;
    suspendPayload?: Suspend;
    observe: {
        span<T>(name: string, fn: () => Promise<T> | T, attributes?: Record<string, unknown>): Promise<T>;
        log(level: 'debug' | 'info' | 'warn' | 'error' | 'fatal', message: string, data?: Record<string, unknown>): void;
    };
    mcp?: {
        extra: {
            signal: AbortSignal;
            requestId: string;
            _meta?: Record<string, unknown>;
            client?: Record<string, unknown>;
        };
        log(level: string, message: string, data?: unknown): Promise<void>;
        progress(p: {
            progress: number;
            total?: number;
            message?: string;
        }): Promise<void>;
    };
    berth: BerthRunContext;
}
/**
 * serve registers `tools` with berthd and runs their jobs until the worker
 * is closed. It resolves with the Worker once berthd has accepted the
 * tools, waiting (with backoff) while berthd cannot be reached; it rejects
 * when berthd refuses them (a definition that does not check, a conflict
 * with another worker's definition, a wrong token), with berthd's error.
 */
export declare function serve(options: ServeOptions): Promise<Worker>;
/**
 * Worker is a running serve(). Events: `registered` (the register result),
 * `disconnected` (the BerthError), `active` (job), `completed` (job,
 * output), `suspended` (job, payload), `failed` (job, error), `error`
 * (emitted only while someone listens; otherwise the logger has it), and
 * `closed`.
 */
export declare class Worker extends EventEmitter {
    readonly name: string;
    readonly concurrency: number;
    readonly address: Address;
    /** berthd's id of this worker's current registration. */
    id: string | undefined;
    private readonly options;
    private readonly logger;
    private readonly served;
    private readonly toolList;
    private RequestContextCtor;
    private conn;
    private readonly runs;
    private readonly displaced;
    private closing;
    private readonly stopping;
    private deadline;
    private started;
    private finished;
    private readonly done;
    private resolveDone;
    private readonly onSignal;
    constructor(options: ServeOptions);
    /** The ids of the tools served. */
    get tools(): string[];
    /** The number of jobs running here now. */
    get running(): number;
    /** True while registered with berthd. */
    get registered(): boolean;
    private loop;
    private register;
    private heartbeat;
    private allRuns;
    private abortRuns;
    private abortRun;
    /**
     * close stops taking jobs (worker/drain, whose answer is waited for 5 s
     * at most), waits for the running ones to answer, and closes the
     * connection, like BullMQ's Worker.close(). `timeoutMs` bounds that wait:
     * then the runs still going are aborted (reason `closing`), and each has
     * the abort grace, 5 s, to return: what it returns is answered, while a
     * run that stops by the abort itself (it throws the abortSignal's reason,
     * or an AbortError), or does not stop in time, is left unanswered to
     * berthd, which ends or re-queues its job by its tool's onInterrupt once
     * the connection closes. `force` is `timeoutMs: 0`. A run berthd aborts
     * meanwhile is waited for the abort grace at most. Once close() has
     * begun, the worker never connects or registers again: a connection
     * attempt is abandoned, a registration under way is waited for (5 s at
     * most) and drained, and when the connection drops, its runs are aborted
     * and left to berthd, and close() waits for their executes the abort
     * grace at most. A second call joins the first: its `force` and
     * `timeoutMs` apply to the close under way. A tool's execute may call it
     * to make its worker leave, without awaiting it: the close waits for that
     * run as for any other. It resolves once the worker has closed
     * (`closed`), and rejects only a timeoutMs that is not a number of
     * milliseconds.
     */
    close(opts?: {
        force?: boolean;
        timeoutMs?: number;
    }): Promise<void>;
    private drain;
    private runsOf;
    private quiet;
    private settle;
    private closeWait;
    private graceEnd;
    private wakers;
    private poke;
    private first;
    private finish;
    [Symbol.asyncDispose](): Promise<void>;
    private readonly lineLogger;
    private onRequest;
    private onNotification;
    private servedTool;
    private run;
    private execute;
    private context;
    private input;
    private transform;
    private addViews;
    private jobLog;
    private answerLog;
    private log;
    private report;
}
export type { Job, JobError };

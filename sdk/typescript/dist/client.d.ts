import { Address, Connection, Endpoint, type Logger } from './rpc.js';
import type { Event, EventPage, EventType, Job, JobPage, JobStatus, LogPage, ProgressUpdate, ServerInfo, Tool } from './types.js';
export interface ReconnectOptions {
    /** The first wait before connecting again. Default 100 ms. */
    initialDelayMs?: number;
    /** The longest wait between attempts. Default 5000 ms. */
    maxDelayMs?: number;
}
export interface ConnectOptions extends Endpoint {
    /** Connect again after the connection drops (default true); false makes every drop an error. */
    reconnect?: boolean | ReconnectOptions;
    /** Aborts the first connection attempt. */
    signal?: AbortSignal;
    /** How long one connection attempt may take. Default 10 s. */
    connectTimeoutMs?: number;
    /** The largest line accepted from berthd. Default 256 MiB (berthd's answers may be longer than the lines it reads). */
    maxLineBytes?: number;
    /**
     * The longest line sent to berthd, in bytes: berthd's line limit, 16 MiB
     * (docs/API.md, "Limits"), which berthd does not announce. A request over
     * it rejects at once with InvalidRequest, naming its size and the limit.
     */
    maxSendLineBytes?: number;
    /**
     * Where the client reports what no call can be told of: an error berthd
     * answers with id null (a line of the connection it could not read).
     * Default: stderr; `false` drops them.
     */
    logger?: Logger | false;
}
export interface CallOptions {
    signal?: AbortSignal;
}
export interface SubmitOptions extends CallOptions {
    requestContext?: Record<string, unknown>;
    metadata?: unknown;
    runId?: string;
    toolCallId?: string;
    /** The same key again returns the first job; it also makes the submit safe to send again after a reconnect. */
    idempotencyKey?: string;
    priority?: number;
    runAt?: string | Date;
    delayMs?: number;
    timeoutMs?: number;
    maxRetries?: number;
    ttlMs?: number;
}
export interface ListParams extends CallOptions {
    status?: JobStatus | JobStatus[];
    tool?: string;
    runId?: string;
    /** Jobs per page, 1 to 1000 (berthd's default 50). */
    limit?: number;
    cursor?: string;
}
export interface WaitOptions extends CallOptions {
    /**
     * Give up after this long and return the job as it is then. It bounds
     * the call: when berthd cannot be reached at that time, the wait rejects
     * with ConnectionClosed, naming the last attempt's error; when berthd
     * took the request and does not answer, with RequestTimeout a second
     * later. Default: wait until the status is reached.
     */
    timeoutMs?: number;
    /** Statuses to wait for. Default: any but pending and running. A terminal job returns at once. */
    until?: JobStatus[];
}
export interface PollOptions extends CallOptions {
    /** Events with seq > since. Default 0: from the start of the log. */
    since?: number;
    /** Events in the page, 1 to 1000 (berthd's default 100); with `types`, events of those types. */
    limit?: number;
    /** Wait up to this long for an event (of those types) newer than since. Default: answer at once. */
    waitMs?: number;
    jobId?: string;
    /**
     * Only events of these types: berthd reads them by type, so that `limit`
     * counts them alone, and the page's `next` passes over the others. A page
     * may then be empty while the log goes on (berthd looks through at most
     * 10,000 seqs a poll, docs/API.md): poll on from `next` until `next`
     * equals `since`. One type or a non-empty list; berthd refuses anything
     * else (InvalidParams naming `/types`). Default: every type.
     */
    types?: EventType | readonly EventType[];
}
export interface EventsOptions {
    /** Replay events with seq > since first. Default: only events from now on. */
    since?: number;
    jobId?: string;
    /**
     * Only events of these types, replayed and live (the others pass by
     * unsent): `['completed', 'failed', 'timed_out', 'declined', 'cancelled',
     * 'expired']` to wait for jobs to end. One type or a non-empty list;
     * berthd refuses anything else (InvalidParams naming `/types`). Default:
     * every type. Progress is not an event type: `progress` alone says
     * whether ProgressUpdates come.
     */
    types?: EventType | readonly EventType[];
    /** Also yield live ProgressUpdates (not in the log). */
    progress?: boolean;
    /** Ends the stream: the iteration rejects with the signal's reason. */
    signal?: AbortSignal;
}
/** A page of jobs that is also every job of every page, for `for await`. */
export interface JobList<I = unknown, O = unknown> extends PromiseLike<JobPage<I, O>>, AsyncIterable<Job<I, O>> {
    /** Each page in turn, following nextCursor. */
    pages(): AsyncIterableIterator<JobPage<I, O>>;
}
/**
 * connect opens a client connection to berthd. With no options it finds
 * the socket as the `berth` command does ($BERTH_SOCKET, else
 * $XDG_RUNTIME_DIR/berth/berth.sock, else ./berth.sock); `url:
 * 'tcp://HOST:PORT'` with `token` reaches a --listen address. Rejects with
 * a BerthError when berthd cannot be reached or refuses the token.
 */
export declare function connect(options?: ConnectOptions): Promise<Client>;
/**
 * Client is a connection to berthd that reconnects when it must. Each
 * method is one request (list, tools and events may make several); every
 * one takes an AbortSignal.
 */
export declare class Client {
    readonly address: Address;
    private readonly options;
    private readonly reconnect;
    private conn;
    private connecting;
    private closedReason;
    private lost;
    private everConnected;
    private lastDialError;
    private readonly subscribers;
    private early;
    private earlyCount;
    private ignored;
    private readonly dropWatchers;
    private readonly closing;
    private readonly logger;
    constructor(options?: ConnectOptions);
    /** True once close() was called. */
    get closed(): boolean;
    /**
     * connection resolves with a live connection, making one when there is
     * none: the first one is tried once; after a drop, with the reconnect
     * policy's backoff until it succeeds, the signal aborts or the client
     * closes (berthd's refusal of the token ends the attempts early).
     */
    connection(signal?: AbortSignal): Promise<Connection>;
    private dialLoop;
    private onDrop;
    private onNotification;
    /**
     * request calls any method of berthd. With `retry: true` it is sent again
     * after a reconnect (only for requests that are safe to repeat).
     */
    request<T = unknown>(method: string, params?: unknown, opts?: CallOptions & {
        retry?: boolean;
    }): Promise<T>;
    /** close ends the connection, or the attempt to make one; calls in flight (those waiting for the attempt too) and event streams reject with ConnectionClosed. */
    close(): void;
    [Symbol.asyncDispose](): Promise<void>;
    /** server/info: the daemon's name, version, durability and job counts. */
    info(opts?: CallOptions): Promise<ServerInfo>;
    ping(opts?: CallOptions): Promise<void>;
    /** tools/list, every page: the tools berthd serves (C, manifest and worker tools). */
    tools(opts?: CallOptions): Promise<Tool[]>;
    /**
     * submit creates a job of `tool` with `input`. Resolves with the job as
     * submitted (pending or awaiting_approval); input that fails the tool's
     * schema rejects with a -32602 BerthError whose `errors` say where.
     */
    submit<I = unknown, O = unknown>(tool: string, input: I, opts?: SubmitOptions): Promise<Job<I, O>>;
    /** jobs/get: the job, or one of its views (`display`, `transcript`). -32011 when there is none. */
    get<I = unknown, O = unknown>(id: string, opts?: CallOptions & {
        view?: 'raw' | 'display' | 'transcript';
    }): Promise<Job<I, O>>;
    /**
     * list is one page of jobs when awaited, and every job of every page
     * when iterated with `for await`; `.pages()` iterates the pages. Several
     * statuses are asked for one at a time and their pages follow each other
     * (so they can only be iterated). An empty list of statuses throws a
     * RangeError: it would ask for nothing, where no status asks for all.
     */
    list<I = unknown, O = unknown>(params?: ListParams): JobList<I, O>;
    /**
     * wait resolves with the job once its status is in `until` (default: any
     * status but pending and running), once it is terminal, or when
     * `timeoutMs` has passed (the job as it is then, or a rejection when
     * berthd cannot give it: WaitOptions.timeoutMs). A wait survives
     * reconnects; the signal ends it with its reason.
     */
    wait<I = unknown, O = unknown>(id: string, opts?: WaitOptions): Promise<Job<I, O>>;
    private waitBound;
    /** jobs/resume: a suspended job runs again with resumeData (checked against its resumeSchema). */
    resume<I = unknown, O = unknown>(id: string, resumeData: unknown, opts?: CallOptions): Promise<Job<I, O>>;
    approve<I = unknown, O = unknown>(id: string, opts?: CallOptions & {
        note?: string;
    }): Promise<Job<I, O>>;
    decline<I = unknown, O = unknown>(id: string, opts?: CallOptions & {
        reason?: string;
    }): Promise<Job<I, O>>;
    cancel<I = unknown, O = unknown>(id: string, opts?: CallOptions & {
        reason?: string;
    }): Promise<Job<I, O>>;
    /** jobs/retry: a new job with the same tool and input, for a failed, timed_out or expired one. */
    retry<I = unknown, O = unknown>(id: string, opts?: CallOptions): Promise<Job<I, O>>;
    /** jobs/logs: the job's log lines after line `after`, oldest first. */
    logs(id: string, opts?: CallOptions & {
        after?: number;
        limit?: number;
    }): Promise<LogPage>;
    pause(tool: string, opts?: CallOptions): Promise<void>;
    unpause(tool: string, opts?: CallOptions): Promise<void>;
    /**
     * events/poll: one page of the event log after `since`, waiting up to
     * waitMs for one. Go on from the page's `next`: `poll({since: 0, types:
     * ['failed', 'timed_out']})`, then `poll({since: page.next, types})`,
     * to the end of the log, where `next` equals `since`.
     */
    poll(opts?: PollOptions): Promise<EventPage>;
    /**
     * events streams the event log: `for await (const e of client.events({since}))`.
     * It subscribes at once, replays from `since`, then goes live, and across
     * a reconnect goes on from the last event it received. Without `since` it
     * starts with the next event; the end of the log is then looked up
     * (events/poll) for a reconnect that comes before the first event. Give
     * `since` (0 for the whole log) where no event may ever be missed.
     * `types` narrows it to some event types: `events({since, types:
     * ['completed', 'failed']})`.
     */
    events(opts: EventsOptions & {
        progress: true;
    }): AsyncIterableIterator<Event | ProgressUpdate>;
    events(opts?: EventsOptions): AsyncIterableIterator<Event>;
    /** headSeq finds the seq of the newest event with a bisection over events/poll. */
    headSeq(signal?: AbortSignal): Promise<number>;
    toString(): string;
}

// client.ts: connect() and Client, berthd's protocol (docs/PROTOCOL.md) as
// typed methods, with a reconnect policy for long-lived use:
//
// - The connection is made again, with backoff, when something needs it
//   after it dropped: an idle client holds no timer.
// - Reads (get, list, wait, logs, tools, info, events) that were in flight
//   when it dropped are sent again on the new connection, so they never see
//   the drop. A mutation that was in flight rejects with
//   ErrorCode.ConnectionClosed, since it may or may not have been committed;
//   a submit with an idempotencyKey is the exception (berthd answers a
//   repeated key with the first job), so it is sent again too.
// - An events() stream subscribes again from the last seq it delivered, so
//   it neither loses nor repeats an event across a reconnect.

import { BerthError, ErrorCode, closedError } from './errors.js';
import {
  Address,
  Connection,
  Endpoint,
  type Logger,
  backoffDelay,
  describeAddress,
  dial,
  resolveAddress,
  sleep,
} from './rpc.js';
import type {
  Event,
  EventPage,
  EventType,
  Job,
  JobPage,
  JobStatus,
  LogPage,
  ProgressUpdate,
  ServerInfo,
  Tool,
} from './types.js';
import { isTerminal } from './types.js';

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

// A server-side wait is asked for at most this long at a time, and asked
// again until the caller's own timeout: an aborted or disconnected wait
// then leaves berthd holding a waiter for no longer than this.
const WAIT_CHUNK_MS = 30000;

// How long past a wait's timeoutMs berthd's answer is waited for, on a
// connection that is up, before the wait gives up with RequestTimeout.
const WAIT_ANSWER_GRACE_MS = 1000;

// events() stops its subscription while this many items wait unread, and
// subscribes again from the last queued seq once the reader has caught up;
// the log is durable, so nothing is lost and memory stays bounded.
const EVENT_QUEUE_HIGH = 10000;

/**
 * connect opens a client connection to berthd. With no options it finds
 * the socket as the `berth` command does ($BERTH_SOCKET, else
 * $XDG_RUNTIME_DIR/berth/berth.sock, else ./berth.sock); `url:
 * 'tcp://HOST:PORT'` with `token` reaches a --listen address. Rejects with
 * a BerthError when berthd cannot be reached or refuses the token.
 */
export async function connect(options: ConnectOptions = {}): Promise<Client> {
  const client = new Client(options);
  await client.connection(options.signal);
  return client;
}

type Subscriber = (method: string, params: Record<string, unknown>) => void;

/**
 * Client is a connection to berthd that reconnects when it must. Each
 * method is one request (list, tools and events may make several); every
 * one takes an AbortSignal.
 */
export class Client {
  readonly address: Address;
  private readonly options: ConnectOptions;
  private readonly reconnect: Required<ReconnectOptions> | null;
  private conn: Connection | null = null;
  private connecting: Promise<Connection> | null = null;
  private closedReason: BerthError | null = null;
  // Without a reconnect policy, the drop of the one connection ends the client.
  private lost: BerthError | null = null;
  private everConnected = false;
  // The error of the last attempt to connect that failed, for a wait that
  // gives up while berthd cannot be reached to name why.
  private lastDialError: Error | null = null;
  private readonly subscribers = new Map<string, Subscriber>();
  // Notifications for a subscription id nobody claimed yet, and the ids
  // given up on; both belong to the current connection.
  private early = new Map<string, Array<[string, Record<string, unknown>]>>();
  private earlyCount = 0;
  private ignored = new Set<string>();
  private readonly dropWatchers = new Set<() => void>();
  private readonly closing = new AbortController();
  private readonly logger: Logger | null;

  constructor(options: ConnectOptions = {}) {
    this.options = options;
    this.address = resolveAddress(options);
    this.logger = options.logger === false ? null : options.logger ?? defaultLogger(describeAddress(this.address));
    const r = options.reconnect ?? true;
    this.reconnect = r === false ? null : {
      initialDelayMs: (r === true ? undefined : r.initialDelayMs) ?? 100,
      maxDelayMs: (r === true ? undefined : r.maxDelayMs) ?? 5000,
    };
  }

  /** True once close() was called. */
  get closed(): boolean {
    return this.closedReason !== null;
  }

  /**
   * connection resolves with a live connection, making one when there is
   * none: the first one is tried once; after a drop, with the reconnect
   * policy's backoff until it succeeds, the signal aborts or the client
   * closes (berthd's refusal of the token ends the attempts early).
   */
  async connection(signal?: AbortSignal): Promise<Connection> {
    for (;;) {
      if (this.closedReason) throw this.closedReason;
      if (this.conn && !this.conn.closed) return this.conn;
      if (!this.reconnect && this.lost) throw this.lost;
      if (!this.connecting) {
        const p = this.dialLoop();
        this.connecting = p;
        p.then(
          () => { if (this.connecting === p) this.connecting = null; },
          () => { if (this.connecting === p) this.connecting = null; },
        );
      }
      const p = this.connecting;
      if (!signal) return await p;
      await new Promise<Connection>((resolve, reject) => {
        if (signal.aborted) return reject(signal.reason);
        const onAbort = () => reject(signal.reason);
        signal.addEventListener('abort', onAbort, { once: true });
        p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
      });
    }
  }

  private async dialLoop(): Promise<Connection> {
    for (let attempt = 0; ; attempt++) {
      if (this.closedReason) throw this.closedReason;
      let made: Connection | null = null;
      try {
        const conn = await dial(this.address, {
          token: this.options.token,
          timeoutMs: this.options.connectTimeoutMs,
          maxLineBytes: this.options.maxLineBytes,
          maxSendLineBytes: this.options.maxSendLineBytes,
          logger: this.logger,
          onNotification: (method, params) => this.onNotification(method, params),
          onClose: (why) => { if (made) this.onDrop(made, why); },
          // close() ends an attempt under way, and so the calls that wait
          // for it, rather than leave them to the attempt's timeout.
          signal: this.closing.signal,
        });
        made = conn;
        if (this.closedReason) {
          conn.close();
          throw this.closedReason;
        }
        this.conn = conn;
        this.everConnected = true;
        this.lastDialError = null;
        return conn;
      } catch (e) {
        if (e instanceof Error) this.lastDialError = e;
        // Given up by close() (the signal's reason, or the check above):
        // the calls get the client's own error.
        if (this.closedReason) throw this.closedReason;
        // The first connection is tried once, so that connect() says at
        // once that berthd cannot be reached; the policy is for reconnects.
        const be = e instanceof BerthError ? e : null;
        const retry = this.reconnect && this.everConnected && !this.closedReason && be !== null && be.code !== ErrorCode.Unauthorized;
        if (!retry) throw e;
        await sleep(backoffDelay(attempt, this.reconnect!.initialDelayMs, this.reconnect!.maxDelayMs), this.closing.signal)
          .catch(() => {});
      }
    }
  }

  private onDrop(conn: Connection, why: BerthError): void {
    if (this.conn !== conn) return;
    this.conn = null;
    if (!this.reconnect) this.lost = closedError(`${why.message}; the client does not reconnect (reconnect: false)`, why);
    this.early.clear();
    this.earlyCount = 0;
    this.ignored.clear();
    for (const w of [...this.dropWatchers]) w();
  }

  private onNotification(method: string, params: unknown): void {
    if (typeof params !== 'object' || params === null) return;
    const p = params as Record<string, unknown>;
    const sub = typeof p.subscription === 'string' || typeof p.subscription === 'number' ? String(p.subscription) : null;
    if (sub === null || this.ignored.has(sub)) return;
    const fn = this.subscribers.get(sub);
    if (fn) {
      fn(method, p);
      return;
    }
    if (this.earlyCount >= EVENT_QUEUE_HIGH) return;
    const list = this.early.get(sub) ?? [];
    list.push([method, p]);
    this.early.set(sub, list);
    this.earlyCount++;
  }

  /**
   * request calls any method of berthd. With `retry: true` it is sent again
   * after a reconnect (only for requests that are safe to repeat).
   */
  async request<T = unknown>(method: string, params?: unknown, opts: CallOptions & { retry?: boolean } = {}): Promise<T> {
    for (;;) {
      const conn = await this.connection(opts.signal);
      try {
        return await conn.request<T>(method, params, opts.signal);
      } catch (e) {
        if (opts.retry && this.reconnect && !this.closedReason &&
            e instanceof BerthError && e.code === ErrorCode.ConnectionClosed && !opts.signal?.aborted) {
          continue;
        }
        throw e;
      }
    }
  }

  /** close ends the connection, or the attempt to make one; calls in flight (those waiting for the attempt too) and event streams reject with ConnectionClosed. */
  close(): void {
    if (this.closedReason) return;
    this.closedReason = closedError('berth: the client was closed');
    this.closing.abort();
    const conn = this.conn;
    this.conn = null;
    conn?.close('berth: the client was closed');
    for (const w of [...this.dropWatchers]) w();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.close();
  }

  /** server/info: the daemon's name, version, durability and job counts. */
  info(opts: CallOptions = {}): Promise<ServerInfo> {
    return this.request('server/info', undefined, { ...opts, retry: true });
  }

  ping(opts: CallOptions = {}): Promise<void> {
    return this.request<unknown>('ping', undefined, { ...opts, retry: true }).then(() => undefined);
  }

  /** tools/list, every page: the tools berthd serves (C, manifest and worker tools). */
  async tools(opts: CallOptions = {}): Promise<Tool[]> {
    const out: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.request<{ tools: Tool[]; nextCursor?: string }>(
        'tools/list', cursor === undefined ? {} : { cursor }, { ...opts, retry: true });
      out.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    return out;
  }

  /**
   * submit creates a job of `tool` with `input`. Resolves with the job as
   * submitted (pending or awaiting_approval); input that fails the tool's
   * schema rejects with a -32602 BerthError whose `errors` say where.
   */
  submit<I = unknown, O = unknown>(tool: string, input: I, opts: SubmitOptions = {}): Promise<Job<I, O>> {
    const { signal, runAt, ...rest } = opts;
    const params: Record<string, unknown> = { tool, input, ...dropUndefined(rest) };
    if (runAt !== undefined) params.runAt = runAt instanceof Date ? runAt.toISOString() : runAt;
    return this.request('jobs/submit', params, { signal, retry: opts.idempotencyKey !== undefined });
  }

  /** jobs/get: the job, or one of its views (`display`, `transcript`). -32011 when there is none. */
  get<I = unknown, O = unknown>(id: string, opts: CallOptions & { view?: 'raw' | 'display' | 'transcript' } = {}): Promise<Job<I, O>> {
    const params: Record<string, unknown> = { id };
    if (opts.view) params.view = opts.view;
    return this.request('jobs/get', params, { signal: opts.signal, retry: true });
  }

  /**
   * list is one page of jobs when awaited, and every job of every page
   * when iterated with `for await`; `.pages()` iterates the pages. Several
   * statuses are asked for one at a time and their pages follow each other
   * (so they can only be iterated). An empty list of statuses throws a
   * RangeError: it would ask for nothing, where no status asks for all.
   */
  list<I = unknown, O = unknown>(params: ListParams = {}): JobList<I, O> {
    const { signal, status, ...rest } = params;
    if (Array.isArray(status) && status.length === 0) {
      throw new RangeError('berth: list()\'s status is an empty list: give a status, a list of them, or none for every status');
    }
    const statuses: (JobStatus | undefined)[] = Array.isArray(status) ? status : [status];
    const page = (st: JobStatus | undefined, cursor: string | undefined) => {
      const p: Record<string, unknown> = dropUndefined({ ...rest, status: st });
      if (cursor !== undefined) p.cursor = cursor;
      return this.request<JobPage<I, O>>('jobs/list', p, { signal, retry: true });
    };
    const pages = async function* (): AsyncGenerator<JobPage<I, O>> {
      for (const st of statuses) {
        let cursor = rest.cursor;
        for (;;) {
          const pg = await page(st, cursor);
          yield pg;
          if (!pg.nextCursor) break;
          cursor = pg.nextCursor;
        }
      }
    };
    return {
      then(onFulfilled, onRejected) {
        if (statuses.length !== 1) {
          return Promise.reject(new TypeError('berth: list() with several statuses can only be iterated')).then(onFulfilled, onRejected);
        }
        return page(statuses[0], rest.cursor).then(onFulfilled, onRejected);
      },
      pages,
      async *[Symbol.asyncIterator]() {
        for await (const pg of pages()) yield* pg.jobs;
      },
    };
  }

  /**
   * wait resolves with the job once its status is in `until` (default: any
   * status but pending and running), once it is terminal, or when
   * `timeoutMs` has passed (the job as it is then, or a rejection when
   * berthd cannot give it: WaitOptions.timeoutMs). A wait survives
   * reconnects; the signal ends it with its reason.
   */
  async wait<I = unknown, O = unknown>(id: string, opts: WaitOptions = {}): Promise<Job<I, O>> {
    // Timed by performance.now, monotonic: by the wall clock, one set back
    // during the wait would make it last that much longer.
    const deadline = opts.timeoutMs === undefined ? Infinity : performance.now() + Math.max(0, opts.timeoutMs);
    const done = (j: Job<I, O>) => isTerminal(j.status) ||
      (opts.until ? opts.until.includes(j.status) : j.status !== 'pending' && j.status !== 'running');
    // timeoutMs bounds the call, reconnects included: berthd answers a
    // jobs/wait at its timeout, but while berthd is unreachable the request
    // waits for a connection, and is sent again after each drop. As the
    // Python SDK does, at the timeout a wait with no connection rejects
    // with ConnectionClosed (and the last attempt's error), and one whose
    // berthd took the request and does not answer (stopped, hung) with
    // RequestTimeout a second later.
    const bound = deadline === Infinity ? null : this.waitBound(id, opts.timeoutMs!, deadline, opts.signal);
    try {
      for (;;) {
        const left = deadline - performance.now();
        const params: Record<string, unknown> = { id, timeoutMs: Math.max(0, Math.min(Math.ceil(left), WAIT_CHUNK_MS)) };
        if (opts.until) params.until = opts.until;
        const job = await this.request<Job<I, O>>('jobs/wait', params, { signal: bound?.signal ?? opts.signal, retry: true });
        if (done(job) || performance.now() >= deadline) return job;
      }
    } finally {
      bound?.end();
    }
  }

  // waitBound is the signal of a wait with a timeout: the caller's signal,
  // and wait()'s own bound at the deadline (above).
  private waitBound(id: string, timeoutMs: number, deadline: number, outer?: AbortSignal): { signal: AbortSignal; end: () => void } {
    const ctl = new AbortController();
    const what = `berth: wait for job ${id}: its timeoutMs (${timeoutMs} ms) passed`;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const atDeadline = (grace: boolean) => {
      if (!this.conn || this.conn.closed) {
        const last = this.lastDialError ? `: ${this.lastDialError.message}` : '';
        ctl.abort(closedError(`${what} while berthd could not be reached${last}`, this.lastDialError ?? undefined));
      } else if (!grace) {
        timer = setTimeout(() => atDeadline(true), WAIT_ANSWER_GRACE_MS);
      } else {
        ctl.abort(new BerthError(ErrorCode.RequestTimeout, `${what}, and berthd did not answer within ${WAIT_ANSWER_GRACE_MS} ms after it`));
      }
    };
    timer = setTimeout(() => atDeadline(false), Math.max(0, deadline - performance.now()));
    const onAbort = () => ctl.abort(outer!.reason);
    if (outer?.aborted) ctl.abort(outer.reason);
    else outer?.addEventListener('abort', onAbort, { once: true });
    return {
      signal: ctl.signal,
      end: () => {
        clearTimeout(timer);
        outer?.removeEventListener('abort', onAbort);
      },
    };
  }

  /** jobs/resume: a suspended job runs again with resumeData (checked against its resumeSchema). */
  resume<I = unknown, O = unknown>(id: string, resumeData: unknown, opts: CallOptions = {}): Promise<Job<I, O>> {
    return this.request('jobs/resume', { id, resumeData }, opts);
  }

  approve<I = unknown, O = unknown>(id: string, opts: CallOptions & { note?: string } = {}): Promise<Job<I, O>> {
    return this.request('jobs/approve', dropUndefined({ id, note: opts.note }), { signal: opts.signal });
  }

  decline<I = unknown, O = unknown>(id: string, opts: CallOptions & { reason?: string } = {}): Promise<Job<I, O>> {
    return this.request('jobs/decline', dropUndefined({ id, reason: opts.reason }), { signal: opts.signal });
  }

  cancel<I = unknown, O = unknown>(id: string, opts: CallOptions & { reason?: string } = {}): Promise<Job<I, O>> {
    return this.request('jobs/cancel', dropUndefined({ id, reason: opts.reason }), { signal: opts.signal });
  }

  /** jobs/retry: a new job with the same tool and input, for a failed, timed_out or expired one. */
  retry<I = unknown, O = unknown>(id: string, opts: CallOptions = {}): Promise<Job<I, O>> {
    return this.request('jobs/retry', { id }, opts);
  }

  /** jobs/logs: the job's log lines after line `after`, oldest first. */
  logs(id: string, opts: CallOptions & { after?: number; limit?: number } = {}): Promise<LogPage> {
    return this.request('jobs/logs', dropUndefined({ id, after: opts.after, limit: opts.limit }), { signal: opts.signal, retry: true });
  }

  pause(tool: string, opts: CallOptions = {}): Promise<void> {
    return this.request('tools/pause', { name: tool }, { ...opts, retry: true }).then(() => undefined);
  }

  unpause(tool: string, opts: CallOptions = {}): Promise<void> {
    return this.request('tools/unpause', { name: tool }, { ...opts, retry: true }).then(() => undefined);
  }

  /**
   * events/poll: one page of the event log after `since`, waiting up to
   * waitMs for one. Go on from the page's `next`: `poll({since: 0, types:
   * ['failed', 'timed_out']})`, then `poll({since: page.next, types})`,
   * to the end of the log, where `next` equals `since`.
   */
  poll(opts: PollOptions = {}): Promise<EventPage> {
    const { signal, types, ...rest } = opts;
    // A list is copied, so that a poll sent again after a reconnect asks
    // for what it asked for first.
    const params = { ...rest, types: Array.isArray(types) ? [...types] : types };
    return this.request('events/poll', dropUndefined(params), { signal, retry: true });
  }

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
  events(opts: EventsOptions & { progress: true }): AsyncIterableIterator<Event | ProgressUpdate>;
  events(opts?: EventsOptions): AsyncIterableIterator<Event>;
  events(opts: EventsOptions = {}): AsyncIterableIterator<Event | ProgressUpdate> {
    return new EventStream(this, opts);
  }

  /** headSeq finds the seq of the newest event with a bisection over events/poll. */
  async headSeq(signal?: AbortSignal): Promise<number> {
    const after = async (x: number) => (await this.poll({ since: x, limit: 1, waitMs: 0, signal })).events[0]?.seq;
    const first = await after(0);
    if (first === undefined) return 0;
    let lo = first;
    let hi: number;
    for (let step = 1024; ; step *= 2) {
      const s = await after(lo + step);
      if (s === undefined) {
        hi = lo + step;
        break;
      }
      lo = s;
    }
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      const s = await after(mid);
      if (s === undefined) hi = mid;
      else lo = s;
    }
    return lo;
  }

  /** @internal */
  subscribe(id: string, conn: Connection, fn: Subscriber): () => void {
    this.subscribers.set(id, fn);
    const held = this.early.get(id);
    if (held) {
      this.early.delete(id);
      this.earlyCount -= held.length;
      for (const [m, p] of held) fn(m, p);
    }
    return () => {
      if (this.subscribers.get(id) !== fn) return;
      this.subscribers.delete(id);
      // Ids belong to a connection: a new one may give the same id out again.
      if (this.conn === conn && !conn.closed) this.ignored.add(id);
    };
  }

  /** @internal */
  watchDrops(fn: () => void): () => void {
    this.dropWatchers.add(fn);
    return () => { this.dropWatchers.delete(fn); };
  }

  /** @internal */
  get reconnects(): boolean {
    return this.reconnect !== null;
  }

  /** @internal */
  get current(): Connection | null {
    return this.conn && !this.conn.closed ? this.conn : null;
  }

  toString(): string {
    return `berth client (${describeAddress(this.address)})`;
  }
}

type Item = Event | ProgressUpdate;

// EventStream is one events() iteration: a subscription, a queue, and the
// seq it goes on from after a drop.
class EventStream implements AsyncIterableIterator<Item> {
  private readonly client: Client;
  private readonly opts: EventsOptions;
  // The types asked for, a list copied when events() was called, so that
  // every subscription of the stream (after a reconnect too) asks for the
  // same. Anything else goes as it is, for berthd to judge: a JavaScript
  // caller's mistake is its InvalidParams too.
  private readonly types: EventType | EventType[] | undefined;
  private readonly queue: Item[] = [];
  private lastSeq: number | undefined;
  private headAtStart: number | undefined;
  private starting: Promise<void> | null;
  private sub: { id: string; conn: Connection; off: () => void } | null = null;
  private paused = false;
  private finished = false;
  private failure: unknown = null;
  private wake: (() => void) | null = null;
  private readonly offDrop: () => void;
  private readonly onAbort: () => void;

  constructor(client: Client, opts: EventsOptions) {
    this.client = client;
    this.opts = opts;
    this.types = Array.isArray(opts.types) ? [...opts.types] : (opts.types as EventType | undefined);
    this.lastSeq = opts.since;
    this.offDrop = client.watchDrops(() => this.onDrop());
    this.onAbort = () => this.fail(opts.signal!.reason);
    opts.signal?.addEventListener('abort', this.onAbort, { once: true });
    if (opts.signal?.aborted) this.fail(opts.signal.reason);
    // Subscribe at once, so that the stream holds the events from the
    // moment events() was called, not from the first next().
    this.starting = this.failure === null ? this.start().catch((e) => this.fail(e)) : null;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<Item>> {
    if (this.starting) {
      await this.starting;
      this.starting = null;
    }
    for (;;) {
      if (this.queue.length > 0) {
        const item = this.queue.shift()!;
        return { value: item, done: false };
      }
      if (this.failure !== null) {
        const f = this.failure;
        this.stop();
        throw f;
      }
      if (this.finished) return { value: undefined, done: true };
      if (this.paused || !this.sub) {
        try {
          await this.start();
        } catch (e) {
          if (this.failure === null && !this.finished) this.fail(e);
          continue;
        }
        continue;
      }
      await new Promise<void>((resolve) => { this.wake = resolve; });
      this.wake = null;
    }
  }

  async return(): Promise<IteratorResult<Item>> {
    this.stop();
    return { value: undefined, done: true };
  }

  private async start(): Promise<void> {
    this.paused = false;
    for (;;) {
      const conn = await this.client.connection(this.opts.signal);
      const since = this.lastSeq ?? this.headAtStart;
      const params: Record<string, unknown> = {};
      if (since !== undefined) params.since = since;
      if (this.opts.jobId !== undefined) params.jobId = this.opts.jobId;
      if (this.types !== undefined) params.types = this.types;
      if (this.opts.progress) params.progress = true;
      // Notifications of the new subscription may be read before this
      // continuation runs (the reply and the first events can share one
      // read, or a batch); Client holds them until subscribe() claims them.
      let r: { subscription: string | number };
      try {
        r = await conn.request<{ subscription: string | number }>('events/subscribe', params, this.opts.signal);
      } catch (e) {
        if (e instanceof BerthError && e.code === ErrorCode.ConnectionClosed && this.client.reconnects && !this.client.closed) continue;
        throw e;
      }
      const id = String(r.subscription);
      const off = this.client.subscribe(id, conn, (method, p) => this.onNote(method, p));
      this.sub = { id, conn, off };
      if (conn.closed) this.onDrop();
      if (since === undefined && this.client.reconnects) {
        // Started at the end of the log: find where that is, so that a
        // reconnect before the first event goes on from there.
        this.client.headSeq(this.opts.signal).then((h) => {
          if (this.lastSeq === undefined && this.headAtStart === undefined) this.headAtStart = h;
        }, () => {});
      }
      return;
    }
  }

  private onNote(method: string, p: Record<string, unknown>): void {
    if (this.finished || this.paused) return;
    if (method === 'events/event') {
      const { subscription: _s, ...ev } = p;
      const e = ev as unknown as Event;
      if (typeof e.seq !== 'number') return;
      if (this.lastSeq !== undefined && e.seq <= this.lastSeq) return;
      this.lastSeq = e.seq;
      this.queue.push(e);
    } else if (method === 'events/progress') {
      const { subscription: _s, ...pr } = p;
      this.queue.push({ type: 'progress', ...(pr as Omit<ProgressUpdate, 'type'>) } as ProgressUpdate);
    } else {
      return;
    }
    if (this.queue.length >= EVENT_QUEUE_HIGH && this.sub) this.pause();
    this.wake?.();
  }

  private pause(): void {
    const s = this.sub;
    this.sub = null;
    this.paused = true;
    if (!s) return;
    s.off();
    s.conn.request('events/unsubscribe', { subscription: s.id }).catch(() => {});
  }

  private onDrop(): void {
    if (this.client.closed) {
      this.fail(closedError('berth: the client was closed'));
      return;
    }
    const s = this.sub;
    if (!s || !s.conn.closed) return;
    s.off();
    this.sub = null;
    if (!this.client.reconnects) {
      this.fail(closedError('berth: the connection to berthd dropped and the client does not reconnect'));
      return;
    }
    this.wake?.();
  }

  private fail(e: unknown): void {
    if (this.failure !== null || this.finished) return;
    this.failure = e;
    this.wake?.();
  }

  private stop(): void {
    if (this.finished) return;
    this.finished = true;
    this.queue.length = 0;
    this.offDrop();
    this.opts.signal?.removeEventListener('abort', this.onAbort);
    const s = this.sub;
    this.sub = null;
    if (s) {
      s.off();
      if (!s.conn.closed) s.conn.request('events/unsubscribe', { subscription: s.id }).catch(() => {});
    }
    this.wake?.();
  }
}

// defaultLogger writes the client's reports to stderr, one line each.
function defaultLogger(address: string): Logger {
  const line = (m: string) => console.error(`berth client (${address}): ${m}`);
  return { warn: line, error: line };
}

function dropUndefined<T extends Record<string, unknown>>(o: T): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out as T;
}

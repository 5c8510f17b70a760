// worker.ts: serve(), a worker process for berthd (docs/WORKERS.md). It
// registers createTool() tools, runs the jobs berthd pushes, and answers
// berthd's questions about the tools' functions (approval, transforms,
// hooks). Modelled on BullMQ's Worker: a concurrency, events, and a close()
// that lets running jobs finish.
//
// The connection is the lease on the jobs it runs: when it drops, every
// execute it started is aborted, berthd ends those jobs by their tool's
// onInterrupt policy, and an answer for them could not be delivered anyway.
// The worker then connects again (100 ms doubling to 5 s) and registers
// again, unless close() has begun: a closing worker never connects or
// registers again, since a registration it did not drain would be pushed
// runs that the close then cut off. A run that close() aborts (at its
// timeoutMs, or with force) answers what it returns within the abort
// grace; one that stops by the abort is left unanswered, to its tool's
// onInterrupt (docs/WORKERS.md, "Shutdown").

import { EventEmitter } from 'node:events';
import os from 'node:os';
import path from 'node:path';

import { BerthError, ErrorCode, closedError } from './errors.js';
import type { ReconnectOptions } from './client.js';
import { requestContextClass, type RequestContextClass } from './context.js';
import { approvalFunction, toolDefinition, transformTargets, type Definition, type ToolLike } from './definition.js';
import {
  Connection, Endpoint, NO_ANSWER, RawJson, backoffDelay, describeAddress, dial, errorText, field, resolveAddress, sleep,
  type Address, type Logger,
} from './rpc.js';
import type { Job, JobError, ViewStage, ViewTarget, Views } from './types.js';
import { SDK_NAME, SDK_VERSION } from './version.js';
import { WIRE_RULES, describeFault, overLimit, safeJson, safeText, utf8Bytes, wireFault } from './wire.js';

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
  approval?: { decision?: 'approved'; note?: string; decidedAt?: string; [key: string]: unknown };
  toolCallId?: string;
  runId?: string;
  metadata?: unknown;
  /** When the job came through MCP: the tools/call's `_meta` and the client's `clientInfo` (the job's metadata.mcp). */
  mcp?: { _meta?: Record<string, unknown>; clientInfo?: Record<string, unknown> };
}

/** What a run answers with (WORKERS.md, the result of `run`). */
export type Outcome =
  | { output: unknown; modelOutput?: unknown; views?: Views }
  | { suspend: unknown; views?: Views }
  | { error: { message: string; code?: string; data?: unknown; retryable?: boolean }; views?: Views };

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
  requestContext: { get(key: string): unknown; set(key: string, value: unknown): void; entries(): IterableIterator<[string, unknown]> };
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
    extra: { signal: AbortSignal; requestId: string; _meta?: Record<string, unknown>; client?: Record<string, unknown> };
    log(level: string, message: string, data?: unknown): Promise<void>;
    progress(p: { progress: number; total?: number; message?: string }): Promise<void>;
  };
  berth: BerthRunContext;
}

const STAGE_PHASE: Record<ViewStage, string> = {
  input: 'input-available',
  output: 'output-available',
  error: 'error',
  approval: 'approval',
  suspend: 'suspend',
  resume: 'resume',
};

// The log lines an answer to input or transform carries at most (berthd
// keeps 100 of them, docs/WORKERS.md).
const ANSWER_LOGS = 100;

// How long close() waits for berthd to answer worker/drain, or a
// worker/register that was under way when it began. berthd answers both at
// once; one that does not is not waited for (the runs still are).
const CLOSE_ANSWER_MS = 5000;

// How long a run that was aborted has to answer: berthd's default
// --kill-grace, the time berthd gives a run it aborts. close() gives it to
// the runs it aborts at its deadline, and waits no longer for a run that
// berthd aborted, or that a dropped connection did: berthd has given the
// run up by then, or will not take its answer. An execute that ignores its
// abortSignal longer cannot hold close() up; its job is berthd's to end or
// put back.
const ABORT_GRACE_MS = 5000;

// The reason of close()'s own aborts (berthd's are cancelled, timed_out and
// shutdown; a dropped connection's is disconnected).
const CLOSING = 'closing';

// now is the clock of close()'s deadlines: monotonic, so that a change of
// the wall clock neither ends a wait early nor makes it last.
const now = (): number => performance.now();

// The longest delay setTimeout takes; a longer one fires at once.
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A log line carried by an answer to input or transform. */
interface LogLine {
  level: string;
  message: string;
  data?: unknown;
}

interface Run {
  job: RunJob;
  tool: ToolLike;
  conn: Connection;
  abort: RunAbort;
  checkpoints: Promise<unknown>;
  // True when the run ended by its abort (its execute threw the abort, or
  // never began): the outcome is the SDK's `aborted`, not one of the tool.
  stopped: boolean;
  // True once berthd aborted the run (a cancel, its timeout, its
  // shutdown): the job's fate is decided, berthd waits for the run's
  // answer for its kill grace only, and may push the job's next attempt
  // to this connection meanwhile (a timeout's retry comes at once when
  // the connection has room).
  decided: boolean;
}

/**
 * RunAbort is a run's AbortController, made when its signal is first read
 * or the run aborted: most executes never look at context.abortSignal, and
 * an AbortSignal is the dearest object a run would otherwise make.
 */
class RunAbort {
  private controller: AbortController | null = null;
  /**
   * When the abort grace of the run ends (now()): ABORT_GRACE_MS after it
   * was first aborted. givenUp and the timer of closeWait compare this one
   * number with the clock, so that they never disagree about a moment.
   */
  graceEnd: number | undefined;

  get signal(): AbortSignal {
    return (this.controller ??= new AbortController()).signal;
  }

  get aborted(): boolean {
    return this.controller !== null && this.controller.signal.aborted;
  }

  /** reason is the abort's reason, once aborted. */
  get reason(): unknown {
    return this.controller?.signal.reason;
  }

  /** True when the first abort was close()'s own. */
  get byClose(): boolean {
    return (this.reason as { reason?: unknown } | undefined)?.reason === CLOSING;
  }

  /** givenUp says whether the run was aborted longer than the abort grace before t. */
  givenUp(t: number): boolean {
    return this.graceEnd !== undefined && t >= this.graceEnd;
  }

  abort(reason: Error): void {
    this.graceEnd ??= now() + ABORT_GRACE_MS;
    (this.controller ??= new AbortController()).abort(reason);
  }
}

interface Served {
  tool: ToolLike;
  def: Definition;
}

/**
 * serve registers `tools` with berthd and runs their jobs until the worker
 * is closed. It resolves with the Worker once berthd has accepted the
 * tools, waiting (with backoff) while berthd cannot be reached; it rejects
 * when berthd refuses them (a definition that does not check, a conflict
 * with another worker's definition, a wrong token), with berthd's error.
 */
export async function serve(options: ServeOptions): Promise<Worker> {
  const worker = new Worker(options);
  await worker.start();
  return worker;
}

/**
 * Worker is a running serve(). Events: `registered` (the register result),
 * `disconnected` (the BerthError), `active` (job), `completed` (job,
 * output), `suspended` (job, payload), `failed` (job, error), `error`
 * (emitted only while someone listens; otherwise the logger has it), and
 * `closed`.
 */
export class Worker extends EventEmitter {
  readonly name: string;
  readonly concurrency: number;
  readonly address: Address;
  /** berthd's id of this worker's current registration. */
  id: string | undefined;
  private readonly options: ServeOptions;
  private readonly logger: Logger | null;
  private readonly served = new Map<string, Served>();
  private readonly toolList: ToolLike[];
  private RequestContextCtor: RequestContextClass | null = null;
  private conn: Connection | null = null;
  // The run of each job running here.
  private readonly runs = new Map<string, Run>();
  // Runs whose job came again while they ran (after berthd aborted them,
  // or after their connection dropped), and whose execute has not
  // returned: no longer their job's, but close() waits for them as for
  // any aborted run, for the abort grace at most.
  private readonly displaced = new Set<Run>();
  // The promise close() returns, once it has begun.
  private closing: Promise<void> | null = null;
  // Aborted when close() begins: it stops the backoff and a connection
  // attempt, and ends the serving of the connection (which is drained).
  private readonly stopping = new AbortController();
  // When close() stops waiting for the runs and aborts those left (now()),
  // from timeoutMs or force; each then has the abort grace to answer.
  private deadline = Infinity;
  private started = false;
  private finished = false;
  private readonly done: Promise<void>;
  private resolveDone!: () => void;
  private readonly onSignal = () => { void this.close(); };

  constructor(options: ServeOptions) {
    super();
    if (!options || typeof options !== 'object') throw new TypeError('berth: serve() needs options with tools');
    this.options = options;
    this.address = resolveAddress(options);
    const c = options.concurrency ?? 16;
    if (!Number.isInteger(c) || c < 1 || c > 1024) throw new RangeError(`berth: concurrency must be an integer from 1 to 1024, not ${c}`);
    this.concurrency = c;
    this.name = options.name ?? `${path.basename(process.argv[1] ?? 'node')}@${os.hostname()}:${process.pid}`;
    this.logger = options.logger === false ? null : options.logger ?? defaultLogger(this.name);
    const tools = options.tools;
    this.toolList = Array.isArray(tools) ? tools : tools && typeof tools === 'object' ? Object.values(tools) : [];
    if (this.toolList.length === 0) throw new TypeError('berth: serve() needs at least one tool');
    if (this.toolList.length > 1000) throw new RangeError('berth: a worker serves at most 1000 tools');
    this.done = new Promise<void>((resolve) => { this.resolveDone = resolve; });
  }

  /** The ids of the tools served. */
  get tools(): string[] {
    return this.toolList.map((t) => t.id);
  }

  /** The number of jobs running here now. */
  get running(): number {
    return this.runs.size;
  }

  /** True while registered with berthd. */
  get registered(): boolean {
    return this.conn !== null && !this.conn.closed;
  }

  /** @internal: builds the definitions and connects; resolves on the first registration. */
  async start(): Promise<void> {
    if (this.started) throw new Error('berth: the worker was started already');
    this.started = true;
    for (const tool of this.toolList) {
      const def = await toolDefinition(tool);
      if (this.served.has(def.id)) throw new TypeError(`berth: two tools have the id ${def.id}`);
      this.served.set(def.id, { tool, def });
    }
    this.RequestContextCtor = await requestContextClass();
    if (this.options.signal?.aborted) throw this.options.signal.reason;
    if (this.stopping.signal.aborted) {
      this.finish();
      throw new BerthError(ErrorCode.ConnectionClosed, 'berth: the worker was closed before berthd accepted its tools');
    }
    this.options.signal?.addEventListener('abort', this.onSignal, { once: true });
    let first!: { resolve: () => void; reject: (e: unknown) => void };
    const registered = new Promise<void>((resolve, reject) => { first = { resolve, reject }; });
    this.first = first;
    this.loop(first).catch((e: unknown) => {
      // Only a listener that throws gets here; the worker cannot go on,
      // and the connection it registered must not stay open to be pushed
      // runs that nothing would drain: berthd takes its runs back.
      this.log('error', `the worker stopped: ${errMessage(e)}`);
      first.reject(e);
      this.stopping.abort();
      const conn = this.conn;
      this.conn = null;
      if (conn) {
        const why = closedError(`berth: the worker stopped: ${errMessage(e)}`);
        conn.close(why.message);
        this.abortRuns(conn, why);
      }
      this.finish();
    });
    await registered;
  }

  // loop connects, registers and serves until close(); after a drop it
  // connects again with backoff. A refusal of the first registration ends
  // it (serve() rejects); a refusal later is logged and tried again, since
  // a conflicting worker may leave. Once close() has begun it starts no
  // connection and no registration: it drains the connection it has (or
  // the one whose registration was under way), and stops.
  private async loop(first: { resolve: () => void; reject: (e: unknown) => void }): Promise<void> {
    let everRegistered = false;
    const stop = this.stopping.signal;
    const r = this.options.reconnect ?? {};
    for (let attempt = 0; !stop.aborted; attempt++) {
      if (attempt > 0) {
        try {
          await sleep(backoffDelay(attempt - 1, r.initialDelayMs ?? 100, r.maxDelayMs ?? 5000), stop);
        } catch {
          break;
        }
      }
      let conn: Connection;
      let dropped!: Promise<BerthError>;
      try {
        let onClose!: (why: BerthError) => void;
        dropped = new Promise<BerthError>((resolve) => { onClose = resolve; });
        conn = await dial(this.address, {
          token: this.options.token,
          timeoutMs: this.options.connectTimeoutMs,
          maxSendLineBytes: this.options.maxSendLineBytes,
          logger: this.lineLogger,
          signal: stop,
          onRequest: (method, params, room) => this.onRequest(conn, method, params, room),
          onNotification: (method, params) => this.onNotification(conn, method, params),
          // close() waits until berthd's last request is answered on the wire.
          onAnswered: () => this.poke(),
          onClose: (why) => {
            onClose(why);
            this.poke();
          },
        });
      } catch (e) {
        if (stop.aborted) break;
        if (e instanceof BerthError && e.code === ErrorCode.Unauthorized && !everRegistered) {
          first.reject(e);
          break;
        }
        this.log('debug', `cannot connect to ${describeAddress(this.address)}: ${(e as Error).message}`);
        continue;
      }
      if (stop.aborted) {
        conn.close('berth: the worker is closing');
        break;
      }
      let result: { worker?: string; tools?: string[]; heartbeatMs?: number };
      try {
        result = await this.register(conn, stop);
      } catch (e) {
        conn.close();
        if (stop.aborted) break;
        const refusal = registrationError(e, this.address);
        if (refusal && !everRegistered) {
          first.reject(refusal);
          break;
        }
        if (refusal) this.report(refusal);
        continue;
      }
      everRegistered = true;
      attempt = 0;
      this.conn = conn;
      this.id = result.worker;
      if (stop.aborted) {
        // close() began while berthd registered it: berthd may have pushed
        // runs already, which the drain answers.
        this.log('debug', `registered as ${result.worker} while closing; draining that registration`);
      } else {
        this.log('info', `registered ${this.tools.join(', ')} with berthd at ${describeAddress(this.address)} as ${result.worker}`);
        first.resolve();
        this.emit('registered', result);
      }
      const heartbeat = this.heartbeat(conn, result.heartbeatMs ?? 10000);
      const why = (await orClose(dropped, stop)) ?? (await this.drain(conn));
      clearInterval(heartbeat);
      if (this.conn === conn) this.conn = null;
      if (why === null) break;
      this.abortRuns(conn, why);
      if (stop.aborted) {
        this.log('warn', `${why.message}; not connecting again, as the worker is closing: berthd ends or re-queues the jobs it ran here (onInterrupt)`);
        this.emit('disconnected', why);
        break;
      }
      this.log('warn', `${why.message}; connecting again`);
      this.emit('disconnected', why);
    }
    await this.settle();
    this.finish();
  }

  // register sends worker/register on conn and resolves with berthd's
  // answer. A close() that begins meanwhile waits for the answer a short
  // while (CLOSE_ANSWER_MS, within its deadline) rather than cutting the
  // connection: berthd may have registered the worker and pushed it runs,
  // which the cut would leave to the lease; the drain answers them instead.
  private async register(conn: Connection, stop: AbortSignal): Promise<{ worker?: string; tools?: string[]; heartbeatMs?: number }> {
    let settled = false;
    const answer = conn.request<{ worker?: string; tools?: string[]; heartbeatMs?: number }>('worker/register', {
      tools: [...this.served.values()].map((s) => s.def),
      concurrency: this.concurrency,
      name: this.name,
      sdk: { name: SDK_NAME, version: SDK_VERSION },
    });
    const mark = () => {
      settled = true;
      this.poke();
    };
    answer.then(mark, mark);
    if ((await orClose(answer.then(() => true), stop)) === null &&
        !(await this.closeWait(() => settled, now() + CLOSE_ANSWER_MS))) {
      throw closedError(`berth: berthd did not answer worker/register within ${CLOSE_ANSWER_MS} ms of close()`);
    }
    return answer;
  }

  // heartbeat pings berthd when it has been silent for a heartbeat, and
  // drops the connection when two heartbeats pass without an answer: a
  // network that vanished would otherwise hold the lease's jobs here.
  private heartbeat(conn: Connection, ms: number): NodeJS.Timeout {
    let waiting = false;
    const timer = setInterval(() => {
      if (conn.closed || waiting || now() - conn.lastReceived < ms) return;
      waiting = true;
      const deadline = setTimeout(() => conn.close(`berth: berthd did not answer ping within ${2 * ms} ms`), 2 * ms);
      conn.request('ping').then(() => {}, () => {}).finally(() => {
        clearTimeout(deadline);
        waiting = false;
      });
    }, ms);
    timer.unref();
    return timer;
  }

  // allRuns is every run whose execute has not returned, displaced ones too.
  private *allRuns(): IterableIterator<Run> {
    yield* this.runs.values();
    yield* this.displaced;
  }

  private abortRuns(conn: Connection, why: BerthError): void {
    for (const run of this.allRuns()) {
      if (run.conn === conn) this.abortRun(run, abortReason('disconnected', why.message));
    }
  }

  // abortRun aborts a run; the first abort's reason is the one its execute
  // sees, and starts its abort grace, which close() waits on.
  private abortRun(run: Run, reason: Error): void {
    run.abort.abort(reason);
    this.poke();
  }

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
  close(opts: { force?: boolean; timeoutMs?: number } = {}): Promise<void> {
    const { force = false, timeoutMs } = opts ?? {};
    if (timeoutMs !== undefined && (typeof timeoutMs !== 'number' || !(timeoutMs >= 0))) {
      return Promise.reject(new RangeError(`berth: close()'s timeoutMs must be a number of milliseconds, 0 or more, not ${String(timeoutMs)}`));
    }
    const t = now();
    if (timeoutMs !== undefined) this.deadline = Math.min(this.deadline, t + timeoutMs);
    if (force) this.deadline = Math.min(this.deadline, t);
    if (this.closing === null) {
      this.closing = this.done;
      this.options.signal?.removeEventListener('abort', this.onSignal);
      this.stopping.abort();
      if (!this.started) this.finish();
    }
    this.poke();
    return this.closing;
  }

  // drain ends the serving of a registered connection as BullMQ's close()
  // does: worker/drain first (berthd pushes no run once it has answered,
  // and the runs it pushed before arrive ahead of the answer), then the
  // answers to every request berthd sent, then a graceful close. At the
  // close's deadline the runs still going are aborted and have the abort
  // grace to answer; then the connection is closed under what is left,
  // which berthd takes as its interruption. It returns why the connection
  // dropped under it, or null once it closed the connection itself.
  private async drain(conn: Connection): Promise<BerthError | null> {
    let answered = false;
    conn.request('worker/drain', {}).then(
      () => {},
      (e: unknown) => this.log('debug', `worker/drain: ${errMessage(e)}`),
    ).finally(() => {
      answered = true;
      this.poke();
    });
    await this.closeWait(() => answered || conn.closed, now() + CLOSE_ANSWER_MS);
    if (!(await this.closeWait((t) => conn.closed || this.quiet(conn, t))) && !conn.closed) {
      const left = this.runsOf(conn);
      if (left.length > 0) {
        this.log('warn', `aborting ${describeJobs(left.map((run) => run.job.id))} at close()'s deadline; each has ${ABORT_GRACE_MS} ms to answer`);
      }
      for (const run of left) this.abortRun(run, abortReason(CLOSING, 'the worker is closing'));
      await this.closeWait((t) => conn.closed || this.quiet(conn, t), now() + ABORT_GRACE_MS, false);
    }
    if (conn.closed) return conn.reason ?? closedError('berth: the connection to berthd closed');
    const left = this.runsOf(conn);
    if (left.length > 0) {
      this.log('warn', `closing with ${describeJobs(left.map((run) => run.job.id))} still running: aborted, and left to berthd (onInterrupt)`);
    }
    await conn.closeGracefully();
    return null;
  }

  private runsOf(conn: Connection): Run[] {
    return [...this.allRuns()].filter((run) => run.conn === conn);
  }

  // quiet says whether a draining connection has nothing left to wait for:
  // every request of berthd's is answered, but runs aborted longer than the
  // abort grace ago, which berthd has given up too.
  private quiet(conn: Connection, t: number): boolean {
    if (conn.owed === 0) return true;
    let givenUp = 0;
    for (const run of this.allRuns()) {
      if (run.conn !== conn) continue;
      if (!run.abort.givenUp(t)) return false;
      givenUp++;
    }
    return conn.owed === givenUp;
  }

  // settle waits, once the loop has stopped, for the executes still
  // running (aborted by a drop or by the deadline) to return, each for the
  // abort grace at most: close() resolves after those that honour their
  // abortSignal, and without those that do not.
  private async settle(): Promise<void> {
    for (const run of this.allRuns()) {
      // Its connection is gone.
      if (!run.abort.aborted) this.abortRun(run, abortReason('disconnected', 'the connection to berthd is gone'));
    }
    await this.closeWait((t) => [...this.allRuns()].every((run) => run.abort.givenUp(t)), Infinity, false);
    const left = new Set([...this.allRuns()].map((run) => run.job.id));
    if (left.size === 0) return;
    this.log('warn', `closed while the execute of ${describeJobs([...left])} had not returned from its abort: berthd ends or re-queues the jobs (onInterrupt)`);
  }

  // closeWait waits while the worker closes until done(t) holds, looking
  // again whenever poke() is called (a run answered or was aborted, a
  // connection closed, an answer came, close() moved the deadline) and when
  // an aborted run's grace ends. It gives up at `limit`, and when `bounded`
  // at the close's deadline too, whichever is first, and says whether
  // done(t) held. Each look reads the clock once: a grace that ended
  // between two reads would be over for the timer and not yet for done(),
  // and nothing would wake the wait again.
  private async closeWait(done: (t: number) => boolean, limit = Infinity, bounded = true): Promise<boolean> {
    for (;;) {
      const t = now();
      if (done(t)) return true;
      const end = bounded ? Math.min(limit, this.deadline) : limit;
      if (end <= t) return false;
      const wake = Math.min(end, this.graceEnd(t));
      const woke = new Promise<void>((resolve) => this.wakers.push(resolve));
      // A timer may fire a little early: the loop reads the clock again.
      const timer = wake === Infinity ? null : setTimeout(() => this.poke(), Math.min(Math.ceil(wake - t), MAX_TIMER_MS));
      await woke;
      if (timer) clearTimeout(timer);
    }
  }

  // graceEnd is when the next abort grace of a run ends, after t.
  private graceEnd(t: number): number {
    let end = Infinity;
    for (const run of this.allRuns()) {
      const ends = run.abort.graceEnd;
      if (ends !== undefined && ends > t) end = Math.min(end, ends);
    }
    return end;
  }

  private wakers: Array<() => void> = [];

  private poke(): void {
    if (this.wakers.length === 0) return;
    const wakers = this.wakers;
    this.wakers = [];
    for (const wake of wakers) wake();
  }

  // The first registration's promise, settled by the first of: berthd
  // accepting the tools, refusing them, or close() before either.
  private first: { resolve: () => void; reject: (e: unknown) => void } | null = null;

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.first?.reject(new BerthError(ErrorCode.ConnectionClosed, 'berth: the worker was closed before berthd accepted its tools'));
    this.stopping.abort();
    this.options.signal?.removeEventListener('abort', this.onSignal);
    this.closing ??= this.done;
    this.resolveDone();
    this.emit('closed');
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  // ---- berthd's requests

  // The connection's reports (a line berthd refused, a notification over
  // the line limit) go to the worker's logger.
  private readonly lineLogger: Logger = {
    warn: (m: string) => this.log('warn', m),
    error: (m: string) => this.log('error', m),
  };

  private async onRequest(conn: Connection, method: string, params: unknown, room: number): Promise<unknown> {
    switch (method) {
      case 'run':
        return this.run(conn, params, room);
      case 'input':
        return this.input(params);
      case 'transform':
        return this.transform(params);
      case 'ping':
        return {};
      default:
        throw new BerthError(ErrorCode.MethodNotFound, `this worker has no method ${method}`);
    }
  }

  private onNotification(conn: Connection, method: string, params: unknown): void {
    if (method !== 'abort') return;
    const p = (params ?? {}) as { jobId?: unknown; reason?: unknown };
    const run = typeof p.jobId === 'string' ? this.runs.get(p.jobId) : undefined;
    if (!run || run.conn !== conn) return;
    run.decided = true;
    const reason = typeof p.reason === 'string' ? p.reason : 'aborted';
    this.abortRun(run, abortReason(reason, `job ${run.job.id} was ${reason === 'timed_out' ? 'timed out' : reason === 'shutdown' ? 'stopped by berthd shutting down' : reason}`));
  }

  private servedTool(name: unknown): Served {
    const s = typeof name === 'string' ? this.served.get(name) : undefined;
    if (!s) throw new BerthError(ErrorCode.NotFound, `this worker does not serve the tool ${String(name)}`, { id: name });
    return s;
  }

  // run answers with the outcome as JSON text (RawJson): it is serialized
  // once, by the check that berthd takes it (jsonOutcome), within `room`
  // bytes.
  private async run(conn: Connection, params: unknown, room: number): Promise<Outcome | RawJson | typeof NO_ANSWER> {
    const p = (params ?? {}) as { job?: RunJob; pending?: { views?: ViewStage[]; onInputAvailable?: boolean } };
    const job = p.job;
    if (!job || typeof job !== 'object' || typeof job.id !== 'string' || typeof job.tool !== 'string') {
      throw new BerthError(ErrorCode.InvalidParams, 'run needs params.job with an id and a tool');
    }
    // The same job may come back while an execute of it has not returned
    // yet (it ignored its abortSignal): on a new connection after the old
    // one dropped, or on this one after berthd aborted the run (its next
    // attempt after a timeout, pushed once berthd gave the run up at its
    // kill grace). That run is no longer the job's, so the new one goes
    // on. berthd sends no other second run of a job (docs/WORKERS.md).
    const previous = this.runs.get(job.id);
    if (previous && !previous.conn.closed && !(previous.conn === conn && previous.decided)) {
      throw new BerthError(ErrorCode.Conflict, `job ${job.id} is already running on this worker`, { status: 'running' });
    }
    const served = this.served.get(job.tool);
    if (!served) {
      return { error: { message: `this worker does not serve the tool ${safeText(job.tool)}`, code: 'unknown_tool', retryable: true } };
    }
    if (previous) {
      this.runs.delete(job.id);
      this.displaced.add(previous);
      this.log('debug', `job ${job.id} came again (attempt ${job.attempt}) while the execute of its aborted run had not returned`);
    }
    const run: Run = { job, tool: served.tool, conn, abort: new RunAbort(), checkpoints: Promise.resolve(), stopped: false, decided: false };
    this.runs.set(job.id, run);
    // Pushed before berthd took the drain, after close()'s deadline: it
    // does not start, and is left to berthd.
    if (this.deadline !== Infinity && now() >= this.deadline) this.abortRun(run, abortReason(CLOSING, 'the worker is closing'));
    this.emit('active', job);
    try {
      const [outcome, text] = await this.execute(run, served, p.pending ?? {}, room);
      // A checkpoint sent before the outcome must be durable before it
      // (an aborted run's checkpoints have stopped waiting already).
      await run.checkpoints;
      if (run.decided && run.abort.givenUp(now())) {
        // berthd aborted the run and has given it up at its kill grace
        // (docs/WORKERS.md, `abort`): it would drop the answer, and log
        // it as late. The job's fate was decided at the abort, and its
        // next attempt may be running here already.
        this.log('debug', `job ${job.id}: its run returned after the abort grace; berthd has given it up, so it is not answered`);
        return NO_ANSWER;
      }
      if (run.stopped && run.abort.byClose) {
        // Stopped by close()'s own abort: not answered, so that berthd ends
        // the job by its tool's onInterrupt once the connection closes, as
        // for any run a worker leaves. An `aborted` error would be retried
        // by its retryable, whatever onInterrupt says.
        this.log('debug', `job ${job.id} stopped at close()'s abort; left to berthd (onInterrupt)`);
        return NO_ANSWER;
      }
      if ('output' in outcome) this.emit('completed', job, outcome.output);
      else if ('suspend' in outcome) this.emit('suspended', job, outcome.suspend);
      else this.emit('failed', job, outcome.error);
      return new RawJson(text);
    } finally {
      if (this.runs.get(job.id) === run) this.runs.delete(job.id);
      this.displaced.delete(run);
      this.poke();
    }
  }

  // execute runs the job's execute and the functions of its stage, and
  // returns the outcome with its JSON text (jsonOutcome), which takes
  // `room` bytes at most.
  private async execute(run: Run, served: Served, pending: { views?: ViewStage[]; onInputAvailable?: boolean },
    room: number): Promise<[Outcome, string]> {
    const { tool } = served;
    const job = run.job;
    const views: Views = {};
    const sink = (level: string, message: string, data?: unknown) => this.jobLog(run, level, message, data);
    const limit = run.conn.maxSendLineBytes;
    // Aborted before it began (with the run, or after close()'s deadline):
    // nothing of the tool's runs.
    const notBegun = (): [Outcome, string] => {
      run.stopped = true;
      return jsonOutcome({ error: jobError(run.abort.reason, true) }, sink, room, limit);
    };
    if (run.abort.aborted) return notBegun();

    if (pending.onInputAvailable && typeof tool.onInputAvailable === 'function') {
      await callHook(tool.onInputAvailable, 'onInputAvailable',
        { input: job.input, toolCallId: job.toolCallId ?? job.id, messages: [], abortSignal: run.abort.signal }, sink);
    }
    for (const stage of pending.views ?? []) {
      const payload = stagePayload(stage, job);
      if (payload) await this.addViews(views, tool, stage, job, payload, sink);
    }

    let suspended: { payload: unknown } | null = null;
    const suspend = async (payload: unknown): Promise<void> => {
      suspended = { payload };
    };
    if (run.abort.aborted) return notBegun();
    const ctx = this.context(run, suspend);
    let outcome: Outcome;
    let stage: ViewStage;
    let fields: TransformFields;
    try {
      const result = await tool.execute!(job.input, ctx);
      // Mastra's createTool() returns its schema failures (of the resume
      // data, the request context, a suspend payload, the output) rather
      // than throwing them; they fail the job, and no retry would help.
      if (isMastraValidationError(result)) {
        outcome = { error: { message: result.message, code: validationCode(result.message, job), data: validationData(result.validationErrors), retryable: false } };
        stage = 'error';
        fields = { error: outcome.error };
      } else if (suspended) {
        const payload = (suspended as { payload: unknown }).payload;
        outcome = { suspend: payload ?? null };
        stage = 'suspend';
        fields = { suspendPayload: payload };
      } else {
        const output = result === undefined ? null : result;
        outcome = { output };
        if (typeof tool.toModelOutput === 'function') {
          try {
            const m = await tool.toModelOutput(output);
            // As one that throws: a model output berthd cannot take is
            // logged, and the output goes without it.
            const why = m === undefined ? null : unsendable(m, OUTCOME_DEPTH);
            if (why) sink('error', `toModelOutput returned a value that ${why}; the job has no model output`);
            else if (m !== undefined) outcome.modelOutput = m;
          } catch (e) {
            sink('error', `toModelOutput threw: ${errMessage(e)}; the job has no model output`, errData(e));
          }
        }
        if (typeof tool.onOutput === 'function') {
          await callHook(tool.onOutput, 'onOutput',
            { output, toolName: tool.id, toolCallId: job.toolCallId ?? job.id, abortSignal: run.abort.signal }, sink);
        }
        stage = 'output';
        fields = { output };
      }
    } catch (e) {
      const error = jobError(e, run.abort.aborted);
      // It stopped by its abort: it threw the abortSignal's reason, or the
      // AbortError of something the signal aborted.
      run.stopped = run.abort.aborted && (e === run.abort.reason || field(e, 'name') === 'AbortError');
      if (!(run.abort.aborted && e === run.abort.reason)) sink('error', `execute threw: ${error.message}`, errData(e));
      outcome = { error };
      stage = 'error';
      fields = { error };
    }
    await this.addViews(views, tool, stage, job, fields, sink);
    if (views.display || views.transcript) outcome.views = views;
    return jsonOutcome(outcome, sink, room, limit);
  }

  // context builds execute's second argument: what the reference page
  // lists, mapped to berth, and berth's own `berth` member.
  private context(run: Run, suspend: (payload: unknown) => Promise<void>): Record<string, unknown> {
    const job = run.job;
    const abort = run.abort;
    const conn = run.conn;
    const RC = this.RequestContextCtor!;
    const requestContext = new RC(Object.entries(job.requestContext ?? {}));
    const log = (level: string, message: string, data?: unknown) => this.jobLog(run, level, message, data);
    // A checkpoint is durable when berthd answers; an aborted run stops
    // waiting for the answer (the run is no longer this worker's to save).
    const saveCheckpoint = (value: unknown): Promise<void> => {
      const p = run.checkpoints.then(() => conn.request('worker/checkpoint', { jobId: job.id, value }, abort.signal));
      run.checkpoints = p.catch(() => {});
      return p.then(() => {});
    };
    const workflow: Record<string, unknown> = {
      workflowId: job.tool,
      runId: job.runId ?? job.id,
      state: job.checkpoint,
      // Mastra's setState returns nothing; this one resolves once the state
      // is durable, and never rejects (a failure is logged on the job).
      setState: (state: unknown): Promise<void> => {
        workflow.state = state;
        return saveCheckpoint(state).catch((e) => log('error', `setState: the state was not saved: ${errMessage(e)}`));
      },
      suspend,
      resumeData: job.resumeData,
      suspendPayload: job.suspendPayload,
    };
    const agent = {
      agentId: '',
      toolCallId: job.toolCallId ?? job.id,
      messages: [] as unknown[],
      suspend,
      resumeData: job.resumeData,
      suspendPayload: job.suspendPayload,
    };
    const berth: BerthRunContext = {
      jobId: job.id,
      tool: job.tool,
      attempt: job.attempt,
      maxRetries: job.maxRetries,
      deadline: job.deadline ? new Date(job.deadline) : undefined,
      approval: job.approval,
      metadata: job.metadata,
      checkpoint: job.checkpoint,
      progress: (progress, total, message) => {
        // The progress of a run berthd aborted is no longer its job's
        // (the job's next attempt may be running already).
        if (run.decided) return;
        if (!isWireNumber(progress) || (total !== undefined && !isWireNumber(total))) {
          log('warn', `progress(${textOf(progress)}, ${textOf(total)}) is not reported: progress and total must be finite numbers`);
          return;
        }
        conn.notify('worker/progress', dropUndefined({
          jobId: job.id, progress, total, message: message === undefined ? undefined : safeText(textOf(message)),
        }));
      },
      log: (level, message, data) => log(level, message, data),
      saveCheckpoint,
    };
    const observe = {
      async span<T>(name: string, fn: () => Promise<T> | T, attributes?: Record<string, unknown>): Promise<T> {
        const start = Date.now();
        try {
          const r = await fn();
          log('info', `span ${name}`, dropUndefined({ span: name, durationMs: Date.now() - start, attributes }));
          return r;
        } catch (e) {
          log('error', `span ${name} failed: ${errMessage(e)}`, dropUndefined({ span: name, durationMs: Date.now() - start, attributes, error: errMessage(e) }));
          throw e;
        }
      },
      log(level: string, message: string, data?: Record<string, unknown>): void {
        log(level, message, data);
      },
    };
    const ctx: Record<string, unknown> = {
      requestContext,
      // A getter, so that the signal is made only for an execute that reads it.
      get abortSignal() { return abort.signal; },
      agent,
      workflow,
      suspend,
      resumeData: job.resumeData,
      suspendPayload: job.suspendPayload,
      observe,
      berth,
    };
    const mastra = this.options.mastra ?? (run.tool as { mastra?: unknown }).mastra;
    if (mastra !== undefined) ctx.mastra = mastra;
    if (job.mcp) {
      const unsupported = (what: string) => () => {
        throw new Error(`berth: ${what} is not available to a tool run by berth: call context.agent.suspend(payload) and berth asks the MCP client for the resume data`);
      };
      ctx.mcp = {
        extra: {
          get signal() { return abort.signal; },
          requestId: job.id,
          _meta: job.mcp._meta,
          client: job.mcp.clientInfo,
          sendNotification: unsupported('mcp.extra.sendNotification'),
          sendRequest: unsupported('mcp.extra.sendRequest'),
        },
        elicitation: { sendRequest: async () => unsupported('mcp.elicitation.sendRequest')() },
        log: async (level: string, message: string, data?: unknown) => log(mcpLevel(level), message, data),
        progress: async (p: { progress: number; total?: number; message?: string }) => berth.progress(p.progress, p.total, p.message),
      };
    }
    return ctx;
  }

  private async input(params: unknown): Promise<{ requireApproval?: boolean; views?: Views; logs?: LogLine[] }> {
    const job = ((params ?? {}) as { job?: RunJob }).job;
    if (!job || typeof job !== 'object' || typeof job.id !== 'string') throw new BerthError(ErrorCode.InvalidParams, 'input needs params.job with an id');
    const { tool } = this.servedTool(job.tool);
    const logs: LogLine[] = [];
    const sink = (level: string, message: string, data?: unknown) => this.answerLog(logs, job.id, level, message, data);
    const out: { requireApproval?: boolean; views?: Views; logs?: LogLine[] } = {};
    const fn = approvalFunction(tool);
    if (fn) {
      const rc = job.requestContext ?? {};
      try {
        out.requireApproval = Boolean(await fn(job.input, { args: job.input, requestContext: rc }));
      } catch (e) {
        // As in Mastra: an approval policy that throws asks for approval.
        out.requireApproval = true;
        sink('error', `requireApproval threw: ${errMessage(e)}; the job waits for approval`, errData(e));
      }
    }
    const views: Views = {};
    await this.addViews(views, tool, 'input', job, { input: job.input }, sink);
    await this.addViews(views, tool, 'approval', job, { input: job.input }, sink);
    if (views.display || views.transcript) out.views = views;
    if (typeof tool.onInputAvailable === 'function') {
      await callHook(tool.onInputAvailable, 'onInputAvailable',
        { input: job.input, toolCallId: job.toolCallId ?? job.id, messages: [], abortSignal: new AbortController().signal }, sink);
    }
    if (logs.length > 0) out.logs = logs;
    return out;
  }

  private async transform(params: unknown): Promise<{ views: Views; logs?: LogLine[] }> {
    const p = (params ?? {}) as { jobId?: unknown; tool?: unknown; stage?: unknown; payload?: unknown; job?: RunJob };
    if (typeof p.jobId !== 'string' || (p.stage !== 'approval' && p.stage !== 'resume')) {
      throw new BerthError(ErrorCode.InvalidParams, 'transform needs params.jobId and a stage of approval or resume');
    }
    const { tool } = this.servedTool(p.tool);
    const logs: LogLine[] = [];
    const sink = (level: string, message: string, data?: unknown) => this.answerLog(logs, p.jobId as string, level, message, data);
    const job = { id: p.jobId, tool: tool.id, attempt: 0, ...(p.job ?? {}) } as RunJob;
    // The approval stage's payload is the job's input (docs/WORKERS.md).
    const fields: TransformFields = p.stage === 'resume' ? { resumeData: p.payload, input: job.input } : { input: p.payload ?? job.input };
    const views: Views = {};
    await this.addViews(views, tool, p.stage, job, fields, sink);
    return logs.length > 0 ? { views, logs } : { views };
  }

  // addViews computes the views of one stage for each target the tool
  // transforms, with Mastra's rules: a stage without a function, a
  // function that throws, returns undefined or something JSON cannot carry
  // gives the placeholder, never the raw payload.
  private async addViews(views: Views, tool: ToolLike, stage: ViewStage, job: RunJob, fields: TransformFields,
    sink: (level: string, message: string, data?: unknown) => void): Promise<void> {
    for (const target of transformTargets(tool)) {
      const fn = tool.transform?.[target]?.[stage];
      let view: unknown;
      if (typeof fn === 'function') {
        try {
          view = await fn({
            target, phase: STAGE_PHASE[stage], toolName: tool.id, toolCallId: job.toolCallId ?? job.id,
            input: job.input, ...fields,
          });
          const why = view === undefined ? null : unsendable(view, VIEW_DEPTH);
          if (why) {
            sink('error', `transform.${target}.${stage} returned a value that ${why}; the view is a placeholder`);
            view = undefined;
          }
        } catch (e) {
          sink('error', `transform.${target}.${stage} threw: ${errMessage(e)}; the view is a placeholder`, errData(e));
          view = undefined;
        }
      }
      if (view === undefined) view = { message: `Tool ${STAGE_PHASE[stage]} payload unavailable` };
      (views[target as ViewTarget] ??= {})[stage] = view;
    }
  }

  // jobLog sends a line of the job's log while its run is here; it is
  // dropped once the connection is gone (berthd could not take it).
  // Its text is made safe to send (wire.ts): a log line is for reading.
  private jobLog(run: Run, level: string, message: string, data?: unknown): void {
    const lv = logLevel(level);
    const text = safeText(textOf(message));
    const params: Record<string, unknown> = { jobId: run.job.id, level: lv, message: text };
    if (data !== undefined) {
      const d = safeJson(data, 2);
      if (d !== undefined) params.data = d;
    }
    run.conn.notify('worker/log', params);
    if (lv === 'error' || lv === 'warn') this.log('debug', `job ${run.job.id}: ${text}`);
  }

  // answerLog keeps a line for the answer to input or transform, which
  // berthd adds to the job's log once the stage is committed (a job that
  // does not run here takes no worker/log), and logs it here too.
  private answerLog(logs: LogLine[], jobId: string, level: string, message: string, data?: unknown): void {
    const text = safeText(textOf(message));
    this.log('warn', `job ${jobId}: ${text}`);
    if (logs.length >= ANSWER_LOGS) return;
    const line: LogLine = { level: logLevel(level), message: text };
    // The answer's line holds it in result.logs[i].data.
    const d = safeJson(data, 4);
    if (d !== undefined) line.data = d;
    logs.push(line);
  }

  private log(level: 'debug' | 'info' | 'warn' | 'error', message: string): void {
    const l = this.logger;
    if (!l) return;
    const fn = l[level];
    if (typeof fn === 'function') fn.call(l, message);
  }

  private report(e: unknown): void {
    if (this.listenerCount('error') > 0) this.emit('error', e);
    else this.log('error', (e as Error).message);
  }
}

interface TransformFields {
  input?: unknown;
  output?: unknown;
  error?: unknown;
  suspendPayload?: unknown;
  resumeData?: unknown;
}

// stagePayload gives the fields a pending view of a stage needs from the
// job a run carries, or null when the job does not carry them.
function stagePayload(stage: ViewStage, job: RunJob): TransformFields | null {
  switch (stage) {
    case 'input':
    case 'approval':
      return { input: job.input };
    case 'resume':
      return job.resumeData === undefined ? null : { resumeData: job.resumeData };
    case 'suspend':
      return job.suspendPayload === undefined ? null : { suspendPayload: job.suspendPayload };
    default:
      return null;
  }
}

// registrationError turns berthd's refusal of worker/register into the
// error serve() rejects with; null for a dropped connection (try again).
function registrationError(e: unknown, address: Address): BerthError | null {
  if (!(e instanceof BerthError)) return new BerthError(ErrorCode.InternalError, errorText(e));
  if (e.code === ErrorCode.ConnectionClosed || e.code === ErrorCode.RequestTimeout) return null;
  // The SDK's own refusal to send it (rpc.ts: a definition berthd could not read) says so itself.
  if (e.message.startsWith('berth: ')) return e;
  if (e.code === ErrorCode.MethodNotFound) {
    return new BerthError(e.code, `berth: berthd at ${describeAddress(address)} does not speak the worker protocol (worker/register, docs/WORKERS.md): it is older than this SDK`, e.data);
  }
  if (e.code === ErrorCode.Conflict && e.status === 'conflict') {
    const diffs = (e.data as { differences?: Array<{ field?: string }> })?.differences ?? [];
    const fields = diffs.map((d) => d.field).filter(Boolean);
    return new BerthError(e.code, `berth: another connected worker serves a different definition of the tool${fields.length ? ` (differences at ${fields.join(', ')})` : ''}: ${e.message}`, e.data);
  }
  return new BerthError(e.code, `berth: berthd refused the tools: ${e.message}`, e.data);
}

// orClose resolves as p does, or with null once `stop` (the close) has
// aborted, whichever is first. Not Promise.race with a promise of the
// close: that promise stays pending until close(), and each race would
// leave a reaction on it that holds the race's outcome (the BerthError of
// a drop, with its stack), about 3 KB for every connection of a worker
// that reconnects for months. The listener here goes when p settles.
function orClose<T>(p: Promise<T>, stop: AbortSignal): Promise<T | null> {
  if (stop.aborted) return Promise.race([p, Promise.resolve(null)]);
  return new Promise<T | null>((resolve, reject) => {
    const onStop = () => resolve(null);
    stop.addEventListener('abort', onStop, { once: true });
    p.then(resolve, reject).finally(() => stop.removeEventListener('abort', onStop));
  });
}

// describeJobs names jobs in a log line: "job A", or "3 jobs (A, B, C)".
function describeJobs(ids: string[]): string {
  if (ids.length === 1) return `job ${ids[0]}`;
  return `${ids.length} jobs (${ids.slice(0, 10).join(', ')}${ids.length > 10 ? ', ...' : ''})`;
}

function abortReason(reason: string, message: string): Error {
  const e = new Error(`berth: ${message}`);
  e.name = 'AbortError';
  (e as Error & { reason: string }).reason = reason;
  return e;
}

async function callHook(fn: (...a: any[]) => unknown, name: string, arg: unknown,
  sink: (level: string, message: string, data?: unknown) => void): Promise<void> {
  try {
    await fn(arg);
  } catch (e) {
    sink('error', `${name} threw: ${errMessage(e)} (a hook never fails the job)`, errData(e));
  }
}

function isMastraValidationError(v: unknown): v is { error: true; message: string; validationErrors: unknown } {
  return v !== null && typeof v === 'object' && (v as { error?: unknown }).error === true &&
    'validationErrors' in v && typeof (v as { message?: unknown }).message === 'string';
}

// validationData is the data of a Mastra schema failure as berth gives
// every schema failure: errors [{instancePath, keyword, message}], one a
// message of Mastra's report (a tree: errors at each level, fields under
// it, keyed by the path's segments), with keyword "mastra" (the check was
// the tool's Standard Schema, not a JSON Schema keyword); Mastra's tree
// itself stays under fields.
function validationData(tree: unknown): unknown {
  type Node = { errors?: unknown; fields?: unknown };
  const errors: { instancePath: string; keyword: string; message: string }[] = [];
  const walk = (node: unknown, path: string, depth: number): void => {
    if (node === null || typeof node !== 'object' || depth > 64) return;
    const n = node as Node;
    if (Array.isArray(n.errors)) {
      for (const m of n.errors) errors.push({ instancePath: path, keyword: 'mastra', message: String(m) });
    }
    if (n.fields !== null && typeof n.fields === 'object') {
      for (const [k, v] of Object.entries(n.fields as Record<string, unknown>)) {
        walk(v, `${path}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`, depth + 1);
      }
    }
  };
  walk(tree, '', 0);
  const fields = (tree !== null && typeof tree === 'object') ? safeJson((tree as Node).fields) : undefined;
  return fields === undefined ? { errors } : { errors, fields };
}

function validationCode(message: string, job: RunJob): string {
  if (message.startsWith('Tool output validation failed')) return 'invalid_output';
  if (message.startsWith('Tool suspension data validation failed')) return 'invalid_suspend';
  if (message.startsWith('Request context validation failed')) return 'invalid_request_context';
  if (message.startsWith('Tool input validation failed')) return job.resumeData !== undefined ? 'invalid_resume_data' : 'invalid_input';
  return 'validation_failed';
}

// jobError is the error outcome of a thrown value. It never throws,
// whatever was thrown (an object without a prototype, a getter that
// throws): the run's answer depends on it, and a handler that threw would
// answer a JSON-RPC error, which berthd retries as worker_error whatever
// the tool said.
function jobError(e: unknown, aborted: boolean): { message: string; code?: string; data?: unknown; retryable: boolean } {
  let message = errorText(e);
  if (message === '') message = 'execute failed without a message';
  const out: { message: string; code?: string; data?: unknown; retryable: boolean } = { message, retryable: field(e, 'retryable') !== false };
  const code = field(e, 'code');
  if (typeof code === 'string') out.code = code;
  else if (aborted) out.code = 'aborted';
  // Where it is sent: result.error.data.
  const d = safeJson(field(e, 'data'), 3);
  if (d !== undefined) out.data = d;
  return out;
}

// How many arrays and objects hold a run's output, suspend payload and
// model output in the answer's line (the message, its result), and a view
// (also result.views.TARGET) in the answer to run, input or transform.
const OUTCOME_DEPTH = 2;
const VIEW_DEPTH = 4;

// checkJson gives the JSON text of v, a value inside `above` arrays and
// objects of its line, or says why berthd cannot take it: JSON cannot
// carry it (a BigInt, a cycle, a function), or berthd would refuse it
// (wire.ts: U+0000, a lone surrogate, an integer beyond 64 bits, nesting
// too deep).
function checkJson(v: unknown, above: number): { text: string } | { why: string } {
  let text: string | undefined;
  try {
    text = JSON.stringify(v);
  } catch (e) {
    return { why: `is not JSON: ${safeText(errMessage(e))}` };
  }
  if (text === undefined) {
    return { why: `is not JSON: ${typeof v === 'function' || typeof v === 'symbol' ? `it is a ${typeof v}` : 'its toJSON() returned undefined'}` };
  }
  const f = wireFault(text, above);
  if (f) return { why: `cannot be sent to berthd: ${describeFault(f)} (${WIRE_RULES})` };
  return { text };
}

// unsendable says why berthd cannot take v (checkJson), or returns null.
function unsendable(v: unknown, above: number): string | null {
  const r = checkJson(v, above);
  return 'why' in r ? r.why : null;
}

// An error message is cut to this many characters when the error's answer
// would be over the line limit (to fewer under a smaller limit).
const ERROR_MESSAGE_CUT = 64 * 1024;

// jsonOutcome makes sure that berthd takes the outcome: an output or
// suspend payload that JSON cannot carry (a BigInt, a cycle, a function),
// that berthd would refuse (checkJson), or whose answer would be over the
// line limit (`room` bytes for the text, of `limit` for the line) fails
// the run with that reason rather than the answer; an error is made safe
// to send, and cut to fit. The model output and the views were checked
// when they were made. It returns the outcome sent and its JSON text,
// which the answer carries as it is.
function jsonOutcome(outcome: Outcome, sink: (level: string, message: string, data?: unknown) => void,
  room: number, limit: number): [Outcome, string] {
  if ('error' in outcome) return errorOutcome(outcome, room);
  const key = 'output' in outcome ? 'output' : 'suspend';
  const what = key === 'output' ? 'output' : 'suspend payload';
  const fail = (message: string, data?: unknown): [Outcome, string] => {
    sink('error', message);
    const error = { message, code: key === 'output' ? 'invalid_output' : 'invalid_suspend', ...(data === undefined ? {} : { data }), retryable: false };
    return errorOutcome({ error }, room);
  };
  const value = key === 'output' ? (outcome as { output: unknown }).output : (outcome as { suspend: unknown }).suspend;
  const checked = checkJson(value, OUTCOME_DEPTH);
  if ('why' in checked) return fail(`the tool's ${what} ${checked.why}`);
  // The rest (the model output, the views) beside the value's own text,
  // so that a large output is serialized once.
  const { [key]: _value, ...rest } = outcome as Record<string, unknown>;
  const restText = JSON.stringify(rest);
  const text = `{${JSON.stringify(key)}:${checked.text}${restText === '{}' ? '' : `,${restText.slice(1, -1)}`}}`;
  const bytes = overLimit(text, room);
  if (bytes > 0) {
    const lineBytes = bytes + (limit - room);
    const extras = restText === '{}' ? '' : ', with its model output and views';
    return fail(`the tool's ${what} is ${utf8Bytes(checked.text)} bytes as JSON${extras}: the answer would be ${lineBytes} bytes as a line, ` +
      `over berthd's line limit of ${limit} bytes`, { bytes: lineBytes, limit });
  }
  return [outcome, text];
}

// errorOutcome is an error outcome made safe to send (wire.ts: its text
// through safeText, what JSON cannot carry left out), and cut to `room`
// bytes: a message that long loses its end, its data and views.
function errorOutcome(outcome: Extract<Outcome, { error: unknown }>, room: number): [Outcome, string] {
  const safe = (safeJson(outcome, 1) ?? { error: { message: 'the error could not be sent' } }) as Extract<Outcome, { error: unknown }>;
  const e = safe.error ?? { message: 'the error could not be sent' };
  e.retryable = outcome.error.retryable !== false;
  let text = JSON.stringify(safe);
  if (overLimit(text, room) === 0) return [safe, text];
  const message = typeof e.message === 'string' ? e.message : '';
  // A character takes 3 bytes at most, and a quarter of the room leaves
  // the rest of the line plenty.
  const keep = Math.min(ERROR_MESSAGE_CUT, Math.floor(room / 12));
  const cut: Outcome = {
    error: {
      message: message.length > keep
        ? `${safeText(message.slice(0, keep))}... (cut from ${utf8Bytes(message)} bytes, with its data: the error was over berthd's line limit)`
        : `${message} (its data is left out: the error was over berthd's line limit)`,
      retryable: e.retryable,
    },
  };
  if (typeof e.code === 'string' && e.code.length <= 128) cut.error.code = e.code;
  text = JSON.stringify(cut);
  return [cut, text];
}

function errMessage(e: unknown): string {
  return errorText(e);
}

// textOf is String(v), for any v (String of an object without a
// prototype throws): a log line's message as the tool gave it.
function textOf(v: unknown): string {
  if (typeof v === 'string') return v;
  try {
    return String(v);
  } catch {
    return errorText(v);
  }
}

function errData(e: unknown): Record<string, unknown> | undefined {
  let isError = false;
  try {
    isError = e instanceof Error;
  } catch {
    // A proxy whose getPrototypeOf throws.
  }
  if (!isError) return undefined;
  return dropUndefined({ name: field(e, 'name'), stack: field(e, 'stack') });
}

// isWireNumber says whether berthd takes n as a progress number: finite,
// and an integer within 64 bits.
function isWireNumber(n: unknown): boolean {
  return typeof n === 'number' && Number.isFinite(n) && !wireFault(JSON.stringify(n));
}

function logLevel(level: string): 'debug' | 'info' | 'warn' | 'error' {
  switch (level) {
    case 'debug':
    case 'info':
    case 'warn':
    case 'error':
      return level;
    case 'warning':
      return 'warn';
    case 'fatal':
    case 'critical':
    case 'alert':
    case 'emergency':
      return 'error';
    default:
      return 'info';
  }
}

function mcpLevel(level: string): string {
  return level === 'notice' ? 'info' : level;
}

function dropUndefined<T extends Record<string, unknown>>(o: T): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out as T;
}

// defaultLogger writes the worker's registrations, drops and errors to
// stderr, one line each; debug lines (each failed connection attempt) are
// left out.
function defaultLogger(name: string): Logger {
  const line = (m: string) => console.error(`berth worker ${name}: ${m}`);
  return { info: line, warn: line, error: line };
}

export type { Job, JobError };

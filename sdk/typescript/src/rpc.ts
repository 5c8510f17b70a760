// rpc.ts: one JSON-RPC 2.0 connection to berthd, framed as PROTOCOL.md says:
// one message per line, UTF-8 JSON ended by "\n" (a "\r" before it is
// tolerated). Requests are pipelined and their answers matched by id in any
// order; berthd's own requests (a worker's `run`, `ping`, ...) and
// notifications go to the handlers the owner gave. No line that berthd
// would refuse is sent (wire.ts): berthd could not say which line it
// refused when it cannot read the line's id.

import net from 'node:net';
import path from 'node:path';

import { BerthError, ErrorCode, closedError, rpcError } from './errors.js';
import { MAX_LINE_BYTES, WIRE_RULES, describeFault, overLimit, safeJson, safeText, wireFault } from './wire.js';

/** Where the SDK's messages go (a worker's, a client's); `false` in the options drops them. */
export interface Logger {
  debug?(message: string, ...rest: unknown[]): void;
  info?(message: string, ...rest: unknown[]): void;
  warn(message: string, ...rest: unknown[]): void;
  error(message: string, ...rest: unknown[]): void;
}

/** Where berthd listens: a Unix socket path, or a TCP address that needs a token. */
export type Address = { kind: 'unix'; path: string } | { kind: 'tcp'; host: string; port: number };

/** How to reach berthd; every field is optional (see resolveAddress). */
export interface Endpoint {
  /** The Unix socket's path (berthd --socket). */
  socket?: string;
  /** `tcp://HOST:PORT` (berthd --listen), `unix:///PATH`, or a path. */
  url?: string;
  /** The token of berthd's --token-file, sent with `server/auth` on TCP. Default: $BERTH_TOKEN. */
  token?: string;
}

/**
 * resolveAddress turns an Endpoint into an Address. Without socket and url it
 * takes $BERTH_SOCKET (a path, or the CLI's `tcp:HOST:PORT`), else
 * $XDG_RUNTIME_DIR/berth/berth.sock, else ./berth.sock: the places the
 * `berth` command looks. Throws a TypeError naming what is wrong.
 */
export function resolveAddress(ep: Endpoint): Address {
  if (ep.socket !== undefined && ep.url !== undefined) {
    throw new TypeError('berth: give either socket or url, not both');
  }
  if (ep.socket !== undefined) {
    if (typeof ep.socket !== 'string' || ep.socket === '') throw new TypeError('berth: socket must be a non-empty path');
    return { kind: 'unix', path: ep.socket };
  }
  if (ep.url !== undefined) return parseUrl(ep.url);
  const env = process.env.BERTH_SOCKET;
  if (env) return env.startsWith('tcp:') && !env.startsWith('tcp://') ? parseUrl(`tcp://${env.slice(4)}`) : parseUrl(env);
  const xdg = process.env.XDG_RUNTIME_DIR;
  return { kind: 'unix', path: xdg ? path.join(xdg, 'berth', 'berth.sock') : path.resolve('berth.sock') };
}

function parseUrl(url: string): Address {
  if (typeof url !== 'string' || url === '') throw new TypeError('berth: url must be a non-empty string');
  if (url.startsWith('unix:')) {
    const p = url.startsWith('unix://') ? url.slice('unix://'.length) : url.slice('unix:'.length);
    if (!p) throw new TypeError(`berth: ${url} names no socket path`);
    return { kind: 'unix', path: p };
  }
  if (url.startsWith('tcp://')) {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw new TypeError(`berth: ${url} is not a tcp://HOST:PORT address`);
    }
    const port = Number(u.port);
    if (!u.hostname || !Number.isInteger(port) || port <= 0 || port > 65535) {
      throw new TypeError(`berth: ${url} is not a tcp://HOST:PORT address (the port is needed)`);
    }
    const host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
    return { kind: 'tcp', host, port };
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) {
    throw new TypeError(`berth: ${url}: only tcp:// and unix: addresses are understood`);
  }
  return { kind: 'unix', path: url };
}

export function describeAddress(a: Address): string {
  return a.kind === 'unix' ? a.path : `tcp://${a.host.includes(':') ? `[${a.host}]` : a.host}:${a.port}`;
}

/**
 * A request of berthd's own, and the answer the handler gives. `room` is
 * the most bytes the result's JSON text may take for its answer to stay
 * within the line limit.
 */
export type RequestHandler = (method: string, params: unknown, room: number) => Promise<unknown>;
export type NotificationHandler = (method: string, params: unknown) => void;

export interface ConnectionOptions {
  /** Answers berthd's requests; without it every request gets -32601. */
  onRequest?: RequestHandler;
  onNotification?: NotificationHandler;
  /** Called after the answer to one of berthd's requests was written (or dropped, the connection being gone). */
  onAnswered?: (method: string) => void;
  /** Called once when the connection is gone, with why. */
  onClose?: (why: BerthError) => void;
  /**
   * A line from berthd larger than this closes the connection. Default
   * 256 MiB: berthd's answers may be longer than the lines it reads (a page
   * of jobs with large outputs).
   */
  maxLineBytes?: number;
  /**
   * The longest line sent to berthd, in bytes: berthd's line limit, 16 MiB
   * (docs/API.md, "Limits"), which berthd does not announce. A request
   * over it rejects without being sent.
   */
  maxSendLineBytes?: number;
  /** Where a line that berthd refused (its error of id null) is reported. */
  logger?: Logger | null;
}

/**
 * RawJson is a result that is JSON text already: a request handler that had
 * to serialize its result anyway (to check that JSON can carry it) returns
 * one, and the answer splices the text in instead of serializing it again.
 * @internal
 */
export class RawJson {
  constructor(readonly text: string) {}
}

/**
 * NO_ANSWER, returned by a request handler, answers nothing: the request
 * counts as answered (owed), and berthd decides its fate when the
 * connection closes. A worker's run that stopped at its own close()'s abort
 * returns it, so that berthd applies the tool's onInterrupt.
 * @internal
 */
export const NO_ANSWER: unique symbol = Symbol('berth.noAnswer');

interface Pending {
  method: string;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
  cleanup: () => void;
}

/**
 * Connection is one socket to berthd. Its requests are answered in any
 * order; when the socket closes, every unanswered request is rejected with
 * ErrorCode.ConnectionClosed. It never reconnects: its owner does.
 */
export class Connection {
  readonly address: Address;
  private readonly socket: net.Socket;
  private readonly opts: ConnectionOptions;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  // The bytes of the line being read, kept as chunks so that a long line
  // costs one copy when it ends rather than one per chunk.
  private partial: Buffer[] = [];
  private partialBytes = 0;
  private closeReason: BerthError | null = null;
  // The lines written in this turn of the event loop, which leave in one
  // write when it ends (flush): a batch of runs that berthd pushed in one
  // read is answered in one write, as berthd writes its batch in one.
  private out = '';
  private flushQueued = false;
  /**
   * When the last byte came from berthd (performance.now()): monotonic, so
   * that a wall clock set back does not make berthd's silence negative and
   * hold the heartbeat's ping off for as long as it was set back.
   */
  lastReceived = performance.now();
  private answersOwed = 0;
  /** The longest line this connection sends (ConnectionOptions.maxSendLineBytes). */
  readonly maxSendLineBytes: number;

  constructor(socket: net.Socket, address: Address, opts: ConnectionOptions = {}) {
    this.socket = socket;
    this.address = address;
    this.opts = opts;
    this.maxSendLineBytes = opts.maxSendLineBytes ?? MAX_LINE_BYTES;
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (err) => this.fail(closedError(`berth: connection to ${describeAddress(address)} failed: ${err.message}`, err)));
    socket.on('close', () => this.fail(closedError(`berth: berthd closed the connection (${describeAddress(address)})`)));
  }

  get closed(): boolean {
    return this.closeReason !== null;
  }

  /** Why the connection closed, once it has. */
  get reason(): BerthError | null {
    return this.closeReason;
  }

  /** The number of requests sent and not answered yet. */
  get inFlight(): number {
    return this.pending.size;
  }

  /**
   * The number of berthd's requests whose handler has not answered yet
   * (a worker's runs, input and transform questions); an answer counts once
   * written, or dropped with the connection, or withheld (NO_ANSWER).
   */
  get owed(): number {
    return this.answersOwed;
  }

  /**
   * request sends one request and resolves with its result, or rejects with
   * a BerthError (berthd's error, or ConnectionClosed), or with the signal's
   * reason when it aborts first (berthd's answer is then dropped). A
   * request that berthd would refuse unread (wire.ts) rejects at once with
   * the InvalidRequest berthd would answer, naming the limit or the place
   * in params; params that are not JSON reject with a TypeError.
   */
  request<T = unknown>(method: string, params?: unknown, signal?: AbortSignal): Promise<T> {
    if (this.closeReason) return Promise.reject(this.closeReason);
    if (signal?.aborted) return Promise.reject(signal.reason);
    const id = this.nextId++;
    const msg: Record<string, unknown> = { jsonrpc: '2.0', id, method };
    if (params !== undefined) msg.params = params;
    let line: string;
    try {
      line = JSON.stringify(msg);
    } catch (e) {
      return Promise.reject(new TypeError(`berth: the params of ${method} are not JSON: ${(e as Error).message}`));
    }
    const refused = this.refusal(method, line);
    if (refused) return Promise.reject(refused);
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        const p = this.pending.get(id);
        if (!p) return;
        this.pending.delete(id);
        p.cleanup();
        reject(signal!.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.pending.set(id, {
        method,
        resolve: resolve as (v: unknown) => void,
        reject,
        cleanup: () => signal?.removeEventListener('abort', onAbort),
      });
      this.send(line);
    });
  }

  /**
   * notify sends a notification (no answer), its params made safe to send
   * (wire.ts: safeJson) when berthd would refuse them. Returns false once
   * closed, and for a notification over the line limit, which is dropped
   * and logged.
   */
  notify(method: string, params?: unknown): boolean {
    if (this.closeReason) return false;
    const msg: Record<string, unknown> = { jsonrpc: '2.0', method };
    if (params !== undefined) msg.params = params;
    let line = JSON.stringify(msg);
    if (wireFault(line)) line = JSON.stringify(safeJson(msg));
    const bytes = overLimit(line, this.maxSendLineBytes);
    if (bytes > 0) {
      this.opts.logger?.warn(`berth: a ${method} of ${bytes} bytes was not sent: over berthd's line limit of ${this.maxSendLineBytes} bytes`);
      return false;
    }
    this.send(line);
    return true;
  }

  // refusal is the error berthd would answer the request `line` with,
  // unread, or null when berthd would read it.
  private refusal(method: string, line: string): BerthError | null {
    const limit = this.maxSendLineBytes;
    const bytes = overLimit(line, limit);
    if (bytes > 0) {
      return new BerthError(ErrorCode.InvalidRequest,
        `berth: ${method} was not sent: the request is ${bytes} bytes as a line, over berthd's line limit of ${limit} bytes`,
        { limit, bytes });
    }
    const fault = wireFault(line);
    if (!fault) return null;
    // The pointer into params, as the caller gave them.
    const pointer = fault.pointer.startsWith('/params') ? fault.pointer.slice('/params'.length) : fault.pointer;
    const where = describeFault({ ...fault, pointer });
    return new BerthError(ErrorCode.InvalidRequest,
      `berth: ${method} was not sent: berthd would refuse its params: ${where} (${WIRE_RULES})`,
      { instancePath: safeText(pointer) });
  }

  // send queues one line for the flush at the end of this turn of the loop
  // (process.nextTick runs once the promise jobs that the current callback
  // started are done, so the answers of a whole batch of runs share it).
  private send(line: string): void {
    this.out += line + '\n';
    if (this.flushQueued) return;
    this.flushQueued = true;
    process.nextTick(() => this.flush());
  }

  private flush(): void {
    this.flushQueued = false;
    if (this.out === '' || this.socket.destroyed) return;
    const out = this.out;
    this.out = '';
    this.socket.write(out);
  }

  /** close ends the connection; pending requests reject with `why`. */
  close(why?: string): void {
    this.flush();
    this.fail(closedError(why ?? 'berth: the connection was closed'));
    this.socket.destroy();
  }

  /** closeGracefully ends the connection after what was written has gone out. */
  closeGracefully(): Promise<void> {
    return new Promise((resolve) => {
      if (this.socket.destroyed) return resolve();
      this.socket.once('close', () => resolve());
      this.flush();
      this.socket.end();
      setTimeout(() => this.socket.destroy(), 1000).unref();
    });
  }

  private fail(why: BerthError): void {
    if (this.closeReason) return;
    this.closeReason = why;
    this.out = '';
    const pending = [...this.pending.values()];
    this.pending.clear();
    for (const p of pending) {
      p.cleanup();
      p.reject(why);
    }
    this.partial = [];
    this.partialBytes = 0;
    this.socket.destroy();
    this.opts.onClose?.(why);
  }

  private onData(chunk: Buffer): void {
    this.lastReceived = performance.now();
    const max = this.opts.maxLineBytes ?? 256 * 1024 * 1024;
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, start);
      if (nl < 0) break;
      let line: Buffer;
      if (this.partialBytes > 0) {
        this.partial.push(chunk.subarray(start, nl));
        line = Buffer.concat(this.partial);
        this.partial = [];
        this.partialBytes = 0;
      } else {
        line = chunk.subarray(start, nl);
      }
      start = nl + 1;
      this.onLine(line);
      if (this.closeReason) return;
    }
    if (start < chunk.length) {
      this.partial.push(chunk.subarray(start));
      this.partialBytes += chunk.length - start;
      if (this.partialBytes > max) {
        this.fail(new BerthError(ErrorCode.InvalidRequest,
          `berth: berthd sent a line longer than ${max} bytes; the connection was closed`, { limit: max }));
      }
    }
  }

  private onLine(buf: Buffer): void {
    let end = buf.length;
    if (end > 0 && buf[end - 1] === 0x0d) end--;
    if (end === 0) return;
    let msg: unknown;
    try {
      msg = JSON.parse(buf.toString('utf8', 0, end));
    } catch {
      // berthd never sends a malformed line; a peer that does is not
      // berthd, and nothing it says can be trusted to match a request.
      this.fail(new BerthError(ErrorCode.ParseError, 'berth: the peer sent a line that is not JSON; the connection was closed'));
      return;
    }
    if (Array.isArray(msg)) {
      for (const m of msg) this.onMessage(m);
    } else {
      this.onMessage(msg);
    }
  }

  private onMessage(msg: unknown): void {
    if (typeof msg !== 'object' || msg === null) return;
    const m = msg as { id?: unknown; method?: unknown; params?: unknown; result?: unknown; error?: unknown };
    if (typeof m.method === 'string') {
      if (m.id === undefined || m.id === null) {
        this.opts.onNotification?.(m.method, m.params);
      } else {
        this.answer(m.id, m.method, m.params);
      }
      return;
    }
    if (m.id === null && m.error !== undefined) {
      // berthd could not read a line of ours far enough to know its id
      // (wire.ts keeps such lines from being sent): no request is known
      // to be its, so none fails; the error is reported, never dropped.
      const e = rpcError(m.error);
      this.opts.logger?.error(`berth: berthd refused a line it could not read: ${e.message} (${e.code})`);
      return;
    }
    if (typeof m.id !== 'number') return;
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    p.cleanup();
    if (m.error !== undefined) p.reject(rpcError(m.error, p.method));
    else p.resolve(m.result);
  }

  private answer(id: unknown, method: string, params: unknown): void {
    const handler = this.opts.onRequest;
    this.answersOwed++;
    const reply = (body: Record<string, unknown>) => {
      this.answersOwed--;
      this.write(id, method, body);
      this.opts.onAnswered?.(method);
    };
    if (!handler) {
      reply({ error: { code: ErrorCode.MethodNotFound, message: `method not found: ${method}` } });
      return;
    }
    // The answer's line is the result's text in this envelope.
    const room = this.maxSendLineBytes - Buffer.byteLength(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":}`);
    handler(method, params, room).then(
      (result) => {
        if (result !== NO_ANSWER) {
          reply({ result: result === undefined ? {} : result });
          return;
        }
        this.answersOwed--;
        this.opts.onAnswered?.(method);
      },
      (err: unknown) => reply({ error: answerError(err) }),
    );
  }

  // write sends an answer. One that berthd would refuse becomes an error
  // answer that says why (or is made safe, for an error's text): a run's
  // outcome is checked before (worker.ts), so this is for the rest.
  private write(id: unknown, method: string, body: Record<string, unknown>): void {
    if (this.closeReason) return;
    const fail = (message: string) => JSON.stringify({ jsonrpc: '2.0', id, error: { code: ErrorCode.InternalError, message } });
    let line: string;
    try {
      // RawJson is a run's outcome, checked already but for its size.
      line = body.result instanceof RawJson
        ? `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${body.result.text}}`
        : JSON.stringify({ jsonrpc: '2.0', id, ...body });
      if (!(body.result instanceof RawJson)) {
        const fault = wireFault(line);
        if (fault && body.error !== undefined) line = JSON.stringify(safeJson({ jsonrpc: '2.0', id, ...body }));
        else if (fault) line = fail(`the answer to ${method} cannot be sent: ${describeFault(fault)} (${WIRE_RULES})`);
      }
    } catch (e) {
      line = fail(`the answer to ${method} is not JSON: ${safeText(errorText(e))}`);
    }
    const bytes = overLimit(line, this.maxSendLineBytes);
    if (bytes > 0) line = fail(`the answer to ${method} is ${bytes} bytes as a line, over berthd's line limit of ${this.maxSendLineBytes} bytes`);
    this.send(line);
  }
}

// answerError is the JSON-RPC error of a request handler that threw e,
// whatever e is: reading it must not throw in turn (a getter that throws,
// an object without a prototype), or the request would stay unanswered.
function answerError(e: unknown): Record<string, unknown> {
  const code = field(e, 'code');
  const error: Record<string, unknown> = {
    code: typeof code === 'number' ? code : ErrorCode.InternalError,
    message: errorText(e),
  };
  const data = safeJson(field(e, 'data'));
  if (data !== undefined) error.data = data;
  return error;
}

/**
 * field reads member k of a thrown value, whatever it is: undefined for a
 * primitive, and for a getter or a proxy that throws.
 * @internal
 */
export function field(e: unknown, k: string): unknown {
  if (e === null || (typeof e !== 'object' && typeof e !== 'function')) return undefined;
  try {
    return (e as Record<string, unknown>)[k];
  } catch {
    return undefined;
  }
}

/**
 * errorText is a thrown value as text, for any value, and never throws:
 * its message when it has one, else its String() (which throws for an
 * object without a prototype), else its JSON.
 * @internal
 */
export function errorText(e: unknown): string {
  const message = field(e, 'message');
  if (typeof message === 'string' && message !== '') return message;
  try {
    return String(e);
  } catch {
    // An object without a prototype, or whose toString throws.
  }
  try {
    const s = JSON.stringify(e);
    if (s !== undefined) return s;
  } catch {
    // A cycle, a BigInt.
  }
  try {
    return Object.prototype.toString.call(e);
  } catch {
    // A proxy whose every trap throws.
    return 'a thrown value that cannot be shown';
  }
}

export interface DialOptions extends ConnectionOptions {
  token?: string;
  signal?: AbortSignal;
  /** How long to wait for the socket (and for server/auth). Default 10 s. */
  timeoutMs?: number;
}

/**
 * dial connects to berthd and, on TCP, authenticates with the token (the
 * first request there must be `server/auth`). It resolves with a Connection,
 * or rejects with a BerthError: ConnectionClosed when nothing answers,
 * Unauthorized for a wrong token.
 */
export async function dial(address: Address, opts: DialOptions = {}): Promise<Connection> {
  const timeoutMs = opts.timeoutMs ?? 10000;
  const socket = await new Promise<net.Socket>((resolve, reject) => {
    if (opts.signal?.aborted) return reject(opts.signal.reason);
    const s = address.kind === 'unix' ? net.connect({ path: address.path }) : net.connect({ host: address.host, port: address.port });
    const timer = setTimeout(() => {
      // done() here too: the abort listener would otherwise stay on the
      // signal, which a worker keeps across all its attempts (one more
      // for each that timed out while berthd could not be reached).
      done();
      s.destroy();
      reject(new BerthError(ErrorCode.RequestTimeout, `berth: no answer from ${describeAddress(address)} within ${timeoutMs} ms`));
    }, timeoutMs);
    const onAbort = () => {
      s.destroy();
      done();
      reject(opts.signal!.reason);
    };
    const done = () => {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      s.removeListener('error', onError);
    };
    const onError = (err: NodeJS.ErrnoException) => {
      done();
      reject(closedError(`berth: cannot connect to berthd at ${describeAddress(address)}: ${err.code ?? err.message}` +
        (err.code === 'ENOENT' ? ' (is berthd running with this --socket?)' : ''), err));
    };
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    s.once('error', onError);
    s.once('connect', () => {
      done();
      resolve(s);
    });
  });
  if (address.kind === 'tcp') {
    socket.setNoDelay(true);
    // The kernel's keepalive finds a peer that vanished with the network;
    // a worker's own ping finds it sooner (worker.ts).
    socket.setKeepAlive(true, 15000);
  }
  const conn = new Connection(socket, address, opts);
  if (address.kind === 'tcp') {
    const token = opts.token ?? process.env.BERTH_TOKEN;
    if (!token) {
      conn.close();
      throw new BerthError(ErrorCode.Unauthorized,
        `berth: ${describeAddress(address)} is a TCP listener: give the token of berthd's --token-file (token, or $BERTH_TOKEN)`);
    }
    const timer = setTimeout(() => conn.close(`berth: server/auth was not answered within ${timeoutMs} ms`), timeoutMs);
    try {
      await conn.request('server/auth', { token }, opts.signal);
    } catch (e) {
      conn.close();
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }
  return conn;
}

/** backoffDelay is the wait before reconnect attempt n (0-based): 100 ms doubling to the cap. */
export function backoffDelay(attempt: number, initialMs = 100, maxMs = 5000): number {
  return Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
}

/** sleep waits ms, or rejects with the signal's reason. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

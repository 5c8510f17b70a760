import net from 'node:net';
import { BerthError } from './errors.js';
/** Where the SDK's messages go (a worker's, a client's); `false` in the options drops them. */
export interface Logger {
    debug?(message: string, ...rest: unknown[]): void;
    info?(message: string, ...rest: unknown[]): void;
    warn(message: string, ...rest: unknown[]): void;
    error(message: string, ...rest: unknown[]): void;
}
/** Where berthd listens: a Unix socket path, or a TCP address that needs a token. */
export type Address = {
    kind: 'unix';
    path: string;
} | {
    kind: 'tcp';
    host: string;
    port: number;
};
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
export declare function resolveAddress(ep: Endpoint): Address;
export declare function describeAddress(a: Address): string;
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
 * Connection is one socket to berthd. Its requests are answered in any
 * order; when the socket closes, every unanswered request is rejected with
 * ErrorCode.ConnectionClosed. It never reconnects: its owner does.
 */
export declare class Connection {
    readonly address: Address;
    private readonly socket;
    private readonly opts;
    private readonly pending;
    private nextId;
    private partial;
    private partialBytes;
    private closeReason;
    private out;
    private flushQueued;
    /**
     * When the last byte came from berthd (performance.now()): monotonic, so
     * that a wall clock set back does not make berthd's silence negative and
     * hold the heartbeat's ping off for as long as it was set back.
     */
    lastReceived: number;
    private answersOwed;
    /** The longest line this connection sends (ConnectionOptions.maxSendLineBytes). */
    readonly maxSendLineBytes: number;
    constructor(socket: net.Socket, address: Address, opts?: ConnectionOptions);
    get closed(): boolean;
    /** Why the connection closed, once it has. */
    get reason(): BerthError | null;
    /** The number of requests sent and not answered yet. */
    get inFlight(): number;
    /**
     * The number of berthd's requests whose handler has not answered yet
     * (a worker's runs, input and transform questions); an answer counts once
     * written, or dropped with the connection, or withheld (NO_ANSWER).
     */
    get owed(): number;
    /**
     * request sends one request and resolves with its result, or rejects with
     * a BerthError (berthd's error, or ConnectionClosed), or with the signal's
     * reason when it aborts first (berthd's answer is then dropped). A
     * request that berthd would refuse unread (wire.ts) rejects at once with
     * the InvalidRequest berthd would answer, naming the limit or the place
     * in params; params that are not JSON reject with a TypeError.
     */
    request<T = unknown>(method: string, params?: unknown, signal?: AbortSignal): Promise<T>;
    /**
     * notify sends a notification (no answer), its params made safe to send
     * (wire.ts: safeJson) when berthd would refuse them. Returns false once
     * closed, and for a notification over the line limit, which is dropped
     * and logged.
     */
    notify(method: string, params?: unknown): boolean;
    private refusal;
    private send;
    private flush;
    /** close ends the connection; pending requests reject with `why`. */
    close(why?: string): void;
    /** closeGracefully ends the connection after what was written has gone out. */
    closeGracefully(): Promise<void>;
    private fail;
    private onData;
    private onLine;
    private onMessage;
    private answer;
    private write;
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
export declare function dial(address: Address, opts?: DialOptions): Promise<Connection>;
/** backoffDelay is the wait before reconnect attempt n (0-based): 100 ms doubling to the cap. */
export declare function backoffDelay(attempt: number, initialMs?: number, maxMs?: number): number;
/** sleep waits ms, or rejects with the signal's reason. */
export declare function sleep(ms: number, signal?: AbortSignal): Promise<void>;

/**
 * The error codes of docs/PROTOCOL.md, and the two the SDK adds for the
 * connection itself. ConnectionClosed and RequestTimeout take the values the
 * MCP TypeScript SDK gives them (McpError's ErrorCode), in the range JSON-RPC
 * leaves to implementations, so they never collide with berthd's own.
 */
export declare const ErrorCode: {
    readonly ParseError: -32700;
    readonly InvalidRequest: -32600;
    readonly MethodNotFound: -32601;
    readonly InvalidParams: -32602;
    readonly InternalError: -32603;
    /** The connection closed, or could not be made, before an answer came. */
    readonly ConnectionClosed: -32000;
    /** The SDK gave up waiting (a connect or a worker's request timed out, or berthd did not answer a wait by its timeoutMs). */
    readonly RequestTimeout: -32001;
    readonly Unauthorized: -32010;
    readonly NotFound: -32011;
    readonly Conflict: -32012;
    readonly Overloaded: -32013;
    readonly StorageFailure: -32014;
};
export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];
/** One schema error, as berthd reports it in `data.errors` of a -32602. */
export interface SchemaError {
    instancePath: string;
    keyword: string;
    message: string;
}
/**
 * BerthError is a JSON-RPC error from berthd, with its `code`, `message` and
 * `data` as they came (PROTOCOL.md's table), or a connection failure with
 * code ErrorCode.ConnectionClosed. A -32602 for input that fails a tool's
 * schema lists each failure in `errors`, and the message names them.
 */
export declare class BerthError extends Error {
    readonly name = "BerthError";
    readonly code: number;
    readonly data: unknown;
    constructor(code: number, message: string, data?: unknown, options?: {
        cause?: unknown;
    });
    /** The schema errors of a -32602, or an empty list. */
    get errors(): SchemaError[];
    /** berthd's `data.status` of a -32012 conflict (the job's status, "registered", ...). */
    get status(): string | undefined;
}
/**
 * rpcError makes a BerthError from a JSON-RPC error object. The message
 * gains the schema errors' paths, so that a log line of the error alone
 * says what was wrong and where.
 */
export declare function rpcError(error: unknown, method?: string): BerthError;
/** closedError is the error of a request cut off by a closed connection. */
export declare function closedError(why: string, cause?: unknown): BerthError;
/**
 * NonRetryableError, thrown from a tool's `execute`, fails the job at once
 * even while it has retries left (berth's `retryable: false`; BullMQ calls
 * the same thing UnrecoverableError). An error with `retryable: false` as a
 * property does the same.
 */
export declare class NonRetryableError extends Error {
    readonly name: string;
    readonly retryable = false;
    readonly code: string | undefined;
    readonly data: unknown;
    constructor(message: string, options?: {
        code?: string;
        data?: unknown;
        cause?: unknown;
    });
}

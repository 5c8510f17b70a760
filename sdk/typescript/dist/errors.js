// errors.ts: BerthError, the one error the SDK throws for what berthd (or
// the connection to it) refused, and the codes it carries.
/**
 * The error codes of docs/PROTOCOL.md, and the two the SDK adds for the
 * connection itself. ConnectionClosed and RequestTimeout take the values the
 * MCP TypeScript SDK gives them (McpError's ErrorCode), in the range JSON-RPC
 * leaves to implementations, so they never collide with berthd's own.
 */
export const ErrorCode = {
    ParseError: -32700,
    InvalidRequest: -32600,
    MethodNotFound: -32601,
    InvalidParams: -32602,
    InternalError: -32603,
    /** The connection closed, or could not be made, before an answer came. */
    ConnectionClosed: -32000,
    /** The SDK gave up waiting (a connect or a worker's request timed out, or berthd did not answer a wait by its timeoutMs). */
    RequestTimeout: -32001,
    Unauthorized: -32010,
    NotFound: -32011,
    Conflict: -32012,
    Overloaded: -32013,
    StorageFailure: -32014,
};
/**
 * BerthError is a JSON-RPC error from berthd, with its `code`, `message` and
 * `data` as they came (PROTOCOL.md's table), or a connection failure with
 * code ErrorCode.ConnectionClosed. A -32602 for input that fails a tool's
 * schema lists each failure in `errors`, and the message names them.
 */
export class BerthError extends Error {
    name = 'BerthError';
    code;
    data;
    constructor(code, message, data, options) {
        super(message, options);
        this.code = code;
        this.data = data;
    }
    /** The schema errors of a -32602, or an empty list. */
    get errors() {
        const d = this.data;
        return d && Array.isArray(d.errors) ? d.errors : [];
    }
    /** berthd's `data.status` of a -32012 conflict (the job's status, "registered", ...). */
    get status() {
        const d = this.data;
        return d && typeof d.status === 'string' ? d.status : undefined;
    }
}
/**
 * rpcError makes a BerthError from a JSON-RPC error object. The message
 * gains the schema errors' paths, so that a log line of the error alone
 * says what was wrong and where.
 */
export function rpcError(error, method) {
    const e = (error ?? {});
    const code = typeof e.code === 'number' ? e.code : ErrorCode.InternalError;
    let message = typeof e.message === 'string' ? e.message : 'berthd answered with an error without a message';
    const errs = e.data?.errors;
    if (Array.isArray(errs) && errs.length > 0) {
        const shown = errs.slice(0, 5).map((x) => {
            const se = x;
            return `${se.instancePath || '/'}: ${se.message ?? se.keyword ?? 'invalid'}`;
        });
        const more = errs.length > 5 ? ` (and ${errs.length - 5} more)` : '';
        if (!shown.every((s) => message.includes(s)))
            message += ` (${shown.join('; ')}${more})`;
    }
    if (method)
        message = `${method}: ${message}`;
    return new BerthError(code, message, e.data);
}
/** closedError is the error of a request cut off by a closed connection. */
export function closedError(why, cause) {
    return new BerthError(ErrorCode.ConnectionClosed, why, undefined, cause === undefined ? undefined : { cause });
}
/**
 * NonRetryableError, thrown from a tool's `execute`, fails the job at once
 * even while it has retries left (berth's `retryable: false`; BullMQ calls
 * the same thing UnrecoverableError). An error with `retryable: false` as a
 * property does the same.
 */
export class NonRetryableError extends Error {
    name = 'NonRetryableError';
    retryable = false;
    code;
    data;
    constructor(message, options) {
        super(message, options?.cause === undefined ? undefined : { cause: options.cause });
        this.code = options?.code;
        this.data = options?.data;
    }
}

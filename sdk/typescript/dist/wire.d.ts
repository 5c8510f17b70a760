/** berthd's line limit in bytes, not counting the "\n" (api/server.c). */
export declare const MAX_LINE_BYTES: number;
/** The deepest nesting of arrays and objects berthd takes in a line. */
export declare const MAX_DEPTH = 64;
/** What in a value berthd would refuse, and where (a JSON pointer into the value). */
export interface WireFault {
    pointer: string;
    problem: string;
}
/**
 * utf8Bytes is the length of s in UTF-8. A string of n code units takes n
 * to 3n bytes, so a long line is measured only when it could be near a
 * limit.
 */
export declare function utf8Bytes(s: string): number;
/** overLimit returns the length in bytes of the line `text` when it is over `limit`, else 0. */
export declare function overLimit(text: string, limit: number): number;
/**
 * wireFault finds what berthd would refuse in `text`, the JSON text of a
 * value that sits inside `above` arrays and objects of its line (0 for the
 * line itself), or returns null. The pointer is into that value.
 */
export declare function wireFault(text: string, above?: number): WireFault | null;
/** describeFault is a fault in words, itself safe to send: "/a/b holds U+0000". */
export declare function describeFault(f: WireFault): string;
/**
 * WIRE_RULES says in a few words what berthd takes, for the messages of
 * the errors that a fault makes.
 */
export declare const WIRE_RULES = "berthd takes no U+0000 in a string, no lone surrogate, integers only within 64 bits, and 64 levels of nesting";
/**
 * safeText is s with what berthd refuses in a string replaced by U+FFFD
 * (U+0000, each lone surrogate), as String.prototype.toWellFormed does
 * with the latter.
 */
export declare function safeText(s: string): string;
/**
 * safeJson is v as JSON would carry it, made safe to send inside `above`
 * arrays and objects of a line: strings and member names through
 * safeText, an integer beyond 64 bits as its decimal string, and what
 * nests too deep as the string "[nested too deep]". Returns undefined for
 * a value JSON cannot carry (a BigInt, a cycle, a function). For text of
 * the SDK's own making (log lines, error data), never for a tool's output.
 */
export declare function safeJson(v: unknown, above?: number): unknown;

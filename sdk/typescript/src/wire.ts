// wire.ts: what berthd takes in a line, checked before a line is sent.
//
// berthd refuses a line longer than its line limit (16 MiB, docs/API.md
// "Limits"; it does not announce it, in server/info or in the answer to
// worker/register), a line nested deeper than 64 arrays and objects, and
// one that holds U+0000 in a string or a member name, a lone surrogate
// (docs/PROTOCOL.md: berth reads UTF-8) or an integer beyond 64 bits. A
// request in such a line gets an error, but the answer to one of berthd's
// requests, or a notification, is dropped (with an error of id null, or
// nothing at all): a run so answered would hold its job until its
// timeout. JSON.stringify takes all of these, so the SDK checks its lines
// itself: a request that berthd would refuse rejects before it is sent, a
// run's output or suspend payload fails the run, and text of the SDK's own
// making (a log line, an error message) is made safe instead.

/** berthd's line limit in bytes, not counting the "\n" (api/server.c). */
export const MAX_LINE_BYTES = 16 * 1024 * 1024;

/** The deepest nesting of arrays and objects berthd takes in a line. */
export const MAX_DEPTH = 64;

/** What in a value berthd would refuse, and where (a JSON pointer into the value). */
export interface WireFault {
  pointer: string;
  problem: string;
}

// A lone surrogate: a high one not followed by a low one, or a low one
// not preceded by a high one (code units, so without the u flag).
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');

// 2^63: an integer at or above it, or below -2^63, is beyond 64 bits.
// JSON.stringify writes a number from 1e21 up with an exponent, which
// berthd reads as a real.
const INT64_LIMIT = 2 ** 63;

/**
 * utf8Bytes is the length of s in UTF-8. A string of n code units takes n
 * to 3n bytes, so a long line is measured only when it could be near a
 * limit.
 */
export function utf8Bytes(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

/** overLimit returns the length in bytes of the line `text` when it is over `limit`, else 0. */
export function overLimit(text: string, limit: number): number {
  if (text.length * 3 <= limit) return 0;
  if (text.length > limit) return utf8Bytes(text);
  const bytes = utf8Bytes(text);
  return bytes > limit ? bytes : 0;
}

/**
 * wireFault finds what berthd would refuse in `text`, the JSON text of a
 * value that sits inside `above` arrays and objects of its line (0 for the
 * line itself), or returns null. The pointer is into that value.
 */
export function wireFault(text: string, above = 0): WireFault | null {
  if (!suspect(text, MAX_DEPTH - above)) return null;
  return walk(JSON.parse(text), '', above);
}

// suspect says whether the JSON text `text` may hold a fault: what
// JSON.stringify writes for one, "\u0000", a lone surrogate as "\udXXX" (a
// pair is written as it is), an integer of 19 digits or more, or arrays
// and objects nested deeper than `limit` (counted as berthd counts them
// before it parses a line, api_json_depth). It may be a false alarm (a
// backslash of the text itself before "u0000"): the walk of the value
// decides. One pass over what is outside strings, which it steps over with
// indexOf, as it looks for the escapes: a regular expression took as long
// as JSON.stringify.
function suspect(text: string, limit: number): boolean {
  if (text.includes('\\u0000')) return true;
  for (let i = text.indexOf('\\ud'); i >= 0; i = text.indexOf('\\ud', i + 3)) {
    const c = text.charCodeAt(i + 3);
    // 8 to 9, a to f: D800 to DFFF.
    if ((c >= 0x38 && c <= 0x39) || (c >= 0x61 && c <= 0x66)) return true;
  }
  let depth = 0;
  let digits = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x30 && c <= 0x39) {
      if (++digits >= 19) return true;
      continue;
    }
    digits = 0;
    if (c === 0x22) {
      // To the closing quote: the first one after an even run of backslashes.
      for (;;) {
        const q = text.indexOf('"', i + 1);
        if (q < 0) return true;
        let b = q - 1;
        while (text.charCodeAt(b) === 0x5c) b--;
        i = q;
        if ((q - 1 - b) % 2 === 0) break;
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

function walk(v: unknown, pointer: string, depth: number): WireFault | null {
  if (typeof v === 'string') {
    const p = textProblem(v);
    return p ? { pointer, problem: `holds ${p}` } : null;
  }
  if (typeof v === 'number') {
    return tooBig(v) ? { pointer, problem: `is the integer ${JSON.stringify(v)}, beyond 64 bits` } : null;
  }
  if (v === null || typeof v !== 'object') return null;
  if (depth + 1 > MAX_DEPTH) {
    return { pointer, problem: `nests deeper than berthd takes (${MAX_DEPTH} arrays and objects in a line)` };
  }
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const f = walk(v[i], `${pointer}/${i}`, depth + 1);
      if (f) return f;
    }
    return null;
  }
  for (const [k, x] of Object.entries(v)) {
    const at = `${pointer}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`;
    const p = textProblem(k);
    if (p) return { pointer: at, problem: `has a member name that holds ${p}` };
    const f = walk(x, at, depth + 1);
    if (f) return f;
  }
  return null;
}

// textProblem names what berthd refuses in a string, or returns null.
function textProblem(s: string): string | null {
  if (s.includes('\0')) return 'U+0000';
  const m = LONE_SURROGATE.exec(s);
  if (m) return `a lone surrogate (U+${m[0].charCodeAt(0).toString(16).toUpperCase()})`;
  return null;
}

function tooBig(n: number): boolean {
  return Number.isInteger(n) && Math.abs(n) < 1e21 && (n >= INT64_LIMIT || n < -INT64_LIMIT);
}

/** describeFault is a fault in words, itself safe to send: "/a/b holds U+0000". */
export function describeFault(f: WireFault): string {
  return `${safeText(f.pointer) || '/'} ${f.problem}`;
}

/**
 * WIRE_RULES says in a few words what berthd takes, for the messages of
 * the errors that a fault makes.
 */
export const WIRE_RULES = 'berthd takes no U+0000 in a string, no lone surrogate, integers only within 64 bits, and 64 levels of nesting';

/**
 * safeText is s with what berthd refuses in a string replaced by U+FFFD
 * (U+0000, each lone surrogate), as String.prototype.toWellFormed does
 * with the latter.
 */
export function safeText(s: string): string {
  if (!s.includes('\0') && !LONE_SURROGATE.test(s)) return s;
  return s.replace(/\0/g, '\ufffd').replace(LONE_SURROGATES, '\ufffd');
}

/**
 * safeJson is v as JSON would carry it, made safe to send inside `above`
 * arrays and objects of a line: strings and member names through
 * safeText, an integer beyond 64 bits as its decimal string, and what
 * nests too deep as the string "[nested too deep]". Returns undefined for
 * a value JSON cannot carry (a BigInt, a cycle, a function). For text of
 * the SDK's own making (log lines, error data), never for a tool's output.
 */
export function safeJson(v: unknown, above = 0): unknown {
  let text: string | undefined;
  try {
    text = JSON.stringify(v);
  } catch {
    return undefined;
  }
  if (text === undefined) return undefined;
  const parsed: unknown = JSON.parse(text);
  return wireFault(text, above) ? clean(parsed, above) : parsed;
}

function clean(v: unknown, depth: number): unknown {
  if (typeof v === 'string') return safeText(v);
  if (typeof v === 'number') return tooBig(v) ? JSON.stringify(v) : v;
  if (v === null || typeof v !== 'object') return v;
  if (depth + 1 > MAX_DEPTH) return '[nested too deep]';
  if (Array.isArray(v)) return v.map((x) => clean(x, depth + 1));
  const out: Record<string, unknown> = {};
  // defineProperty, so that a member named __proto__ stays a member.
  for (const [k, x] of Object.entries(v)) {
    Object.defineProperty(out, safeText(k), { value: clean(x, depth + 1), enumerable: true, writable: true, configurable: true });
  }
  return out;
}

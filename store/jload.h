/*
 * jload.h: JSON texts parsed into jansson values, as json_loadb parses
 * them, only faster for the texts berthd reads most.
 *
 * Every request line, every JSON column of a job read back and every line
 * a tool writes was parsed by json_loadb, whose lexer reads a byte at a
 * time through a stream (a function call a byte) into a growing buffer:
 * about 20,400 instructions for the 96-byte jobs/submit line of an e2e
 * benchmark, 11 % of all berthd's instructions a job. store_json_load
 * builds the same value for the common texts straight from the bytes in
 * about 4,900 (docs/BENCHMARKS.md, "After run 12: what parsing a request
 * line costs"), and leaves every other text to json_loadb itself: the
 * mirror image of store_json_text, which writes the common values and
 * leaves the others to json_dumps.
 *
 * It lives in the store because the store is the component that api/,
 * http/ and worker/ all depend on (docs/DESIGN.md).
 */
#ifndef BERTH_STORE_JLOAD_H
#define BERTH_STORE_JLOAD_H

#include <stddef.h>

#include <jansson.h>

/*
 * STORE__JLOAD_MAX_DEPTH is the deepest nesting of arrays and objects the
 * fast path builds (counted as api_json_depth counts it: the outermost
 * array or object is 1). It is berthd's default limit on a request line,
 * so every line it accepts by default can take the fast path; deeper
 * texts go to jansson, whose own limit is 2048.
 */
#define STORE__JLOAD_MAX_DEPTH 64

/*
 * store_json_load returns a new reference to the value of the n bytes at
 * s, equal in every respect to what json_loadb(s, n, flags, err) returns:
 * the same types and values, object members in the same order, the same
 * strings byte for byte, and err (when not NULL) set as json_loadb sets
 * it. A text the fast path does not take, and every text that is not
 * valid JSON, is parsed by json_loadb itself, so NULL comes with
 * jansson's own error text, line, column and position.
 *
 * The fast path takes, with flags 0 or JSON_DECODE_ANY (any other flag
 * goes to jansson):
 *   - objects (no key twice), arrays, true, false and null, nested at
 *     most STORE__JLOAD_MAX_DEPTH deep, with JSON whitespace (space, tab,
 *     LF, CR) around any token; with flags 0 only an object or an array
 *     at the top, as json_loadb requires;
 *   - strings of the printable ASCII bytes 0x20-0x7e and the escapes
 *     \" \\ \/ \b \f \n \r \t (no \u: it may name a NUL or a character
 *     beyond ASCII, which jansson checks and encodes);
 *   - integers of at most 18 digits without a leading zero ("0" itself,
 *     not "-0"); a fraction or an exponent makes a real, which is
 *     jansson's to convert.
 */
json_t *store_json_load(const char *s, size_t n, size_t flags,
			json_error_t *err);

/*
 * store__json_load_fast is store_json_load's fast path alone: the same
 * value, or NULL (err untouched) where store_json_load would hand the text
 * to json_loadb. The tests use it to see that the texts meant for the
 * fast path take it.
 */
json_t *store__json_load_fast(const char *s, size_t n, size_t flags,
			      json_error_t *err);

#endif

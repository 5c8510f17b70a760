/*
 * jscan.h: finds a member of a JSON object in the text of a line without
 * building a tree.
 *
 * The load generator reads every reply and every event of a run; parsing
 * each into a jansson tree would spend on the generator's side of a
 * two-core machine the CPU that the daemon under test needs. jscan walks
 * only the top level of one object and skips nested values whole, so a
 * "type" or "id" inside a job's input or output is never mistaken for the
 * member asked for. It trusts the line to be valid JSON (berthd writes it
 * with jansson); on text it cannot walk it returns not found.
 */
#ifndef BERTH_BENCH_JSCAN_H
#define BERTH_BENCH_JSCAN_H

#include <stdbool.h>
#include <stddef.h>

/* jscan_member finds the member key of the object that starts at obj (at
 * or after leading white space). Returns a pointer to the first character
 * of its value (borrowed, inside obj) or NULL. */
const char *jscan_member(const char *obj, const char *key);

/* jscan_string copies the string value at v (from jscan_member) without
 * its quotes into out, which holds size bytes. Escapes are copied as they
 * are (ids and status names have none). Returns false when v is not a
 * string or does not fit. */
bool jscan_string(const char *v, char *out, size_t size);

/* jscan_is reports whether the value at v is the string s. */
bool jscan_is(const char *v, const char *s);

#endif

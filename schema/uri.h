/*
 * uri: RFC 3986 reference resolution, enough to follow "$id" and "$ref".
 * Internal to schema/ (hence the double prefix).
 */
#ifndef BERTH_SCHEMA_URI_H
#define BERTH_SCHEMA_URI_H

#include <stdbool.h>

/* schema__uri_resolve returns ref resolved against base (RFC 3986 section
 * 5.2) as a new malloc'd string, or NULL when out of memory.  base may be
 * NULL or "" (no base): then the result is ref with its dot segments
 * removed.  An empty fragment ("x#") is dropped. */
char *schema__uri_resolve(const char *base, const char *ref);

/* schema__uri_is_absolute returns true when s starts with a scheme. */
bool schema__uri_is_absolute(const char *s);

#endif

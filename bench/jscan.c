/*
 * jscan.c: a walk over the top level of one JSON object (jscan.h).
 */
#include "jscan.h"

#include <string.h>

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
		p++;
	return p;
}

/* skip_string returns the character after the string that starts at p
 * (on its opening quote), or NULL. */
static const char *skip_string(const char *p)
{
	for (p++; *p; p++) {
		if (*p == '\\') {
			if (!p[1])
				return NULL;
			p++;
		} else if (*p == '"') {
			return p + 1;
		}
	}
	return NULL;
}

/* skip_value returns the character after the value that starts at p, or
 * NULL. Objects and arrays are skipped by counting brackets outside
 * strings, which is all a value's extent needs. */
static const char *skip_value(const char *p)
{
	int depth = 0;

	if (*p == '"')
		return skip_string(p);
	if (*p != '{' && *p != '[') {
		while (*p && *p != ',' && *p != '}' && *p != ']' && *p != ' ' &&
		       *p != '\t' && *p != '\r' && *p != '\n')
			p++;
		return p;
	}
	for (; *p; p++) {
		if (*p == '"') {
			p = skip_string(p);
			if (!p)
				return NULL;
			p--;
		} else if (*p == '{' || *p == '[') {
			depth++;
		} else if (*p == '}' || *p == ']') {
			if (--depth == 0)
				return p + 1;
		}
	}
	return NULL;
}

const char *jscan_member(const char *obj, const char *key)
{
	size_t klen = strlen(key);
	const char *p = skip_ws(obj);

	if (*p != '{')
		return NULL;
	p = skip_ws(p + 1);
	while (*p == '"') {
		const char *name = p + 1;
		const char *end = skip_string(p);
		bool match;

		if (!end)
			return NULL;
		match = (size_t)(end - 1 - name) == klen &&
			memcmp(name, key, klen) == 0;
		p = skip_ws(end);
		if (*p != ':')
			return NULL;
		p = skip_ws(p + 1);
		if (match)
			return p;
		p = skip_value(p);
		if (!p)
			return NULL;
		p = skip_ws(p);
		if (*p != ',')
			return NULL;
		p = skip_ws(p + 1);
	}
	return NULL;
}

bool jscan_string(const char *v, char *out, size_t size)
{
	const char *end;
	size_t len;

	if (!v || *v != '"')
		return false;
	end = skip_string(v);
	if (!end)
		return false;
	len = (size_t)(end - v) - 2;
	if (len >= size)
		return false;
	memcpy(out, v + 1, len);
	out[len] = '\0';
	return true;
}

bool jscan_is(const char *v, const char *s)
{
	size_t len = strlen(s);

	return v && *v == '"' && strncmp(v + 1, s, len) == 0 &&
	       v[len + 1] == '"';
}

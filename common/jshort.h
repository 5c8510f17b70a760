/*
 * jshort.h: berth_json_short, JSON text for people and models to read,
 * with each real in the fewest digits that read back as the same value:
 * 66.2, not jansson's 66.200000000000003 (it writes every real with 17
 * significant digits, which always read back, but say more than the
 * value). The berth command prints it, and berthd shows it to a model in
 * an MCP result's text. Header-only for the reason duration.h is: the CLI
 * and the daemon share it without depending on each other.
 */
#ifndef BERTH_COMMON_JSHORT_H
#define BERTH_COMMON_JSHORT_H

#include <stdbool.h>
#include <stdlib.h>

#include <jansson.h>

/* berth_json_has_real tells whether v holds a real anywhere. */
static inline bool berth_json_has_real(const json_t *v)
{
	const char *key;
	const json_t *e;
	size_t i;

	if (json_is_real(v))
		return true;
	if (json_is_array(v)) {
		json_array_foreach(v, i, e)
			if (berth_json_has_real(e))
				return true;
	} else if (json_is_object(v)) {
		json_object_foreach((json_t *)v, key, e)
			if (berth_json_has_real(e))
				return true;
	}
	return false;
}

/*
 * berth_json_short returns json_dumps(v, flags | JSON_ENCODE_ANY), with
 * the reals written in 15 significant digits, else 16, else 17: the
 * fewest with which the whole text reads back equal to v. NULL without
 * memory.
 */
static inline char *berth_json_short(const json_t *v, size_t flags)
{
	flags |= JSON_ENCODE_ANY;
	if (!berth_json_has_real(v))
		return json_dumps(v, flags);
	for (int digits = 15; digits < 17; digits++) {
		char *s = json_dumps(v, flags | JSON_REAL_PRECISION(digits));
		json_t *back = s ? json_loads(s, JSON_DECODE_ANY, NULL) : NULL;
		bool same = back && json_equal((json_t *)v, back);

		json_decref(back);
		if (same)
			return s;
		free(s);
	}
	return json_dumps(v, flags | JSON_REAL_PRECISION(17));
}

#endif

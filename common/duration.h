/*
 * duration.h: the one syntax of durations that berthd's options and the
 * berth command share. A duration is a number of milliseconds ("250"), or
 * a number with a unit: "250ms", "1.5s", "2m", "1h", "7d". Bare numbers
 * stay milliseconds, as every option that took one did before units.
 *
 * It is header-only and keeps no state: DESIGN.md lets the CLI depend on
 * the public client API alone, and the daemon on nothing of the CLI, yet
 * both must read "7d" alike, or a value that works in one place would be
 * refused in the other. A function of the text alone, included by both,
 * shares the syntax without a dependency between the two.
 */
#ifndef BERTH_COMMON_DURATION_H
#define BERTH_COMMON_DURATION_H

#include <stdint.h>
#include <string.h>

/* The longest duration: 2^42 ms, about 139 years, the bound the api puts
 * on every milliseconds param (api/methods.c). */
#define BERTH_DURATION_MAX ((int64_t)1 << 42)

/*
 * berth_parse_duration reads s into *ms and returns 0, or returns -1 and
 * leaves *ms alone when s is not a duration: empty, a sign, a space, an
 * exponent, a unit other than ms, s, m, h and d, or more than
 * BERTH_DURATION_MAX. A fraction is allowed with any unit ("1.5s" is
 * 1500); what is left below a millisecond is dropped ("0.5ms" is 0).
 */
static inline int berth_parse_duration(const char *s, int64_t *ms)
{
	static const struct {
		const char *name;
		int64_t ms;
	} units[] = {{"", 1},	    {"ms", 1},	     {"s", 1000},
		     {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
	int64_t whole = 0, frac = 0, scale = 1, unit = -1, total;
	const char *p = s;
	int digits = 0;

	if (!s)
		return -1;
	for (; *p >= '0' && *p <= '9'; p++, digits++) {
		if (whole > BERTH_DURATION_MAX)
			return -1; /* too many digits to be a duration */
		whole = whole * 10 + (*p - '0');
	}
	if (*p == '.') {
		/* Digits past the ninth cannot change a whole millisecond
		 * of any unit here; they are read and ignored. */
		for (p++; *p >= '0' && *p <= '9'; p++, digits++) {
			if (scale < 1000000000) {
				frac = frac * 10 + (*p - '0');
				scale *= 10;
			}
		}
	}
	if (digits == 0)
		return -1;
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (strcmp(p, units[i].name) == 0)
			unit = units[i].ms;
	if (unit < 0 || whole > BERTH_DURATION_MAX / unit)
		return -1;
	total = whole * unit + frac * unit / scale;
	if (total > BERTH_DURATION_MAX)
		return -1;
	*ms = total;
	return 0;
}

#endif

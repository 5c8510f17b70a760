/*
 * strf.h: berth_strf, a formatted string in memory of its own: the
 * messages that the api, http and store components hand their callers as
 * char **errmsg (the caller frees them). Header-only for the reason
 * duration.h is: components that depend on nothing of each other share it.
 */
#ifndef BERTH_COMMON_STRF_H
#define BERTH_COMMON_STRF_H

#include <stdarg.h>
#include <stdio.h>

/* berth_strf returns fmt formatted (malloc'd), or NULL without memory. */
static inline char *berth_strf(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static inline char *berth_strf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

#endif

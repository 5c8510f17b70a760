/*
 * backoff.c: how long a failed try waits before the next one.
 *
 * Exponential backoff with "equal jitter" (the AWS architecture blog's
 * name for it): half of the delay is fixed, so a retry never comes
 * immediately, and half is random, so that many jobs failing together
 * (a dependency that went down) do not all come back at the same moment.
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>

#include "worker/internal.h"

int64_t worker__backoff_ms(int attempt, int64_t base, int64_t max, double r)
{
	int64_t d;

	if (base <= 0)
		base = WORKER__BACKOFF_MS;
	if (max <= 0)
		max = WORKER__BACKOFF_MAX_MS;
	if (max < base)
		max = base;
	if (attempt < 1)
		attempt = 1;
	d = base;
	/* Doubling stops at max, so d never overflows. */
	for (int i = 1; i < attempt && d < max; i++)
		d *= 2;
	if (d > max)
		d = max;
	if (r < 0)
		r = 0;
	if (r >= 1)
		r = 0.999999;
	return d / 2 + (int64_t)((double)(d - d / 2) * r);
}

double worker__random(void)
{
	uint64_t x;

	/* Jitter needs no secrecy, but getrandom is there and never fails
	 * for 8 bytes once the pool is initialised; fall back to rand. */
	if (getrandom(&x, sizeof(x), GRND_NONBLOCK) != (ssize_t)sizeof(x))
		x = (uint64_t)rand();
	return (double)(x >> 11) / 9007199254740992.0; /* 2^53 */
}

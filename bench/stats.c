/*
 * stats.c: the monotonic clock, latency samples and their percentiles.
 */
#include "stats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t stats_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void stats_sleep_until(uint64_t t)
{
	struct timespec ts = {
		.tv_sec = (time_t)(t / 1000000000u),
		.tv_nsec = (long)(t % 1000000000u),
	};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
}

int stats_add(struct stats_sample *s, uint64_t d)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 4096;
		uint64_t *v = realloc(s->v, cap * sizeof *v);

		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = d;
	return 0;
}

void stats_free(struct stats_sample *s)
{
	free(s->v);
	memset(s, 0, sizeof *s);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* rank returns the value at quantile q of the sorted sample: the smallest
 * value that at least q of the sample does not exceed (nearest rank). */
static double rank(const struct stats_sample *s, double q)
{
	size_t i = (size_t)(q * (double)s->n + 0.999999);

	if (i == 0)
		i = 1;
	if (i > s->n)
		i = s->n;
	return (double)s->v[i - 1] / 1e6;
}

void stats_summarize(struct stats_sample *s, struct stats_summary *out)
{
	double sum = 0;

	memset(out, 0, sizeof *out);
	if (s->n == 0)
		return;
	qsort(s->v, s->n, sizeof *s->v, cmp_u64);
	for (size_t i = 0; i < s->n; i++)
		sum += (double)s->v[i];
	out->n = s->n;
	out->p50 = rank(s, 0.50);
	out->p99 = rank(s, 0.99);
	out->p999 = rank(s, 0.999);
	out->max = (double)s->v[s->n - 1] / 1e6;
	out->mean = sum / (double)s->n / 1e6;
}

int stats_rss_kib(int pid, long *rss, long *hwm)
{
	char path[64], line[256];
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/status", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	*rss = *hwm = -1;
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, "VmRSS:", 6) == 0)
			*rss = strtol(line + 6, NULL, 10);
		else if (strncmp(line, "VmHWM:", 6) == 0)
			*hwm = strtol(line + 6, NULL, 10);
	}
	fclose(f);
	return *rss < 0 ? -1 : 0;
}

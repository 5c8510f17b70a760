/*
 * stats.h: the load generator's clock and latency samples.
 *
 * Times are nanoseconds of CLOCK_MONOTONIC. A sample is a plain array of
 * durations that is sorted once, at the end of a run, so that recording
 * one costs a store and never a lock.
 */
#ifndef BERTH_BENCH_STATS_H
#define BERTH_BENCH_STATS_H

#include <stddef.h>
#include <stdint.h>

/* stats_now returns CLOCK_MONOTONIC in nanoseconds. */
uint64_t stats_now(void);

/* stats_sleep_until sleeps until the monotonic time t (ns). */
void stats_sleep_until(uint64_t t);

struct stats_sample {
	uint64_t *v; /* durations, ns */
	size_t n;
	size_t cap;
};

/* stats_add appends d (ns). Returns 0 or -ENOMEM. */
int stats_add(struct stats_sample *s, uint64_t d);
void stats_free(struct stats_sample *s);

/* stats_summary is what a table prints of a sample, in milliseconds. */
struct stats_summary {
	size_t n;
	double p50, p99, p999, max, mean;
};

/* stats_summarize sorts s and fills out; with an empty sample every figure
 * is 0 and n is 0. */
void stats_summarize(struct stats_sample *s, struct stats_summary *out);

/* stats_rss_kib reads VmRSS and VmHWM (peak) of process pid from /proc, in
 * KiB. Returns 0 or -1. */
int stats_rss_kib(int pid, long *rss, long *hwm);

#endif

/*
 * bench_jload: what parsing one request line costs, by json_loadb and by
 * store_json_load (store/jload.h).
 *
 * Parses TEXT (by default the 96-byte jobs/submit line of berth-bench's
 * e2e scenario) COUNT times with each, after checking once that both give
 * the same value, and prints the time a parse took. Instructions are the
 * steadier figure: under callgrind, the inclusive cost of load_jansson and
 * of load_fast divided by COUNT,
 *
 *   valgrind --tool=callgrind --callgrind-out-file=cg.out \
 *     build/bench/bench_jload 10000
 *   callgrind_annotate --inclusive=yes cg.out | grep load_
 *
 * usage: bench_jload [COUNT [TEXT]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/jload.h"

static const char submit[] =
	"{\"jsonrpc\":\"2.0\",\"id\":12345,\"method\":\"jobs/submit\","
	"\"params\":{\"tool\":\"noop\",\"input\":{\"n\":12345}}}";

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* load_jansson and load_fast parse text count times each; kept out of
 * line so that callgrind counts each apart. Return 0, or -1 when a parse
 * failed. */
__attribute__((noinline)) static int load_jansson(const char *text, size_t n,
						  long count)
{
	for (long i = 0; i < count; i++) {
		json_t *v = json_loadb(text, n, JSON_DECODE_ANY, NULL);
		if (v == NULL)
			return -1;
		json_decref(v);
	}
	return 0;
}

__attribute__((noinline)) static int load_fast(const char *text, size_t n,
					       long count)
{
	for (long i = 0; i < count; i++) {
		json_t *v = store_json_load(text, n, JSON_DECODE_ANY, NULL);
		if (v == NULL)
			return -1;
		json_decref(v);
	}
	return 0;
}

int main(int argc, char **argv)
{
	long count = argc > 1 ? atol(argv[1]) : 100000;
	const char *text = argc > 2 ? argv[2] : submit;
	size_t n = strlen(text);
	json_t *a = json_loadb(text, n, JSON_DECODE_ANY, NULL);
	json_t *b = store_json_load(text, n, JSON_DECODE_ANY, NULL);
	json_t *f = store__json_load_fast(text, n, JSON_DECODE_ANY, NULL);
	double t0, t1, t2;

	if (count <= 0 || a == NULL || b == NULL || !json_equal(a, b)) {
		fprintf(stderr, "bench_jload: the text does not parse alike "
			"(or COUNT is not positive)\n");
		return 1;
	}
	printf("%zu bytes, %s\n", n,
	       f ? "on the fast path" : "left to jansson by the fast path");
	json_decref(a);
	json_decref(b);
	json_decref(f);

	t0 = now();
	if (load_jansson(text, n, count) != 0)
		return 1;
	t1 = now();
	if (load_fast(text, n, count) != 0)
		return 1;
	t2 = now();
	printf("json_loadb       %8.0f ns a parse\n", (t1 - t0) * 1e9 / count);
	printf("store_json_load  %8.0f ns a parse\n", (t2 - t1) * 1e9 / count);
	return 0;
}

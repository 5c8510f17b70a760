/*
 * bench_schema: validations per second of a typical tool input.
 *
 * Compiles the weather tool's input schema once, then validates
 * {"location":"Seattle"} against it on one thread for about a second
 * (schema_valid, the fast path), then a shorter run of schema_validate (the
 * error path, on the same valid instance) for comparison.  The target is at
 * least 1,000,000 fast-path validations per second on one core, in a
 * release build without sanitizers.
 *
 * Then what a submission does (worker__check): fill in the schema's
 * defaults, then validate. Once with the same schema, which has none (the
 * cost of asking: one flag, decided when the schema was compiled), and once
 * with a "unit" that has a default, as the example weather tool's, which
 * makes a filled copy of each instance.
 *
 * usage: bench_schema [SECONDS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "schema/schema.h"

static const char schema_text[] =
	"{\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\"}},"
	"\"required\":[\"location\"],\"additionalProperties\":false,"
	"\"$schema\":\"https://json-schema.org/draft/2020-12/schema\"}";

/* The weather tool of examples/tools, whose unit has a default. */
static const char defaults_text[] =
	"{\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\"},"
	"\"unit\":{\"enum\":[\"C\",\"F\"],\"default\":\"C\"}},"
	"\"required\":[\"location\",\"unit\"],\"additionalProperties\":false}";

enum mode { FAST, FULL, FILLED };

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* run validates instance in batches until seconds have passed; returns the
 * rate per second, or -1 if a validation gave the wrong answer. */
static double run(const struct schema *s, const json_t *instance, double seconds,
		  enum mode mode)
{
	enum { BATCH = 10000 };
	double start = now(), elapsed;
	long n = 0;

	do {
		for (int i = 0; i < BATCH; i++) {
			json_t *v;
			bool ok;

			switch (mode) {
			case FAST:
				ok = schema_valid(s, instance);
				break;
			case FULL:
				ok = schema_validate(s, instance, NULL) == 0;
				break;
			default:
				v = schema_apply_defaults(s, instance);
				ok = v && schema_valid(s, v);
				json_decref(v);
				break;
			}
			if (!ok)
				return -1;
		}
		n += BATCH;
		elapsed = now() - start;
	} while (elapsed < seconds);
	return (double)n / elapsed;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 1.0, fast, full, none, filled;
	char *err = NULL;
	struct schema *s = schema_compile_text(schema_text, NULL, NULL, &err);
	struct schema *d = s ? schema_compile_text(defaults_text, NULL, NULL, &err) : NULL;
	json_t *instance = json_loads("{\"location\":\"Seattle\"}", 0, NULL);

	if (!s || !d || !instance) {
		fprintf(stderr, "bench_schema: setup failed: %s\n", err ? err : "out of memory");
		free(err);
		return 1;
	}
	fast = run(s, instance, seconds, FAST);
	full = run(s, instance, seconds / 2, FULL);
	none = run(s, instance, seconds / 2, FILLED);
	filled = run(d, instance, seconds / 2, FILLED);
	if (fast < 0 || full < 0 || none < 0 || filled < 0) {
		fprintf(stderr, "bench_schema: a valid instance was rejected\n");
		return 1;
	}
	printf("schema_valid:    %.0f validations/s (one thread)\n", fast);
	printf("schema_validate: %.0f validations/s (one thread)\n", full);
	printf("defaults, then schema_valid, a schema without defaults: "
	       "%.0f/s\n", none);
	printf("defaults, then schema_valid, the unit's default filled in: "
	       "%.0f/s\n", filled);
	json_decref(instance);
	schema_free(d);
	schema_free(s);
	return fast >= 1e6 ? 0 : 1;
}

/*
 * builtin.c: the built-in tools (builtin.h).
 */
#include <time.h>

#include "worker/builtin.h"

static struct berth_outcome noop(const json_t *input, struct berth_ctx *ctx,
				 void *data)
{
	return berth_output(json_deep_copy(input));
}

/* sleep_step is how often sleep looks at its abort flag and reports. */
#define SLEEP_STEP_MS 10

static struct berth_outcome sleep_exec(const json_t *input,
				       struct berth_ctx *ctx, void *data)
{
	json_int_t ms = json_integer_value(json_object_get(input, "ms"));
	json_int_t slept = 0;
	json_int_t next_report = 0;

	while (slept < ms) {
		json_int_t step = ms - slept < SLEEP_STEP_MS ? ms - slept
							     : SLEEP_STEP_MS;
		struct timespec ts = {
			.tv_sec = step / 1000,
			.tv_nsec = (long)(step % 1000) * 1000000L,
		};

		if (berth_ctx_aborted(ctx))
			return berth_error(false, NULL, "aborted after %lld ms",
					   (long long)slept);
		nanosleep(&ts, NULL);
		slept += step;
		/* Progress about every 100 ms, so a long sleep shows. */
		if (slept >= next_report) {
			berth_ctx_progress(ctx, (double)slept, (double)ms,
					   "sleeping");
			next_report = slept + 100;
		}
	}
	return berth_output(json_pack("{s:I}", "slept", slept));
}

static struct berth_outcome fail_exec(const json_t *input,
				      struct berth_ctx *ctx, void *data)
{
	const char *msg = json_string_value(json_object_get(input, "message"));
	bool retryable = json_is_true(json_object_get(input, "retryable"));

	return berth_error(retryable, NULL, "%s", msg ? msg : "failed on purpose");
}

static const struct berth_tool noop_tool = {
	.id = "noop",
	.title = "No-op",
	.description = "Returns its input as its output. For tests and "
		       "benchmarks.",
	.input_schema = "{\"type\":\"object\"}",
	.mcp_annotations = "{\"title\":\"No-op\",\"readOnlyHint\":true,"
			   "\"destructiveHint\":false,"
			   "\"idempotentHint\":true,"
			   "\"openWorldHint\":false}",
	.input_examples = "[{\"input\":{\"hello\":\"world\"}}]",
	.execute = noop,
	.nonblocking = true,
};

static const struct berth_tool sleep_tool = {
	.id = "sleep",
	.title = "Sleep",
	.description = "Sleeps for ms milliseconds, reporting progress, and "
		       "stops early when cancelled or timed out.",
	.input_schema = "{\"type\":\"object\",\"properties\":{\"ms\":"
			"{\"type\":\"integer\",\"minimum\":0,"
			"\"description\":\"how long to sleep\"}},"
			"\"required\":[\"ms\"],\"additionalProperties\":false}",
	.output_schema = "{\"type\":\"object\",\"properties\":{\"slept\":"
			 "{\"type\":\"integer\"}},\"required\":[\"slept\"]}",
	.mcp_annotations = "{\"title\":\"Sleep\",\"readOnlyHint\":true,"
			   "\"destructiveHint\":false,"
			   "\"idempotentHint\":true,"
			   "\"openWorldHint\":false}",
	.input_examples = "[{\"input\":{\"ms\":1000}}]",
	.execute = sleep_exec,
};

static const struct berth_tool fail_tool = {
	.id = "fail",
	.title = "Fail",
	.description = "Fails with the given message, retryable or not. For "
		       "tests of retries and failure handling.",
	.input_schema = "{\"type\":\"object\",\"properties\":{"
			"\"message\":{\"type\":\"string\"},"
			"\"retryable\":{\"type\":\"boolean\"}},"
			"\"additionalProperties\":false}",
	.mcp_annotations = "{\"title\":\"Fail\",\"readOnlyHint\":true,"
			   "\"destructiveHint\":false,"
			   "\"idempotentHint\":true,"
			   "\"openWorldHint\":false}",
	.input_examples = "[{\"input\":{\"message\":\"boom\","
			  "\"retryable\":true}}]",
	.execute = fail_exec,
	.nonblocking = true,
};

static const struct berth_tool *const builtin_tools[] = {
	&noop_tool,
	&sleep_tool,
	&fail_tool,
};

const struct berth_tool *const *worker_builtin_tools(size_t *n)
{
	*n = sizeof(builtin_tools) / sizeof(builtin_tools[0]);
	return builtin_tools;
}

bool worker__builtin_is_sleep(const struct berth_tool *t)
{
	return t == &sleep_tool;
}

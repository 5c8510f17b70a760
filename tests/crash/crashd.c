/*
 * crashd.c: a berthd with test tools of its own in C, built the way
 * include/berth/berth.h says a user builds one (berth_main with a table).
 *
 * The crash driver (crash.c) and the fault tests (faults.c) run it through
 * tests/harness ($BERTHD points here). Its tools:
 *
 *   crash-echo     {n, ms?}: sleeps ms, answers {n}.
 *   crash-ckpt     {to, ms}: counts to `to`, one step per ms, saving the
 *                  checkpoint {i} after each step and starting after the
 *                  last checkpoint; answers {counted, resumedFrom, attempt}.
 *   crash-suspend  {n}: suspends with {ask: n}; resumed, answers {got}.
 *   crash-approve  {n}: needs approval, then answers {n}.
 *   crash-flaky    {n}: a retryable error on its first try, then {n}.
 *   crash-poison   {}: abort()s the whole daemon every time it runs; with
 *                  two retries, the third restart must fail it for good.
 */
#include <stdlib.h>
#include <time.h>

#include "berth/berth.h"

static void sleep_ms(json_int_t ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

	if (ms > 0)
		nanosleep(&ts, NULL);
}

/* wait_ms sleeps ms in small steps; returns true when aborted meanwhile. */
static bool wait_ms(struct berth_ctx *ctx, json_int_t ms)
{
	while (ms > 0) {
		json_int_t step = ms < 10 ? ms : 10;

		if (berth_ctx_aborted(ctx))
			return true;
		sleep_ms(step);
		ms -= step;
	}
	return berth_ctx_aborted(ctx);
}

static struct berth_outcome echo_exec(const json_t *input,
				      struct berth_ctx *ctx, void *data)
{
	if (wait_ms(ctx, json_integer_value(json_object_get(input, "ms"))))
		return berth_error(true, NULL, "aborted");
	return berth_output(json_pack("{s:O}", "n", json_object_get(input, "n")));
}

/* pure_exec: nonblocking, so a submission runs it before its job is
 * committed and commits creation and completion together; an odd n fails
 * its first try, so that retries take that path too. */
static struct berth_outcome pure_exec(const json_t *input,
				      struct berth_ctx *ctx, void *data)
{
	json_t *n = json_object_get(input, "n");

	if (berth_ctx_attempt(ctx) == 1 && json_integer_value(n) % 2)
		return berth_error(true, NULL, "odd, first try");
	return berth_output(json_pack("{s:O}", "n", n));
}

static struct berth_outcome ckpt_exec(const json_t *input,
				      struct berth_ctx *ctx, void *data)
{
	json_int_t to = json_integer_value(json_object_get(input, "to"));
	json_int_t ms = json_integer_value(json_object_get(input, "ms"));
	const json_t *cp = berth_ctx_checkpoint(ctx);
	json_int_t from = cp ? json_integer_value(json_object_get(cp, "i")) : 0;
	json_int_t i = from;

	while (i < to) {
		json_t *v;
		int rc;

		if (wait_ms(ctx, ms))
			return berth_error(true, NULL, "aborted at %lld",
					   (long long)i);
		v = json_pack("{s:I}", "i", i + 1);
		rc = berth_ctx_save_checkpoint(ctx, v);
		json_decref(v);
		if (rc)
			return berth_error(true, NULL, "checkpoint: %d", rc);
		i++;
		berth_ctx_progress(ctx, (double)i, (double)to, NULL);
	}
	return berth_output(json_pack("{s:I, s:I, s:i}", "counted", to,
				      "resumedFrom", from, "attempt",
				      berth_ctx_attempt(ctx)));
}

static struct berth_outcome suspend_exec(const json_t *input,
					 struct berth_ctx *ctx, void *data)
{
	const json_t *rd = berth_ctx_resume_data(ctx);

	if (!rd)
		return berth_suspend(json_pack(
			"{s:O}", "ask", json_object_get(input, "n")));
	return berth_output(json_pack("{s:O}", "got", (json_t *)rd));
}

static struct berth_outcome flaky_exec(const json_t *input,
				       struct berth_ctx *ctx, void *data)
{
	if (berth_ctx_attempt(ctx) == 1)
		return berth_error(true, NULL, "the first try always fails");
	return berth_output(json_pack("{s:O}", "n", json_object_get(input, "n")));
}

static struct berth_outcome poison_exec(const json_t *input,
					struct berth_ctx *ctx, void *data)
{
	/* The whole daemon goes down, as a C tool with a wild pointer would
	 * take it down. abort() rather than a fault so that no sanitizer
	 * report muddies the log. */
	abort();
}

#define OBJ_N "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}," \
	      "\"ms\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":60000}}," \
	      "\"required\":[\"n\"]}"

static const struct berth_tool echo_tool = {
	.id = "crash-echo",
	.description = "Answer {n} after ms milliseconds.",
	.input_schema = OBJ_N,
	.background = {.max_retries = 1000, .backoff_ms = 50,
		       .backoff_max_ms = 200},
	.execute = echo_exec,
};

static const struct berth_tool pure_tool = {
	.id = "crash-pure",
	.description = "Answer {n} at once (nonblocking); odd n fail once.",
	.input_schema = OBJ_N,
	.background = {.max_retries = 1000, .backoff_ms = 50,
		       .backoff_max_ms = 200},
	.execute = pure_exec,
	.nonblocking = true,
};

static const struct berth_tool ckpt_tool = {
	.id = "crash-ckpt",
	.description = "Count to `to` with a durable checkpoint per step.",
	.input_schema = "{\"type\":\"object\",\"properties\":{"
			"\"to\":{\"type\":\"integer\",\"minimum\":1},"
			"\"ms\":{\"type\":\"integer\",\"minimum\":0}},"
			"\"required\":[\"to\",\"ms\"]}",
	.output_schema = "{\"type\":\"object\",\"required\":"
			 "[\"counted\",\"resumedFrom\",\"attempt\"]}",
	.background = {.max_retries = 1000, .backoff_ms = 50,
		       .backoff_max_ms = 200,
		       .on_interrupt = BERTH_INTERRUPT_RETRY},
	.execute = ckpt_exec,
};

static const struct berth_tool suspend_tool = {
	.id = "crash-suspend",
	.description = "Suspend, then answer the resume data.",
	.input_schema = OBJ_N,
	.suspend_schema = "{\"type\":\"object\",\"required\":[\"ask\"]}",
	.resume_schema = "{\"type\":\"object\"}",
	.background = {.max_retries = 1000, .backoff_ms = 50,
		       .backoff_max_ms = 200},
	.execute = suspend_exec,
};

static const struct berth_tool approve_tool = {
	.id = "crash-approve",
	.description = "Answer {n} once approved.",
	.input_schema = OBJ_N,
	.require_approval = true,
	.background = {.max_retries = 1000, .backoff_ms = 50,
		       .backoff_max_ms = 200},
	.execute = echo_exec,
};

static const struct berth_tool flaky_tool = {
	.id = "crash-flaky",
	.description = "Fail the first try, then answer {n}.",
	.input_schema = OBJ_N,
	.background = {.max_retries = 1000, .backoff_ms = 50,
		       .backoff_max_ms = 200},
	.execute = flaky_exec,
};

static const struct berth_tool poison_tool = {
	.id = "crash-poison",
	.description = "Crash the whole daemon whenever it runs.",
	.background = {.max_retries = 2,
		       .on_interrupt = BERTH_INTERRUPT_RETRY},
	.execute = poison_exec,
};

int main(int argc, char **argv)
{
	static const struct berth_tool *const tools[] = {
		&echo_tool, &pure_tool, &ckpt_tool, &suspend_tool,
		&approve_tool, &flaky_tool, &poison_tool,
	};

	return berth_main(argc, argv, tools, sizeof tools / sizeof tools[0]);
}

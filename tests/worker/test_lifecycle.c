/*
 * test_lifecycle.c: every path of a job's life through a real worker and
 * store: approval, decline, suspend and resume, cancel, ttl expiry,
 * retries, timeouts, and the schema checks around execute.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/role.h"
#include "fixture.h"
#include "store/store_int.h" /* store__max_page_count */

static atomic_int executed;
static atomic_int hook_calls;

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static struct berth_outcome exec_echo(const json_t *input,
				      struct berth_ctx *ctx, void *data)
{
	atomic_fetch_add(&executed, 1);
	return berth_output(json_deep_copy(input));
}

static int hook_fails(const json_t *output, const struct berth_call *call,
		      void *data)
{
	atomic_fetch_add(&hook_calls, 1);
	return -1;
}

/* hook_called: the onOutput hook ran; it runs once the job's end was
 * committed and handed back to the loop, which a read of the store may
 * see before (the read connection sees the commit at once). */
static bool hook_called(void *arg)
{
	(void)arg;
	return atomic_load(&hook_calls) > 0;
}

static const struct berth_tool gated = {
	.id = "gated",
	.input_schema = "{\"type\":\"object\"}",
	.require_approval = true,
	.execute = exec_echo,
	.on_output = hook_fails,
};

/* quorum2 needs two distinct approvals before it runs. */
static const struct berth_tool quorum2 = {
	.id = "quorum2",
	.input_schema = "{\"type\":\"object\"}",
	.require_approval = true,
	.approval_policy = "{\"quorum\": 2}",
	.execute = exec_echo,
};

static bool approval_when_big(const json_t *input, void *data)
{
	return json_integer_value(json_object_get(input, "amount")) > 100;
}

static const struct berth_tool policy = {
	.id = "policy",
	.require_approval_fn = approval_when_big,
	.execute = exec_echo,
};

/* ask suspends with a question on its first run and answers with the
 * resume data it gets on the next. */
static struct berth_outcome exec_ask(const json_t *input,
				     struct berth_ctx *ctx, void *data)
{
	const json_t *resume = berth_ctx_resume_data(ctx);
	const json_t *asked = berth_ctx_suspend_payload(ctx);

	if (!resume)
		return berth_suspend(json_pack("{s:s}", "question",
					       "what is your name?"));
	return berth_output(json_pack("{s:O, s:O}", "answer",
				      json_object_get(resume, "answer"),
				      "question",
				      json_object_get(asked, "question")));
}

static const struct berth_tool ask = {
	.id = "ask",
	.suspend_schema = "{\"type\":\"object\",\"required\":[\"question\"]}",
	.resume_schema = "{\"type\":\"object\",\"properties\":{\"answer\":"
			 "{\"type\":\"string\"}},\"required\":[\"answer\"]}",
	.output_schema = "{\"type\":\"object\",\"required\":[\"answer\"]}",
	.execute = exec_ask,
};

static struct berth_outcome exec_slow(const json_t *input,
				      struct berth_ctx *ctx, void *data)
{
	for (int i = 0; i < 1000 && !berth_ctx_aborted(ctx); i++)
		sleep_ms(5);
	return berth_output(json_pack("{s:b}", "aborted",
				      berth_ctx_aborted(ctx)));
}

static const struct berth_tool slow = {
	.id = "slow",
	.execute = exec_slow,
};

static const struct berth_tool quick_timeout = {
	.id = "quick-timeout",
	.background = {.timeout_ms = 100},
	.execute = exec_slow,
};

static atomic_int stuck_release;

/* stuck ignores its abort flag until the test lets it go. */
static struct berth_outcome exec_stuck(const json_t *input,
				       struct berth_ctx *ctx, void *data)
{
	while (!atomic_load(&stuck_release))
		sleep_ms(5);
	return berth_output(json_pack("{s:s}", "late", "result"));
}

static const struct berth_tool stuck = {
	.id = "stuck",
	.background = {.timeout_ms = 100},
	.execute = exec_stuck,
};

static struct berth_outcome exec_flaky(const json_t *input,
				       struct berth_ctx *ctx, void *data)
{
	json_int_t ok_at = json_integer_value(json_object_get(input, "okAt"));

	atomic_fetch_add(&executed, 1);
	if (berth_ctx_attempt(ctx) >= ok_at)
		return berth_output(json_pack("{s:i}", "attempt",
					      berth_ctx_attempt(ctx)));
	return berth_error(true, NULL, "try %d failed", berth_ctx_attempt(ctx));
}

static const struct berth_tool flaky = {
	.id = "flaky",
	.background = {.max_retries = 2, .backoff_ms = 10,
		       .backoff_max_ms = 20},
	.execute = exec_flaky,
};

static const struct berth_tool ctxed = {
	.id = "ctxed",
	.request_context_schema = "{\"type\":\"object\",\"properties\":"
				  "{\"userId\":{\"type\":\"string\"}},"
				  "\"required\":[\"userId\"]}",
	.execute = exec_echo,
};

static struct berth_outcome exec_badout(const json_t *input,
					struct berth_ctx *ctx, void *data)
{
	return berth_output(json_pack("{s:s}", "n", "not a number"));
}

static const struct berth_tool badout = {
	.id = "badout",
	.output_schema = "{\"type\":\"object\",\"properties\":{\"n\":"
			 "{\"type\":\"integer\"}},\"required\":[\"n\"]}",
	.background = {.max_retries = 3},
	.execute = exec_badout,
};

/* ckpt saves a checkpoint and fails on its first try; the retry sees the
 * checkpoint and finishes with it. */
static struct berth_outcome exec_ckpt(const json_t *input,
				      struct berth_ctx *ctx, void *data)
{
	const json_t *cp = berth_ctx_checkpoint(ctx);
	json_t *v;
	int rc;

	if (cp)
		return berth_output(json_pack("{s:O}", "resumedFrom", cp));
	v = json_pack("{s:i}", "step", 7);
	rc = berth_ctx_save_checkpoint(ctx, v);
	json_decref(v);
	berth_ctx_progress(ctx, 7, 10, "step 7");
	berth_ctx_log(ctx, "info", NULL, "saved step %d (rc %d)", 7, rc);
	if (rc)
		return berth_error(false, NULL, "checkpoint failed: %d", rc);
	return berth_error(true, NULL, "crash after the checkpoint");
}

static const struct berth_tool ckpt = {
	.id = "ckpt",
	.background = {.max_retries = 1, .backoff_ms = 10},
	.execute = exec_ckpt,
};

static json_t *display(enum berth_payload which, const json_t *payload,
		       void *data)
{
	if (which == BERTH_PAYLOAD_INPUT)
		return json_pack("{s:s}", "shown", "redacted input");
	return NULL;
}

static const struct berth_tool shown = {
	.id = "shown",
	.execute = exec_echo,
	.display = display,
};

static atomic_bool held_go;

/* exec_held waits for held_go, then returns an output too big for a
 * database whose size is capped. */
static struct berth_outcome exec_held(const json_t *input,
				      struct berth_ctx *ctx, void *data)
{
	enum { BIG = 512 * 1024 };
	char *big;
	json_t *out;

	while (!atomic_load(&held_go) && !berth_ctx_aborted(ctx))
		sleep_ms(5);
	big = malloc(BIG);
	if (!big)
		return berth_output(json_object());
	memset(big, 'x', BIG - 1);
	big[BIG - 1] = '\0';
	out = json_pack("{s:s}", "blob", big);
	free(big);
	return berth_output(out);
}

static const struct berth_tool held = {
	.id = "held",
	.execute = exec_held,
};

static json_t *approval_display(enum berth_payload which,
				const json_t *payload, void *data)
{
	if (which == BERTH_PAYLOAD_APPROVAL)
		return json_pack("{s:s}", "ask", "may I?");
	return display(which, payload, data);
}

static const struct berth_tool shown_gated = {
	.id = "shown_gated",
	.require_approval = true,
	.execute = exec_echo,
	.display = approval_display,
};

static int setup(void **state)
{
	const struct berth_tool *tools[] = {
		&gated, &policy, &ask, &slow, &quick_timeout, &stuck, &flaky,
		&ctxed, &badout, &ckpt, &shown, &shown_gated, &held, &quorum2,
	};
	struct worker_config cfg = {.workers = 4, .kill_grace_ms = 200,
				    .shutdown_grace_ms = 200};
	struct fx *f = fx_new(&cfg);

	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
		char *err = NULL;
		if (worker_add_tool(f->w, tools[i], &err))
			fprintf(stderr, "%s\n", err);
		assert_null(err);
	}
	fx_start(f);
	atomic_store(&executed, 0);
	atomic_store(&hook_calls, 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx_free(*state);
	return 0;
}

static void submit__with_approval__waits_then_runs_once_approved(void **state)
{
	struct fx *f = *state;
	struct fx_res res = {0};
	char id[40];

	fx_submit_ok(f, "gated", "{\"x\":1}", NULL, id);
	assert_int_equal(fx_status(f, id), STORE_AWAITING_APPROVAL);
	assert_int_equal(fx_count_events(f, id, STORE_EV_APPROVAL_REQUESTED), 1);
	fx_run_for(f, 50);
	assert_int_equal(atomic_load(&executed), 0);
	assert_int_equal(worker_approve(f->w, id, "looks fine", NULL, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	assert_int_equal(res.err, WORKER_OK);
	assert_int_equal(res.status, STORE_PENDING);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	assert_int_equal(atomic_load(&executed), 1);
	/* The failing onOutput hook was called and did not fail the job. */
	assert_true(fx_run_until(f, hook_called, NULL, 5000));
	fx_run_for(f, 20);
	assert_int_equal(atomic_load(&hook_calls), 1);
	assert_int_equal(fx_status(f, id), STORE_COMPLETED);
	fx_res_finish(&res);

	/* A second approval is a conflict, never a second run. */
	memset(&res, 0, sizeof(res));
	assert_int_equal(worker_approve(f->w, id, NULL, NULL, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	assert_int_equal(res.err, WORKER_ECONFLICT);
	fx_res_finish(&res);
	fx_run_for(f, 30);
	assert_int_equal(atomic_load(&executed), 1);
}

static void decline__stores_the_reason_and_never_runs_execute(void **state)
{
	struct fx *f = *state;
	struct fx_res res = {0};
	struct store_job *j;
	char id[40];

	fx_submit_ok(f, "gated", "{}", NULL, id);
	assert_int_equal(worker_decline(f->w, id, "too risky", NULL, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	assert_int_equal(res.err, WORKER_OK);
	assert_int_equal(res.status, STORE_DECLINED);
	fx_res_finish(&res);
	fx_run_for(f, 100);
	j = fx_get(f, id);
	assert_int_equal(j->status, STORE_DECLINED);
	assert_string_equal(j->reason, "too risky");
	assert_int_equal(j->decision, STORE_DECISION_DECLINED);
	store_job_free(j);
	assert_int_equal(atomic_load(&executed), 0);

	memset(&res, 0, sizeof(res));
	assert_int_equal(worker_approve(f->w, id, NULL, NULL, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	assert_int_equal(res.err, WORKER_ECONFLICT);
	fx_res_finish(&res);
	assert_int_equal(atomic_load(&executed), 0);
}

static void approval_policy__decides_from_the_input(void **state)
{
	struct fx *f = *state;
	char small[40], big[40];

	fx_submit_ok(f, "policy", "{\"amount\":5}", NULL, small);
	fx_submit_ok(f, "policy", "{\"amount\":500}", NULL, big);
	fx_wait_status(f, small, STORE_COMPLETED, 5000);
	assert_int_equal(fx_status(f, big), STORE_AWAITING_APPROVAL);
}

static void resume__with_valid_data__runs_again_with_it(void **state)
{
	struct fx *f = *state;
	struct fx_res res = {0};
	struct store_job *j;
	json_t *data = json_pack("{s:s}", "answer", "Ada");
	char id[40];

	fx_submit_ok(f, "ask", "{}", NULL, id);
	fx_wait_status(f, id, STORE_SUSPENDED, 5000);
	j = fx_get(f, id);
	assert_string_equal(json_string_value(json_object_get(
				    j->suspend_payload, "question")),
			    "what is your name?");
	store_job_free(j);
	assert_int_equal(worker_resume(f->w, id, data, NULL, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	assert_int_equal(res.err, WORKER_OK);
	fx_res_finish(&res);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	j = fx_get(f, id);
	assert_string_equal(json_string_value(json_object_get(j->output,
							      "answer")),
			    "Ada");
	assert_string_equal(json_string_value(json_object_get(j->output,
							      "question")),
			    "what is your name?");
	store_job_free(j);
	assert_int_equal(fx_count_events(f, id, STORE_EV_RESUMED), 1);
	json_decref(data);
}

static void resume__with_invalid_data__keeps_job_suspended(void **state)
{
	struct fx *f = *state;
	struct fx_res res = {0};
	json_t *bad = json_pack("{s:i}", "answer", 42);
	char id[40];

	fx_submit_ok(f, "ask", "{}", NULL, id);
	fx_wait_status(f, id, STORE_SUSPENDED, 5000);
	assert_int_equal(worker_resume(f->w, id, bad, NULL, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	assert_int_equal(res.err, WORKER_EINVAL);
	assert_non_null(json_object_get(res.data, "errors"));
	assert_true(json_array_size(json_object_get(res.data, "errors")) > 0);
	fx_res_finish(&res);
	fx_run_for(f, 50);
	assert_int_equal(fx_status(f, id), STORE_SUSPENDED);
	assert_int_equal(fx_count_events(f, id, STORE_EV_RESUMED), 0);
	json_decref(bad);
}

static void resume__of_several_suspended_calls__gives_each_its_own_data(
	void **state)
{
	struct fx *f = *state;
	char ids[3][40];
	const char *names[3] = {"one", "two", "three"};

	for (int i = 0; i < 3; i++)
		fx_submit_ok(f, "ask", "{}", NULL, ids[i]);
	for (int i = 0; i < 3; i++)
		fx_wait_status(f, ids[i], STORE_SUSPENDED, 5000);
	for (int i = 2; i >= 0; i--) {
		struct fx_res res = {0};
		json_t *d = json_pack("{s:s}", "answer", names[i]);

		assert_int_equal(worker_resume(f->w, ids[i], d, NULL, fx_cb, &res), 0);
		fx_wait_res(f, &res);
		assert_int_equal(res.err, WORKER_OK);
		fx_res_finish(&res);
		json_decref(d);
	}
	for (int i = 0; i < 3; i++) {
		struct store_job *j;

		fx_wait_status(f, ids[i], STORE_COMPLETED, 5000);
		j = fx_get(f, ids[i]);
		assert_string_equal(json_string_value(json_object_get(
					    j->output, "answer")),
				    names[i]);
		store_job_free(j);
	}
}

static void cancel(struct fx *f, const char *id, int want_err)
{
	struct fx_res res = {0};

	assert_int_equal(worker_cancel(f->w, id, "no longer needed", NULL, fx_cb,
				       &res),
			 0);
	fx_wait_res(f, &res);
	assert_int_equal(res.err, want_err);
	fx_res_finish(&res);
}

static void cancel__of_a_pending_job__means_it_never_runs(void **state)
{
	struct fx *f = *state;
	struct worker_submit p = {.run_at = store_now() + 300};
	char id[40];

	fx_submit_ok(f, "gated", "{}", NULL, id);
	cancel(f, id, WORKER_OK);
	fx_submit_ok(f, "policy", "{}", &p, id);
	assert_int_equal(fx_status(f, id), STORE_PENDING);
	cancel(f, id, WORKER_OK);
	fx_run_for(f, 400);
	assert_int_equal(fx_status(f, id), STORE_CANCELLED);
	assert_int_equal(atomic_load(&executed), 0);
	/* A terminal job never changes again. */
	cancel(f, id, WORKER_ECONFLICT);
}

static bool busy_is_one(void *arg)
{
	struct worker_stats st;

	worker_stats(arg, &st);
	return st.busy == 1;
}

static void cancel__of_a_running_job__aborts_it_and_frees_its_slot(
	void **state)
{
	struct fx *f = *state;
	struct worker_stats st;
	struct store_job *j;
	char id[40];

	fx_submit_ok(f, "slow", "{}", NULL, id);
	fx_wait_status(f, id, STORE_RUNNING, 5000);
	/* The store shows the claim committed a moment before the loop
	 * delivers it and the run takes its slot. */
	assert_true(fx_run_until(f, busy_is_one, f->w, 2000));
	cancel(f, id, WORKER_OK);
	fx_run_for(f, 100);
	worker_stats(f->w, &st);
	assert_int_equal(st.busy, 0);
	j = fx_get(f, id);
	assert_int_equal(j->status, STORE_CANCELLED);
	/* The late {"aborted": true} output was discarded. */
	assert_null(j->output);
	store_job_free(j);
}

static void flag_cb(void *arg)
{
	*(bool *)arg = true;
}

static bool flag_pred(void *arg)
{
	return *(bool *)arg;
}

/* A run whose final transition failed in the store waits for its retry
 * timer; a cancel in that time decides the job, and the waiting
 * transition must be dropped, not left to hold up the shutdown. */
static void cancel__while_the_result_waits_to_be_stored_again__lets_shutdown_finish(
	void **state)
{
	struct fx *f = *state;
	struct fx_res res = {0};
	bool stopped = false;
	char id[40];

	atomic_store(&held_go, false);
	fx_submit_ok(f, "held", "{}", NULL, id);
	fx_wait_status(f, id, STORE_RUNNING, 5000);
	/* No room for the output: the final transition fails (a full disk)
	 * and is tried again after a second. */
	assert_int_equal(store__max_page_count(f->st, 1), 0);
	atomic_store(&held_go, true);
	fx_run_for(f, 300);
	assert_int_equal(fx_status(f, id), STORE_RUNNING);
	assert_int_equal(store__max_page_count(f->st, 1 << 30), 0);
	assert_int_equal(worker_cancel(f->w, id, "changed my mind", NULL, fx_cb, &res),
			 0);
	fx_wait_res(f, &res);
	assert_int_equal(res.err, WORKER_OK);
	fx_res_finish(&res);
	assert_int_equal(fx_status(f, id), STORE_CANCELLED);

	worker_shutdown(f->w, flag_cb, &stopped);
	assert_true(fx_run_until(f, flag_pred, &stopped, 3000));
	worker_destroy(f->w);
	f->w = NULL;
	assert_int_equal(fx_status(f, id), STORE_CANCELLED);
}

static void cancel__of_a_suspended_job__ends_it(void **state)
{
	struct fx *f = *state;
	char id[40];

	fx_submit_ok(f, "ask", "{}", NULL, id);
	fx_wait_status(f, id, STORE_SUSPENDED, 5000);
	cancel(f, id, WORKER_OK);
	assert_int_equal(fx_status(f, id), STORE_CANCELLED);
}

static void ttl__of_a_waiting_job__expires_it(void **state)
{
	struct fx *f = *state;
	struct worker_submit p = {.ttl_ms = 100};
	char gid[40], aid[40];

	fx_submit_ok(f, "gated", "{}", &p, gid);
	fx_submit_ok(f, "ask", "{}", &p, aid);
	fx_wait_status(f, aid, STORE_SUSPENDED, 5000);
	fx_wait_status(f, gid, STORE_EXPIRED, 2000);
	fx_wait_status(f, aid, STORE_EXPIRED, 2000);
	assert_int_equal(fx_count_events(f, gid, STORE_EV_EXPIRED), 1);
	assert_int_equal(atomic_load(&executed), 0);
}

static void retries__until_tries_run_out__then_failed(void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	char ok[40], bad[40];

	fx_submit_ok(f, "flaky", "{\"okAt\":3}", NULL, ok);
	fx_wait_status(f, ok, STORE_COMPLETED, 5000);
	j = fx_get(f, ok);
	assert_int_equal(j->attempt, 3);
	store_job_free(j);
	assert_int_equal(fx_count_events(f, ok, STORE_EV_RETRYING), 2);

	fx_submit_ok(f, "flaky", "{\"okAt\":99}", NULL, bad);
	fx_wait_status(f, bad, STORE_FAILED, 5000);
	j = fx_get(f, bad);
	/* max_retries 2: three tries in all. */
	assert_int_equal(j->attempt, 3);
	assert_string_equal(json_string_value(json_object_get(j->error,
							      "message")),
			    "try 3 failed");
	store_job_free(j);
	assert_int_equal(fx_count_events(f, bad, STORE_EV_RETRYING), 2);
	assert_int_equal(fx_count_events(f, bad, STORE_EV_FAILED), 1);
}

static void timeout__with_no_retries_left__is_timed_out(void **state)
{
	struct fx *f = *state;
	struct worker_submit p = {.has_max_retries = true, .max_retries = 1};
	struct store_job *j;
	char id[40];

	fx_submit_ok(f, "quick-timeout", "{}", &p, id);
	fx_wait_status(f, id, STORE_TIMED_OUT, 10000);
	j = fx_get(f, id);
	assert_int_equal(j->attempt, 2);
	assert_string_equal(json_string_value(json_object_get(j->error,
							      "code")),
			    "timeout");
	store_job_free(j);
	assert_int_equal(fx_count_events(f, id, STORE_EV_RETRYING), 1);
}

static void timeout__of_submit__overrides_the_tools(void **state)
{
	struct fx *f = *state;
	struct worker_submit p = {.timeout_ms = 50};
	char id[40];

	fx_submit_ok(f, "slow", "{}", &p, id);
	fx_wait_status(f, id, STORE_TIMED_OUT, 3000);
}

static bool released(void *arg)
{
	struct fx *f = arg;
	struct worker_stats st;

	worker_stats(f->w, &st);
	return st.busy == 0;
}

static void timeout__of_a_c_tool_ignoring_abort__still_finishes_the_job(
	void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	char id[40];

	atomic_store(&stuck_release, 0);
	fx_submit_ok(f, "stuck", "{}", NULL, id);
	fx_wait_status(f, id, STORE_TIMED_OUT, 3000);
	assert_true(fx_run_until(f, released, f, 1000));
	atomic_store(&stuck_release, 1);
	fx_run_for(f, 100);
	j = fx_get(f, id);
	assert_int_equal(j->status, STORE_TIMED_OUT);
	assert_null(j->output);
	store_job_free(j);
}

/* A request context failing its schema is refused at submission (no job
 * is created); test_tool.c has the check before each run. */
static void request_context__failing_its_schema__is_refused_and_never_runs(
	void **state)
{
	struct fx *f = *state;
	struct worker_submit p = {0};
	struct fx_res res;
	char good[40];

	p.request_context = json_pack("{s:i}", "userId", 7);
	fx_submit(f, "ctxed", "{}", &p, &res);
	json_decref(p.request_context);
	assert_int_equal(res.err, WORKER_EINVAL);
	assert_true(json_array_size(json_object_get(res.data, "errors")) > 0);
	fx_res_finish(&res);
	fx_run_for(f, 50);
	assert_int_equal(atomic_load(&executed), 0);

	p.request_context = json_pack("{s:s}", "userId", "u1");
	fx_submit_ok(f, "ctxed", "{}", &p, good);
	json_decref(p.request_context);
	fx_wait_status(f, good, STORE_COMPLETED, 5000);
	assert_int_equal(atomic_load(&executed), 1);
}

static void output__failing_its_schema__fails_without_retry(void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	char id[40];

	fx_submit_ok(f, "badout", "{}", NULL, id);
	fx_wait_status(f, id, STORE_FAILED, 5000);
	j = fx_get(f, id);
	assert_string_equal(json_string_value(json_object_get(j->error,
							      "code")),
			    "invalid_output");
	assert_int_equal(j->attempt, 1);
	store_job_free(j);
}

static void submit__with_invalid_input__stores_nothing(void **state)
{
	struct fx *f = *state;
	struct fx_res res;
	int64_t counts[STORE_NSTATUS] = {0};
	int64_t total = 0;

	fx_submit(f, "ask", "{}", NULL, &res); /* valid: any input */
	fx_res_finish(&res);
	fx_submit(f, "gated", "[1]", NULL, &res);
	assert_int_equal(res.err, WORKER_EINVAL);
	assert_string_equal(json_string_value(json_object_get(
				    json_array_get(json_object_get(res.data,
								   "errors"),
						   0),
				    "keyword")),
			    "type");
	fx_res_finish(&res);
	fx_submit(f, "nope", "{}", NULL, &res);
	assert_int_equal(res.err, WORKER_ENOTFOUND);
	fx_res_finish(&res);
	assert_int_equal(store_count_by_status(f->st, counts), 0);
	for (int i = 0; i < STORE_NSTATUS; i++)
		total += counts[i];
	assert_int_equal(total, 1);
}

static void submit__with_an_idempotency_key__returns_the_first_job(
	void **state)
{
	struct fx *f = *state;
	struct worker_submit p = {.idempotency_key = "k1"};
	struct fx_res a, b;

	fx_submit(f, "gated", "{}", &p, &a);
	fx_submit(f, "gated", "{}", &p, &b);
	assert_int_equal(a.err, WORKER_OK);
	assert_int_equal(b.err, WORKER_OK);
	assert_false(a.existed);
	assert_true(b.existed);
	assert_string_equal(a.id, b.id);
	fx_res_finish(&a);
	fx_res_finish(&b);
}

static void checkpoint__saved_before_a_crash__is_seen_by_the_retry(
	void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	struct store_log_line *lines = NULL;
	size_t n = 0;
	char id[40];

	fx_submit_ok(f, "ckpt", "{}", NULL, id);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	j = fx_get(f, id);
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(j->output, "resumedFrom"),
				 "step")),
			 7);
	store_job_free(j);
	assert_int_equal(store_logs(f->st, id, 0, 100, &lines, &n), 0);
	assert_true(n >= 1);
	assert_string_equal(lines[0].message, "saved step 7 (rc 0)");
	for (size_t i = 0; i < n; i++)
		store_log_line_finish(&lines[i]);
	free(lines);
}

static int progress_seen;

static void on_progress(void *arg, const char *job_id, const char *tool,
			const json_t *progress)
{
	if (strcmp(tool, "ckpt") == 0 &&
	    json_number_value(json_object_get(progress, "progress")) == 7 &&
	    json_number_value(json_object_get(progress, "total")) == 10)
		progress_seen++;
}

static void progress__reaches_the_listeners(void **state)
{
	struct fx *f = *state;
	char id[40];

	progress_seen = 0;
	assert_int_equal(worker_add_progress_listener(f->w, on_progress, NULL),
			 0);
	fx_submit_ok(f, "ckpt", "{}", NULL, id);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	assert_int_equal(progress_seen, 1);

	/* Once removed, a listener hears nothing more. */
	worker_remove_progress_listener(f->w, on_progress, NULL);
	fx_submit_ok(f, "ckpt", "{}", NULL, id);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	assert_int_equal(progress_seen, 1);
}

static int self_removing_calls;

/* on_progress_once removes itself, from within a delivery. */
static void on_progress_once(void *arg, const char *job_id, const char *tool,
			     const json_t *progress)
{
	self_removing_calls++;
	worker_remove_progress_listener(arg, on_progress_once, arg);
}

static void progress__a_listener_may_remove_itself_while_called(void **state)
{
	struct fx *f = *state;
	char id[40];

	self_removing_calls = 0;
	progress_seen = 0;
	assert_int_equal(worker_add_progress_listener(f->w, on_progress_once,
						      f->w),
			 0);
	assert_int_equal(worker_add_progress_listener(f->w, on_progress, NULL),
			 0);
	fx_submit_ok(f, "ckpt", "{}", NULL, id);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	fx_submit_ok(f, "ckpt", "{}", NULL, id);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	assert_int_equal(self_removing_calls, 1);
	assert_int_equal(progress_seen, 2); /* the other one still hears */
}

/* event_data_of returns a new reference to the data of the job's first
 * event of type (NULL when it has none). */
static json_t *event_data_of(struct fx *f, const char *id, int type)
{
	struct store_event *ev = NULL;
	size_t n = 0;
	json_t *data = NULL;

	assert_int_equal(store_events(f->st, 0, id, 100, &ev, &n), 0);
	for (size_t i = 0; i < n; i++) {
		if (!data && ev[i].type == type)
			data = json_incref(ev[i].data);
		store_event_finish(&ev[i]);
	}
	free(ev);
	return data;
}

static void approval_requested__carries_the_approval_view(void **state)
{
	struct fx *f = *state;
	json_t *created, *asked, *want;
	char id[40];

	fx_submit_ok(f, "shown_gated", "{\"secret\":\"s3cr3t\"}", NULL, id);
	created = event_data_of(f, id, STORE_EV_CREATED);
	asked = event_data_of(f, id, STORE_EV_APPROVAL_REQUESTED);
	assert_string_equal(json_string_value(json_object_get(created, "shown")),
			    "redacted input");
	assert_string_equal(json_string_value(json_object_get(asked, "ask")),
			    "may I?");
	json_decref(created);
	json_decref(asked);

	/* Without a transform, the approval view is the input. */
	fx_submit_ok(f, "gated", "{\"x\":7}", NULL, id);
	asked = event_data_of(f, id, STORE_EV_APPROVAL_REQUESTED);
	want = json_pack("{s:i}", "x", 7);
	assert_true(json_equal(asked, want));
	json_decref(asked);
	json_decref(want);
}

static void events__carry_the_display_view(void **state)
{
	struct fx *f = *state;
	struct store_event *ev = NULL;
	size_t n = 0;
	json_t *o;
	char id[40];

	fx_submit_ok(f, "shown", "{\"secret\":\"s3cr3t\"}", NULL, id);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	assert_int_equal(store_events(f->st, 0, id, 100, &ev, &n), 0);
	assert_true(n >= 3);
	assert_int_equal(ev[0].type, STORE_EV_CREATED);
	assert_string_equal(json_string_value(json_object_get(ev[0].data,
							      "shown")),
			    "redacted input");
	for (size_t i = 0; i < n; i++)
		store_event_finish(&ev[i]);
	free(ev);

	struct store_job *j = fx_get(f, id);
	o = worker_job_to_json(f->w, j, WORKER_VIEW_DISPLAY);
	assert_string_equal(json_string_value(json_object_get(
				    json_object_get(o, "input"), "shown")),
			    "redacted input");
	json_decref(o);
	o = worker_job_to_json(f->w, j, WORKER_VIEW_RAW);
	assert_string_equal(json_string_value(json_object_get(
				    json_object_get(o, "input"), "secret")),
			    "s3cr3t");
	json_decref(o);
	store_job_free(j);
}

static void retry__of_a_failed_job__makes_a_new_job(void **state)
{
	struct fx *f = *state;
	struct worker_submit p = {.has_max_retries = true, .max_retries = 0};
	struct fx_res res = {0};
	struct store_job *j;
	char id[40];

	fx_submit_ok(f, "flaky", "{\"okAt\":2}", &p, id);
	fx_wait_status(f, id, STORE_FAILED, 5000);
	assert_int_equal(worker_retry(f->w, id, NULL, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	assert_int_equal(res.err, WORKER_OK);
	assert_string_not_equal(res.id, id);
	j = fx_get(f, res.id);
	assert_string_equal(j->retry_of, id);
	store_job_free(j);
	fx_res_finish(&res);
	assert_int_equal(fx_status(f, id), STORE_FAILED);
}

/* Approvals of one job that arrive together are each judged on the list
 * of approvals they read, before any of them commits: the one whose list
 * changed under it is judged again, so alice's and bob's both count
 * (never one over the other), and a second one of alice's that came with
 * them is answered already_approved. */
static void quorum__approvals_that_race__all_count_and_none_twice(void **state)
{
	struct fx *f = *state;
	struct worker_actor alice = {"alice", "tcp", NULL, BERTH_ROLE_APPROVE};
	struct worker_actor bob = {"bob", "http", NULL, BERTH_ROLE_APPROVE};
	struct fx_res a = {0}, b = {0}, a2 = {0};
	struct store_job *j;
	char id[40];

	fx_submit_ok(f, "quorum2", "{}", NULL, id);
	/* All three read the job now: it has no approval yet. */
	assert_int_equal(worker_approve(f->w, id, "a", &alice, fx_cb, &a), 0);
	assert_int_equal(worker_approve(f->w, id, "b", &bob, fx_cb, &b), 0);
	assert_int_equal(worker_approve(f->w, id, "again", &alice, fx_cb, &a2), 0);
	fx_wait_res(f, &a);
	fx_wait_res(f, &b);
	fx_wait_res(f, &a2);
	assert_int_equal(a.err, WORKER_OK);
	assert_int_equal(b.err, WORKER_OK);
	assert_int_equal(a2.err, WORKER_ECONFLICT);
	assert_non_null(json_object_get(a2.data, "reason"));
	assert_string_equal(json_string_value(json_object_get(a2.data, "reason")),
			    "already_approved");
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	j = fx_get(f, id);
	assert_int_equal(json_array_size(j->approvals), 2);
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(j->approvals, 0), "by")), "alice");
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(j->approvals, 1), "by")), "bob");
	assert_string_equal(j->decided_by, "bob");
	assert_string_equal(j->decided_via, "http");
	assert_string_equal(j->submitted_by, "berthd");
	/* One approved event each: alice's below the quorum, bob's that met
	 * it; one job ran once. */
	assert_int_equal(fx_count_events(f, id, STORE_EV_APPROVED), 2);
	assert_int_equal(atomic_load(&executed), 1);
	store_job_free(j);
	fx_res_finish(&a);
	fx_res_finish(&b);
	fx_res_finish(&a2);
}

/* An approver who approves again once the quorum is met is told that
 * they approved already, as before it was met: an approval that raced the
 * one that met the quorum is judged again after it. */
static void quorum__an_approver_again_after_the_quorum__is_already_approved(
	void **state)
{
	struct fx *f = *state;
	struct worker_actor alice = {"alice", "tcp", NULL, BERTH_ROLE_APPROVE};
	struct worker_actor bob = {"bob", "http", NULL, BERTH_ROLE_APPROVE};
	struct fx_res a = {0}, b = {0}, a2 = {0};
	char id[40];

	fx_submit_ok(f, "quorum2", "{}", NULL, id);
	assert_int_equal(worker_approve(f->w, id, "a", &alice, fx_cb, &a), 0);
	fx_wait_res(f, &a);
	assert_int_equal(worker_approve(f->w, id, "b", &bob, fx_cb, &b), 0);
	fx_wait_res(f, &b);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	assert_int_equal(worker_approve(f->w, id, "again", &alice, fx_cb, &a2),
			 0);
	fx_wait_res(f, &a2);
	assert_int_equal(a2.err, WORKER_ECONFLICT);
	assert_non_null(json_object_get(a2.data, "reason"));
	assert_string_equal(json_string_value(json_object_get(a2.data, "reason")),
			    "already_approved");
	assert_string_equal(json_string_value(json_object_get(a2.data, "status")),
			    "completed");
	assert_int_equal(fx_count_events(f, id, STORE_EV_APPROVED), 2);
	fx_res_finish(&a);
	fx_res_finish(&b);
	fx_res_finish(&a2);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(submit__with_approval__waits_then_runs_once_approved),
		T(decline__stores_the_reason_and_never_runs_execute),
		T(approval_policy__decides_from_the_input),
		T(resume__with_valid_data__runs_again_with_it),
		T(resume__with_invalid_data__keeps_job_suspended),
		T(resume__of_several_suspended_calls__gives_each_its_own_data),
		T(cancel__of_a_pending_job__means_it_never_runs),
		T(cancel__of_a_running_job__aborts_it_and_frees_its_slot),
		T(cancel__of_a_suspended_job__ends_it),
		T(cancel__while_the_result_waits_to_be_stored_again__lets_shutdown_finish),
		T(ttl__of_a_waiting_job__expires_it),
		T(retries__until_tries_run_out__then_failed),
		T(timeout__with_no_retries_left__is_timed_out),
		T(timeout__of_submit__overrides_the_tools),
		T(timeout__of_a_c_tool_ignoring_abort__still_finishes_the_job),
		T(request_context__failing_its_schema__is_refused_and_never_runs),
		T(output__failing_its_schema__fails_without_retry),
		T(submit__with_invalid_input__stores_nothing),
		T(submit__with_an_idempotency_key__returns_the_first_job),
		T(checkpoint__saved_before_a_crash__is_seen_by_the_retry),
		T(progress__reaches_the_listeners),
		T(progress__a_listener_may_remove_itself_while_called),
		T(events__carry_the_display_view),
		T(approval_requested__carries_the_approval_view),
		T(retry__of_a_failed_job__makes_a_new_job),
		T(quorum__approvals_that_race__all_count_and_none_twice),
		T(quorum__an_approver_again_after_the_quorum__is_already_approved),
	};

	return cmocka_run_group_tests_name("worker lifecycle", tests, NULL,
					   NULL);
}

/*
 * test_sched.c: the scheduler: priority order, per-tool concurrency,
 * delayed jobs on time, paused tools, starting a job in its submission's
 * commit only when nothing waits, nonblocking tools on the loop thread, a
 * clean shutdown, the recovery of runs a crash interrupted, and the
 * threads kept apart for CPU work.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fixture.h"
#include "worker/builtin.h"

static uv_mutex_t order_mu;
static int order[16];
static int norder;
static atomic_int current, peak;

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static struct berth_outcome exec_record(const json_t *input,
					struct berth_ctx *ctx, void *data)
{
	uv_mutex_lock(&order_mu);
	if (norder < 16)
		order[norder++] = (int)json_integer_value(
			json_object_get(input, "n"));
	uv_mutex_unlock(&order_mu);
	return berth_output(json_object());
}

static const struct berth_tool record = {
	.id = "record",
	.execute = exec_record,
};

static struct berth_outcome exec_busy(const json_t *input,
				      struct berth_ctx *ctx, void *data)
{
	int now = atomic_fetch_add(&current, 1) + 1;
	int p = atomic_load(&peak);
	json_int_t ms = json_integer_value(json_object_get(input, "ms"));

	while (now > p && !atomic_compare_exchange_weak(&peak, &p, now))
		;
	for (json_int_t i = 0; i < ms / 5 && !berth_ctx_aborted(ctx); i++)
		sleep_ms(5);
	atomic_fetch_sub(&current, 1);
	return berth_output(json_object());
}

static const struct berth_tool limited = {
	.id = "limited",
	.background = {.concurrency = 2},
	.execute = exec_busy,
};

static const struct berth_tool single = {
	.id = "single",
	.background = {.concurrency = 1},
	.execute = exec_busy,
};

static const struct berth_tool busy = {
	.id = "busy",
	.execute = exec_busy,
};

static const struct berth_tool no_rerun = {
	.id = "no-rerun",
	.background = {.on_interrupt = BERTH_INTERRUPT_FAIL, .max_retries = 3},
	.execute = exec_busy,
};

/* nonblocking: records the thread it ran on and what saving a checkpoint
 * answered. */
static pthread_t inline_thread;
static int inline_checkpoint_rc;

static struct berth_outcome exec_inline(const json_t *input,
					struct berth_ctx *ctx, void *data)
{
	inline_thread = pthread_self();
	inline_checkpoint_rc = berth_ctx_save_checkpoint(ctx, input);
	return berth_output(json_object());
}

static const struct berth_tool nonblocking = {
	.id = "inline",
	.execute = exec_inline,
	.nonblocking = true,
};

static const struct berth_tool nonblocking_limited = {
	.id = "inline-limited",
	.background = {.concurrency = 2},
	.execute = exec_inline,
	.nonblocking = true,
};

static const struct berth_tool *const all_tools[] = {
	&record, &limited, &single, &busy, &no_rerun, &nonblocking,
	&nonblocking_limited,
};

static void add_tools(struct fx *f)
{
	for (size_t i = 0; i < sizeof(all_tools) / sizeof(all_tools[0]);
	     i++) {
		char *err = NULL;
		assert_int_equal(worker_add_tool(f->w, all_tools[i], &err), 0);
	}
}

static struct worker_config cfg1 = {.workers = 1, .kill_grace_ms = 200,
				    .shutdown_grace_ms = 100};
static struct worker_config cfg8 = {.workers = 8, .kill_grace_ms = 200,
				    .shutdown_grace_ms = 100};

static int setup_with(void **state, struct worker_config *cfg, bool start)
{
	struct fx *f = fx_new(cfg);

	add_tools(f);
	if (start)
		fx_start(f);
	norder = 0;
	atomic_store(&current, 0);
	atomic_store(&peak, 0);
	*state = f;
	return 0;
}

static int setup1(void **state)
{
	return setup_with(state, &cfg1, true);
}

static int setup8(void **state)
{
	return setup_with(state, &cfg8, true);
}

static int setup_unstarted(void **state)
{
	return setup_with(state, &cfg1, false);
}

static int setup_unstarted8(void **state)
{
	return setup_with(state, &cfg8, false);
}

static int teardown(void **state)
{
	fx_free(*state);
	return 0;
}

static void pause_tool(struct fx *f, const char *tool, bool paused)
{
	struct fx_res res = {0};

	assert_int_equal(worker_pause(f->w, tool, paused, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	assert_int_equal(res.err, WORKER_OK);
	fx_res_finish(&res);
}

static void claim__runs_higher_priority_first_then_older(void **state)
{
	struct fx *f = *state;
	static const int prio[] = {1, 5, 3, 5, 1};
	static const int want[] = {1, 3, 2, 0, 4};
	char ids[5][40];

	pause_tool(f, "record", true);
	for (int i = 0; i < 5; i++) {
		struct worker_submit p = {.has_priority = true,
					  .priority = prio[i]};
		char in[32];

		snprintf(in, sizeof(in), "{\"n\":%d}", i);
		fx_submit_ok(f, "record", in, &p, ids[i]);
		/* Distinct run_at values, so "older" is well defined. */
		fx_run_for(f, 3);
	}
	fx_run_for(f, 50);
	assert_int_equal(norder, 0);
	pause_tool(f, "record", false);
	for (int i = 0; i < 5; i++)
		fx_wait_status(f, ids[i], STORE_COMPLETED, 5000);
	assert_int_equal(norder, 5);
	for (int i = 0; i < 5; i++)
		assert_int_equal(order[i], want[i]);
}

static void claim__never_exceeds_a_tools_concurrency(void **state)
{
	struct fx *f = *state;
	char ids[6][40];
	struct worker_stats st;

	for (int i = 0; i < 6; i++)
		fx_submit_ok(f, "limited", "{\"ms\":250}", NULL, ids[i]);
	fx_run_for(f, 30);
	worker_stats(f->w, &st);
	assert_int_equal(st.size, 8);
	assert_int_equal(st.busy, 2);
	for (int i = 0; i < 6; i++)
		fx_wait_status(f, ids[i], STORE_COMPLETED, 5000);
	assert_int_equal(atomic_load(&peak), 2);
}

static void claim__never_exceeds_the_pool(void **state)
{
	struct fx *f = *state;
	char ids[4][40];

	for (int i = 0; i < 4; i++)
		fx_submit_ok(f, "busy", "{\"ms\":30}", NULL, ids[i]);
	for (int i = 0; i < 4; i++)
		fx_wait_status(f, ids[i], STORE_COMPLETED, 5000);
	assert_int_equal(atomic_load(&peak), 1);
}

static struct worker_config cfg_threads = {.workers = 8, .threads = 2,
					   .kill_grace_ms = 200,
					   .shutdown_grace_ms = 100};

static int setup_threads(void **state)
{
	const struct berth_tool *const *builtins;
	size_t n;
	int rc = setup_with(state, &cfg_threads, false);
	struct fx *f = *state;

	builtins = worker_builtin_tools(&n);
	for (size_t i = 0; i < n; i++) {
		char *err = NULL;
		assert_int_equal(worker_add_tool(f->w, builtins[i], &err), 0);
	}
	fx_start(f);
	return rc;
}

/* C tools that take a thread (CPU work) run at most cfg.threads at once,
 * whatever slots are free; jobs that only wait (the built-in sleep, on a
 * timer) take the other slots meanwhile, and finish while the CPU work
 * still queues for its threads. */
static void threads__bound_cpu_work_and_leave_the_other_slots_to_waits(void **state)
{
	struct fx *f = *state;
	char busy_ids[6][40], sleep_ids[4][40];
	int done = 0;

	for (int i = 0; i < 6; i++)
		fx_submit_ok(f, "busy", "{\"ms\":400}", NULL, busy_ids[i]);
	for (int i = 0; i < 4; i++)
		fx_submit_ok(f, "sleep", "{\"ms\":50}", NULL, sleep_ids[i]);
	for (int i = 0; i < 4; i++)
		fx_wait_status(f, sleep_ids[i], STORE_COMPLETED, 20000);
	for (int i = 0; i < 6; i++)
		done += fx_status(f, busy_ids[i]) == STORE_COMPLETED;
	/* Six of 400 ms on two threads take three rounds; the sleeps did
	 * not wait for them. */
	assert_true(done < 6);
	for (int i = 0; i < 6; i++)
		fx_wait_status(f, busy_ids[i], STORE_COMPLETED, 20000);
	assert_int_equal(atomic_load(&peak), 2);
}

/* settled_running runs the loop until at least want of the n jobs ids
 * are running (or 6 s passed), then a little longer, so that a claim that
 * would bring more has come back, and returns how many are running. */
static int settled_running(struct fx *f, char (*ids)[40], int n, int want)
{
	int running = 0;

	for (int tries = 0; tries < 300 && running < want; tries++) {
		fx_run_for(f, 20);
		running = 0;
		for (int i = 0; i < n; i++)
			running += fx_status(f, ids[i]) == STORE_RUNNING;
	}
	fx_run_for(f, 100);
	running = 0;
	for (int i = 0; i < n; i++)
		running += fx_status(f, ids[i]) == STORE_RUNNING;
	return running;
}

/* Claims bring more jobs than threads: those wait, running in the store,
 * for a thread to free, so that a run that ends has the next at hand
 * rather than behind a claim's commit; still no more than the threads
 * execute at once, and the queue takes at most half the other slots (8
 * slots, 2 threads: 3 wait). */
static void threads__claims_bring_jobs_that_wait_for_a_thread_in_turn(
	void **state)
{
	struct fx *f = *state;
	char ids[6][40];

	for (int i = 0; i < 6; i++)
		fx_submit_ok(f, "busy", "{\"ms\":1500}", NULL, ids[i]);
	assert_int_equal(settled_running(f, ids, 6, 5), 5);
	assert_int_equal(atomic_load(&current), 2);
	for (int i = 0; i < 6; i++)
		fx_wait_status(f, ids[i], STORE_COMPLETED, 20000);
	assert_int_equal(atomic_load(&peak), 2);
}

static struct worker_config cfg_many_slots = {.workers = 512, .threads = 2,
					      .kill_grace_ms = 200,
					      .shutdown_grace_ms = 100};

static int setup_many_slots(void **state)
{
	return setup_with(state, &cfg_many_slots, true);
}

/* With room in the slots, the claims keep 64 runs in hand for two threads
 * (WORKER__THREAD_QUEUE): short C tools run from a claim's batch while the
 * next claim is on its way. A queue of 16 left a backlog of seconds of
 * suspend cycles with the default --threads (docs/BENCHMARKS.md). */
static void threads__claims_keep_64_runs_in_hand_when_the_slots_allow(
	void **state)
{
	struct fx *f = *state;
	char ids[80][40];

	for (int i = 0; i < 80; i++)
		fx_submit_ok(f, "busy", "{\"ms\":3000}", NULL, ids[i]);
	assert_int_equal(settled_running(f, ids, 80, 2 + 64), 2 + 64);
	assert_int_equal(atomic_load(&current), 2);
	assert_true(atomic_load(&peak) <= 2);
}

/* A job that waits for a thread has its timeout start with its execution:
 * waiting behind longer jobs does not time it out. */
static void threads__a_job_that_waits_for_a_thread__times_from_its_execution(
	void **state)
{
	struct fx *f = *state;
	struct worker_submit p = {.timeout_ms = 600};
	char ids[2][40], id[40];

	for (int i = 0; i < 2; i++)
		fx_submit_ok(f, "busy", "{\"ms\":1000}", NULL, ids[i]);
	fx_wait_status(f, ids[1], STORE_RUNNING, 20000);
	fx_submit_ok(f, "busy", "{\"ms\":20}", &p, id);
	fx_wait_status(f, id, STORE_COMPLETED, 20000);
	for (int i = 0; i < 2; i++)
		fx_wait_status(f, ids[i], STORE_COMPLETED, 20000);
	assert_int_equal(fx_count_events(f, id, STORE_EV_RETRYING), 0);
}

/* A job that waits for a thread is cancelled at once, without running;
 * its slot is free again while the threads are still busy. */
static void threads__a_job_that_waits_for_a_thread__is_cancelled_at_once(
	void **state)
{
	struct fx *f = *state;
	struct fx_res res = {0};
	struct worker_stats st;
	char ids[2][40], id[40];
	int64_t t0;

	for (int i = 0; i < 2; i++)
		fx_submit_ok(f, "busy", "{\"ms\":3000}", NULL, ids[i]);
	fx_wait_status(f, ids[1], STORE_RUNNING, 20000);
	fx_submit_ok(f, "busy", "{\"ms\":3000}", NULL, id);
	fx_wait_status(f, id, STORE_RUNNING, 20000);
	t0 = store_now();
	assert_int_equal(worker_cancel(f->w, id, NULL, NULL, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	fx_res_finish(&res);
	fx_wait_status(f, id, STORE_CANCELLED, 20000);
	fx_run_for(f, 50);
	worker_stats(f->w, &st);
	/* The two on the threads are still at it. */
	if (store_now() - t0 < 2500)
		assert_int_equal(st.busy, 2);
	assert_int_equal(atomic_load(&peak), 2);
	for (int i = 0; i < 2; i++)
		fx_wait_status(f, ids[i], STORE_COMPLETED, 20000);
}

/* A shutdown starts no job that waits for a thread: it goes back to
 * pending as the running ones do, without using a try. */
static void threads__a_shutdown__puts_the_jobs_that_wait_for_a_thread_back(
	void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	char ids[4][40];

	for (int i = 0; i < 4; i++)
		fx_submit_ok(f, "busy", "{\"ms\":5000}", NULL, ids[i]);
	for (int i = 0; i < 4; i++)
		fx_wait_status(f, ids[i], STORE_RUNNING, 20000);
	fx_restart(f, &cfg_threads);
	for (int i = 0; i < 4; i++) {
		j = fx_get(f, ids[i]);
		assert_int_equal(j->status, STORE_PENDING);
		assert_int_equal(j->attempt, 1);
		store_job_free(j);
	}
	assert_true(atomic_load(&peak) <= 2);
}

/* The built-in sleep waits on a timer, and a cancel ends its wait at once
 * rather than at its end. */
static void sleep__cancelled__ends_its_wait_at_once(void **state)
{
	struct fx *f = *state;
	struct fx_res res = {0};
	char id[40];

	fx_submit_ok(f, "sleep", "{\"ms\":600000}", NULL, id);
	fx_wait_status(f, id, STORE_RUNNING, 20000);
	assert_int_equal(worker_cancel(f->w, id, NULL, NULL, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	fx_res_finish(&res);
	fx_wait_status(f, id, STORE_CANCELLED, 20000);
	fx_run_for(f, 50);
	struct worker_stats st;
	worker_stats(f->w, &st);
	assert_int_equal(st.busy, 0);
}

static void delayed_job__runs_on_time_and_not_before(void **state)
{
	struct fx *f = *state;
	int64_t at = store_now() + 200;
	struct worker_submit p = {.run_at = at};
	struct store_job *j;
	char id[40];

	fx_submit_ok(f, "record", "{\"n\":1}", &p, id);
	fx_run_for(f, 50);
	if (store_now() < at)
		assert_int_equal(fx_status(f, id), STORE_PENDING);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	j = fx_get(f, id);
	assert_true(j->started_at >= at);
	/* On time: a timer at run_at, not a poll; the bound is loose so a
	 * loaded machine does not fail it. */
	assert_true(j->started_at < at + 500);
	store_job_free(j);
}

static void delayed_job__runs_on_time_while_another_tool_waits_for_a_slot(
	void **state)
{
	struct fx *f = *state;
	int64_t at;
	struct worker_submit p;
	struct store_job *j;
	char a[40], b[40], d[40];

	/* single (concurrency 1) runs a, and b waits for its slot: the next
	 * run_at of the store is in the past from then on. */
	fx_submit_ok(f, "single", "{\"ms\":1500}", NULL, a);
	fx_submit_ok(f, "single", "{\"ms\":10}", NULL, b);
	fx_wait_status(f, a, STORE_RUNNING, 2000);
	at = store_now() + 200;
	p = (struct worker_submit){.run_at = at};
	fx_submit_ok(f, "record", "{\"n\":1}", &p, d);
	fx_wait_status(f, d, STORE_COMPLETED, 5000);
	j = fx_get(f, d);
	assert_true(j->started_at >= at);
	/* Long before a (the 800 ms job holding single's slot) finishes. */
	assert_true(j->started_at < at + 500);
	store_job_free(j);
	assert_int_equal(fx_status(f, b), STORE_PENDING);
	fx_wait_status(f, b, STORE_COMPLETED, 3000);
}

static void
delayed_job__runs_on_time_after_a_restart_while_another_tool_is_full(
	void **state)
{
	struct fx *f = *state;
	struct worker_submit p;
	struct store_job *j;
	int64_t at;
	char a[40], b[40], d[40];

	/* Stored before a restart, so the new worker knows no run_at but
	 * the store's: single (concurrency 1) will run a while b, due, waits
	 * for its slot, and store_next_run_at would answer b's past time
	 * instead of d's; the claim's next run_at excludes full single. */
	fx_submit_ok(f, "single", "{\"ms\":3000}", NULL, a);
	fx_submit_ok(f, "single", "{\"ms\":10}", NULL, b);
	at = store_now() + 600;
	p = (struct worker_submit){.run_at = at};
	fx_submit_ok(f, "record", "{\"n\":1}", &p, d);
	fx_restart(f, &cfg8);
	add_tools(f);
	fx_start(f);
	fx_wait_status(f, d, STORE_COMPLETED, 5000);
	j = fx_get(f, d);
	assert_true(j->started_at >= at);
	/* On time (the claim's next run_at arms the timer, no re-check
	 * polls), long before a (3 s) frees single's slot. */
	assert_true(j->started_at < at + 250);
	store_job_free(j);
	assert_int_equal(fx_status(f, a), STORE_RUNNING);
	assert_int_equal(fx_status(f, b), STORE_PENDING);
	fx_wait_status(f, b, STORE_COMPLETED, 6000);
}

static void paused_tool__starts_nothing_until_unpaused(void **state)
{
	struct fx *f = *state;
	const struct worker_tool *t = worker_tool_find(f->w, "record");
	json_t *o;
	char id[40];

	pause_tool(f, "record", true);
	o = worker_tool_to_json(f->w, t);
	assert_true(json_is_true(json_object_get(o, "paused")));
	json_decref(o);
	fx_submit_ok(f, "record", "{\"n\":1}", NULL, id);
	fx_run_for(f, 100);
	assert_int_equal(fx_status(f, id), STORE_PENDING);
	pause_tool(f, "record", false);
	fx_wait_status(f, id, STORE_COMPLETED, 2000);
}

static struct worker_stats stats(struct fx *f);

/* A paused tool's new jobs ask for no claim (each would walk all of the
 * tool's pending jobs to take none); its unpause claims them. */
static void paused_tool__new_jobs_ask_for_no_claim(void **state)
{
	struct fx *f = *state;
	char ids[20][40];
	uint64_t before;

	pause_tool(f, "record", true);
	fx_run_for(f, 50);
	before = stats(f).claims;
	for (int i = 0; i < 20; i++)
		fx_submit_ok(f, "record", "{\"n\":1}", NULL, ids[i]);
	fx_run_for(f, 100);
	assert_int_equal(stats(f).claims, before);
	assert_int_equal(fx_status(f, ids[19]), STORE_PENDING);
	pause_tool(f, "record", false);
	for (int i = 0; i < 20; i++)
		fx_wait_status(f, ids[i], STORE_COMPLETED, 5000);
	assert_true(stats(f).claims > before);
}

static void shutdown__puts_running_jobs_back_without_using_a_retry(
	void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	char *err = NULL;
	char id[40];

	fx_submit_ok(f, "busy", "{\"ms\":5000}", NULL, id);
	fx_wait_status(f, id, STORE_RUNNING, 2000);
	fx_restart(f, &cfg1);
	j = fx_get(f, id);
	if (j->status != STORE_PENDING)
		fx_wait_status(f, id, STORE_PENDING, 0);
	assert_int_equal(j->status, STORE_PENDING);
	assert_int_equal(j->attempt, 1);
	store_job_free(j);
	assert_int_equal(fx_count_events(f, id, STORE_EV_RETRYING), 1);
	add_tools(f);
	assert_int_equal(worker_start(f->w, &err), 0);
	fx_wait_status(f, id, STORE_RUNNING, 2000);
	struct fx_res res = {0};
	assert_int_equal(worker_cancel(f->w, id, NULL, NULL, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	fx_res_finish(&res);
}

static void claim_done(struct store_req *req, int rc)
{
	*(int *)req->data = rc == 0 ? (int)req->njobs : -1;
	store_req_finish(req);
}

static bool claimed(void *arg)
{
	return *(int *)arg != -2;
}

static void recovery__follows_each_tools_interrupt_policy(void **state)
{
	struct fx *f = *state;
	struct store_req req = {0};
	struct store_job *j;
	int n = -2;
	char again[40], failed[40];

	/* Submitted before the worker starts, then claimed behind its back:
	 * running jobs with no run, as after a kill -9. */
	struct worker_submit p = {.has_max_retries = true, .max_retries = 1};

	fx_submit_ok(f, "busy", "{\"ms\":1}", &p, again);
	fx_submit_ok(f, "no-rerun", "{\"ms\":1}", NULL, failed);
	req.op = STORE_OP_CLAIM;
	req.u.claim.limit = 10;
	req.u.claim.now = store_now() + 1000;
	req.done = claim_done;
	req.data = &n;
	assert_int_equal(store_submit(f->st, &req), 0);
	assert_true(fx_run_until(f, claimed, &n, 5000));
	assert_int_equal(n, 2);

	fx_start(f);
	fx_wait_status(f, again, STORE_COMPLETED, 2000);
	j = fx_get(f, again);
	assert_int_equal(j->attempt, 2);
	store_job_free(j);
	j = fx_get(f, failed);
	assert_int_equal(j->status, STORE_FAILED);
	assert_string_equal(json_string_value(json_object_get(j->error,
							      "code")),
			    "interrupted");
	store_job_free(j);
}

#define T1(name) cmocka_unit_test_setup_teardown(name, setup1, teardown)
#define T8(name) cmocka_unit_test_setup_teardown(name, setup8, teardown)

static struct worker_stats stats(struct fx *f)
{
	struct worker_stats st;

	worker_stats(f->w, &st);
	return st;
}

/* events_in_order asserts that job id's events are exactly types[0..n),
 * with consecutive seqs when adjacent is true. */
static void events_in_order(struct fx *f, const char *id, const int *types,
			    size_t n, bool adjacent)
{
	struct store_event *v;
	size_t got;

	assert_int_equal(store_events(f->st, 0, id, 100, &v, &got), 0);
	assert_int_equal(got, n);
	for (size_t i = 0; i < got; i++) {
		assert_int_equal(v[i].type, types[i]);
		if (adjacent && i > 0)
			assert_int_equal(v[i].seq, v[i - 1].seq + 1);
	}
	for (size_t i = 0; i < got; i++)
		store_event_finish(&v[i]);
	free(v);
}

static void submit__of_a_tool_that_may_block__starts_by_a_claim(void **state)
{
	static const int want[] = {STORE_EV_CREATED, STORE_EV_STARTED,
				   STORE_EV_COMPLETED};
	struct fx *f = *state;
	char id[40];

	fx_run_for(f, 50); /* the first claim finds nothing waiting */
	/* Its answer leaves before it runs: a claim starts it. */
	fx_submit_ok(f, "record", "{\"n\":7}", NULL, id);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	assert_int_equal(stats(f).started_at_submit, 0);
	assert_int_equal(stats(f).started_by_claim, 1);
	events_in_order(f, id, want, 3, false);
	assert_int_equal(norder, 1);
	assert_int_equal(order[0], 7);
}

static void submit__behind_waiting_jobs__waits_for_a_claim_in_priority_order(
	void **state)
{
	struct fx *f = *state;
	struct worker_submit lo = {.has_priority = true, .priority = 1};
	struct worker_submit hi = {.has_priority = true, .priority = 5};
	char first[40], ids[3][40], late[40];

	fx_run_for(f, 50);
	/* The pool's one slot is taken... */
	fx_submit_ok(f, "busy", "{\"ms\":200}", NULL, first);
	fx_wait_status(f, first, STORE_RUNNING, 5000);
	/* ...so these wait, the nonblocking one too, and start by priority
	 * once it is free. */
	fx_submit_ok(f, "record", "{\"n\":0}", &lo, ids[0]);
	fx_submit_ok(f, "record", "{\"n\":1}", &hi, ids[1]);
	fx_submit_ok(f, "inline", "{}", &lo, ids[2]);
	for (int i = 0; i < 3; i++)
		assert_int_equal(fx_status(f, ids[i]), STORE_PENDING);
	for (int i = 0; i < 3; i++)
		fx_wait_status(f, ids[i], STORE_COMPLETED, 5000);
	assert_int_equal(norder, 2);
	assert_int_equal(order[0], 1);
	assert_int_equal(order[1], 0);
	assert_int_equal(stats(f).started_by_claim, 4);
	assert_int_equal(stats(f).started_at_submit, 0);
	/* The claim that came back short cleared the way again. */
	fx_run_for(f, 50);
	fx_submit_ok(f, "inline", "{}", NULL, late);
	assert_int_equal(fx_status(f, late), STORE_COMPLETED);
	assert_int_equal(stats(f).started_at_submit, 1);
}

static void submit__of_a_limited_or_paused_nonblocking_tool__waits_for_a_claim(
	void **state)
{
	struct fx *f = *state;
	char id[40], held[40];

	fx_run_for(f, 50);
	/* A tool with a concurrency limit is counted by the claim only. */
	fx_submit_ok(f, "inline-limited", "{}", NULL, id);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	assert_int_equal(stats(f).started_at_submit, 0);
	assert_int_equal(stats(f).started_by_claim, 1);
	/* A paused tool starts nothing, whatever the pool has free. */
	pause_tool(f, "inline", true);
	fx_run_for(f, 50);
	fx_submit_ok(f, "inline", "{}", NULL, held);
	fx_run_for(f, 100);
	assert_int_equal(fx_status(f, held), STORE_PENDING);
	pause_tool(f, "inline", false);
	fx_wait_status(f, held, STORE_COMPLETED, 5000);
	assert_int_equal(stats(f).started_at_submit, 0);
	assert_int_equal(stats(f).started_by_claim, 2);
}

/* A nonblocking tool's job submitted while the pool is idle runs before
 * its creation commits, and its creation, start and completion commit
 * together: the submit is answered with the job as submitted, and its log
 * has the three events in a row. */
static void nonblocking_tool__at_submission__commits_its_whole_run_at_once(
	void **state)
{
	static const int want[] = {STORE_EV_CREATED, STORE_EV_STARTED,
				   STORE_EV_COMPLETED};
	struct fx *f = *state;
	struct fx_res res = {0};
	struct store_job *j;

	fx_run_for(f, 50);
	fx_submit(f, "inline", "{\"x\":1}", NULL, &res);
	assert_int_equal(res.err, WORKER_OK);
	assert_int_equal(res.status, STORE_PENDING);
	assert_int_equal(stats(f).started_at_submit, 1);
	/* Committed with the creation: done by the time it is answered. */
	assert_int_equal(fx_status(f, res.id), STORE_COMPLETED);
	j = fx_get(f, res.id);
	assert_int_equal(j->attempt, 1);
	assert_true(json_is_object(j->output) && json_object_size(j->output) == 0);
	store_job_free(j);
	events_in_order(f, res.id, want, 3, true);
	assert_true(pthread_equal(inline_thread, pthread_self()));
	fx_res_finish(&res);
}

/* A slot freed by a run that no claim holds back claims nothing while
 * nothing waits: each job run at its submission was one commit of the
 * writer and then a claim that found nothing (on PostgreSQL a transaction
 * of two round trips, which the next batch waited behind). Once something
 * waits, a freed slot claims it. */
static void nonblocking_tool__freed_slots__ask_for_no_claim_while_nothing_waits(
	void **state)
{
	struct fx *f = *state;
	uint64_t before;
	char id[40], first[40], queued[40];

	fx_run_for(f, 50); /* the first claim finds nothing waiting */
	before = stats(f).claims;
	for (int i = 0; i < 30; i++) {
		fx_submit_ok(f, "inline", "{}", NULL, id);
		assert_int_equal(fx_status(f, id), STORE_COMPLETED);
	}
	fx_run_for(f, 100);
	assert_int_equal(stats(f).started_at_submit, 30);
	assert_int_equal(stats(f).claims, before);
	/* The pool's one slot is taken: the next job waits, and the slot
	 * freed by the first claims it. */
	fx_submit_ok(f, "busy", "{\"ms\":100}", NULL, first);
	fx_wait_status(f, first, STORE_RUNNING, 5000);
	fx_submit_ok(f, "inline", "{}", NULL, queued);
	assert_int_equal(fx_status(f, queued), STORE_PENDING);
	fx_wait_status(f, queued, STORE_COMPLETED, 5000);
	assert_true(stats(f).claims > before);
}

/* Whatever a freed slot leaves unclaimed, every job still runs: a mix of
 * tools that claims cap (a concurrency limit, the threads), nonblocking
 * tools run at their submission and delayed jobs, submitted in bursts
 * into a pool too small for them, with the loop run a little between. */
static void mixed_load__every_job_runs_though_freed_slots_may_not_claim(
	void **state)
{
	struct fx *f = *state;
	static const char *const tools[] = {
		"inline", "inline-limited", "single", "limited", "busy",
		"record", "record",
	};
	static const char *const inputs[] = {
		"{}", "{}", "{\"ms\":5}", "{\"ms\":10}", "{\"ms\":5}",
		"{\"n\":1}", "{\"n\":2}",
	};
	enum { N = 120 };
	char (*ids)[40] = calloc(N, sizeof(*ids));
	unsigned seed = 20261202;

	assert_non_null(ids);
	for (int i = 0; i < N; i++) {
		int k;
		struct worker_submit p = {0};

		seed = seed * 1103515245u + 12345u;
		k = (int)((seed >> 16) % 7);
		/* The second "record" is delayed by up to 60 ms. */
		if (k == 6)
			p.run_at = store_now() + (int64_t)((seed >> 8) % 60);
		fx_submit_ok(f, tools[k], inputs[k], k == 6 ? &p : NULL,
			     ids[i]);
		if ((seed >> 4) % 4 == 0)
			fx_run_for(f, (int64_t)((seed >> 12) % 8));
	}
	for (int i = 0; i < N; i++)
		fx_wait_status(f, ids[i], STORE_COMPLETED, 10000);
	free(ids);
}

static int setup_mixed(void **state)
{
	static struct worker_config cfg = {.workers = 3, .threads = 1,
					   .kill_grace_ms = 200,
					   .shutdown_grace_ms = 100};
	return setup_with(state, &cfg, true);
}

static void nonblocking_tool__runs_on_the_loop_thread_and_cannot_checkpoint(
	void **state)
{
	struct fx *f = *state;
	char id[40];

	fx_submit_ok(f, "inline", "{}", NULL, id);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	assert_true(pthread_equal(inline_thread, pthread_self()));
	assert_int_equal(inline_checkpoint_rc, -ENOTSUP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T1(claim__runs_higher_priority_first_then_older),
		T8(claim__never_exceeds_a_tools_concurrency),
		T1(claim__never_exceeds_the_pool),
		T1(delayed_job__runs_on_time_and_not_before),
		T8(delayed_job__runs_on_time_while_another_tool_waits_for_a_slot),
		cmocka_unit_test_setup_teardown(
			delayed_job__runs_on_time_after_a_restart_while_another_tool_is_full,
			setup_unstarted8, teardown),
		T1(paused_tool__starts_nothing_until_unpaused),
		T8(paused_tool__new_jobs_ask_for_no_claim),
		T8(submit__of_a_tool_that_may_block__starts_by_a_claim),
		T1(submit__behind_waiting_jobs__waits_for_a_claim_in_priority_order),
		T1(nonblocking_tool__freed_slots__ask_for_no_claim_while_nothing_waits),
		cmocka_unit_test_setup_teardown(
			mixed_load__every_job_runs_though_freed_slots_may_not_claim,
			setup_mixed, teardown),
		T8(submit__of_a_limited_or_paused_nonblocking_tool__waits_for_a_claim),
		T1(nonblocking_tool__runs_on_the_loop_thread_and_cannot_checkpoint),
		T8(nonblocking_tool__at_submission__commits_its_whole_run_at_once),
		T1(shutdown__puts_running_jobs_back_without_using_a_retry),
		cmocka_unit_test_setup_teardown(
			recovery__follows_each_tools_interrupt_policy,
			setup_unstarted, teardown),
		cmocka_unit_test_setup_teardown(
			threads__bound_cpu_work_and_leave_the_other_slots_to_waits,
			setup_threads, teardown),
		cmocka_unit_test_setup_teardown(
			threads__claims_bring_jobs_that_wait_for_a_thread_in_turn,
			setup_threads, teardown),
		cmocka_unit_test_setup_teardown(
			threads__a_job_that_waits_for_a_thread__times_from_its_execution,
			setup_threads, teardown),
		cmocka_unit_test_setup_teardown(
			threads__claims_keep_64_runs_in_hand_when_the_slots_allow,
			setup_many_slots, teardown),
		cmocka_unit_test_setup_teardown(
			threads__a_job_that_waits_for_a_thread__is_cancelled_at_once,
			setup_threads, teardown),
		cmocka_unit_test_setup_teardown(
			threads__a_shutdown__puts_the_jobs_that_wait_for_a_thread_back,
			setup_threads, teardown),
		cmocka_unit_test_setup_teardown(
			sleep__cancelled__ends_its_wait_at_once, setup_threads,
			teardown),
	};

	uv_mutex_init(&order_mu);
	return cmocka_run_group_tests_name("worker scheduler", tests, NULL,
					   NULL);
}

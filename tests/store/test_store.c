/*
 * test_store.c: the store's mutations and reads, one request at a time, on
 * a real temporary database: creation and idempotency, every lifecycle
 * transition and its conflict, claims, checkpoints, logs, expiry, pausing,
 * pruning, listing, the event log and start-up recovery.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/store/fixture.h"
#include "tests/store/lists.h"

/* events_of reads every event of job id (all when NULL). */
static size_t events_of(struct fx *f, const char *id, struct store_event **out)
{
	size_t n;
	assert_int_equal(store_events(f->st, 0, id, 1000, out, &n), 0);
	return n;
}

static void free_events(struct store_event *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		store_event_finish(&v[i]);
	free(v);
}

/* run_claim runs a claim of up to limit jobs with caps in *req, which the
 * caller finishes; next_run_at starts at -1, so that a claim that sets
 * none is told from one that sets 0. */
static void run_claim(struct fx *f, int limit, const struct store_cap *caps,
		      size_t ncaps, struct store_req *req)
{
	*req = (struct store_req){.op = STORE_OP_CLAIM};
	req->u.claim.limit = limit;
	req->u.claim.caps = caps;
	req->u.claim.ncaps = ncaps;
	req->next_run_at = -1;
	assert_int_equal(fx_run(f, req), 0);
}

/* claim runs a claim of up to limit jobs and returns how many it moved. */
static size_t claim(struct fx *f, int limit, const struct store_cap *caps, size_t ncaps,
		    char ids[][40])
{
	struct store_req req;
	run_claim(f, limit, caps, ncaps, &req);
	size_t n = req.njobs;
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(req.jobs[i]->status, STORE_RUNNING);
		assert_true(req.jobs[i]->started_at > 0);
		if (ids != NULL)
			memcpy(ids[i], req.jobs[i]->id, 40);
	}
	store_req_finish(&req);
	return n;
}

static void pause_tool(struct fx *f, const char *tool, bool paused)
{
	struct store_req req = {.op = STORE_OP_TOOL_PAUSE};
	req.u.pause.tool = tool;
	req.u.pause.paused = paused;
	assert_int_equal(fx_run(f, &req), 0);
}

/* ---- creation ---------------------------------------------------------- */

static void create__stamps_the_job_and_appends_a_created_event(void **state)
{
	struct fx *f = *state;
	struct store_job job = {.tool = "web.fetch", .status = STORE_PENDING, .priority = 2,
				.run_id = "run-1", .tool_call_id = "call-1", .max_retries = 3,
				.timeout_ms = 9000};
	job.input = json_pack("{s:s}", "url", "https://example.org");
	job.metadata = json_pack("{s:s}", "who", "tests");
	struct store_req req = {.op = STORE_OP_CREATE};
	req.u.create.job = &job;
	req.u.create.event_data = job.input;
	int64_t t0 = store_now();
	assert_int_equal(fx_run(f, &req), 0);
	assert_false(req.existed);
	assert_non_null(req.job);
	assert_int_equal(strlen(req.job->id), 36);
	assert_true(req.job->created_at >= t0 && req.job->updated_at == req.job->created_at);
	assert_int_equal(req.job->run_at, req.job->created_at);
	assert_int_equal(req.job->attempt, 1);

	struct store_job *got;
	assert_int_equal(store_get(f->st, req.job->id, &got), 0);
	assert_string_equal(got->tool, "web.fetch");
	assert_string_equal(got->run_id, "run-1");
	assert_string_equal(got->tool_call_id, "call-1");
	assert_int_equal(got->priority, 2);
	assert_int_equal(got->max_retries, 3);
	assert_int_equal(got->timeout_ms, 9000);
	assert_int_equal(got->created_at, req.job->created_at);
	assert_int_equal(got->attempt, 1);
	assert_true(json_equal(got->input, job.input));
	assert_true(json_equal(got->metadata, job.metadata));
	assert_null(got->output);

	struct store_event *ev;
	size_t n = events_of(f, got->id, &ev);
	assert_int_equal(n, 1);
	assert_int_equal(ev[0].type, STORE_EV_CREATED);
	assert_int_equal(ev[0].status, STORE_PENDING);
	assert_string_equal(ev[0].tool, "web.fetch");
	assert_true(json_equal(ev[0].data, job.input));
	free_events(ev, n);
	store_job_free(got);
	store_req_finish(&req);
	json_decref(job.input);
	json_decref(job.metadata);
}

static void never_called(struct store_req *req, int rc);

/* A job started in its own creation is written running, with "started"
 * after "created"; the answer still shows it as submitted; a claim does
 * not take it again. */
static void create__with_start__claims_the_job_in_the_same_transaction(void **state)
{
	struct fx *f = *state;
	struct store_job job = {.tool = "noop", .status = STORE_PENDING};
	job.input = json_pack("{s:i}", "n", 1);
	struct store_req req = {.op = STORE_OP_CREATE};
	req.u.create.job = &job;
	req.u.create.event_data = job.input;
	req.u.create.start = true;
	assert_int_equal(fx_run(f, &req), 0);
	assert_int_equal(req.job->status, STORE_PENDING);
	assert_int_equal(req.njobs, 0);
	assert_int_equal(fx_status(f, req.job->id), STORE_RUNNING);
	struct store_job *got;
	assert_int_equal(store_get(f->st, req.job->id, &got), 0);
	assert_int_equal(got->started_at, req.job->created_at);
	assert_true(json_equal(got->input, job.input));
	store_job_free(got);

	struct store_event *ev;
	size_t n = events_of(f, req.job->id, &ev);
	assert_int_equal(n, 2);
	assert_int_equal(ev[0].type, STORE_EV_CREATED);
	assert_int_equal(ev[0].status, STORE_PENDING);
	assert_int_equal(ev[1].type, STORE_EV_STARTED);
	assert_int_equal(ev[1].status, STORE_RUNNING);
	assert_int_equal(ev[1].seq, ev[0].seq + 1);
	free_events(ev, n);
	assert_int_equal(claim(f, 10, NULL, 0, NULL), 0);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM jobs WHERE status = 2"
				     " AND started_at = created_at"), 1);
	store_req_finish(&req);

	/* Only a pending job without a key may start so. */
	struct store_req bad = {.op = STORE_OP_CREATE, .done = never_called};
	struct store_job waiting = {.tool = "noop", .status = STORE_AWAITING_APPROVAL};
	bad.u.create.job = &waiting;
	bad.u.create.start = true;
	assert_int_equal(store_submit(f->st, &bad), -EINVAL);
	struct store_job keyed = {.tool = "noop", .status = STORE_PENDING,
				  .idempotency_key = "k"};
	bad.u.create.job = &keyed;
	assert_int_equal(store_submit(f->st, &bad), -EINVAL);
	json_decref(job.input);
}

static void create__awaiting_approval__appends_approval_requested_too(void **state)
{
	struct fx *f = *state;
	char id[40];
	assert_int_equal(fx_create(f, "mail.send", STORE_AWAITING_APPROVAL, NULL, 1, id), 0);
	struct store_event *ev;
	size_t n = events_of(f, id, &ev);
	assert_int_equal(n, 2);
	assert_int_equal(ev[0].type, STORE_EV_CREATED);
	assert_int_equal(ev[1].type, STORE_EV_APPROVAL_REQUESTED);
	assert_int_equal(ev[1].seq, ev[0].seq + 1);
	free_events(ev, n);
}

/* approval_requested carries approval_event_data when it is given; created
 * keeps event_data. */
static void create__awaiting_approval__approval_requested_carries_its_own_data(void **state)
{
	struct fx *f = *state;
	struct store_job job = {.tool = "mail.send", .status = STORE_AWAITING_APPROVAL,
				.approval_required = true};
	job.input = json_pack("{s:s}", "to", "a@example.org");
	json_t *approval = json_pack("{s:s}", "ask", "send mail to a@example.org?");
	struct store_req req = {.op = STORE_OP_CREATE};
	req.u.create.job = &job;
	req.u.create.event_data = job.input;
	req.u.create.approval_event_data = approval;
	assert_int_equal(fx_run(f, &req), 0);
	struct store_event *ev;
	size_t n = events_of(f, req.job->id, &ev);
	assert_int_equal(n, 2);
	assert_int_equal(ev[0].type, STORE_EV_CREATED);
	assert_true(json_equal(ev[0].data, job.input));
	assert_int_equal(ev[1].type, STORE_EV_APPROVAL_REQUESTED);
	assert_true(json_equal(ev[1].data, approval));
	free_events(ev, n);
	store_req_finish(&req);
	json_decref(job.input);
	json_decref(approval);
}

static void create__with_a_ttl_awaiting_approval__gets_an_expiry(void **state)
{
	struct fx *f = *state;
	struct store_job job = {.tool = "t", .status = STORE_AWAITING_APPROVAL, .ttl_ms = 60000,
				.approval_required = true};
	struct store_req req = {.op = STORE_OP_CREATE};
	req.u.create.job = &job;
	assert_int_equal(fx_run(f, &req), 0);
	assert_int_equal(req.job->expires_at, req.job->created_at + 60000);
	int64_t at;
	assert_int_equal(store_next_expiry(f->st, &at), 0);
	assert_int_equal(at, req.job->expires_at);
	store_req_finish(&req);
}

static void create__same_tool_and_key__returns_the_first_job(void **state)
{
	struct fx *f = *state;
	char first[40], other[40];
	assert_int_equal(fx_create(f, "t", STORE_PENDING, "key-1", 1, first), 0);

	struct store_job job = {.tool = "t", .status = STORE_PENDING, .idempotency_key = "key-1"};
	job.input = json_pack("{s:i}", "n", 2);
	struct store_req req = {.op = STORE_OP_CREATE};
	req.u.create.job = &job;
	assert_int_equal(fx_run(f, &req), 0);
	assert_true(req.existed);
	assert_string_equal(req.job->id, first);
	assert_int_equal(json_integer_value(json_object_get(req.job->input, "n")), 1);
	store_req_finish(&req);
	json_decref(job.input);

	assert_int_equal(fx_count(f, "SELECT count(*) FROM jobs"), 1);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM events"), 1);
	assert_int_equal(fx_create(f, "other", STORE_PENDING, "key-1", 1, other), 0);
	assert_string_not_equal(first, other);
}

static void create__with_a_given_id_twice__is_refused_and_writes_nothing(void **state)
{
	struct fx *f = *state;
	struct store_job job = {.id = "my-own-id", .tool = "t", .status = STORE_PENDING};
	struct store_req req = {.op = STORE_OP_CREATE};
	req.u.create.job = &job;
	assert_int_equal(fx_run(f, &req), 0);
	store_req_finish(&req);
	assert_int_equal(fx_run(f, &req), -EEXIST);
	assert_null(req.job);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM events"), 1);
}

static void never_called(struct store_req *req, int rc)
{
	fail_msg("done ran for a request store_submit refused");
}

static void submit__malformed_requests__are_refused_without_a_callback(void **state)
{
	struct fx *f = *state;
	struct store_job job = {.tool = "t", .status = STORE_RUNNING};
	struct store_req req = {.op = STORE_OP_CREATE, .done = never_called};
	req.u.create.job = &job;
	assert_int_equal(store_submit(f->st, &req), -EINVAL);
	memset(&req.u, 0, sizeof(req.u));
	req.op = STORE_OP_TRANSITION;
	snprintf(req.u.transition.job_id, 40, "x");
	req.u.transition.from_mask = STORE_MASK(STORE_COMPLETED);
	req.u.transition.to = STORE_PENDING;
	assert_int_equal(store_submit(f->st, &req), -EINVAL);
	req.op = 99;
	assert_int_equal(store_submit(f->st, &req), -EINVAL);
}

static void get__unknown_id__is_not_found(void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	assert_int_equal(store_get(f->st, "no-such-job", &j), STORE_ENOTFOUND);
	assert_null(j);
}

/* ---- transitions ------------------------------------------------------- */

/* One row per lifecycle transition of DESIGN.md: the status the job is
 * brought to first, the transition, and its event. */
struct move {
	const char *name;
	int from;
	unsigned mask;
	int to;
	int event;
};

static const struct move moves[] = {
	{"approve", STORE_AWAITING_APPROVAL, STORE_MASK(STORE_AWAITING_APPROVAL), STORE_PENDING, STORE_EV_APPROVED},
	{"decline", STORE_AWAITING_APPROVAL, STORE_MASK(STORE_AWAITING_APPROVAL), STORE_DECLINED, STORE_EV_DECLINED},
	{"start", STORE_PENDING, STORE_MASK(STORE_PENDING), STORE_RUNNING, STORE_EV_STARTED},
	{"complete", STORE_RUNNING, STORE_MASK(STORE_RUNNING), STORE_COMPLETED, STORE_EV_COMPLETED},
	{"fail", STORE_RUNNING, STORE_MASK(STORE_RUNNING), STORE_FAILED, STORE_EV_FAILED},
	{"time out", STORE_RUNNING, STORE_MASK(STORE_RUNNING), STORE_TIMED_OUT, STORE_EV_TIMED_OUT},
	{"retry", STORE_RUNNING, STORE_MASK(STORE_RUNNING), STORE_PENDING, STORE_EV_RETRYING},
	{"suspend", STORE_RUNNING, STORE_MASK(STORE_RUNNING), STORE_SUSPENDED, STORE_EV_SUSPENDED},
	{"resume", STORE_SUSPENDED, STORE_MASK(STORE_SUSPENDED), STORE_PENDING, STORE_EV_RESUMED},
	{"cancel pending", STORE_PENDING, STORE_MASK(STORE_PENDING) | STORE_MASK(STORE_RUNNING), STORE_CANCELLED, STORE_EV_CANCELLED},
	{"cancel awaiting", STORE_AWAITING_APPROVAL, STORE_MASK(STORE_AWAITING_APPROVAL), STORE_CANCELLED, STORE_EV_CANCELLED},
	{"cancel suspended", STORE_SUSPENDED, STORE_MASK(STORE_SUSPENDED), STORE_CANCELLED, STORE_EV_CANCELLED},
	{"cancel running", STORE_RUNNING, STORE_MASK(STORE_RUNNING), STORE_CANCELLED, STORE_EV_CANCELLED},
};

/* bring makes a job and moves it to status. */
static void bring(struct fx *f, int status, char id[40])
{
	int start = status == STORE_AWAITING_APPROVAL ? STORE_AWAITING_APPROVAL : STORE_PENDING;
	assert_int_equal(fx_create(f, "t", start, NULL, 1, id), 0);
	if (status == STORE_RUNNING || status == STORE_SUSPENDED)
		assert_int_equal(fx_move(f, id, STORE_MASK(STORE_PENDING), STORE_RUNNING,
					 STORE_EV_STARTED, NULL), 0);
	if (status == STORE_SUSPENDED)
		assert_int_equal(fx_move(f, id, STORE_MASK(STORE_RUNNING), STORE_SUSPENDED,
					 STORE_EV_SUSPENDED, NULL), 0);
	assert_int_equal(fx_status(f, id), status);
}

static void every_transition__succeeds_once_and_then_conflicts(void **state)
{
	struct fx *f = *state;
	for (size_t i = 0; i < sizeof(moves) / sizeof(moves[0]); i++) {
		const struct move *m = &moves[i];
		char id[40];
		bring(f, m->from, id);
		struct store_event *ev0;
		size_t n0 = events_of(f, id, &ev0);

		struct store_job *j;
		assert_int_equal(fx_move(f, id, m->mask, m->to, m->event, &j), 0);
		assert_int_equal(j->status, m->to);
		assert_int_equal(store_status_terminal(m->to), j->finished_at != 0);
		store_job_free(j);

		struct store_event *ev;
		size_t n = events_of(f, id, &ev);
		assert_int_equal(n, n0 + 1);
		assert_int_equal(ev[n - 1].type, m->event);
		assert_int_equal(ev[n - 1].status, m->to);
		assert_int_equal(ev[n - 1].seq, store_last_seq(f->st));
		free_events(ev, n);
		free_events(ev0, n0);

		/* The same transition again is stale unless it leads back
		 * into a status it allows (retry and resume lead to
		 * pending, which "start" may leave again, but not they). */
		if ((m->mask & STORE_MASK(m->to)) != 0)
			continue;
		int64_t seq = store_last_seq(f->st);
		int64_t updated = 0;
		struct store_job *now;
		assert_int_equal(store_get(f->st, id, &now), 0);
		updated = now->updated_at;
		store_job_free(now);
		assert_int_equal(fx_move(f, id, m->mask, m->to, m->event, &j), STORE_ECONFLICT);
		assert_non_null(j);
		assert_int_equal(j->status, m->to);
		assert_int_equal(j->updated_at, updated);
		store_job_free(j);
		assert_int_equal(store_last_seq(f->st), seq);
	}
}

static void transition__of_a_missing_job__is_not_found(void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	assert_int_equal(fx_move(f, "nope", STORE_MASK(STORE_PENDING), STORE_RUNNING,
				 STORE_EV_STARTED, &j), STORE_ENOTFOUND);
	assert_null(j);
	assert_int_equal(store_last_seq(f->st), 0);
}

static void second_decision__is_a_conflict_and_keeps_the_first(void **state)
{
	struct fx *f = *state;
	char id[40];
	bring(f, STORE_AWAITING_APPROVAL, id);
	struct store_req req = {.op = STORE_OP_TRANSITION};
	struct store_transition *t = &req.u.transition;
	memcpy(t->job_id, id, 40);
	t->from_mask = STORE_MASK(STORE_AWAITING_APPROVAL);
	t->to = STORE_DECLINED;
	t->event = STORE_EV_DECLINED;
	t->set = STORE_SET_DECISION;
	t->decision = STORE_DECISION_DECLINED;
	t->reason = "too expensive";
	assert_int_equal(fx_run(f, &req), 0);
	assert_int_equal(req.job->decision, STORE_DECISION_DECLINED);
	assert_string_equal(req.job->reason, "too expensive");
	assert_true(req.job->decided_at > 0);
	store_req_finish(&req);

	t->to = STORE_PENDING;
	t->event = STORE_EV_APPROVED;
	t->decision = STORE_DECISION_APPROVED;
	t->reason = "ok";
	assert_int_equal(fx_run(f, &req), STORE_ECONFLICT);
	assert_int_equal(req.job->status, STORE_DECLINED);
	assert_string_equal(req.job->reason, "too expensive");
	store_req_finish(&req);
}

static void transition__writes_only_the_fields_it_sets(void **state)
{
	struct fx *f = *state;
	char id[40];
	bring(f, STORE_RUNNING, id);
	struct store_req req = {.op = STORE_OP_TRANSITION};
	struct store_transition *t = &req.u.transition;
	memcpy(t->job_id, id, 40);
	t->from_mask = STORE_MASK(STORE_RUNNING);
	t->to = STORE_SUSPENDED;
	t->event = STORE_EV_SUSPENDED;
	t->set = STORE_SET_SUSPEND | STORE_SET_CHECKPOINT | STORE_SET_EXPIRES_AT;
	t->suspend_payload = json_pack("{s:s}", "ask", "password");
	t->checkpoint = json_pack("{s:i}", "page", 3);
	t->expires_at = 4102444800000;
	t->output = json_string("must not be written");
	assert_int_equal(fx_run(f, &req), 0);
	assert_true(json_equal(req.job->suspend_payload, t->suspend_payload));
	assert_true(json_equal(req.job->checkpoint, t->checkpoint));
	assert_int_equal(req.job->expires_at, 4102444800000);
	assert_null(req.job->output);
	assert_int_equal(req.job->finished_at, 0);
	store_req_finish(&req);
	json_decref(t->suspend_payload);
	json_decref(t->checkpoint);
	json_decref(t->output);

	/* Resume with data; the checkpoint stays, the suspend payload too. */
	memset(t, 0, sizeof(*t));
	memcpy(t->job_id, id, 40);
	t->from_mask = STORE_MASK(STORE_SUSPENDED);
	t->to = STORE_PENDING;
	t->event = STORE_EV_RESUMED;
	t->set = STORE_SET_RESUME | STORE_SET_ATTEMPT | STORE_SET_RUN_AT;
	t->resume_data = json_pack("{s:s}", "password", "hunter2");
	t->attempt = 2;
	t->run_at = 1000;
	assert_int_equal(fx_run(f, &req), 0);
	assert_true(json_equal(req.job->resume_data, t->resume_data));
	assert_non_null(req.job->checkpoint);
	assert_non_null(req.job->suspend_payload);
	assert_int_equal(req.job->attempt, 2);
	assert_int_equal(req.job->run_at, 1000);
	store_req_finish(&req);
	json_decref(t->resume_data);

	/* Complete with output, clearing the checkpoint with a NULL. */
	assert_int_equal(claim(f, 1, NULL, 0, NULL), 1);
	memset(t, 0, sizeof(*t));
	memcpy(t->job_id, id, 40);
	t->from_mask = STORE_MASK(STORE_RUNNING);
	t->to = STORE_COMPLETED;
	t->event = STORE_EV_COMPLETED;
	t->set = STORE_SET_OUTPUT | STORE_SET_CHECKPOINT;
	t->output = json_pack("{s:i}", "answer", 42);
	t->model_output = json_string("42");
	assert_int_equal(fx_run(f, &req), 0);
	assert_true(json_equal(req.job->output, t->output));
	assert_true(json_equal(req.job->model_output, t->model_output));
	assert_null(req.job->checkpoint);
	assert_true(req.job->finished_at >= req.job->started_at);
	store_req_finish(&req);
	json_decref(t->output);
	json_decref(t->model_output);
}

/* ---- claims ------------------------------------------------------------ */

static void claim__takes_highest_priority_then_earliest_run_at_then_smallest_id(void **state)
{
	struct fx *f = *state;
	/* priority, run_at */
	const int spec[][2] = {{0, 100}, {5, 300}, {5, 200}, {1, 50}, {5, 200}};
	char ids[5][40];
	for (int i = 0; i < 5; i++) {
		struct store_job job = {.tool = "t", .status = STORE_PENDING,
					.priority = spec[i][0], .run_at = spec[i][1]};
		snprintf(job.id, 40, "id-%d", 9 - i); /* ids descend */
		struct store_req req = {.op = STORE_OP_CREATE};
		req.u.create.job = &job;
		assert_int_equal(fx_run(f, &req), 0);
		memcpy(ids[i], job.id, 40);
		store_req_finish(&req);
	}
	char got[5][40];
	assert_int_equal(claim(f, 5, NULL, 0, got), 5);
	/* 5/200 twice (smaller id first: index 4 "id-5" before 2 "id-7"),
	 * then 5/300, 1/50, 0/100. */
	assert_string_equal(got[0], ids[4]);
	assert_string_equal(got[1], ids[2]);
	assert_string_equal(got[2], ids[1]);
	assert_string_equal(got[3], ids[3]);
	assert_string_equal(got[4], ids[0]);
	assert_int_equal(claim(f, 5, NULL, 0, NULL), 0);
}

static void claim_seen(struct store_req *req, int rc)
{
	*(int *)req->data = rc == 0 ? (int)req->njobs : -1;
}

/* Between a claim's commit and its done, the jobs it took are running in
 * the database and counted as claimed but undelivered. */
static void claim__jobs_count_as_undelivered_from_the_commit_to_the_done(void **state)
{
	struct fx *f = *state;
	fx_create(f, "t", STORE_PENDING, NULL, 1, NULL);
	fx_create(f, "t", STORE_PENDING, NULL, 2, NULL);
	assert_int_equal(store_claimed_undelivered(f->st), 0);

	struct store_req req = {.op = STORE_OP_CLAIM, .done = claim_seen};
	int seen = -2;
	req.data = &seen;
	req.u.claim.limit = 10;
	assert_int_equal(store_submit(f->st, &req), 0);
	/* The loop does not run, so nothing is delivered meanwhile. */
	while (fx_count(f, "SELECT count(*) FROM jobs WHERE status = 2") < 2)
		usleep(1000);
	assert_int_equal(store_claimed_undelivered(f->st), 2);
	while (seen == -2)
		uv_run(&f->loop, UV_RUN_ONCE);
	assert_int_equal(seen, 2);
	assert_int_equal(store_claimed_undelivered(f->st), 0);
	store_req_finish(&req);
}

static void claim__respects_the_limit_and_per_tool_caps(void **state)
{
	struct fx *f = *state;
	for (int i = 0; i < 4; i++) {
		assert_int_equal(fx_create(f, "a", STORE_PENDING, NULL, i, NULL), 0);
		assert_int_equal(fx_create(f, "b", STORE_PENDING, NULL, i, NULL), 0);
		assert_int_equal(fx_create(f, "c", STORE_PENDING, NULL, i, NULL), 0);
	}
	const struct store_cap caps[] = {{"a", 1}, {"b", 0}};
	char got[12][40];
	assert_int_equal(claim(f, 12, caps, 2, got), 5); /* one a, no b, four c */
	int64_t counts[STORE_NSTATUS];
	assert_int_equal(store_count_by_status(f->st, counts), 0);
	assert_int_equal(counts[STORE_RUNNING], 5);
	assert_int_equal(counts[STORE_PENDING], 7);
	assert_int_equal(claim(f, 2, NULL, 0, NULL), 2);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM events WHERE type = 4"), 7);
}

/* A claim's groups (store.h) take no room of its limit, nor it of theirs:
 * the pool's jobs and each set of worker processes' fill their own room,
 * and a job of a group's tool past the group's room waits. */
static void claim__groups_have_room_of_their_own(void **state)
{
	struct fx *f = *state;
	for (int i = 0; i < 4; i++) {
		assert_int_equal(fx_create(f, "pool", STORE_PENDING, NULL, i, NULL), 0);
		assert_int_equal(fx_create(f, "w1", STORE_PENDING, NULL, i, NULL), 0);
		assert_int_equal(fx_create(f, "w2", STORE_PENDING, NULL, i, NULL), 0);
	}
	const struct store_cap caps[] = {
		{.tool = "w1", .remaining = 10, .group = 1},
		{.tool = "w2", .remaining = 10, .group = 2},
	};
	const int groups[] = {2, 3};
	struct store_req req = {.op = STORE_OP_CLAIM};
	req.u.claim.limit = 1;
	req.u.claim.caps = caps;
	req.u.claim.ncaps = 2;
	req.u.claim.groups = groups;
	req.u.claim.ngroups = 2;
	assert_int_equal(fx_run(f, &req), 0);
	int per[3] = {0};
	for (size_t i = 0; i < req.njobs; i++)
		per[strcmp(req.jobs[i]->tool, "pool") == 0	  ? 0
		    : strcmp(req.jobs[i]->tool, "w1") == 0 ? 1
							   : 2]++;
	assert_int_equal(per[0], 1);
	assert_int_equal(per[1], 2);
	assert_int_equal(per[2], 3);
	store_req_finish(&req);
	/* With the limit spent (0), only the groups claim; a group's tool
	 * with a cap of 0 (no worker has room) is left alone. */
	const struct store_cap none[] = {
		{.tool = "w1", .remaining = 0, .group = 1},
		{.tool = "w2", .remaining = 5, .group = 2},
	};
	const int room[] = {5, 5};
	memset(&req, 0, sizeof(req));
	req.op = STORE_OP_CLAIM;
	req.u.claim.limit = 0;
	req.u.claim.caps = none;
	req.u.claim.ncaps = 2;
	req.u.claim.groups = room;
	req.u.claim.ngroups = 2;
	assert_int_equal(fx_run(f, &req), 0);
	assert_int_equal(req.njobs, 1); /* the last of w2 */
	assert_string_equal(req.jobs[0]->tool, "w2");
	store_req_finish(&req);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM jobs WHERE status = 0"
				  " AND tool = 'pool'"), 3);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM jobs WHERE status = 0"
				  " AND tool = 'w1'"), 2);
}

/* Worker processes' tool definitions are stored, replaced and removed. */
static void definitions__are_stored_replaced_and_removed(void **state)
{
	struct fx *f = *state;
	struct store_definition *defs;
	size_t n;
	json_t *a = json_pack("{s:s}", "id", "a"), *b = json_pack("{s:s, s:s}",
							       "id", "a",
							       "title", "A");
	struct store_req req = {.op = STORE_OP_TOOL_DEFINE};

	req.u.define.name = "a";
	req.u.define.definition = a;
	assert_int_equal(fx_run(f, &req), 0);
	req.u.define.definition = b;
	assert_int_equal(fx_run(f, &req), 0);
	assert_int_equal(store_definitions(f->st, &defs, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(defs[0].name, "a");
	assert_true(json_equal(defs[0].definition, b));
	store_definition_finish(&defs[0]);
	free(defs);
	req.u.define.remove = true;
	req.u.define.definition = NULL;
	assert_int_equal(fx_run(f, &req), 0);
	assert_int_equal(store_definitions(f->st, &defs, &n), 0);
	assert_int_equal(n, 0);
	free(defs);
	json_decref(a);
	json_decref(b);
}

/* claim_pool runs a claim whose caps share a pool of pool slots. */
static size_t claim_pool(struct fx *f, int limit, const struct store_cap *caps,
			 size_t ncaps, int pool)
{
	struct store_req req = {.op = STORE_OP_CLAIM};
	req.u.claim.limit = limit;
	req.u.claim.caps = caps;
	req.u.claim.ncaps = ncaps;
	req.u.claim.pool_remaining = pool;
	assert_int_equal(fx_run(f, &req), 0);
	size_t n = req.njobs;
	store_req_finish(&req);
	return n;
}

/* Caps marked pool share the claim's pool (the worker's threads): at most
 * pool_remaining jobs of all those tools, whatever each cap leaves; the
 * other tools fill the rest of the limit, and a spent pool excludes the
 * pooled tools from the next run_at too. */
static void claim__pooled_caps_share_what_is_left_of_the_pool(void **state)
{
	struct fx *f = *state;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(fx_create(f, "a", STORE_PENDING, NULL, i, NULL), 0);
		assert_int_equal(fx_create(f, "b", STORE_PENDING, NULL, i, NULL), 0);
		assert_int_equal(fx_create(f, "c", STORE_PENDING, NULL, i, NULL), 0);
	}
	const struct store_cap caps[] = {{"a", 3, 0, true}, {"b", 3, 0, true}};
	assert_int_equal(claim_pool(f, 9, caps, 2, 2), 5); /* two of a and b, three c */
	assert_int_equal(fx_count(f, "SELECT count(*) FROM jobs WHERE status = 2"
				     " AND tool IN ('a', 'b')"), 2);
	assert_int_equal(claim_pool(f, 9, caps, 2, 0), 0);
	assert_int_equal(claim_pool(f, 9, caps, 2, 9), 4);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM jobs WHERE status = 0"), 0);
}

/* The pool and the groups meet in one claim: the pool (threads) narrows
 * only the caps marked pool, inside the limit's room, and is no room of
 * its own; a group's room is the group's whatever the pool and the limit
 * have left. A spent pool and a spent limit still let a group claim. */
static void claim__the_pool_narrows_the_limits_room_and_leaves_the_groups_theirs(void **state)
{
	struct fx *f = *state;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(fx_create(f, "cpu", STORE_PENDING, NULL, i, NULL), 0);
		assert_int_equal(fx_create(f, "wait", STORE_PENDING, NULL, i, NULL), 0);
		assert_int_equal(fx_create(f, "w1", STORE_PENDING, NULL, i, NULL), 0);
	}
	const struct store_cap caps[] = {
		{.tool = "cpu", .remaining = 5, .pool = true},
		{.tool = "w1", .remaining = 5, .group = 1},
	};
	const int groups[] = {2};
	struct store_req req = {.op = STORE_OP_CLAIM};
	req.u.claim.limit = 3;
	req.u.claim.caps = caps;
	req.u.claim.ncaps = 2;
	req.u.claim.groups = groups;
	req.u.claim.ngroups = 1;
	req.u.claim.pool_remaining = 1;
	assert_int_equal(fx_run(f, &req), 0);
	assert_int_equal(req.njobs, 5);
	store_req_finish(&req);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM jobs WHERE status = 2"
				  " AND tool = 'cpu'"), 1);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM jobs WHERE status = 2"
				  " AND tool = 'wait'"), 2);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM jobs WHERE status = 2"
				  " AND tool = 'w1'"), 2);
	/* Nothing left of the limit nor of the pool: the group claims. */
	memset(&req, 0, sizeof(req));
	req.op = STORE_OP_CLAIM;
	req.u.claim.limit = 0;
	req.u.claim.caps = caps;
	req.u.claim.ncaps = 2;
	req.u.claim.groups = groups;
	req.u.claim.ngroups = 1;
	req.u.claim.pool_remaining = 0;
	assert_int_equal(fx_run(f, &req), 0);
	assert_int_equal(req.njobs, 1);
	assert_string_equal(req.jobs[0]->tool, "w1");
	store_req_finish(&req);
}

/* claim_steps runs a claim and returns the virtual machine steps of its
 * reads (store.h), the jobs it moved in *n. */
static int64_t claim_steps(struct fx *f, int limit, const struct store_cap *caps,
			   size_t ncaps, size_t *n)
{
	struct store_req req;
	run_claim(f, limit, caps, ncaps, &req);
	*n = req.njobs;
	int64_t steps = req.u.claim.steps;
	store_req_finish(&req);
	return steps;
}

/* A claim that passes over a tool's jobs (the tool at its cap, a worker's
 * tool no connection serves) or jobs not due yet does not read them: what
 * it reads follows what it takes. Before, every claim walked all pending
 * jobs in the scheduler's order, so 196,000 jobs of a C tool waiting for
 * its threads held berthd to 126 starts a second (docs/BENCHMARKS.md). */
static void claim__a_backlog_it_passes_over__is_not_read(void **state)
{
	struct fx *f = *state;
	enum { BACKLOG = 1000 };
	/* Both backlogs come first in the scheduler's order: the same
	 * priority, earlier run_at and ids. */
	for (int i = 0; i < BACKLOG; i++) {
		assert_int_equal(fx_create(f, "capped", STORE_PENDING, NULL, i, NULL), 0);
		assert_int_equal(fx_create(f, "away", STORE_PENDING, NULL, i, NULL), 0);
	}
	/* And jobs of the tool it takes, due in an hour, ahead of the one
	 * that is due: a higher priority. */
	for (int i = 0; i < BACKLOG / 2; i++) {
		struct store_job job = {.tool = "free", .status = STORE_PENDING,
					.priority = 1,
					.run_at = store_now() + 3600000};
		struct store_req req = {.op = STORE_OP_CREATE};
		snprintf(job.id, 40, "later-%04d", i);
		req.u.create.job = &job;
		assert_int_equal(fx_run(f, &req), 0);
		store_req_finish(&req);
	}
	assert_int_equal(fx_create(f, "free", STORE_PENDING, NULL, 0, NULL), 0);

	struct store_cap caps[] = {{"capped", 0}, {"away", 0}};
	size_t n;
	int64_t steps = claim_steps(f, 8, caps, 2, &n);
	assert_int_equal(n, 1);
	/* Some tens of steps a tool and a job read (159 here): fewer than
	 * the backlog has jobs, where walking it took 30,024. */
	assert_true(steps < BACKLOG);

	/* Room for two of the capped tool: the claim reads two of its
	 * jobs, not its thousand. */
	caps[0].remaining = 2;
	steps = claim_steps(f, 8, caps, 2, &n);
	assert_int_equal(n, 2);
	assert_true(steps < BACKLOG);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM jobs WHERE status = 2"
				  " AND tool = 'capped'"), 2);
}

/* walk_job is a pending job as the reference walk below sees it. */
struct walk_job {
	char id[40];
	int tool;
	int64_t priority, run_at;
	bool taken;
};

static int walk_order(const void *pa, const void *pb)
{
	const struct walk_job *a = pa, *b = pb;

	if (a->priority != b->priority)
		return a->priority > b->priority ? -1 : 1;
	if (a->run_at != b->run_at)
		return a->run_at < b->run_at ? -1 : 1;
	return strcmp(a->id, b->id);
}

/* The claim takes what one walk of every pending job in the scheduler's
 * order takes (store.h's rules, as the claim did them before it read the
 * jobs tool by tool): checked against that walk, done here, on jobs of
 * five tools with mixed priorities and run times, under caps, a pool and
 * groups that run out part way, over successive claims until nothing is
 * left. */
static void claim__takes_what_a_walk_of_every_pending_job_takes(void **state)
{
	struct fx *f = *state;
	static const char *const tools[] = {"pa", "pb", "ga", "free", "none"};
	enum { NTOOLS = 5, NJOBS = 150 };
	struct walk_job jobs[NJOBS];
	int64_t now = store_now();
	unsigned seed = 20261202;

	for (int i = 0; i < NJOBS; i++) {
		struct store_job job = {.status = STORE_PENDING};
		struct store_req req = {.op = STORE_OP_CREATE};

		seed = seed * 1103515245u + 12345u;
		jobs[i].tool = (int)((seed >> 16) % NTOOLS);
		jobs[i].priority = (int64_t)((seed >> 8) % 3);
		/* A few in the future, which no claim takes. */
		jobs[i].run_at = now - 1000 + (int64_t)((seed >> 4) % 1100);
		jobs[i].taken = false;
		job.tool = (char *)tools[jobs[i].tool];
		job.priority = (int)jobs[i].priority;
		job.run_at = jobs[i].run_at;
		snprintf(job.id, 40, "id-%03d", (int)((i * 37) % NJOBS));
		req.u.create.job = &job;
		assert_int_equal(fx_run(f, &req), 0);
		memcpy(jobs[i].id, job.id, 40);
		store_req_finish(&req);
	}
	qsort(jobs, NJOBS, sizeof(jobs[0]), walk_order);

	for (int round = 0; round < 6; round++) {
		/* pa and pb share the pool; ga is group 1's; free has no
		 * cap; none's cap is 0. */
		struct store_cap caps[] = {
			{.tool = "pa", .remaining = 3 + round % 2, .pool = true},
			{.tool = "pb", .remaining = 4, .pool = true},
			{.tool = "ga", .remaining = 5, .group = 1},
			{.tool = "none", .remaining = 0},
		};
		int cap_of[NTOOLS] = {0, 1, 2, -1, 3};
		int groups[] = {4};
		int limit = 6, pool = 5 - round % 3;
		struct store_req req = {.op = STORE_OP_CLAIM};

		/* The walk. */
		int left[4], slots = limit, group = groups[0], pool_left = pool;
		int room = limit + groups[0];
		bool want[NJOBS] = {false};
		size_t nwant = 0;

		for (int k = 0; k < 4; k++)
			left[k] = caps[k].remaining;
		for (int i = 0; i < NJOBS && room > 0; i++) {
			int k = cap_of[jobs[i].tool], *g;

			if (jobs[i].taken || jobs[i].run_at > now)
				continue;
			if (k >= 0 && (left[k] <= 0 ||
				       (caps[k].pool && pool_left <= 0)))
				continue;
			g = k >= 0 && caps[k].group == 1 ? &group : &slots;
			if (*g <= 0)
				continue;
			if (k >= 0) {
				left[k]--;
				if (caps[k].pool)
					pool_left--;
			}
			(*g)--;
			room--;
			want[i] = true;
			nwant++;
		}

		/* The claim. */
		req.u.claim.now = now;
		req.u.claim.limit = limit;
		req.u.claim.caps = caps;
		req.u.claim.ncaps = 4;
		req.u.claim.groups = groups;
		req.u.claim.ngroups = 1;
		req.u.claim.pool_remaining = pool;
		assert_int_equal(fx_run(f, &req), 0);
		assert_int_equal(req.njobs, nwant);
		for (size_t j = 0; j < req.njobs; j++) {
			int i = 0;

			while (i < NJOBS && strcmp(jobs[i].id, req.jobs[j]->id) != 0)
				i++;
			assert_true(i < NJOBS);
			if (!want[i])
				fail_msg("round %d: the claim took %s (%s), which "
					 "the walk did not", round, jobs[i].id,
					 tools[jobs[i].tool]);
			jobs[i].taken = true;
		}
		store_req_finish(&req);
	}
}

static void claim__skips_paused_tools_until_they_are_unpaused(void **state)
{
	struct fx *f = *state;
	assert_int_equal(fx_create(f, "slow", STORE_PENDING, NULL, 1, NULL), 0);
	pause_tool(f, "slow", true);
	assert_int_equal(store_tool_paused(f->st, "slow"), 1);
	assert_int_equal(store_tool_paused(f->st, "never-seen"), 0);
	int64_t at = -1;
	assert_int_equal(store_next_run_at(f->st, &at), 0);
	assert_int_equal(at, 0);
	assert_int_equal(claim(f, 10, NULL, 0, NULL), 0);

	/* The flag survives a restart. */
	fx_close(f);
	assert_int_equal(fx_open(f, NULL), 0);
	assert_int_equal(store_tool_paused(f->st, "slow"), 1);
	pause_tool(f, "slow", false);
	assert_int_equal(store_tool_paused(f->st, "slow"), 0);
	assert_int_equal(store_next_run_at(f->st, &at), 0);
	assert_true(at > 0);
	assert_int_equal(claim(f, 10, NULL, 0, NULL), 1);
}

static void claim__leaves_jobs_whose_run_at_is_in_the_future(void **state)
{
	struct fx *f = *state;
	int64_t later = store_now() + 3600 * 1000;
	struct store_job job = {.tool = "t", .status = STORE_PENDING, .run_at = later};
	struct store_req req = {.op = STORE_OP_CREATE};
	req.u.create.job = &job;
	assert_int_equal(fx_run(f, &req), 0);
	store_req_finish(&req);
	assert_int_equal(claim(f, 1, NULL, 0, NULL), 0);
	int64_t at;
	assert_int_equal(store_next_run_at(f->st, &at), 0);
	assert_int_equal(at, later);

	struct store_req c = {.op = STORE_OP_CLAIM};
	c.u.claim.limit = 1;
	c.u.claim.now = later;
	assert_int_equal(fx_run(f, &c), 0);
	assert_int_equal(c.njobs, 1);
	store_req_finish(&c);
}

/* create_at creates a pending job of tool due at run_at (0: now). */
static void create_at(struct fx *f, const char *tool, int64_t run_at)
{
	struct store_job job = {.tool = (char *)tool, .status = STORE_PENDING,
				.run_at = run_at};
	struct store_req req = {.op = STORE_OP_CREATE};
	req.u.create.job = &job;
	assert_int_equal(fx_run(f, &req), 0);
	store_req_finish(&req);
}

/* next_after_claim runs a claim of up to limit jobs with caps and returns
 * its next_run_at; *n gets how many it claimed. */
static int64_t next_after_claim(struct fx *f, int limit, const struct store_cap *caps,
				size_t ncaps, size_t *n)
{
	struct store_req req;
	run_claim(f, limit, caps, ncaps, &req);
	*n = req.njobs;
	int64_t at = req.next_run_at;
	store_req_finish(&req);
	return at;
}

/* A claim reports the earliest future run_at of a tool it did not exclude:
 * not that of a tool whose cap it used up or found at 0, nor of a paused
 * tool, and never the past time of a due job its tool's cap holds back. */
static void claim__reports_the_next_run_at_of_a_tool_it_did_not_exclude(void **state)
{
	struct fx *f = *state;
	int64_t now = store_now();
	size_t n;

	create_at(f, "full", 0);
	create_at(f, "full", 0);
	create_at(f, "full", now + 1000);
	create_at(f, "paused", now + 2000);
	create_at(f, "other", now + 3000);
	create_at(f, "other", now + 4000);
	pause_tool(f, "paused", true);

	struct store_cap caps[] = {{.tool = "full", .remaining = 1}};
	assert_int_equal(next_after_claim(f, 10, caps, 1, &n), now + 3000);
	assert_int_equal(n, 1); /* one of full's; its cap is used up */
	caps[0].remaining = 0;
	assert_int_equal(next_after_claim(f, 10, caps, 1, &n), now + 3000);
	assert_int_equal(n, 0);
	/* With room for full, its own delayed job is the next. */
	caps[0].remaining = 5;
	assert_int_equal(next_after_claim(f, 10, caps, 1, &n), now + 1000);
	assert_int_equal(n, 1);
	pause_tool(f, "paused", false);
	caps[0].remaining = 0;
	assert_int_equal(next_after_claim(f, 10, caps, 1, &n), now + 2000);
	assert_int_equal(n, 0);
}

static void claim__with_nothing_pending_later__reports_no_next_run_at(void **state)
{
	struct fx *f = *state;
	size_t n;

	create_at(f, "t", 0);
	assert_int_equal(next_after_claim(f, 10, NULL, 0, &n), 0);
	assert_int_equal(n, 1);
}

/* ---- running jobs: checkpoint, progress, logs --------------------------- */

static void checkpoint_and_progress__are_written_only_while_running(void **state)
{
	struct fx *f = *state;
	char id[40];
	bring(f, STORE_PENDING, id);
	json_t *v = json_pack("{s:i}", "step", 1);
	struct store_req req = {.op = STORE_OP_CHECKPOINT};
	memcpy(req.u.checkpoint.job_id, id, 40);
	req.u.checkpoint.value = v;
	assert_int_equal(fx_run(f, &req), STORE_ECONFLICT);
	assert_int_equal(req.job->status, STORE_PENDING);
	store_req_finish(&req);

	assert_int_equal(claim(f, 1, NULL, 0, NULL), 1);
	assert_int_equal(fx_run(f, &req), 0);
	struct store_req p = {.op = STORE_OP_PROGRESS};
	memcpy(p.u.progress.job_id, id, 40);
	p.u.progress.progress = json_pack("{s:i,s:i,s:s}", "progress", 1, "total", 3, "message", "a");
	assert_int_equal(fx_run(f, &p), 0);

	struct store_job *j;
	assert_int_equal(store_get(f->st, id, &j), 0);
	assert_true(json_equal(j->checkpoint, v));
	assert_true(json_equal(j->progress, p.u.progress.progress));
	store_job_free(j);
	/* No event for either. */
	assert_int_equal(fx_count(f, "SELECT count(*) FROM events"), 2);

	snprintf(p.u.progress.job_id, 40, "missing");
	assert_int_equal(fx_run(f, &p), STORE_ENOTFOUND);
	json_decref(p.u.progress.progress);
	json_decref(v);
}

static void log__numbers_lines_and_keeps_the_newest_max_lines(void **state)
{
	struct fx *f = *state;
	char id[40];
	bring(f, STORE_RUNNING, id);
	struct store_log_line lines[3] = {
		{.level = "info", .message = "one"},
		{.level = "warn", .message = "two", .data = json_pack("{s:i}", "k", 2)},
		{.level = "error", .message = "three", .at = 1234},
	};
	struct store_req req = {.op = STORE_OP_LOG};
	memcpy(req.u.log.job_id, id, 40);
	req.u.log.lines = lines;
	req.u.log.nlines = 3;
	req.u.log.max_lines = 4;
	assert_int_equal(fx_run(f, &req), 0);
	assert_int_equal(fx_run(f, &req), 0); /* lines 4..6; 1 and 2 dropped */

	struct store_log_line *got;
	size_t n;
	assert_int_equal(store_logs(f->st, id, 0, 100, &got, &n), 0);
	assert_int_equal(n, 4);
	assert_int_equal(got[0].n, 3);
	assert_int_equal(got[3].n, 6);
	assert_string_equal(got[0].message, "three");
	assert_int_equal(got[0].at, 1234);
	assert_string_equal(got[2].level, "warn");
	assert_int_equal(json_integer_value(json_object_get(got[2].data, "k")), 2);
	for (size_t i = 0; i < n; i++)
		store_log_line_finish(&got[i]);
	free(got);

	assert_int_equal(store_logs(f->st, id, 5, 100, &got, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(got[0].n, 6);
	store_log_line_finish(&got[0]);
	free(got);
	json_decref(lines[1].data);
}

static void log__of_a_missing_job__is_not_found_and_writes_nothing(void **state)
{
	struct fx *f = *state;
	struct store_log_line line = {.level = "info", .message = "x"};
	struct store_req req = {.op = STORE_OP_LOG};
	snprintf(req.u.log.job_id, 40, "missing");
	req.u.log.lines = &line;
	req.u.log.nlines = 1;
	assert_int_equal(fx_run(f, &req), STORE_ENOTFOUND);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM job_logs"), 0);
}

/* ---- expiry ------------------------------------------------------------ */

static void expire__moves_overdue_suspended_and_awaiting_jobs_to_expired(void **state)
{
	struct fx *f = *state;
	char waiting[40], suspended[40], fresh[40];
	bring(f, STORE_AWAITING_APPROVAL, waiting);
	bring(f, STORE_RUNNING, suspended);
	bring(f, STORE_AWAITING_APPROVAL, fresh);
	const struct {
		const char *id;
		unsigned from;
		int to, ev;
		int64_t at;
	} set[] = {
		{waiting, STORE_MASK(STORE_AWAITING_APPROVAL), STORE_AWAITING_APPROVAL, STORE_EV_APPROVAL_REQUESTED, 1000},
		{suspended, STORE_MASK(STORE_RUNNING), STORE_SUSPENDED, STORE_EV_SUSPENDED, 2000},
		{fresh, STORE_MASK(STORE_AWAITING_APPROVAL), STORE_AWAITING_APPROVAL, STORE_EV_APPROVAL_REQUESTED, 9000},
	};
	for (size_t i = 0; i < 3; i++) {
		struct store_req req = {.op = STORE_OP_TRANSITION};
		memcpy(req.u.transition.job_id, set[i].id, 40);
		req.u.transition.from_mask = set[i].from;
		req.u.transition.to = set[i].to;
		req.u.transition.event = set[i].ev;
		req.u.transition.set = STORE_SET_EXPIRES_AT;
		req.u.transition.expires_at = set[i].at;
		assert_int_equal(fx_run(f, &req), 0);
		store_req_finish(&req);
	}
	int64_t at;
	assert_int_equal(store_next_expiry(f->st, &at), 0);
	assert_int_equal(at, 1000);

	struct store_req req = {.op = STORE_OP_EXPIRE};
	req.u.expire.now = 5000;
	assert_int_equal(fx_run(f, &req), 0);
	assert_int_equal(req.njobs, 2);
	assert_string_equal(req.jobs[0]->id, waiting);
	assert_int_equal(req.jobs[1]->status, STORE_EXPIRED);
	assert_true(req.jobs[1]->finished_at > 0);
	store_req_finish(&req);
	assert_int_equal(fx_status(f, fresh), STORE_AWAITING_APPROVAL);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM events WHERE type = 12"), 2);
	assert_int_equal(store_next_expiry(f->st, &at), 0);
	assert_int_equal(at, 9000);
}

/* ---- listing ----------------------------------------------------------- */

static void list__pages_through_every_match_once_newest_first(void **state)
{
	struct fx *f = *state;
	enum { N = 23 };
	char ids[N][40];
	for (int i = 0; i < N; i++) {
		struct store_job job = {.tool = i % 2 ? "odd" : "even", .status = STORE_PENDING,
					.run_id = i % 3 ? NULL : "run-3"};
		snprintf(job.id, 40, "job-%03d", i);
		struct store_req req = {.op = STORE_OP_CREATE};
		req.u.create.job = &job;
		assert_int_equal(fx_run(f, &req), 0);
		store_req_finish(&req);
		memcpy(ids[i], job.id, 40);
	}
	assert_int_equal(claim(f, 4, NULL, 0, NULL), 4);

	const struct {
		struct store_filter f;
		int expect;
	} cases[] = {
		{{0, NULL, NULL}, N},
		{{0, "odd", NULL}, N / 2},
		{{0, NULL, "run-3"}, 8},
		{{STORE_MASK(STORE_RUNNING), NULL, NULL}, 4},
		{{STORE_MASK(STORE_RUNNING) | STORE_MASK(STORE_PENDING), NULL, NULL}, N},
		{{STORE_MASK(STORE_PENDING), "even", "run-3"}, -1},
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int seen = lists(f->st, &cases[c].f, 5, NULL, 0);
		if (cases[c].expect >= 0)
			assert_int_equal(seen, cases[c].expect);
	}
}

/* jobs_status holds no completed job (migration 0006): a job that
 * completes leaves it, completed jobs are listed through the primary key
 * and counted as all jobs less the others, and every status reads as
 * before. */
static void list_and_count__find_completed_jobs_outside_the_status_index(void **state)
{
	struct fx *f = *state;
	enum { N = 12 };
	char ids[N][40], got[N][40];
	for (int i = 0; i < N; i++)
		assert_int_equal(fx_create(f, "t", STORE_PENDING, NULL, i, ids[i]), 0);
	assert_int_equal(claim(f, 10, NULL, 0, NULL), 10);
	/* ids[0..5] completed, [6..8] failed, [9] running, [10, 11] pending. */
	for (int i = 0; i < 9; i++)
		assert_int_equal(fx_move(f, ids[i], STORE_MASK(STORE_RUNNING),
					 i < 6 ? STORE_COMPLETED : STORE_FAILED,
					 i < 6 ? STORE_EV_COMPLETED : STORE_EV_FAILED, NULL),
				 0);

	int64_t counts[STORE_NSTATUS];
	assert_int_equal(store_count_by_status(f->st, counts), 0);
	assert_int_equal(counts[STORE_COMPLETED], 6);
	assert_int_equal(counts[STORE_FAILED], 3);
	assert_int_equal(counts[STORE_RUNNING], 1);
	assert_int_equal(counts[STORE_PENDING], 2);
	assert_int_equal(counts[STORE_CANCELLED], 0);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM jobs INDEXED BY jobs_status"
				     " WHERE status <> 4"),
			 6);

	struct store_filter done = {.status_mask = STORE_MASK(STORE_COMPLETED)};
	struct store_filter failed = {.status_mask = STORE_MASK(STORE_FAILED)};
	struct store_filter pending = {.status_mask = STORE_MASK(STORE_PENDING)};
	struct store_filter running = {.status_mask = STORE_MASK(STORE_RUNNING)};
	assert_int_equal(lists(f->st, &done, 3, got, N), 6);
	for (int i = 0; i < 6; i++)
		assert_string_equal(got[i], ids[5 - i]);
	assert_int_equal(lists(f->st, &failed, 3, got, N), 3);
	for (int i = 0; i < 3; i++)
		assert_string_equal(got[i], ids[8 - i]);
	assert_int_equal(lists(f->st, &pending, 3, got, N), 2);
	assert_int_equal(lists(f->st, &running, 3, got, N), 1);
	assert_string_equal(got[0], ids[9]);
}

static void list__with_a_cursor_it_did_not_make__is_invalid(void **state)
{
	struct fx *f = *state;
	struct store_job **jobs;
	size_t n;
	char *next;
	const char *bad[] = {"", "abc", "c1zz", "c1", "x16869"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(store_list(f->st, NULL, 5, bad[i], &jobs, &n, &next), -EINVAL);
}

/* The ids of the prefix tests: neighbours of each prefix's range, ends
 * that carry past 'f', and a prefix of 'f's, whose range has no end. */
static const char *const prefix_ids[] = {
	"0aaa-0001", "0aaa-0002", "0aab-0001", "0a9f-0001",
	"0b00-0000", "0aff-ffff", "ffff-0001",
};

static const struct {
	const char *prefix;
	int expect;
} prefix_cases[] = {
	{"0aaa", 2}, {"0aaa-", 2}, {"0aaa-0002", 1}, {"0aa", 3}, {"0a9", 1},
	{"0a9f", 1}, {"0aff", 1}, {"0aff-ffff", 1}, {"ffff", 1}, {"f", 1},
	{"0", 6}, {"1", 0}, {"-", 0}, {"0aaa-00021", 0},
	{"0aaa-0001-0000-0000-0000-0000-0000-0000-0000-0000-0000-0000-000000", 0},
};

static void list__by_id_prefix__reads_the_range_of_ids_that_begin_so(void **state)
{
	struct fx *f = *state;
	size_t nids = sizeof(prefix_ids) / sizeof(prefix_ids[0]);

	for (size_t i = 0; i < nids; i++) {
		struct store_job job = {.tool = "t", .status = STORE_PENDING};
		struct store_req req = {.op = STORE_OP_CREATE};

		snprintf(job.id, 40, "%s", prefix_ids[i]);
		req.u.create.job = &job;
		assert_int_equal(fx_run(f, &req), 0);
		store_req_finish(&req);
	}
	for (size_t c = 0; c < sizeof(prefix_cases) / sizeof(prefix_cases[0]); c++) {
		struct store_filter flt = {.id_prefix = prefix_cases[c].prefix};
		/* Pages of 2, so that the cursor and the range meet. */
		int seen = lists(f->st, &flt, 2, NULL, 0);

		if (seen != prefix_cases[c].expect)
			print_error("prefix %s\n", flt.id_prefix);
		assert_int_equal(seen, prefix_cases[c].expect);
	}
	/* With another filter. */
	struct store_filter flt = {.id_prefix = "0a", .status_mask = STORE_MASK(STORE_RUNNING)};
	struct store_job **jobs;
	size_t n;
	char *next;
	assert_int_equal(store_list(f->st, &flt, 10, NULL, &jobs, &n, &next), 0);
	assert_int_equal(n, 0);
	free(jobs);
}

/* ---- the event log ----------------------------------------------------- */

static void event_seq__grows_by_one_across_reopen_and_is_never_reused_after_pruning(void **state)
{
	struct fx *f = *state;
	char a[40], b[40];
	bring(f, STORE_RUNNING, a);
	assert_int_equal(fx_move(f, a, STORE_MASK(STORE_RUNNING), STORE_COMPLETED,
				 STORE_EV_COMPLETED, NULL), 0);
	int64_t seq = store_last_seq(f->st);
	assert_int_equal(seq, 3);

	fx_close(f);
	assert_int_equal(fx_open(f, NULL), 0);
	assert_int_equal(store_last_seq(f->st), 3);

	struct store_req req = {.op = STORE_OP_PRUNE};
	req.u.prune.before = store_now() + 1000;
	assert_int_equal(fx_run(f, &req), 0);
	assert_int_equal(req.count, 1);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM events"), 0);
	assert_int_equal(store_last_seq(f->st), 3);

	fx_close(f);
	assert_int_equal(fx_open(f, NULL), 0);
	assert_int_equal(fx_create(f, "t", STORE_PENDING, NULL, 1, b), 0);
	struct store_event *ev;
	size_t n = events_of(f, NULL, &ev);
	assert_int_equal(n, 1);
	assert_int_equal(ev[0].seq, 4);
	free_events(ev, n);

	/* Reading after a seq returns only the newer ones, oldest first. */
	assert_int_equal(fx_move(f, b, STORE_MASK(STORE_PENDING), STORE_CANCELLED,
				 STORE_EV_CANCELLED, NULL), 0);
	assert_int_equal(store_events(f->st, 4, NULL, 10, &ev, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ev[0].seq, 5);
	assert_int_equal(ev[0].type, STORE_EV_CANCELLED);
	free_events(ev, n);
}

/* A prune that deletes the newest events, then events written without a
 * reopen: the first takes the seq after the pruned ones (the floor the
 * prune left, migration 0007), the next ones follow it. */
static void event_seq__after_a_prune_of_the_newest_events__goes_on_past_them(void **state)
{
	struct fx *f = *state;
	char a[40], b[40], c[40];
	bring(f, STORE_RUNNING, a);
	assert_int_equal(fx_move(f, a, STORE_MASK(STORE_RUNNING), STORE_COMPLETED,
				 STORE_EV_COMPLETED, NULL), 0);
	struct store_req req = {.op = STORE_OP_PRUNE};
	req.u.prune.before = store_now() + 1000;
	assert_int_equal(fx_run(f, &req), 0);
	assert_int_equal(req.count, 1);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM events"), 0);
	assert_int_equal(store_last_seq(f->st), 3);

	assert_int_equal(fx_create(f, "t", STORE_PENDING, NULL, 1, b), 0);
	assert_int_equal(fx_create(f, "t", STORE_PENDING, NULL, 2, c), 0);
	struct store_event *ev;
	size_t n;
	assert_int_equal(store_events(f->st, 0, NULL, 10, &ev, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(ev[0].seq, 4);
	assert_string_equal(ev[0].job_id, b);
	assert_int_equal(ev[1].seq, 5);
	assert_string_equal(ev[1].job_id, c);
	free_events(ev, n);
	assert_int_equal(store_last_seq(f->st), 5);
}

static void prune__deletes_old_terminal_jobs_with_their_events_and_logs_only(void **state)
{
	struct fx *f = *state;
	char done[40], live[40], young[40], late[40];
	bring(f, STORE_RUNNING, done);
	bring(f, STORE_SUSPENDED, live);
	bring(f, STORE_RUNNING, late);
	struct store_log_line line = {.level = "info", .message = "x"};
	struct store_req log = {.op = STORE_OP_LOG};
	memcpy(log.u.log.job_id, done, 40);
	log.u.log.lines = &line;
	log.u.log.nlines = 1;
	assert_int_equal(fx_run(f, &log), 0);
	assert_int_equal(fx_move(f, done, STORE_MASK(STORE_RUNNING), STORE_FAILED,
				 STORE_EV_FAILED, NULL), 0);
	int64_t cut = store_now() + 1;
	usleep(5000);
	bring(f, STORE_PENDING, young);
	assert_int_equal(fx_move(f, young, STORE_MASK(STORE_PENDING), STORE_CANCELLED,
				 STORE_EV_CANCELLED, NULL), 0);

	/* Made before the cutoff, finished after it: kept. */
	assert_int_equal(fx_move(f, late, STORE_MASK(STORE_RUNNING), STORE_COMPLETED,
				 STORE_EV_COMPLETED, NULL), 0);

	struct store_req req = {.op = STORE_OP_PRUNE};
	req.u.prune.before = cut;
	assert_int_equal(fx_run(f, &req), 0);
	assert_int_equal(req.count, 1);
	assert_int_equal(fx_status(f, done), -1);
	assert_int_equal(fx_status(f, live), STORE_SUSPENDED);
	assert_int_equal(fx_status(f, young), STORE_CANCELLED);
	assert_int_equal(fx_status(f, late), STORE_COMPLETED);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM job_logs"), 0);
	struct store_event *ev;
	size_t n = events_of(f, live, &ev);
	assert_int_equal(n, 3);
	free_events(ev, n);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM events WHERE job_id NOT IN (SELECT id FROM jobs)"), 0);
}

/* typed reads q with types, after, limit and scan (job_id NULL), asserts
 * that it returns the events of seqs want (n of them, ended by 0), *next
 * and *more as given, and frees them. */
static void typed(struct fx *f, const char *job, unsigned types, int64_t after,
		  int limit, int scan, const int64_t *want, int64_t next,
		  bool more)
{
	struct store_event_query q = {after, job, types, limit, scan};
	struct store_event *ev;
	size_t n, k = 0;
	int64_t got_next;
	bool got_more;

	assert_int_equal(store_events_typed(f->st, &q, &ev, &n, &got_next,
					    &got_more), 0);
	while (want[k])
		k++;
	assert_int_equal(n, k);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(ev[i].seq, want[i]);
		assert_true(types & STORE_MASK(ev[i].type));
	}
	assert_int_equal(got_next, next);
	assert_int_equal(got_more, more);
	free_events(ev, n);
}

/* A read by type returns only those types, counts them against its limit,
 * looks through at most scan seqs from the first event after its start
 * (so a pruned stretch before it costs nothing), never past the last
 * committed, and its next passes over the others it looked at: the end
 * of that span unless the page is full. */
static void events_typed__returns_only_those_types_and_next_passes_the_rest(void **state)
{
	struct fx *f = *state;
	const unsigned cancelled = STORE_MASK(STORE_EV_CANCELLED);
	char id[6][40];

	/* seqs 1-5: five jobs created; 6, 7: the first and the third
	 * cancelled; 8: a sixth created. */
	for (int i = 0; i < 5; i++)
		assert_int_equal(fx_create(f, "t", STORE_PENDING, NULL, i, id[i]), 0);
	assert_int_equal(fx_move(f, id[0], STORE_MASK(STORE_PENDING),
				 STORE_CANCELLED, STORE_EV_CANCELLED, NULL), 0);
	assert_int_equal(fx_move(f, id[2], STORE_MASK(STORE_PENDING),
				 STORE_CANCELLED, STORE_EV_CANCELLED, NULL), 0);
	assert_int_equal(fx_create(f, "t", STORE_PENDING, NULL, 5, id[5]), 0);

	/* The whole log: the two, next at the end of the log. */
	typed(f, NULL, cancelled, 0, 10, 100, (int64_t[]){6, 7, 0}, 8, false);
	/* limit counts the events of those types: a full page ends at its
	 * last, and more may follow. */
	typed(f, NULL, cancelled, 0, 1, 100, (int64_t[]){6, 0}, 6, true);
	typed(f, NULL, cancelled, 6, 1, 100, (int64_t[]){7, 0}, 7, true);
	typed(f, NULL, cancelled, 7, 1, 100, (int64_t[]){0}, 8, false);
	typed(f, NULL, cancelled, 8, 1, 100, (int64_t[]){0}, 8, false);
	/* A span of three: nothing of the type in 1-3, then 6 in 4-6, then
	 * 7 and the end. */
	typed(f, NULL, cancelled, 0, 10, 3, (int64_t[]){0}, 3, true);
	typed(f, NULL, cancelled, 3, 10, 3, (int64_t[]){6, 0}, 6, true);
	typed(f, NULL, cancelled, 6, 10, 3, (int64_t[]){7, 0}, 8, false);
	/* Several types; one job's events, whose span starts at its first
	 * event after the start and whose next is the span's end all the
	 * same. */
	typed(f, NULL, cancelled | STORE_MASK(STORE_EV_CREATED), 0, 100, 100,
	      (int64_t[]){1, 2, 3, 4, 5, 6, 7, 8, 0}, 8, false);
	typed(f, id[2], cancelled, 0, 10, 100, (int64_t[]){7, 0}, 8, false);
	typed(f, id[2], cancelled, 0, 10, 1, (int64_t[]){0}, 3, true);
	typed(f, id[1], cancelled, 0, 10, 100, (int64_t[]){0}, 8, false);

	/* Pruning the two cancelled jobs leaves 2, 4, 5 and 8: a span of
	 * two starts at the first event left after its start. */
	struct store_req req = {.op = STORE_OP_PRUNE};
	req.u.prune.before = store_now() + 1000;
	assert_int_equal(fx_run(f, &req), 0);
	assert_int_equal(req.count, 2);
	typed(f, NULL, STORE_MASK(STORE_EV_CREATED), 0, 10, 2,
	      (int64_t[]){2, 0}, 3, true);
	typed(f, NULL, STORE_MASK(STORE_EV_CREATED), 3, 10, 2,
	      (int64_t[]){4, 5, 0}, 5, true);
	typed(f, NULL, cancelled, 5, 10, 2, (int64_t[]){0}, 8, false);
	typed(f, NULL, cancelled, 8, 10, 2, (int64_t[]){0}, 8, false);

	/* No types, no limit or no scan is no read. */
	struct store_event_query q = {0, NULL, 0, 10, 10};
	struct store_event *ev;
	size_t n;
	int64_t next;
	bool more;
	assert_int_equal(store_events_typed(f->st, &q, &ev, &n, &next, &more),
			 -EINVAL);
	q.types = cancelled;
	q.limit = 0;
	assert_int_equal(store_events_typed(f->st, &q, &ev, &n, &next, &more),
			 -EINVAL);
	q.limit = 10;
	q.scan = 0;
	assert_int_equal(store_events_typed(f->st, &q, &ev, &n, &next, &more),
			 -EINVAL);
}

/* ---- listeners ---------------------------------------------------------- */

struct heard {
	int64_t last_seq;
	int events;
	int dones;
	bool done_before_event;
};

static void hear(void *arg, const struct store_event *ev)
{
	struct heard *h = arg;
	assert_true(ev->seq > h->last_seq);
	h->last_seq = ev->seq;
	h->events++;
}

static void listeners__see_each_event_in_seq_order_before_the_done_callback(void **state)
{
	struct fx *f = *state;
	struct heard h = {0}, h2 = {0};
	assert_int_equal(store_add_listener(f->st, hear, &h), 0);
	assert_int_equal(store_add_listener(f->st, hear, &h2), 0);
	char id[40];
	assert_int_equal(fx_create(f, "t", STORE_AWAITING_APPROVAL, NULL, 1, id), 0);
	/* fx_run returned after done: both events were heard before it. */
	assert_int_equal(h.events, 2);
	assert_int_equal(h.last_seq, store_last_seq(f->st));
	store_remove_listener(f->st, hear, &h2);
	assert_int_equal(fx_move(f, id, STORE_MASK(STORE_AWAITING_APPROVAL), STORE_PENDING,
				 STORE_EV_APPROVED, NULL), 0);
	assert_int_equal(h.events, 3);
	assert_int_equal(h2.events, 2);
	store_remove_listener(f->st, hear, &h);
}

/* ---- start-up ---------------------------------------------------------- */

static bool rerun_unless_fragile(void *arg, const char *tool)
{
	return strcmp(tool, "fragile") != 0;
}

static void recover__requeues_running_jobs_or_fails_those_that_may_not_rerun(void **state)
{
	struct fx *f = *state;
	char again[40], fragile[40], spent[40], idle[40];
	assert_int_equal(fx_create(f, "t", STORE_PENDING, NULL, 1, again), 0);
	assert_int_equal(fx_create(f, "fragile", STORE_PENDING, NULL, 1, fragile), 0);
	/* No retries of its own, and its second try: an interrupted job
	 * gets two tries at least (store_interrupted_tries), both used. */
	struct store_job job = {.tool = "t", .status = STORE_PENDING,
				.max_retries = 0, .attempt = 2};
	struct store_req req = {.op = STORE_OP_CREATE};
	req.u.create.job = &job;
	assert_int_equal(fx_run(f, &req), 0);
	memcpy(spent, job.id, 40);
	store_req_finish(&req);
	assert_int_equal(claim(f, 3, NULL, 0, NULL), 3);
	assert_int_equal(fx_create(f, "t", STORE_PENDING, NULL, 1, idle), 0);

	/* A crash: reopen without any shutdown step. */
	fx_close(f);
	assert_int_equal(fx_open(f, NULL), 0);
	assert_int_equal(store_recover(f->st, rerun_unless_fragile, NULL), 3);

	struct store_job *j;
	assert_int_equal(store_get(f->st, again, &j), 0);
	assert_int_equal(j->status, STORE_PENDING);
	assert_int_equal(j->attempt, 2);
	store_job_free(j);
	assert_int_equal(store_get(f->st, fragile, &j), 0);
	assert_int_equal(j->status, STORE_FAILED);
	assert_string_equal(json_string_value(json_object_get(j->error, "code")), "interrupted");
	assert_non_null(strstr(json_string_value(json_object_get(j->error, "message")), "restart"));
	store_job_free(j);
	assert_int_equal(fx_status(f, spent), STORE_FAILED);
	assert_int_equal(fx_status(f, idle), STORE_PENDING);

	struct store_event *ev;
	size_t n = events_of(f, again, &ev);
	assert_int_equal(ev[n - 1].type, STORE_EV_RETRYING);
	assert_string_equal(json_string_value(json_object_get(ev[n - 1].data, "reason")), "interrupted");
	free_events(ev, n);
	assert_int_equal(store_recover(f->st, NULL, NULL), 0);
}

static void requeue_running__puts_jobs_back_without_using_a_retry(void **state)
{
	struct fx *f = *state;
	char id[40];
	bring(f, STORE_RUNNING, id);
	assert_int_equal(store_requeue_running(f->st), 1);
	struct store_job *j;
	assert_int_equal(store_get(f->st, id, &j), 0);
	assert_int_equal(j->status, STORE_PENDING);
	assert_int_equal(j->attempt, 1);
	store_job_free(j);
	struct store_event *ev;
	size_t n = events_of(f, id, &ev);
	assert_string_equal(json_string_value(json_object_get(ev[n - 1].data, "reason")), "shutdown");
	free_events(ev, n);
}

static void second_opener__is_refused_with_the_holders_pid(void **state)
{
	struct fx *f = *state;
	struct store *other = NULL;
	char *msg = NULL;
	struct store_config cfg = {.path = f->path};
	assert_int_equal(store_open(&f->loop, &cfg, &other, &msg), -EBUSY);
	assert_null(other);
	char pid[32];
	snprintf(pid, sizeof(pid), "pid %ld", (long)getpid());
	assert_non_null(msg);
	assert_non_null(strstr(msg, pid));
	assert_non_null(strstr(msg, f->path));
	free(msg);
	assert_string_equal(store_path(f->st), f->path);
	assert_string_equal(store_durability_name(f->st), "full");
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
		T(create__stamps_the_job_and_appends_a_created_event),
		T(create__with_start__claims_the_job_in_the_same_transaction),
		T(create__awaiting_approval__appends_approval_requested_too),
		T(create__awaiting_approval__approval_requested_carries_its_own_data),
		T(create__with_a_ttl_awaiting_approval__gets_an_expiry),
		T(create__same_tool_and_key__returns_the_first_job),
		T(create__with_a_given_id_twice__is_refused_and_writes_nothing),
		T(submit__malformed_requests__are_refused_without_a_callback),
		T(get__unknown_id__is_not_found),
		T(every_transition__succeeds_once_and_then_conflicts),
		T(transition__of_a_missing_job__is_not_found),
		T(second_decision__is_a_conflict_and_keeps_the_first),
		T(transition__writes_only_the_fields_it_sets),
		T(claim__takes_highest_priority_then_earliest_run_at_then_smallest_id),
		T(claim__respects_the_limit_and_per_tool_caps),
		T(claim__groups_have_room_of_their_own),
		T(definitions__are_stored_replaced_and_removed),
		T(claim__pooled_caps_share_what_is_left_of_the_pool),
		T(claim__the_pool_narrows_the_limits_room_and_leaves_the_groups_theirs),
		T(claim__jobs_count_as_undelivered_from_the_commit_to_the_done),
		T(claim__a_backlog_it_passes_over__is_not_read),
		T(claim__takes_what_a_walk_of_every_pending_job_takes),
		T(claim__skips_paused_tools_until_they_are_unpaused),
		T(claim__leaves_jobs_whose_run_at_is_in_the_future),
		T(claim__reports_the_next_run_at_of_a_tool_it_did_not_exclude),
		T(claim__with_nothing_pending_later__reports_no_next_run_at),
		T(checkpoint_and_progress__are_written_only_while_running),
		T(log__numbers_lines_and_keeps_the_newest_max_lines),
		T(log__of_a_missing_job__is_not_found_and_writes_nothing),
		T(expire__moves_overdue_suspended_and_awaiting_jobs_to_expired),
		T(list__pages_through_every_match_once_newest_first),
		T(list_and_count__find_completed_jobs_outside_the_status_index),
		T(list__with_a_cursor_it_did_not_make__is_invalid),
		T(list__by_id_prefix__reads_the_range_of_ids_that_begin_so),
		T(event_seq__grows_by_one_across_reopen_and_is_never_reused_after_pruning),
		T(event_seq__after_a_prune_of_the_newest_events__goes_on_past_them),
		T(prune__deletes_old_terminal_jobs_with_their_events_and_logs_only),
		T(events_typed__returns_only_those_types_and_next_passes_the_rest),
		T(listeners__see_each_event_in_seq_order_before_the_done_callback),
		T(recover__requeues_running_jobs_or_fails_those_that_may_not_rerun),
		T(requeue_running__puts_jobs_back_without_using_a_retry),
		T(second_opener__is_refused_with_the_holders_pid),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}

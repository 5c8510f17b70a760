/*
 * test_hold.c: a held creation that starts its job, followed by the
 * transition that ends the run (what the worker does for a nonblocking
 * tool), on a real temporary database. SQLite writes such a job's row
 * once, in its final state; these tests check that it does, and that the
 * row, the events and what each done sees are exactly what the creation
 * and then the transition, written one after the other, leave.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "tests/store/fixture.h"

/* exec runs sql of ours on a separate read-write connection. */
static void exec(struct fx *f, const char *sql)
{
	sqlite3 *db;
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

/* Every UPDATE of a job row leaves that job's id in updates. */
static void count_updates(struct fx *f)
{
	exec(f, "CREATE TABLE updates (id TEXT);"
		"CREATE TRIGGER count_updates AFTER UPDATE ON jobs"
		" BEGIN INSERT INTO updates VALUES (new.id); END;");
}

static int64_t updates_of(struct fx *f, const char *id)
{
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM updates WHERE id = '%s'", id);
	return fx_count(f, sql);
}

/* row reads job id as text that two jobs share when they hold the same
 * values: every column but the id, and its times as the relations the
 * lifecycle fixes (a transition's own time differs between two runs). */
static char *row(struct fx *f, const char *id)
{
	sqlite3 *db;
	sqlite3_stmt *s;
	char *text = NULL;
	assert_int_equal(sqlite3_open_v2(f->path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(
		sqlite3_prepare_v2(
			db,
			"SELECT json_array(tool, status, input, request_context,"
			" metadata, run_id, tool_call_id, idempotency_key, priority,"
			" run_at = created_at, run_at > updated_at, attempt,"
			" max_retries, timeout_ms, ttl_ms, expires_at - updated_at,"
			" output, model_output, error, suspend_payload, resume_data,"
			" checkpoint, approval_required, decision, reason,"
			" decided_at, progress, retry_of, updated_at >= created_at,"
			" started_at = created_at, finished_at = updated_at,"
			" finished_at IS NULL)"
			" FROM jobs WHERE id = ?1",
			-1, &s, NULL),
		SQLITE_OK);
	sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
	if (sqlite3_step(s) == SQLITE_ROW)
		text = strdup((const char *)sqlite3_column_text(s, 0));
	sqlite3_finalize(s);
	sqlite3_close(db);
	assert_non_null(text);
	return text;
}

struct done {
	int calls;
	int rc;
};

static void on_done(struct store_req *req, int rc)
{
	struct done *d = req->data;
	d->calls++;
	d->rc = rc;
}

/* A job of the fixture's shape, and its creation (not yet submitted). */
struct started {
	struct store_job job;
	struct store_req create, end;
	struct done created, ended;
};

static void started_init(struct started *s, const struct store_transition *end)
{
	memset(s, 0, sizeof(*s));
	s->job.tool = "noop";
	s->job.status = STORE_PENDING;
	s->job.input = json_pack("{s:i}", "n", 7);
	s->job.metadata = json_pack("{s:s}", "who", "test");
	s->job.run_id = "run-1";
	s->job.max_retries = 2;
	s->job.timeout_ms = 5000;
	s->job.ttl_ms = 60000;
	s->create.op = STORE_OP_CREATE;
	s->create.u.create.job = &s->job;
	s->create.u.create.event_data = s->job.input;
	s->create.u.create.start = true;
	s->create.done = on_done;
	s->create.data = &s->created;
	s->end.op = STORE_OP_TRANSITION;
	s->end.u.transition = *end;
	s->end.done = on_done;
	s->end.data = &s->ended;
}

/* submit_pair submits s's creation, then (its id now known) its end. */
static void submit_pair(struct fx *f, struct started *s)
{
	assert_int_equal(store_submit(f->st, &s->create), 0);
	memcpy(s->end.u.transition.job_id, s->job.id, 40);
	assert_int_equal(store_submit(f->st, &s->end), 0);
}

static void wait_pair(struct fx *f, struct started *s)
{
	while (s->created.calls == 0 || s->ended.calls == 0)
		uv_run(&f->loop, UV_RUN_ONCE);
	assert_int_equal(s->created.calls, 1);
	assert_int_equal(s->ended.calls, 1);
}

static void started_finish(struct started *s)
{
	store_req_finish(&s->create);
	store_req_finish(&s->end);
	json_decref(s->job.input);
	json_decref(s->job.metadata);
}

/* The ends a run may have, each with the fields it writes. */
static struct store_transition end_of(int which, json_t *value)
{
	struct store_transition t = {.from_mask = STORE_MASK(STORE_RUNNING)};
	switch (which) {
	case 0: /* completed, with both outputs; the event carries one */
		t.to = STORE_COMPLETED;
		t.event = STORE_EV_COMPLETED;
		t.set = STORE_SET_OUTPUT;
		t.output = value;
		t.model_output = json_string("seven");
		t.event_data = value;
		break;
	case 1: /* failed for good */
		t.to = STORE_FAILED;
		t.event = STORE_EV_FAILED;
		t.set = STORE_SET_ERROR;
		t.error = value;
		t.event_data = value;
		break;
	case 2: /* a retry, later */
		t.to = STORE_PENDING;
		t.event = STORE_EV_RETRYING;
		t.set = STORE_SET_ERROR | STORE_SET_RUN_AT | STORE_SET_ATTEMPT;
		t.error = value;
		t.run_at = store_now() + 3600000;
		t.attempt = 2;
		break;
	case 3: /* suspended: its ttl gives it an expiry */
		t.to = STORE_SUSPENDED;
		t.event = STORE_EV_SUSPENDED;
		t.set = STORE_SET_SUSPEND | STORE_SET_CHECKPOINT | STORE_SET_PROGRESS;
		t.suspend_payload = value;
		t.checkpoint = json_pack("{s:i}", "step", 2);
		t.progress = json_pack("{s:i}", "done", 50);
		break;
	default: /* timed out, no fields */
		t.to = STORE_TIMED_OUT;
		t.event = STORE_EV_TIMED_OUT;
		break;
	}
	return t;
}

static void end_free(struct store_transition *t)
{
	json_decref(t->model_output);
	json_decref(t->checkpoint);
	json_decref(t->progress);
}

static void assert_same_events(struct fx *f, const char *a, const char *b)
{
	struct store_event *ea, *eb;
	size_t na, nb;
	assert_int_equal(store_events(f->st, 0, a, 100, &ea, &na), 0);
	assert_int_equal(store_events(f->st, 0, b, 100, &eb, &nb), 0);
	assert_int_equal(na, 3);
	assert_int_equal(nb, 3);
	for (size_t i = 0; i < na; i++) {
		assert_int_equal(ea[i].type, eb[i].type);
		assert_int_equal(ea[i].status, eb[i].status);
		assert_true((ea[i].data == NULL && eb[i].data == NULL) ||
			    json_equal(ea[i].data, eb[i].data));
		if (i > 0)
			assert_int_equal(ea[i].seq, ea[i - 1].seq + 1);
	}
	assert_int_equal(ea[0].type, STORE_EV_CREATED);
	assert_int_equal(ea[1].type, STORE_EV_STARTED);
	for (size_t i = 0; i < na; i++)
		store_event_finish(&ea[i]);
	for (size_t i = 0; i < nb; i++)
		store_event_finish(&eb[i]);
	free(ea);
	free(eb);
}

/* The transition's done sees the job as it is stored. */
static void assert_done_sees_the_row(struct fx *f, const struct store_job *seen)
{
	struct store_job *j;
	assert_int_equal(store_get(f->st, seen->id, &j), 0);
	assert_int_equal(seen->status, j->status);
	assert_int_equal(seen->run_at, j->run_at);
	assert_int_equal(seen->attempt, j->attempt);
	assert_int_equal(seen->expires_at, j->expires_at);
	assert_int_equal(seen->created_at, j->created_at);
	assert_int_equal(seen->updated_at, j->updated_at);
	assert_int_equal(seen->started_at, j->started_at);
	assert_int_equal(seen->finished_at, j->finished_at);
	json_t *const pairs[][2] = {
		{seen->input, j->input},
		{seen->metadata, j->metadata},
		{seen->output, j->output},
		{seen->model_output, j->model_output},
		{seen->error, j->error},
		{seen->suspend_payload, j->suspend_payload},
		{seen->checkpoint, j->checkpoint},
		{seen->progress, j->progress},
	};
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
		assert_true((pairs[i][0] == NULL && pairs[i][1] == NULL) ||
			    json_equal(pairs[i][0], pairs[i][1]));
	assert_string_equal(seen->run_id, j->run_id);
	store_job_free(j);
}

static void held_pair__is_written_once_as_the_two_writes_would_leave_it(void **state)
{
	struct fx *f = *state;
	count_updates(f);
	for (int which = 0; which < 5; which++) {
		json_t *value = json_pack("{s:s, s:i}", "message", "m", "which", which);
		struct store_transition end = end_of(which, value);
		struct started held, plain;

		/* Held: creation and end reach the writer together. */
		started_init(&held, &end);
		store_hold(f->st);
		submit_pair(f, &held);
		store_release(f->st);
		wait_pair(f, &held);

		/* Plain: the creation commits, then the end. */
		started_init(&plain, &end);
		assert_int_equal(store_submit(f->st, &plain.create), 0);
		while (plain.created.calls == 0)
			uv_run(&f->loop, UV_RUN_ONCE);
		memcpy(plain.end.u.transition.job_id, plain.job.id, 40);
		assert_int_equal(store_submit(f->st, &plain.end), 0);
		wait_pair(f, &plain);

		assert_int_equal(held.created.rc, 0);
		assert_int_equal(held.ended.rc, 0);
		assert_int_equal(plain.ended.rc, 0);
		assert_int_equal(updates_of(f, held.job.id), 0);
		assert_int_equal(updates_of(f, plain.job.id), 1);
		/* The creation's answer is the job as submitted. */
		assert_int_equal(held.create.job->status, STORE_PENDING);
		assert_int_equal(held.end.job->status, end.to);

		char *a = row(f, held.job.id), *b = row(f, plain.job.id);
		assert_string_equal(a, b);
		free(a);
		free(b);
		assert_same_events(f, held.job.id, plain.job.id);
		assert_done_sees_the_row(f, held.end.job);
		assert_done_sees_the_row(f, plain.end.job);

		started_finish(&held);
		started_finish(&plain);
		end_free(&end);
		json_decref(value);
	}
}

static void log_done(struct store_req *req, int rc)
{
	*(int *)req->data = rc;
}

/* A request that reads the job between its creation and its end writes the
 * row first; the end is then an UPDATE, with the same result. */
static void held_pair__with_a_request_of_the_job_between__updates_the_row(void **state)
{
	struct fx *f = *state;
	count_updates(f);
	json_t *value = json_pack("{s:i}", "answer", 42);
	struct store_transition end = end_of(0, value);
	struct started held;
	started_init(&held, &end);

	store_hold(f->st);
	assert_int_equal(store_submit(f->st, &held.create), 0);
	struct store_log_line line = {.level = "info", .message = "between"};
	struct store_req log = {.op = STORE_OP_LOG, .done = log_done};
	int log_rc = 1;
	log.data = &log_rc;
	memcpy(log.u.log.job_id, held.job.id, 40);
	log.u.log.lines = &line;
	log.u.log.nlines = 1;
	assert_int_equal(store_submit(f->st, &log), 0);
	memcpy(held.end.u.transition.job_id, held.job.id, 40);
	assert_int_equal(store_submit(f->st, &held.end), 0);
	store_release(f->st);
	wait_pair(f, &held);
	while (log_rc == 1)
		uv_run(&f->loop, UV_RUN_ONCE);

	assert_int_equal(log_rc, 0);
	assert_int_equal(held.ended.rc, 0);
	assert_int_equal(updates_of(f, held.job.id), 1);
	assert_int_equal(fx_status(f, held.job.id), STORE_COMPLETED);
	assert_done_sees_the_row(f, held.end.job);
	store_req_finish(&log);
	started_finish(&held);
	end_free(&end);
	json_decref(value);
}

/* More pairs than one multi-row insert holds: every one lands. */
static void held_pairs__beyond_one_insert__all_land(void **state)
{
	struct fx *f = *state;
	count_updates(f);
	enum { N = 40 };
	json_t *value = json_pack("{s:b}", "ok", 1);
	struct store_transition end = end_of(0, value);
	struct started *s = calloc(N, sizeof(*s));

	store_hold(f->st);
	for (int i = 0; i < N; i++) {
		started_init(&s[i], &end);
		submit_pair(f, &s[i]);
	}
	store_release(f->st);
	for (int i = 0; i < N; i++) {
		wait_pair(f, &s[i]);
		assert_int_equal(s[i].ended.rc, 0);
		assert_int_equal(s[i].end.job->status, STORE_COMPLETED);
	}
	assert_int_equal(fx_count(f, "SELECT count(*) FROM jobs WHERE status = 4"
				     " AND output = '{\"ok\":true}'"),
			 N);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM events"), 3 * N);
	/* Each job's events are consecutive. */
	assert_int_equal(fx_count(f, "SELECT count(*) FROM events e"
				     " JOIN events s ON s.job_id = e.job_id"
				     " AND s.seq = e.seq + 1 AND s.type = 4"
				     " JOIN events c ON c.job_id = e.job_id"
				     " AND c.seq = e.seq + 2 AND c.type = 8"
				     " WHERE e.type = 0"),
			 N);
	/* Most were written once (a batch may split a pair). */
	assert_true(fx_count(f, "SELECT count(*) FROM updates") < N / 2);
	for (int i = 0; i < N; i++)
		started_finish(&s[i]);
	free(s);
	end_free(&end);
	json_decref(value);
}

/* A creation that fails leaves its end to meet the job that holds its id,
 * as when the two are written one after the other: a conflict here. */
static void held_pair__whose_creation_fails__leaves_the_end_to_meet_the_job_there(void **state)
{
	struct fx *f = *state;
	char id[40];
	assert_int_equal(fx_create(f, "noop", STORE_PENDING, NULL, 1, id), 0);
	struct store_transition end = end_of(4, NULL);
	struct started held;
	started_init(&held, &end);
	memcpy(held.job.id, id, 40); /* taken */

	store_hold(f->st);
	submit_pair(f, &held);
	store_release(f->st);
	wait_pair(f, &held);

	assert_int_equal(held.created.rc, -EEXIST);
	assert_int_equal(held.ended.rc, STORE_ECONFLICT);
	assert_int_equal(held.end.job->status, STORE_PENDING);
	assert_int_equal(fx_status(f, id), STORE_PENDING);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM events"), 1);
	started_finish(&held);
}

#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(held_pair__is_written_once_as_the_two_writes_would_leave_it),
		T(held_pair__with_a_request_of_the_job_between__updates_the_row),
		T(held_pairs__beyond_one_insert__all_land),
		T(held_pair__whose_creation_fails__leaves_the_end_to_meet_the_job_there),
	};
	return cmocka_run_group_tests_name("store: held creations", tests, NULL, NULL);
}

/*
 * test_pg_store.c: the store on PostgreSQL, with several stores (nodes)
 * on one database in one process and one loop. $BERTH_TEST_DB is the URL
 * of a server the test may create databases on (tests/pg/run.sh starts
 * one); each test gets a fresh database of its own.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <sqlite3.h>

#include "store/pg.h"
#include "store/store.h"
#include "tests/store/lists.h"

enum { MAX_NODES = 3 };

struct node {
	struct store *st;
	struct store_event *seen; /* the events its listener got */
	size_t nseen, capseen;
	bool closed;
};

struct fx {
	char url[512];
	uv_loop_t loop;
	struct node n[MAX_NODES];
	int nnodes;
};

static const char *base_url(void)
{
	const char *u = getenv("BERTH_TEST_DB");
	return u != NULL && u[0] != '\0' ? u : NULL;
}

/* pg_run runs SQL of ours on url, failing the test on an error. */
static void pg_run(const char *url, const char *sql)
{
	PGconn *pg = PQconnectdb(url);
	assert_int_equal(PQstatus(pg), CONNECTION_OK);
	PGresult *r = PQexec(pg, sql);
	ExecStatusType s = PQresultStatus(r);
	if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)
		fail_msg("%s: %s", sql, PQerrorMessage(pg));
	PQclear(r);
	PQfinish(pg);
}

static int64_t pg_int(const char *url, const char *sql)
{
	PGconn *pg = PQconnectdb(url);
	assert_int_equal(PQstatus(pg), CONNECTION_OK);
	PGresult *r = PQexec(pg, sql);
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	int64_t v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	PQfinish(pg);
	return v;
}

/* fresh_db makes an empty database named after the test and puts its URL
 * in out. */
static void fresh_db(const char *name, char *out, size_t len)
{
	char sql[256];
	snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
	pg_run(base_url(), sql);
	snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
	pg_run(base_url(), sql);
	const char *u = base_url();
	const char *slash = strrchr(u, '/');
	assert_non_null(slash);
	snprintf(out, len, "%.*s/%s", (int)(slash - u), u, name);
}

static void on_event(void *arg, const struct store_event *ev)
{
	struct node *n = arg;
	if (n->nseen == n->capseen) {
		n->capseen = n->capseen ? 2 * n->capseen : 64;
		n->seen = realloc(n->seen, n->capseen * sizeof(*n->seen));
		assert_non_null(n->seen);
	}
	struct store_event *e = &n->seen[n->nseen++];
	*e = *ev;
	e->tool = NULL;
	e->data = NULL;
}

static void node_open(struct fx *f, int i, const char *name, int64_t lease_ms)
{
	struct store_config cfg = {.path = f->url, .node = name, .lease_ms = lease_ms};
	char *err = NULL;
	int rc = store_open(&f->loop, &cfg, &f->n[i].st, &err);
	if (rc != 0)
		fail_msg("store_open: %s", err ? err : "?");
	assert_int_equal(store_add_listener(f->n[i].st, on_event, &f->n[i]), 0);
	f->n[i].closed = false;
	if (i >= f->nnodes)
		f->nnodes = i + 1;
}

static void on_store_closed(void *arg)
{
	*(bool *)arg = true;
}

static void node_close(struct fx *f, int i)
{
	if (f->n[i].st == NULL)
		return;
	store_close(f->n[i].st, on_store_closed, &f->n[i].closed);
	while (!f->n[i].closed)
		uv_run(&f->loop, UV_RUN_ONCE);
	f->n[i].st = NULL;
}

static int setup_named(void **state, const char *db, int nodes, int64_t lease)
{
	if (base_url() == NULL) {
		print_message("BERTH_TEST_DB is not set; tests/pg/run.sh sets it\n");
		return -1;
	}
	struct fx *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	fresh_db(db, f->url, sizeof(f->url));
	assert_int_equal(uv_loop_init(&f->loop), 0);
	static const char *const names[] = {"node-a", "node-b", "node-c"};
	for (int i = 0; i < nodes; i++)
		node_open(f, i, names[i], lease);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	for (int i = 0; i < f->nnodes; i++) {
		node_close(f, i);
		free(f->n[i].seen);
	}
	assert_int_equal(uv_loop_close(&f->loop), 0);
	free(f);
	return 0;
}

/* ---- helpers ------------------------------------------------------------ */

struct waiter {
	struct store_req req;
	bool done;
	int rc;
};

static void req_done(struct store_req *req, int rc)
{
	struct waiter *w = (struct waiter *)req;
	w->done = true;
	w->rc = rc;
}

static int run_req(struct fx *f, struct store *st, struct waiter *w)
{
	w->req.done = req_done;
	w->done = false;
	int rc = store_submit(st, &w->req);
	if (rc != 0)
		return rc;
	while (!w->done)
		uv_run(&f->loop, UV_RUN_ONCE);
	return w->rc;
}

static int create(struct fx *f, int node, const char *tool, const char *key,
		  char id[40])
{
	struct store_job j = {0};
	j.tool = (char *)tool;
	j.status = STORE_PENDING;
	j.idempotency_key = (char *)key;
	j.input = json_pack("{s:i}", "n", 1);
	j.max_retries = 1;
	struct waiter w = {.req = {.op = STORE_OP_CREATE}};
	w.req.u.create.job = &j;
	int rc = run_req(f, f->n[node].st, &w);
	if (rc == 0 && id != NULL)
		snprintf(id, 40, "%s", w.req.job->id);
	store_req_finish(&w.req);
	json_decref(j.input);
	return rc;
}

/* claim claims up to limit jobs on node with the caps; returns how many. */
static int claim(struct fx *f, int node, int limit, const struct store_cap *caps,
		 size_t ncaps, char ids[][40])
{
	struct waiter w = {.req = {.op = STORE_OP_CLAIM}};
	w.req.u.claim.limit = limit;
	w.req.u.claim.caps = caps;
	w.req.u.claim.ncaps = ncaps;
	assert_int_equal(run_req(f, f->n[node].st, &w), 0);
	int n = (int)w.req.njobs;
	for (int i = 0; ids != NULL && i < n; i++)
		snprintf(ids[i], 40, "%s", w.req.jobs[i]->id);
	store_req_finish(&w.req);
	return n;
}

static int move(struct fx *f, int node, const char *id, unsigned from, int to,
		int event)
{
	struct waiter w = {.req = {.op = STORE_OP_TRANSITION}};
	snprintf(w.req.u.transition.job_id, 40, "%s", id);
	w.req.u.transition.from_mask = from;
	w.req.u.transition.to = to;
	w.req.u.transition.event = event;
	int rc = run_req(f, f->n[node].st, &w);
	store_req_finish(&w.req);
	return rc;
}

static int status_of(struct fx *f, int node, const char *id)
{
	struct store_job *j = NULL;
	if (store_get(f->n[node].st, id, &j) != 0)
		return -1;
	int s = j->status;
	store_job_free(j);
	return s;
}

static void on_spun(uv_timer_t *t)
{
	uv_timer_stop(t);
}

/* spin runs the loop for about ms milliseconds. */
static void spin(struct fx *f, int ms)
{
	uv_timer_t t;
	uv_timer_init(&f->loop, &t);
	uv_timer_start(&t, on_spun, (uint64_t)ms, 0);
	while (uv_is_active((uv_handle_t *)&t))
		uv_run(&f->loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&t, NULL);
	uv_run(&f->loop, UV_RUN_NOWAIT);
}

/* ---- tests -------------------------------------------------------------- */

static int setup_one(void **state)
{
	return setup_named(state, "berth_t_one", 1, 0);
}

/* The single-node contract: create, idempotency, get, list, transitions,
 * conflicts, events in seq order. */
static void lifecycle__on_postgres__matches_the_store_contract(void **state)
{
	struct fx *f = *state;
	char a[40], b[40], again[40];
	assert_int_equal(create(f, 0, "echo", "k1", a), 0);
	assert_int_equal(create(f, 0, "echo", "k1", again), 0);
	assert_string_equal(a, again);
	assert_int_equal(create(f, 0, "echo", NULL, b), 0);
	assert_int_equal(status_of(f, 0, a), STORE_PENDING);

	struct store_job **jobs;
	size_t n;
	char *next;
	assert_int_equal(store_list(f->n[0].st, NULL, 1, NULL, &jobs, &n, &next), 0);
	assert_int_equal(n, 1);
	assert_string_equal(jobs[0]->id, b); /* newest first */
	assert_non_null(next);
	store_job_free(jobs[0]);
	free(jobs);
	char *cursor = next;
	assert_int_equal(store_list(f->n[0].st, NULL, 5, cursor, &jobs, &n, &next), 0);
	free(cursor);
	assert_int_equal(n, 1);
	assert_string_equal(jobs[0]->id, a);
	assert_null(next);
	store_job_free(jobs[0]);
	free(jobs);

	char got[2][40];
	assert_int_equal(claim(f, 0, 1, NULL, 0, got), 1);
	assert_string_equal(got[0], a); /* oldest of equal priority */
	assert_int_equal(move(f, 0, a, STORE_MASK(STORE_RUNNING), STORE_COMPLETED,
			      STORE_EV_COMPLETED), 0);
	assert_int_equal(move(f, 0, a, STORE_MASK(STORE_RUNNING), STORE_FAILED,
			      STORE_EV_FAILED), STORE_ECONFLICT);
	assert_int_equal(move(f, 0, "nope", STORE_MASK(STORE_RUNNING), STORE_FAILED,
			      STORE_EV_FAILED), STORE_ENOTFOUND);

	/* created a, created b, started a, completed a */
	struct node *nd = &f->n[0];
	assert_int_equal(nd->nseen, 4);
	for (size_t i = 0; i < nd->nseen; i++)
		assert_int_equal(nd->seen[i].seq, (int64_t)i + 1);
	assert_int_equal(store_last_seq(nd->st), 4);
	struct store_event *ev;
	assert_int_equal(store_events(nd->st, 2, NULL, 10, &ev, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(ev[0].type, STORE_EV_STARTED);
	assert_int_equal(ev[1].type, STORE_EV_COMPLETED);
	for (size_t i = 0; i < n; i++)
		store_event_finish(&ev[i]);
	free(ev);

	int64_t counts[STORE_NSTATUS];
	assert_int_equal(store_count_by_status(nd->st, counts), 0);
	assert_int_equal(counts[STORE_PENDING], 1);
	assert_int_equal(counts[STORE_COMPLETED], 1);
}

/* typed reads the events of types after `after` (of job, when not NULL)
 * on node 0 with limit and scan, asserts that it returns the seqs of want
 * (ended by 0), next and more, and frees them. */
static void typed(struct fx *f, const char *job, unsigned types, int64_t after,
		  int limit, int scan, const int64_t *want, int64_t next,
		  bool more)
{
	struct store_event_query q = {after, job, types, limit, scan};
	struct store_event *ev;
	size_t n, k = 0;
	int64_t got_next;
	bool got_more;

	assert_int_equal(store_events_typed(f->n[0].st, &q, &ev, &n, &got_next,
					    &got_more), 0);
	while (want[k])
		k++;
	assert_int_equal(n, k);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(ev[i].seq, want[i]);
		assert_true(types & STORE_MASK(ev[i].type));
		assert_non_null(ev[i].tool);
		store_event_finish(&ev[i]);
	}
	free(ev);
	assert_int_equal(got_next, next);
	assert_int_equal(got_more, more);
}

/* A read by type on PostgreSQL, as on SQLite (tests/store): only those
 * types, counted against its limit, at most scan seqs looked through from
 * the first event after its start, never past the last committed, and a
 * next that passes over the others it looked at. */
static void events_typed__on_postgres__returns_only_those_types_and_next_passes_the_rest(void **state)
{
	struct fx *f = *state;
	const unsigned cancelled = STORE_MASK(STORE_EV_CANCELLED);
	char id[6][40];

	/* seqs 1-5: five jobs created; 6, 7: the first and the third
	 * cancelled; 8: a sixth created. */
	for (int i = 0; i < 5; i++)
		assert_int_equal(create(f, 0, "echo", NULL, id[i]), 0);
	assert_int_equal(move(f, 0, id[0], STORE_MASK(STORE_PENDING),
			      STORE_CANCELLED, STORE_EV_CANCELLED), 0);
	assert_int_equal(move(f, 0, id[2], STORE_MASK(STORE_PENDING),
			      STORE_CANCELLED, STORE_EV_CANCELLED), 0);
	assert_int_equal(create(f, 0, "echo", NULL, id[5]), 0);

	typed(f, NULL, cancelled, 0, 10, 100, (int64_t[]){6, 7, 0}, 8, false);
	typed(f, NULL, cancelled, 0, 1, 100, (int64_t[]){6, 0}, 6, true);
	typed(f, NULL, cancelled, 6, 1, 100, (int64_t[]){7, 0}, 7, true);
	typed(f, NULL, cancelled, 7, 1, 100, (int64_t[]){0}, 8, false);
	typed(f, NULL, cancelled, 8, 1, 100, (int64_t[]){0}, 8, false);
	typed(f, NULL, cancelled, 0, 10, 3, (int64_t[]){0}, 3, true);
	typed(f, NULL, cancelled, 3, 10, 3, (int64_t[]){6, 0}, 6, true);
	typed(f, NULL, cancelled, 6, 10, 3, (int64_t[]){7, 0}, 8, false);
	typed(f, NULL, cancelled | STORE_MASK(STORE_EV_CREATED), 0, 100, 100,
	      (int64_t[]){1, 2, 3, 4, 5, 6, 7, 8, 0}, 8, false);
	typed(f, id[2], cancelled, 0, 10, 100, (int64_t[]){7, 0}, 8, false);
	typed(f, id[2], cancelled, 0, 10, 1, (int64_t[]){0}, 3, true);
	typed(f, id[1], cancelled, 0, 10, 100, (int64_t[]){0}, 8, false);

	/* Pruned: 2, 4, 5 and 8 are left, and a span of two starts at the
	 * first event left after its start. */
	struct waiter w = {.req = {.op = STORE_OP_PRUNE}};
	w.req.u.prune.before = store_now() + 1000;
	assert_int_equal(run_req(f, f->n[0].st, &w), 0);
	assert_int_equal(w.req.count, 2);
	store_req_finish(&w.req);
	typed(f, NULL, STORE_MASK(STORE_EV_CREATED), 0, 10, 2,
	      (int64_t[]){2, 0}, 3, true);
	typed(f, NULL, STORE_MASK(STORE_EV_CREATED), 3, 10, 2,
	      (int64_t[]){4, 5, 0}, 5, true);
	typed(f, NULL, cancelled, 5, 10, 2, (int64_t[]){0}, 8, false);
	typed(f, NULL, cancelled, 8, 10, 2, (int64_t[]){0}, 8, false);
}

/* Listing by a prefix of ids reads a range of the primary key and keeps
 * the rows that begin with the prefix, on PostgreSQL as on SQLite; the
 * ends that carry past 'f' and a prefix of 'f's (no end) included. */
static void list__by_id_prefix__reads_the_range_of_ids_that_begin_so(void **state)
{
	struct fx *f = *state;
	static const char *const ids[] = {
		"0aaa-0001", "0aaa-0002", "0aab-0001", "0a9f-0001",
		"0b00-0000", "0aff-ffff", "ffff-0001",
	};
	static const struct {
		const char *prefix;
		int expect;
	} cases[] = {
		{"0aaa", 2}, {"0aaa-", 2}, {"0aaa-0002", 1}, {"0aa", 3},
		{"0a9", 1}, {"0a9f", 1}, {"0aff", 1}, {"ffff", 1}, {"f", 1},
		{"0", 6}, {"1", 0}, {"-", 0},
	};
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		struct store_job j = {0};
		j.tool = "echo";
		j.status = STORE_PENDING;
		snprintf(j.id, sizeof(j.id), "%s", ids[i]);
		struct waiter w = {.req = {.op = STORE_OP_CREATE}};
		w.req.u.create.job = &j;
		assert_int_equal(run_req(f, f->n[0].st, &w), 0);
		store_req_finish(&w.req);
	}
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct store_filter flt = {.id_prefix = cases[c].prefix};
		int seen = lists(f->n[0].st, &flt, 2, NULL, 0);
		if (seen != cases[c].expect)
			print_error("prefix %s\n", flt.id_prefix);
		assert_int_equal(seen, cases[c].expect);
	}
}

/* No index holds completed jobs by status, nor jobs by tool, nor
 * terminal jobs by the time they finished (migration 0005): completed
 * jobs and a tool's are listed through the primary key, completed ones
 * counted as all jobs less the others, and the prune finds the old
 * terminal jobs by id. */
static void list_count_and_prune__without_indexes_of_completed_jobs(void **state)
{
	struct fx *f = *state;
	enum { N = 8 };
	char ids[N][40], got[N][40];
	for (int i = 0; i < N; i++)
		assert_int_equal(create(f, 0, i % 2 ? "odd" : "even", NULL, ids[i]), 0);
	assert_int_equal(claim(f, 0, 7, NULL, 0, NULL), 7);
	/* ids[0..3] completed, [4, 5] failed, [6] running, [7] pending. */
	for (int i = 0; i < 6; i++)
		assert_int_equal(move(f, 0, ids[i], STORE_MASK(STORE_RUNNING),
				      i < 4 ? STORE_COMPLETED : STORE_FAILED,
				      i < 4 ? STORE_EV_COMPLETED : STORE_EV_FAILED),
				 0);
	int64_t counts[STORE_NSTATUS];
	assert_int_equal(store_count_by_status(f->n[0].st, counts), 0);
	assert_int_equal(counts[STORE_COMPLETED], 4);
	assert_int_equal(counts[STORE_FAILED], 2);
	assert_int_equal(counts[STORE_RUNNING], 1);
	assert_int_equal(counts[STORE_PENDING], 1);

	struct store_filter done = {.status_mask = STORE_MASK(STORE_COMPLETED)};
	assert_int_equal(lists(f->n[0].st, &done, 2, got, N), 4);
	for (int i = 0; i < 4; i++)
		assert_string_equal(got[i], ids[3 - i]);
	struct store_filter failed = {.status_mask = STORE_MASK(STORE_FAILED)};
	assert_int_equal(lists(f->n[0].st, &failed, 2, got, N), 2);
	assert_string_equal(got[0], ids[5]);
	struct store_filter odd = {.tool = "odd"};
	assert_int_equal(lists(f->n[0].st, &odd, 2, got, N), 4);
	assert_string_equal(got[0], ids[7]);
	assert_string_equal(got[3], ids[1]);
	struct store_filter odd_done = {.tool = "odd",
					.status_mask = STORE_MASK(STORE_COMPLETED)};
	assert_int_equal(lists(f->n[0].st, &odd_done, 2, got, N), 2);
	assert_string_equal(got[0], ids[3]);

	struct waiter w = {.req = {.op = STORE_OP_PRUNE}};
	w.req.u.prune.before = store_now() + 1000;
	assert_int_equal(run_req(f, f->n[0].st, &w), 0);
	assert_int_equal(w.req.count, 6);
	store_req_finish(&w.req);
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM jobs"), 2);
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM events WHERE job_id"
					" NOT IN (SELECT id FROM jobs)"), 0);
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM pg_indexes WHERE"
					" indexname IN ('jobs_tool', 'jobs_finished')"), 0);
}

/* refused runs sql on url and returns the SQLSTATE of its error ("" when
 * it succeeded). */
static void refused(const char *url, const char *sql, char state[6])
{
	PGconn *pg = PQconnectdb(url);
	assert_int_equal(PQstatus(pg), CONNECTION_OK);
	PGresult *r = PQexec(pg, sql);
	const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	snprintf(state, 6, "%s", s != NULL ? s : "");
	PQclear(r);
	PQfinish(pg);
}

/* The ranges of statuses, decisions and event types are held by domains
 * (migration 0006), which PostgreSQL plans once per server process rather
 * than once per statement as it does CHECK constraints: a value out of
 * range is still refused (23514, check_violation), in every table. */
static void schema__refuses_statuses_and_types_out_of_range(void **state)
{
	struct fx *f = *state;
	char id[40], st[6];
	assert_int_equal(create(f, 0, "echo", NULL, id), 0);
	static const char *const bad[] = {
		"UPDATE jobs SET status = 10",
		"UPDATE jobs SET status = -1",
		"UPDATE jobs SET decision = 3",
		"INSERT INTO events (seq, job_id, tool, type, status, at)"
		" VALUES (1000, 'j', 't', 13, 0, 0)",
		"INSERT INTO events (seq, job_id, tool, type, status, at)"
		" VALUES (1000, 'j', 't', 0, 10, 0)",
		"INSERT INTO event_seq (one, n) VALUES (2, 0)",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		refused(f->url, bad[i], st);
		if (strcmp(st, "23514") != 0)
			fail_msg("%s: SQLSTATE '%s', not 23514", bad[i], st);
	}
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM pg_constraint"
					" WHERE contype = 'c' AND conrelid IN"
					" ('jobs'::regclass, 'events'::regclass,"
					" 'event_seq'::regclass)"),
			 0);
	assert_int_equal(status_of(f, 0, id), STORE_PENDING);
}

/* approval_requested carries approval_event_data when it is given, on
 * PostgreSQL as on SQLite; created keeps event_data. */
static void create__awaiting_approval__approval_requested_carries_its_own_data(void **state)
{
	struct fx *f = *state;
	struct store_job j = {0};
	j.tool = "mail.send";
	j.status = STORE_AWAITING_APPROVAL;
	j.approval_required = true;
	j.input = json_pack("{s:s}", "to", "a@example.org");
	json_t *approval = json_pack("{s:s}", "ask", "send?");
	struct waiter w = {.req = {.op = STORE_OP_CREATE}};
	w.req.u.create.job = &j;
	w.req.u.create.event_data = j.input;
	w.req.u.create.approval_event_data = approval;
	assert_int_equal(run_req(f, f->n[0].st, &w), 0);
	struct store_event *ev;
	size_t n;
	assert_int_equal(store_events(f->n[0].st, 0, w.req.job->id, 10, &ev, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(ev[0].type, STORE_EV_CREATED);
	assert_true(json_equal(ev[0].data, j.input));
	assert_int_equal(ev[1].type, STORE_EV_APPROVAL_REQUESTED);
	assert_true(json_equal(ev[1].data, approval));
	for (size_t i = 0; i < n; i++)
		store_event_finish(&ev[i]);
	free(ev);
	store_req_finish(&w.req);
	json_decref(j.input);
	json_decref(approval);
}

/* decide runs an approval (or a decline, approve false) of id by who on
 * node: a new list of approvals judged on one of had approvals. */
static int decide(struct fx *f, int node, const char *id, const char *who,
		  const char *via, json_t *approvals, int had, bool final)
{
	struct waiter w = {.req = {.op = STORE_OP_TRANSITION}};
	struct store_transition *tr = &w.req.u.transition;
	snprintf(tr->job_id, 40, "%s", id);
	tr->from_mask = STORE_MASK(STORE_AWAITING_APPROVAL);
	tr->to = final ? STORE_PENDING : STORE_AWAITING_APPROVAL;
	tr->event = STORE_EV_APPROVED;
	tr->set = STORE_SET_APPROVALS | (final ? STORE_SET_DECISION : 0);
	tr->decision = STORE_DECISION_APPROVED;
	tr->by = who;
	tr->via = via;
	tr->approvals = approvals;
	tr->approvals_had = had;
	tr->quorum = 2;
	int rc = run_req(f, f->n[node].st, &w);
	store_req_finish(&w.req);
	return rc;
}

/* The audit on PostgreSQL: a creation's events are its submitter's, a
 * list of approvals is written only over the list it was judged on (a
 * stale one conflicts, changing nothing), and the decision records its
 * decider. */
static void approvals__on_postgres__are_written_over_the_list_they_were_judged_on(void **state)
{
	struct fx *f = *state;
	struct store_job j = {0}, *got = NULL;
	json_t *client = json_pack("{s:s, s:s}", "name", "claude", "version", "1");
	json_t *one = json_pack("[{s:s}]", "by", "alice");
	json_t *two = json_pack("[{s:s}, {s:s}]", "by", "alice", "by", "bob");
	struct store_event *ev;
	size_t n;
	char id[40];

	j.tool = "deploy";
	j.status = STORE_AWAITING_APPROVAL;
	j.approval_required = true;
	j.quorum = 2;
	j.submitted_by = "agent";
	j.submitted_via = "mcp";
	j.input = json_object();
	struct waiter w = {.req = {.op = STORE_OP_CREATE}};
	w.req.u.create.job = &j;
	w.req.u.create.client = client;
	assert_int_equal(run_req(f, f->n[0].st, &w), 0);
	snprintf(id, sizeof id, "%s", w.req.job->id);
	store_req_finish(&w.req);

	assert_int_equal(decide(f, 0, id, "alice", "tcp", one, 0, false), 0);
	/* Judged on the empty list, which is gone: nothing changes. */
	assert_int_equal(decide(f, 0, id, "carol", "tcp", one, 0, false),
			 STORE_ECONFLICT);
	assert_int_equal(decide(f, 0, id, "bob", "http", two, 1, true), 0);
	assert_int_equal(store_get(f->n[0].st, id, &got), 0);
	assert_int_equal(got->status, STORE_PENDING);
	assert_string_equal(got->submitted_by, "agent");
	assert_string_equal(got->submitted_via, "mcp");
	assert_string_equal(got->decided_by, "bob");
	assert_string_equal(got->decided_via, "http");
	assert_int_equal(got->quorum, 2);
	assert_true(json_equal(got->approvals, two));
	store_job_free(got);

	assert_int_equal(store_events(f->n[0].st, 0, id, 10, &ev, &n), 0);
	assert_int_equal(n, 4);
	assert_string_equal(ev[0].by, "agent");
	assert_string_equal(ev[0].via, "mcp");
	assert_true(json_equal(ev[0].client, client));
	assert_string_equal(ev[2].by, "alice");
	assert_int_equal(ev[2].status, STORE_AWAITING_APPROVAL);
	assert_string_equal(ev[3].by, "bob");
	assert_string_equal(ev[3].via, "http");
	assert_null(ev[3].client);
	for (size_t i = 0; i < n; i++)
		store_event_finish(&ev[i]);
	free(ev);
	json_decref(j.input);
	json_decref(client);
	json_decref(one);
	json_decref(two);
}

/* A newer schema is refused and left untouched. */
static void open__newer_schema__is_refused(void **state)
{
	struct fx *f = *state;
	node_close(f, 0);
	pg_run(f->url, "UPDATE berth_schema SET version = 99");
	struct store_config cfg = {.path = f->url, .node = "node-a"};
	struct store *st = NULL;
	char *err = NULL;
	assert_int_equal(store_open(&f->loop, &cfg, &st, &err), -EPROTO);
	assert_non_null(strstr(err, "newer berth"));
	free(err);
	assert_int_equal(pg_int(f->url, "SELECT version FROM berth_schema"), 99);
	pg_run(f->url, "UPDATE berth_schema SET version = 1");
}

/* A second live node of the same name is refused. */
static void open__same_node_name_twice__is_refused(void **state)
{
	struct fx *f = *state;
	struct store_config cfg = {.path = f->url, .node = "node-a"};
	struct store *st = NULL;
	char *err = NULL;
	assert_int_equal(store_open(&f->loop, &cfg, &st, &err), -EBUSY);
	assert_non_null(strstr(err, "already running"));
	free(err);
}

static int setup_three(void **state)
{
	return setup_named(state, "berth_t_three", 3, 0);
}

/* Events committed by one node reach the listeners of the others, in seq
 * order, each once. */
static void events__from_other_nodes__reach_every_listener_in_order(void **state)
{
	struct fx *f = *state;
	for (int i = 0; i < 30; i++)
		assert_int_equal(create(f, i % 3, "echo", NULL, NULL), 0);
	for (int tries = 0; tries < 100; tries++) {
		if (f->n[0].nseen == 30 && f->n[1].nseen == 30 && f->n[2].nseen == 30)
			break;
		spin(f, 20);
	}
	for (int k = 0; k < 3; k++) {
		assert_int_equal(f->n[k].nseen, 30);
		for (size_t i = 0; i < 30; i++)
			assert_int_equal(f->n[k].seen[i].seq, (int64_t)i + 1);
	}
}

/* Concurrent batches of three nodes never make a reader skip a seq: every
 * listener sees 1..N without a gap, whatever order the commits took. */
static void events__concurrent_commits__no_seq_is_skipped(void **state)
{
	struct fx *f = *state;
	enum { N = 300 };
	static struct waiter w[N];
	static struct store_job j[N];
	for (int i = 0; i < N; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		memset(&j[i], 0, sizeof(j[i]));
		j[i].tool = "echo";
		j[i].status = STORE_PENDING;
		w[i].req.op = STORE_OP_CREATE;
		w[i].req.u.create.job = &j[i];
		w[i].req.done = req_done;
		assert_int_equal(store_submit(f->n[i % 3].st, &w[i].req), 0);
	}
	for (int i = 0; i < N; i++) {
		while (!w[i].done)
			uv_run(&f->loop, UV_RUN_ONCE);
		assert_int_equal(w[i].rc, 0);
		store_req_finish(&w[i].req);
	}
	for (int tries = 0; tries < 200; tries++) {
		if (f->n[0].nseen == N && f->n[1].nseen == N && f->n[2].nseen == N)
			break;
		spin(f, 20);
	}
	for (int k = 0; k < 3; k++) {
		assert_int_equal(f->n[k].nseen, N);
		for (size_t i = 0; i < N; i++)
			assert_int_equal(f->n[k].seen[i].seq, (int64_t)i + 1);
	}
}

/* A tool's cluster-wide limit holds across nodes. */
static void claim__cluster_limit__holds_across_nodes(void **state)
{
	struct fx *f = *state;
	for (int i = 0; i < 10; i++)
		assert_int_equal(create(f, 0, "slow", NULL, NULL), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(create(f, 1, "fast", NULL, NULL), 0);
	struct store_cap caps[] = {{.tool = "slow", .remaining = 3, .limit = 3}};
	int a = claim(f, 0, 2, caps, 1, NULL);
	int b = claim(f, 1, 10, caps, 1, NULL);
	int c = claim(f, 2, 10, caps, 1, NULL);
	assert_int_equal(a, 2);
	/* b gets the one slot of slow left and every fast job */
	assert_int_equal(b + c, 1 + 4);
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM jobs WHERE status = 2"
					" AND tool = 'slow'"), 3);
	/* the global limit */
	assert_int_equal(create(f, 0, "free", NULL, NULL), 0);
	struct waiter w = {.req = {.op = STORE_OP_CLAIM}};
	w.req.u.claim.limit = 10;
	w.req.u.claim.global_limit = 7;
	assert_int_equal(run_req(f, f->n[2].st, &w), 0);
	assert_int_equal(w.req.njobs, 0); /* 7 running already */
	store_req_finish(&w.req);
	/* ... for the jobs of a claim's groups (worker processes) too,
	 * which it let by: 8 allows one more, pool or group. */
	assert_int_equal(create(f, 0, "wp", NULL, NULL), 0);
	assert_int_equal(create(f, 0, "wp", NULL, NULL), 0);
	{
		const struct store_cap gcaps[] = {
			{.tool = "wp", .remaining = 10, .group = 1},
		};
		const int groups[] = {5};
		struct waiter g = {.req = {.op = STORE_OP_CLAIM}};

		g.req.u.claim.limit = 0;
		g.req.u.claim.caps = gcaps;
		g.req.u.claim.ncaps = 1;
		g.req.u.claim.groups = groups;
		g.req.u.claim.ngroups = 1;
		g.req.u.claim.global_limit = 8;
		assert_int_equal(run_req(f, f->n[2].st, &g), 0);
		assert_int_equal(g.req.njobs, 1);
		store_req_finish(&g.req);
	}
}

/* A claim's groups take no room of its limit (store.h): with the limit
 * spent, a scan keeps only the groups' tools. */
static void claim__groups_have_room_of_their_own(void **state)
{
	struct fx *f = *state;
	for (int i = 0; i < 4; i++) {
		assert_int_equal(create(f, 0, "pool", NULL, NULL), 0);
		assert_int_equal(create(f, 0, "w1", NULL, NULL), 0);
	}
	const struct store_cap caps[] = {
		{.tool = "w1", .remaining = 10, .group = 1},
	};
	const int groups[] = {3};
	struct waiter w = {.req = {.op = STORE_OP_CLAIM}};
	w.req.u.claim.limit = 1;
	w.req.u.claim.caps = caps;
	w.req.u.claim.ncaps = 1;
	w.req.u.claim.groups = groups;
	w.req.u.claim.ngroups = 1;
	assert_int_equal(run_req(f, f->n[0].st, &w), 0);
	assert_int_equal(w.req.njobs, 4);
	store_req_finish(&w.req);
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM jobs WHERE status = 2"
					" AND tool = 'pool'"), 1);
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM jobs WHERE status = 2"
					" AND tool = 'w1'"), 3);
	memset(&w, 0, sizeof(w));
	w.req.op = STORE_OP_CLAIM;
	w.req.u.claim.limit = 0;
	w.req.u.claim.caps = caps;
	w.req.u.claim.ncaps = 1;
	w.req.u.claim.groups = groups;
	w.req.u.claim.ngroups = 1;
	assert_int_equal(run_req(f, f->n[1].st, &w), 0);
	assert_int_equal(w.req.njobs, 1); /* the last of w1, no pool job */
	store_req_finish(&w.req);
}

/* A claim reports the earliest future run_at of a tool it did not
 * exclude; a tool whose cluster limit is full is excluded on every node. */
static void claim__reports_the_next_run_at_of_a_tool_it_did_not_exclude(void **state)
{
	struct fx *f = *state;
	int64_t now = store_now();
	static const struct { const char *tool; int64_t delay; } jobs[] = {
		{"full", 0}, {"full", 0}, {"full", 1000}, {"other", 3000}, {"other", 4000},
	};
	for (size_t i = 0; i < sizeof(jobs) / sizeof(jobs[0]); i++) {
		struct store_job j = {0};
		j.tool = (char *)jobs[i].tool;
		j.status = STORE_PENDING;
		j.run_at = jobs[i].delay ? now + jobs[i].delay : 0;
		struct waiter w = {.req = {.op = STORE_OP_CREATE}};
		w.req.u.create.job = &j;
		assert_int_equal(run_req(f, f->n[0].st, &w), 0);
		store_req_finish(&w.req);
	}
	/* Node a fills full's cluster limit of 1; node b, with room of its
	 * own, finds it full and is told other's time. */
	struct store_cap caps[] = {{.tool = "full", .remaining = 1, .limit = 1}};
	for (int node = 0; node < 2; node++) {
		struct waiter w = {.req = {.op = STORE_OP_CLAIM}};
		w.req.u.claim.limit = 10;
		w.req.u.claim.caps = caps;
		w.req.u.claim.ncaps = 1;
		assert_int_equal(run_req(f, f->n[node].st, &w), 0);
		assert_int_equal(w.req.njobs, node == 0 ? 1 : 0);
		assert_int_equal(w.req.next_run_at, now + 3000);
		store_req_finish(&w.req);
	}
	/* Without a cap, full's own delayed job is the next. */
	struct waiter w = {.req = {.op = STORE_OP_CLAIM}};
	w.req.u.claim.limit = 10;
	assert_int_equal(run_req(f, f->n[1].st, &w), 0);
	assert_int_equal(w.req.njobs, 1);
	assert_int_equal(w.req.next_run_at, now + 1000);
	store_req_finish(&w.req);
}

/* The end of a run by a node that lost its lease is refused. */
static void transition__from_running_without_the_lease__conflicts(void **state)
{
	struct fx *f = *state;
	char id[40], got[1][40];
	assert_int_equal(create(f, 0, "echo", NULL, id), 0);
	assert_int_equal(claim(f, 0, 1, NULL, 0, got), 1);
	assert_int_equal(move(f, 1, id, STORE_MASK(STORE_RUNNING), STORE_COMPLETED,
			      STORE_EV_COMPLETED), STORE_ECONFLICT);
	/* a cancel from any node is fine */
	assert_int_equal(move(f, 1, id, STORE_MASK(STORE_PENDING) | STORE_MASK(STORE_RUNNING),
			      STORE_CANCELLED, STORE_EV_CANCELLED), 0);
}

static int setup_lease(void **state)
{
	return setup_named(state, "berth_t_lease", 2, 400);
}

static bool rerun_all(void *arg, const char *tool)
{
	return strcmp(tool, "once") != 0;
}

/* A dead node's running jobs are recovered by another node once their
 * leases expire, by the interrupt policy; its own restart recovers its
 * jobs at once. */
static void lease__expired__jobs_are_recovered_by_other_nodes(void **state)
{
	struct fx *f = *state;
	char a[40], b[40], c[40], got[3][40];
	assert_int_equal(create(f, 0, "echo", NULL, a), 0);
	assert_int_equal(create(f, 0, "once", NULL, b), 0);
	assert_int_equal(claim(f, 0, 2, NULL, 0, got), 2);
	assert_int_equal(store_recover(f->n[1].st, rerun_all, NULL), 0);
	/* node-a stops renewing (closed without requeueing: it "died") */
	node_close(f, 0);
	spin(f, 200);
	assert_int_equal(status_of(f, 1, a), STORE_RUNNING); /* lease not expired */
	for (int i = 0; i < 100 && status_of(f, 1, a) == STORE_RUNNING; i++)
		spin(f, 50);
	assert_int_equal(status_of(f, 1, a), STORE_PENDING);
	assert_int_equal(status_of(f, 1, b), STORE_FAILED);
	struct store_job *j;
	assert_int_equal(store_get(f->n[1].st, a, &j), 0);
	assert_int_equal(j->attempt, 2);
	store_job_free(j);

	/* node-b claims c, restarts under its name: recovered at once */
	assert_int_equal(create(f, 1, "echo", NULL, c), 0);
	assert_int_equal(claim(f, 1, 5, NULL, 0, got), 2);
	node_close(f, 1);
	node_open(f, 1, "node-b", 400);
	assert_int_equal(store_recover(f->n[1].st, rerun_all, NULL), 2);
	assert_int_equal(status_of(f, 1, c), STORE_PENDING);
}

static int setup_short_lease(void **state)
{
	return setup_named(state, "berth_t_renew", 1, 1500);
}

/* lease_until of job id on node 0's database. */
static int64_t lease_until(struct fx *f, const char *id)
{
	char sql[160];
	snprintf(sql, sizeof(sql), "SELECT lease_until FROM jobs WHERE id = '%s'", id);
	return pg_int(f->url, sql);
}

/* A lease of 1.5 s (a tick every 375 ms) is renewed at every tick: the
 * renewal waited for a full third of the lease to pass, so it came every
 * second tick, 750 ms apart, and a loop late by that much lost its jobs
 * to another node (the pg-cluster test, once, on a busy machine). */
static void lease__short__is_renewed_at_every_tick(void **state)
{
	struct fx *f = *state;
	char id[40], got[1][40];
	assert_int_equal(create(f, 0, "echo", NULL, id), 0);
	assert_int_equal(claim(f, 0, 1, NULL, 0, got), 1);
	int64_t first = lease_until(f, id), renewed = first;
	for (int i = 0; i < 200 && renewed == first; i++) {
		spin(f, 10);
		renewed = lease_until(f, id);
	}
	assert_true(renewed > first);
	/* the next tick comes 375 ms after that renewal, the one after it at
	 * 750 ms */
	spin(f, 500);
	assert_true(lease_until(f, id) > renewed);
}

static int setup_known(void **state)
{
	return setup_named(state, "berth_t_known", 3, 400);
}

/* As the worker answers (worker.c): a tool it does not have is neither
 * known nor to be run again. */
static bool knows_not_only_a(void *arg, const char *tool)
{
	return strcmp(tool, "only-a") != 0;
}

static bool rerun_known(void *arg, const char *tool)
{
	return strcmp(tool, "only-a") != 0;
}

/* A dead node's job of a tool the surviving node does not have is left
 * running for a node that has it, which recovers it by the tool's policy:
 * the node without the tool failed it as interrupted, though the tool
 * would have had it run again (the audit: a worker tool registered on the
 * node that died). */
static void lease__expired__a_tool_the_node_lacks__is_left_to_a_node_that_has_it(void **state)
{
	struct fx *f = *state;
	char a[40], e[40], got[2][40];
	assert_int_equal(create(f, 0, "only-a", NULL, a), 0);
	assert_int_equal(create(f, 0, "echo", NULL, e), 0);
	assert_int_equal(claim(f, 0, 2, NULL, 0, got), 2);
	store_know_tools(f->n[1].st, knows_not_only_a, NULL);
	assert_int_equal(store_recover(f->n[1].st, rerun_known, NULL), 0);
	node_close(f, 0);
	/* node-b recovers the job of the tool it has ... */
	for (int i = 0; i < 100 && status_of(f, 1, e) == STORE_RUNNING; i++)
		spin(f, 50);
	assert_int_equal(status_of(f, 1, e), STORE_PENDING);
	/* ... and leaves the other, its lease expired, for ticks to come */
	spin(f, 600);
	struct store_job *j;
	assert_int_equal(store_get(f->n[1].st, a, &j), 0);
	assert_int_equal(j->status, STORE_RUNNING);
	assert_int_equal(j->attempt, 1);
	store_job_free(j);
	/* node-c has the tool: it runs the job again (attempt 2) */
	assert_int_equal(store_recover(f->n[2].st, rerun_all, NULL), 0);
	for (int i = 0; i < 100 && status_of(f, 2, a) == STORE_RUNNING; i++)
		spin(f, 50);
	assert_int_equal(store_get(f->n[2].st, a, &j), 0);
	assert_int_equal(j->status, STORE_PENDING);
	assert_int_equal(j->attempt, 2);
	store_job_free(j);
}

/* move_run is move for the end of a run of attempt run_attempt. */
static int move_run(struct fx *f, int node, const char *id, int to, int event,
		    int run_attempt)
{
	struct waiter w = {.req = {.op = STORE_OP_TRANSITION}};
	snprintf(w.req.u.transition.job_id, 40, "%s", id);
	w.req.u.transition.from_mask = STORE_MASK(STORE_RUNNING);
	w.req.u.transition.to = to;
	w.req.u.transition.event = event;
	w.req.u.transition.run_attempt = run_attempt;
	int rc = run_req(f, f->n[node].st, &w);
	store_req_finish(&w.req);
	return rc;
}

/* The end of a run of attempt 1 that reaches the store after the job was
 * recovered and this same node claimed it again (attempt 2) is a
 * conflict, not attempt 2's result: the audit saw attempt 1's output
 * stored as attempt 2's, after an outage longer than the lease. That
 * state is made here directly: the job, claimed by node-a, is moved to
 * attempt 2 under node-a's lease, as the recovery and the new claim leave
 * it. */
static void transition__a_runs_end_at_another_attempt__conflicts(void **state)
{
	struct fx *f = *state;
	char id[40], got[1][40], sql[160];
	assert_int_equal(create(f, 0, "echo", NULL, id), 0);
	assert_int_equal(claim(f, 0, 1, NULL, 0, got), 1);
	snprintf(sql, sizeof(sql), "UPDATE jobs SET attempt = 2 WHERE id = '%s'", id);
	pg_run(f->url, sql);
	assert_int_equal(move_run(f, 0, id, STORE_COMPLETED, STORE_EV_COMPLETED, 1),
			 STORE_ECONFLICT);
	struct store_job *j;
	assert_int_equal(store_get(f->n[0].st, id, &j), 0);
	assert_int_equal(j->status, STORE_RUNNING);
	assert_int_equal(j->attempt, 2);
	store_job_free(j);
	/* attempt 2's own end is stored */
	assert_int_equal(move_run(f, 0, id, STORE_COMPLETED, STORE_EV_COMPLETED, 2), 0);
	assert_int_equal(status_of(f, 0, id), STORE_COMPLETED);
}

/* A password given in the URL's query (password=, which libpq takes as
 * well as user:password@) is shown as *** like the other: server/info,
 * GET /api/info and the start-up log print store_path. The server trusts
 * the test's connections, so the passwords are not checked. */
static void open__a_password_anywhere_in_the_url__is_shown_as_stars(void **state)
{
	struct fx *f = *state;
	/* f->url is postgres://berth@HOST:PORT/DB */
	const char *at = strchr(f->url, '@');
	assert_non_null(at);
	const char *rest = at + 1; /* HOST:PORT/DB */
	char urls[5][600], want[5][600];
	snprintf(urls[0], 600, "postgres://berth:pw-one@%s?password=pw-two&application_name=t", rest);
	snprintf(want[0], 600, "postgres://berth:***@%s?password=***&application_name=t", rest);
	snprintf(urls[1], 600, "postgresql://%s?user=berth&password=se%%3Acr%%40t%%2Fx", rest);
	snprintf(want[1], 600, "postgresql://%s?user=berth&password=***", rest);
	snprintf(urls[2], 600, "postgres://berth:@%s?password=pw-three", rest);
	snprintf(want[2], 600, "postgres://berth:***@%s?password=***", rest);
	snprintf(urls[3], 600, "postgres://berth@%s?connect_timeout=5&pass%%77ord=pw-four&sslpassword=pw-five", rest);
	snprintf(want[3], 600, "postgres://berth@%s?connect_timeout=5&pass%%77ord=***&sslpassword=***", rest);
	snprintf(urls[4], 600, "postgres://berth@%s?application_name=no-secret", rest);
	snprintf(want[4], 600, "%s", urls[4]);
	for (int i = 0; i < 5; i++) {
		char name[16];
		snprintf(name, sizeof(name), "red-%d", i);
		struct store_config cfg = {.path = urls[i], .node = name};
		char *err = NULL;
		if (store_open(&f->loop, &cfg, &f->n[0].st, &err) != 0)
			fail_msg("store_open %s: %s", urls[i], err ? err : "?");
		f->nnodes = 1;
		f->n[0].closed = false;
		assert_string_equal(store_path(f->n[0].st), want[i]);
		node_close(f, 0);
	}
}

/* conninfo_value returns the value of option key that pg runs with
 * (malloc'd; "" when unset). */
static char *conninfo_value(PGconn *pg, const char *key)
{
	PQconninfoOption *opts = PQconninfo(pg);
	char *v = NULL;

	assert_non_null(opts);
	for (PQconninfoOption *o = opts; o->keyword; o++)
		if (strcmp(o->keyword, key) == 0)
			v = strdup(o->val ? o->val : "");
	PQconninfoFree(opts);
	assert_non_null(v);
	return v;
}

/* berthd's connections give up on a server that vanished from the
 * network (docs/POSTGRES.md): libpq's defaults wait without end, on the
 * loop thread. A URL's own settings take their place. */
static void connect__bounds_a_vanished_server__unless_the_url_says_otherwise(
	void **state)
{
	static const char *const want[][2] = {
		{"connect_timeout", "10"}, {"keepalives", "1"},
		{"keepalives_idle", "10"}, {"keepalives_interval", "5"},
		{"keepalives_count", "3"}, {"tcp_user_timeout", "20000"}};
	struct fx *f = *state;
	char url[700], *err = NULL, *v;
	PGconn *pg = NULL;

	assert_int_equal(store__pg_connect(f->url, &pg, &err), 0);
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		v = conninfo_value(pg, want[i][0]);
		assert_string_equal(v, want[i][1]);
		free(v);
	}
	PQfinish(pg);
	snprintf(url, sizeof url, "%s?tcp_user_timeout=5000&connect_timeout=3",
		 f->url);
	assert_int_equal(store__pg_connect(url, &pg, &err), 0);
	v = conninfo_value(pg, "tcp_user_timeout");
	assert_string_equal(v, "5000");
	free(v);
	v = conninfo_value(pg, "connect_timeout");
	assert_string_equal(v, "3");
	free(v);
	PQfinish(pg);
}

/* The lock on a node's name, held for a while by another connection as a
 * closed node's server process holds it until it has ended. */
struct held_lock {
	PGconn *pg;
	char key[32];
};

static void *release_later(void *arg)
{
	struct held_lock *h = arg;
	char sql[96];

	nanosleep(&(struct timespec){0, 500 * 1000 * 1000}, NULL);
	snprintf(sql, sizeof sql, "SELECT pg_advisory_unlock(%s)", h->key);
	PQclear(PQexec(h->pg, sql));
	return NULL;
}

/* A node started again at once under its name (a restart) waits for the
 * lock its last run held, which the server frees once that run's server
 * process has ended, instead of refusing to start as if another node of
 * the name were running. The lock is held here by another connection for
 * half a second after the node closed. */
static void node__started_again_at_once__waits_for_its_names_lock(void **state)
{
	struct fx *f = *state;
	struct held_lock h;
	pthread_t t;
	char sql[128];
	PGresult *r;

	/* The node's lock is the one advisory lock a node alone holds. */
	h.pg = PQconnectdb(f->url);
	assert_int_equal(PQstatus(h.pg), CONNECTION_OK);
	r = PQexec(h.pg, "SELECT (classid::bigint << 32) | objid::bigint "
			 "FROM pg_locks WHERE locktype = 'advisory' AND granted");
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	assert_int_equal(PQntuples(r), 1);
	snprintf(h.key, sizeof h.key, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	node_close(f, 0);
	snprintf(sql, sizeof sql, "SELECT pg_advisory_lock(%s)", h.key);
	r = PQexec(h.pg, sql);
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	PQclear(r);
	assert_int_equal(pthread_create(&t, NULL, release_later, &h), 0);
	node_open(f, 0, "node-a", 0);
	pthread_join(t, NULL);
	PQfinish(h.pg);
	/* And a node of the name that keeps running is still refused. */
	struct store_config cfg = {.path = f->url, .node = "node-a"};
	struct store *st = NULL;
	char *err = NULL;
	assert_int_equal(store_open(&f->loop, &cfg, &st, &err), -EBUSY);
	assert_non_null(strstr(err, "already running"));
	free(err);
}

/* store_copy moves a SQLite database with its seqs and payloads. */
static int setup_copy(void **state)
{
	return setup_named(state, "berth_t_copy", 0, 0);
}

static void copy__sqlite_database__arrives_whole(void **state)
{
	struct fx *f = *state;
	char dir[] = "/tmp/berth-copy-XXXXXX", path[128];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/berth.db", dir);
	struct store_config cfg = {.path = path};
	struct store *st;
	char *err = NULL;
	assert_int_equal(store_open(&f->loop, &cfg, &st, &err), 0);
	f->n[0].st = st;
	f->nnodes = 1;
	char a[40], b[40];
	assert_int_equal(create(f, 0, "echo", "key\t\\1", a), 0);
	assert_int_equal(create(f, 0, "echo", NULL, b), 0);
	assert_int_equal(claim(f, 0, 1, NULL, 0, NULL), 1);
	int64_t last = store_last_seq(st);
	node_close(f, 0);

	assert_int_equal(store_copy(path, f->url, &err), 0);
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM jobs"), 2);
	assert_int_equal(pg_int(f->url, "SELECT n FROM event_seq"), last);
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM jobs WHERE"
					" idempotency_key = E'key\\t\\\\1'"), 1);
	/* a second copy into a database in use is refused */
	assert_int_equal(store_copy(path, f->url, &err), -EEXIST);
	free(err);

	node_open(f, 0, "node-a", 0);
	struct store_job *j;
	assert_int_equal(store_get(f->n[0].st, a, &j), 0);
	assert_int_equal(json_integer_value(json_object_get(j->input, "n")), 1);
	store_job_free(j);
	assert_int_equal(store_last_seq(f->n[0].st), last);
	assert_int_equal(create(f, 0, "echo", NULL, NULL), 0);
	assert_int_equal(store_last_seq(f->n[0].st), last + 1);
	unlink(path);
	char lock[160];
	snprintf(lock, sizeof(lock), "%s.lock", path);
	unlink(lock);
	rmdir(dir);
}

/* proc records or forgets a process record on node. */
static int proc(struct fx *f, int node, int64_t pid, int64_t start, bool remove)
{
	struct waiter w = {.req = {.op = STORE_OP_PROC}};
	snprintf(w.req.u.proc.proc.job_id, 40, "job-of-%d", node);
	snprintf(w.req.u.proc.proc.boot_id, 40, "boot");
	w.req.u.proc.proc.pid = pid;
	w.req.u.proc.proc.start_min = start;
	w.req.u.proc.proc.start_max = start + 1;
	w.req.u.proc.remove = remove;
	return run_req(f, f->n[node].st, &w);
}

/* Each node reads and forgets only its own process records: a pid names a
 * process on one machine, and only the node that started it may kill it
 * after a restart (worker/orphans.c). */
static void procs__are_each_nodes_own(void **state)
{
	struct fx *f = *state;
	struct store_proc *v = NULL;
	size_t n = 0;

	assert_int_equal(proc(f, 0, 4242, 100, false), 0);
	assert_int_equal(proc(f, 1, 4242, 200, false), 0);
	assert_int_equal(proc(f, 1, 4343, 300, false), 0);
	/* The same pid again replaces the node's record. */
	assert_int_equal(proc(f, 0, 4242, 150, false), 0);
	assert_int_equal(store_procs(f->n[0].st, &v, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(v[0].pid, 4242);
	assert_int_equal(v[0].start_min, 150);
	assert_int_equal(v[0].start_max, 151);
	assert_string_equal(v[0].job_id, "job-of-0");
	assert_string_equal(v[0].boot_id, "boot");
	free(v);
	assert_int_equal(store_procs(f->n[1].st, &v, &n), 0);
	assert_int_equal(n, 2);
	free(v);
	/* Forgetting needs the start too: a record of the same pid started
	 * later is kept. */
	assert_int_equal(proc(f, 0, 4242, 100, true), 0);
	assert_int_equal(store_procs(f->n[0].st, &v, &n), 0);
	assert_int_equal(n, 1);
	free(v);
	assert_int_equal(proc(f, 0, 4242, 150, true), 0);
	assert_int_equal(store_procs(f->n[0].st, &v, &n), 0);
	assert_int_equal(n, 0);
	free(v);
	assert_int_equal(store_procs(f->n[1].st, &v, &n), 0);
	assert_int_equal(n, 2);
	free(v);
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM procs"), 2);
}

/* ---- the writer's pipeline ------------------------------------------- */

static void submit_async(struct store *st, struct waiter *w)
{
	w->req.done = req_done;
	w->done = false;
	assert_int_equal(store_submit(st, &w->req), 0);
}

static void wait_for(struct fx *f, struct waiter *w)
{
	while (!w->done)
		uv_run(&f->loop, UV_RUN_ONCE);
}

/* create_held creates n pending "echo" jobs j[0..n) with input (borrowed,
 * NULL for none), sent while node 0's store holds them so that they go in
 * one batch, and waits for each to succeed. The caller finishes each
 * w[i].req. */
/* hold_creates holds node 0's writer and submits the creations of jobs
 * j[0..n) (pending; their tools, keys and ids as the caller set them)
 * into w; the caller submits what else the batch holds and releases. */
static void hold_creates(struct fx *f, struct store_job *j, struct waiter *w,
			 int n)
{
	memset(w, 0, (size_t)n * sizeof(*w));
	store_hold(f->n[0].st);
	for (int i = 0; i < n; i++) {
		j[i].status = STORE_PENDING;
		w[i].req.op = STORE_OP_CREATE;
		w[i].req.u.create.job = &j[i];
		submit_async(f->n[0].st, &w[i]);
	}
}

static void create_held(struct fx *f, struct store_job *j, struct waiter *w,
			int n, json_t *input)
{
	memset(j, 0, (size_t)n * sizeof(*j));
	for (int i = 0; i < n; i++) {
		j[i].tool = "echo";
		j[i].input = input;
	}
	hold_creates(f, j, w, n);
	store_release(f->n[0].st);
	for (int i = 0; i < n; i++) {
		wait_for(f, &w[i]);
		assert_int_equal(w[i].rc, 0);
	}
}

/* pg_text reads the first value of sql as text ("" for NULL), into out. */
static void pg_text(const char *url, const char *sql, char *out, size_t len)
{
	PGconn *pg = PQconnectdb(url);
	assert_int_equal(PQstatus(pg), CONNECTION_OK);
	PGresult *r = PQexec(pg, sql);
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	assert_int_equal(PQntuples(r), 1);
	snprintf(out, len, "%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	PQfinish(pg);
}

/* A job created started (what the worker does for a nonblocking tool),
 * and the transition that ends its run, sent while the store holds them
 * (store_hold), as the worker's submit_and_run sends them. */
struct pair {
	struct store_job job;
	json_t *output;
	struct waiter create, end;
};

static void pair_submit(struct fx *f, int node, struct pair *p, const char *tool)
{
	memset(p, 0, sizeof(*p));
	store_uuid7(p->job.id); /* the run needs the id before the commit */
	p->job.tool = (char *)tool;
	p->job.status = STORE_PENDING;
	p->job.input = json_pack("{s:i}", "n", 1);
	p->output = json_pack("{s:b}", "ok", 1);
	p->create.req.op = STORE_OP_CREATE;
	p->create.req.u.create.job = &p->job;
	p->create.req.u.create.event_data = p->job.input;
	p->create.req.u.create.start = true;
	struct store_transition *t = &p->end.req.u.transition;
	p->end.req.op = STORE_OP_TRANSITION;
	snprintf(t->job_id, sizeof(t->job_id), "%s", p->job.id);
	t->from_mask = STORE_MASK(STORE_RUNNING);
	t->to = STORE_COMPLETED;
	t->event = STORE_EV_COMPLETED;
	t->set = STORE_SET_OUTPUT;
	t->output = p->output;
	t->event_data = p->output;
	store_hold(f->n[node].st);
	submit_async(f->n[node].st, &p->create);
	submit_async(f->n[node].st, &p->end);
	store_release(f->n[node].st);
	wait_for(f, &p->create);
	wait_for(f, &p->end);
}

static void pair_finish(struct pair *p)
{
	store_req_finish(&p->create.req);
	store_req_finish(&p->end.req);
	json_decref(p->job.input);
	json_decref(p->output);
}

/* A creation that starts its job, alone, is written running under this
 * node's lease, with created and started events: another node cannot end
 * its run, this one can. */
static void create_start__on_postgres__runs_under_this_nodes_lease(void **state)
{
	struct fx *f = *state;
	struct store_job j = {0};
	j.tool = "echo";
	j.status = STORE_PENDING;
	struct waiter w = {.req = {.op = STORE_OP_CREATE}};
	w.req.u.create.job = &j;
	w.req.u.create.start = true;
	assert_int_equal(run_req(f, f->n[0].st, &w), 0);
	char id[40];
	snprintf(id, sizeof(id), "%s", w.req.job->id);
	assert_int_equal(w.req.job->status, STORE_PENDING); /* as submitted */
	store_req_finish(&w.req);

	char sql[256];
	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM jobs WHERE id = '%s' AND status = 2"
		 " AND lease_owner = 'node-a' AND lease_until > started_at"
		 " AND started_at = created_at",
		 id);
	assert_int_equal(pg_int(f->url, sql), 1);
	struct store_event *ev;
	size_t n;
	assert_int_equal(store_events(f->n[0].st, 0, id, 10, &ev, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(ev[0].type, STORE_EV_CREATED);
	assert_int_equal(ev[0].status, STORE_PENDING);
	assert_int_equal(ev[1].type, STORE_EV_STARTED);
	assert_int_equal(ev[1].status, STORE_RUNNING);
	for (size_t i = 0; i < n; i++)
		store_event_finish(&ev[i]);
	free(ev);
	assert_int_equal(move(f, 1, id, STORE_MASK(STORE_RUNNING), STORE_COMPLETED,
			      STORE_EV_COMPLETED), STORE_ECONFLICT);
	assert_int_equal(move(f, 0, id, STORE_MASK(STORE_RUNNING), STORE_COMPLETED,
			      STORE_EV_COMPLETED), 0);
}

/* A held creation that starts its job and the end of its run land in one
 * transaction, and the job's row is written once, in its final state:
 * no UPDATE of it, no lease left, its three events in order. */
static void held_pair__on_postgres__is_written_once_in_its_final_state(void **state)
{
	struct fx *f = *state;
	pg_run(f->url, "CREATE TABLE updates (id text);"
		       " CREATE FUNCTION count_update() RETURNS trigger"
		       " LANGUAGE plpgsql AS $$BEGIN INSERT INTO updates"
		       " VALUES (NEW.id); RETURN NEW; END$$;"
		       " CREATE TRIGGER count_updates AFTER UPDATE ON jobs"
		       " FOR EACH ROW EXECUTE FUNCTION count_update()");
	struct pair p;
	pair_submit(f, 0, &p, "echo");
	assert_int_equal(p.create.rc, 0);
	assert_int_equal(p.end.rc, 0);
	assert_int_equal(p.end.req.job->status, STORE_COMPLETED);
	assert_true(json_equal(p.end.req.job->output, p.output));

	char sql[256], text[256];
	snprintf(sql, sizeof(sql),
		 "SELECT concat_ws(',', status, output, lease_owner IS NULL,"
		 " lease_until IS NULL, started_at IS NOT NULL,"
		 " finished_at IS NOT NULL) FROM jobs WHERE id = '%s'",
		 p.job.id);
	pg_text(f->url, sql, text, sizeof(text));
	assert_string_equal(text, "4,{\"ok\":true},t,t,t,t");
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM updates"), 0);
	struct store_event *ev;
	size_t n;
	assert_int_equal(store_events(f->n[0].st, 0, p.job.id, 10, &ev, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(ev[0].type, STORE_EV_CREATED);
	assert_int_equal(ev[1].type, STORE_EV_STARTED);
	assert_int_equal(ev[2].type, STORE_EV_COMPLETED);
	assert_int_equal(ev[1].seq, ev[0].seq + 1);
	assert_int_equal(ev[2].seq, ev[1].seq + 1);
	assert_true(json_equal(ev[2].data, p.output));
	for (size_t i = 0; i < n; i++)
		store_event_finish(&ev[i]);
	free(ev);
	pair_finish(&p);
}

/* A node that saw a tool unpaused may start its job at submission while
 * another node pauses it: the store checks the pause when the creation
 * commits and writes the job as submitted, pending, and the run's end
 * meets it there. Nothing of the run is kept. */
static void held_pair__tool_paused_by_another_node__writes_the_job_pending(void **state)
{
	struct fx *f = *state;
	struct waiter pause = {.req = {.op = STORE_OP_TOOL_PAUSE}};
	pause.req.u.pause.tool = "echo";
	pause.req.u.pause.paused = true;
	assert_int_equal(run_req(f, f->n[1].st, &pause), 0);

	struct pair p;
	pair_submit(f, 0, &p, "echo");
	assert_int_equal(p.create.rc, 0);
	assert_int_equal(p.create.req.job->status, STORE_PENDING);
	assert_int_equal(p.end.rc, STORE_ECONFLICT);
	assert_non_null(p.end.req.job);
	assert_int_equal(p.end.req.job->status, STORE_PENDING);

	char sql[256], text[256];
	snprintf(sql, sizeof(sql),
		 "SELECT concat_ws(',', status, output IS NULL, started_at IS NULL,"
		 " lease_owner IS NULL) FROM jobs WHERE id = '%s'",
		 p.job.id);
	pg_text(f->url, sql, text, sizeof(text));
	assert_string_equal(text, "0,t,t,t");
	struct store_event *ev;
	size_t n;
	assert_int_equal(store_events(f->n[0].st, 0, p.job.id, 10, &ev, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ev[0].type, STORE_EV_CREATED);
	assert_int_equal(ev[0].status, STORE_PENDING);
	store_event_finish(&ev[0]);
	free(ev);
	pair_finish(&p);
}

/* A statement that fails in the middle of a pipelined batch fails the
 * batch (nothing of it is written, no seq taken), and the connection
 * goes on: the next batches, with and without a key, are written. */
static void batch__a_statement_that_fails__fails_its_batch_and_the_next_run(void **state)
{
	struct fx *f = *state;
	pg_run(f->url, "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql"
		       " AS $$BEGIN IF NEW.tool = 'boom' THEN RAISE EXCEPTION"
		       " 'boom'; END IF; RETURN NEW; END$$;"
		       " CREATE TRIGGER boom BEFORE INSERT ON jobs"
		       " FOR EACH ROW EXECUTE FUNCTION boom()");
	char a[40];
	assert_int_equal(create(f, 0, "echo", NULL, a), 0);
	int64_t seq = store_last_seq(f->n[0].st);

	struct store_job j[3];
	struct waiter w[3];
	memset(j, 0, sizeof(j));
	const char *tools[3] = {"echo", "boom", "echo"};
	const char *keys[3] = {NULL, NULL, "k"};
	for (int i = 0; i < 3; i++) {
		j[i].tool = (char *)tools[i];
		j[i].idempotency_key = (char *)keys[i];
	}
	hold_creates(f, j, w, 3);
	struct waiter t = {.req = {.op = STORE_OP_TRANSITION}};
	snprintf(t.req.u.transition.job_id, 40, "%s", a);
	t.req.u.transition.from_mask = STORE_MASK(STORE_PENDING);
	t.req.u.transition.to = STORE_CANCELLED;
	t.req.u.transition.event = STORE_EV_CANCELLED;
	submit_async(f->n[0].st, &t);
	store_release(f->n[0].st);
	for (int i = 0; i < 3; i++) {
		wait_for(f, &w[i]);
		assert_true(w[i].rc < 0);
		assert_int_not_equal(w[i].rc, STORE_ECONFLICT);
		store_req_finish(&w[i].req);
	}
	wait_for(f, &t);
	assert_true(t.rc < 0);
	store_req_finish(&t.req);
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM jobs"), 1);
	assert_int_equal(status_of(f, 0, a), STORE_PENDING);
	assert_int_equal(store_last_seq(f->n[0].st), seq);

	char b[40], c[40];
	assert_int_equal(create(f, 0, "echo", NULL, b), 0);
	assert_int_equal(create(f, 0, "echo", "k", c), 0);
	assert_int_equal(move(f, 0, a, STORE_MASK(STORE_PENDING), STORE_CANCELLED,
			      STORE_EV_CANCELLED), 0);
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM jobs"), 3);
	assert_int_equal(store_last_seq(f->n[0].st), seq + 3);
}

/* Creations held in one batch go out with their events and the COMMIT in
 * one round trip, an insert that writes every row or fails (pg.c,
 * commit_at_once). One whose id is taken fails it, and the batch is tried
 * again settling each creation on its own: the others are written, the
 * taken one answers -EEXIST, and the seqs go on without a gap. */
static void batch__a_taken_id_among_held_creations__fails_only_its_own(void **state)
{
	struct fx *f = *state;
	char a[40];
	assert_int_equal(create(f, 0, "echo", NULL, a), 0);
	int64_t seq = store_last_seq(f->n[0].st);

	struct store_job j[3];
	struct waiter w[3];
	memset(j, 0, sizeof(j));
	for (int i = 0; i < 3; i++)
		j[i].tool = "echo";
	snprintf(j[1].id, sizeof(j[1].id), "%s", a);
	hold_creates(f, j, w, 3);
	store_release(f->n[0].st);
	for (int i = 0; i < 3; i++)
		wait_for(f, &w[i]);
	assert_int_equal(w[0].rc, 0);
	assert_int_equal(w[1].rc, -EEXIST);
	assert_int_equal(w[2].rc, 0);
	for (int i = 0; i < 3; i++)
		store_req_finish(&w[i].req);
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM jobs"), 3);
	assert_int_equal(store_last_seq(f->n[0].st), seq + 2);
	assert_int_equal(status_of(f, 0, j[0].id), STORE_PENDING);
	assert_int_equal(status_of(f, 0, j[2].id), STORE_PENDING);
}

/* Batches that send and receive megabytes at once (64 inputs of 256 KiB
 * in, the same jobs claimed back whole, 64 outputs of 256 KiB in while
 * the rows come back with both) go through: the writer reads the server's
 * answers while it waits to send, so neither side waits forever on the
 * other's full socket. */
static void batch__megabytes_each_way__keep_the_pipeline_moving(void **state)
{
	struct fx *f = *state;
	enum { N = 64, SIZE = 256 * 1024 };
	char *big = malloc(SIZE + 1);
	assert_non_null(big);
	memset(big, 'x', SIZE);
	big[SIZE] = '\0';
	json_t *payload = json_pack("{s:s}", "blob", big);
	free(big);
	struct store_job *j = calloc(N, sizeof(*j));
	struct waiter *w = calloc(N, sizeof(*w));
	assert_non_null(j);
	assert_non_null(w);

	create_held(f, j, w, N, payload);
	for (int i = 0; i < N; i++)
		store_req_finish(&w[i].req);

	struct waiter c = {.req = {.op = STORE_OP_CLAIM}};
	c.req.u.claim.limit = N;
	assert_int_equal(run_req(f, f->n[0].st, &c), 0);
	assert_int_equal(c.req.njobs, N);
	for (int i = 0; i < N; i++)
		assert_true(json_equal(c.req.jobs[i]->input, payload));

	store_hold(f->n[0].st);
	for (int i = 0; i < N; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		struct store_transition *t = &w[i].req.u.transition;
		w[i].req.op = STORE_OP_TRANSITION;
		snprintf(t->job_id, 40, "%s", c.req.jobs[i]->id);
		t->from_mask = STORE_MASK(STORE_RUNNING);
		t->to = STORE_COMPLETED;
		t->event = STORE_EV_COMPLETED;
		t->set = STORE_SET_OUTPUT;
		t->output = payload;
		submit_async(f->n[0].st, &w[i]);
	}
	store_release(f->n[0].st);
	for (int i = 0; i < N; i++) {
		wait_for(f, &w[i]);
		assert_int_equal(w[i].rc, 0);
		assert_true(json_equal(w[i].req.job->output, payload));
		store_req_finish(&w[i].req);
	}
	store_req_finish(&c.req);
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM jobs WHERE status = 4"),
			 N);
	json_decref(payload);
	free(j);
	free(w);
}

/* hello says, on pg, a connection that LISTENs on berth_events, the hello
 * another node says (store/pg.c, peers_seen), and runs f's loop until
 * node 0 has heard it: a node notifies only while it hears other nodes.
 * Node 0 answers a first hello with its own; a later one, within the time
 * a node counts as there, it only notes. */
static void hello(struct fx *f, PGconn *pg, bool first)
{
	PGresult *r = PQexec(pg, "NOTIFY berth_events, 'hello'");
	assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	bool answered = false;
	for (int round = 0; round < 3000 && !answered; round++) {
		uv_run(&f->loop, UV_RUN_NOWAIT);
		assert_int_equal(PQconsumeInput(pg), 1);
		PGnotify *note;
		while ((note = PQnotifies(pg)) != NULL) {
			answered = answered || (note->be_pid != PQbackendPID(pg) &&
						strcmp(note->extra, "hello") == 0);
			PQfreemem(note);
		}
		if (!first)
			break;
		if (!answered)
			usleep(10 * 1000);
	}
	assert_true(answered || !first);
	for (int i = 0; i < 20; i++)
		uv_run(&f->loop, UV_RUN_NOWAIT);
}

/* notes_after collects on pg, a connection that LISTENs on berth_events,
 * the notifications of the commits done by now (not the nodes' hellos):
 * it waits up to 30 s for the first (a loaded machine), then asks twice
 * more, so that one that came later is counted too. Returns how many; the
 * last payload in last. */
static int notes_after(PGconn *pg, char *last, size_t len)
{
	int n = 0;
	for (int round = 0; round < 3000 && (n == 0 || round < 3); round++) {
		PGresult *r = PQexec(pg, "SELECT 1");
		assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
		PQclear(r);
		assert_int_equal(PQconsumeInput(pg), 1);
		PGnotify *note;
		while ((note = PQnotifies(pg)) != NULL) {
			if (strcmp(note->extra, "hello") != 0) {
				snprintf(last, len, "%s", note->extra);
				n++;
			}
			PQfreemem(note);
		}
		if (n == 0)
			usleep(10 * 1000);
	}
	return n;
}

/* A node that hears no other node notifies no one: its own listener was
 * the only one to hear it, and skipped it (7 % of the server's CPU on one
 * node, docs/POSTGRES.md). Once another node says hello, it notifies with
 * its next commit. */
static void notifications__go_out_only_while_another_node_is_heard(void **state)
{
	struct fx *f = *state;
	PGconn *pg = PQconnectdb(f->url);
	assert_int_equal(PQstatus(pg), CONNECTION_OK);
	PGresult *r = PQexec(pg, "LISTEN berth_events");
	assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	struct store_job j[3];
	struct waiter w[3];

	create_held(f, j, w, 3, NULL);
	for (int i = 0; i < 3; i++)
		store_req_finish(&w[i].req);
	int notes = 0;
	for (int round = 0; round < 100; round++) {
		r = PQexec(pg, "SELECT 1");
		PQclear(r);
		assert_int_equal(PQconsumeInput(pg), 1);
		PGnotify *note;
		while ((note = PQnotifies(pg)) != NULL) {
			notes += strcmp(note->extra, "hello") != 0;
			PQfreemem(note);
		}
		usleep(10 * 1000);
	}
	assert_int_equal(notes, 0);

	hello(f, pg, true);
	int64_t seq = store_last_seq(f->n[0].st);
	create_held(f, j, w, 3, NULL);
	for (int i = 0; i < 3; i++)
		store_req_finish(&w[i].req);
	char last[32] = "";
	assert_int_equal(notes_after(pg, last, sizeof(last)), 1);
	assert_int_equal(strtoll(last, NULL, 10), seq + 3);
	PQfinish(pg);
}

/* A batch's creations, of any count, go in as INSERTs of up to 16 jobs
 * and one of up to 64 events, the rows short of a statement's size padded
 * and skipped: each job is stored once with its event, the seqs stay
 * dense, and the other nodes hear of the batch by one notification (the
 * events' statement sends it), whose payload is the batch's last seq.
 * Before, 5 creations were an INSERT of 4 and one of 1, and 13 three of
 * each kind, each events' statement with its own notification. */
static void batch__creations_of_any_count__are_stored_once_and_heard_by_one_notification(void **state)
{
	struct fx *f = *state;
	static const int counts[] = {1, 2, 3, 5, 7, 13, 16, 17, 40};
	enum { MAX = 40 };
	PGconn *pg = PQconnectdb(f->url);
	assert_int_equal(PQstatus(pg), CONNECTION_OK);
	PGresult *r = PQexec(pg, "LISTEN berth_events");
	assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);

	struct store_job j[MAX];
	struct waiter w[MAX];
	int64_t total = 0;
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		int n = counts[c];
		hello(f, pg, c == 0);
		int64_t seq = store_last_seq(f->n[0].st);
		create_held(f, j, w, n, NULL);
		for (int i = 0; i < n; i++) {
			assert_int_equal(status_of(f, 0, w[i].req.job->id), STORE_PENDING);
			store_req_finish(&w[i].req);
		}
		total += n;
		assert_int_equal(store_last_seq(f->n[0].st), seq + n);

		char last[32] = "";
		int notes = notes_after(pg, last, sizeof(last));
		if (notes != 1)
			fail_msg("a batch of %d creations sent %d notifications", n, notes);
		assert_int_equal(strtoll(last, NULL, 10), seq + n);
	}
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM jobs"), total);
	/* Every job has its one created event, and no seq is missing. */
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM jobs WHERE (SELECT"
				       " count(*) FROM events e WHERE e.job_id = jobs.id"
				       " AND e.type = 0) = 1"), total);
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM events"), total);
	assert_int_equal(pg_int(f->url, "SELECT max(seq) - min(seq) + 1 FROM events"),
			 total);
	PQfinish(pg);
}

/* A claim that counts no tool's jobs is one statement: it takes the
 * runnable jobs by priority, then run_at, then id, never more than its
 * limit, and leaves out the tools its caps exclude. */
static void claim__in_one_statement__takes_jobs_in_order_up_to_its_limit(void **state)
{
	struct fx *f = *state;
	static const struct {
		const char *tool;
		int priority;
	} jobs[] = {
		{"echo", 0}, {"echo", 5}, {"other", 9}, {"echo", 5}, {"echo", 1},
	};
	char ids[5][40];
	for (int i = 0; i < 5; i++) {
		struct store_job j = {0};
		j.tool = (char *)jobs[i].tool;
		j.status = STORE_PENDING;
		j.priority = jobs[i].priority;
		struct waiter w = {.req = {.op = STORE_OP_CREATE}};
		w.req.u.create.job = &j;
		assert_int_equal(run_req(f, f->n[0].st, &w), 0);
		snprintf(ids[i], 40, "%s", w.req.job->id);
		store_req_finish(&w.req);
	}
	struct store_cap cap = {.tool = "other"};
	char got[5][40];
	assert_int_equal(claim(f, 0, 3, &cap, 1, got), 3);
	assert_string_equal(got[0], ids[1]);
	assert_string_equal(got[1], ids[3]);
	assert_string_equal(got[2], ids[4]);
	assert_int_equal(claim(f, 1, 5, &cap, 1, got), 1);
	assert_string_equal(got[0], ids[0]);
	assert_int_equal(claim(f, 2, 5, NULL, 0, got), 1);
	assert_string_equal(got[0], ids[2]);
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM jobs WHERE status = 2"),
			 5);
}

/* Caps marked pool share the claim's pool on PostgreSQL as on SQLite:
 * at most pool_remaining jobs of those tools; a spent pool excludes them,
 * and the claim that excludes them only is one statement again. */
static void claim__pooled_caps_share_what_is_left_of_the_pool(void **state)
{
	struct fx *f = *state;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(create(f, 0, "a", NULL, NULL), 0);
		assert_int_equal(create(f, 0, "b", NULL, NULL), 0);
		assert_int_equal(create(f, 0, "c", NULL, NULL), 0);
	}
	const struct store_cap caps[] = {{"a", 3, 0, true}, {"b", 3, 0, true}};
	struct waiter w = {.req = {.op = STORE_OP_CLAIM}};
	w.req.u.claim.limit = 9;
	w.req.u.claim.caps = caps;
	w.req.u.claim.ncaps = 2;
	w.req.u.claim.pool_remaining = 2;
	assert_int_equal(run_req(f, f->n[0].st, &w), 0);
	assert_int_equal(w.req.njobs, 5);
	store_req_finish(&w.req);
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM jobs WHERE status = 2"
				       " AND tool IN ('a', 'b')"), 2);
	memset(&w, 0, sizeof(w));
	w.req.op = STORE_OP_CLAIM;
	w.req.u.claim.limit = 9;
	w.req.u.claim.caps = caps;
	w.req.u.claim.ncaps = 2;
	assert_int_equal(run_req(f, f->n[0].st, &w), 0);
	assert_int_equal(w.req.njobs, 0);
	store_req_finish(&w.req);
}

/* The pool and the groups meet in one claim on PostgreSQL as on SQLite:
 * the pool narrows the pooled caps inside the limit's room, the group
 * keeps its own; with the limit and the pool spent the group still
 * claims (not the one-statement claim: a group's cap counts). */
static void claim__the_pool_narrows_the_limits_room_and_leaves_the_groups_theirs(void **state)
{
	struct fx *f = *state;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(create(f, 0, "cpu", NULL, NULL), 0);
		assert_int_equal(create(f, 0, "wait", NULL, NULL), 0);
		assert_int_equal(create(f, 0, "w1", NULL, NULL), 0);
	}
	const struct store_cap caps[] = {
		{.tool = "cpu", .remaining = 5, .pool = true},
		{.tool = "w1", .remaining = 5, .group = 1},
	};
	const int groups[] = {2};
	struct waiter w = {.req = {.op = STORE_OP_CLAIM}};
	w.req.u.claim.limit = 3;
	w.req.u.claim.caps = caps;
	w.req.u.claim.ncaps = 2;
	w.req.u.claim.groups = groups;
	w.req.u.claim.ngroups = 1;
	w.req.u.claim.pool_remaining = 1;
	assert_int_equal(run_req(f, f->n[0].st, &w), 0);
	assert_int_equal(w.req.njobs, 5);
	store_req_finish(&w.req);
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM jobs WHERE status = 2"
				       " AND tool = 'cpu'"), 1);
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM jobs WHERE status = 2"
				       " AND tool = 'wait'"), 2);
	assert_int_equal(pg_int(f->url, "SELECT count(*) FROM jobs WHERE status = 2"
				       " AND tool = 'w1'"), 2);
	memset(&w, 0, sizeof(w));
	w.req.op = STORE_OP_CLAIM;
	w.req.u.claim.limit = 0;
	w.req.u.claim.caps = caps;
	w.req.u.claim.ncaps = 2;
	w.req.u.claim.groups = groups;
	w.req.u.claim.ngroups = 1;
	w.req.u.claim.pool_remaining = 0;
	assert_int_equal(run_req(f, f->n[0].st, &w), 0);
	assert_int_equal(w.req.njobs, 1);
	assert_string_equal(w.req.jobs[0]->tool, "w1");
	store_req_finish(&w.req);
}

int main(void)
{
	if (base_url() == NULL) {
		fprintf(stderr, "test_pg_store: BERTH_TEST_DB is not set; run it through tests/pg/run.sh\n");
		return 77;
	}
	if (getenv("BERTH_TEST_FILTER"))
		cmocka_set_test_filter(getenv("BERTH_TEST_FILTER"));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(lifecycle__on_postgres__matches_the_store_contract,
						setup_one, teardown),
		cmocka_unit_test_setup_teardown(list__by_id_prefix__reads_the_range_of_ids_that_begin_so,
						setup_one, teardown),
		cmocka_unit_test_setup_teardown(events_typed__on_postgres__returns_only_those_types_and_next_passes_the_rest,
						setup_one, teardown),
		cmocka_unit_test_setup_teardown(approvals__on_postgres__are_written_over_the_list_they_were_judged_on,
						setup_one, teardown),
		cmocka_unit_test_setup_teardown(create__awaiting_approval__approval_requested_carries_its_own_data,
						setup_one, teardown),
		cmocka_unit_test_setup_teardown(open__newer_schema__is_refused, setup_one,
						teardown),
		cmocka_unit_test_setup_teardown(open__same_node_name_twice__is_refused,
						setup_one, teardown),
		cmocka_unit_test_setup_teardown(events__from_other_nodes__reach_every_listener_in_order,
						setup_three, teardown),
		cmocka_unit_test_setup_teardown(events__concurrent_commits__no_seq_is_skipped,
						setup_three, teardown),
		cmocka_unit_test_setup_teardown(claim__cluster_limit__holds_across_nodes,
						setup_three, teardown),
		cmocka_unit_test_setup_teardown(claim__groups_have_room_of_their_own,
						setup_three, teardown),
		cmocka_unit_test_setup_teardown(claim__the_pool_narrows_the_limits_room_and_leaves_the_groups_theirs,
						setup_three, teardown),
		cmocka_unit_test_setup_teardown(claim__reports_the_next_run_at_of_a_tool_it_did_not_exclude,
						setup_three, teardown),
		cmocka_unit_test_setup_teardown(transition__from_running_without_the_lease__conflicts,
						setup_three, teardown),
		cmocka_unit_test_setup_teardown(lease__expired__jobs_are_recovered_by_other_nodes,
						setup_lease, teardown),
		cmocka_unit_test_setup_teardown(lease__expired__a_tool_the_node_lacks__is_left_to_a_node_that_has_it,
						setup_known, teardown),
		cmocka_unit_test_setup_teardown(transition__a_runs_end_at_another_attempt__conflicts,
						setup_one, teardown),
		cmocka_unit_test_setup_teardown(connect__bounds_a_vanished_server__unless_the_url_says_otherwise,
						setup_one, teardown),
		cmocka_unit_test_setup_teardown(open__a_password_anywhere_in_the_url__is_shown_as_stars,
						setup_copy, teardown),
		cmocka_unit_test_setup_teardown(lease__short__is_renewed_at_every_tick,
						setup_short_lease, teardown),
		cmocka_unit_test_setup_teardown(node__started_again_at_once__waits_for_its_names_lock,
						setup_one, teardown),
		cmocka_unit_test_setup_teardown(copy__sqlite_database__arrives_whole, setup_copy,
						teardown),
		cmocka_unit_test_setup_teardown(procs__are_each_nodes_own, setup_three,
						teardown),
		cmocka_unit_test_setup_teardown(create_start__on_postgres__runs_under_this_nodes_lease,
						setup_three, teardown),
		cmocka_unit_test_setup_teardown(held_pair__on_postgres__is_written_once_in_its_final_state,
						setup_one, teardown),
		cmocka_unit_test_setup_teardown(held_pair__tool_paused_by_another_node__writes_the_job_pending,
						setup_three, teardown),
		cmocka_unit_test_setup_teardown(batch__a_statement_that_fails__fails_its_batch_and_the_next_run,
						setup_one, teardown),
		cmocka_unit_test_setup_teardown(batch__megabytes_each_way__keep_the_pipeline_moving,
						setup_one, teardown),
		cmocka_unit_test_setup_teardown(batch__a_taken_id_among_held_creations__fails_only_its_own,
						setup_one, teardown),
		cmocka_unit_test_setup_teardown(list_count_and_prune__without_indexes_of_completed_jobs,
						setup_one, teardown),
		cmocka_unit_test_setup_teardown(schema__refuses_statuses_and_types_out_of_range,
						setup_one, teardown),
		cmocka_unit_test_setup_teardown(batch__creations_of_any_count__are_stored_once_and_heard_by_one_notification,
						setup_one, teardown),
		cmocka_unit_test_setup_teardown(notifications__go_out_only_while_another_node_is_heard,
						setup_one, teardown),
		cmocka_unit_test_setup_teardown(claim__in_one_statement__takes_jobs_in_order_up_to_its_limit,
						setup_three, teardown),
		cmocka_unit_test_setup_teardown(claim__pooled_caps_share_what_is_left_of_the_pool,
						setup_one, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

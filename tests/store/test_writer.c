/*
 * test_writer.c: the group-commit writer: many requests in flight, a
 * logical failure inside a batch, a full disk, a crash in the middle of
 * committing, closing with requests queued, and the WAL's checkpoints.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store/store_int.h"
#include "tests/harness/child.h"
#include "tests/store/fixture.h"

struct many {
	struct fx *f;
	int dones;
	int failures;
	int listened;
	int max_events_between_dones; /* > 1 shows requests shared a commit */
	int run;                      /* events heard since the last done */
	int *calls;                   /* per request */
};

struct op {
	struct store_req req;
	struct store_job job;
	struct many *m;
	int index;
};

static void many_hear(void *arg, const struct store_event *ev)
{
	struct many *m = arg;
	m->listened++;
	m->run++;
}

static void many_done(struct store_req *req, int rc)
{
	struct op *op = req->data;
	struct many *m = op->m;
	m->calls[op->index]++;
	if (m->run > m->max_events_between_dones)
		m->max_events_between_dones = m->run;
	m->run = 0;
	m->dones++;
	if (rc != 0) {
		m->failures++;
		return;
	}
	/* Committed before done: the read connection already sees it. */
	struct store_job *j;
	assert_int_equal(store_get(m->f->st, req->job->id, &j), 0);
	assert_int_equal(j->status, STORE_PENDING);
	store_job_free(j);
}

static void group_commit__many_concurrent_requests__each_done_runs_once_after_commit(void **state)
{
	struct fx *f = *state;
	enum { N = 3000 };
	struct many m = {.f = f, .calls = calloc(N, sizeof(int))};
	struct op *ops = calloc(N, sizeof(*ops));
	json_t *input = json_pack("{s:s}", "q", "x");
	assert_int_equal(store_add_listener(f->st, many_hear, &m), 0);
	for (int i = 0; i < N; i++) {
		ops[i].m = &m;
		ops[i].index = i;
		ops[i].job.tool = i % 2 ? "a" : "b";
		ops[i].job.status = STORE_PENDING;
		ops[i].job.input = input;
		ops[i].req.op = STORE_OP_CREATE;
		ops[i].req.u.create.job = &ops[i].job;
		ops[i].req.data = &ops[i];
		ops[i].req.done = many_done;
		assert_int_equal(store_submit(f->st, &ops[i].req), 0);
	}
	while (m.dones < N)
		uv_run(&f->loop, UV_RUN_ONCE);
	for (int i = 0; i < N; i++) {
		assert_int_equal(m.calls[i], 1);
		store_req_finish(&ops[i].req);
	}
	assert_int_equal(m.failures, 0);
	assert_int_equal(m.listened, N);
	assert_true(m.max_events_between_dones > 1);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM jobs"), N);
	assert_int_equal(store_last_seq(f->st), N);
	store_remove_listener(f->st, many_hear, &m);
	json_decref(input);
	free(ops);
	free(m.calls);
}

static void group_commit__a_conflict_in_a_batch__does_not_fail_the_others(void **state)
{
	struct fx *f = *state;
	enum { N = 200 };
	struct many m = {.f = f, .calls = calloc(N + 2, sizeof(int))};
	struct op *ops = calloc(N + 2, sizeof(*ops));
	char running[40];
	assert_int_equal(fx_create(f, "t", STORE_PENDING, NULL, 1, running), 0);
	for (int i = 0; i < N + 2; i++) {
		ops[i].m = &m;
		ops[i].index = i;
		ops[i].req.data = &ops[i];
		ops[i].req.done = many_done;
		if (i == N / 2 || i == N + 1) {
			/* A stale transition and one of a missing job. */
			ops[i].req.op = STORE_OP_TRANSITION;
			struct store_transition *t = &ops[i].req.u.transition;
			snprintf(t->job_id, 40, "%s", i == N + 1 ? "missing" : running);
			t->from_mask = STORE_MASK(STORE_SUSPENDED);
			t->to = STORE_PENDING;
			t->event = STORE_EV_RESUMED;
			ops[i].req.done = many_done;
		} else {
			ops[i].job.tool = "t";
			ops[i].job.status = STORE_PENDING;
			ops[i].req.op = STORE_OP_CREATE;
			ops[i].req.u.create.job = &ops[i].job;
		}
		assert_int_equal(store_submit(f->st, &ops[i].req), 0);
	}
	while (m.dones < N + 2)
		uv_run(&f->loop, UV_RUN_ONCE);
	assert_int_equal(m.failures, 2);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM jobs"), N + 1);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM events"), N + 1);
	for (int i = 0; i < N + 2; i++)
		store_req_finish(&ops[i].req);
	free(ops);
	free(m.calls);
}

struct full {
	int ok, nospc, other, dones;
};

struct fop {
	struct store_req req;
	struct store_job job;
	struct full *r;
};

static void full_done(struct store_req *req, int rc)
{
	struct fop *op = req->data;
	op->r->dones++;
	if (rc == 0)
		op->r->ok++;
	else if (rc == -ENOSPC)
		op->r->nospc++;
	else
		op->r->other++;
}

static void disk_full__fails_whole_batches_with_enospc_and_then_recovers(void **state)
{
	struct fx *f = *state;
	enum { N = 400 };
	/* Room for a few more pages only; each job carries ~6 KB. */
	int64_t pages = fx_count(f, "PRAGMA page_count");
	assert_int_equal(store__max_page_count(f->st, pages + 40), 0);

	char *big = malloc(6000);
	memset(big, 'x', 5999);
	big[5999] = '\0';
	json_t *input = json_pack("{s:s}", "blob", big);
	free(big);
	struct full r = {0};
	struct fop *ops = calloc(N, sizeof(*ops));
	for (int i = 0; i < N; i++) {
		ops[i].r = &r;
		ops[i].job.tool = "t";
		ops[i].job.status = STORE_PENDING;
		ops[i].job.input = input;
		ops[i].req.op = STORE_OP_CREATE;
		ops[i].req.u.create.job = &ops[i].job;
		ops[i].req.u.create.event_data = input;
		ops[i].req.data = &ops[i];
		ops[i].req.done = full_done;
		assert_int_equal(store_submit(f->st, &ops[i].req), 0);
		/* Let some commit on their own before the disk fills. */
		if (i % 50 == 49)
			while (r.dones <= i)
				uv_run(&f->loop, UV_RUN_ONCE);
	}
	while (r.dones < N)
		uv_run(&f->loop, UV_RUN_ONCE);
	assert_true(r.ok > 0);
	assert_true(r.nospc > 0);
	assert_int_equal(r.other, 0);

	/* Nothing half-written: an answered job is whole, a failed one is
	 * absent with no event. */
	for (int i = 0; i < N; i++) {
		struct store_job *j;
		int rc = store_get(f->st, ops[i].job.id, &j);
		if (ops[i].req.job != NULL) {
			assert_int_equal(rc, 0);
			store_job_free(j);
		} else {
			assert_int_equal(rc, STORE_ENOTFOUND);
		}
		store_req_finish(&ops[i].req);
	}
	assert_int_equal(fx_count(f, "SELECT count(*) FROM jobs"), r.ok);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM events"), r.ok);

	/* Space comes back: writes succeed again. */
	assert_int_equal(store__max_page_count(f->st, 1 << 30), 0);
	char id[40];
	assert_int_equal(fx_create(f, "t", STORE_PENDING, NULL, 1, id), 0);
	assert_int_equal(fx_status(f, id), STORE_PENDING);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM jobs"), r.ok + 1);
	free(ops);
	json_decref(input);
}

/* ---- crash atomicity --------------------------------------------------- */

struct child {
	struct fx *f;
	int fd;
	struct store_req req[64];
	struct store_job job[64];
};

static void child_done(struct store_req *req, int rc);

static void child_submit(struct child *c, int i)
{
	memset(&c->req[i], 0, sizeof(c->req[i]));
	memset(&c->job[i], 0, sizeof(c->job[i]));
	c->job[i].tool = "crash";
	c->job[i].status = STORE_PENDING;
	c->req[i].op = STORE_OP_CREATE;
	c->req[i].u.create.job = &c->job[i];
	c->req[i].data = c;
	c->req[i].done = child_done;
	if (store_submit(c->f->st, &c->req[i]) != 0)
		_exit(3);
}

static void child_done(struct store_req *req, int rc)
{
	struct child *c = req->data;
	if (rc != 0)
		_exit(4);
	/* Durable: tell the parent, one fixed-size line an id. */
	char line[64];
	snprintf(line, sizeof(line), "%-36s\n", req->job->id);
	if (write(c->fd, line, 37) != 37)
		_exit(5);
	store_req_finish(req);
	child_submit(c, (int)(req - c->req));
}

static void child_main(struct fx *f, int fd)
{
	static struct child c;
	uv_loop_t loop;
	uv_loop_init(&loop);
	struct store_config cfg = {.path = f->path, .max_batch = 16};
	char *msg = NULL;
	struct fx cf = *f;
	cf.st = NULL;
	if (store_open(&loop, &cfg, &cf.st, &msg) != 0)
		_exit(2);
	c.f = &cf;
	c.fd = fd;
	for (int i = 0; i < 64; i++)
		child_submit(&c, i);
	uv_run(&loop, UV_RUN_DEFAULT);
	_exit(6);
}

static void crash__sigkill_while_committing__keeps_every_acknowledged_job(void **state)
{
	struct fx *f = *state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = harness_fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		child_main(f, p[1]);
	}
	close(p[1]);

	/* Read acknowledgements until a good number came (the child may
	 * start slowly on a loaded machine), a little longer, then kill it
	 * mid-flight. */
	size_t cap = 1 << 20, len = 0;
	char *buf = malloc(cap);
	int64_t deadline = store_now() + 20000, until = 0;
	while (store_now() < (until ? until : deadline) && len < cap) {
		ssize_t n = read(p[0], buf + len, cap - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		if (until == 0 && len >= 200 * 37)
			until = store_now() + 200;
	}
	kill(pid, SIGKILL);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	ssize_t n;
	while (len < cap && (n = read(p[0], buf + len, cap - len)) > 0)
		len += (size_t)n;
	close(p[0]);
	size_t acked = len / 37;
	assert_true(acked > 0);

	sqlite3 *db;
	sqlite3_stmt *s;
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(s, 0), "ok");
	sqlite3_finalize(s);
	sqlite3_close(db);

	assert_int_equal(fx_open(f, NULL), 0);
	for (size_t i = 0; i < acked; i++) {
		char id[40];
		memcpy(id, buf + i * 37, 36);
		id[36] = '\0';
		assert_int_equal(fx_status(f, id), STORE_PENDING);
	}
	/* Every job there is whole: one created event each. */
	assert_int_equal(fx_count(f, "SELECT count(*) FROM jobs"),
			 fx_count(f, "SELECT count(*) FROM events"));
	assert_true(fx_count(f, "SELECT count(*) FROM jobs") >= (int64_t)acked);
	free(buf);
}

/* ---- closing ----------------------------------------------------------- */

struct closing {
	int dones;
	bool closed;
};

static void closing_done(struct store_req *req, int rc)
{
	assert_int_equal(rc, 0);
	((struct closing *)req->data)->dones++;
}

static void closing_closed(void *arg)
{
	struct closing *c = arg;
	assert_int_equal(c->dones, 50);
	c->closed = true;
}

static void close__answers_the_queued_requests_then_refuses_new_ones(void **state)
{
	struct fx *f = *state;
	struct closing c = {0};
	struct store_req reqs[50];
	struct store_job jobs[50];
	for (int i = 0; i < 50; i++) {
		jobs[i] = (struct store_job){.tool = "t", .status = STORE_PENDING};
		reqs[i] = (struct store_req){.op = STORE_OP_CREATE, .data = &c, .done = closing_done};
		reqs[i].u.create.job = &jobs[i];
		assert_int_equal(store_submit(f->st, &reqs[i]), 0);
	}
	store_close(f->st, closing_closed, &c);
	struct store_req late = {.op = STORE_OP_PRUNE, .done = closing_done};
	assert_int_equal(store_submit(f->st, &late), -ESHUTDOWN);
	while (!c.closed)
		uv_run(&f->loop, UV_RUN_ONCE);
	f->st = NULL;
	for (int i = 0; i < 50; i++)
		store_req_finish(&reqs[i]);
	assert_int_equal(fx_count(f, "SELECT count(*) FROM jobs"), 50);
}

/* setup_normal opens the store with durability normal: thousands of
 * commits without an fsync each. */
static int setup_normal(void **state)
{
	fx_setup_closed(state);
	struct fx *f = *state;
	f->cfg.durability = STORE_DURABILITY_NORMAL;
	assert_int_equal(fx_open(f, NULL), 0);
	return 0;
}

static off_t file_size(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0 ? sb.st_size : -1;
}

/* One job per commit, each writing several frames, with reads on the loop
 * thread's connection between them: the WAL passes SQLite's automatic
 * checkpoint (1,000 frames) many times over. Its pages are copied into
 * the database file while the store is open and the WAL starts again each
 * time, instead of growing: no statement of ours keeps a read open that
 * would pin it. */
static void checkpoints__copy_into_the_database_and_keep_the_wal_small(void **state)
{
	struct fx *f = *state;
	char wal[160], input[1100];
	off_t db_before = file_size(f->path);

	snprintf(wal, sizeof(wal), "%s-wal", f->path);
	memset(input, 'x', sizeof(input) - 1);
	input[sizeof(input) - 1] = '\0';
	for (int i = 0; i < 3000; i++) {
		struct store_job job = {.tool = "t", .status = STORE_PENDING};
		job.input = json_pack("{s:s, s:i}", "pad", input, "i", i);
		struct store_req req = {.op = STORE_OP_CREATE};
		req.u.create.job = &job;
		assert_int_equal(fx_run(f, &req), 0);
		if (i % 100 == 0) {
			struct store_job *got;
			struct store_event *ev;
			size_t n;
			assert_int_equal(store_get(f->st, req.job->id, &got), 0);
			store_job_free(got);
			assert_int_equal(store_events(f->st, 0, NULL, 10, &ev, &n), 0);
			for (size_t e = 0; e < n; e++)
				store_event_finish(&ev[e]);
			free(ev);
		}
		store_req_finish(&req);
		json_decref(job.input);
	}
	/* The inputs alone are 3.3 MB; SQLite would copy what is left when
	 * its last connection closes, but this is before. */
	assert_true(file_size(f->path) > db_before + 3000000);
	/* Started again near 1,000 frames of 4 KiB. */
	assert_true(file_size(wal) < 2 * 1000 * (4096 + 24));
	assert_int_equal(fx_count(f, "SELECT count(*) FROM jobs"), 3000);
}

/* ---- a later commit's callbacks wait for the next loop turn ---------- */

struct turns {
	struct fx *f;
	uv_prepare_t prepare;
	int prepares;      /* prepare callbacks so far: one per loop turn */
	int first_turn;    /* prepares when the first done ran */
	int second_turn;   /* prepares when the second done ran */
	bool second_done;
	struct op first, second;
};

static void turns_prepare(uv_prepare_t *h)
{
	struct turns *t = h->data;
	t->prepares++;
}

static void turns_second_done(struct store_req *req, int rc)
{
	struct turns *t = req->data;
	assert_int_equal(rc, 0);
	t->second_turn = t->prepares;
	t->second_done = true;
	store_job_free(req->job);
}

/* turns_first_done submits the second request and, like a loop thread
 * that a busy machine holds up, stays until the writer has surely
 * committed it. */
static void turns_first_done(struct store_req *req, int rc)
{
	struct turns *t = req->data;
	assert_int_equal(rc, 0);
	t->first_turn = t->prepares;
	store_job_free(req->job);
	assert_int_equal(store_submit(t->f->st, &t->second.req), 0);
	for (int i = 0; i < 50 && fx_count(t->f, "SELECT count(*) FROM jobs") < 2; i++)
		usleep(20000);
	assert_int_equal(fx_count(t->f, "SELECT count(*) FROM jobs"), 2);
	usleep(20000); /* and until its batch is handed back */
}

/* What the callbacks of one commit send (a reply gathered for the end of
 * the loop turn) leaves before what a later commit's callbacks start (a
 * claim that runs a tool which takes the daemon down): the reply of a
 * submission was lost once when its job's claim was delivered in the same
 * turn (the poison test of tests/crash). */
static void deliver__a_batch_committed_during_callbacks__waits_for_the_next_turn(void **state)
{
	struct fx *f = *state;
	struct turns t = {.f = f};
	json_t *input = json_pack("{s:i}", "n", 1);

	uv_prepare_init(&f->loop, &t.prepare);
	t.prepare.data = &t;
	uv_prepare_start(&t.prepare, turns_prepare);
	for (int i = 0; i < 2; i++) {
		struct op *op = i ? &t.second : &t.first;
		op->job.tool = "t";
		op->job.status = STORE_PENDING;
		op->job.input = input;
		op->req.op = STORE_OP_CREATE;
		op->req.u.create.job = &op->job;
		op->req.data = &t;
		op->req.done = i ? turns_second_done : turns_first_done;
	}
	/* The prepare handle does not keep the loop alive, so that a failed
	 * assertion leaves teardown a loop it can close. */
	uv_unref((uv_handle_t *)&t.prepare);
	assert_int_equal(store_submit(f->st, &t.first.req), 0);
	while (!t.second_done)
		uv_run(&f->loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&t.prepare, NULL);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	json_decref(input);
	assert_true(t.second_turn > t.first_turn);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
	const struct CMUnitTest tests[] = {
		T(group_commit__many_concurrent_requests__each_done_runs_once_after_commit),
		T(group_commit__a_conflict_in_a_batch__does_not_fail_the_others),
		T(disk_full__fails_whole_batches_with_enospc_and_then_recovers),
		cmocka_unit_test_setup_teardown(crash__sigkill_while_committing__keeps_every_acknowledged_job,
						fx_setup_closed, fx_teardown),
		T(close__answers_the_queued_requests_then_refuses_new_ones),
		T(deliver__a_batch_committed_during_callbacks__waits_for_the_next_turn),
		cmocka_unit_test_setup_teardown(checkpoints__copy_into_the_database_and_keep_the_wal_small,
						setup_normal, fx_teardown),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}

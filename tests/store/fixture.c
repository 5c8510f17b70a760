/*
 * fixture.c: see fixture.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "tests/store/fixture.h"

static void remove_dir(const char *dir)
{
	static const char *const suffixes[] = {"", "-wal", "-shm", "-journal", ".lock"};
	char p[256];
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		snprintf(p, sizeof(p), "%s/berth.db%s", dir, suffixes[i]);
		unlink(p);
	}
	rmdir(dir);
}

int fx_open(struct fx *f, char **msg)
{
	char *m = NULL;
	f->cfg.path = f->path;
	int rc = store_open(&f->loop, &f->cfg, &f->st, &m);
	if (msg != NULL)
		*msg = m;
	else
		free(m);
	return rc;
}

static void closed(void *arg)
{
	*(bool *)arg = true;
}

void fx_close(struct fx *f)
{
	bool done = false;
	if (f->st == NULL)
		return;
	store_close(f->st, closed, &done);
	while (!done)
		uv_run(&f->loop, UV_RUN_ONCE);
	f->st = NULL;
}

int fx_setup_closed(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/berth-store-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/berth.db", f->dir);
	assert_int_equal(uv_loop_init(&f->loop), 0);
	*state = f;
	return 0;
}

int fx_setup(void **state)
{
	fx_setup_closed(state);
	struct fx *f = *state;
	assert_int_equal(fx_open(f, NULL), 0);
	return 0;
}

int fx_teardown(void **state)
{
	struct fx *f = *state;
	fx_close(f);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&f->loop), 0);
	remove_dir(f->dir);
	free(f);
	return 0;
}

struct waiter {
	bool done;
	int rc;
};

static void run_done(struct store_req *req, int rc)
{
	struct waiter *w = req->data;
	w->done = true;
	w->rc = rc;
}

int fx_run(struct fx *f, struct store_req *req)
{
	struct waiter w = {0};
	req->data = &w;
	req->done = run_done;
	int rc = store_submit(f->st, req);
	if (rc != 0)
		return rc;
	while (!w.done)
		uv_run(&f->loop, UV_RUN_ONCE);
	return w.rc;
}

int fx_create(struct fx *f, const char *tool, int status, const char *key,
	      int n, char id[40])
{
	struct store_job job = {
		.tool = (char *)tool,
		.status = status,
		.idempotency_key = (char *)key,
		.approval_required = status == STORE_AWAITING_APPROVAL,
		.max_retries = 1,
	};
	job.input = json_pack("{s:i}", "n", n);
	struct store_req req = {.op = STORE_OP_CREATE};
	req.u.create.job = &job;
	req.u.create.event_data = job.input;
	int rc = fx_run(f, &req);
	if (rc == 0 && id != NULL)
		memcpy(id, req.job->id, 40);
	store_req_finish(&req);
	json_decref(job.input);
	return rc;
}

int fx_move(struct fx *f, const char *id, unsigned from_mask, int to,
	    int event, struct store_job **job)
{
	struct store_req req = {.op = STORE_OP_TRANSITION};
	struct store_transition *t = &req.u.transition;
	snprintf(t->job_id, sizeof(t->job_id), "%s", id);
	t->from_mask = from_mask;
	t->to = to;
	t->event = event;
	int rc = fx_run(f, &req);
	if (job != NULL) {
		*job = req.job;
		req.job = NULL;
	}
	store_req_finish(&req);
	return rc;
}

int fx_status(struct fx *f, const char *id)
{
	struct store_job *j;
	if (store_get(f->st, id, &j) != 0)
		return -1;
	int s = j->status;
	store_job_free(j);
	return s;
}

int64_t fx_count(struct fx *f, const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *s;
	int64_t n = -1;
	assert_int_equal(sqlite3_open_v2(f->path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
	if (sqlite3_step(s) == SQLITE_ROW)
		n = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	sqlite3_close(db);
	return n;
}

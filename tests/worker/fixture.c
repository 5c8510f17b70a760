/*
 * fixture.c: see fixture.h.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"

static void tick_cb(uv_timer_t *t)
{
}

struct fx *fx_new(const struct worker_config *cfg)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct store_config sc = {0};
	char *err = NULL;
	const char *tmp = getenv("TMPDIR");

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "%s/berth-worker-XXXXXX",
		 tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->db, sizeof(f->db), "%s/berth.db", f->dir);
	assert_int_equal(uv_loop_init(&f->loop), 0);
	uv_timer_init(&f->loop, &f->tick);
	sc.path = f->db;
	sc.durability = STORE_DURABILITY_NORMAL;
	if (store_open(&f->loop, &sc, &f->st, &err)) {
		fprintf(stderr, "store_open: %s\n", err ? err : "?");
		fail();
	}
	f->w = worker_create(&f->loop, f->st, cfg);
	assert_non_null(f->w);
	return f;
}

void fx_start(struct fx *f)
{
	char *err = NULL;
	int rc = worker_start(f->w, &err);

	if (rc)
		fprintf(stderr, "worker_start: %s\n", err ? err : "?");
	free(err);
	assert_int_equal(rc, 0);
}

static void flag_cb(void *arg)
{
	*(bool *)arg = true;
}

static bool flag_pred(void *arg)
{
	return *(bool *)arg;
}

static void stop_worker(struct fx *f)
{
	bool stopped = false;

	worker_shutdown(f->w, flag_cb, &stopped);
	assert_true(fx_run_until(f, flag_pred, &stopped, 30000));
	worker_destroy(f->w);
	f->w = NULL;
}

void fx_restart(struct fx *f, const struct worker_config *cfg)
{
	stop_worker(f);
	f->w = worker_create(&f->loop, f->st, cfg);
	assert_non_null(f->w);
}

static int rm_one(const char *path, const struct stat *sb, int flag,
		  struct FTW *ftw)
{
	return remove(path);
}

void fx_free(struct fx *f)
{
	bool closed = false;

	if (f->w)
		stop_worker(f);
	store_close(f->st, flag_cb, &closed);
	assert_true(fx_run_until(f, flag_pred, &closed, 30000));
	uv_close((uv_handle_t *)&f->tick, NULL);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&f->loop), 0);
	nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
}

bool fx_run_until(struct fx *f, bool (*pred)(void *arg), void *arg,
		  int64_t timeout_ms)
{
	uint64_t end;
	bool ok;

	uv_update_time(&f->loop);
	end = uv_now(&f->loop) + (uint64_t)timeout_ms;
	uv_timer_start(&f->tick, tick_cb, 2, 2);
	while (!(ok = pred(arg)) && uv_now(&f->loop) < end)
		uv_run(&f->loop, UV_RUN_ONCE);
	uv_timer_stop(&f->tick);
	return ok;
}

struct until {
	struct fx *f;
	uint64_t end;
};

static bool time_pred(void *arg)
{
	struct until *u = arg;

	return uv_now(&u->f->loop) >= u->end;
}

void fx_run_for(struct fx *f, int64_t ms)
{
	struct until u = {f, 0};

	uv_update_time(&f->loop);
	u.end = uv_now(&f->loop) + (uint64_t)ms;
	fx_run_until(f, time_pred, &u, ms + 1000);
}

void fx_cb(void *arg, const struct worker_result *r)
{
	struct fx_res *res = arg;

	assert_false(res->done);
	res->done = true;
	res->err = r->err;
	snprintf(res->message, sizeof(res->message), "%s",
		 r->message ? r->message : "");
	res->data = r->data ? json_incref(r->data) : NULL;
	res->status = r->job ? r->job->status : -1;
	if (r->job)
		snprintf(res->id, sizeof(res->id), "%s", r->job->id);
	res->existed = r->existed;
}

static bool res_pred(void *arg)
{
	return ((struct fx_res *)arg)->done;
}

void fx_wait_res(struct fx *f, struct fx_res *res)
{
	assert_true(fx_run_until(f, res_pred, res, 10000));
}

void fx_res_finish(struct fx_res *res)
{
	json_decref(res->data);
	res->data = NULL;
}

void fx_submit(struct fx *f, const char *tool, const char *input,
	       const struct worker_submit *p, struct fx_res *res)
{
	struct worker_submit s = {0};
	json_error_t jerr;

	if (p)
		s = *p;
	s.tool = tool;
	s.input = json_loads(input, 0, &jerr);
	assert_non_null(s.input);
	memset(res, 0, sizeof(*res));
	assert_int_equal(worker_submit(f->w, &s, fx_cb, res), 0);
	/* Never called back before worker_submit returned. */
	fx_wait_res(f, res);
	json_decref(s.input);
}

void fx_submit_ok(struct fx *f, const char *tool, const char *input,
		  const struct worker_submit *p, char id[40])
{
	struct fx_res res;

	fx_submit(f, tool, input, p, &res);
	if (res.err)
		fprintf(stderr, "submit %s: %s\n", tool, res.message);
	assert_int_equal(res.err, WORKER_OK);
	memcpy(id, res.id, 40);
	fx_res_finish(&res);
}

struct store_job *fx_get(struct fx *f, const char *id)
{
	struct store_job *j = NULL;

	assert_int_equal(store_get(f->st, id, &j), 0);
	return j;
}

int fx_status(struct fx *f, const char *id)
{
	struct store_job *j = fx_get(f, id);
	int s = j->status;

	store_job_free(j);
	return s;
}

struct status_wait {
	struct fx *f;
	const char *id;
	int status;
};

static bool status_pred(void *arg)
{
	struct status_wait *sw = arg;

	return fx_status(sw->f, sw->id) == sw->status;
}

void fx_wait_status(struct fx *f, const char *id, int s, int64_t ms)
{
	struct status_wait sw = {f, id, s};

	if (!fx_run_until(f, status_pred, &sw, ms)) {
		struct store_job *j = fx_get(f, id);
		json_t *o = store_job_to_json(j);
		char *txt = json_dumps(o, JSON_COMPACT);

		json_decref(o);
		fprintf(stderr, "job %s is %s, not %s: %s\n", id,
			store_status_name(j->status), store_status_name(s),
			txt ? txt : "");
		free(txt);
		store_job_free(j);
		fail();
	}
}

int fx_count_events(struct fx *f, const char *id, int type)
{
	struct store_event *ev = NULL;
	size_t n = 0;
	int count = 0;

	assert_int_equal(store_events(f->st, 0, id, 10000, &ev, &n), 0);
	for (size_t i = 0; i < n; i++) {
		if (ev[i].type == type)
			count++;
		store_event_finish(&ev[i]);
	}
	free(ev);
	return count;
}

const char *fx_write(struct fx *f, const char *name, const char *text)
{
	static char path[512];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
	return path;
}

json_t *fx_json(const char *text)
{
	json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);

	assert_non_null(v);
	return v;
}

void fx_assert_json(const json_t *v, const char *want)
{
	json_t *w = fx_json(want);

	if (!json_equal(v, w)) {
		char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY)
			    : NULL;

		fprintf(stderr, "got %s, want %s\n", s ? s : "(nothing)", want);
		free(s);
	}
	assert_true(json_equal(v, w));
	json_decref(w);
}

json_t *fx_completed_output(struct fx *f, const char *id)
{
	struct store_job *j;
	json_t *out;

	fx_wait_status(f, id, STORE_COMPLETED, 10000);
	j = fx_get(f, id);
	out = json_incref(j->output);
	store_job_free(j);
	return out;
}

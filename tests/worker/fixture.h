/*
 * fixture.h: a real worker on a real temporary SQLite store and a real uv
 * loop, for the worker's unit tests. Every helper that waits runs the loop
 * until its condition holds and fails the test after a deadline.
 */
#ifndef BERTH_TESTS_WORKER_FIXTURE_H
#define BERTH_TESTS_WORKER_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>
#include <uv.h>

#include "store/store.h"
#include "worker/worker.h"

struct fx {
	uv_loop_t loop;
	struct store *st;
	struct worker *w;
	char dir[256];
	char db[300];
	uv_timer_t tick; /* keeps the loop turning while a helper waits */
};

/* The result of an operation, copied out of its callback. */
struct fx_res {
	bool done;
	int err;
	char message[512];
	json_t *data; /* new reference or NULL */
	char id[40];
	int status;   /* -1 without a job */
	bool existed;
};

/* fx_new makes the directory, opens the store and creates the worker
 * (cfg may be NULL); fx_free shuts everything down, asserts the loop
 * closes cleanly and removes the directory. */
struct fx *fx_new(const struct worker_config *cfg);
void fx_free(struct fx *f);
/* fx_start starts the worker, failing the test on an error. */
void fx_start(struct fx *f);
/* fx_reopen shuts the worker down (cleanly) and creates a new one on the
 * same store, for restart tests; tools must be added again. */
void fx_restart(struct fx *f, const struct worker_config *cfg);

/* fx_run_until runs the loop until pred(arg) or timeout_ms has passed;
 * returns pred's last answer. */
bool fx_run_until(struct fx *f, bool (*pred)(void *arg), void *arg,
		  int64_t timeout_ms);
/* fx_run_for runs the loop for ms milliseconds. */
void fx_run_for(struct fx *f, int64_t ms);

void fx_cb(void *arg, const struct worker_result *res);
/* fx_wait_res waits for res to be filled, failing after 10 s. */
void fx_wait_res(struct fx *f, struct fx_res *res);
void fx_res_finish(struct fx_res *res);

/* fx_submit submits tool with input (JSON text) and the other params of
 * p (may be NULL), waits for the answer and fills res. */
void fx_submit(struct fx *f, const char *tool, const char *input,
	       const struct worker_submit *p, struct fx_res *res);
/* fx_submit_ok is fx_submit that asserts success and returns the job id
 * in id. */
void fx_submit_ok(struct fx *f, const char *tool, const char *input,
		  const struct worker_submit *p, char id[40]);

/* fx_get returns the job (caller frees), failing when there is none. */
struct store_job *fx_get(struct fx *f, const char *id);
int fx_status(struct fx *f, const char *id);
/* fx_wait_status waits until job id has status s; fails after ms. */
void fx_wait_status(struct fx *f, const char *id, int s, int64_t ms);
/* fx_count_events returns how many events of type the job has. */
int fx_count_events(struct fx *f, const char *id, int type);

/* fx_json parses text (any JSON value), failing the test when it is not
 * JSON; a new reference. */
json_t *fx_json(const char *text);
/* fx_assert_json asserts that v equals the JSON text want, printing both
 * when it does not. */
void fx_assert_json(const json_t *v, const char *want);
/* fx_completed_output waits for job id to complete and returns its output
 * (new reference). */
json_t *fx_completed_output(struct fx *f, const char *id);

/* fx_write writes text to DIR/name and returns the path (static buffer
 * of the fixture, valid until the next call). */
const char *fx_write(struct fx *f, const char *name, const char *text);

#endif

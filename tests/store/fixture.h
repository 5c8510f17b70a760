/*
 * fixture.h: a store on a real SQLite file in a temporary directory, with
 * its own libuv loop, and helpers that run one request to its end.
 */
#ifndef BERTH_TESTS_STORE_FIXTURE_H
#define BERTH_TESTS_STORE_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "store/store.h"

struct fx {
	char dir[64];
	char path[128];
	uv_loop_t loop;
	struct store *st;
	struct store_config cfg;
};

/* fx_setup makes the directory and loop and opens the store (state is a
 * struct fx *); fx_setup_closed leaves the store closed. fx_teardown
 * closes the store and asserts that the loop closes cleanly. */
int fx_setup(void **state);
int fx_setup_closed(void **state);
int fx_teardown(void **state);

/* fx_open opens f->path with f->cfg; returns store_open's code and frees
 * the message into msg (when not NULL, the caller frees it). */
int fx_open(struct fx *f, char **msg);
/* fx_close closes the store and runs the loop until it is closed. */
void fx_close(struct fx *f);

/* fx_run submits req and runs the loop until its done ran; returns the
 * done code (or store_submit's error). */
int fx_run(struct fx *f, struct store_req *req);

/* fx_create creates a job of tool in status (PENDING or
 * AWAITING_APPROVAL) with an optional idempotency key and the input
 * {"n": n}; returns the code and copies the new job's id into id. */
int fx_create(struct fx *f, const char *tool, int status, const char *key,
	      int n, char id[40]);

/* fx_move runs one transition with no extra fields; *job (when not NULL)
 * receives req.job, which the caller frees. */
int fx_move(struct fx *f, const char *id, unsigned from_mask, int to,
	    int event, struct store_job **job);

/* fx_status returns the status of job id as the read connection sees it,
 * or -1 when there is no such job. */
int fx_status(struct fx *f, const char *id);

/* fx_count runs a COUNT query of ours on a separate connection. */
int64_t fx_count(struct fx *f, const char *sql);

#endif

/*
 * test_berthd_worker.c: the worker through a real berthd (tests/harness):
 * the promises of DESIGN.md's "known failures" list, kept across a kill -9.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "tests/harness/harness.h"

#ifndef WORKER_TEST_TOOLS
#error "WORKER_TEST_TOOLS must name tests/worker/tools"
#endif

struct fixture {
	struct harness h;
	struct berth_client *c;
};

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void connect_to(struct fixture *f)
{
	f->c = harness_connect(&f->h);
	assert_non_null(f->c);
}

static int setup(void **state)
{
	static const char *const args[] = {"--tools", WORKER_TEST_TOOLS, NULL};
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(harness_start(&f->h, args), 0);
	connect_to(f);
	*state = f;
	return 0;
}

/* The descriptor berthd inherits without close-on-exec in
 * setup_inherited_fd, as from a careless parent (a shell's 9<file, a
 * supervisor's socket). */
#define INHERITED_FD 50

static int setup_inherited_fd(void **state)
{
	int fd = open("/dev/null", O_RDONLY);
	int rc;

	assert_true(fd >= 0);
	/* dup2's copy is not close-on-exec: the harness's fork and exec
	 * hand it to berthd. */
	assert_int_equal(dup2(fd, INHERITED_FD), INHERITED_FD);
	close(fd);
	rc = setup(state);
	close(INHERITED_FD);
	return rc;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (f->c)
		berth_client_close(f->c);
	harness_cleanup(&f->h);
	free(f);
	return 0;
}

static const char *jstr(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

/* submit returns the new job's id (malloc'd). */
static char *submit(struct fixture *f, json_t *params)
{
	json_t *job = harness_call(f->c, "jobs/submit", params, NULL);
	char *id = strdup(jstr(job, "id"));

	json_decref(job);
	return id;
}

/* wait_status waits until job id is in status and returns the Job. */
static json_t *wait_status(struct fixture *f, const char *id,
			   const char *status)
{
	for (int i = 0; i < 60; i++) {
		json_t *job = harness_call(
			f->c, "jobs/wait",
			json_pack("{s:s, s:i, s:[s]}", "id", id, "timeoutMs",
				  1000, "until", status),
			NULL);

		if (strcmp(jstr(job, "status"), status) == 0)
			return job;
		if (i == 59) {
			char *s = json_dumps(job, JSON_COMPACT);
			print_error("job %s is not %s: %.2000s\n", id, status, s);
			free(s);
		}
		json_decref(job);
	}
	fail_msg("job %s never became %s", id, status);
	return NULL;
}

static const char *status_of(struct fixture *f, const char *id, json_t **job)
{
	*job = harness_call(f->c, "jobs/get", json_pack("{s:s}", "id", id),
			    NULL);
	return jstr(*job, "status");
}

static void declined_job__never_leaves_its_marker_file(void **state)
{
	struct fixture *f = *state;
	char marker[400], ok[400];
	json_t *job;
	char *declined, *approved;

	snprintf(marker, sizeof(marker), "%s/declined-marker", f->h.dir);
	snprintf(ok, sizeof(ok), "%s/approved-marker", f->h.dir);
	declined = submit(f, json_pack("{s:s, s:{s:s, s:s}}", "tool",
				       "write-note", "input", "path", marker,
				       "text", "must not exist"));
	approved = submit(f, json_pack("{s:s, s:{s:s, s:s}}", "tool",
				       "write-note", "input", "path", ok,
				       "text", "fine"));
	job = harness_call(f->c, "jobs/decline",
			   json_pack("{s:s, s:s}", "id", declined, "reason",
				     "not today"),
			   NULL);
	assert_string_equal(jstr(job, "status"), "declined");
	json_decref(job);
	json_decref(harness_call(f->c, "jobs/approve",
				 json_pack("{s:s}", "id", approved), NULL));
	json_decref(wait_status(f, approved, "completed"));
	/* Approving the declined job is a conflict, and a restart does not
	 * bring it back either. */
	assert_null(harness_call(f->c, "jobs/approve",
				 json_pack("{s:s}", "id", declined), &job));
	assert_non_null(job);
	json_decref(job);
	berth_client_close(f->c);
	f->c = NULL;
	assert_int_equal(harness_kill9(&f->h), 0);
	assert_int_equal(harness_restart(&f->h), 0);
	connect_to(f);
	sleep_ms(300);
	assert_string_equal(status_of(f, declined, &job), "declined");
	assert_string_equal(jstr(json_object_get(job, "approval"), "reason"),
			    "not today");
	json_decref(job);
	assert_int_equal(access(ok, F_OK), 0);
	assert_int_not_equal(access(marker, F_OK), 0);
	free(declined);
	free(approved);
}

static void suspended_calls__resumed_in_reverse_order__get_their_own_data(
	void **state)
{
	struct fixture *f = *state;
	const char *names[2] = {"first", "second"};
	char *ids[2];

	for (int i = 0; i < 2; i++) {
		ids[i] = submit(f, json_pack("{s:s, s:{s:s}}", "tool",
					     "ask-name", "input", "greeting",
					     "Hi"));
		json_decref(wait_status(f, ids[i], "suspended"));
	}
	for (int i = 1; i >= 0; i--)
		json_decref(harness_call(
			f->c, "jobs/resume",
			json_pack("{s:s, s:{s:s}}", "id", ids[i], "resumeData",
				  "answer", names[i]),
			NULL));
	for (int i = 0; i < 2; i++) {
		json_t *job = wait_status(f, ids[i], "completed");
		char want[64];

		snprintf(want, sizeof(want), "Hi, %s!", names[i]);
		assert_string_equal(jstr(json_object_get(job, "output"),
					 "message"),
				    want);
		json_decref(job);
		free(ids[i]);
	}
}

static void big_suspend_payload__is_approved_and_resumed(void **state)
{
	struct fixture *f = *state;
	const int size = 5 * 1024 * 1024;
	json_t *job, *out;
	char *id;

	id = submit(f, json_pack("{s:s, s:{s:i}}", "tool", "big-suspend",
				 "input", "bytes", size));
	json_decref(wait_status(f, id, "awaiting_approval"));
	json_decref(harness_call(f->c, "jobs/approve",
				 json_pack("{s:s}", "id", id), NULL));
	job = wait_status(f, id, "suspended");
	assert_int_equal(json_string_length(json_object_get(
				 json_object_get(job, "suspendPayload"), "blob")),
			 size);
	json_decref(job);
	json_decref(harness_call(f->c, "jobs/resume",
				 json_pack("{s:s, s:{s:s}}", "id", id,
					   "resumeData", "answer", "ok"),
				 NULL));
	job = wait_status(f, id, "completed");
	out = json_object_get(job, "output");
	assert_int_equal(json_integer_value(json_object_get(out, "size")), size);
	assert_string_equal(jstr(out, "answer"), "ok");
	json_decref(job);
	free(id);
}

static void tool_ignoring_sigterm__is_killed_on_timeout(void **state)
{
	struct fixture *f = *state;
	char pidfile[400];
	FILE *fp;
	int pid = 0;
	char *id;

	snprintf(pidfile, sizeof(pidfile), "%s/stubborn.pid", f->h.dir);
	id = submit(f, json_pack("{s:s, s:{s:s}}", "tool", "stubborn",
				 "input", "pidFile", pidfile));
	json_decref(wait_status(f, id, "timed_out"));
	fp = fopen(pidfile, "r");
	assert_non_null(fp);
	assert_int_equal(fscanf(fp, "%d", &pid), 1);
	fclose(fp);
	/* SIGTERM is ignored; SIGKILL comes after the kill grace (5 s). */
	for (int i = 0; i < 150 && kill(pid, 0) == 0; i++)
		sleep_ms(100);
	assert_int_not_equal(kill(pid, 0), 0);
	assert_int_equal(errno, ESRCH);
	free(id);
}

static void kill9__while_jobs_run_wait_and_sleep__loses_none_of_them(
	void **state)
{
	struct fixture *f = *state;
	char note[400];
	json_t *job;
	char *running, *suspended, *waiting, *delayed;

	snprintf(note, sizeof(note), "%s/note", f->h.dir);
	running = submit(f, json_pack("{s:s, s:{s:i, s:i}}", "tool",
				      "count-to", "input", "to", 15, "delayMs",
				      100));
	suspended = submit(f, json_pack("{s:s, s:{}}", "tool", "ask-name",
					"input"));
	waiting = submit(f, json_pack("{s:s, s:{s:s, s:s}}", "tool",
				      "write-note", "input", "path", note,
				      "text", "after the crash"));
	delayed = submit(f, json_pack("{s:s, s:{s:s}, s:i}", "tool",
				      "weather-tool", "input", "location",
				      "Oslo", "delayMs", 3000));
	json_decref(wait_status(f, running, "running"));
	json_decref(wait_status(f, suspended, "suspended"));
	/* Let count-to save a checkpoint or two. */
	for (int i = 0; i < 300; i++) {
		json_int_t step;

		status_of(f, running, &job);
		step = json_integer_value(json_object_get(
			json_object_get(job, "checkpoint"), "i"));
		json_decref(job);
		if (step >= 2)
			break;
		sleep_ms(50);
	}

	berth_client_close(f->c);
	f->c = NULL;
	assert_int_equal(harness_kill9(&f->h), 0);
	assert_int_equal(harness_restart(&f->h), 0);
	connect_to(f);

	assert_string_equal(status_of(f, suspended, &job), "suspended");
	json_decref(job);
	assert_string_equal(status_of(f, waiting, &job), "awaiting_approval");
	json_decref(job);
	json_decref(harness_call(f->c, "jobs/resume",
				 json_pack("{s:s, s:{s:s}}", "id", suspended,
					   "resumeData", "answer", "Lin"),
				 NULL));
	json_decref(harness_call(f->c, "jobs/approve",
				 json_pack("{s:s}", "id", waiting), NULL));

	job = wait_status(f, running, "completed");
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(job, "output"), "counted")),
			 15);
	/* The interrupted run counted as a try and went on from its
	 * checkpoint. */
	assert_int_equal(json_integer_value(json_object_get(job, "attempt")),
			 2);
	assert_true(json_integer_value(json_object_get(
			    json_object_get(job, "output"), "resumedFrom")) >= 1);
	json_decref(job);
	job = wait_status(f, suspended, "completed");
	assert_string_equal(jstr(json_object_get(job, "output"), "message"),
			    "Hello, Lin!");
	json_decref(job);
	json_decref(wait_status(f, waiting, "completed"));
	assert_int_equal(access(note, F_OK), 0);
	job = wait_status(f, delayed, "completed");
	assert_string_equal(jstr(json_object_get(job, "output"), "location"),
			    "Oslo");
	json_decref(job);
	free(running);
	free(suspended);
	free(waiting);
	free(delayed);
}

/* A tool starts with its three pipes and nothing else, whatever berthd
 * itself was started with. */
static void tool__starts_with_nothing_open_above_2(void **state)
{
	struct fixture *f = *state;
	char path[64];
	json_t *job;
	char *id;

	/* berthd holds the inherited descriptor... */
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)f->h.pid,
		 INHERITED_FD);
	assert_int_equal(access(path, F_OK), 0);
	/* ...and its tool does not: 0, 1, 2, and the folder ls reads. */
	id = submit(f, json_pack("{s:s, s:{}}", "tool", "fds", "input"));
	job = wait_status(f, id, "completed");
	assert_string_equal(jstr(json_object_get(job, "output"), "fds"),
			    "0 1 2 3 ");
	json_decref(job);
	free(id);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(declined_job__never_leaves_its_marker_file),
		T(suspended_calls__resumed_in_reverse_order__get_their_own_data),
		T(big_suspend_payload__is_approved_and_resumed),
		T(tool_ignoring_sigterm__is_killed_on_timeout),
		T(kill9__while_jobs_run_wait_and_sleep__loses_none_of_them),
		cmocka_unit_test_setup_teardown(
			tool__starts_with_nothing_open_above_2,
			setup_inherited_fd, teardown),
	};

	return cmocka_run_group_tests_name("worker through berthd", tests,
					   NULL, NULL);
}

/*
 * test_berthd_start.c: a job's timeout is the time its tool gets to run,
 * counted from when the tool starts, through a real berthd (tests/harness)
 * and real processes. What a tool waits for before it starts is made slow
 * for real, not mocked:
 *
 *   - the exec of an external tool's program, held up by the kernel: the
 *     test takes a write lease on the program (fcntl F_SETLEASE), and every
 *     open of it, the exec's included, waits until the lease is given up
 *     (or /proc/sys/fs/lease-break-time has passed, 45 s by default). Both
 *     of the spawner's threads wait in such an exec, and the starts behind
 *     them wait for a thread;
 *   - the commit of a job that starts by its creation, held up by another
 *     process holding SQLite's write lock, which berthd's writer waits for
 *     (its busy timeout, 5 s).
 *
 * And the wait before a start is bounded: an exec held up past
 * --start-timeout fails its job, saying where it waited.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "tests/harness/harness.h"

/* How long anything a test waits for may take on a loaded machine. */
#define DEADLINE_MS 60000

/* The timeout of the tool "late" and how long its run takes: half of it,
 * so that a run that gets its whole timeout completes on a loaded machine,
 * and one that lost more than half of it to its wait does not. */
#define LATE_TIMEOUT_MS 2000
#define LATE_SLEEP "1"

struct fixture {
	struct harness h;
	struct berth_client *c;
	char tools[256]; /* the folder of "late", made by the test */
	char program[300];
	int lease; /* the descriptor holding the lease on program, or -1 */
};

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *fp = fopen(path, "w");

	assert_non_null(fp);
	assert_true(fputs(text, fp) >= 0);
	assert_int_equal(fclose(fp), 0);
	assert_int_equal(chmod(path, mode), 0);
}

static int remove_one(const char *path, const struct stat *sb, int flag,
		      struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* start writes the tool "late" into a folder of its own and starts berthd
 * with it and args (NULL-ended, at most 8). */
static int start(void **state, const char *const *args)
{
	struct fixture *f = calloc(1, sizeof(*f));
	const char *tmp = getenv("TMPDIR");
	const char *argv[12] = {"--tools", NULL};
	char path[400], manifest[256];
	size_t n = 2;

	assert_non_null(f);
	f->lease = -1;
	snprintf(f->tools, sizeof(f->tools), "%s/berth-start-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(f->tools));
	snprintf(f->program, sizeof(f->program), "%s/late.sh", f->tools);
	write_file(f->program,
		   "#!/bin/sh\n"
		   "# late: reads its input, sleeps $LATE_SLEEP seconds and "
		   "answers.\n"
		   "cat >/dev/null\n"
		   "sleep \"$LATE_SLEEP\"\n"
		   "echo '{\"output\":{\"ran\":true}}'\n",
		   0755);
	snprintf(manifest, sizeof(manifest),
		 "{\"id\": \"late\", \"background\": {\"timeoutMs\": %d}, "
		 "\"env\": {\"LATE_SLEEP\": \"%s\"}, "
		 "\"command\": [\"./late.sh\"]}\n",
		 LATE_TIMEOUT_MS, LATE_SLEEP);
	snprintf(path, sizeof(path), "%s/late.json", f->tools);
	write_file(path, manifest, 0644);
	argv[1] = f->tools;
	for (size_t i = 0; args && args[i] && n < 11; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	f->h.no_examples = true;
	if (harness_start(&f->h, argv) != 0) {
		nftw(f->tools, remove_one, 8, FTW_DEPTH | FTW_PHYS);
		free(f);
		return -1;
	}
	f->c = harness_connect(&f->h);
	assert_non_null(f->c);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return start(state, NULL);
}

static int setup_short_start(void **state)
{
	static const char *const args[] = {"--start-timeout", "1s", NULL};

	return start(state, args);
}

/* teardown stops berthd, which must exit 0 (under ASan: having leaked
 * nothing), whatever its tools' starts were left doing. */
static int teardown(void **state)
{
	struct fixture *f = *state;
	int rc;

	if (f->lease >= 0)
		close(f->lease);
	if (f->c)
		berth_client_close(f->c);
	rc = f->h.pid ? harness_stop(&f->h) : 0;
	harness_cleanup(&f->h);
	nftw(f->tools, remove_one, 8, FTW_DEPTH | FTW_PHYS);
	free(f);
	assert_int_equal(rc, 0);
	return 0;
}

/* hold_exec makes the kernel hold up every exec of the tool's program
 * until release_exec: it takes a write lease on the file, which an open
 * for reading (an exec's) must wait for the holder to give up. The kernel
 * tells the holder with SIGIO, whose default would end the test. Skips
 * the test where the filesystem takes no lease. */
static void hold_exec(struct fixture *f)
{
	signal(SIGIO, SIG_IGN);
	f->lease = open(f->program, O_RDONLY | O_CLOEXEC);
	assert_true(f->lease >= 0);
	if (fcntl(f->lease, F_SETLEASE, F_WRLCK) < 0) {
		print_message("no lease on %s (%s): the test needs one\n",
			      f->program, strerror(errno));
		skip();
	}
}

static void release_exec(struct fixture *f)
{
	assert_int_equal(fcntl(f->lease, F_SETLEASE, F_UNLCK), 0);
	close(f->lease);
	f->lease = -1;
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

/* wait_until waits until job id's status is in until (a JSON array of
 * statuses, stolen) and returns the Job, failing after DEADLINE_MS. */
static json_t *wait_until(struct fixture *f, const char *id, json_t *until)
{
	for (int waited = 0; waited < DEADLINE_MS; waited += 1000) {
		json_t *job = harness_call(
			f->c, "jobs/wait",
			json_pack("{s:s, s:i, s:O}", "id", id, "timeoutMs",
				  1000, "until", until),
			NULL);
		const char *s = jstr(job, "status");
		size_t i;
		json_t *v;

		json_array_foreach(until, i, v)
			if (strcmp(s, json_string_value(v)) == 0) {
				json_decref(until);
				return job;
			}
		json_decref(job);
	}
	json_decref(until);
	fail_msg("job %s never reached what was waited for", id);
	return NULL;
}

/* assert_completed waits until job id ends and asserts that it completed
 * on its first try, printing the job when it did not. */
static void assert_completed(struct fixture *f, const char *id)
{
	json_t *job = wait_until(
		f, id,
		json_pack("[s, s, s, s]", "completed", "failed", "timed_out",
			  "cancelled"));

	if (strcmp(jstr(job, "status"), "completed") != 0) {
		char *s = json_dumps(job, JSON_COMPACT);

		print_error("job %s did not complete: %s\n", id, s);
		free(s);
	}
	assert_string_equal(jstr(job, "status"), "completed");
	assert_int_equal(json_integer_value(json_object_get(job, "attempt")),
			 1);
	json_decref(job);
}

/* busy returns server/info's workers.busy: the slots taken. */
static json_int_t busy(struct fixture *f)
{
	json_t *info = harness_call(f->c, "server/info", NULL, NULL);
	json_int_t n = json_integer_value(
		json_object_get(json_object_get(info, "workers"), "busy"));

	json_decref(info);
	return n;
}

/* ---- the exec held up -------------------------------------------------- */

#define HELD 4 /* more starts than the spawner's two threads */

static void external_tool__whose_exec_is_held_up__gets_its_whole_timeout_to_run(
	void **state)
{
	struct fixture *f = *state;
	char *ids[HELD];

	hold_exec(f);
	for (int i = 0; i < HELD; i++)
		ids[i] = submit(f, json_pack("{s:s, s:{}}", "tool", "late",
					     "input"));
	/* Every job is running (claimed, or started by its creation), and
	 * none of their processes can exec: two wait in the kernel, the
	 * others for a spawner's thread. They wait twice their timeout. */
	for (int i = 0; i < HELD; i++)
		json_decref(wait_until(f, ids[i], json_pack("[s]", "running")));
	sleep_ms(2 * LATE_TIMEOUT_MS);
	release_exec(f);
	/* Each run then gets its whole timeout, which is twice what it
	 * needs: none was timed out while it waited to start. */
	for (int i = 0; i < HELD; i++) {
		assert_completed(f, ids[i]);
		free(ids[i]);
	}
}

/* ---- the creation's commit held up -------------------------------------- */

static void external_tool__started_by_its_creation__is_timed_from_its_start_not_its_commit(
	void **state)
{
	struct fixture *f = *state;
	static const char submission[] =
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"jobs/submit\","
		"\"params\":{\"tool\":\"late\",\"input\":{}}}";
	/* A slot is free and nothing waits: the job is started by its
	 * creation, and its process starts once that commit is durable. The
	 * commit is held up (another process, this one, holds the write
	 * lock) longer than the job's timeout, and less than the writer's
	 * busy timeout. */
	char *id = harness_submit_held(&f->h, submission, LATE_TIMEOUT_MS + 1500);

	assert_completed(f, id);
	free(id);
}

/* ---- --start-timeout -------------------------------------------------- */

static void external_tool__not_started_within_the_start_timeout__fails_saying_where_it_waited(
	void **state)
{
	struct fixture *f = *state;
	char *ids[3];
	int exec = 0, queue = 0;

	hold_exec(f);
	for (int i = 0; i < 3; i++)
		ids[i] = submit(f, json_pack("{s:s, s:{}, s:i}", "tool",
					     "late", "input", "maxRetries",
					     0));
	/* Two starts wait in the kernel's exec, the third for a thread
	 * of the spawner; each gives up after 1 s. */
	for (int i = 0; i < 3; i++) {
		json_t *job = wait_until(
			f, ids[i],
			json_pack("[s, s, s]", "completed", "failed",
				  "timed_out"));
		json_t *err = json_object_get(job, "error");
		const char *stage = jstr(json_object_get(err, "data"),
					 "stage");

		assert_string_equal(jstr(job, "status"), "failed");
		assert_string_equal(jstr(err, "code"), "start_timeout");
		if (!strstr(jstr(err, "message"),
			    "tool late did not start within 1000 ms"))
			fail_msg("message: %s", jstr(err, "message"));
		exec += strcmp(stage, "exec") == 0;
		queue += strcmp(stage, "queue") == 0;
		json_decref(job);
	}
	assert_int_equal(exec, 2);
	assert_int_equal(queue, 1);
	/* The two execs that were held up end once the lease is given up,
	 * and their processes are stopped: the slots come back, and the
	 * jobs stay failed. */
	release_exec(f);
	for (int waited = 0; busy(f) > 0 && waited < DEADLINE_MS;
	     waited += 50)
		sleep_ms(50);
	assert_int_equal(busy(f), 0);
	for (int i = 0; i < 3; i++) {
		json_t *job = harness_call(f->c, "jobs/get",
					   json_pack("{s:s}", "id", ids[i]),
					   NULL);

		assert_string_equal(jstr(job, "status"), "failed");
		json_decref(job);
		free(ids[i]);
	}
	/* berthd starts the tool again as before. */
	ids[0] = submit(f, json_pack("{s:s, s:{}}", "tool", "late", "input"));
	assert_completed(f, ids[0]);
	free(ids[0]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			external_tool__whose_exec_is_held_up__gets_its_whole_timeout_to_run,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			external_tool__started_by_its_creation__is_timed_from_its_start_not_its_commit,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			external_tool__not_started_within_the_start_timeout__fails_saying_where_it_waited,
			setup_short_start, teardown),
	};

	return cmocka_run_group_tests_name("an external tool's start", tests,
					   NULL, NULL);
}

/*
 * test_berthd_ops.c: operating a real berthd (tests/harness): its options'
 * durations, the shutdown grace and the second signal, the log lines an
 * operator greps for, and SIGHUP reloading the --tools folders.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "tests/harness/child.h"
#include "tests/harness/harness.h"

#ifndef WORKER_TEST_TOOLS
#error "WORKER_TEST_TOOLS must name tests/worker/tools"
#endif

/* Generous: the machine may be loaded, and nothing here measures speed. */
#define WAIT_MS 60000

struct fixture {
	struct harness h;
	struct berth_client *c;
	char tools[256]; /* a --tools folder a test writes, or "" */
};

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[300];

	if (f->c)
		berth_client_close(f->c);
	harness_cleanup(&f->h);
	if (f->tools[0]) {
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->tools);
		if (system(cmd) != 0)
			print_error("could not remove %s\n", f->tools);
	}
	free(f);
	return 0;
}

/* start starts berthd with the test tools and args (NULL-ended) and
 * connects. */
static void start(struct fixture *f, const char *const *args)
{
	const char *all[32] = {"--tools", WORKER_TEST_TOOLS};
	size_t n = 2;

	for (; args && *args && n < 31; args++)
		all[n++] = *args;
	all[n] = NULL;
	assert_int_equal(harness_start(&f->h, all), 0);
	f->c = harness_connect(&f->h);
	assert_non_null(f->c);
}

static void reconnect(struct fixture *f)
{
	if (f->c)
		berth_client_close(f->c);
	f->c = harness_connect(&f->h);
	assert_non_null(f->c);
}

static void disconnect(struct fixture *f)
{
	if (f->c)
		berth_client_close(f->c);
	f->c = NULL;
}

static const char *jstr(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "";
}

/* submit submits and returns the new job's id (malloc'd). */
static char *submit(struct fixture *f, json_t *params)
{
	json_t *job = harness_call(f->c, "jobs/submit", params, NULL);
	char *id = strdup(jstr(job, "id"));

	json_decref(job);
	return id;
}

static json_t *get(struct fixture *f, const char *id)
{
	return harness_call(f->c, "jobs/get", json_pack("{s:s}", "id", id),
			    NULL);
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
		json_decref(job);
	}
	fail_msg("job %s never became %s", id, status);
	return NULL;
}

/* read_file returns the whole of path (malloc'd; "" when unreadable). */
static char *read_file(const char *path)
{
	FILE *fp = fopen(path, "r");
	size_t len = 0, cap = 65536, n;
	char *s = malloc(cap);

	assert_non_null(s);
	while (fp && (n = fread(s + len, 1, cap - len - 1, fp)) > 0) {
		len += n;
		if (cap - len < 4096)
			assert_non_null(s = realloc(s, cap *= 2));
	}
	s[len] = '\0';
	if (fp)
		fclose(fp);
	return s;
}

static bool log_has(struct fixture *f, const char *needle)
{
	char *log = read_file(f->h.log);
	bool has = strstr(log, needle) != NULL;

	free(log);
	return has;
}

/* wait_log waits until berthd's log holds needle. */
static void wait_log(struct fixture *f, const char *needle)
{
	for (int64_t end = now_ms() + WAIT_MS; now_ms() < end; sleep_ms(20))
		if (log_has(f, needle))
			return;
	print_error("---- berthd's log ----\n%s\n", read_file(f->h.log));
	fail_msg("berthd never logged \"%s\"", needle);
}

/* log_line_with returns a copy of the first line of berthd's log that holds
 * every one of the NULL-ended needles, or NULL. */
static char *log_line_with(struct fixture *f, ...)
{
	char *log = read_file(f->h.log), *save = NULL, *found = NULL;

	for (char *l = strtok_r(log, "\n", &save); l && !found;
	     l = strtok_r(NULL, "\n", &save)) {
		bool all = true;
		va_list ap;
		const char *n;

		va_start(ap, f);
		while (all && (n = va_arg(ap, const char *)))
			all = strstr(l, n) != NULL;
		va_end(ap);
		if (all)
			found = strdup(l);
	}
	free(log);
	return found;
}

/* wait_exit waits up to ms for berthd to exit and returns its exit
 * status (-1 for a signal); it fails the test when berthd is still
 * running then. */
static int wait_exit(struct fixture *f, int64_t ms)
{
	int status;

	for (int64_t end = now_ms() + ms; now_ms() < end; sleep_ms(10)) {
		if (waitpid(f->h.pid, &status, WNOHANG) == f->h.pid) {
			f->h.pid = 0;
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		}
	}
	fail_msg("berthd did not exit within %lld ms", (long long)ms);
	return -1;
}

/* read_pid waits for a tool to write its pid into path. */
static pid_t read_pid(const char *path)
{
	for (int64_t end = now_ms() + WAIT_MS; now_ms() < end; sleep_ms(20)) {
		FILE *fp = fopen(path, "r");
		int pid = 0;

		if (fp && fscanf(fp, "%d", &pid) == 1 && pid > 0) {
			fclose(fp);
			return pid;
		}
		if (fp)
			fclose(fp);
	}
	fail_msg("no pid in %s", path);
	return 0;
}

/* pid_gone is true when pid has exited (a zombie nobody reaped yet
 * counts: it runs nothing). */
static bool pid_gone(pid_t pid)
{
	char path[64], *stat;
	const char *paren;
	bool gone;

	if (kill(pid, 0) != 0)
		return errno == ESRCH;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	stat = read_file(path);
	paren = strrchr(stat, ')');
	gone = !paren || (paren[1] == ' ' && paren[2] == 'Z');
	free(stat);
	return gone;
}

/* run_berthd runs berthd with args to its end (for options it refuses)
 * and returns its exit status, with its stderr in *err (malloc'd). */
static int run_berthd(char **err, ...)
{
	const char *argv[32] = {getenv("BERTHD")};
	char path[] = "/tmp/berthd-err-XXXXXX";
	int fd = mkstemp(path), status, n = 1;
	va_list ap;
	pid_t pid;

	assert_true(fd >= 0);
	va_start(ap, err);
	while (n < 31 && (argv[n] = va_arg(ap, const char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;
	pid = harness_fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	close(fd);
	*err = read_file(path);
	unlink(path);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* events_of returns the types of job id's events, as "created started
 * ..." (malloc'd), and the data of the last "retrying" one in *retry. */
static char *events_of(struct fixture *f, const char *id, json_t **retry)
{
	json_t *res = harness_call(f->c, "events/poll",
				   json_pack("{s:s, s:i}", "jobId", id,
					     "limit", 1000),
				   NULL);
	char *s = calloc(1, 4096);
	size_t i;
	json_t *ev;

	assert_non_null(s);
	if (retry)
		*retry = NULL;
	json_array_foreach(json_object_get(res, "events"), i, ev) {
		strncat(s, jstr(ev, "type"), 4000 - strlen(s));
		strcat(s, " ");
		if (retry && strcmp(jstr(ev, "type"), "retrying") == 0) {
			json_decref(*retry);
			*retry = json_incref(json_object_get(ev, "data"));
		}
	}
	json_decref(res);
	return s;
}

static void pause_tool(struct fixture *f, const char *name)
{
	json_decref(harness_call(f->c, "tools/pause",
				 json_pack("{s:s}", "name", name), NULL));
}

/* ---- durations -------------------------------------------------------- */

static void options__take_durations_with_the_units_of_the_cli(void **state)
{
	static const char *const args[] = {
		"--default-timeout", "1.5s", "--retention", "7d",
		"--lease-ms", "20s", "--shutdown-grace", "2s",
		"--start-timeout", "90s", NULL,
	};
	struct fixture *f = *state;
	json_t *job;
	char *err;

	start(f, args);
	/* noop names no timeout: the daemon's default is the job's. */
	job = harness_call(f->c, "jobs/submit",
			   json_pack("{s:s, s:{}}", "tool", "noop", "input"),
			   NULL);
	assert_int_equal(json_integer_value(json_object_get(job, "timeoutMs")),
			 1500);
	json_decref(job);

	assert_int_equal(run_berthd(&err, "--retention", "7x", NULL), 2);
	assert_non_null(strstr(err, "--retention takes a duration"));
	assert_non_null(strstr(err, "'7x'"));
	free(err);
	assert_int_equal(run_berthd(&err, "--lease-ms", "50ms", NULL), 2);
	assert_non_null(strstr(err, "at least 100 ms"));
	free(err);
	assert_int_equal(run_berthd(&err, "--shutdown-grace", "-1s", NULL), 2);
	free(err);
	/* 0 is a duration, too short: the message says how short may be
	 * (before: as if 0 were not a duration). */
	assert_int_equal(run_berthd(&err, "--start-timeout", "0", NULL), 2);
	assert_non_null(strstr(err, "--start-timeout takes a duration of at least 1 ms"));
	free(err);
	assert_int_equal(run_berthd(&err, "--help", NULL), 0);
	free(err);
}

/* ---- shutdown --------------------------------------------------------- */

static void sigterm__lets_a_running_job_finish_within_the_grace(void **state)
{
	static const char *const args[] = {"--shutdown-grace", "2m", NULL};
	struct fixture *f = *state;
	json_t *job;
	char *id;

	start(f, args);
	id = submit(f, json_pack("{s:s, s:{s:i}}", "tool", "sleep", "input",
				 "ms", 1500));
	json_decref(wait_status(f, id, "running"));
	kill(f->h.pid, SIGTERM);
	wait_log(f, "SIGTERM: stopping; 1 running job may finish within 120s "
		    "(--shutdown-grace)");
	assert_int_equal(wait_exit(f, WAIT_MS), 0);
	disconnect(f);
	assert_int_equal(harness_restart(&f->h), 0);
	reconnect(f);
	job = get(f, id);
	assert_string_equal(jstr(job, "status"), "completed");
	assert_int_equal(json_integer_value(json_object_get(job, "attempt")), 1);
	json_decref(job);
	free(id);
}

static void sigterm__with_no_grace__puts_a_running_job_back_at_once(
	void **state)
{
	static const char *const args[] = {"--shutdown-grace", "0",
					   "--log-level", "debug", NULL};
	struct fixture *f = *state;
	json_t *job, *retry;
	char *id, *types;

	start(f, args);
	id = submit(f, json_pack("{s:s, s:{s:i}}", "tool", "sleep", "input",
				 "ms", 600000));
	json_decref(wait_status(f, id, "running"));
	pause_tool(f, "sleep"); /* so that it does not start again */
	kill(f->h.pid, SIGTERM);
	/* The job would sleep for 10 minutes; the stop does not wait. */
	assert_int_equal(wait_exit(f, WAIT_MS), 0);
	assert_true(log_has(f, "SIGTERM: stopping; 1 running job stopped now "
			       "and put back to pending (--shutdown-grace 0)"));
	/* The put-back is a transition like the others in the debug log
	 * (before: made after the worker stopped hearing events, unlogged). */
	{
		char *line = log_line_with(f, " debug job ", id,
					   "(sleep): retrying, now pending", NULL);

		assert_non_null(line);
		free(line);
	}
	disconnect(f);
	assert_int_equal(harness_restart(&f->h), 0);
	reconnect(f);
	job = get(f, id);
	assert_string_equal(jstr(job, "status"), "pending");
	/* A clean stop uses up no retry. */
	assert_int_equal(json_integer_value(json_object_get(job, "attempt")), 1);
	json_decref(job);
	types = events_of(f, id, &retry);
	assert_string_equal(types, "created started retrying ");
	assert_string_equal(jstr(retry, "reason"), "shutdown");
	json_decref(retry);
	free(types);
	free(id);
}

static void a_second_signal__stops_at_once_as_after_a_crash(void **state)
{
	static const char *const args[] = {"--shutdown-grace", "5m", NULL};
	struct fixture *f = *state;
	char pidfile[400], *id, *types;
	json_t *job, *retry;
	pid_t tool;

	start(f, args);
	snprintf(pidfile, sizeof pidfile, "%s/hold.pid", f->h.dir);
	id = submit(f, json_pack("{s:s, s:{s:s, s:i}}", "tool", "hold",
				 "input", "pidFile", pidfile, "seconds", 600));
	tool = read_pid(pidfile);
	json_decref(wait_status(f, id, "running"));
	pause_tool(f, "hold");

	kill(f->h.pid, SIGINT);
	wait_log(f, "SIGINT: stopping; 1 running job may finish within 300s "
		    "(--shutdown-grace), then it is stopped and put back to "
		    "pending; a second SIGTERM or SIGINT stops at once");
	assert_false(pid_gone(tool));
	kill(f->h.pid, SIGTERM);
	/* Neither the 5 minutes of grace nor the tool's 10 minutes: the
	 * tool, which ignores SIGTERM, gets SIGKILL. */
	assert_int_equal(wait_exit(f, WAIT_MS), 0);
	assert_true(pid_gone(tool));
	assert_true(log_has(f, "SIGTERM again: stopping now; 1 running job "
			       "stopped, recovered at the next start as after a crash"));

	disconnect(f);
	assert_int_equal(harness_restart(&f->h), 0);
	reconnect(f);
	job = get(f, id);
	assert_string_equal(jstr(job, "status"), "pending");
	/* As after a crash: the interrupted run counts as a try. */
	assert_int_equal(json_integer_value(json_object_get(job, "attempt")), 2);
	json_decref(job);
	types = events_of(f, id, &retry);
	assert_string_equal(types, "created started retrying ");
	assert_string_equal(jstr(retry, "reason"), "interrupted");
	json_decref(retry);
	free(types);
	free(id);
}

static void a_second_signal__fails_a_job_whose_retries_are_used_up(
	void **state)
{
	struct fixture *f = *state;
	json_t *job;
	char *id;

	start(f, NULL);
	/* sleep allows no retry of its own errors: an interruption still
	 * gets one more try (TOOLS.md, onInterrupt), and the second
	 * interruption, with its tries used up, fails it, as a crash
	 * would. */
	id = submit(f, json_pack("{s:s, s:{s:i}}", "tool", "sleep", "input",
				 "ms", 600000));
	for (int round = 1; round <= 2; round++) {
		json_decref(wait_status(f, id, "running"));
		kill(f->h.pid, SIGTERM);
		wait_log(f, "may finish within 10s (--shutdown-grace)");
		kill(f->h.pid, SIGTERM);
		assert_int_equal(wait_exit(f, WAIT_MS), 0);
		disconnect(f);
		assert_int_equal(harness_restart(&f->h), 0);
		reconnect(f);
		job = get(f, id);
		if (round == 1) {
			assert_int_equal(json_integer_value(json_object_get(
						 job, "attempt")), 2);
			json_decref(job);
			continue;
		}
		assert_string_equal(jstr(job, "status"), "failed");
		assert_string_equal(jstr(json_object_get(job, "error"), "code"),
				    "interrupted");
		assert_non_null(strstr(jstr(json_object_get(job, "error"),
					    "message"),
				       "(attempt 2 of 2)"));
		json_decref(job);
	}
	free(id);
}

/* ---- logs ------------------------------------------------------------- */

static void logs__a_failure_a_timeout_and_a_retry_each_get_a_line(
	void **state)
{
	struct fixture *f = *state;
	char *failed, *timed, *retried, *line;

	start(f, NULL);
	failed = submit(f, json_pack("{s:s, s:{s:s}}", "tool", "fail",
				     "input", "message", "disk on fire"));
	timed = submit(f, json_pack("{s:s, s:{s:i}, s:i}", "tool", "sleep",
				    "input", "ms", 60000, "timeoutMs", 300));
	retried = submit(f, json_pack("{s:s, s:{s:s, s:b}, s:i}", "tool",
				      "fail", "input", "message", "flaky",
				      "retryable", 1, "maxRetries", 1));
	json_decref(wait_status(f, failed, "failed"));
	json_decref(wait_status(f, timed, "timed_out"));
	json_decref(wait_status(f, retried, "failed"));

	line = log_line_with(f, " warn job ", failed,
			     "(fail): failed on attempt 1 of 1: disk on fire",
			     NULL);
	assert_non_null(line);
	free(line);
	line = log_line_with(f, " warn job ", timed,
			     "(sleep): timed out on attempt 1 of 1: timed out "
			     "after 300 ms",
			     NULL);
	assert_non_null(line);
	free(line);
	line = log_line_with(f, " info job ", retried,
			     "(fail): attempt 1 of 2 failed; retry in ",
			     " ms: flaky", NULL);
	assert_non_null(line);
	free(line);
	line = log_line_with(f, " warn job ", retried,
			     "(fail): failed on attempt 2 of 2: flaky", NULL);
	assert_non_null(line);
	free(line);
	/* Nothing else at debug level was written at info. */
	assert_false(log_has(f, " debug "));
	free(failed);
	free(timed);
	free(retried);
}

static void logs__a_restart_after_a_crash_says_what_it_recovered(
	void **state)
{
	struct fixture *f = *state;
	char pidfile[400], *held, *slept;

	start(f, NULL);
	snprintf(pidfile, sizeof pidfile, "%s/hold.pid", f->h.dir);
	held = submit(f, json_pack("{s:s, s:{s:s, s:i}}", "tool", "hold",
				   "input", "pidFile", pidfile, "seconds",
				   600));
	slept = submit(f, json_pack("{s:s, s:{s:i}}", "tool", "sleep",
				    "input", "ms", 600000));
	json_decref(wait_status(f, held, "running"));
	json_decref(wait_status(f, slept, "running"));
	pause_tool(f, "hold");
	disconnect(f);
	/* berthd first, then the tool that goes with the crash: killed the
	 * other way round, berthd could see the tool end and commit its
	 * retry before its own kill, and then recovered one job, not two. */
	{
		pid_t tool = read_pid(pidfile);

		assert_int_equal(harness_kill9(&f->h), 0);
		kill(-tool, SIGKILL);
	}
	assert_int_equal(harness_restart(&f->h), 0);
	reconnect(f);
	/* hold allows 2 retries, sleep none of its own errors: an
	 * interruption gets it a second try all the same (TOOLS.md). */
	wait_log(f, "info recovered 2 jobs interrupted by the last stop of "
		    "berthd: 2 back to pending (attempt raised), 0 failed");
	free(held);
	free(slept);
}

static void logs__at_debug_level_every_transition_gets_a_line(void **state)
{
	static const char *const args[] = {"--log-level", "debug", NULL};
	struct fixture *f = *state;
	char *id, *line;

	start(f, args);
	id = submit(f, json_pack("{s:s, s:{}}", "tool", "noop", "input"));
	json_decref(wait_status(f, id, "completed"));
	wait_log(f, "(noop): completed, now completed (event ");
	line = log_line_with(f, " debug job ", id,
			     "(noop): created, now pending (event ", NULL);
	assert_non_null(line);
	free(line);
	line = log_line_with(f, " debug job ", id,
			     "(noop): started, now running (event ", NULL);
	assert_non_null(line);
	free(line);
	free(id);
}

static void logs__a_client_that_does_not_read_is_dropped_with_a_warning(
	void **state)
{
	struct fixture *f = *state;
	size_t big = 1024 * 1024;
	char *text = malloc(big + 64), *line;
	json_t *job;
	char *id;

	assert_non_null(text);
	start(f, NULL);
	memset(text, 'x', big);
	text[big] = '\0';
	job = harness_call(f->c, "jobs/submit",
			   json_pack("{s:s, s:{s:s}, s:i}", "tool", "noop",
				     "input", "blob", text, "delayMs",
				     3600000),
			   NULL);
	id = strdup(jstr(job, "id"));
	json_decref(job);
	/* Ask for the 1 MiB job 100 times and read none of the answers:
	 * past 64 MiB of unread replies berthd cuts the client off. */
	snprintf(text, big, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
		 "\"jobs/get\",\"params\":{\"id\":\"%s\"}}", id);
	for (int i = 0; i < 100; i++)
		if (berth_client_send_line(f->c, text, strlen(text)) < 0)
			break;
	wait_log(f, "dropped: it does not read its replies");
	line = log_line_with(f, " warn connection ",
			     ": dropped: it does not read its replies", NULL);
	assert_non_null(line);
	free(line);
	free(text);
	free(id);
	disconnect(f);
}

/* ---- reload ----------------------------------------------------------- */

/* make_tools makes the test's own --tools folder. */
static void make_tools(struct fixture *f)
{
	snprintf(f->tools, sizeof f->tools, "/tmp/berth-tools-XXXXXX");
	assert_non_null(mkdtemp(f->tools));
}

/*
 * write_tool writes NAME.json into the test's --tools folder: a tool that
 * reads its input, holds a lock folder NAME.lock next to its manifest for
 * sleep seconds and answers {"v": v}. A run that finds the lock taken
 * answers an error instead, so that two runs at once fail the job. Its
 * outputSchema takes that v alone, so that a job checked against another
 * version's schema fails. extra is more manifest members ("" for none).
 */
static void write_tool(struct fixture *f, const char *name, int v,
		       double sleep, const char *extra)
{
	char path[400], tmp[420];
	FILE *fp;

	snprintf(path, sizeof path, "%s/%s.json", f->tools, name);
	snprintf(tmp, sizeof tmp, "%s/.%s.tmp", f->tools, name);
	fp = fopen(tmp, "w");
	assert_non_null(fp);
	fprintf(fp,
		"{\"id\": \"%s\", \"description\": \"version %d\",\n"
		" \"inputSchema\": {\"type\": \"object\"},\n"
		" \"outputSchema\": {\"type\": \"object\", \"properties\": "
		"{\"v\": {\"const\": %d}}, \"required\": [\"v\"]},\n"
		" %s%s"
		" \"command\": [\"/bin/sh\", \"-c\", \"cat >/dev/null; "
		"mkdir %s.lock 2>/dev/null || { echo '{\\\"error\\\": "
		"{\\\"message\\\": \\\"two runs at once\\\"}}'; exit 0; }; "
		"sleep %.1f; rmdir %s.lock; "
		"echo '{\\\"output\\\": {\\\"v\\\": %d}}'\"]}\n",
		name, v, v, extra, *extra ? ",\n" : "", name, sleep, name, v);
	fclose(fp);
	/* Whole or not at all: a reload never reads half a file. */
	assert_int_equal(rename(tmp, path), 0);
}

/* wait_lock waits until a run of tool name holds its lock (write_tool):
 * its run has started, not only its claim. */
static void wait_lock(struct fixture *f, const char *name)
{
	char path[400];
	struct stat st;

	snprintf(path, sizeof path, "%s/%s.lock", f->tools, name);
	for (int64_t end = now_ms() + WAIT_MS; now_ms() < end; sleep_ms(20))
		if (stat(path, &st) == 0)
			return;
	fail_msg("no run of %s started", name);
}

static void write_file(struct fixture *f, const char *name, const char *text)
{
	char path[400];
	FILE *fp;

	snprintf(path, sizeof path, "%s/%s", f->tools, name);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
}

static void remove_tool(struct fixture *f, const char *name)
{
	char path[400];

	snprintf(path, sizeof path, "%s/%s.json", f->tools, name);
	assert_int_equal(unlink(path), 0);
}

/* start_with_tools starts berthd on the test's --tools folder alone. */
static void start_with_tools(struct fixture *f)
{
	const char *args[] = {"--tools", f->tools, NULL};

	f->h.no_examples = true;
	assert_int_equal(harness_start(&f->h, args), 0);
	f->c = harness_connect(&f->h);
	assert_non_null(f->c);
}

/* reload sends SIGHUP and waits for the nth reload's line of totals, which
 * must start with totals. */
static void reload(struct fixture *f, int nth, const char *totals)
{
	char want[256];
	char *log, *p;
	int seen = 0;

	kill(f->h.pid, SIGHUP);
	for (int64_t end = now_ms() + WAIT_MS; seen < nth && now_ms() < end;
	     sleep_ms(20)) {
		log = read_file(f->h.log);
		seen = 0;
		for (p = log; (p = strstr(p, "info reloaded --tools: ")); p++)
			seen++;
		free(log);
	}
	assert_int_equal(seen, nth);
	snprintf(want, sizeof want, "info reloaded --tools: %s", totals);
	log = read_file(f->h.log);
	p = log;
	for (int i = 0; i < nth; i++)
		p = strstr(p + 1, "info reloaded --tools: ");
	if (strncmp(p, want, strlen(want)) != 0)
		print_error("---- berthd's log ----\n%s\n", log);
	assert_memory_equal(p, want, strlen(want));
	free(log);
}

/* tool_json returns the Tool of name in tools/list, or NULL. */
static json_t *tool_json(struct fixture *f, const char *name)
{
	json_t *res = harness_call(f->c, "tools/list", NULL, NULL), *t, *out = NULL;
	size_t i;

	json_array_foreach(json_object_get(res, "tools"), i, t)
		if (strcmp(jstr(t, "name"), name) == 0)
			out = json_incref(t);
	json_decref(res);
	return out;
}

static json_int_t output_v(const json_t *job)
{
	return json_integer_value(json_object_get(json_object_get(job, "output"),
						  "v"));
}

static void sighup__adds_changes_and_removes_tools_and_keeps_serving(
	void **state)
{
	struct fixture *f = *state;
	json_t *job, *t, *err;
	char *id, *waiting;

	make_tools(f);
	write_tool(f, "alpha", 1, 0, "");
	start_with_tools(f);

	/* A new manifest and a changed one. */
	write_tool(f, "beta", 1, 0, "");
	write_tool(f, "alpha", 2, 0, "");
	reload(f, 1, "1 added, 1 changed, 0 removed, 0 unchanged, 0 failed "
		     "to load; 5 tools");
	assert_true(log_has(f, "info reload: tool beta is added ("));
	assert_true(log_has(f, "info reload: tool alpha is changed ("));
	t = tool_json(f, "alpha");
	assert_string_equal(jstr(t, "description"), "version 2");
	json_decref(t);
	id = submit(f, json_pack("{s:s, s:{}}", "tool", "alpha", "input"));
	job = wait_status(f, id, "completed");
	assert_int_equal(output_v(job), 2);
	json_decref(job);
	free(id);

	/* A removed tool: its waiting job stays pending, says why, and runs
	 * when the tool comes back. */
	waiting = submit(f, json_pack("{s:s, s:{}, s:i}", "tool", "beta",
				      "input", "delayMs", 1500));
	remove_tool(f, "beta");
	reload(f, 2, "0 added, 0 changed, 1 removed, 1 unchanged, 0 failed "
		     "to load; 4 tools");
	assert_true(log_has(f, "info reload: tool beta is removed ("));
	assert_true(log_has(f, "beta.json is gone); 1 waiting job (pending, "
			       "awaiting approval or suspended) stays, and a "
			       "job of it runs when a tool beta comes back"));
	assert_null(tool_json(f, "beta"));
	assert_null(harness_call(f->c, "jobs/submit",
				 json_pack("{s:s, s:{}}", "tool", "beta",
					   "input"),
				 &err));
	assert_int_equal(json_integer_value(json_object_get(err, "code")),
			 -32011);
	json_decref(err);
	/* Past its runAt, it is still pending: nothing failed it. */
	job = harness_call(f->c, "jobs/wait",
			   json_pack("{s:s, s:i, s:[s]}", "id", waiting,
				     "timeoutMs", 3000, "until", "completed"),
			   NULL);
	assert_string_equal(jstr(job, "status"), "pending");
	json_decref(job);
	job = get(f, waiting);
	assert_string_equal(jstr(job, "status"), "pending");
	assert_true(json_is_true(json_object_get(job, "toolMissing")));
	json_decref(job);

	write_tool(f, "beta", 3, 0, "");
	reload(f, 3, "1 added, 0 changed, 0 removed, 1 unchanged, 0 failed "
		     "to load; 5 tools");
	job = wait_status(f, waiting, "completed");
	assert_int_equal(output_v(job), 3);
	assert_null(json_object_get(job, "toolMissing"));
	json_decref(job);
	free(waiting);

	/* A manifest that does not load keeps the tool as it was. */
	write_file(f, "alpha.json", "{\"id\": \"alpha\", \"command\": ");
	write_file(f, "gamma.json", "{\"id\": \"gamma\", \"bogus\": 1, "
		   "\"command\": [\"true\"]}");
	/* A manifest cannot take a built-in tool's id, nor another's. */
	write_file(f, "delta.json", "{\"id\": \"noop\", \"command\": "
		   "[\"true\"]}");
	write_file(f, "epsilon.json", "{\"id\": \"beta\", \"command\": "
		   "[\"true\"]}");
	reload(f, 4, "0 added, 0 changed, 0 removed, 1 unchanged, 4 failed "
		     "to load; 5 tools");
	assert_true(log_has(f, "alpha.json: not a JSON file"));
	assert_true(log_has(f, "; tool alpha keeps the definition it had"));
	assert_true(log_has(f, "gamma.json: bogus is not a known field; it "
			       "is not loaded"));
	assert_true(log_has(f, "delta.json: tool noop: id is already "
			       "registered; it is not loaded"));
	assert_true(log_has(f, "epsilon.json: tool beta: id is already "
			       "registered; it is not loaded"));
	id = submit(f, json_pack("{s:s, s:{}}", "tool", "alpha", "input"));
	job = wait_status(f, id, "completed");
	assert_int_equal(output_v(job), 2);
	json_decref(job);
	free(id);
	/* SIGHUP used to kill berthd and leave its socket behind. */
	assert_int_equal(waitpid(f->h.pid, NULL, WNOHANG), 0);
	assert_int_equal(harness_stop(&f->h), 0);
}

static void sighup__a_changed_tools_running_job_finishes_under_the_old_one(
	void **state)
{
	struct fixture *f = *state;
	json_t *old_job, *new_job;
	char *old_id, *new_id;

	make_tools(f);
	write_tool(f, "slow", 1, 5, "\"background\": {\"concurrency\": 1}");
	start_with_tools(f);
	old_id = submit(f, json_pack("{s:s, s:{}}", "tool", "slow", "input"));
	wait_lock(f, "slow");

	/* Version 2 answers {"v": 2} and takes nothing else: the running
	 * job answers {"v": 1}, and is judged by version 1. */
	write_tool(f, "slow", 2, 0, "\"background\": {\"concurrency\": 1}");
	reload(f, 1, "0 added, 1 changed, 0 removed, 0 unchanged, 0 failed "
		     "to load; 4 tools");
	assert_true(log_has(f, "info reload: tool slow is changed (") &&
		    log_has(f, "; 1 running job finishes under the definition "
			       "it started with"));
	/* The old run still holds the tool's one slot: the new job waits
	 * for it (two runs at once would fail one of them). */
	new_id = submit(f, json_pack("{s:s, s:{}}", "tool", "slow", "input"));
	old_job = wait_status(f, old_id, "completed");
	assert_int_equal(output_v(old_job), 1);
	new_job = wait_status(f, new_id, "completed");
	assert_int_equal(output_v(new_job), 2);
	json_decref(old_job);
	json_decref(new_job);
	free(old_id);
	free(new_id);
	/* The old definition went with its last run: nothing leaked (the
	 * sanitizers' exit status says so). */
	disconnect(f);
	assert_int_equal(harness_stop(&f->h), 0);
}

static void sighup__a_folder_that_cannot_be_read_keeps_its_tools(
	void **state)
{
	struct fixture *f = *state;
	char away[300];
	json_t *job;
	char *id;

	make_tools(f);
	write_tool(f, "alpha", 1, 0, "");
	start_with_tools(f);
	snprintf(away, sizeof away, "%s.away", f->tools);
	assert_int_equal(rename(f->tools, away), 0);
	reload(f, 1, "0 added, 0 changed, 0 removed, 0 unchanged, 1 failed "
		     "to load; 4 tools");
	assert_true(log_has(f, ": No such file or directory; the tools of "
			       "this folder keep the definitions they had"));
	assert_int_equal(rename(away, f->tools), 0);
	id = submit(f, json_pack("{s:s, s:{}}", "tool", "alpha", "input"));
	job = wait_status(f, id, "completed");
	assert_int_equal(output_v(job), 1);
	json_decref(job);
	free(id);
}

/* A SIGHUP as soon as the socket exists reloads and never kills berthd:
 * its handler is in place before anything is served (a signal in that
 * window had SIGHUP's default action, and a reload sent by a service
 * manager right after the start ended the daemon). Fifty starts, each
 * signalled the moment its socket file appears. */
static void sighup__as_the_socket_appears__does_not_kill_berthd(void **state)
{
	struct fixture *f = *state;
	const char *berthd = getenv("BERTHD");
	char db[400], sock[400];
	int died = 0;

	assert_non_null(berthd);
	make_tools(f);
	for (int i = 0; i < 50; i++) {
		struct stat st;
		int status = 0;
		pid_t pid;

		snprintf(db, sizeof db, "%s/hup%d.db", f->tools, i);
		snprintf(sock, sizeof sock, "%s/hup%d.sock", f->tools, i);
		pid = harness_fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			int null = open("/dev/null", O_WRONLY);

			dup2(null, 1);
			dup2(null, 2);
			execl(berthd, "berthd", "--db", db, "--socket", sock,
			      "--tools", f->tools, (char *)NULL);
			_exit(127);
		}
		for (int64_t end = now_ms() + WAIT_MS;
		     stat(sock, &st) != 0 && now_ms() < end;)
			usleep(50);
		kill(pid, SIGHUP);
		/* Alive once it serves, and a moment after: the signal was
		 * handled by then. */
		for (int64_t end = now_ms() + WAIT_MS; now_ms() < end;
		     sleep_ms(5)) {
			struct berth_client *c = berth_client_connect(sock);

			if (c) {
				berth_client_close(c);
				sleep_ms(100);
			}
			if (waitpid(pid, &status, WNOHANG) == pid) {
				print_message("berthd %d of 50 ended: %s %d\n",
					      i + 1,
					      WIFSIGNALED(status) ? "signal"
								  : "exit",
					      WIFSIGNALED(status)
						      ? WTERMSIG(status)
						      : WEXITSTATUS(status));
				died++;
				pid = 0;
				break;
			}
			if (c)
				break;
		}
		if (pid > 0) {
			kill(pid, SIGTERM);
			waitpid(pid, &status, 0);
		}
	}
	assert_int_equal(died, 0);
}

static void a_removed_tools_jobs__wait_across_a_restart(void **state)
{
	struct fixture *f = *state;
	json_t *job, *retry;
	char *id, *types;

	make_tools(f);
	write_tool(f, "alpha", 1, 0, "");
	write_tool(f, "beta", 1, 0, "");
	start_with_tools(f);
	id = submit(f, json_pack("{s:s, s:{}, s:i}", "tool", "beta", "input",
				 "delayMs", 1000));
	remove_tool(f, "beta");
	disconnect(f);
	assert_int_equal(harness_restart(&f->h), 0);
	reconnect(f);
	/* Claimed once it is due, and put back: berthd has no beta. */
	wait_log(f, "(beta): no tool of that name is registered here; the "
		    "job waits for one");
	json_decref(wait_status(f, id, "pending"));
	job = get(f, id);
	assert_string_equal(jstr(job, "status"), "pending");
	assert_int_equal(json_integer_value(json_object_get(job, "attempt")), 1);
	assert_true(json_is_true(json_object_get(job, "toolMissing")));
	json_decref(job);
	types = events_of(f, id, &retry);
	assert_string_equal(types, "created started retrying ");
	assert_string_equal(jstr(retry, "reason"), "tool_missing");
	json_decref(retry);
	free(types);

	write_tool(f, "beta", 2, 0, "");
	reload(f, 1, "1 added");
	job = wait_status(f, id, "completed");
	assert_int_equal(output_v(job), 2);
	json_decref(job);
	free(id);
	disconnect(f);
	assert_int_equal(harness_stop(&f->h), 0);
}

/* running_jobs returns server/info's count of running jobs. */
static json_int_t running_jobs(struct fixture *f, json_int_t *size)
{
	json_t *info = harness_call(f->c, "server/info", NULL, NULL);
	json_int_t n = json_integer_value(
		json_object_get(json_object_get(info, "jobs"), "running"));

	if (size)
		*size = json_integer_value(json_object_get(
			json_object_get(info, "workers"), "size"));
	json_decref(info);
	return n;
}

/* Out of the box, jobs that only wait are not held to a few slots: 64
 * sleeps submitted together all run at once (berthd --help, "Slots"),
 * and none takes a thread. --workers defaulted to 4 before, so 4 ran and
 * 60 waited. */
static void defaults__sixty_four_sleeps_run_at_once(void **state)
{
	struct fixture *f = *state;
	char *ids[64];
	json_int_t size = 0, running = 0;

	start(f, NULL);
	running_jobs(f, &size);
	assert_true(size >= 64);
	for (int i = 0; i < 64; i++)
		ids[i] = submit(f, json_pack("{s:s, s:{s:i}}", "tool", "sleep",
					     "input", "ms", 600000));
	for (int64_t end = now_ms() + WAIT_MS; now_ms() < end; sleep_ms(50))
		if ((running = running_jobs(f, NULL)) == 64)
			break;
	assert_int_equal(running, 64);
	for (int i = 0; i < 64; i++) {
		json_decref(harness_call(f->c, "jobs/cancel",
					 json_pack("{s:s}", "id", ids[i]), NULL));
		json_decref(wait_status(f, ids[i], "cancelled"));
		free(ids[i]);
	}
	disconnect(f);
	assert_int_equal(harness_stop(&f->h), 0);
}

/* --threads and --workers refuse what is not a number in their range.
 * Through run_berthd, not system(): a berthd that took one would serve
 * until the test died, and only run_berthd's child dies with it. */
static void options__threads_and_workers_are_checked(void **state)
{
	static const char *const bad[][2] = {
		{"--threads", "0"}, {"--threads", "1021"}, {"--threads", "x"},
		{"--workers", "0"}, {"--workers", "100001"},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *err;

		assert_int_equal(run_berthd(&err, bad[i][0], bad[i][1], NULL),
				 2);
		assert_non_null(strstr(err, bad[i][0]));
		free(err);
	}
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(options__take_durations_with_the_units_of_the_cli),
		T(sigterm__lets_a_running_job_finish_within_the_grace),
		T(sigterm__with_no_grace__puts_a_running_job_back_at_once),
		T(a_second_signal__stops_at_once_as_after_a_crash),
		T(a_second_signal__fails_a_job_whose_retries_are_used_up),
		T(logs__a_failure_a_timeout_and_a_retry_each_get_a_line),
		T(logs__a_restart_after_a_crash_says_what_it_recovered),
		T(logs__at_debug_level_every_transition_gets_a_line),
		T(logs__a_client_that_does_not_read_is_dropped_with_a_warning),
		T(sighup__adds_changes_and_removes_tools_and_keeps_serving),
		T(sighup__a_changed_tools_running_job_finishes_under_the_old_one),
		T(sighup__a_folder_that_cannot_be_read_keeps_its_tools),
		T(sighup__as_the_socket_appears__does_not_kill_berthd),
		T(a_removed_tools_jobs__wait_across_a_restart),
		T(defaults__sixty_four_sleeps_run_at_once),
		T(options__threads_and_workers_are_checked),
	};

	if (getenv("BERTH_TEST_FILTER"))
		cmocka_set_test_filter(getenv("BERTH_TEST_FILTER"));
	return cmocka_run_group_tests_name("operating berthd", tests, NULL,
					   NULL);
}

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

#include "tests/harness/harness.h"

#ifndef WORKER_TEST_TOOLS
#error "WORKER_TEST_TOOLS must name tests/worker/tools"
#endif

/* Generous: the machine may be loaded, and nothing here measures speed. */
#define WAIT_MS 60000

struct fixture {
	struct harness h;
	struct berth_client *c;
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

	if (f->c)
		berth_client_close(f->c);
	harness_cleanup(&f->h);
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
	pid = fork();
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
		"--lease-ms", "20s", "--shutdown-grace", "2s", NULL,
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
	static const char *const args[] = {"--shutdown-grace", "0", NULL};
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
			       "stopped, back to pending as after a crash"));

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
	/* sleep allows no retry: a crash would fail it, and so does this. */
	id = submit(f, json_pack("{s:s, s:{s:i}}", "tool", "sleep", "input",
				 "ms", 600000));
	json_decref(wait_status(f, id, "running"));
	kill(f->h.pid, SIGTERM);
	wait_log(f, "may finish within 10s (--shutdown-grace)");
	kill(f->h.pid, SIGTERM);
	assert_int_equal(wait_exit(f, WAIT_MS), 0);
	disconnect(f);
	assert_int_equal(harness_restart(&f->h), 0);
	reconnect(f);
	job = get(f, id);
	assert_string_equal(jstr(job, "status"), "failed");
	assert_string_equal(jstr(json_object_get(job, "error"), "code"),
			    "interrupted");
	assert_non_null(strstr(jstr(json_object_get(job, "error"), "message"),
			       "(attempt 1 of 1)"));
	json_decref(job);
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
	kill(-read_pid(pidfile), SIGKILL); /* the tool goes with the crash */
	disconnect(f);
	assert_int_equal(harness_kill9(&f->h), 0);
	assert_int_equal(harness_restart(&f->h), 0);
	reconnect(f);
	/* hold allows 2 retries, sleep none. */
	wait_log(f, "info recovered 2 jobs interrupted by the last stop of "
		    "berthd: 1 back to pending (attempt raised), 1 failed");
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
	};

	if (getenv("BERTH_TEST_FILTER"))
		cmocka_set_test_filter(getenv("BERTH_TEST_FILTER"));
	return cmocka_run_group_tests_name("operating berthd", tests, NULL,
					   NULL);
}

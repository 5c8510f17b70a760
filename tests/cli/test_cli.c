/*
 * test_cli.c: the berth command ($BERTH), run as a person or a script
 * would, against a real berthd.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/api/support.h"

static struct harness h;

static int start(void **state)
{
	support_start(&h, NULL);
	setenv("BERTH_SOCKET", h.socket, 1);
	return 0;
}

static int stop(void **state)
{
	int rc = harness_stop(&h);

	harness_cleanup(&h);
	return rc == 0 ? 0 : -1;
}

/* slurp reads the whole of fd into a malloc'd string. */
static char *slurp(int fd)
{
	size_t len = 0, cap = 4096;
	char *s = malloc(cap);
	ssize_t n;

	lseek(fd, 0, SEEK_SET);
	while ((n = read(fd, s + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (cap - len < 1024)
			s = realloc(s, cap *= 2);
	}
	s[len] = '\0';
	return s;
}

static int temp_fd(void)
{
	char path[] = "/tmp/berth-cli-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	unlink(path);
	return fd;
}

/*
 * berth runs $BERTH with args (NULL-ended) and input on its stdin, and
 * returns its exit status with its stdout and stderr in *out and *err
 * (malloc'd; either may be NULL to drop it).
 */
static int berth(const char *input, char **out, char **err, ...)
{
	const char *argv[32];
	size_t n = 0;
	int in_fd = temp_fd(), out_fd = temp_fd(), err_fd = temp_fd(), status;
	va_list ap;
	pid_t pid;

	argv[n++] = getenv("BERTH");
	va_start(ap, err);
	while (n < 31 && (argv[n] = va_arg(ap, const char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;
	if (input)
		assert_int_equal(write(in_fd, input, strlen(input)),
				 (ssize_t)strlen(input));
	lseek(in_fd, 0, SEEK_SET);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(in_fd, 0);
		dup2(out_fd, 1);
		dup2(err_fd, 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	if (out)
		*out = slurp(out_fd);
	if (err)
		*err = slurp(err_fd);
	close(in_fd);
	close(out_fd);
	close(err_fd);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* berth_json runs berth with --json, asserts exit 0, and parses stdout. */
#define berth_json(...) berth_json_(__VA_ARGS__, NULL)
static json_t *berth_json_(const char *input, ...)
{
	const char *args[24];
	size_t n = 0;
	char *out = NULL, *err = NULL;
	json_t *v;
	va_list ap;
	int rc;

	va_start(ap, input);
	while (n < 23 && (args[n] = va_arg(ap, const char *)))
		n++;
	va_end(ap);
	for (size_t i = n; i < 23; i++)
		args[i] = NULL;
	rc = berth(input, &out, &err, "--json", args[0], args[1], args[2], args[3],
		   args[4], args[5], args[6], args[7], args[8], args[9], args[10],
		   args[11], args[12], args[13], args[14], args[15], NULL);
	if (rc != 0)
		print_message("berth %s: exit %d: %s\n", args[0], rc, err);
	assert_int_equal(rc, 0);
	v = json_loads(out, JSON_DECODE_ANY, NULL);
	if (!v)
		print_message("not JSON: %s\n", out);
	assert_non_null(v);
	free(out);
	free(err);
	return v;
}

/* ---- usage and exit codes ---------------------------------------------- */

static void help__for_every_subcommand__shows_its_usage(void **state)
{
	static const char *const subs[] = {
		"info", "tools", "submit", "get", "ls", "wait", "resume", "approve",
		"decline", "cancel", "retry", "logs", "events", "pause", "unpause",
	};
	char *out, *err, want[64];

	assert_int_equal(berth(NULL, &out, NULL, "--help", NULL), 0);
	for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
		assert_non_null(strstr(out, subs[i]));
	free(out);
	for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
		snprintf(want, sizeof want, "Usage: berth %s", subs[i]);
		assert_int_equal(berth(NULL, &out, &err, subs[i], "--help", NULL), 0);
		if (!strstr(out, want))
			print_message("berth %s --help printed: %s\n", subs[i], out);
		assert_non_null(strstr(out, want));
		free(out);
		free(err);
		assert_int_equal(berth(NULL, &out, NULL, "help", subs[i], NULL), 0);
		assert_non_null(strstr(out, want));
		free(out);
	}
}

static void usage_errors__exit_2_and_say_why(void **state)
{
	char *err;

	assert_int_equal(berth(NULL, NULL, NULL, NULL), 2);
	assert_int_equal(berth(NULL, NULL, &err, "frobnicate", NULL), 2);
	assert_non_null(strstr(err, "unknown command"));
	free(err);
	assert_int_equal(berth(NULL, NULL, &err, "get", NULL), 2);
	assert_non_null(strstr(err, "missing"));
	free(err);
	assert_int_equal(berth(NULL, NULL, NULL, "get", "a", "b", NULL), 2);
	assert_int_equal(berth(NULL, NULL, &err, "submit", "noop", "{bad", NULL), 2);
	assert_non_null(strstr(err, "not JSON"));
	free(err);
	assert_int_equal(berth(NULL, NULL, NULL, "submit", "--priority", "high",
			       "noop", NULL), 2);
	assert_int_equal(berth(NULL, NULL, NULL, "submit", "--delay", "soon",
			       "noop", NULL), 2);
	assert_int_equal(berth(NULL, NULL, NULL, "ls", "--limit", "0", NULL), 2);
	assert_int_equal(berth(NULL, NULL, &err, "ls", "--bogus", NULL), 2);
	assert_non_null(strstr(err, "--bogus"));
	free(err);
	assert_int_equal(berth(NULL, NULL, NULL, "--socket", NULL), 2);
}

static void no_daemon__exits_3(void **state)
{
	char *err;

	assert_int_equal(berth(NULL, NULL, &err, "--socket", "/nonexistent/berth.sock",
			       "info", NULL), 3);
	assert_non_null(strstr(err, "cannot connect"));
	free(err);
	setenv("BERTH_SOCKET", "/nonexistent/berth.sock", 1);
	assert_int_equal(berth(NULL, NULL, NULL, "ls", NULL), 3);
	setenv("BERTH_SOCKET", h.socket, 1);
}

static void a_refusal__exits_1_with_the_message(void **state)
{
	char *err;

	assert_int_equal(berth(NULL, NULL, &err, "get", "nope", NULL), 1);
	assert_non_null(strstr(err, "not found"));
	free(err);
	assert_int_equal(berth(NULL, NULL, &err, "submit", "api-ask",
			       "{\"question\":5}", NULL), 1);
	assert_non_null(strstr(err, "/question"));
	free(err);
	assert_int_equal(berth(NULL, NULL, &err, "submit", "no-such-tool", NULL), 1);
	free(err);
}

/* ---- the commands ------------------------------------------------------ */

static void info__for_people_and_for_scripts(void **state)
{
	char *out;
	json_t *info;

	assert_int_equal(berth(NULL, &out, NULL, "info", NULL), 0);
	assert_non_null(strstr(out, "database"));
	assert_non_null(strstr(out, h.db));
	free(out);
	info = berth_json(NULL, "info");
	assert_string_equal(jstr(info, "name"), "berth");
	json_decref(info);
	/* --socket overrides $BERTH_SOCKET. */
	setenv("BERTH_SOCKET", "/nonexistent/berth.sock", 1);
	assert_int_equal(berth(NULL, NULL, NULL, "--socket", h.socket, "info", NULL), 0);
	assert_int_equal(berth(NULL, NULL, NULL, "info", "--socket", h.socket, NULL), 0);
	setenv("BERTH_SOCKET", h.socket, 1);
}

static void tools__lists_the_tools(void **state)
{
	char *out;
	json_t *tools;

	assert_int_equal(berth(NULL, &out, NULL, "tools", NULL), 0);
	assert_non_null(strstr(out, "NAME"));
	assert_non_null(strstr(out, "api-ask"));
	free(out);
	tools = berth_json(NULL, "tools");
	assert_true(json_array_size(json_object_get(tools, "tools")) >= 3);
	json_decref(tools);
}

static void submit_wait__prints_the_finished_job(void **state)
{
	json_t *job = berth_json(NULL, "submit", "noop", "{\"x\":1}", "--wait");
	char *out;

	assert_string_equal(jstr(job, "status"), "completed");
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(job, "output"), "x")), 1);
	assert_int_equal(berth(NULL, &out, NULL, "get", jstr(job, "id"), NULL), 0);
	assert_non_null(strstr(out, "completed"));
	assert_non_null(strstr(out, jstr(job, "id")));
	free(out);
	json_decref(job);
}

static void submit__reads_stdin_and_takes_every_option(void **state)
{
	json_t *job = berth_json("{\"y\":2}", "submit", "noop", "-", "--priority", "5",
				 "--delay", "1h", "--idempotency-key", "cli-key",
				 "--timeout", "30s");
	json_t *again;

	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(job, "input"), "y")), 2);
	assert_int_equal(json_integer_value(json_object_get(job, "priority")), 5);
	assert_int_equal(json_integer_value(json_object_get(job, "timeoutMs")), 30000);
	assert_string_equal(jstr(job, "status"), "pending");
	again = berth_json(NULL, "submit", "noop", "{}", "--idempotency-key", "cli-key");
	assert_string_equal(jstr(again, "id"), jstr(job, "id"));
	json_decref(again);
	/* wait --timeout gives the job back as it is. */
	again = berth_json(NULL, "wait", jstr(job, "id"), "--timeout", "200ms");
	assert_string_equal(jstr(again, "status"), "pending");
	json_decref(again);
	again = berth_json(NULL, "cancel", jstr(job, "id"), "--reason", "test");
	assert_string_equal(jstr(again, "status"), "cancelled");
	json_decref(again);
	json_decref(job);
}

static void approve_decline_resume_retry__answer_jobs(void **state)
{
	json_t *a = berth_json(NULL, "submit", "api-approve", "{\"action\":\"go\"}");
	json_t *d = berth_json(NULL, "submit", "api-approve", "{\"action\":\"no\"}");
	json_t *q = berth_json(NULL, "submit", "api-ask", "{\"question\":\"q?\"}");
	json_t *f = berth_json(NULL, "submit", "fail", "{\"message\":\"bad\"}", "--wait");
	json_t *r;
	char *err;

	assert_string_equal(jstr(a, "status"), "awaiting_approval");
	r = berth_json(NULL, "approve", jstr(a, "id"), "--note", "fine");
	assert_string_equal(jstr(r, "status"), "pending");
	json_decref(r);
	r = berth_json(NULL, "decline", jstr(d, "id"), "--reason", "nope");
	assert_string_equal(jstr(r, "status"), "declined");
	json_decref(r);
	assert_int_equal(berth(NULL, NULL, &err, "decline", jstr(d, "id"), NULL), 1);
	assert_non_null(strstr(err, "declined"));
	free(err);

	r = berth_json(NULL, "wait", jstr(q, "id"), "--until", "suspended");
	assert_string_equal(jstr(r, "status"), "suspended");
	json_decref(r);
	r = berth_json("{\"answer\":\"A\"}", "resume", jstr(q, "id"), "-");
	assert_string_equal(jstr(r, "status"), "pending");
	json_decref(r);
	r = berth_json(NULL, "wait", jstr(q, "id"));
	assert_string_equal(jstr(json_object_get(r, "output"), "answer"), "A");
	json_decref(r);

	assert_string_equal(jstr(f, "status"), "failed");
	r = berth_json(NULL, "retry", jstr(f, "id"));
	assert_string_equal(jstr(r, "retryOf"), jstr(f, "id"));
	json_decref(r);
	json_decref(a);
	json_decref(d);
	json_decref(q);
	json_decref(f);
}

static void ls__prints_a_table_or_json_with_filters(void **state)
{
	json_t *job = berth_json(NULL, "submit", "noop", "{}", "--run-id", "cli-run",
				 "--wait");
	json_t *list, *j;
	char *out;
	size_t i;

	assert_int_equal(berth(NULL, &out, NULL, "ls", "--run-id", "cli-run", NULL), 0);
	assert_non_null(strstr(out, "STATUS"));
	assert_non_null(strstr(out, jstr(job, "id")));
	free(out);
	list = berth_json(NULL, "ls", "--status", "completed,failed", "--tool", "noop",
			  "--all");
	assert_true(json_array_size(json_object_get(list, "jobs")) >= 1);
	json_array_foreach(json_object_get(list, "jobs"), i, j) {
		assert_string_equal(jstr(j, "tool"), "noop");
		assert_true(strcmp(jstr(j, "status"), "completed") == 0 ||
			    strcmp(jstr(j, "status"), "failed") == 0);
	}
	json_decref(list);
	json_decref(job);
}

static void pause_and_logs__work(void **state)
{
	json_t *tools, *t, *job;
	char *out;
	size_t i;
	bool paused = false;

	assert_int_equal(berth(NULL, &out, NULL, "pause", "api-log", NULL), 0);
	assert_non_null(strstr(out, "paused"));
	free(out);
	tools = berth_json(NULL, "tools");
	json_array_foreach(json_object_get(tools, "tools"), i, t)
		if (strcmp(jstr(t, "name"), "api-log") == 0)
			paused = json_is_true(json_object_get(t, "paused"));
	json_decref(tools);
	assert_true(paused);
	assert_int_equal(berth(NULL, NULL, NULL, "unpause", "api-log", NULL), 0);
	job = berth_json(NULL, "submit", "api-log", "{}", "--wait");
	assert_int_equal(berth(NULL, &out, NULL, "logs", jstr(job, "id"), NULL), 0);
	assert_non_null(strstr(out, "hello from the tool"));
	free(out);
	json_decref(job);
}

static void events__prints_the_log_and_follows_it(void **state)
{
	json_t *job = berth_json(NULL, "submit", "api-approve", "{\"action\":\"e\"}");
	char *out, *follow_out;
	int fds[2], status;
	pid_t pid;
	size_t len = 0;

	assert_int_equal(berth(NULL, &out, NULL, "--json", "events", "--job",
			       jstr(job, "id"), NULL), 0);
	assert_non_null(strstr(out, "\"created\""));
	assert_non_null(strstr(out, "\"approval_requested\""));
	free(out);
	assert_int_equal(berth(NULL, &out, NULL, "events", "--job", jstr(job, "id"),
			       NULL), 0);
	assert_non_null(strstr(out, "approval_requested"));
	free(out);

	/* events --follow prints what happens next. */
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		execl(getenv("BERTH"), "berth", "--json", "events", "--follow",
		      "--job", jstr(job, "id"), (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	usleep(300000);
	json_decref(berth_json(NULL, "approve", jstr(job, "id")));
	follow_out = calloc(1, 65536);
	while (!strstr(follow_out, "\"completed\"") && len < 65535) {
		struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
		ssize_t n;

		if (poll(&pfd, 1, 30000) != 1)
			break;
		n = read(fds[0], follow_out + len, 65535 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
	close(fds[0]);
	assert_non_null(strstr(follow_out, "\"approved\""));
	assert_non_null(strstr(follow_out, "\"completed\""));
	free(follow_out);
	json_decref(job);
}

static void wait_on_a_terminal__draws_a_progress_bar(void **state)
{
	json_t *job = berth_json(NULL, "submit", "sleep", "{\"ms\":2000}");
	char buf[65536];
	size_t len = 0;
	int master, status;
	pid_t pid = forkpty(&master, NULL, NULL, NULL);

	assert_true(pid >= 0);
	if (pid == 0) {
		execl(getenv("BERTH"), "berth", "wait", jstr(job, "id"), (char *)NULL);
		_exit(127);
	}
	for (;;) {
		struct pollfd pfd = {.fd = master, .events = POLLIN};
		ssize_t n;

		if (poll(&pfd, 1, 30000) != 1)
			break;
		n = read(master, buf + len, sizeof buf - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	waitpid(pid, &status, 0);
	close(master);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (!strstr(buf, "%]") && !strstr(buf, "] "))
		print_message("no progress bar in: %s\n", buf);
	assert_non_null(strstr(buf, "#"));
	assert_non_null(strstr(buf, "%"));
	assert_non_null(strstr(buf, "completed"));
	json_decref(job);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(help__for_every_subcommand__shows_its_usage),
		cmocka_unit_test(usage_errors__exit_2_and_say_why),
		cmocka_unit_test(no_daemon__exits_3),
		cmocka_unit_test(a_refusal__exits_1_with_the_message),
		cmocka_unit_test(info__for_people_and_for_scripts),
		cmocka_unit_test(tools__lists_the_tools),
		cmocka_unit_test(submit_wait__prints_the_finished_job),
		cmocka_unit_test(submit__reads_stdin_and_takes_every_option),
		cmocka_unit_test(approve_decline_resume_retry__answer_jobs),
		cmocka_unit_test(ls__prints_a_table_or_json_with_filters),
		cmocka_unit_test(pause_and_logs__work),
		cmocka_unit_test(events__prints_the_log_and_follows_it),
		cmocka_unit_test(wait_on_a_terminal__draws_a_progress_bar),
	};

	if (getenv("BERTH_TEST_FILTER"))
		cmocka_set_test_filter(getenv("BERTH_TEST_FILTER"));
	return cmocka_run_group_tests(tests, start, stop);
}

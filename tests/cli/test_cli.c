/*
 * test_cli.c: the berth command ($BERTH), run as a person or a script
 * would, against a real berthd.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/api/support.h"
#include "tests/harness/child.h"

static struct harness h;
/* The TCP test's berthd; the group's teardown stops it when the test
 * failed before it could. */
static struct harness tcp;

static int start(void **state)
{
	/* The api tests' tools, and this test's own (tools/). */
	const char *const extra[] = {"--tools", getenv("BERTH_CLI_TOOLS"), NULL};

	support_start(&h, getenv("BERTH_CLI_TOOLS") ? extra : NULL);
	setenv("BERTH_SOCKET", h.socket, 1);
	return 0;
}

static int stop(void **state)
{
	int rc = harness_stop(&h);

	harness_cleanup(&h);
	harness_cleanup(&tcp);
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
	pid = harness_fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(in_fd, 0);
		dup2(out_fd, 1);
		dup2(err_fd, 2);
		/* A command that hangs dies of SIGALRM (kept across the
		 * exec), and its test fails, rather than wait for meson. */
		alarm(60);
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
	/* Each message names what was wrong (before: "unknown command
	 * '--bogus'", "the argument is not JSON" for --context, and
	 * "take a number, not '0'"). */
	assert_int_equal(berth(NULL, NULL, &err, "--bogus", "info", NULL), 2);
	assert_non_null(strstr(err, "unknown option '--bogus'"));
	free(err);
	assert_int_equal(berth(NULL, NULL, &err, "submit", "noop", "{}",
			       "--context", "nope", NULL), 2);
	assert_non_null(strstr(err, "--context is not JSON"));
	free(err);
	assert_int_equal(berth(NULL, NULL, &err, "logs", "x", "--limit", "0",
			       NULL), 2);
	assert_non_null(strstr(err, "--limit takes a number of lines, 1 or more"));
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
	/* The old parser took these (nan: undefined behaviour). */
	assert_int_equal(berth(NULL, NULL, NULL, "submit", "--timeout", "nan",
			       "noop", NULL), 2);
	assert_int_equal(berth(NULL, NULL, NULL, "submit", "--timeout", "1e3",
			       "noop", NULL), 2);
	assert_int_equal(berth(NULL, NULL, NULL, "ls", "--limit", "0", NULL), 2);
	assert_int_equal(berth(NULL, NULL, &err, "ls", "--bogus", NULL), 2);
	assert_non_null(strstr(err, "--bogus"));
	free(err);
	assert_int_equal(berth(NULL, NULL, NULL, "--socket", NULL), 2);
	/* A tcp: address without a port number is the command line's
	 * mistake (before: exit 3, "Invalid argument"). */
	setenv("BERTH_TOKEN", "some-token", 1);
	assert_int_equal(berth(NULL, NULL, &err, "--socket", "tcp:127.0.0.1",
			       "info", NULL), 2);
	assert_non_null(strstr(err, "give tcp:HOST:PORT"));
	free(err);
	assert_int_equal(berth(NULL, NULL, &err, "--socket", "tcp:127.0.0.1:abc",
			       "info", NULL), 2);
	free(err);
	unsetenv("BERTH_TOKEN");
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

/* count counts the times needle is in s. */
static int count(const char *s, const char *needle)
{
	int n = 0;

	for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static void a_refusal__exits_1_with_the_message(void **state)
{
	char *err;

	assert_int_equal(berth(NULL, NULL, &err, "get", "nope", NULL), 1);
	assert_string_equal(err, "berth: not found: no job nope\n");
	free(err);
	assert_int_equal(berth(NULL, NULL, &err, "submit", "no-such-tool", NULL), 1);
	assert_string_equal(err, "berth: not found: no tool no-such-tool\n");
	free(err);
}

static void params_berthd_finds_invalid__are_usage_errors_said_once(void **state)
{
	char *err;

	/* A JSON input that fails the tool's schema, each error once. */
	assert_int_equal(berth(NULL, NULL, &err, "submit", "api-ask",
			       "{\"question\":5}", NULL), 2);
	assert_non_null(strstr(err, "the input does not match the inputSchema"));
	assert_int_equal(count(err, "/question: must be string"), 1);
	free(err);
	/* The root of a document is "(root)", as berth validate says. */
	assert_int_equal(berth(NULL, NULL, &err, "submit", "api-ask", "[]", NULL),
			 2);
	assert_non_null(strstr(err, "  (root): must be object"));
	assert_null(strstr(err, "  /:"));
	free(err);
	/* A params error is in berthd's message already: said once. */
	assert_int_equal(berth(NULL, NULL, &err, "ls", "--cursor", "made-up", NULL),
			 2);
	assert_int_equal(count(err, "cursor is not one this server gave out"), 1);
	free(err);
}

static void json__makes_every_error_one_json_object_on_stderr(void **state)
{
	char *out, *err;
	json_t *e;

	assert_int_equal(berth(NULL, &out, &err, "--json", "get", "nope", NULL), 1);
	assert_string_equal(out, "");
	e = json_loads(err, 0, NULL);
	assert_non_null(e);
	assert_int_equal(json_integer_value(json_object_get(e, "exitStatus")), 1);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(e,
			 "error"), "code")), -32011);
	assert_string_equal(jstr(json_object_get(e, "error"), "message"),
			    "not found: no job nope");
	json_decref(e);
	free(out);
	free(err);

	assert_int_equal(berth(NULL, NULL, &err, "--json", "submit", "api-ask",
			       "{}", NULL), 2);
	e = json_loads(err, 0, NULL);
	assert_non_null(e);
	assert_int_equal(json_integer_value(json_object_get(e, "exitStatus")), 2);
	assert_true(json_array_size(json_object_get(json_object_get(
			json_object_get(e, "error"), "data"), "errors")) >= 1);
	json_decref(e);
	free(err);

	assert_int_equal(berth(NULL, NULL, &err, "--json", "frobnicate", NULL), 2);
	e = json_loads(err, 0, NULL);
	assert_non_null(e);
	assert_int_equal(json_integer_value(json_object_get(e, "exitStatus")), 2);
	assert_non_null(strstr(jstr(json_object_get(e, "error"), "message"),
			       "unknown command"));
	json_decref(e);
	free(err);

	assert_int_equal(berth(NULL, NULL, &err, "--json", "--socket",
			       "/nonexistent/berth.sock", "info", NULL), 3);
	e = json_loads(err, 0, NULL);
	assert_non_null(e);
	assert_int_equal(json_integer_value(json_object_get(e, "exitStatus")), 3);
	json_decref(e);
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
	/* Each tool's kind, and a worker tool's workers ("-" for the
	 * others), as README.md shows (before: neither). */
	assert_non_null(strstr(out, "KIND"));
	assert_non_null(strstr(out, "WORKERS"));
	{
		const char *line = strstr(out, "\napi-ask ");

		assert_non_null(line);
		assert_true(strstr(line, " external ") != NULL &&
			    strstr(line, " external ") < strchr(line + 1, '\n'));
	}
	free(out);
	assert_int_equal(berth(NULL, &out, NULL, "tools", "api-ask", NULL), 0);
	assert_non_null(strstr(out, "\nkind        external\n"));
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

/* Reals are shown in the fewest digits that read back as the same number:
 * 69.8, not jansson's 69.799999999999997; a number that needs 17 digits
 * keeps them. */
static void get__shows_reals_as_they_were_written(void **state)
{
	json_t *job = berth_json(NULL, "submit", "noop",
				 "{\"t\":69.8,\"u\":[0.1,-2.5e-7]}", "--wait");
	json_t *exact;
	char *out;

	assert_string_equal(jstr(job, "status"), "completed");
	assert_int_equal(berth(NULL, &out, NULL, "get", jstr(job, "id"), NULL), 0);
	assert_non_null(strstr(out, "69.8"));
	assert_null(strstr(out, "69.79999"));
	assert_non_null(strstr(out, "0.1"));
	assert_null(strstr(out, "0.10000"));
	free(out);
	assert_int_equal(berth(NULL, &out, NULL, "get", jstr(job, "id"),
			       "--json", NULL), 0);
	assert_non_null(strstr(out, "69.8"));
	assert_null(strstr(out, "69.79999"));
	free(out);
	json_decref(job);
	/* 0.1 + 0.2 is 0.30000000000000004, which 15 or 16 digits are not. */
	exact = berth_json(NULL, "submit", "noop",
			   "{\"s\":0.30000000000000004}", "--wait");
	assert_int_equal(berth(NULL, &out, NULL, "get", jstr(exact, "id"),
			       "--json", NULL), 0);
	assert_non_null(strstr(out, "0.30000000000000004"));
	free(out);
	json_decref(exact);
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
	json_t *f, *r;
	char *err, *out;

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

	assert_int_equal(berth(NULL, &out, NULL, "--json", "submit", "fail",
			       "{\"message\":\"bad\"}", "--wait", NULL), 5);
	f = json_loads(out, 0, NULL);
	free(out);
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

/* follow runs berth with args (NULL-ended, at most 14) in the background,
 * approves the job id once it has had time to subscribe, and returns what
 * berth printed until the whole line of the job's "completed" came (each
 * read waits 30 s at most); then berth is stopped. */
static char *follow(const char *id, const char *const *args)
{
	const char *argv[16] = {"berth"};
	char *out = calloc(1, 65536);
	const char *done;
	int fds[2], status;
	size_t len = 0, n = 1;
	pid_t pid;

	assert_non_null(out);
	for (; args[n - 1] && n < 15; n++)
		argv[n] = args[n - 1];
	argv[n] = NULL;
	assert_int_equal(pipe(fds), 0);
	pid = harness_fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		execv(getenv("BERTH"), (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	usleep(300000);
	json_decref(berth_json(NULL, "approve", id));
	while ((!(done = strstr(out, "\"completed\"")) || !strchr(done, '\n')) &&
	       len < 65535) {
		struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
		ssize_t got;

		if (poll(&pfd, 1, 30000) != 1)
			break;
		got = read(fds[0], out + len, 65535 - len);
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
	close(fds[0]);
	return out;
}

static void events__prints_the_log_and_follows_it(void **state)
{
	json_t *job = berth_json(NULL, "submit", "api-approve", "{\"action\":\"e\"}");
	char *out, *follow_out;

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
	follow_out = follow(jstr(job, "id"), (const char *const[]){
		"--json", "events", "--follow", "--job", jstr(job, "id"), NULL});
	assert_non_null(strstr(follow_out, "\"approved\""));
	assert_non_null(strstr(follow_out, "\"completed\""));
	free(follow_out);
	json_decref(job);
}

/* events --job of a job that does not exist says so (exit 1), whole id
 * or not. Before, it printed nothing and exited 0, and with --follow
 * followed forever (berth() kills a command after 60 s). */
static void events__of_no_job__says_not_found(void **state)
{
	static const char *const ids[] = {
		"01a239e3-9531-790a-913f-bfe7d7a10ede", "nosuchjob",
	};
	char *out, *err;

	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(berth(NULL, &out, &err, "events", "--job", ids[i],
				       NULL), 1);
		assert_non_null(strstr(err, "not found"));
		free(out);
		free(err);
		assert_int_equal(berth(NULL, &out, &err, "events", "--follow",
				       "--job", ids[i], NULL), 1);
		assert_non_null(strstr(err, "not found"));
		free(out);
		free(err);
	}
}

/* types_of returns the "type"s of berth --json events' lines, each
 * followed by a space, into buf. */
static const char *types_of(const char *out, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (const char *line = out; *line; ) {
		const char *nl = strchr(line, '\n');
		json_t *ev = json_loadb(line, nl ? (size_t)(nl - line)
						 : strlen(line), 0, NULL);

		assert_non_null(ev);
		len += (size_t)snprintf(buf + len, size - len, "%s ",
					jstr(ev, "type"));
		assert_true(len < size);
		json_decref(ev);
		line = nl ? nl + 1 : line + strlen(line);
	}
	return buf;
}

static void events__with_type__prints_only_those_types(void **state)
{
	json_t *job = berth_json(NULL, "submit", "api-approve", "{\"action\":\"t\"}");
	const char *id = jstr(job, "id");
	char *out, *err, *follow_out, buf[256];

	/* The log, without --follow: the names comma-separated, or the
	 * option repeated. */
	assert_int_equal(berth(NULL, &out, NULL, "--json", "events", "--job", id,
			       "--type", "approval_requested", NULL), 0);
	assert_string_equal(types_of(out, buf, sizeof buf), "approval_requested ");
	free(out);
	assert_int_equal(berth(NULL, &out, NULL, "--json", "events", "--job", id,
			       "--type", "completed,created", "--type",
			       "approved", NULL), 0);
	assert_string_equal(types_of(out, buf, sizeof buf), "created ");
	free(out);
	assert_int_equal(berth(NULL, &out, NULL, "events", "--job", id, "--type",
			       "started", NULL), 0);
	assert_string_equal(out, "");
	free(out);

	/* --follow from the start of the log: berthd sends only those, the
	 * ones before the approval (replayed) and after it (live) alike. */
	follow_out = follow(id, (const char *const[]){
		"--json", "events", "--follow", "--since", "0", "--job", id,
		"--type", "approval_requested,completed", NULL});
	assert_string_equal(types_of(follow_out, buf, sizeof buf),
			    "approval_requested completed ");
	free(follow_out);

	/* A name that is not an event type, or an empty one, is a usage
	 * error that names it, with or without --follow. */
	assert_int_equal(berth(NULL, NULL, &err, "events", "--type", "finished",
			       NULL), 2);
	assert_non_null(strstr(err, "--type takes event types (created, "));
	assert_non_null(strstr(err, "not 'finished'"));
	free(err);
	assert_int_equal(berth(NULL, NULL, &err, "events", "--follow", "--type",
			       "completed,,failed", NULL), 2);
	assert_non_null(strstr(err, "--type 'completed,,failed' has an empty "
				    "name"));
	free(err);
	assert_int_equal(berth(NULL, NULL, &err, "events", "--type", "", NULL), 2);
	assert_non_null(strstr(err, "has an empty name"));
	free(err);
	json_decref(job);
}

/*
 * A relay between berth and berthd, in a child process: it listens on its
 * own socket, takes one connection, passes the bytes both ways to
 * berthd's, and writes what berth sent to sent_fd and what berthd
 * answered to got_fd, so that a test sees the requests berth made and
 * what came back. It ends when either side closes.
 */
struct relay {
	char path[sizeof ((struct sockaddr_un *)0)->sun_path];
	pid_t pid;
	int sent_fd, got_fd;
};

/* sun_set puts path into a's sun_path, which it must fit. */
static void sun_set(struct sockaddr_un *a, const char *path)
{
	assert_true(strlen(path) < sizeof a->sun_path);
	memcpy(a->sun_path, path, strlen(path) + 1);
}

static void relay_start(struct relay *r)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct sockaddr_un b = {.sun_family = AF_UNIX};
	int lfd;

	sun_set(&b, h.socket);
	assert_true(strlen(h.dir) + sizeof "/relay.sock" <= sizeof r->path);
	strcpy(r->path, h.dir);
	strcat(r->path, "/relay.sock");
	sun_set(&a, r->path);
	unlink(r->path);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(listen(lfd, 1), 0);
	r->sent_fd = temp_fd();
	r->got_fd = temp_fd();
	r->pid = fork();
	assert_true(r->pid >= 0);
	if (r->pid == 0) {
		int cfd = accept(lfd, NULL, NULL), dfd = socket(AF_UNIX, SOCK_STREAM, 0);
		struct pollfd p[2] = {{cfd, POLLIN, 0}, {dfd, POLLIN, 0}};
		char buf[65536];

		if (cfd < 0 || connect(dfd, (struct sockaddr *)&b, sizeof b) != 0)
			_exit(1);
		for (;;) {
			if (poll(p, 2, 60000) <= 0)
				_exit(1);
			for (int i = 0; i < 2; i++) {
				ssize_t n;

				if (!p[i].revents)
					continue;
				n = read(p[i].fd, buf, sizeof buf);
				if (n <= 0)
					_exit(0);
				if (write(i ? r->got_fd : r->sent_fd, buf, (size_t)n) != n ||
				    write(i ? cfd : dfd, buf, (size_t)n) != n)
					_exit(1);
			}
		}
	}
	close(lfd);
}

/* relay_end waits for the relay to end and returns what berth sent and
 * what berthd answered (malloc'd). */
static void relay_end(struct relay *r, char **sent, char **got)
{
	int status;

	assert_int_equal(waitpid(r->pid, &status, 0), r->pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	*sent = slurp(r->sent_fd);
	*got = slurp(r->got_fd);
	close(r->sent_fd);
	close(r->got_fd);
	unlink(r->path);
}

/* polls_of checks each line of sent that is an events/poll: its params'
 * types are exactly types (JSON text). Returns how many there were. */
static int polls_of(const char *sent, const char *types)
{
	json_t *want = json_loads(types, 0, NULL);
	int polls = 0;

	assert_non_null(want);
	for (const char *line = sent; *line;) {
		const char *nl = strchr(line, '\n');
		json_t *m = json_loadb(line, nl ? (size_t)(nl - line) : strlen(line),
				       0, NULL);

		assert_non_null(m);
		if (strcmp(jstr(m, "method"), "events/poll") == 0) {
			assert_true(json_equal(json_object_get(json_object_get(
					m, "params"), "types"), want));
			polls++;
		}
		json_decref(m);
		line = nl ? nl + 1 : line + strlen(line);
	}
	json_decref(want);
	return polls;
}

/* berthd_sent_types returns the types of the events in berthd's answers
 * of got, each followed by a space, in buf. */
static const char *berthd_sent_types(const char *got, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (const char *line = got; *line;) {
		const char *nl = strchr(line, '\n');
		json_t *m = json_loadb(line, nl ? (size_t)(nl - line) : strlen(line),
				       0, NULL), *ev;
		size_t i;

		assert_non_null(m);
		json_array_foreach(json_object_get(json_object_get(m, "result"),
						   "events"), i, ev) {
			len += (size_t)snprintf(buf + len, size - len, "%s ",
						jstr(ev, "type"));
			assert_true(len < size);
		}
		json_decref(m);
		line = nl ? nl + 1 : line + strlen(line);
	}
	return buf;
}

/* events --type without --follow asks berthd for those types: its
 * events/poll requests carry them, and berthd's answers hold nothing
 * else, rather than every event for berth to filter. */
static void events__with_type__asks_berthd_for_those_types_alone(void **state)
{
	json_t *job = berth_json(NULL, "submit", "api-approve", "{\"action\":\"p\"}");
	const char *id = jstr(job, "id");
	char *out, *sent, *got, buf[4096];
	struct relay r;

	json_decref(berth_json(NULL, "approve", id));
	json_decref(berth_json(NULL, "wait", id, "--until", "completed"));

	relay_start(&r);
	assert_int_equal(berth(NULL, &out, NULL, "--socket", r.path, "--json",
			       "events", "--job", id, "--type",
			       "approval_requested", "--type", "completed",
			       NULL), 0);
	relay_end(&r, &sent, &got);
	assert_string_equal(types_of(out, buf, sizeof buf),
			    "approval_requested completed ");
	assert_true(polls_of(sent, "[\"approval_requested\",\"completed\"]") >= 1);
	assert_string_equal(berthd_sent_types(got, buf, sizeof buf),
			    "approval_requested completed ");
	free(out);
	free(sent);
	free(got);

	/* The whole log, from a seq on: the same. */
	relay_start(&r);
	assert_int_equal(berth(NULL, &out, NULL, "--socket", r.path, "--json",
			       "events", "--since", "1", "--type", "approved",
			       NULL), 0);
	relay_end(&r, &sent, &got);
	assert_non_null(strstr(types_of(out, buf, sizeof buf), "approved "));
	assert_null(strstr(buf, "created"));
	assert_true(polls_of(sent, "[\"approved\"]") >= 1);
	for (const char *t = berthd_sent_types(got, buf, sizeof buf); *t;
	     t += strlen("approved "))
		assert_int_equal(strncmp(t, "approved ", 9), 0);
	free(out);
	free(sent);
	free(got);
	json_decref(job);
}

static void wait_on_a_terminal__draws_a_progress_bar(void **state)
{
	json_t *job = berth_json(NULL, "submit", "sleep", "{\"ms\":2000}");
	char buf[65536];
	size_t len = 0;
	int master, status;
	pid_t pid = harness_forkpty(&master);

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

/* wait_exit runs `berth --json ARGS...` and returns its exit status, the
 * job it printed in *job (when job is not NULL) and stderr in *err (when
 * err is not NULL). */
#define wait_exit(job, err, ...) wait_exit_(job, err, __VA_ARGS__, NULL)
static int wait_exit_(json_t **job, char **err, ...)
{
	const char *a[12] = {0};
	char *out;
	va_list ap;
	size_t n = 0;
	int rc;

	va_start(ap, err);
	while (n < 11 && (a[n] = va_arg(ap, const char *)))
		n++;
	va_end(ap);
	rc = berth(NULL, &out, err, "--json", a[0], a[1], a[2], a[3], a[4],
		   a[5], a[6], a[7], a[8], a[9], NULL);
	if (job) {
		*job = json_loads(out, 0, NULL);
		if (!*job)
			print_message("not JSON: %s\n", out);
		assert_non_null(*job);
	}
	free(out);
	return rc;
}

static void exit_status__of_a_wait__says_how_the_job_ended(void **state)
{
	json_t *job, *d, *c, *x, *p;
	char *err;

	assert_int_equal(wait_exit(&job, NULL, "submit", "noop", "{}", "--wait"), 0);
	assert_string_equal(jstr(job, "status"), "completed");
	json_decref(job);
	assert_int_equal(wait_exit(&job, NULL, "submit", "fail",
				   "{\"message\":\"no\"}", "--wait"), 5);
	assert_string_equal(jstr(job, "status"), "failed");
	json_decref(job);
	assert_int_equal(wait_exit(&job, NULL, "submit", "sleep",
				   "{\"ms\":60000}", "--timeout", "200ms",
				   "--wait"), 6);
	assert_string_equal(jstr(job, "status"), "timed_out");
	json_decref(job);

	d = berth_json(NULL, "submit", "api-approve", "{\"action\":\"d\"}");
	json_decref(berth_json(NULL, "decline", jstr(d, "id")));
	assert_int_equal(wait_exit(NULL, NULL, "wait", jstr(d, "id")), 7);
	/* Unless --until names the status: then it is what was waited for. */
	assert_int_equal(wait_exit(NULL, NULL, "wait", jstr(d, "id"), "--until",
				   "declined"), 0);
	c = berth_json(NULL, "submit", "noop", "{}", "--delay", "1h");
	json_decref(berth_json(NULL, "cancel", jstr(c, "id")));
	assert_int_equal(wait_exit(NULL, NULL, "wait", jstr(c, "id")), 8);
	x = berth_json(NULL, "submit", "api-approve", "{\"action\":\"x\"}",
		       "--ttl", "200ms");
	assert_int_equal(wait_exit(&job, NULL, "wait", jstr(x, "id"), "--until",
				   "expired,completed"), 0);
	json_decref(job);
	assert_int_equal(wait_exit(NULL, NULL, "wait", jstr(x, "id")), 9);

	/* The wait's own --timeout ran out first: 4, the job as it is. */
	p = berth_json(NULL, "submit", "noop", "{}", "--delay", "1h");
	assert_int_equal(wait_exit(&job, &err, "wait", jstr(p, "id"), "--timeout",
				   "200ms"), 4);
	assert_string_equal(jstr(job, "status"), "pending");
	assert_non_null(strstr(err, "--timeout passed first: the job is pending"));
	free(err);
	json_decref(job);
	/* A job that waits for approval stopped running: 0. */
	assert_int_equal(wait_exit(&job, NULL, "submit", "api-approve",
				   "{\"action\":\"w\"}", "--wait"), 0);
	assert_string_equal(jstr(job, "status"), "awaiting_approval");
	json_decref(job);
	json_decref(d);
	json_decref(c);
	json_decref(x);
	json_decref(p);
}

static void tools_name__shows_one_tool_readably(void **state)
{
	char *out, *err;
	json_t *tool;

	assert_int_equal(berth(NULL, &out, NULL, "tools", "api-ask", NULL), 0);
	assert_non_null(strstr(out, "api-ask\nAsk a question and return the "
				   "answer.\n"));
	assert_non_null(strstr(out, "\ninput\n  question  string  required"));
	assert_non_null(strstr(out, "\nresume data\n  answer  string  required  "
				   "at least 1 character\n"));
	assert_non_null(strstr(out, "\napproval    not required\n"));
	assert_non_null(strstr(out, "\nbackground  timeout 5m; 0 retries; any "
				   "number at once"));
	assert_non_null(strstr(out, "\npaused      no\n"));
	free(out);
	assert_int_equal(berth(NULL, &out, NULL, "tools", "api-approve", NULL), 0);
	assert_non_null(strstr(out, "approval    required"));
	free(out);
	assert_int_equal(berth(NULL, &out, NULL, "tools", "count-to", NULL), 0);
	assert_non_null(strstr(out, "  delayMs  integer  default 100  0 to 60000"));
	free(out);
	/* A root $ref and allOf (Zod's .and()), a property by $ref, an
	 * anyOf, a required name without a property, exclusive bounds and a
	 * false schema: the input showed "(object)", q was never listed and
	 * submitting {} was refused for it; "page" was "any"; token was not
	 * listed; resume data false read "(any)". */
	assert_int_equal(berth(NULL, &out, NULL, "tools", "cli-shapes", NULL), 0);
	assert_non_null(strstr(out, "\n  q     string   required  at least 1 character\n"));
	assert_non_null(strstr(out, "\n  page  integer  optional  above 0; a multiple of 10\n"));
	assert_non_null(strstr(out, "\nresume data\n  (nothing: every value is refused)\n"));
	assert_non_null(strstr(out, "tenant  string or null  optional"));
	assert_non_null(strstr(out, "token   any             required"));
	free(out);
	tool = berth_json(NULL, "tools", "api-ask");
	assert_string_equal(jstr(tool, "name"), "api-ask");
	assert_non_null(json_object_get(tool, "inputSchema"));
	json_decref(tool);
	assert_int_equal(berth(NULL, NULL, &err, "tools", "nope", NULL), 1);
	assert_string_equal(err, "berth: not found: no tool nope\n");
	free(err);
}

/* berthd's refusal names what the request held: a member's name with a
 * terminal escape reached the terminal as one. */
static void refusals__print_the_requests_text_escaped(void **state)
{
	char *err;

	assert_int_equal(berth(NULL, NULL, &err, "submit", "weather-tool",
			       "{\"location\":\"x\",\"k\\u001b]0;t\\u0007\":1}",
			       NULL),
			 2);
	assert_null(strchr(err, '\033'));
	assert_null(strchr(err, '\007'));
	assert_non_null(strstr(err, "'k\\u001b]0;t\\u0007'"));
	free(err);
}

static void ids__may_be_given_by_a_unique_prefix(void **state)
{
	json_t *a = berth_json(NULL, "submit", "api-approve", "{\"action\":\"p\"}");
	json_t *b = berth_json(NULL, "submit", "api-approve", "{\"action\":\"q\"}");
	json_t *r;
	char prefix[40], common[40], upper[40], *out, *err;
	size_t n = 0;

	/* Ids begin with their time: 30 characters reach into the random
	 * part, and what a and b share begins both. */
	while (jstr(a, "id")[n] == jstr(b, "id")[n])
		n++;
	snprintf(prefix, sizeof prefix, "%.30s", jstr(a, "id"));
	snprintf(common, sizeof common, "%.*s", (int)n, jstr(a, "id"));
	assert_int_equal(berth(NULL, &out, NULL, "get", prefix, NULL), 0);
	assert_non_null(strstr(out, jstr(a, "id")));
	free(out);
	/* In upper case too, a prefix or the whole id. */
	snprintf(upper, sizeof upper, "%s", jstr(a, "id"));
	for (char *p = upper; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	assert_int_equal(berth(NULL, &out, NULL, "get", upper, NULL), 0);
	assert_non_null(strstr(out, jstr(a, "id")));
	free(out);
	upper[30] = '\0';
	assert_int_equal(berth(NULL, &out, NULL, "get", upper, NULL), 0);
	assert_non_null(strstr(out, jstr(a, "id")));
	free(out);
	r = berth_json(NULL, "approve", prefix, "--note", "by prefix");
	assert_string_equal(jstr(r, "id"), jstr(a, "id"));
	assert_string_equal(jstr(r, "status"), "pending");
	json_decref(r);
	/* Ambiguous: a usage error naming the jobs. */
	if (n > 0) {
		assert_int_equal(berth(NULL, NULL, &err, "cancel", common, NULL), 2);
		assert_non_null(strstr(err, " is ambiguous: it begins "));
		assert_non_null(strstr(err, "; give more of the id"));
		free(err);
	}
	/* No job begins so: the phrase of a missing job. */
	assert_int_equal(berth(NULL, NULL, &err, "get", "ffff", NULL), 1);
	assert_string_equal(err, "berth: not found: no job ffff\n");
	free(err);
	r = berth_json(NULL, "decline", jstr(b, "id"));
	json_decref(r);
	json_decref(a);
	json_decref(b);
}

static void wording__progress_is_100_percent_once_completed(void **state)
{
	json_t *job = berth_json(NULL, "submit", "sleep", "{\"ms\":350}", "--wait");
	json_t *a;
	char *out;

	/* sleep reports every 100 ms: the last report was not 350 of 350. */
	assert_true(json_number_value(json_object_get(json_object_get(job,
			"progress"), "progress")) < 350);
	assert_int_equal(berth(NULL, &out, NULL, "get", jstr(job, "id"), NULL), 0);
	assert_non_null(strstr(out, "\nprogress         100% ("));
	free(out);
	assert_int_equal(berth(NULL, &out, NULL, "ls", "--limit", "1", NULL), 0);
	assert_non_null(strstr(out, "  100%  "));
	free(out);
	json_decref(job);
	/* approve --note is kept as the approval's note. */
	job = berth_json(NULL, "submit", "api-approve", "{\"action\":\"n\"}");
	a = berth_json(NULL, "approve", jstr(job, "id"), "--note", "looks fine");
	assert_string_equal(jstr(json_object_get(a, "approval"), "note"), "looks fine");
	assert_null(json_object_get(json_object_get(a, "approval"), "reason"));
	json_decref(a);
	json_decref(job);
}

/* write_temp writes text to a new temporary file and returns its path
 * (malloc'd). */
static char *write_temp(const char *text)
{
	char *path = strdup("/tmp/berth-cli-doc-XXXXXX");
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static void validate__with_json__prints_its_verdict_and_errors_as_json(
	void **state)
{
	char *schema = write_temp("{\"type\":\"object\",\"properties\":"
				  "{\"a\":{\"type\":\"string\",\"minLength\":1}}}");
	char *bad = write_temp("{\"a\":\"\"}"), *good = write_temp("{\"a\":\"x\"}");
	char *out, *err;
	json_t *v;

	assert_int_equal(berth(NULL, &out, NULL, "--json", "validate", schema, bad,
			       NULL), 1);
	v = json_loads(out, 0, NULL);
	assert_non_null(v);
	assert_true(json_is_false(json_object_get(v, "valid")));
	assert_string_equal(jstr(json_array_get(json_object_get(v, "errors"), 0),
				 "message"), "must have at least 1 character");
	json_decref(v);
	free(out);
	assert_int_equal(berth(NULL, &out, NULL, "validate", "--json", schema, good,
			       NULL), 0);
	assert_string_equal(out, "{\"valid\":true}\n");
	free(out);
	assert_int_equal(berth(NULL, &out, &err, "--json", "validate",
			       "/nonexistent/schema.json", NULL), 2);
	assert_string_equal(out, "");
	v = json_loads(err, 0, NULL);
	assert_non_null(v);
	assert_int_equal(json_integer_value(json_object_get(v, "exitStatus")), 2);
	assert_non_null(strstr(jstr(json_object_get(v, "error"), "message"),
			       "cannot read schema /nonexistent/schema.json"));
	json_decref(v);
	free(out);
	free(err);
	unlink(schema);
	unlink(bad);
	unlink(good);
	free(schema);
	free(bad);
	free(good);
}

/* mcp_ping runs `berth --socket where mcp`, sends a ping and returns what
 * it wrote (malloc'd) once the answer is there; berth mcp ends at the end
 * of its stdin without waiting for answers, so stdin stays open until
 * then. */
static char *mcp_ping(const char *where)
{
	static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n";
	int in[2], out[2], status;
	char *buf = calloc(1, 65536);
	size_t len = 0;
	pid_t pid;

	assert_non_null(buf);
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(out), 0);
	pid = harness_fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(getenv("BERTH"), "berth", "--socket", where, "mcp",
		      (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	assert_int_equal(write(in[1], ping, strlen(ping)), (ssize_t)strlen(ping));
	while (!strstr(buf, "\n") && len < 65535) {
		struct pollfd pfd = {.fd = out[0], .events = POLLIN};
		ssize_t n;

		if (poll(&pfd, 1, 30000) != 1)
			break;
		n = read(out[0], buf + len, 65535 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(in[1]);
	waitpid(pid, &status, 0);
	close(out[0]);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return buf;
}

static void tcp__with_a_token_file_or_berth_token__works_end_to_end(void **state)
{
	char listen_at[64], where[80], token_file[] = "/tmp/berth-cli-token-XXXXXX";
	char bad_file[] = "/tmp/berth-cli-bad-XXXXXX";
	const char *extra[] = {"--listen", listen_at, "--token-file", token_file,
			       NULL};
	char *out, *err;
	json_t *job;
	int fd, port = harness_free_port();

	fd = mkstemp(token_file);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "s3cret-cli-token\n", 17), 17);
	close(fd);
	fd = mkstemp(bad_file);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "wrong\n", 6), 6);
	close(fd);
	snprintf(listen_at, sizeof listen_at, "127.0.0.1:%d", port);
	snprintf(where, sizeof where, "tcp:127.0.0.1:%d", port);
	support_start(&tcp, extra);

	assert_int_equal(berth(NULL, &out, NULL, "--socket", where, "--token-file",
			       token_file, "info", NULL), 0);
	assert_non_null(strstr(out, tcp.db));
	free(out);
	setenv("BERTH_TOKEN", "s3cret-cli-token", 1);
	assert_int_equal(berth(NULL, &out, NULL, "--socket", where, "--json",
			       "submit", "noop", "{\"over\":\"tcp\"}", "--wait",
			       NULL), 0);
	job = json_loads(out, 0, NULL);
	assert_string_equal(jstr(job, "status"), "completed");
	free(out);
	/* A prefix resolves over TCP too, and get finds the job. */
	assert_int_equal(berth(NULL, &out, NULL, "--socket", where, "get",
			       jstr(job, "id"), NULL), 0);
	free(out);
	json_decref(job);
	/* berth mcp relays over TCP once it has authenticated. */
	out = mcp_ping(where);
	assert_non_null(strstr(out, "\"id\":7"));
	assert_non_null(strstr(out, "\"result\""));
	free(out);
	/* A wrong token is refused (1); none at all is a usage error (2). */
	assert_int_equal(berth(NULL, NULL, &err, "--socket", where, "--token-file",
			       bad_file, "info", NULL), 1);
	assert_non_null(strstr(err, "unauthorized"));
	free(err);
	unsetenv("BERTH_TOKEN");
	assert_int_equal(berth(NULL, NULL, &err, "--socket", where, "info", NULL), 2);
	assert_non_null(strstr(err, "it takes a token (give --token-file FILE, or "
				    "the token in $BERTH_TOKEN)"));
	free(err);
	assert_int_equal(berth(NULL, NULL, &err, "--socket", where, "--token-file",
			       "/nonexistent/token", "info", NULL), 2);
	assert_non_null(strstr(err, "cannot read the token file /nonexistent/token"));
	free(err);
	assert_int_equal(harness_stop(&tcp), 0);
	harness_cleanup(&tcp);
	unlink(token_file);
	unlink(bad_file);
}

/* ---- terminals, pages, writes, text ------------------------------------ */

/* spawn runs argv (NULL-ended) with stdout on out_fd, and SIGPIPE ignored
 * when ignore_pipe, and returns its wait status, with stderr in *err
 * (malloc'd; may be NULL to drop it). */
static int spawn(const char *const *argv, int out_fd, bool ignore_pipe,
		 char **err)
{
	int err_fd = temp_fd(), status;
	pid_t pid = harness_fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(out_fd, 1);
		dup2(err_fd, 2);
		signal(SIGPIPE, ignore_pipe ? SIG_IGN : SIG_DFL);
		alarm(60);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	if (err)
		*err = slurp(err_fd);
	close(err_fd);
	return status;
}

/* pty_run runs $BERTH with args (NULL-ended) on a new terminal and
 * returns its exit status (-1 when a signal ended it), what it wrote to
 * the terminal in *out (malloc'd) and how long it ran in *ms. */
static int pty_run(char **out, int64_t *ms, ...)
{
	const char *argv[16] = {getenv("BERTH")};
	size_t n = 1, len = 0, cap = 65536;
	int64_t start = support_now_ms();
	int master, status;
	va_list ap;
	pid_t pid;

	va_start(ap, ms);
	while (n < 15 && (argv[n] = va_arg(ap, const char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;
	*out = malloc(cap);
	assert_non_null(*out);
	pid = harness_forkpty(&master);
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(60);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	for (;;) {
		struct pollfd pfd = {.fd = master, .events = POLLIN};
		ssize_t got;

		if (poll(&pfd, 1, 30000) != 1)
			break;
		if (cap - len < 4096)
			assert_non_null(*out = realloc(*out, cap *= 2));
		got = read(master, *out + len, cap - 1 - len);
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	(*out)[len] = '\0';
	waitpid(pid, &status, 0);
	*ms = support_now_ms() - start;
	close(master);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* On a terminal, wait --timeout is measured by the clock. Before, only a
 * quarter second without progress counted, so the wait for a job that
 * reports every 100 ms went on to the job's end, and exited 0. */
static void wait_on_a_terminal__with_timeout__stops_when_it_passes(void **state)
{
	json_t *job = berth_json(NULL, "submit", "sleep", "{\"ms\":8000}");
	char *out;
	int64_t ms;
	int rc = pty_run(&out, &ms, "wait", jstr(job, "id"), "--timeout", "1s",
			 NULL);

	if (rc != 4 || ms > 5000)
		print_message("exit %d after %lld ms: %s\n", rc, (long long)ms,
			      out);
	assert_int_equal(rc, 4);
	assert_true(ms < 5000);
	assert_non_null(strstr(out, "--timeout passed first"));
	free(out);
	json_decref(berth_json(NULL, "cancel", jstr(job, "id")));
	json_decref(job);
}

/* wait --until takes job statuses, on a terminal as through a pipe: any
 * other name, or an empty one, is a usage error that names it. Before, a
 * terminal ignored it and waited until the job ended, then exited 0. */
static void wait_until__not_a_status__is_a_usage_error_on_a_terminal_too(
	void **state)
{
	json_t *job = berth_json(NULL, "submit", "noop", "{}", "--wait");
	const char *id = jstr(job, "id");
	char *out, *err;
	int64_t ms;

	assert_int_equal(berth(NULL, &out, &err, "wait", id, "--until",
			       "completed,complete", NULL), 2);
	assert_string_equal(out, "");
	assert_non_null(strstr(err, "--until takes job statuses"));
	assert_non_null(strstr(err, "not 'complete'"));
	free(out);
	free(err);
	assert_int_equal(pty_run(&out, &ms, "wait", id, "--until",
				 "completed,complete", NULL), 2);
	assert_non_null(strstr(out, "not 'complete'"));
	assert_null(strstr(out, "\nstatus "));
	free(out);
	assert_int_equal(pty_run(&out, &ms, "wait", id, "--until", "", NULL), 2);
	assert_non_null(strstr(out, "--until '' has an empty name"));
	free(out);
	/* A real status still ends the wait. */
	assert_int_equal(pty_run(&out, &ms, "wait", id, "--until", "completed",
				 NULL), 0);
	free(out);
	json_decref(job);
}

/* count_lines counts the lines of s. */
static int count_lines(const char *s)
{
	return count(s, "\n");
}

/* The hint after a page of ls names the same filters: run as printed
 * (with a shell), it lists the next page of the same listing. Before, it
 * was "berth ls --cursor C", which lists jobs of every status and run. */
static void ls__with_more_pages__hints_a_command_that_keeps_the_filters(
	void **state)
{
	const char *run = "cli hint's run";
	json_t *done[3], *pending;
	char *out, *err, *hint, script[512];
	int out_fd, status;

	for (int i = 0; i < 3; i++)
		done[i] = berth_json(NULL, "submit", "noop", "{}", "--run-id", run,
				     "--wait");
	pending = berth_json(NULL, "submit", "noop", "{}", "--run-id", run,
			     "--delay", "1h");
	assert_int_equal(berth(NULL, &out, &err, "ls", "--status", "completed",
			       "--run-id", run, "--limit", "2", NULL), 0);
	assert_int_equal(count_lines(out), 3);
	assert_non_null(strstr(out, jstr(done[2], "id")));
	assert_non_null(strstr(out, jstr(done[1], "id")));
	free(out);
	hint = strstr(err, "more: berth ls ");
	if (!hint)
		print_message("no hint in: %s\n", err);
	assert_non_null(hint);
	assert_non_null(strstr(hint, "--status completed"));
	assert_non_null(strstr(hint, "--limit 2"));
	assert_non_null(strchr(hint, '\n'));
	*strchr(hint, '\n') = '\0';
	snprintf(script, sizeof script, "exec \"$BERTH\" %s",
		 hint + strlen("more: berth "));
	free(err);
	out_fd = temp_fd();
	status = spawn((const char *const[]){"/bin/sh", "-c", script, NULL},
		       out_fd, false, &err);
	out = slurp(out_fd);
	close(out_fd);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (count_lines(out) != 2)
		print_message("%s printed: %s%s\n", script, out, err);
	assert_int_equal(count_lines(out), 2);
	assert_non_null(strstr(out, jstr(done[0], "id")));
	assert_string_equal(err, "");
	free(out);
	free(err);
	json_decref(berth_json(NULL, "cancel", jstr(pending, "id")));
	json_decref(pending);
	for (int i = 0; i < 3; i++)
		json_decref(done[i]);
}

/* Output that cannot be written is an error (exit 10) said on stderr, for
 * a listing and for --follow, which stops. A reader that went away
 * (EPIPE) ends berth quietly, by SIGPIPE, as in `berth ls | head -1`.
 * Before, berth exited 0 and said nothing, --follow went on forever, and
 * with SIGPIPE ignored an early reader's end was exit 0. */
static void output__that_cannot_be_written__is_an_error(void **state)
{
	static const char *const cmds[][3] = {
		{"--json", "ls", NULL}, {"info", NULL}, {"events", NULL},
		{"tools", NULL},
	};
	const char *berth_path = getenv("BERTH");
	int full = open("/dev/full", O_WRONLY), fds[2], status, err_fd;
	char *err;
	pid_t pid;

	assert_true(full >= 0);
	/* At least one job, so that each command has something to write. */
	json_decref(berth_json(NULL, "submit", "noop", "{}", "--wait"));
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
		status = spawn((const char *const[]){berth_path, cmds[i][0],
						     cmds[i][1], NULL},
			       full, false, &err);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 10)
			print_message("berth %s: status %#x: %s\n", cmds[i][0],
				      status, err);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 10);
		assert_non_null(strstr(err, "cannot write the output: No space "
					    "left on device"));
		free(err);
	}

	/* --follow stops at the first event it cannot write. */
	err_fd = temp_fd();
	pid = harness_fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(full, 1);
		dup2(err_fd, 2);
		alarm(60);
		execl(berth_path, "berth", "events", "--follow", (char *)NULL);
		_exit(127);
	}
	usleep(300000);
	json_decref(berth_json(NULL, "submit", "noop", "{}", "--wait"));
	for (int i = 0; i < 200 && waitpid(pid, &status, WNOHANG) == 0; i++)
		usleep(50000);
	if (waitpid(pid, &status, WNOHANG) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		fail_msg("events --follow went on writing to /dev/full");
	}
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 10);
	err = slurp(err_fd);
	close(err_fd);
	assert_non_null(strstr(err, "cannot write the output"));
	free(err);
	close(full);

	/* No reader: quiet, with SIGPIPE ignored (EPIPE) or not. */
	for (int ignore = 0; ignore < 2; ignore++) {
		assert_int_equal(pipe(fds), 0);
		close(fds[0]);
		status = spawn((const char *const[]){berth_path, "ls", NULL},
			       fds[1], ignore, &err);
		close(fds[1]);
		if (!WIFSIGNALED(status) || *err)
			print_message("status %#x: %s\n", status, err);
		assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE);
		assert_string_equal(err, "");
		free(err);
	}
}

/* utf8_ok is true when s is well-formed UTF-8. */
static bool utf8_ok(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		int n = *p < 0x80 ? 0 : (*p & 0xe0) == 0xc0 ? 1
			: (*p & 0xf0) == 0xe0 ? 2 : (*p & 0xf8) == 0xf0 ? 3 : -1;

		if (n < 0)
			return false;
		for (p++; n > 0; n--, p++)
			if ((*p & 0xc0) != 0x80)
				return false;
	}
	return true;
}

/* Tables and events cut long text at a character, and pad columns by the
 * width their text shows: 名前 takes four columns, as "city" does.
 * Before, text was cut at 60 bytes, inside a character, and columns were
 * padded by bytes. */
static void tables__cut_and_pad_text_by_characters_and_width(void **state)
{
	char input[512] = "{\"s\":\"xx", *out, *line;
	json_t *job;

	assert_int_equal(berth(NULL, &out, NULL, "tools", "cli-uni", NULL), 0);
	if (!strstr(out, "\n  名前  string  default \"山田\"  the name\n"))
		print_message("%s", out);
	assert_non_null(strstr(out, "\n  名前  string  default \"山田\"  the name\n"));
	assert_non_null(strstr(out, "\n  city  string  default \"Oslo\"  the city\n"));
	free(out);
	assert_int_equal(berth(NULL, &out, NULL, "tools", NULL), 0);
	assert_true(utf8_ok(out));
	line = strstr(out, "\ncli-uni ");
	assert_non_null(line);
	assert_non_null(strstr(line, "Grüße aus Köln"));
	assert_non_null(strstr(line, "...\n"));
	free(out);

	for (int i = 0; i < 60; i++)
		strcat(input, "é");
	strcat(input, "\"}");
	job = berth_json(NULL, "submit", "noop", input, "--wait");
	assert_int_equal(berth(NULL, &out, NULL, "events", "--job",
			       jstr(job, "id"), NULL), 0);
	assert_true(utf8_ok(out));
	assert_non_null(strstr(out, "éé..."));
	free(out);
	assert_int_equal(berth(NULL, &out, NULL, "ls", "--limit", "1", NULL), 0);
	assert_true(utf8_ok(out));
	free(out);
	json_decref(job);
}

/* Text a submitter or a tool chose (a run id, a tool call id, an error
 * message, output) shows with its control characters escaped as JSON
 * writes them, so that it cannot drive the terminal or forge a line;
 * --json stays the exact text. Before, berth get printed it raw. */
static void get_and_events__escape_control_characters(void **state)
{
	const char *run = "r\033]0;pwned\a\033[2J";
	const char *call = "a\nstatus           completed";
	json_t *job = berth_json(NULL, "submit", "noop", "{}", "--delay", "1h",
				 "--run-id", run, "--tool-call-id", call);
	json_t *failed, *done;
	char *out;

	assert_string_equal(jstr(job, "runId"), run);
	assert_string_equal(jstr(job, "toolCallId"), call);
	assert_int_equal(berth(NULL, &out, NULL, "get", jstr(job, "id"), NULL), 0);
	assert_null(strchr(out, '\033'));
	assert_null(strchr(out, '\a'));
	assert_null(strstr(out, "\nstatus           completed"));
	assert_non_null(strstr(out, "\nrun              r\\u001b]0;pwned\\u0007"
				    "\\u001b[2J\n"));
	assert_non_null(strstr(out, "\ntool call        a\\nstatus           "
				    "completed\n"));
	free(out);
	json_decref(berth_json(NULL, "cancel", jstr(job, "id")));

	/* An error message, output with DEL and C1 controls (CSI, U+009B). */
	assert_int_equal(berth(NULL, &out, NULL, "--json", "submit", "fail",
			       "{\"message\":\"bad\\u001b[31m\\u009b2J\"}",
			       "--wait", NULL), 5);
	failed = json_loads(out, 0, NULL);
	assert_non_null(failed);
	free(out);
	assert_int_equal(berth(NULL, &out, NULL, "get", jstr(failed, "id"),
			       NULL), 0);
	assert_null(strchr(out, '\033'));
	assert_null(strstr(out, "\xc2\x9b"));
	assert_non_null(strstr(out, "\nerror            bad\\u001b[31m"
				    "\\u009b2J"));
	free(out);
	assert_int_equal(berth(NULL, &out, NULL, "events", "--job",
			       jstr(failed, "id"), NULL), 0);
	assert_null(strchr(out, '\033'));
	assert_null(strstr(out, "\xc2\x9b"));
	free(out);
	done = berth_json(NULL, "submit", "noop",
			  "{\"s\":\"\\u009b2J\\u007f\"}", "--wait");
	assert_int_equal(berth(NULL, &out, NULL, "get", jstr(done, "id"), NULL), 0);
	assert_null(strstr(out, "\xc2\x9b"));
	assert_null(strchr(out, '\x7f'));
	assert_non_null(strstr(out, "\\u009b2J\\u007f"));
	free(out);
	assert_int_equal(berth(NULL, &out, NULL, "--json", "get",
			       jstr(done, "id"), NULL), 0);
	assert_non_null(strstr(out, "\xc2\x9b" "2J\x7f"));
	free(out);
	json_decref(done);
	json_decref(failed);
	json_decref(job);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(help__for_every_subcommand__shows_its_usage),
		cmocka_unit_test(usage_errors__exit_2_and_say_why),
		cmocka_unit_test(no_daemon__exits_3),
		cmocka_unit_test(a_refusal__exits_1_with_the_message),
		cmocka_unit_test(params_berthd_finds_invalid__are_usage_errors_said_once),
		cmocka_unit_test(json__makes_every_error_one_json_object_on_stderr),
		cmocka_unit_test(info__for_people_and_for_scripts),
		cmocka_unit_test(tools__lists_the_tools),
		cmocka_unit_test(submit_wait__prints_the_finished_job),
		cmocka_unit_test(get__shows_reals_as_they_were_written),
		cmocka_unit_test(submit__reads_stdin_and_takes_every_option),
		cmocka_unit_test(approve_decline_resume_retry__answer_jobs),
		cmocka_unit_test(ls__prints_a_table_or_json_with_filters),
		cmocka_unit_test(pause_and_logs__work),
		cmocka_unit_test(events__prints_the_log_and_follows_it),
		cmocka_unit_test(events__of_no_job__says_not_found),
		cmocka_unit_test(events__with_type__prints_only_those_types),
		cmocka_unit_test(events__with_type__asks_berthd_for_those_types_alone),
		cmocka_unit_test(wait_on_a_terminal__draws_a_progress_bar),
		cmocka_unit_test(exit_status__of_a_wait__says_how_the_job_ended),
		cmocka_unit_test(tools_name__shows_one_tool_readably),
		cmocka_unit_test(refusals__print_the_requests_text_escaped),
		cmocka_unit_test(ids__may_be_given_by_a_unique_prefix),
		cmocka_unit_test(wording__progress_is_100_percent_once_completed),
		cmocka_unit_test(tcp__with_a_token_file_or_berth_token__works_end_to_end),
		cmocka_unit_test(validate__with_json__prints_its_verdict_and_errors_as_json),
		cmocka_unit_test(wait_on_a_terminal__with_timeout__stops_when_it_passes),
		cmocka_unit_test(wait_until__not_a_status__is_a_usage_error_on_a_terminal_too),
		cmocka_unit_test(ls__with_more_pages__hints_a_command_that_keeps_the_filters),
		cmocka_unit_test(output__that_cannot_be_written__is_an_error),
		cmocka_unit_test(tables__cut_and_pad_text_by_characters_and_width),
		cmocka_unit_test(get_and_events__escape_control_characters),
	};

	if (getenv("BERTH_TEST_FILTER"))
		cmocka_set_test_filter(getenv("BERTH_TEST_FILTER"));
	return cmocka_run_group_tests(tests, start, stop);
}

/*
 * test_worker_proto.c: the worker protocol (docs/WORKERS.md) through a real
 * berthd (tests/harness) and real worker processes: worker.py, beside this
 * file, speaks the wire protocol with Python's standard library alone, so
 * that berthd's side is tested without the SDKs. Each test ends with a
 * SIGTERM that berthd must answer with exit status 0, which under ASan also
 * means that it leaked nothing.
 */
#include <dirent.h>
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
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "tests/harness/child.h"
#include "tests/harness/harness.h"

#ifndef WORKER_PY
#error "WORKER_PY must name tests/worker-proto/worker.py"
#endif

/* How long anything a test waits for may take on a loaded machine. */
#define DEADLINE_MS 60000

#define MAX_WORKERS 4

struct fixture {
	struct harness h;
	struct berth_client *c;
	char marks[400];
	pid_t workers[MAX_WORKERS];
	char outs[MAX_WORKERS][400];
	int nworkers;
	char token[64];
	int port;
};

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static const char *jstr(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

/* start starts berthd with extra args (NULL-ended); the example tools are
 * left out, so that tools/list holds the built-in tools and the
 * workers'. */
static int start(void **state, const char *const *args)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->h.no_examples = true;
	if (harness_start(&f->h, args) != 0) {
		free(f);
		return -1;
	}
	snprintf(f->marks, sizeof(f->marks), "%s/marks", f->h.dir);
	mkdir(f->marks, 0700);
	f->c = harness_connect(&f->h);
	assert_non_null(f->c);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	static const char *const args[] = {"--heartbeat", "1s", "--kill-grace",
					   "1s", NULL};

	return start(state, args);
}

/* setup_quiet is setup for tests whose registrations take seconds to
 * store (under ASan) and whose clients answer no heartbeats. */
static int setup_quiet(void **state)
{
	static const char *const args[] = {"--heartbeat", "60s", NULL};

	return start(state, args);
}

/* kill_worker stops worker i with sig and reaps it. */
static void kill_worker(struct fixture *f, int i, int sig)
{
	int status;

	if (f->workers[i] <= 0)
		return;
	kill(f->workers[i], sig);
	while (waitpid(f->workers[i], &status, 0) < 0 && errno == EINTR)
		;
	f->workers[i] = 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	int rc;

	for (int i = 0; i < f->nworkers; i++)
		kill_worker(f, i, SIGKILL);
	if (f->c)
		berth_client_close(f->c);
	rc = f->h.pid ? harness_stop(&f->h) : 0;
	harness_cleanup(&f->h);
	free(f);
	assert_int_equal(rc, 0);
	return 0;
}

/* read_file returns the contents of path (malloc'd; "" when missing). */
static char *read_file(const char *path)
{
	FILE *fp = fopen(path, "r");
	char *s = calloc(1, 1 << 20);
	size_t n;

	assert_non_null(s);
	if (!fp)
		return s;
	n = fread(s, 1, (1 << 20) - 1, fp);
	s[n] = '\0';
	fclose(fp);
	return s;
}

/*
 * spawn_worker starts worker.py with its socket (or TCP and the token when
 * tcp), the marks folder and args (NULL-ended), and returns its index.
 * Unless wait is false, it waits until the worker said it was registered
 * or refused, and returns -1 when it was refused.
 */
static int spawn_worker(struct fixture *f, bool tcp, bool wait,
			const char *const *args)
{
	const char *argv[32];
	char addr[64];
	size_t n = 0;
	int i = f->nworkers++;
	pid_t pid;

	assert_true(i < MAX_WORKERS);
	snprintf(addr, sizeof(addr), "/worker-%d.out", i);
	memcpy(f->outs[i], f->h.dir, strlen(f->h.dir) + 1);
	strncat(f->outs[i], addr, sizeof(f->outs[i]) - strlen(f->outs[i]) - 1);
	argv[n++] = "python3";
	argv[n++] = WORKER_PY;
	if (tcp) {
		snprintf(addr, sizeof(addr), "127.0.0.1:%d", f->port);
		argv[n++] = "--tcp";
		argv[n++] = addr;
		argv[n++] = "--token";
		argv[n++] = f->token;
	} else {
		argv[n++] = "--socket";
		argv[n++] = f->h.socket;
	}
	argv[n++] = "--marks";
	argv[n++] = f->marks;
	for (size_t k = 0; args && args[k] && n < 31; k++)
		argv[n++] = args[k];
	argv[n] = NULL;
	pid = harness_fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(f->outs[i], O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execvp("python3", (char *const *)argv);
		_exit(127);
	}
	f->workers[i] = pid;
	if (!wait)
		return i;
	for (int waited = 0; waited < DEADLINE_MS; waited += 20) {
		char *out = read_file(f->outs[i]);
		bool registered = strstr(out, "registered ") != NULL;
		bool refused = strstr(out, "refused ") != NULL;

		free(out);
		if (registered)
			return i;
		if (refused)
			return -1;
		sleep_ms(20);
	}
	fail_msg("worker %d did not register in time", i);
	return -1;
}

static int worker(struct fixture *f, const char *const *args)
{
	int i = spawn_worker(f, false, true, args);

	assert_true(i >= 0);
	return i;
}

/* mark waits until worker.py left the mark WHAT-JOB[-DETAIL]. */
static void mark(struct fixture *f, const char *what, const char *job,
		 const char *detail)
{
	char path[600];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s-%s%s%s", f->marks, what, job,
		 detail ? "-" : "", detail ? detail : "");
	for (int waited = 0; waited < DEADLINE_MS; waited += 20) {
		if (stat(path, &st) == 0)
			return;
		sleep_ms(20);
	}
	fail_msg("no mark %s", path);
}

static bool has_mark(struct fixture *f, const char *what, const char *job,
		     const char *detail)
{
	char path[600];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s-%s%s%s", f->marks, what, job,
		 detail ? "-" : "", detail ? detail : "");
	return stat(path, &st) == 0;
}

static json_t *call(struct fixture *f, const char *method, json_t *params)
{
	return harness_call(f->c, method, params, NULL);
}

/* call_error calls method, which must fail, and returns the error. */
static json_t *call_error(struct fixture *f, const char *method,
			  json_t *params)
{
	json_t *error = NULL, *r = harness_call(f->c, method, params, &error);

	if (r) {
		char *s = json_dumps(r, JSON_COMPACT);
		fail_msg("%s succeeded: %s", method, s);
	}
	assert_non_null(error);
	return error;
}

static char *submit(struct fixture *f, json_t *params)
{
	json_t *job = call(f, "jobs/submit", params);
	char *id = strdup(jstr(job, "id"));

	json_decref(job);
	return id;
}

static json_t *get(struct fixture *f, const char *id, const char *view)
{
	return call(f, "jobs/get",
		    view ? json_pack("{s:s, s:s}", "id", id, "view", view)
			 : json_pack("{s:s}", "id", id));
}

/* wait_status waits until job id is in status and returns the Job. */
static json_t *wait_status(struct fixture *f, const char *id,
			   const char *status)
{
	for (int waited = 0; waited < DEADLINE_MS; waited += 1000) {
		json_t *job = call(f, "jobs/wait",
				   json_pack("{s:s, s:i, s:[s]}", "id", id,
					     "timeoutMs", 1000, "until", status));

		if (strcmp(jstr(job, "status"), status) == 0)
			return job;
		if (waited + 1000 >= DEADLINE_MS) {
			char *s = json_dumps(job, JSON_COMPACT);
			print_error("job %s is not %s: %.2000s\n", id, status, s);
			free(s);
		}
		json_decref(job);
	}
	fail_msg("job %s never became %s", id, status);
	return NULL;
}

/* tool returns the Tool name of tools/list (new), or NULL. */
static json_t *tool(struct fixture *f, const char *name)
{
	json_t *r = call(f, "tools/list", json_object()), *t, *found = NULL;
	size_t i;

	json_array_foreach(json_object_get(r, "tools"), i, t)
		if (strcmp(jstr(t, "name"), name) == 0)
			found = json_incref(t);
	json_decref(r);
	return found;
}

/* connected waits until n workers serve tool name. */
static void connected(struct fixture *f, const char *name, int n)
{
	for (int waited = 0; waited < DEADLINE_MS; waited += 20) {
		json_t *t = tool(f, name);
		json_int_t c = json_integer_value(json_object_get(
			json_object_get(t, "workers"), "connected"));

		json_decref(t);
		if (c == n)
			return;
		sleep_ms(20);
	}
	fail_msg("tool %s never had %d workers connected", name, n);
}

/* log_has tells whether berthd's log holds text. */
static bool log_has(struct fixture *f, const char *text)
{
	char *log = read_file(f->h.log);
	bool found = strstr(log, text) != NULL;

	free(log);
	return found;
}

/* job_log_has tells whether job id's log (jobs/logs) has a line whose
 * message holds text. */
static bool job_log_has(struct fixture *f, const char *id, const char *text)
{
	json_t *r = call(f, "jobs/logs", json_pack("{s:s}", "id", id)), *l;
	bool found = false;
	size_t i;

	json_array_foreach(json_object_get(r, "lines"), i, l)
		if (strstr(jstr(l, "message"), text))
			found = true;
	json_decref(r);
	return found;
}

/* wait_until waits for a condition of a test's own. */
#define wait_until(cond, what)                                                 \
	do {                                                                   \
		int waited_ = 0;                                               \
		while (!(cond)) {                                              \
			if (waited_ >= DEADLINE_MS)                            \
				fail_msg("timed out waiting for %s", what);    \
			sleep_ms(20);                                          \
			waited_ += 20;                                         \
		}                                                              \
	} while (0)

/* ---- registration ---------------------------------------------------- */

static void register__a_definition_that_does_not_check__is_refused_naming_its_place(
	void **state)
{
	struct fixture *f = *state;
	json_t *e = call_error(
		f, "worker/register",
		json_pack("{s:[{s:s, s:{s:s}}, {s:s, s:{s:i}}, {s:s, s:s}], s:i}",
			  "tools", "id", "ok", "inputSchema", "type", "object",
			  "id", "bad", "background", "timeoutMs", -5, "id",
			  "worse", "requireApproval", "sometimes",
			  "concurrency", 2));
	json_t *errors = json_object_get(json_object_get(e, "data"), "errors");

	assert_int_equal(json_integer_value(json_object_get(e, "code")), -32602);
	assert_int_equal(json_array_size(errors), 2);
	assert_string_equal(jstr(json_array_get(errors, 0), "instancePath"),
			    "/tools/1/background/timeoutMs");
	assert_string_equal(jstr(json_array_get(errors, 1), "instancePath"),
			    "/tools/2/requireApproval");
	assert_non_null(strstr(jstr(e, "message"), "timeoutMs"));
	json_decref(e);
	/* A refused registration registers none of its tools. */
	assert_null(tool(f, "ok"));
	/* Neither does a refusal by the params' shape. */
	e = call_error(f, "worker/register",
		       json_pack("{s:[], s:i}", "tools", "concurrency", 1));
	assert_int_equal(json_integer_value(json_object_get(e, "code")), -32602);
	json_decref(e);
	e = call_error(f, "worker/register",
		       json_pack("{s:[{s:s, s:{s:s}}]}", "tools", "id", "x",
				 "transform", "display", "input"));
	assert_non_null(strstr(jstr(e, "message"), "functions.transform"));
	json_decref(e);
	e = call_error(f, "worker/register",
		       json_pack("{s:[{s:s}, {s:s}]}", "tools", "id", "fine",
				 "id", "not a name"));
	assert_string_equal(jstr(json_array_get(json_object_get(
					 json_object_get(e, "data"), "errors"),
					 0),
				 "instancePath"),
			    "/tools/1/id");
	json_decref(e);
}

static void register__the_id_of_a_builtin_tool__is_refused_as_builtin(
	void **state)
{
	struct fixture *f = *state;
	json_t *e = call_error(f, "worker/register",
			       json_pack("{s:[{s:s}]}", "tools", "id", "noop"));

	assert_int_equal(json_integer_value(json_object_get(e, "code")), -32012);
	assert_string_equal(jstr(json_object_get(e, "data"), "status"),
			    "builtin");
	json_decref(e);
}

static void register__another_definition_while_one_is_connected__is_refused_naming_the_fields(
	void **state)
{
	static const char *const variant[] = {"--variant", "--tools", "wp-echo",
					      NULL};
	struct fixture *f = *state;
	json_t *e, *diffs, *d;
	char *out;
	size_t i;
	bool required = false;

	worker(f, NULL);
	assert_int_equal(spawn_worker(f, false, true, variant), -1);
	out = read_file(f->outs[1]);
	e = json_loads(strstr(out, "refused ") + 8, JSON_DISABLE_EOF_CHECK,
		       NULL);
	free(out);
	assert_non_null(e);
	assert_int_equal(json_integer_value(json_object_get(e, "code")), -32012);
	assert_string_equal(jstr(json_object_get(e, "data"), "status"),
			    "conflict");
	assert_non_null(strstr(jstr(e, "message"), "inputSchema"));
	diffs = json_object_get(json_object_get(e, "data"), "differences");
	assert_true(json_array_size(diffs) > 0);
	json_array_foreach(diffs, i, d) {
		assert_string_equal(jstr(d, "tool"), "wp-echo");
		if (strcmp(jstr(d, "field"), "/inputSchema/required") == 0) {
			required = true;
			assert_null(json_object_get(d, "registered"));
			assert_non_null(json_object_get(d, "offered"));
		}
	}
	assert_true(required);
	json_decref(e);
}

static void register__the_same_definition_by_two_workers__shares_the_jobs(
	void **state)
{
	static const char *const one[] = {"--concurrency", "1", NULL};
	struct fixture *f = *state;
	char *ids[6];
	json_t *job, *t;
	pid_t pids[6];

	worker(f, one);
	worker(f, one);
	connected(f, "wp-echo", 2);
	t = tool(f, "wp-echo");
	assert_string_equal(jstr(t, "kind"), "worker");
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(t, "workers"), "capacity")),
			 2);
	json_decref(t);
	for (int i = 0; i < 6; i++)
		ids[i] = submit(f, json_pack("{s:s, s:{s:f}}", "tool", "wp-echo",
					     "input", "sleep", 0.3));
	for (int i = 0; i < 6; i++) {
		job = wait_status(f, ids[i], "completed");
		pids[i] = (pid_t)json_integer_value(
			json_object_get(json_object_get(job, "output"), "pid"));
		json_decref(job);
		free(ids[i]);
	}
	/* Both took runs: one run at a time each, six jobs. */
	{
		int a = 0, b = 0;

		for (int i = 0; i < 6; i++) {
			a += pids[i] == f->workers[0];
			b += pids[i] == f->workers[1];
		}
		assert_int_equal(a + b, 6);
		assert_true(a > 0 && b > 0);
	}
}

static void register__another_definition_with_no_worker_connected__replaces_the_stored_one(
	void **state)
{
	static const char *const variant[] = {"--variant", "--tools", "wp-echo",
					      NULL};
	struct fixture *f = *state;
	json_t *t, *e;
	char *id;

	worker(f, NULL);
	kill_worker(f, 0, SIGKILL);
	connected(f, "wp-echo", 0);
	worker(f, variant);
	t = tool(f, "wp-echo");
	assert_non_null(json_object_get(json_object_get(t, "inputSchema"),
					"required"));
	json_decref(t);
	/* Submissions are checked against the new definition from now on,
	 * and after a restart. */
	kill_worker(f, 1, SIGKILL);
	assert_int_equal(harness_restart(&f->h), 0);
	berth_client_close(f->c);
	f->c = harness_connect(&f->h);
	e = call_error(f, "jobs/submit",
		       json_pack("{s:s, s:{s:s}}", "tool", "wp-echo", "input",
				 "text", "old shape"));
	assert_int_equal(json_integer_value(json_object_get(e, "code")), -32602);
	json_decref(e);
	id = submit(f, json_pack("{s:s, s:{s:s}}", "tool", "wp-echo", "input",
				 "words", "new shape"));
	free(id);
}

/* register_on registers tools (taken) on a connection of its own, which
 * it then closes, and returns the error, or NULL once registered. */
static json_t *register_on(struct fixture *f, json_t *tools)
{
	struct berth_client *c = harness_connect(&f->h);
	json_t *error = NULL;

	json_decref(harness_call(c, "worker/register",
				 json_pack("{s:o}", "tools", tools), &error));
	berth_client_close(c);
	return error;
}

static void assert_limit(json_t *e, json_int_t limit)
{
	assert_non_null(e);
	assert_int_equal(json_integer_value(json_object_get(e, "code")), -32013);
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(e, "data"), "limit")),
			 limit);
	assert_non_null(strstr(jstr(e, "message"), "tools/forget"));
	json_decref(e);
}

static void register__past_10000_stored_definitions__is_refused_until_one_is_forgotten(
	void **state)
{
	struct fixture *f = *state;
	char id[32];
	json_t *tools;

	for (int r = 0; r < 10; r++) {
		tools = json_array();
		for (int i = 0; i < 1000; i++) {
			snprintf(id, sizeof(id), "n-%d-%d", r, i);
			json_array_append_new(tools, json_pack("{s:s}", "id", id));
		}
		assert_null(register_on(f, tools));
	}
	assert_limit(register_on(f, json_pack("[{s:s}]", "id", "one-more")),
		     10000);
	assert_null(tool(f, "one-more"));
	/* A definition in place of a stored one takes no more room. */
	assert_null(register_on(f, json_pack("[{s:s, s:s}]", "id", "n-0-0",
					     "description", "new")));
	json_decref(call(f, "tools/forget", json_pack("{s:s}", "name", "n-0-1")));
	assert_null(register_on(f, json_pack("[{s:s}]", "id", "one-more")));
}

static void register__past_64_mib_of_stored_definitions__is_refused_until_one_is_forgotten(
	void **state)
{
	struct fixture *f = *state;
	size_t len = (size_t)15 << 20;
	char *text = malloc(len + 1), id[16];

	assert_non_null(text);
	memset(text, 'x', len);
	text[len] = '\0';
	for (int i = 0; i < 4; i++) {
		snprintf(id, sizeof(id), "big-%d", i);
		assert_null(register_on(f, json_pack("[{s:s, s:s}]", "id", id,
						     "description", text)));
	}
	assert_limit(register_on(f, json_pack("[{s:s, s:s}]", "id", "big-4",
					      "description", text)),
		     (json_int_t)64 << 20);
	/* A smaller definition in place of a big one makes room. */
	assert_null(register_on(f, json_pack("[{s:s}]", "id", "big-0")));
	assert_null(register_on(f, json_pack("[{s:s, s:s}]", "id", "big-4",
					     "description", text)));
	free(text);
}

/* ---- persistence and jobs without a worker --------------------------- */

static void definitions__survive_a_restart__and_jobs_are_submitted_approved_and_resumed_with_no_worker(
	void **state)
{
	struct fixture *f = *state;
	json_t *job, *e, *t;
	char *ask, *echo, *views, *cancel;

	worker(f, NULL);
	ask = submit(f, json_pack("{s:s, s:{}}", "tool", "wp-ask", "input"));
	json_decref(wait_status(f, ask, "suspended"));
	kill_worker(f, 0, SIGKILL);
	assert_int_equal(harness_kill9(&f->h), 0);
	assert_int_equal(harness_restart(&f->h), 0);
	berth_client_close(f->c);
	f->c = harness_connect(&f->h);

	t = tool(f, "wp-views");
	assert_non_null(t);
	assert_string_equal(jstr(t, "kind"), "worker");
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(t, "workers"), "connected")),
			 0);
	assert_true(json_is_true(json_object_get(t, "requireApproval")));
	json_decref(t);
	/* Checked while no worker is connected. */
	e = call_error(f, "jobs/submit",
		       json_pack("{s:s, s:{s:i}}", "tool", "wp-echo", "input",
				 "text", 5));
	assert_int_equal(json_integer_value(json_object_get(e, "code")), -32602);
	json_decref(e);
	echo = submit(f, json_pack("{s:s, s:{s:s}}", "tool", "wp-echo", "input",
				   "text", "later"));
	/* requireApproval as a function with no worker to ask: a person
	 * decides. */
	views = submit(f, json_pack("{s:s, s:{s:i}}", "tool", "wp-views",
				    "input", "amount", 5));
	job = get(f, views, NULL);
	assert_string_equal(jstr(job, "status"), "awaiting_approval");
	json_decref(job);
	json_decref(call(f, "jobs/approve", json_pack("{s:s}", "id", views)));
	job = call(f, "jobs/resume",
		   json_pack("{s:s, s:{s:s}}", "id", ask, "resumeData", "name",
			     "Ada"));
	assert_string_equal(jstr(job, "status"), "pending");
	json_decref(job);
	cancel = submit(f, json_pack("{s:s, s:{}}", "tool", "wp-block",
				     "input"));
	json_decref(call(f, "jobs/cancel", json_pack("{s:s}", "id", cancel)));
	/* They wait: nothing serves them. */
	job = call(f, "jobs/wait",
		   json_pack("{s:s, s:i}", "id", echo, "timeoutMs", 300));
	assert_string_equal(jstr(job, "status"), "pending");
	json_decref(job);

	worker(f, NULL);
	job = wait_status(f, echo, "completed");
	json_decref(job);
	json_decref(wait_status(f, views, "completed"));
	job = wait_status(f, ask, "completed");
	assert_string_equal(jstr(json_object_get(job, "output"), "hello"),
			    "Ada");
	json_decref(job);
	free(ask);
	free(echo);
	free(views);
	free(cancel);
}

/* ---- runs ------------------------------------------------------------ */

static void run__reports_progress_logs_and_a_durable_checkpoint__then_its_outcome(
	void **state)
{
	struct fixture *f = *state;
	json_t *job, *out;
	char *id;

	worker(f, NULL);
	id = submit(f, json_pack("{s:s, s:{s:s, s:i, s:s, s:{s:i}}}", "tool",
				 "wp-echo", "input", "text", "hi", "progress", 3,
				 "log", "a warning", "checkpoint", "n", 7));
	job = wait_status(f, id, "completed");
	out = json_object_get(job, "output");
	/* The input with its schema's defaults filled in. */
	assert_string_equal(jstr(json_object_get(out, "echo"), "unit"), "C");
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(job, "checkpoint"), "n")),
			 7);
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(job, "progress"), "progress")),
			 3);
	assert_string_equal(jstr(json_object_get(job, "modelOutput"), "value"),
			    "echo of hi");
	json_decref(job);
	wait_until(job_log_has(f, id, "a warning"),
		   "the job's log to have a warning");
	free(id);
}

/* Each job fails its first attempt at once and is retried 10 to 20 ms
 * later. The retry's timer may fire a little before its run_at by the
 * store's clock (the loop's time is cached): the claim it asks for then
 * comes back short and leaves the connection dry, and the claim asked
 * again once the retry is due must wake it, or the job waits pending for
 * ever (before the fix, jobs 3 and 10 of two runs of this test). */
static void run__retries_of_runs_that_fail_at_once__each_run_when_their_backoff_ends(
	void **state)
{
	struct fixture *f = *state;

	worker(f, NULL);
	for (int i = 0; i < 100; i++) {
		char *id = submit(f, json_pack("{s:s, s:{s:s, s:i, s:i}}",
					       "tool", "wp-echo", "input",
					       "fail", "flaky", "failTimes", 1,
					       "n", i));
		json_t *job = wait_status(f, id, "completed");

		assert_int_equal(json_integer_value(json_object_get(job,
								    "attempt")),
				 2);
		json_decref(job);
		free(id);
	}
}

static void run__outcomes_that_fail_their_schema_or_shape_or_retries__end_as_documented(
	void **state)
{
	struct fixture *f = *state;
	json_t *job;
	char *id;

	worker(f, NULL);
	/* Retried while tries are left. The first attempt's error went with
	 * the success (a completed job showed it as its error). */
	id = submit(f, json_pack("{s:s, s:{s:s, s:i}}", "tool", "wp-echo",
				 "input", "fail", "flaky", "failTimes", 1));
	job = wait_status(f, id, "completed");
	assert_int_equal(json_integer_value(json_object_get(job, "attempt")), 2);
	assert_null(json_object_get(job, "error"));
	json_decref(job);
	job = get(f, id, NULL);
	assert_null(json_object_get(job, "error"));
	json_decref(job);
	free(id);
	/* Not retried when the worker says so; its code is kept. */
	id = submit(f, json_pack("{s:s, s:{s:s, s:b}}", "tool", "wp-echo",
				 "input", "fail", "fatal", "retryable", 0));
	job = wait_status(f, id, "failed");
	assert_int_equal(json_integer_value(json_object_get(job, "attempt")), 1);
	assert_string_equal(jstr(json_object_get(job, "error"), "code"),
			    "wp_failed");
	json_decref(job);
	free(id);
	id = submit(f, json_pack("{s:s, s:{s:b}}", "tool", "wp-echo", "input",
				 "badOutput", 1));
	job = wait_status(f, id, "failed");
	assert_string_equal(jstr(json_object_get(job, "error"), "code"),
			    "invalid_output");
	json_decref(job);
	free(id);
	/* A result of no outcome's shape, and an answer with neither result
	 * nor error: the latter is an answer all the same (before, berthd
	 * took it for a request without a method, and the job stayed
	 * running until its timeout). */
	for (int i = 0; i < 2; i++) {
		id = submit(f, json_pack("{s:s, s:{s:b}}", "tool", "wp-echo",
					 "input", i ? "noResult" : "badShape",
					 1));
		job = wait_status(f, id, "failed");
		assert_string_equal(jstr(json_object_get(job, "error"),
					 "code"),
				    "invalid_answer");
		json_decref(job);
		wait_until(job_log_has(f, id, "the worker's answer to run"),
			   "the job's log to have the worker's answer to run");
		free(id);
	}
	id = submit(f, json_pack("{s:s, s:{s:b}, s:i}", "tool", "wp-echo",
				 "input", "rpcError", 1, "maxRetries", 0));
	job = wait_status(f, id, "failed");
	assert_string_equal(jstr(json_object_get(job, "error"), "code"),
			    "worker_error");
	/* The worker's words are in the job's log, not in its error. */
	assert_null(strstr(jstr(json_object_get(job, "error"), "message"),
			   "s-rpc"));
	json_decref(job);
	wait_until(job_log_has(f, id, "internal trouble s-rpc"),
		   "the job's log to have internal trouble s-rpc");
	free(id);
}

static void cancel_and_timeout__reach_the_worker_as_abort(void **state)
{
	struct fixture *f = *state;
	json_t *job;
	char *id;

	worker(f, NULL);
	id = submit(f, json_pack("{s:s, s:{}}", "tool", "wp-block", "input"));
	mark(f, "started", id, "1");
	job = call(f, "jobs/cancel",
		   json_pack("{s:s, s:s}", "id", id, "reason", "stop"));
	assert_string_equal(jstr(job, "status"), "cancelled");
	json_decref(job);
	mark(f, "abort", id, "cancelled");
	mark(f, "aborted", id, NULL);
	free(id);
	id = submit(f, json_pack("{s:s, s:{}, s:i, s:i}", "tool", "wp-block",
				 "input", "timeoutMs", 300, "maxRetries", 0));
	job = wait_status(f, id, "timed_out");
	json_decref(job);
	mark(f, "abort", id, "timed_out");
	mark(f, "aborted", id, NULL);
	free(id);
}

/*
 * A job submitted while its worker has room starts by its creation's
 * commit and is pushed once that is durable; its timeout runs from the
 * push (the deadline the worker is sent), not from the submission. The
 * commit is held up for real: this process holds SQLite's write lock,
 * which berthd's writer waits for (up to its busy timeout, 5 s), longer
 * than the job's timeout. The run needs a quarter of its timeout.
 */
static void timeout__of_a_run_pushed_once_its_creation_commits__counts_from_the_push(
	void **state)
{
	static const char submission[] =
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"jobs/submit\","
		"\"params\":{\"tool\":\"wp-echo\",\"input\":{\"sleep\":0.5},"
		"\"timeoutMs\":2000,\"maxRetries\":0}}";
	struct fixture *f = *state;
	json_t *job;
	char *id;

	worker(f, NULL);
	connected(f, "wp-echo", 1);
	id = harness_submit_held(&f->h, submission, 3500);
	job = call(f, "jobs/wait",
		   json_pack("{s:s, s:i}", "id", id, "timeoutMs", DEADLINE_MS));
	if (strcmp(jstr(job, "status"), "completed") != 0) {
		char *s = json_dumps(job, JSON_COMPACT);

		print_error("job %s did not complete: %s\n", id, s);
		free(s);
	}
	assert_string_equal(jstr(job, "status"), "completed");
	json_decref(job);
	free(id);
}

static void a_worker_that_ignores_abort__has_its_run_given_up_at_the_kill_grace_and_its_late_answer_dropped(
	void **state)
{
	static const char *const deaf[] = {"--ignore-abort", "--concurrency", "1",
					   NULL};
	struct fixture *f = *state;
	json_t *job;
	char *id, *next;

	worker(f, deaf);
	/* 40 steps of 50 ms: it answers some 2 s later, past the 1 s grace. */
	id = submit(f, json_pack("{s:s, s:{s:i}}", "tool", "wp-block", "input",
				 "steps", 40));
	mark(f, "started", id, "1");
	json_decref(call(f, "jobs/cancel", json_pack("{s:s}", "id", id)));
	mark(f, "abort", id, "cancelled");
	/* The grace frees the worker's one run for the next job, which runs
	 * while the first still goes on. */
	next = submit(f, json_pack("{s:s, s:{s:s}}", "tool", "wp-echo", "input",
				   "text", "next"));
	json_decref(wait_status(f, next, "completed"));
	wait_until(log_has(f, "answered run after its run there was given up"),
		   "the late answer to be dropped");
	job = get(f, id, NULL);
	assert_string_equal(jstr(job, "status"), "cancelled");
	json_decref(job);
	assert_true(log_has(f, "did not answer within the kill grace"));
	/* berthd logs the warning before the job's log line is committed. */
	wait_until(job_log_has(f, id, "its answer is dropped"),
		   "the dropped answer in the job's log");
	free(id);
	free(next);
}

/* ---- the connection is the lease ------------------------------------- */

/* checkpoint_n returns the "n" of job id's checkpoint (0 without one). */
static json_int_t checkpoint_n(struct fixture *f, const char *id)
{
	json_t *job = get(f, id, NULL);
	json_int_t n = json_integer_value(json_object_get(
		json_object_get(job, "checkpoint"), "n"));

	json_decref(job);
	return n;
}

static void kill_9_of_the_worker__ends_its_runs_by_on_interrupt__and_the_next_worker_goes_on_from_the_checkpoint(
	void **state)
{
	struct fixture *f = *state;
	json_t *job;
	char *retry, *once;

	worker(f, NULL);
	retry = submit(f, json_pack("{s:s, s:{s:i, s:b}}", "tool", "wp-block",
				    "input", "steps", 60, "checkpoints", 1));
	once = submit(f, json_pack("{s:s, s:{}}", "tool", "wp-once", "input"));
	mark(f, "started", retry, "1");
	mark(f, "started", once, "1");
	wait_until(checkpoint_n(f, retry) >= 3, "a few checkpoints");
	kill_worker(f, 0, SIGKILL);
	/* At once, in one commit each: retry, or fail for a tool that must
	 * not run twice. */
	job = wait_status(f, retry, "pending");
	assert_int_equal(json_integer_value(json_object_get(job, "attempt")), 2);
	json_decref(job);
	job = wait_status(f, once, "failed");
	assert_string_equal(jstr(json_object_get(job, "error"), "code"),
			    "interrupted");
	assert_int_equal(json_integer_value(json_object_get(job, "attempt")), 1);
	json_decref(job);
	worker(f, NULL);
	job = wait_status(f, retry, "completed");
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(job, "output"), "attempt")),
			 2);
	json_decref(job);
	/* Run twice: by the first worker, then by the second. */
	assert_true(has_mark(f, "started", retry, "2"));
	free(retry);
	free(once);
}

static void kill_9_of_berthd__keeps_suspended_and_running_worker_jobs(
	void **state)
{
	struct fixture *f = *state;
	json_t *job;
	char *ask, *run;

	worker(f, NULL);
	ask = submit(f, json_pack("{s:s, s:{}}", "tool", "wp-ask", "input"));
	json_decref(wait_status(f, ask, "suspended"));
	run = submit(f, json_pack("{s:s, s:{s:i, s:b}}", "tool", "wp-block",
				  "input", "steps", 40, "checkpoints", 1));
	mark(f, "started", run, "1");
	assert_int_equal(harness_kill9(&f->h), 0);
	kill_worker(f, 0, SIGKILL);
	assert_int_equal(harness_restart(&f->h), 0);
	berth_client_close(f->c);
	f->c = harness_connect(&f->h);
	/* Recovered by its tool's onInterrupt, the stored definition's. */
	job = get(f, run, NULL);
	assert_string_equal(jstr(job, "status"), "pending");
	assert_int_equal(json_integer_value(json_object_get(job, "attempt")), 2);
	json_decref(job);
	job = get(f, ask, NULL);
	assert_string_equal(jstr(job, "status"), "suspended");
	json_decref(job);
	worker(f, NULL);
	json_decref(call(f, "jobs/resume",
			 json_pack("{s:s, s:{s:s}}", "id", ask, "resumeData",
				   "name", "Grace")));
	json_decref(wait_status(f, ask, "completed"));
	json_decref(wait_status(f, run, "completed"));
	free(ask);
	free(run);
}

static void heartbeats__a_worker_that_stops_answering__is_dropped_and_its_runs_end(
	void **state)
{
	static const char *const deaf[] = {"--deaf-after-register", NULL};
	struct fixture *f = *state;
	json_t *job;
	char *id;

	worker(f, deaf);
	connected(f, "wp-block", 1);
	id = submit(f, json_pack("{s:s, s:{}}", "tool", "wp-block", "input"));
	json_decref(wait_status(f, id, "running"));
	/* No answer to run nor to ping: dropped within some heartbeats of
	 * 1 s, and its run goes back by onInterrupt. */
	job = wait_status(f, id, "pending");
	assert_int_equal(json_integer_value(json_object_get(job, "attempt")), 2);
	json_decref(job);
	connected(f, "wp-block", 0);
	assert_true(log_has(f, "answered none of two heartbeats"));
	free(id);
}

static void drain__no_new_run_is_pushed_to_the_worker(void **state)
{
	struct fixture *f = *state;
	struct berth_client *w = harness_connect(&f->h);
	json_t *r, *job;
	char *id;

	assert_non_null(w);
	/* A worker of this test's own: it registers and drains at once. */
	r = harness_call(w, "worker/register",
			 json_pack("{s:[{s:s}]}", "tools", "id", "drained"),
			 NULL);
	json_decref(r);
	connected(f, "drained", 1);
	json_decref(harness_call(w, "worker/drain", json_object(), NULL));
	connected(f, "drained", 0);
	id = submit(f, json_pack("{s:s, s:{}}", "tool", "drained", "input"));
	job = call(f, "jobs/wait",
		   json_pack("{s:s, s:i}", "id", id, "timeoutMs", 500));
	assert_string_equal(jstr(job, "status"), "pending");
	json_decref(job);
	berth_client_close(w);
	free(id);
}

/* A checkpoint that loses to a cancel is refused with the status that
 * took the run, as WORKERS.md lists them: it was "gone", a status of no
 * list, when the cancel was read first but not yet committed. */
static void checkpoint__after_a_cancel__is_refused_as_cancelled(void **state)
{
	struct fixture *f = *state;
	struct berth_client *w = harness_connect(&f->h);
	json_t *run, *answer, *err;
	char line[256], *text, *id;

	assert_non_null(w);
	json_decref(harness_call(w, "worker/register",
				 json_pack("{s:[{s:s}]}", "tools", "id", "cp"),
				 NULL));
	connected(f, "cp", 1);
	id = submit(f, json_pack("{s:s, s:{}}", "tool", "cp", "input"));
	text = berth_client_read_line(w, DEADLINE_MS);
	assert_non_null(text);
	run = json_loads(text, 0, NULL);
	free(text);
	assert_string_equal(jstr(run, "method"), "run");
	json_decref(run);
	/* The cancel first, its commit under way as the checkpoint comes. */
	snprintf(line, sizeof line,
		 "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"jobs/cancel\","
		 "\"params\":{\"id\":\"%s\"}}", id);
	assert_int_equal(berth_client_send_line(f->c, line, strlen(line)), 0);
	snprintf(line, sizeof line,
		 "{\"jsonrpc\":\"2.0\",\"id\":\"c\",\"method\":"
		 "\"worker/checkpoint\",\"params\":{\"jobId\":\"%s\","
		 "\"value\":{\"n\":1}}}", id);
	assert_int_equal(berth_client_send_line(w, line, strlen(line)), 0);
	answer = NULL;
	while (!answer) {
		text = berth_client_read_line(w, DEADLINE_MS);
		assert_non_null(text);
		answer = json_loads(text, 0, NULL);
		free(text);
		assert_non_null(answer);
		if (strcmp(jstr(answer, "id"), "c") != 0) {
			json_decref(answer); /* the abort of the run */
			answer = NULL;
		}
	}
	err = json_object_get(answer, "error");
	assert_non_null(err);
	assert_string_equal(jstr(json_object_get(err, "data"), "status"),
			    "cancelled");
	assert_non_null(strstr(jstr(err, "message"), "cancelled"));
	json_decref(answer);
	text = berth_client_read_line(f->c, DEADLINE_MS); /* the cancel's */
	free(text);
	berth_client_close(w);
	free(id);
}

/* free_port returns a TCP port of the loopback that nothing listens on
 * now. */
static int setup_tcp(void **state)
{
	static char listen[32], token_file[64];
	static const char *args[] = {"--heartbeat", "1s", "--listen", listen,
				     "--token-file", token_file, NULL};
	static const char token[] = "worker-proto-test-token-0123456789abcdef";
	int port = harness_free_port(), rc;
	FILE *fp;

	snprintf(token_file, sizeof(token_file), "/tmp/wp-token-%d", (int)getpid());
	fp = fopen(token_file, "w");
	assert_non_null(fp);
	fprintf(fp, "%s\n", token);
	fclose(fp);
	chmod(token_file, 0600);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	rc = start(state, args);
	unlink(token_file);
	if (rc == 0) {
		struct fixture *f = *state;

		f->port = port;
		snprintf(f->token, sizeof(f->token), "%s", token);
	}
	return rc;
}

static void tcp_with_the_token__serves__and_a_wrong_token_is_refused(
	void **state)
{
	struct fixture *f = *state;
	char right[64], *id;
	json_t *job;
	int i;

	snprintf(right, sizeof(right), "%s", f->token);
	snprintf(f->token, sizeof(f->token), "wrong");
	assert_int_equal(spawn_worker(f, true, true, NULL), -1);
	snprintf(f->token, sizeof(f->token), "%s", right);
	i = spawn_worker(f, true, true, NULL);
	assert_true(i >= 0);
	id = submit(f, json_pack("{s:s, s:{s:s}}", "tool", "wp-echo", "input",
				 "text", "over tcp"));
	job = wait_status(f, id, "completed");
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(job, "output"), "pid")),
			 f->workers[i]);
	json_decref(job);
	free(id);
}

/* A retry a few milliseconds away is run when it is due, however the
 * timer that wakes the scheduler falls against the wall clock: a claim
 * that looked just before run_at found nothing for the worker (which it
 * then took for having nothing to wait for), and the claim asked once
 * run_at had passed left the worker's tools out, so the retry waited for
 * ever while later jobs started at their submission (an sdk-ts test hung
 * on this once under load). Twenty jobs that fail twice each, one after
 * another, all complete on their third attempt. */
static void retries__a_few_milliseconds_away__run_when_due(void **state)
{
	struct fixture *f = *state;

	worker(f, NULL);
	for (int i = 0; i < 20; i++) {
		char *id = submit(f, json_pack("{s:s, s:{s:s, s:i, s:i}}", "tool",
					       "wp-echo", "input", "fail",
					       "not yet", "failTimes", 2, "n",
					       i));
		json_t *job = wait_status(f, id, "completed");

		assert_int_equal(json_integer_value(json_object_get(
					 job, "attempt")),
				 3);
		json_decref(job);
		free(id);
	}
}

/* ---- principals (docs/API.md) ---------------------------------------- */

#define T_AGENT "agent-token-0123456789abcdef0123456789abcdef"
#define T_ROBOT "robot-token-0123456789abcdef0123456789abcdef"

/* setup_principals starts berthd with two principals, an agent that may
 * only submit and a robot that may only serve tools, and TCP for them
 * (the test's own connection is berthd's user on the socket: an admin). */
static int setup_principals(void **state)
{
	static char listen[32], file[64];
	static const char *args[] = {"--heartbeat", "1s", "--listen", listen,
				     "--principals", file, NULL};
	int port = harness_free_port(), rc;
	FILE *fp;

	snprintf(file, sizeof(file), "/tmp/wp-principals-%d.json",
		 (int)getpid());
	fp = fopen(file, "w");
	assert_non_null(fp);
	fputs("{\"principals\": ["
	      "{\"name\": \"agent\", \"token\": \"" T_AGENT "\","
	      " \"roles\": [\"submit\"]},"
	      "{\"name\": \"robot\", \"token\": \"" T_ROBOT "\","
	      " \"roles\": [\"worker\"]}]}\n",
	      fp);
	fclose(fp);
	chmod(file, 0600);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	rc = start(state, args);
	unlink(file);
	if (rc == 0)
		(*(struct fixture **)state)->port = port;
	return rc;
}

/* event_of returns the first event of job id of type (new), or fails. */
static json_t *event_of(struct fixture *f, const char *id, const char *type)
{
	json_t *r = call(f, "events/poll",
			 json_pack("{s:i, s:s, s:i}", "since", 0, "jobId", id,
				   "limit", 1000)),
	       *e, *found = NULL;
	size_t i;

	json_array_foreach(json_object_get(r, "events"), i, e)
		if (!found && strcmp(jstr(e, "type"), type) == 0)
			found = json_incref(e);
	json_decref(r);
	if (!found)
		fail_msg("job %s has no %s event", id, type);
	return found;
}

/* assert_by asserts that job id's first event of type was caused by by,
 * via via. */
static void assert_by(struct fixture *f, const char *id, const char *type,
		      const char *by, const char *via)
{
	json_t *e = event_of(f, id, type);

	if (strcmp(jstr(e, "by"), by) != 0 || strcmp(jstr(e, "via"), via) != 0)
		fail_msg("the %s event of job %s is by %s via %s, not by %s "
			 "via %s",
			 type, id, jstr(e, "by"), jstr(e, "via"), by, via);
	json_decref(e);
}

/* A principal that may only submit cannot serve tools (-32010 forbidden,
 * naming the role "worker"); one with the role "worker" registers and
 * serves over TCP as itself, may ping but read nothing, and what its
 * answers do is recorded as its own, via "worker": the suspension and
 * the completion. What berthd does to its runs is berthd's: the start,
 * and the retry when the worker is killed -9 (onInterrupt). */
static void principals__a_worker_needs_the_worker_role__and_its_answers_are_recorded_as_its_own(
	void **state)
{
	struct fixture *f = *state;
	char where[64], *out, *ask, *block;
	struct berth_client *robot;
	json_t *job, *error = NULL, *r;
	int i;

	snprintf(f->token, sizeof(f->token), "%s", T_AGENT);
	assert_int_equal(spawn_worker(f, true, true, NULL), -1);
	out = read_file(f->outs[0]);
	if (!strstr(out, "-32010") || !strstr(out, "\"forbidden\"") ||
	    !strstr(out, "\"role\": \"worker\""))
		fail_msg("worker/register by a submitter: %s", out);
	free(out);
	f->workers[0] = 0;

	/* The robot's own connection: it may ping, and read nothing. */
	snprintf(where, sizeof(where), "tcp:127.0.0.1:%d", f->port);
	robot = berth_client_connect(where);
	assert_non_null(robot);
	assert_int_equal(berth_client_auth(robot, T_ROBOT, NULL), 0);
	r = harness_call(robot, "ping", NULL, NULL);
	assert_non_null(r);
	json_decref(r);
	assert_null(harness_call(robot, "jobs/list", json_object(), &error));
	assert_int_equal(json_integer_value(json_object_get(error, "code")),
			 -32010);
	json_decref(error);
	berth_client_close(robot);

	snprintf(f->token, sizeof(f->token), "%s", T_ROBOT);
	i = spawn_worker(f, true, true, NULL);
	assert_true(i >= 0);
	ask = submit(f, json_pack("{s:s, s:{}}", "tool", "wp-ask", "input"));
	json_decref(wait_status(f, ask, "suspended"));
	assert_by(f, ask, "started", "berthd", "berthd");
	assert_by(f, ask, "suspended", "robot", "worker");
	json_decref(call(f, "jobs/resume",
			 json_pack("{s:s, s:{s:s}}", "id", ask, "resumeData", "name",
				   "Ada")));
	job = wait_status(f, ask, "completed");
	assert_string_equal(jstr(json_object_get(job, "output"), "hello"),
			    "Ada");
	json_decref(job);
	assert_by(f, ask, "completed", "robot", "worker");
	{
		json_t *e = event_of(f, ask, "resumed");

		assert_string_equal(jstr(e, "via"), "socket");
		json_decref(e);
	}

	block = submit(f, json_pack("{s:s, s:{}}", "tool", "wp-block",
				    "input"));
	mark(f, "started", block, "1");
	kill_worker(f, i, SIGKILL);
	json_decref(wait_status(f, block, "pending"));
	assert_by(f, block, "retrying", "berthd", "berthd");
	free(ask);
	free(block);
}

/* ---- functions at the client stages, and views ------------------------ */

static void views__pending_while_no_worker_answers__then_filled_by_the_run(
	void **state)
{
	struct fixture *f = *state;
	json_t *job, *pending, *e;
	char *id;

	/* No worker: the input view and the approval view are pending, and
	 * the function that decides the approval counts as asking. */
	worker(f, NULL);
	kill_worker(f, 0, SIGKILL);
	connected(f, "wp-views", 0);
	id = submit(f, json_pack("{s:s, s:{s:i, s:s}}", "tool", "wp-views",
				 "input", "amount", 5, "secret", "s-in"));
	job = get(f, id, "display");
	assert_string_equal(jstr(job, "status"), "awaiting_approval");
	assert_null(json_object_get(job, "input"));
	pending = json_object_get(job, "viewsPending");
	assert_string_equal(json_string_value(json_array_get(pending, 0)),
			    "input");
	json_decref(job);
	/* The events carry nothing of a pending view. */
	e = call(f, "events/poll",
		 json_pack("{s:i, s:s}", "since", 0, "jobId", id));
	{
		char *s = json_dumps(e, JSON_COMPACT);

		assert_null(strstr(s, "s-in"));
		free(s);
	}
	json_decref(e);
	json_decref(call(f, "jobs/approve", json_pack("{s:s}", "id", id)));
	worker(f, NULL);
	job = wait_status(f, id, "completed");
	json_decref(job);
	/* The run filled the views (and ran the hook late). */
	job = get(f, id, "display");
	assert_string_equal(jstr(json_object_get(job, "input"), "late"),
			    "input");
	assert_null(json_object_get(job, "viewsPending"));
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(job, "output"), "amount")),
			 5);
	json_decref(job);
	wait_until(job_log_has(f, id, "onInputAvailable ran late"),
		   "the job's log to have onInputAvailable ran late");
	job = get(f, id, "transcript");
	assert_string_equal(jstr(json_object_get(job, "output"), "said"),
			    "done");
	/* A stage the transcript does not transform: the placeholder. */
	assert_string_equal(jstr(json_object_get(job, "input"), "message"),
			    "Tool input payload unavailable");
	json_decref(job);
	free(id);
}

static void input__decides_the_approval_and_makes_the_views_before_the_job_commits(
	void **state)
{
	struct fixture *f = *state;
	json_t *job, *e, *ev;
	char *small, *big;
	size_t i;

	worker(f, NULL);
	small = submit(f, json_pack("{s:s, s:{s:i}}", "tool", "wp-views",
				    "input", "amount", 5));
	big = submit(f, json_pack("{s:s, s:{s:i, s:s}}", "tool", "wp-views",
				  "input", "amount", 500, "secret", "s-in"));
	job = get(f, big, "display");
	assert_string_equal(jstr(job, "status"), "awaiting_approval");
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(job, "input"), "amount")),
			 500);
	json_decref(job);
	e = call(f, "events/poll",
		 json_pack("{s:i, s:s}", "since", 0, "jobId", big));
	json_array_foreach(json_object_get(e, "events"), i, ev)
		if (strcmp(jstr(ev, "type"), "approval_requested") == 0)
			assert_string_equal(jstr(json_object_get(ev, "data"),
						 "approve"),
					    "pay 500");
	json_decref(e);
	/* The hook's log line, from the input answer's logs, added once
	 * the job was committed. */
	wait_until(job_log_has(f, big, "onInputAvailable ran"),
		   "the input answer's log line");
	json_decref(wait_status(f, small, "completed"));
	json_decref(call(f, "jobs/decline", json_pack("{s:s}", "id", big)));
	assert_false(has_mark(f, "run", big, "1"));
	free(small);
	free(big);
}

static void resume__its_views_are_made_before_it_commits(void **state)
{
	struct fixture *f = *state;
	json_t *job;
	char *id;

	worker(f, NULL);
	id = submit(f, json_pack("{s:s, s:{s:i, s:b}}", "tool", "wp-views",
				 "input", "amount", 1, "suspend", 1));
	json_decref(wait_status(f, id, "suspended"));
	job = get(f, id, "display");
	assert_true(json_is_true(json_object_get(
		json_object_get(job, "suspendPayload"), "asking")));
	json_decref(job);
	json_decref(call(f, "jobs/resume",
			 json_pack("{s:s, s:{s:s}}", "id", id, "resumeData",
				   "answer", "yes")));
	mark(f, "transform", id, "resume");
	job = wait_status(f, id, "completed");
	assert_string_equal(jstr(json_object_get(job, "output"), "answer"),
			    "yes");
	json_decref(job);
	job = get(f, id, "display");
	assert_true(json_is_true(json_object_get(
		json_object_get(job, "resumeData"), "answered")));
	json_decref(job);
	wait_until(job_log_has(f, id, "made the resume view"),
		   "the transform answer's log line");
	free(id);
}

static void errors_berthd_makes__show_their_message_in_views__and_the_workers_error_its_view(
	void **state)
{
	struct fixture *f = *state;
	json_t *job, *e;
	char *id, *s;

	worker(f, NULL);
	/* The worker's error: its view, never its words. */
	id = submit(f, json_pack("{s:s, s:{s:i, s:b}}", "tool", "wp-views",
				 "input", "amount", 1, "fail", 1));
	job = wait_status(f, id, "failed");
	assert_non_null(strstr(jstr(json_object_get(job, "error"), "message"),
			       "s-err"));
	json_decref(job);
	job = get(f, id, "display");
	assert_string_equal(jstr(json_object_get(job, "error"), "message"),
			    "it failed");
	json_decref(job);
	e = call(f, "events/poll",
		 json_pack("{s:i, s:s}", "since", 0, "jobId", id));
	s = json_dumps(e, JSON_COMPACT);
	assert_null(strstr(s, "s-err"));
	assert_null(strstr(s, "s-out"));
	free(s);
	json_decref(e);
	free(id);
	/* berthd's own error (a timeout): its message and code. */
	id = submit(f, json_pack("{s:s, s:{s:i, s:i}, s:i, s:i}", "tool",
				 "wp-views", "input", "amount", 1, "sleep", 30,
				 "timeoutMs", 300, "maxRetries", 0));
	json_decref(wait_status(f, id, "timed_out"));
	job = get(f, id, "display");
	assert_string_equal(jstr(json_object_get(job, "error"), "code"),
			    "timeout");
	assert_non_null(strstr(jstr(json_object_get(job, "error"), "message"),
			       "timed out"));
	json_decref(job);
	free(id);
}

static int setup_short_grace(void **state)
{
	static const char *const args[] = {"--heartbeat", "1s", "--kill-grace",
					   "1s", "--shutdown-grace", "300ms",
					   NULL};

	return start(state, args);
}

static void sigterm__aborts_the_runs_after_the_shutdown_grace__and_puts_them_back_without_a_retry(
	void **state)
{
	struct fixture *f = *state;
	json_t *job;
	char *id;

	worker(f, NULL);
	id = submit(f, json_pack("{s:s, s:{}}", "tool", "wp-block", "input"));
	mark(f, "started", id, "1");
	assert_int_equal(harness_stop(&f->h), 0);
	mark(f, "abort", id, "shutdown");
	assert_int_equal(harness_restart(&f->h), 0);
	berth_client_close(f->c);
	f->c = harness_connect(&f->h);
	job = get(f, id, NULL);
	assert_string_equal(jstr(job, "status"), "pending");
	assert_int_equal(json_integer_value(json_object_get(job, "attempt")), 1);
	json_decref(job);
	free(id);
}

/* any_mark tells whether a mark whose name starts with prefix was left. */
static bool any_mark(struct fixture *f, const char *prefix)
{
	DIR *d = opendir(f->marks);
	struct dirent *e;
	bool found = false;

	assert_non_null(d);
	while (!found && (e = readdir(d)))
		found = strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return found;
}

/* A question to a worker that does not answer held a SIGTERM for its
 * whole 5 s, past the shutdown grace and a second SIGTERM alike. Once
 * the grace is over the submission goes on without the answer, as after
 * the question's time-out: stored, its approval asked of a person. */
static void sigterm__does_not_wait_past_the_grace_for_an_unanswered_question(
	void **state)
{
	struct fixture *f = *state;
	struct berth_client *other = harness_connect(&f->h);
	static const char line[] =
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"jobs/submit\","
		"\"params\":{\"tool\":\"wp-views\",\"input\":{\"amount\":500,"
		"\"slowInput\":true}}}";
	json_t *r;

	worker(f, NULL);
	assert_non_null(other);
	assert_int_equal(berth_client_send_line(other, line, sizeof line - 1),
			 0);
	wait_until(any_mark(f, "input-"), "the worker to be asked for input");
	assert_int_equal(harness_stop(&f->h), 0);
	assert_true(log_has(f, "berthd stops before worker"));
	assert_false(log_has(f, "did not answer input within"));
	berth_client_close(other);
	assert_int_equal(harness_restart(&f->h), 0);
	berth_client_close(f->c);
	f->c = harness_connect(&f->h);
	r = call(f, "jobs/list", json_pack("{s:s}", "tool", "wp-views"));
	assert_int_equal(json_array_size(json_object_get(r, "jobs")), 1);
	assert_string_equal(jstr(json_array_get(json_object_get(r, "jobs"), 0),
				 "status"),
			    "awaiting_approval");
	json_decref(r);
}

/* ---- scheduling -------------------------------------------------------- */

/* running_of counts jobs of tool that are running. */
static int running_of(struct fixture *f, const char *name)
{
	json_t *r = call(f, "jobs/list",
			 json_pack("{s:s, s:s}", "status", "running", "tool",
				   name));
	int n = (int)json_array_size(json_object_get(r, "jobs"));

	json_decref(r);
	return n;
}

static void a_worker_tools_concurrency__caps_its_runs_across_workers(
	void **state)
{
	struct fixture *f = *state;
	struct berth_client *w[2];
	json_t *r;
	char *ids[4];
	int most = 0;

	/* A tool of concurrency 1 served by two connections of 4 runs
	 * each: this test's own connections register it, and hold the runs
	 * pushed to them unanswered. */
	for (int i = 0; i < 2; i++) {
		w[i] = harness_connect(&f->h);
		assert_non_null(w[i]);
		r = harness_call(w[i], "worker/register",
				 json_pack("{s:[{s:s, s:{s:i}}], s:i}", "tools",
					   "id", "capped", "background",
					   "concurrency", 1, "concurrency", 4),
				 NULL);
		json_decref(r);
	}
	connected(f, "capped", 2);
	for (int i = 0; i < 4; i++)
		ids[i] = submit(f, json_pack("{s:s, s:{}}", "tool", "capped",
					     "input"));
	json_decref(wait_status(f, ids[0], "running"));
	for (int i = 0; i < 10; i++) {
		int n = running_of(f, "capped");

		most = n > most ? n : most;
		sleep_ms(50);
	}
	assert_int_equal(most, 1);
	berth_client_close(w[0]);
	berth_client_close(w[1]);
	for (int i = 0; i < 4; i++)
		free(ids[i]);
}

/* Jobs of a worker tool with a concurrency limit that waited behind its
 * first run stayed pending for good: the claim while the limit was full
 * took the worker for dry, and the end of the run, which frees a slot of
 * the limit, did not wake it. Each waits now for the one before. */
static void a_capped_worker_tools_waiting_jobs__run_as_the_limit_frees(
	void **state)
{
	struct fixture *f = *state;
	static const char *const capped[] = {"--tools", "wp-capped", NULL};
	char *ids[3];

	worker(f, capped);
	connected(f, "wp-capped", 1);
	for (int i = 0; i < 3; i++)
		ids[i] = submit(f, json_pack("{s:s, s:{s:f}}", "tool",
					     "wp-capped", "input", "sleep",
					     0.4));
	for (int i = 0; i < 3; i++) {
		json_decref(wait_status(f, ids[i], "completed"));
		free(ids[i]);
	}
}

static int setup_one_slot(void **state)
{
	static const char *const args[] = {"--workers", "1", "--heartbeat",
					   "1s", "--kill-grace", "1s", NULL};

	return start(state, args);
}

static void the_pool_and_the_workers__do_not_take_each_others_room(
	void **state)
{
	struct fixture *f = *state;
	char *slow, *echo, *noop;
	json_t *job;

	/* The one pool slot is busy with a C tool's job. */
	slow = submit(f, json_pack("{s:s, s:{s:i}}", "tool", "sleep", "input",
				   "ms", 3000));
	json_decref(wait_status(f, slow, "running"));
	worker(f, NULL);
	echo = submit(f, json_pack("{s:s, s:{s:s}}", "tool", "wp-echo", "input",
				   "text", "beside"));
	job = wait_status(f, echo, "completed");
	json_decref(job);
	job = get(f, slow, NULL);
	assert_string_equal(jstr(job, "status"), "running");
	json_decref(job);
	json_decref(wait_status(f, slow, "completed"));
	/* Jobs of a worker tool nothing serves do not hold the pool. */
	kill_worker(f, 0, SIGKILL);
	connected(f, "wp-echo", 0);
	free(echo);
	echo = submit(f, json_pack("{s:s, s:{s:s}}", "tool", "wp-echo", "input",
				   "text", "waits"));
	noop = submit(f, json_pack("{s:s, s:{}}", "tool", "noop", "input"));
	json_decref(wait_status(f, noop, "completed"));
	job = get(f, echo, NULL);
	assert_string_equal(jstr(job, "status"), "pending");
	json_decref(job);
	free(slow);
	free(echo);
	free(noop);
}

static void tools_forget__refused_while_served_or_with_jobs__then_removes_the_definition(
	void **state)
{
	struct fixture *f = *state;
	json_t *e;
	char *id;

	worker(f, NULL);
	e = call_error(f, "tools/forget", json_pack("{s:s}", "name", "wp-ask"));
	assert_string_equal(jstr(json_object_get(e, "data"), "status"),
			    "serving");
	json_decref(e);
	e = call_error(f, "tools/forget", json_pack("{s:s}", "name", "noop"));
	assert_string_equal(jstr(json_object_get(e, "data"), "status"),
			    "builtin");
	json_decref(e);
	id = submit(f, json_pack("{s:s, s:{}}", "tool", "wp-ask", "input"));
	json_decref(wait_status(f, id, "suspended"));
	kill_worker(f, 0, SIGKILL);
	connected(f, "wp-ask", 0);
	e = call_error(f, "tools/forget", json_pack("{s:s}", "name", "wp-ask"));
	assert_string_equal(jstr(json_object_get(e, "data"), "status"), "jobs");
	json_decref(e);
	json_decref(call(f, "jobs/cancel", json_pack("{s:s}", "id", id)));
	/* A submission read before the forget but not yet committed when it
	 * was judged: the forget was {} and the job stayed pending for a tool
	 * that was no more, across restarts. */
	{
		static const char two[] =
			"{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":"
			"\"jobs/submit\",\"params\":{\"tool\":\"wp-ask\","
			"\"input\":{}}}\n"
			"{\"jsonrpc\":\"2.0\",\"id\":\"f\",\"method\":"
			"\"tools/forget\",\"params\":{\"name\":\"wp-ask\"}}";
		char *late = NULL;

		assert_int_equal(berth_client_send_line(f->c, two,
							sizeof two - 1), 0);
		for (int i = 0; i < 2; i++) {
			char *line = berth_client_read_line(f->c, 30000);
			json_t *m;

			assert_non_null(line);
			m = json_loads(line, 0, NULL);
			free(line);
			assert_non_null(m);
			if (strcmp(jstr(m, "id"), "s") == 0) {
				json_t *r = json_object_get(m, "result");

				assert_string_equal(jstr(r, "status"), "pending");
				late = strdup(jstr(r, "id"));
			} else {
				json_t *err = json_object_get(m, "error");

				assert_non_null(err);
				assert_string_equal(jstr(json_object_get(err,
						"data"), "status"), "jobs");
			}
			json_decref(m);
		}
		assert_non_null(late);
		json_decref(call(f, "jobs/cancel",
				 json_pack("{s:s}", "id", late)));
		free(late);
	}
	json_decref(call(f, "tools/forget", json_pack("{s:s}", "name", "wp-ask")));
	assert_null(tool(f, "wp-ask"));
	/* Gone after a restart too. */
	assert_int_equal(harness_restart(&f->h), 0);
	berth_client_close(f->c);
	f->c = harness_connect(&f->h);
	assert_null(tool(f, "wp-ask"));
	e = tool(f, "wp-echo");
	assert_non_null(e);
	json_decref(e);
	free(id);

	/* A stored definition that a manifest tool left out at start, as the
	 * log says, is forgotten by tools/forget: it was refused as
	 * "builtin" with "there is no stored definition", and the old
	 * definition came back once the manifest went. */
	{
		static char dir[600];
		char path[700];
		FILE *fp;
		int k = 0;

		snprintf(dir, sizeof dir, "%s/shadow", f->h.dir);
		assert_int_equal(mkdir(dir, 0700), 0);
		snprintf(path, sizeof path, "%s/wp-echo.json", dir);
		fp = fopen(path, "w");
		assert_non_null(fp);
		fputs("{\"id\":\"wp-echo\",\"command\":[\"/bin/true\"]}", fp);
		fclose(fp);
		while (f->h.args[k])
			k++;
		f->h.args[k] = "--tools";
		f->h.args[k + 1] = dir;
		f->h.args[k + 2] = NULL;
		assert_int_equal(harness_restart(&f->h), 0);
		berth_client_close(f->c);
		f->c = harness_connect(&f->h);
		json_decref(call(f, "tools/forget",
				 json_pack("{s:s}", "name", "wp-echo")));
		e = tool(f, "wp-echo");
		assert_string_equal(jstr(e, "kind"), "external");
		json_decref(e);
		/* Only the stored one goes: nothing left to forget after it. */
		e = call_error(f, "tools/forget",
			       json_pack("{s:s}", "name", "wp-echo"));
		assert_string_equal(jstr(json_object_get(e, "data"), "status"),
				    "builtin");
		json_decref(e);
		f->h.args[k] = NULL;
		assert_int_equal(harness_restart(&f->h), 0);
		berth_client_close(f->c);
		f->c = harness_connect(&f->h);
		assert_null(tool(f, "wp-echo"));
	}
}

/* ---- MCP ----------------------------------------------------------------- */

static void mcp__a_worker_tool_is_called_like_any_tool__with_its_model_output_and_its_client(
	void **state)
{
	struct fixture *f = *state;
	json_t *r, *echo, *mcp;

	worker(f, NULL);
	json_decref(call(f, "initialize",
			 json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion",
				   "2025-11-25", "capabilities", "clientInfo",
				   "name", "proto-test", "version", "1")));
	r = call(f, "tools/call",
		 json_pack("{s:s, s:{s:s}, s:{s:i}}", "name", "wp-echo",
			   "arguments", "text", "via mcp", "_meta",
			   "progressToken", 9));
	assert_false(json_is_true(json_object_get(r, "isError")));
	/* The content is the model output. */
	assert_non_null(strstr(jstr(json_array_get(json_object_get(r, "content"),
						   0),
				    "text"),
			       "echo of via mcp"));
	echo = json_object_get(r, "structuredContent");
	/* The run's mcp: the tools/call's _meta and the client. */
	mcp = json_object_get(echo, "mcp");
	assert_string_equal(jstr(json_object_get(mcp, "clientInfo"), "name"),
			    "proto-test");
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(mcp, "_meta"), "progressToken")),
			 9);
	json_decref(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			register__a_definition_that_does_not_check__is_refused_naming_its_place,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			register__the_id_of_a_builtin_tool__is_refused_as_builtin,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			register__another_definition_while_one_is_connected__is_refused_naming_the_fields,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			register__the_same_definition_by_two_workers__shares_the_jobs,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			register__another_definition_with_no_worker_connected__replaces_the_stored_one,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			register__past_10000_stored_definitions__is_refused_until_one_is_forgotten,
			setup_quiet, teardown),
		cmocka_unit_test_setup_teardown(
			register__past_64_mib_of_stored_definitions__is_refused_until_one_is_forgotten,
			setup_quiet, teardown),
		cmocka_unit_test_setup_teardown(
			definitions__survive_a_restart__and_jobs_are_submitted_approved_and_resumed_with_no_worker,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			run__reports_progress_logs_and_a_durable_checkpoint__then_its_outcome,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			run__outcomes_that_fail_their_schema_or_shape_or_retries__end_as_documented,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			run__retries_of_runs_that_fail_at_once__each_run_when_their_backoff_ends,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			cancel_and_timeout__reach_the_worker_as_abort, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			timeout__of_a_run_pushed_once_its_creation_commits__counts_from_the_push,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			a_worker_that_ignores_abort__has_its_run_given_up_at_the_kill_grace_and_its_late_answer_dropped,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			kill_9_of_the_worker__ends_its_runs_by_on_interrupt__and_the_next_worker_goes_on_from_the_checkpoint,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			kill_9_of_berthd__keeps_suspended_and_running_worker_jobs,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			heartbeats__a_worker_that_stops_answering__is_dropped_and_its_runs_end,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			drain__no_new_run_is_pushed_to_the_worker, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			tcp_with_the_token__serves__and_a_wrong_token_is_refused,
			setup_tcp, teardown),
		cmocka_unit_test_setup_teardown(
			retries__a_few_milliseconds_away__run_when_due, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			principals__a_worker_needs_the_worker_role__and_its_answers_are_recorded_as_its_own,
			setup_principals, teardown),
		cmocka_unit_test_setup_teardown(
			views__pending_while_no_worker_answers__then_filled_by_the_run,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			input__decides_the_approval_and_makes_the_views_before_the_job_commits,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			resume__its_views_are_made_before_it_commits, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			errors_berthd_makes__show_their_message_in_views__and_the_workers_error_its_view,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			the_pool_and_the_workers__do_not_take_each_others_room,
			setup_one_slot, teardown),
		cmocka_unit_test_setup_teardown(
			a_worker_tools_concurrency__caps_its_runs_across_workers,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			a_capped_worker_tools_waiting_jobs__run_as_the_limit_frees,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			sigterm__aborts_the_runs_after_the_shutdown_grace__and_puts_them_back_without_a_retry,
			setup_short_grace, teardown),
		cmocka_unit_test_setup_teardown(
			sigterm__does_not_wait_past_the_grace_for_an_unanswered_question,
			setup_short_grace, teardown),
		cmocka_unit_test_setup_teardown(
			checkpoint__after_a_cancel__is_refused_as_cancelled,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			tools_forget__refused_while_served_or_with_jobs__then_removes_the_definition,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			mcp__a_worker_tool_is_called_like_any_tool__with_its_model_output_and_its_client,
			setup, teardown),
	};

	if (getenv("BERTH_TEST_FILTER"))
		cmocka_set_test_filter(getenv("BERTH_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}

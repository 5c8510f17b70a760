/*
 * test_proc.c: external tools as real child processes: output, suspend and
 * resume, error, garbage, a silent exit quoting stderr, a tool ignoring
 * SIGTERM killed on timeout, cancel (also while its process starts), a
 * start by the job's creation once it is durable, checkpoints, the scrubbed
 * environment, and the processes a tool leaves behind. The tools are small sh -c scripts (jq is allowed).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fixture.h"
#include "worker/internal.h" /* worker__parse_line */

/* Each manifest's @DIR@ is replaced by the fixture directory. */
static const char *const manifests[][2] = {
	{"echo.json",
	 "{\"id\":\"p-echo\",\"inputSchema\":{\"type\":\"object\"},"
	 "\"outputSchema\":{\"type\":\"object\",\"required\":[\"got\"]},"
	 "\"command\":[\"/bin/sh\",\"-c\","
	 "\"read -r line; echo '{\\\"progress\\\":{\\\"progress\\\":1,"
	 "\\\"total\\\":2}}'; echo '{\\\"log\\\":{\\\"level\\\":\\\"info\\\","
	 "\\\"message\\\":\\\"working\\\",\\\"step\\\":1}}'; "
	 "echo 'to stderr' >&2; "
	 "printf '%s\\\\n' \\\"$line\\\" | jq -c '{output: {got: .input, "
	 "attempt: .attempt}, modelOutput: \\\"short\\\"}'\"]}"},
	{"ask.json",
	 "{\"id\":\"p-ask\",\"suspendSchema\":{\"type\":\"object\","
	 "\"required\":[\"question\"]},\"resumeSchema\":{\"type\":\"object\","
	 "\"required\":[\"answer\"]},\"command\":[\"/bin/sh\",\"-c\","
	 "\"jq -c 'if .resumeData then {output: {answer: .resumeData.answer,"
	 " asked: .suspendPayload.question}} else {suspend: {question: "
	 "\\\"name?\\\"}} end'\"]}"},
	{"error.json",
	 "{\"id\":\"p-error\",\"background\":{\"maxRetries\":3},"
	 "\"command\":[\"/bin/sh\",\"-c\",\"cat >/dev/null; echo "
	 "'{\\\"error\\\":{\\\"message\\\":\\\"no luck\\\","
	 "\\\"retryable\\\":false,\\\"data\\\":{\\\"x\\\":1}}}'\"]}"},
	{"garbage.json",
	 "{\"id\":\"p-garbage\",\"command\":[\"/bin/sh\",\"-c\","
	 "\"cat >/dev/null; echo 'hello world'; exec sleep 30\"]}"},
	/* Defaults that refer back to their own schema: filling them in
	 * never ends but at its limit. */
	{"defaults-bomb.json",
	 "{\"id\":\"p-defaults-bomb\",\"inputSchema\":{\"type\":\"object\","
	 "\"properties\":{\"a\":{\"$ref\":\"#\",\"default\":{}},"
	 "\"b\":{\"$ref\":\"#\",\"default\":{}}}},"
	 "\"command\":[\"/bin/true\"]}"},
	/* A line, then the tail of stderr, that are not UTF-8 (Latin-1). */
	{"latin1.json",
	 "{\"id\":\"p-latin1\",\"command\":[\"/bin/sh\",\"-c\","
	 "\"cat >/dev/null; printf 'caf\\\\351 au lait\\\\n'; exec sleep 30\"]}"},
	{"latin1-err.json",
	 "{\"id\":\"p-latin1-err\",\"command\":[\"/bin/sh\",\"-c\","
	 "\"cat >/dev/null; printf 'a nul \\\\000 and on\\\\n' >&2;"
	 " printf 'd\\\\351j\\\\340 vu\\\\n' >&2; exit 3\"]}"},
	{"silent.json",
	 "{\"id\":\"p-silent\",\"command\":[\"/bin/sh\",\"-c\","
	 "\"cat >/dev/null; echo 'something broke' >&2; exit 3\"]}"},
	{"stubborn.json",
	 "{\"id\":\"p-stubborn\",\"background\":{\"timeoutMs\":200},"
	 "\"env\":{\"PIDFILE\":\"@DIR@/stubborn.pid\"},"
	 "\"command\":[\"/bin/sh\",\"-c\",\"trap '' TERM; echo $$ > "
	 "\\\"$PIDFILE\\\"; exec sleep 30\"]}"},
	/* Writes a log line, a line of stderr and its final line, in that
	 * order, then holds its pipes open a while. */
	{"ordered.json",
	 "{\"id\":\"p-ordered\",\"command\":[\"/bin/sh\",\"-c\","
	 "\"cat >/dev/null; sleep 0.2; echo '{\\\"log\\\":\\\"first\\\"}'; "
	 "echo 'second' >&2; echo '{\\\"output\\\":{}}'; exec sleep 2\"]}"},
	{"long.json",
	 "{\"id\":\"p-long\",\"command\":[\"/bin/sh\",\"-c\","
	 "\"cat >/dev/null; exec sleep 30\"]}"},
	{"ckpt.json",
	 "{\"id\":\"p-ckpt\",\"background\":{\"maxRetries\":1,"
	 "\"backoffMs\":10},\"command\":[\"/bin/sh\",\"-c\","
	 "\"line=$(cat); if printf '%s' \\\"$line\\\" | jq -e .checkpoint "
	 ">/dev/null; then printf '%s' \\\"$line\\\" | jq -c '{output: "
	 "{from: .checkpoint.step, attempt: .attempt}}'; else echo "
	 "'{\\\"checkpoint\\\":{\\\"step\\\":3}}'; exit 1; fi\"]}"},
	{"env.json",
	 "{\"id\":\"p-env\",\"env\":{\"MINE\":\"mine\"},"
	 "\"command\":[\"/bin/sh\",\"-c\",\"cat >/dev/null; jq -nc --arg s "
	 "\\\"${SECRET_TOKEN:-}\\\" --arg m \\\"$MINE\\\" --arg j "
	 "\\\"$BERTH_JOB_ID\\\" --arg d \\\"$PWD\\\" '{output: {secret: $s, "
	 "mine: $m, job: $j, cwd: $d}}'\"]}"},
	{"flood.json",
	 "{\"id\":\"p-flood\",\"command\":[\"/bin/sh\",\"-c\","
	 "\"cat >/dev/null; head -c 300000 /dev/zero | tr '\\\\0' a; "
	 "echo\"]}"},
	{"missing.json",
	 "{\"id\":\"p-missing\",\"command\":[\"./no-such-program\"]}"},
	{"chatty.json",
	 "{\"id\":\"p-chatty\",\"command\":[\"/bin/sh\",\"@DIR@/chatty.sh\"]}"},
	{"wordy.json",
	 "{\"id\":\"p-wordy\",\"command\":[\"/bin/sh\",\"@DIR@/wordy.sh\"]}"},
	/* Answers with its job's status as the database has it when the
	 * process runs (sqlite3 reads what was committed). */
	{"sees.json",
	 "{\"id\":\"p-sees\",\"env\":{\"DB\":\"@DIR@/berth.db\"},"
	 "\"command\":[\"/bin/sh\",\"-c\",\"cat >/dev/null; "
	 "s=$(sqlite3 \\\"$DB\\\" \\\"select status from jobs where id = "
	 "'$BERTH_JOB_ID'\\\"); printf '{\\\"output\\\":{\\\"status\\\":"
	 "\\\"%s\\\"}}\\\\n' \\\"$s\\\"\"]}"},
	/* Ignores SIGTERM; each try writes "ran" to DIR/JOB.log, and
	 * "overlap" first when the try before it is still there. */
	{"stubborn-retried.json",
	 "{\"id\":\"p-stubborn-retried\",\"env\":{\"DIR\":\"@DIR@\"},"
	 "\"background\":{\"timeoutMs\":200,\"maxRetries\":1,"
	 "\"backoffMs\":1},\"command\":[\"/bin/sh\",\"-c\",\"trap '' TERM; "
	 "f=\\\"$DIR/$BERTH_JOB_ID\\\"; if [ -s \\\"$f.pid\\\" ] && kill -0 "
	 "$(cat \\\"$f.pid\\\") 2>/dev/null; then echo overlap >> "
	 "\\\"$f.log\\\"; fi; echo $$ > \\\"$f.pid\\\"; echo ran >> "
	 "\\\"$f.log\\\"; cat >/dev/null; exec sleep 30\"]}"},
	/* Writes its pid into DIR/JOB.pid, then waits. */
	{"lingers.json",
	 "{\"id\":\"p-lingers\",\"env\":{\"DIR\":\"@DIR@\"},"
	 "\"command\":[\"/bin/sh\",\"-c\",\"echo $$ > "
	 "\\\"$DIR/$BERTH_JOB_ID.pid\\\"; cat >/dev/null; exec sleep 30\"]}"},
	/* Leaves a process in another session holding its stdout, and
	 * exits after its final line. */
	{"escaped.json",
	 "{\"id\":\"p-escaped\",\"env\":{\"PIDFILE\":\"@DIR@/escaped.pid\"},"
	 "\"command\":[\"/bin/sh\",\"-c\",\"cat >/dev/null; setsid sh -c "
	 "'echo $$ > \\\"$PIDFILE.tmp\\\"; mv \\\"$PIDFILE.tmp\\\" "
	 "\\\"$PIDFILE\\\"; exec sleep 60' & "
	 "while [ ! -s \\\"$PIDFILE\\\" ]; do sleep 0.05; done; "
	 "echo '{\\\"output\\\":{}}'\"]}"},
	/* Leaves a process in its group, holding neither of its pipes, and
	 * exits after its final line. */
	{"leftovers.json",
	 "{\"id\":\"p-leftovers\",\"env\":{\"DIR\":\"@DIR@\"},"
	 "\"command\":[\"/bin/sh\",\"-c\",\"cat >/dev/null; "
	 "sh -c 'echo $$ > \\\"$DIR/quiet.tmp\\\"; mv \\\"$DIR/quiet.tmp\\\" "
	 "\\\"$DIR/quiet.pid\\\"; exec sleep 60' >/dev/null 2>&1 & "
	 "while [ ! -s \\\"$DIR/quiet.pid\\\" ]; "
	 "do sleep 0.05; done; echo '{\\\"output\\\":{}}'\"]}"},
};

/* Scripts the manifests above run, written beside them. */
static const char *const scripts[][2] = {
	/* 60 structured log lines of 1,000 bytes, three times what the
	 * tests' log keeps (20,000 bytes). */
	{"chatty.sh",
	 "cat >/dev/null\n"
	 "awk 'BEGIN {\n"
	 "  s = sprintf(\"%1000s\", \"\"); gsub(/ /, \"x\", s)\n"
	 "  for (i = 0; i < 60; i++) printf(\"{\\\"log\\\":{\\\"message\\\":\\\"%s\\\"}}\\n\", s)\n"
	 "  print \"{\\\"output\\\":{}}\"\n"
	 "}'\n"},
	/* 2,000 short log lines, half of them on stderr, twice what the
	 * tests' log keeps (1,000 lines). */
	{"wordy.sh",
	 "cat >/dev/null\n"
	 "awk 'BEGIN {\n"
	 "  for (i = 0; i < 1000; i++) {\n"
	 "    printf(\"{\\\"log\\\":\\\"%d\\\"}\\n\", i)\n"
	 "    print i > \"/dev/stderr\"\n"
	 "  }\n"
	 "  print \"{\\\"output\\\":{}}\"\n"
	 "}'\n"},
};

/* subst copies text into out with @DIR@ replaced by dir. */
static void subst(char *out, size_t size, const char *text, const char *dir)
{
	const char *at = strstr(text, "@DIR@");

	if (!at) {
		snprintf(out, size, "%s", text);
		return;
	}
	snprintf(out, size, "%.*s%s%s", (int)(at - text), text, dir, at + 5);
}

static int setup(void **state)
{
	struct worker_config cfg = {.workers = 4, .kill_grace_ms = 200,
				    .shutdown_grace_ms = 200,
				    .max_output_bytes = 100000,
				    .max_log_bytes = 20000,
				    .max_log_lines = 1000};
	struct fx *f = fx_new(&cfg);
	char *err = NULL;
	char dir[300], text[4096];
	int n;

	snprintf(dir, sizeof(dir), "%s/tools", f->dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	for (size_t i = 0; i < sizeof(manifests) / sizeof(manifests[0]); i++) {
		char name[64];

		subst(text, sizeof(text), manifests[i][1], f->dir);
		snprintf(name, sizeof(name), "tools/%s", manifests[i][0]);
		fx_write(f, name, text);
	}
	for (size_t i = 0; i < sizeof(scripts) / sizeof(scripts[0]); i++)
		fx_write(f, scripts[i][0], scripts[i][1]);
	n = worker_load_dir(f->w, dir, &err);
	if (n < 0)
		fprintf(stderr, "%s\n", err);
	assert_int_equal(n, (int)(sizeof(manifests) / sizeof(manifests[0])));
	fx_start(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx_free(*state);
	return 0;
}

static const char *error_message(const struct store_job *j)
{
	return json_string_value(json_object_get(j->error, "message"));
}

static void external_tool__output__completes_with_logs_and_progress(
	void **state)
{
	struct fx *f = *state;
	struct store_log_line *lines = NULL;
	struct store_job *j;
	size_t n = 0;
	bool saw_log = false, saw_stderr = false;
	char id[40];

	fx_submit_ok(f, "p-echo", "{\"a\":[1,2]}", NULL, id);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	j = fx_get(f, id);
	assert_int_equal(json_integer_value(json_array_get(
				 json_object_get(json_object_get(j->output,
								 "got"),
						 "a"),
				 1)),
			 2);
	assert_string_equal(json_string_value(j->model_output), "short");
	store_job_free(j);
	fx_run_for(f, 50);
	assert_int_equal(store_logs(f->st, id, 0, 100, &lines, &n), 0);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(lines[i].message, "working") == 0) {
			saw_log = true;
			assert_string_equal(lines[i].level, "info");
			assert_int_equal(json_integer_value(json_object_get(
						 lines[i].data, "step")),
					 1);
		}
		if (strcmp(lines[i].message, "to stderr") == 0)
			saw_stderr = true;
		store_log_line_finish(&lines[i]);
	}
	free(lines);
	assert_true(saw_log);
	assert_true(saw_stderr);
}

/* What a tool wrote to stderr before its final line is in the job's log
 * by the time the job has ended, whatever order berthd reads its pipes
 * in: the loop is held up while the tool writes, so that its stdout,
 * which was written first, is read first. */
static void external_tool__stderr_before_its_final_line__is_logged_before_the_end(
	void **state)
{
	struct fx *f = *state;
	struct store_log_line *lines = NULL;
	struct timespec ts = {0, 700 * 1000 * 1000};
	size_t n = 0;
	bool saw_stderr = false;
	char id[40];

	fx_submit_ok(f, "p-ordered", "{}", NULL, id);
	fx_wait_status(f, id, STORE_RUNNING, 5000);
	fx_run_for(f, 50); /* its stdin line, and the end of it */
	nanosleep(&ts, NULL);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	assert_int_equal(store_logs(f->st, id, 0, 100, &lines, &n), 0);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(lines[i].message, "second") == 0)
			saw_stderr = true;
		store_log_line_finish(&lines[i]);
	}
	free(lines);
	assert_true(saw_stderr);
}

static void external_tool__suspend__is_resumed_with_its_data(void **state)
{
	struct fx *f = *state;
	struct fx_res res = {0};
	struct store_job *j;
	json_t *d = json_pack("{s:s}", "answer", "Grace");
	char id[40];

	fx_submit_ok(f, "p-ask", "{}", NULL, id);
	fx_wait_status(f, id, STORE_SUSPENDED, 5000);
	assert_int_equal(worker_resume(f->w, id, d, NULL, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	assert_int_equal(res.err, WORKER_OK);
	fx_res_finish(&res);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	j = fx_get(f, id);
	assert_string_equal(json_string_value(json_object_get(j->output,
							      "answer")),
			    "Grace");
	assert_string_equal(json_string_value(json_object_get(j->output,
							      "asked")),
			    "name?");
	store_job_free(j);
	json_decref(d);
}

static void external_tool__error__fails_with_its_message_and_data(
	void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	char id[40];

	fx_submit_ok(f, "p-error", "{}", NULL, id);
	fx_wait_status(f, id, STORE_FAILED, 5000);
	j = fx_get(f, id);
	assert_string_equal(error_message(j), "no luck");
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(j->error, "data"), "x")),
			 1);
	/* Not retryable: one try although maxRetries is 3. */
	assert_int_equal(j->attempt, 1);
	store_job_free(j);
}

static void external_tool__garbage_line__fails_and_is_killed(void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	char id[40];

	fx_submit_ok(f, "p-garbage", "{}", NULL, id);
	fx_wait_status(f, id, STORE_FAILED, 3000);
	j = fx_get(f, id);
	assert_non_null(strstr(error_message(j), "not a JSON object"));
	assert_non_null(strstr(error_message(j), "hello world"));
	store_job_free(j);
}

/* A submission whose schema's defaults would grow without end is refused
 * with the error that says so (schema_fill_defaults' limit), not "out of
 * memory", and berthd goes on: before, it filled a tree of defaults until
 * it was killed. */
static void submit__defaults_without_end__are_refused_at_their_limit(
	void **state)
{
	struct fx *f = *state;
	struct fx_res res;

	fx_submit(f, "p-defaults-bomb", "{}", NULL, &res);
	assert_int_equal(res.err, WORKER_EINVAL);
	assert_non_null(strstr(json_string_value(json_object_get(
				       json_array_get(json_object_get(res.data,
								      "errors"),
						      0),
				       "message")),
			       "cannot fill in defaults"));
	fx_res_finish(&res);
}

/* A tool's line or stderr that is not UTF-8 is quoted with U+FFFD for
 * each bad byte (and each NUL): before, jansson refused the message, and
 * the job failed with no error at all. */
static void external_tool__bytes_that_are_not_utf8__are_quoted_as_u_fffd(
	void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	char id[40];

	fx_submit_ok(f, "p-latin1", "{}", NULL, id);
	fx_wait_status(f, id, STORE_FAILED, 3000);
	j = fx_get(f, id);
	assert_non_null(strstr(error_message(j), "not a JSON object"));
	assert_non_null(strstr(error_message(j), "caf\xEF\xBF\xBD au lait"));
	store_job_free(j);
	fx_submit_ok(f, "p-latin1-err", "{}", NULL, id);
	fx_wait_status(f, id, STORE_FAILED, 3000);
	j = fx_get(f, id);
	assert_non_null(strstr(error_message(j),
			       "d\xEF\xBF\xBDj\xEF\xBF\xBD vu"));
	assert_non_null(strstr(json_string_value(json_object_get(json_object_get(
				       j->error, "data"), "stderr")),
			       "d\xEF\xBF\xBDj\xEF\xBF\xBD vu"));
	store_job_free(j);
	/* A NUL in a line of stderr is U+FFFD too, and the line goes on
	 * past it in the job's log (it was cut there). */
	{
		struct store_log_line *lines = NULL;
		size_t n = 0;
		bool whole = false;

		fx_run_for(f, 50);
		assert_int_equal(store_logs(f->st, id, 0, 100, &lines, &n), 0);
		for (size_t i = 0; i < n; i++) {
			if (strcmp(lines[i].message,
				   "a nul \xEF\xBF\xBD and on") == 0)
				whole = true;
			store_log_line_finish(&lines[i]);
		}
		free(lines);
		assert_true(whole);
	}
}

static void external_tool__exit_without_final_line__quotes_status_and_stderr(
	void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	char id[40];

	fx_submit_ok(f, "p-silent", "{}", NULL, id);
	fx_wait_status(f, id, STORE_FAILED, 5000);
	j = fx_get(f, id);
	assert_non_null(strstr(error_message(j), "exited with status 3"));
	assert_non_null(strstr(error_message(j), "something broke"));
	store_job_free(j);
}

static bool process_gone(void *arg)
{
	pid_t pid = *(pid_t *)arg;

	return kill(pid, 0) != 0 && errno == ESRCH;
}

static pid_t read_pid(struct fx *f)
{
	char path[320];
	FILE *fp;
	int pid = 0;

	snprintf(path, sizeof(path), "%s/stubborn.pid", f->dir);
	fp = fopen(path, "r");
	assert_non_null(fp);
	assert_int_equal(fscanf(fp, "%d", &pid), 1);
	fclose(fp);
	return pid;
}

/* log_of reads every log line of job id; returns how many, with their
 * message bytes in *bytes and the lines saying the rest was dropped in
 * *markers. */
static size_t log_of(struct fx *f, const char *id, int64_t *bytes,
		     int *markers)
{
	int64_t after = 0;
	size_t total = 0;

	*bytes = 0;
	*markers = 0;
	for (;;) {
		struct store_log_line *lines = NULL;
		size_t n = 0;

		assert_int_equal(store_logs(f->st, id, after, 1000, &lines, &n), 0);
		for (size_t i = 0; i < n; i++) {
			*bytes += (int64_t)strlen(lines[i].message);
			if (strstr(lines[i].message, "the rest of it is dropped")) {
				assert_string_equal(lines[i].level, "warn");
				(*markers)++;
			}
			after = lines[i].n;
			store_log_line_finish(&lines[i]);
		}
		free(lines);
		total += n;
		if (n == 0)
			return total;
	}
}

/* A tool's structured log lines count toward the log of its run: 60,000
 * bytes of them keep the 20,000 of the tests' cap, then one line says the
 * rest was dropped (before: all were stored, whatever the cap). */
static void external_tool__log_lines_past_the_byte_cap__are_dropped_with_a_note(
	void **state)
{
	struct fx *f = *state;
	int64_t bytes;
	int markers;
	size_t n;
	char id[40];

	fx_submit_ok(f, "p-chatty", "{}", NULL, id);
	fx_wait_status(f, id, STORE_COMPLETED, 30000);
	fx_run_for(f, 100);
	n = log_of(f, id, &bytes, &markers);
	fprintf(stderr, "chatty: %zu lines, %lld bytes kept\n", n,
		(long long)bytes);
	assert_int_equal(markers, 1);
	assert_true(bytes <= 20000 + 200);
	assert_true(bytes >= 20000 - 1000);
}

/* The same for the count of lines, structured and stderr together: 2,000
 * keep the 1,000 of the tests' cap, the note being the last (before: the
 * newest 1,000, no note). */
static void external_tool__log_lines_past_the_line_cap__are_dropped_with_a_note(
	void **state)
{
	struct fx *f = *state;
	int64_t bytes;
	int markers;
	char id[40];

	fx_submit_ok(f, "p-wordy", "{}", NULL, id);
	fx_wait_status(f, id, STORE_COMPLETED, 30000);
	fx_run_for(f, 100);
	assert_int_equal(log_of(f, id, &bytes, &markers), 1000);
	assert_int_equal(markers, 1);
}

/* alive tells whether pid runs: neither gone nor a zombie (a reparented
 * process is reaped by whatever pid 1 is, maybe late). */
static bool alive(pid_t pid)
{
	char path[64], line[512];
	char *paren;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fp = fopen(path, "r");
	if (!fp)
		return false;
	if (!fgets(line, sizeof(line), fp))
		line[0] = '\0';
	fclose(fp);
	paren = strrchr(line, ')');
	return paren && paren[1] == ' ' && paren[2] != 'Z';
}

static bool dead(void *arg)
{
	return !alive(*(pid_t *)arg);
}

/* pid_file reads the pid a tool wrote into DIR/name, or returns 0 when
 * it wrote none (its process never started). */
static pid_t pid_file(struct fx *f, const char *name)
{
	char path[400];
	FILE *fp;
	int pid = 0;

	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	fp = fopen(path, "r");
	if (!fp)
		return 0;
	if (fscanf(fp, "%d", &pid) != 1)
		pid = 0;
	fclose(fp);
	return pid;
}

static pid_t pid_in(struct fx *f, const char *name)
{
	pid_t pid = pid_file(f, name);

	assert_true(pid > 0);
	return pid;
}

static bool idle(void *arg)
{
	struct worker_stats st;

	worker_stats(arg, &st);
	return st.busy == 0;
}

/* A tool that exits after its final line, but leaves a process outside its
 * group holding its stdout: the slot is free after the reap grace, not
 * once that process ends (60 s; it held slots for as long before). */
static void external_tool__escaped_grandchild_holding_stdout__frees_the_slot(
	void **state)
{
	struct fx *f = *state;
	pid_t pid;
	char id[40];

	fx_submit_ok(f, "p-escaped", "{}", NULL, id);
	fx_wait_status(f, id, STORE_COMPLETED, 10000);
	assert_true(fx_run_until(f, idle, f->w, 10000));
	pid = pid_in(f, "escaped.pid");
	/* It still runs, out of berth's reach (another session), and no
	 * longer holds anything of berth's. */
	assert_true(alive(pid));
	kill(pid, SIGKILL);
}

/* A tool that exits after its final line and leaves a process in its
 * group that holds none of its pipes: the group is killed once the run is
 * over (before, it lived on; one holding a pipe was killed at the tool's
 * exit, and now gets the reap grace first). */
static void external_tool__exited__the_rest_of_its_group_is_killed(
	void **state)
{
	struct fx *f = *state;
	pid_t quiet;
	char id[40];

	fx_submit_ok(f, "p-leftovers", "{}", NULL, id);
	fx_wait_status(f, id, STORE_COMPLETED, 10000);
	assert_true(fx_run_until(f, idle, f->w, 10000));
	quiet = pid_in(f, "quiet.pid");
	if (!fx_run_until(f, dead, &quiet, 5000)) {
		kill(quiet, SIGKILL);
		fail_msg("the process %d the tool left in its group lives on",
			 (int)quiet);
	}
}

static void external_tool__ignoring_sigterm__is_killed_on_timeout(
	void **state)
{
	struct fx *f = *state;
	struct worker_stats st;
	pid_t pid;
	char id[40];

	fx_submit_ok(f, "p-stubborn", "{}", NULL, id);
	fx_wait_status(f, id, STORE_TIMED_OUT, 3000);
	pid = read_pid(f);
	/* SIGTERM is ignored; SIGKILL follows the 200 ms grace. */
	assert_true(fx_run_until(f, process_gone, &pid, 2000));
	fx_run_for(f, 20);
	worker_stats(f->w, &st);
	assert_int_equal(st.busy, 0);
}

static void external_tool__timed_out__is_retried_once_its_process_is_gone(
	void **state)
{
	struct fx *f = *state;
	char id[40], path[600], log[64] = "";
	FILE *fp;

	fx_submit_ok(f, "p-stubborn-retried", "{}", NULL, id);
	fx_wait_status(f, id, STORE_TIMED_OUT, 5000);
	snprintf(path, sizeof(path), "%s/%s.log", f->dir, id);
	fp = fopen(path, "r");
	assert_non_null(fp);
	log[fread(log, 1, sizeof(log) - 1, fp)] = '\0';
	fclose(fp);
	/* The retry, and the end, come after SIGKILL at the grace. */
	assert_string_equal(log, "ran\nran\n");
}

static void external_tool__cancelled__is_stopped(void **state)
{
	struct fx *f = *state;
	struct fx_res res = {0};
	struct worker_stats st;
	char id[40];

	fx_submit_ok(f, "p-long", "{}", NULL, id);
	fx_wait_status(f, id, STORE_RUNNING, 3000);
	fx_run_for(f, 50);
	assert_int_equal(worker_cancel(f->w, id, "stop", NULL, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	assert_int_equal(res.err, WORKER_OK);
	assert_int_equal(res.status, STORE_CANCELLED);
	fx_res_finish(&res);
	fx_run_for(f, 100);
	worker_stats(f->w, &st);
	assert_int_equal(st.busy, 0);
	assert_int_equal(fx_status(f, id), STORE_CANCELLED);
}

/* With a slot free and nothing pending ahead, an external tool's job is
 * started by its creation's commit, without a claim's (one commit less on
 * every job's way), and its process starts only once that commit is
 * durable: the process finds its job running in the database. */
static void external_tool__with_a_free_slot__starts_by_its_creation_once_durable(
	void **state)
{
	struct fx *f = *state;
	struct worker_stats before, after;
	char first[40], id[40];
	json_t *out;

	/* A job ahead, so that a claim has come back short of its limit:
	 * nothing waits (the first claim of a worker clears the way). */
	fx_submit_ok(f, "p-sees", "{}", NULL, first);
	fx_wait_status(f, first, STORE_COMPLETED, 10000);
	worker_stats(f->w, &before);
	fx_submit_ok(f, "p-sees", "{}", NULL, id);
	out = fx_completed_output(f, id);
	fx_assert_json(out, "{\"status\": \"2\"}"); /* STORE_RUNNING */
	json_decref(out);
	worker_stats(f->w, &after);
	assert_int_equal(after.started_at_submit - before.started_at_submit,
			 1);
	assert_int_equal(after.started_by_claim - before.started_by_claim, 0);
	assert_int_equal(fx_count_events(f, id, STORE_EV_STARTED), 1);
}

/* pid_written reads DIR/id.pid, or returns 0 when the process never
 * wrote it (it was cancelled before it started). */
static pid_t pid_written(struct fx *f, const char *id)
{
	char name[200]; /* an id is 36 bytes; gcc -O2 cannot tell */

	snprintf(name, sizeof(name), "%s.pid", id);
	return pid_file(f, name);
}

/* Cancelled right after its submission was answered, while its process
 * is still being started (or just after): the job ends cancelled, its
 * slot comes back, and no process of it is left. */
static void external_tool__cancelled_as_it_starts__leaves_no_process(
	void **state)
{
	struct fx *f = *state;
	char ids[4][40];

	for (int i = 0; i < 4; i++) {
		struct fx_res res = {0};

		fx_submit_ok(f, "p-lingers", "{}", NULL, ids[i]);
		assert_int_equal(worker_cancel(f->w, ids[i], "stop", NULL,
					       fx_cb, &res),
				 0);
		fx_wait_res(f, &res);
		assert_int_equal(res.err, WORKER_OK);
		assert_int_equal(res.status, STORE_CANCELLED);
		fx_res_finish(&res);
	}
	assert_true(fx_run_until(f, idle, f->w, 10000));
	for (int i = 0; i < 4; i++) {
		pid_t pid = pid_written(f, ids[i]);

		assert_int_equal(fx_status(f, ids[i]), STORE_CANCELLED);
		if (pid > 0)
			assert_false(alive(pid));
	}
}

static void external_tool__checkpoint__is_seen_after_a_crash(void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	char id[40];

	fx_submit_ok(f, "p-ckpt", "{}", NULL, id);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	j = fx_get(f, id);
	assert_int_equal(json_integer_value(json_object_get(j->output, "from")),
			 3);
	assert_int_equal(json_integer_value(json_object_get(j->output,
							    "attempt")),
			 2);
	store_job_free(j);
}

static void external_tool__environment__is_scrubbed(void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	char id[40], tools[300];

	setenv("SECRET_TOKEN", "hunter2", 1);
	fx_submit_ok(f, "p-env", "{}", NULL, id);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	unsetenv("SECRET_TOKEN");
	j = fx_get(f, id);
	assert_string_equal(json_string_value(json_object_get(j->output,
							      "secret")),
			    "");
	assert_string_equal(json_string_value(json_object_get(j->output,
							      "mine")),
			    "mine");
	assert_string_equal(json_string_value(json_object_get(j->output,
							      "job")),
			    id);
	/* The default cwd is the manifest's folder. */
	snprintf(tools, sizeof(tools), "%s/tools", f->dir);
	assert_non_null(strstr(json_string_value(json_object_get(j->output,
								 "cwd")),
			       "/tools"));
	store_job_free(j);
}

static void external_tool__missing_program__fails_saying_so(void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	char id[40];

	fx_submit_ok(f, "p-missing", "{}", NULL, id);
	fx_wait_status(f, id, STORE_FAILED, 3000);
	j = fx_get(f, id);
	assert_non_null(strstr(error_message(j), "could not be started"));
	store_job_free(j);
}

static void external_tool__flooding_stdout__fails_at_the_cap(void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	char id[40];

	fx_submit_ok(f, "p-flood", "{}", NULL, id);
	fx_wait_status(f, id, STORE_FAILED, 5000);
	j = fx_get(f, id);
	assert_non_null(strstr(error_message(j), "more than 100000 bytes"));
	store_job_free(j);
}

/* ---- the line parser, without a process -------------------------------- */

static void parse(const char *text, int want_rc, struct worker__line *l)
{
	assert_int_equal(worker__parse_line(text, strlen(text), l), want_rc);
}

static void parse_line__reads_every_kind_a_line_may_carry(void **state)
{
	struct worker__line l;

	parse("{\"progress\":{\"progress\":3,\"total\":10},"
	      "\"log\":{\"level\":\"warn\",\"message\":\"m\",\"k\":1},"
	      "\"checkpoint\":{\"step\":2},\"output\":{\"ok\":true},"
	      "\"modelOutput\":\"fine\"}\r",
	      0, &l);
	assert_int_equal(l.has, WORKER__LINE_PROGRESS | WORKER__LINE_LOG |
					WORKER__LINE_CHECKPOINT |
					WORKER__LINE_FINAL);
	assert_int_equal(json_integer_value(json_object_get(l.progress, "total")),
			 10);
	assert_string_equal(l.log_level, "warn");
	assert_string_equal(l.log_message, "m");
	assert_int_equal(json_integer_value(json_object_get(l.log_data, "k")), 1);
	assert_null(json_object_get(l.log_data, "level"));
	assert_int_equal(json_integer_value(json_object_get(l.checkpoint, "step")),
			 2);
	assert_int_equal(l.final.kind, BERTH_OUTPUT);
	assert_true(json_is_true(json_object_get(l.final.value, "ok")));
	assert_string_equal(json_string_value(l.final.model_output), "fine");
	worker__line_finish(&l);

	/* A null modelOutput (Python's None) is none: MCP clients were
	 * shown the text "null" instead of the output. */
	parse("{\"output\":{\"ok\":true},\"modelOutput\":null}", 0, &l);
	assert_int_equal(l.final.kind, BERTH_OUTPUT);
	assert_null(l.final.model_output);
	worker__line_finish(&l);

	parse("{\"suspend\":{\"q\":1}}", 0, &l);
	assert_int_equal(l.has, WORKER__LINE_FINAL);
	assert_int_equal(l.final.kind, BERTH_SUSPEND);
	worker__line_finish(&l);

	parse("{\"error\":{\"message\":\"boom\",\"retryable\":true,"
	      "\"data\":{\"s\":503}}}",
	      0, &l);
	assert_int_equal(l.final.kind, BERTH_ERROR);
	assert_string_equal(l.final.message, "boom");
	assert_true(l.final.retryable);
	assert_int_equal(json_integer_value(json_object_get(l.final.value, "s")),
			 503);
	worker__line_finish(&l);

	parse("{\"log\":\"plain\",\"progress\":\"half\"}", 0, &l);
	assert_int_equal(l.has, WORKER__LINE_LOG | WORKER__LINE_BAD_PROGRESS);
	assert_string_equal(l.log_level, "info");
	assert_string_equal(l.log_message, "plain");
	assert_null(l.log_data);
	worker__line_finish(&l);
}

static void parse_line__refuses_what_is_not_a_json_object__or_not_one_final(void **state)
{
	struct worker__line l;

	parse("", 0, &l); /* an empty line is nothing, not an error */
	assert_int_equal(l.has, 0);
	worker__line_finish(&l);
	parse("hello", -EINVAL, &l);
	assert_int_equal(l.has, 0);
	worker__line_finish(&l);
	parse("[1]", -EINVAL, &l);
	worker__line_finish(&l);
	parse("{\"output\":", -EINVAL, &l);
	worker__line_finish(&l);
	/* Exactly one of output, suspend and error (issue 4): with two,
	 * output won and an error beside it completed the job. */
	parse("{\"output\":1,\"error\":{\"message\":\"x\"}}", -EINVAL, &l);
	assert_non_null(strstr(l.why, "more than one of output, suspend and "
				      "error"));
	worker__line_finish(&l);
	/* A retryable that is not a boolean ("yes" read as false). */
	parse("{\"error\":{\"message\":\"x\",\"retryable\":\"yes\"}}",
	      -EINVAL, &l);
	assert_non_null(strstr(l.why, "retryable"));
	worker__line_finish(&l);
	/* JSON berth does not take says so, not "not a JSON object". */
	parse("{\"output\":\"a\\u0000b\"}", -EINVAL, &l);
	assert_non_null(strstr(l.why, "berth takes ("));
	worker__line_finish(&l);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(external_tool__output__completes_with_logs_and_progress),
		T(external_tool__stderr_before_its_final_line__is_logged_before_the_end),
		T(external_tool__suspend__is_resumed_with_its_data),
		T(external_tool__error__fails_with_its_message_and_data),
		T(external_tool__garbage_line__fails_and_is_killed),
		T(external_tool__bytes_that_are_not_utf8__are_quoted_as_u_fffd),
		T(submit__defaults_without_end__are_refused_at_their_limit),
		T(external_tool__exit_without_final_line__quotes_status_and_stderr),
		T(external_tool__ignoring_sigterm__is_killed_on_timeout),
		T(external_tool__timed_out__is_retried_once_its_process_is_gone),
		T(external_tool__cancelled__is_stopped),
		T(external_tool__with_a_free_slot__starts_by_its_creation_once_durable),
		T(external_tool__cancelled_as_it_starts__leaves_no_process),
		T(external_tool__checkpoint__is_seen_after_a_crash),
		T(external_tool__environment__is_scrubbed),
		T(external_tool__missing_program__fails_saying_so),
		T(external_tool__flooding_stdout__fails_at_the_cap),
		T(external_tool__log_lines_past_the_byte_cap__are_dropped_with_a_note),
		T(external_tool__log_lines_past_the_line_cap__are_dropped_with_a_note),
		T(external_tool__escaped_grandchild_holding_stdout__frees_the_slot),
		T(external_tool__exited__the_rest_of_its_group_is_killed),
		cmocka_unit_test(parse_line__reads_every_kind_a_line_may_carry),
		cmocka_unit_test(parse_line__refuses_what_is_not_a_json_object__or_not_one_final),
	};

	return cmocka_run_group_tests_name("worker external tools", tests,
					   NULL, NULL);
}

/*
 * faults.c: berthd (crashd) under faults. Each test starts its own daemon
 * through tests/harness and ends by stopping it with SIGTERM and expecting
 * exit status 0, which under ASan also means that nothing leaked.
 *
 *   poison_tool__crashing_the_daemon__is_failed_after_its_retries
 *   disk_full__answers_storage_error__and_recovers_when_space_returns
 *   disk_full__a_refused_nonblocking_submission__leaves_no_run_behind
 *   locked_database__answers_storage_error__and_recovers
 *   second_daemon__on_the_same_database__refuses_to_start
 *   damaged_database__berthd_refuses_to_start_and_says_why
 *   misbehaving_tools__fail_their_jobs__and_the_daemon_serves_on
 *   kill9__a_tool_left_running__is_killed_before_its_job_runs_again
 *   client_disconnects__mid_request_and_mid_batch__harm_no_one
 *   security__socket_tools_limits_tcp_and_ids
 */
#include <ctype.h>
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
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "tests/harness/child.h"
#include "tests/harness/harness.h"
#include "tests/http/client.h"

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* http_port reads the port of berthd's --http 127.0.0.1:0 from its log
 * (the gateway prints it before the loop runs); 0 when it never came. */
static int http_port(const struct harness *h)
{
	static const char mark[] = "serving http://127.0.0.1:";

	for (int tries = 0; tries < 500; tries++) {
		char buf[8192] = "";
		FILE *f = fopen(h->log, "r");
		size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
		char *p;

		if (f)
			fclose(f);
		buf[n] = '\0';
		if ((p = strstr(buf, mark)))
			return atoi(p + strlen(mark));
		sleep_ms(10);
	}
	return 0;
}

static bool is_terminal(const char *s)
{
	static const char *const t[] = {"completed", "failed", "timed_out",
					"declined", "cancelled", "expired"};

	for (size_t i = 0; s && i < 6; i++)
		if (strcmp(s, t[i]) == 0)
			return true;
	return false;
}

/* wait_terminal polls a job until it is terminal; returns it (new). */
static json_t *wait_terminal(struct berth_client *c, const char *id,
			     int limit_ms)
{
	for (int waited = 0;; waited += 50) {
		json_t *j = harness_call(c, "jobs/get",
					 json_pack("{s:s}", "id", id), NULL);

		if (is_terminal(json_string_value(json_object_get(j, "status"))) ||
		    waited >= limit_ms)
			return j;
		json_decref(j);
		sleep_ms(50);
	}
}

static const char *status_of(const json_t *job)
{
	return json_string_value(json_object_get(job, "status"));
}

/* submit returns 0 with *id (malloc'd), or the error code of the reply. */
static json_int_t submit(struct berth_client *c, json_t *params, char **id)
{
	json_t *res = NULL, *err = NULL;
	int rc = berth_client_call(c, "jobs/submit", params, 60000, &res, &err);
	json_int_t code = 0;

	json_decref(params);
	*id = NULL;
	if (rc == 0)
		*id = strdup(json_string_value(json_object_get(res, "id")));
	else if (rc == 1)
		code = json_integer_value(json_object_get(err, "code"));
	else
		code = rc;
	json_decref(res);
	json_decref(err);
	return code;
}

static void stop_cleanly(struct harness *h)
{
	assert_int_equal(harness_stop(h), 0);
	harness_cleanup(h);
}

static int integrity_ok(const char *path)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	int ok = 0;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) ==
		    SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			ok = strcmp((const char *)sqlite3_column_text(st, 0),
				    "ok") == 0;
		sqlite3_finalize(st);
	}
	sqlite3_close(db);
	return ok;
}

/* ---- a poison job ------------------------------------------------------ */

static void poison_tool__crashing_the_daemon__is_failed_after_its_retries(
	void **state)
{
	static const char *const args[] = {"--quiet", NULL};
	struct harness h = {.no_examples = true};
	struct berth_client *c;
	char *id = NULL, *echo = NULL;
	json_t *j;
	int crashes = 0;

	assert_int_equal(harness_start(&h, args), 0);
	c = harness_connect(&h);
	assert_non_null(c);
	assert_int_equal(submit(c, json_pack("{s:s, s:{}}", "tool",
					     "crash-poison", "input"), &id), 0);
	berth_client_close(c);
	/* Each start runs the job, which takes the daemon down; the start
	 * after the last retry must fail the job instead of running it. A
	 * restarted daemon may run the job, and die, before its socket
	 * accepts: the harness then reports the abort as a failed start. */
	for (int round = 0; round < 8; round++) {
		int status;
		pid_t r = 0;

		for (int waited = 0; waited < 5000; waited += 10) {
			r = waitpid(h.pid, &status, WNOHANG);
			if (r == h.pid)
				break;
			sleep_ms(10);
		}
		if (r != h.pid)
			break; /* it stays up */
		assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
		h.pid = 0;
		crashes++;
		while (harness_restart(&h) != 0) {
			assert_true(WIFSIGNALED(h.start_status) &&
				    WTERMSIG(h.start_status) == SIGABRT);
			crashes++;
			assert_true(crashes < 8);
		}
	}
	assert_int_equal(crashes, 3); /* the first try and two retries */
	c = harness_connect(&h);
	assert_non_null(c);
	j = wait_terminal(c, id, 10000);
	assert_string_equal(status_of(j), "failed");
	assert_non_null(json_object_get(j, "error"));
	fprintf(stderr, "poison job: %s\n",
		json_string_value(json_object_get(json_object_get(j, "error"),
						  "message")));
	json_decref(j);
	/* And the daemon goes on serving. */
	assert_int_equal(submit(c, json_pack("{s:s, s:{s:i}}", "tool",
					     "crash-echo", "input", "n", 7),
				&echo), 0);
	j = wait_terminal(c, echo, 10000);
	assert_string_equal(status_of(j), "completed");
	json_decref(j);
	berth_client_close(c);
	free(id);
	free(echo);
	stop_cleanly(&h);
}

/* ---- disk full --------------------------------------------------------- */

/* A disk that fills: a 2 MiB tmpfs holding the database, and a filler file
 * that takes most of it once berthd runs. */
struct disk {
	char mnt[32];
	char db[128];
	char filler[128];
};

/* disk_mount mounts d's tmpfs, or skips the test when it cannot. */
static void disk_mount(struct disk *d)
{
	snprintf(d->mnt, sizeof d->mnt, "/tmp/berth-diskfull-XXXXXX");
	assert_non_null(mkdtemp(d->mnt));
	if (mount("berth-diskfull", d->mnt, "tmpfs", 0, "size=2m") != 0) {
		fprintf(stderr, "disk full: cannot mount a tmpfs on %s (%s); "
			"skipped\n", d->mnt, strerror(errno));
		rmdir(d->mnt);
		skip();
	}
	snprintf(d->db, sizeof d->db, "%s/berth.db", d->mnt);
	snprintf(d->filler, sizeof d->filler, "%s/filler", d->mnt);
}

/* disk_fill takes most of d's space with the filler file. */
static void disk_fill(const struct disk *d)
{
	char cmd[256];

	snprintf(cmd, sizeof cmd,
		 "dd if=/dev/zero of=%s bs=64k count=20 2>/dev/null", d->filler);
	assert_int_equal(system(cmd), 0);
}

/* disk_unmount removes the database and d's tmpfs. */
static void disk_unmount(const struct disk *d)
{
	char cmd[256];

	snprintf(cmd, sizeof cmd, "rm -f %s/berth.db*", d->mnt);
	(void)system(cmd);
	umount(d->mnt);
	rmdir(d->mnt);
}

/* pad_16k returns {"pad": 16 KiB of 'x'}: inputs that fill the 2 MiB
 * quickly. */
static json_t *pad_16k(void)
{
	char *pad = malloc(16385);
	json_t *v;

	assert_non_null(pad);
	memset(pad, 'x', 16384);
	pad[16384] = '\0';
	v = json_pack("{s:s}", "pad", pad);
	free(pad);
	return v;
}

static void disk_full__answers_storage_error__and_recovers_when_space_returns(
	void **state)
{
	struct disk d;
	const char *args[] = {"--db", d.db, "--quiet", "--http", "127.0.0.1:0",
			      "--http-open", NULL};
	struct harness h = {.no_examples = true};
	struct berth_client *c;
	json_t *big, *res, *err;
	int acked = 0, refused = 0, port;
	char *id;
	char **ids;

	disk_mount(&d);
	ids = calloc(4000, sizeof *ids);
	assert_non_null(ids);
	assert_int_equal(harness_start(&h, args), 0);
	c = harness_connect(&h);
	assert_non_null(c);
	/* Inputs of 16 KiB fill the 2 MiB quickly; a filler file takes
	 * most of the space first. */
	disk_fill(&d);
	big = pad_16k();
	for (int i = 0; i < 4000 && refused < 5; i++) {
		char key[32];
		json_int_t code;

		snprintf(key, sizeof key, "full-%d", i);
		code = submit(c, json_pack("{s:s, s:{s:i, s:O}, s:s}", "tool",
					   "crash-echo", "input", "n", i, "meta",
					   big, "idempotencyKey", key),
			      &id);
		if (code == 0) {
			ids[acked++] = id;
		} else {
			assert_int_equal(code, -32014);
			refused++;
		}
	}
	fprintf(stderr, "disk full: %d submissions answered, then %d refused "
		"with -32014\n", acked, refused);
	assert_true(refused > 0);
	/* Through HTTP the same refusal is 507 Insufficient Storage, with
	 * the socket's error in the body. */
	port = http_port(&h);
	assert_true(port > 0);
	{
		struct resp r;
		json_t *params = json_pack("{s:s, s:{s:i, s:O}, s:s}", "tool",
					   "crash-echo", "input", "n", -1,
					   "meta", big, "idempotencyKey",
					   "full-http");
		char *body = json_dumps(params, JSON_COMPACT);
		json_t *v;

		json_decref(params);

		assert_non_null(body);
		assert_int_equal(http_do(port, "POST", "/api/jobs", JSON_CT,
					 body, &r),
				 0);
		v = resp_json(&r);
		fprintf(stderr, "disk full: POST /api/jobs answered %d\n",
			r.status);
		assert_int_equal(r.status, 507);
		assert_int_equal(json_integer_value(json_object_get(
					 json_object_get(v, "error"), "code")),
				 -32014);
		json_decref(v);
		resp_free(&r);
		free(body);
	}
	/* A read still works, and the storage error changed nothing: every
	 * acknowledged job is there and none of the refused keys made one. */
	res = harness_call(c, "server/info", NULL, NULL);
	json_decref(res);
	for (int i = 0; i < acked; i++) {
		res = harness_call(c, "jobs/get", json_pack("{s:s}", "id", ids[i]),
				   NULL);
		json_decref(res);
	}
	/* Space returns: the same daemon accepts work again. */
	assert_int_equal(unlink(d.filler), 0);
	{
		json_int_t code = -1;

		for (int tries = 0; tries < 50 && code != 0; tries++) {
			code = submit(c, json_pack("{s:s, s:{s:i}}", "tool",
						   "crash-echo", "input", "n", 1),
				      &id);
			if (code != 0)
				sleep_ms(100);
		}
		assert_int_equal(code, 0);
		res = wait_terminal(c, id, 20000);
		assert_string_equal(status_of(res), "completed");
		json_decref(res);
		free(id);
	}
	/* Every job acknowledged before and during the fault runs. */
	for (int i = 0; i < acked; i++) {
		res = wait_terminal(c, ids[i], 30000);
		assert_string_equal(status_of(res), "completed");
		json_decref(res);
		free(ids[i]);
	}
	/* Nothing half-written: the refused submissions made no job, so
	 * there are exactly the answered ones and the one after recovery. */
	res = harness_call(c, "jobs/list", json_pack("{s:i}", "limit", 1000),
			   NULL);
	assert_int_equal(json_array_size(json_object_get(res, "jobs")),
			 (size_t)acked + 1);
	json_decref(res);
	err = NULL;
	berth_client_close(c);
	json_decref(big);
	free(ids);
	assert_int_equal(harness_stop(&h), 0);
	assert_true(integrity_ok(d.db));
	harness_cleanup(&h);
	disk_unmount(&d);
	(void)err;
}

/* read_log returns berthd's log so far (malloc'd, NUL-terminated). */
static char *read_log(const struct harness *h)
{
	FILE *f = fopen(h->log, "r");
	size_t cap = 1 << 16, len = 0, n;
	char *buf = malloc(cap);

	assert_non_null(buf);
	while (f && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (len + 1 == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
	}
	if (f)
		fclose(f);
	buf[len] = '\0';
	return buf;
}

/* retried_results_exist checks every "job ID: storing its result failed"
 * line of berthd's log: a result is stored again only for a job that
 * exists. Returns the number of such lines. */
static int retried_results_exist(struct harness *h, struct berth_client *c)
{
	static const char mark[] = ": storing its result failed";
	char *log = read_log(h), *p = log;
	int n = 0;

	while ((p = strstr(p, mark))) {
		char *start = p;
		char id[40];
		json_t *err = NULL, *j;

		while (start > log && start[-1] != ' ')
			start--;
		assert_true(p - start < (ptrdiff_t)sizeof id);
		memcpy(id, start, (size_t)(p - start));
		id[p - start] = '\0';
		j = harness_call(c, "jobs/get", json_pack("{s:s}", "id", id),
				 &err);
		if (err)
			fprintf(stderr, "the result of job %s, which does not "
				"exist, is being stored again\n", id);
		assert_null(err);
		json_decref(j);
		n++;
		p += sizeof mark - 1;
	}
	free(log);
	return n;
}

/* A nonblocking tool's job runs at its submission, before its creation
 * commits (docs/API.md). When that commit fails (a full disk), the
 * submission is refused with -32014 and nothing was changed: the run's
 * result must be dropped with it, not stored again every second for a
 * job that does not exist. */
static void disk_full__a_refused_nonblocking_submission__leaves_no_run_behind(
	void **state)
{
	struct disk d;
	const char *args[] = {"--db", d.db, "--quiet", NULL};
	struct harness h = {.no_examples = true};
	struct berth_client *c;
	json_t *big, *res;
	int acked = 0, refused = 0, lines;
	char *id;
	char **ids;

	disk_mount(&d);
	ids = calloc(4000, sizeof *ids);
	assert_non_null(ids);
	assert_int_equal(harness_start(&h, args), 0);
	c = harness_connect(&h);
	assert_non_null(c);
	disk_fill(&d);
	big = pad_16k();
	/* No idempotency key and one submission at a time: each job of
	 * crash-pure (nonblocking) runs at its submission. Even inputs
	 * complete on the first try. */
	for (int i = 0; i < 4000 && refused < 5; i++) {
		json_int_t code;

		code = submit(c, json_pack("{s:s, s:{s:i, s:O}}", "tool",
					   "crash-pure", "input", "n", 2 * i,
					   "meta", big),
			      &id);
		if (code == 0) {
			ids[acked++] = id;
		} else {
			assert_int_equal(code, -32014);
			refused++;
		}
	}
	fprintf(stderr, "disk full: %d nonblocking submissions answered, then "
		"%d refused with -32014\n", acked, refused);
	assert_true(refused > 0);
	/* The old daemon tried the refused jobs' results again every
	 * second: give it a few seconds, with the disk still full, then
	 * with space back. */
	sleep_ms(2500);
	lines = retried_results_exist(&h, c);
	assert_int_equal(unlink(d.filler), 0);
	sleep_ms(2500);
	lines = retried_results_exist(&h, c);
	fprintf(stderr, "disk full: %d results stored again, all of jobs "
		"that exist\n", lines);
	/* Every answered job completed; the refused ones made none. */
	for (int i = 0; i < acked; i++) {
		res = wait_terminal(c, ids[i], 30000);
		assert_string_equal(status_of(res), "completed");
		json_decref(res);
		free(ids[i]);
	}
	res = harness_call(c, "jobs/list", json_pack("{s:i}", "limit", 1000),
			   NULL);
	assert_int_equal(json_array_size(json_object_get(res, "jobs")),
			 (size_t)acked);
	json_decref(res);
	berth_client_close(c);
	json_decref(big);
	free(ids);
	assert_int_equal(harness_stop(&h), 0);
	assert_true(integrity_ok(d.db));
	harness_cleanup(&h);
	disk_unmount(&d);
}

/* ---- a locked database ------------------------------------------------- */

static void locked_database__answers_storage_error__and_recovers(void **state)
{
	static const char *const args[] = {"--quiet", NULL};
	struct harness h = {.no_examples = true};
	struct berth_client *c;
	sqlite3 *db;
	char *id = NULL;
	json_int_t code;
	json_t *j;
	struct timespec t0, t1;

	assert_int_equal(harness_start(&h, args), 0);
	c = harness_connect(&h);
	assert_non_null(c);
	/* Another process (this one) takes the write lock and keeps it. */
	assert_int_equal(sqlite3_open(h.db, &db), SQLITE_OK);
	/* berthd may still be writing (start-up recovery, its first
	 * checkpoint): wait for the lock as a well-behaved neighbour would,
	 * rather than failing on a momentary SQLITE_BUSY. */
	assert_int_equal(sqlite3_busy_timeout(db, 10000), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL),
			 SQLITE_OK);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	{
		json_t *err = NULL;

		j = harness_call(c, "jobs/submit",
				 json_pack("{s:s, s:{s:i}, s:s}", "tool",
					   "crash-echo", "input", "n", 1,
					   "idempotencyKey", "locked"),
				 &err);
		assert_null(j);
		assert_non_null(err);
		code = json_integer_value(json_object_get(err, "code"));
		/* Said as SQLite says it: it was strerror's "Device or
		 * resource busy", which sends an operator nowhere. */
		assert_non_null(strstr(json_string_value(json_object_get(
					       err, "message")),
				       "database is locked"));
		assert_string_equal(json_string_value(json_object_get(
					    json_object_get(err, "data"),
					    "sqlite")),
				    "database is locked");
		json_decref(err);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fprintf(stderr, "locked: answered %lld after %ld ms\n",
		(long long)code,
		(long)((t1.tv_sec - t0.tv_sec) * 1000 +
		       (t1.tv_nsec - t0.tv_nsec) / 1000000));
	assert_int_equal(code, -32014);
	/* Reads do not wait behind the lock. */
	j = harness_call(c, "jobs/list", json_pack("{s:i}", "limit", 5), NULL);
	assert_int_equal(json_array_size(json_object_get(j, "jobs")), 0);
	json_decref(j);
	assert_int_equal(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	/* Once the lock is gone, the same key makes its job (the refused
	 * submission left nothing behind). */
	assert_int_equal(submit(c, json_pack("{s:s, s:{s:i}, s:s}", "tool",
					     "crash-echo", "input", "n", 1,
					     "idempotencyKey", "locked"),
				&id), 0);
	j = wait_terminal(c, id, 10000);
	assert_string_equal(status_of(j), "completed");
	json_decref(j);
	j = harness_call(c, "jobs/list", json_pack("{s:i}", "limit", 5), NULL);
	assert_int_equal(json_array_size(json_object_get(j, "jobs")), 1);
	json_decref(j);
	free(id);
	berth_client_close(c);
	stop_cleanly(&h);
}

/* second_start runs a second berthd on db and returns its exit status
 * (-1 when it did not exit by itself within 60 s, and was killed); its
 * log is DIR/second.log. It is forked by harness_fork rather than run by
 * system() through timeout(1), which leads a process group of its own: a
 * second berthd that served instead of refusing outlived a dead test by
 * up to a minute, out of reach of meson's kill of the test's group. */
static int second_start(const struct harness *h, const char *db)
{
	const char *berthd = getenv("BERTHD");
	char sock[400], log[400];
	int status = 0;
	pid_t pid;

	assert_non_null(berthd);
	snprintf(sock, sizeof sock, "%s/second.sock", h->dir);
	snprintf(log, sizeof log, "%s/second.log", h->dir);
	pid = harness_fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(berthd, berthd, "--db", db, "--socket", sock, "--quiet",
		      (char *)NULL);
		_exit(127);
	}
	for (int waited = 0; waited < 60000; waited += 10) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		sleep_ms(10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

/* second_log_has tells whether the second berthd's log holds s. */
static bool second_log_has(const struct harness *h, const char *s)
{
	struct harness second = *h;
	char *log;
	bool has;

	snprintf(second.log, sizeof second.log, "%s/second.log", h->dir);
	log = read_log(&second);
	has = strstr(log, s) != NULL;
	if (!has)
		fprintf(stderr, "the second berthd's log: %s\n", log);
	free(log);
	return has;
}

static void second_daemon__on_the_same_database__refuses_to_start(void **state)
{
	static const char *const args[] = {"--quiet", NULL};
	struct harness h = {.no_examples = true};
	char link[400], dotdot[400], sub[400];

	assert_int_equal(harness_start(&h, args), 0);
	assert_int_equal(second_start(&h, h.db), 1);
	assert_true(second_log_has(&h, "is in use by berthd pid"));
	/* The lock follows the file, not the spelling of its path: a
	 * symlink and a path through ".." name the same database. */
	snprintf(link, sizeof link, "%s/link.db", h.dir);
	snprintf(sub, sizeof sub, "%s/sub", h.dir);
	snprintf(dotdot, sizeof dotdot, "%s/sub/../berth.db", h.dir);
	assert_int_equal(symlink(h.db, link), 0);
	assert_int_equal(mkdir(sub, 0700), 0);
	assert_int_equal(second_start(&h, link), 1);
	assert_true(second_log_has(&h, "is in use by berthd pid"));
	assert_int_equal(second_start(&h, dotdot), 1);
	assert_true(second_log_has(&h, "is in use by berthd pid"));
	unlink(link);
	rmdir(sub);
	stop_cleanly(&h);
}

/* A damaged database: berthd refuses to start on it, and says why, rather
 * than acknowledge submissions into it. */
static void damaged_database__berthd_refuses_to_start_and_says_why(void **state)
{
	static const char *const args[] = {"--quiet", NULL};
	struct harness h = {.no_examples = true};
	struct berth_client *c;
	char junk[4096];
	struct stat st;
	char *id;
	int fd;

	assert_int_equal(harness_start(&h, args), 0);
	c = harness_connect(&h);
	assert_non_null(c);
	for (int i = 0; i < 300; i++) {
		assert_int_equal(submit(c, json_pack("{s:s, s:{s:i}}", "tool",
						     "crash-echo", "input", "n", i),
					&id), 0);
		free(id);
	}
	berth_client_close(c);
	assert_int_equal(harness_stop(&h), 0);
	/* A page in the middle of the file is overwritten. */
	assert_int_equal(stat(h.db, &st), 0);
	assert_true(st.st_size >= 8 * 4096);
	memset(junk, 0x5a, sizeof junk);
	fd = open(h.db, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, junk, sizeof junk,
				(st.st_size / 4096 / 2) * 4096),
			 (ssize_t)sizeof junk);
	close(fd);
	assert_int_equal(second_start(&h, h.db), 1);
	assert_true(second_log_has(&h, "fails its integrity check"));
	harness_cleanup(&h);
}

/* ---- misbehaving external tools ---------------------------------------- */

static void misbehaving_tools__fail_their_jobs__and_the_daemon_serves_on(
	void **state)
{
	const char *tools = getenv("CRASH_TOOLS");
	const char *args[] = {"--tools", tools, "--quiet", NULL};
	static const struct {
		const char *tool;
		const char *status;
	} cases[] = {
		{"bad-garbage", "failed"},    /* not JSON */
		{"bad-flood-out", "failed"},  /* an endless stdout line */
		{"bad-flood-err", "completed"}, /* 40 MB of stderr, then output */
		{"bad-killed", "failed"},     /* SIGKILLs itself */
		{"bad-stubborn", "timed_out"}, /* ignores SIGTERM past its timeout */
		{"bad-exit", "failed"},       /* exits 3 without a final line */
	};
	struct harness h = {.no_examples = true};
	struct berth_client *c;
	char *ids[6];

	assert_non_null(tools);
	assert_int_equal(harness_start(&h, args), 0);
	c = harness_connect(&h);
	assert_non_null(c);
	for (size_t i = 0; i < 6; i++)
		assert_int_equal(submit(c, json_pack("{s:s, s:{}, s:i}", "tool",
						     cases[i].tool, "input",
						     "maxRetries", 0),
					&ids[i]), 0);
	for (size_t i = 0; i < 6; i++) {
		json_t *j = wait_terminal(c, ids[i], 60000);
		char *e = json_dumps(json_object_get(j, "error"), 0);

		fprintf(stderr, "%s: %s %.200s\n", cases[i].tool, status_of(j),
			e ? e : "");
		free(e);
		assert_string_equal(status_of(j), cases[i].status);
		json_decref(j);
		free(ids[i]);
	}
	/* The captured stderr is bounded. */
	{
		json_t *info = harness_call(c, "server/info", NULL, NULL);

		json_decref(info);
	}
	berth_client_close(c);
	stop_cleanly(&h);
}

/* ---- tools left running by a berthd that died ---------------------------- */

/* tick_pids reads the ticker's file from offset on: the number of lines,
 * with the distinct pids they name in pids (up to 8) and their count in
 * *npids. */
static int tick_pids(const char *path, long offset, long pids[8], int *npids)
{
	FILE *f = fopen(path, "r");
	long pid;
	int lines = 0;

	*npids = 0;
	if (!f)
		return 0;
	fseek(f, offset, SEEK_SET);
	while (fscanf(f, "%ld", &pid) == 1) {
		bool seen = false;

		lines++;
		for (int i = 0; i < *npids; i++)
			seen = seen || pids[i] == pid;
		if (!seen && *npids < 8)
			pids[(*npids)++] = pid;
	}
	fclose(f);
	return lines;
}

static long file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

/* start_ticking starts berthd on h with the crash tools, submits a
 * ticker job ticking into ticks (a path of h's folder), and returns its id
 * (malloc'd) once it ticked 5 times, with the ticking pids in pids. */
static char *start_ticking(struct harness *h, char ticks[400], long pids[8],
			   int *npids)
{
	const char *tools = getenv("CRASH_TOOLS");
	const char *args[] = {"--tools", tools, "--quiet", NULL};
	struct berth_client *c;
	int lines = 0;
	char *id;

	assert_non_null(tools);
	assert_int_equal(harness_start(h, args), 0);
	snprintf(ticks, 400, "%s/ticks", h->dir);
	c = harness_connect(h);
	assert_non_null(c);
	assert_int_equal(submit(c, json_pack("{s:s, s:{s:s}}", "tool", "ticker",
					     "input", "file", ticks),
				&id), 0);
	berth_client_close(c);
	for (int waited = 0; lines < 5 && waited < 60000; waited += 50) {
		sleep_ms(50);
		lines = tick_pids(ticks, 0, pids, npids);
	}
	assert_true(lines >= 5);
	return id;
}

/* What an external tool started in its group stops with a berthd killed
 * with kill -9, without waiting for a restart (worker/keeper.c): on a
 * shared PostgreSQL database another node may run the job again long
 * before this one comes back. Before, the tool's own process died with
 * berthd and its ticking child went on for the rest of its 15 s. */
static void kill9__what_a_tool_started_stops_with_berthd(void **state)
{
	struct harness h = {.no_examples = true};
	char ticks[400];
	long pids[8], offset;
	int npids = 0, lines;
	char *id = start_ticking(&h, ticks, pids, &npids);

	assert_int_equal(harness_kill9(&h), 0);
	/* The keeper reads the end of berthd's pipe and kills the group;
	 * a tick already under way may still land. */
	sleep_ms(1000);
	offset = file_size(ticks);
	sleep_ms(2000);
	lines = tick_pids(ticks, offset, pids, &npids);
	fprintf(stderr, "kill -9: %d ticks 1 to 3 s after it\n", lines);
	assert_int_equal(lines, 0);
	free(id);
	harness_cleanup(&h);
}

/* keeper_of returns the live keeper that berthd (parent) forked, or 0. */
static pid_t keeper_of(pid_t parent)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;

	assert_non_null(d);
	while ((e = readdir(d))) {
		char path[300], comm[64], state;
		int pid, ppid;
		FILE *fp;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		if (!(fp = fopen(path, "r")))
			continue;
		if (fscanf(fp, "%d (%63[^)]) %c %d", &pid, comm, &state,
			   &ppid) == 4 &&
		    ppid == parent && state != 'Z' &&
		    strcmp(comm, "berthd-keeper") == 0)
			found = pid;
		fclose(fp);
	}
	closedir(d);
	return found;
}

/* A keeper that ends before berthd (the OOM killer, an operator) is
 * replaced, and the new one is told of the groups running: what a tool
 * started still stops with a berthd killed with kill -9. Before, the
 * keeper stayed a zombie, and the tool's ticking child went on. */
static void kill9__after_its_keeper_was_killed__what_a_tool_started_stops_with_berthd(
	void **state)
{
	struct harness h = {.no_examples = true};
	char ticks[400];
	long pids[8], offset;
	int npids = 0, lines;
	char *id = start_ticking(&h, ticks, pids, &npids);
	pid_t keeper = keeper_of(h.pid), next = 0;

	(void)state;
	assert_true(keeper > 0);
	assert_int_equal(kill(keeper, SIGKILL), 0);
	for (int waited = 0; waited < 10000; waited += 50) {
		next = keeper_of(h.pid);
		if (next > 0 && next != keeper)
			break;
		sleep_ms(50);
	}
	assert_true(next > 0 && next != keeper);
	assert_int_equal(harness_kill9(&h), 0);
	sleep_ms(1000);
	offset = file_size(ticks);
	sleep_ms(2000);
	lines = tick_pids(ticks, offset, pids, &npids);
	fprintf(stderr, "keeper %d killed, %d took its place; kill -9: %d "
		"ticks 1 to 3 s after it\n",
		(int)keeper, (int)next, lines);
	assert_int_equal(lines, 0);
	free(id);
	harness_cleanup(&h);
}

/* An external tool whose run a kill -9 of berthd interrupted: its own
 * process dies with berthd, and what it left running in its group is
 * killed by the restarted berthd before the job runs again. Exactly one
 * run of the tool is seen working after the restart (before: the
 * interrupted run went on ticking beside the new one). */
static void kill9__a_tool_left_running__is_killed_before_its_job_runs_again(
	void **state)
{
	struct harness h = {.no_examples = true};
	struct berth_client *c;
	char ticks[400];
	long pids[8], old, offset;
	int npids = 0, lines;
	char *id = start_ticking(&h, ticks, pids, &npids);
	json_t *j;

	assert_int_equal(npids, 1);
	old = pids[0];

	assert_int_equal(harness_kill9(&h), 0);
	assert_int_equal(harness_restart(&h), 0);
	/* From here on, only the run the restart started may tick. */
	sleep_ms(500);
	offset = file_size(ticks);
	sleep_ms(3000);
	lines = tick_pids(ticks, offset, pids, &npids);
	fprintf(stderr, "kill -9: %d ticks in 3 s after the restart, from %d "
		"process(es); the interrupted run's ticker was %ld\n",
		lines, npids, old);
	assert_int_equal(npids, 1);
	assert_true(pids[0] != old);
	assert_true(lines >= 5);

	c = harness_connect(&h);
	assert_non_null(c);
	j = harness_call(c, "jobs/cancel", json_pack("{s:s}", "id", id), NULL);
	json_decref(j);
	j = wait_terminal(c, id, 10000);
	assert_string_equal(status_of(j), "cancelled");
	assert_int_equal(json_integer_value(json_object_get(j, "attempt")), 2);
	json_decref(j);
	berth_client_close(c);
	free(id);
	stop_cleanly(&h);
}

/* ---- clients that go away ---------------------------------------------- */

static int raw_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	assert_true(strlen(path) < sizeof sa.sun_path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	return fd;
}

static void client_disconnects__mid_request_and_mid_batch__harm_no_one(
	void **state)
{
	static const char *const args[] = {"--quiet", NULL};
	struct harness h = {.no_examples = true};
	struct berth_client *c;
	json_t *j;
	size_t cap = 1 << 20, len = 0;
	char *batch = malloc(cap);
	int fd;

	assert_int_equal(harness_start(&h, args), 0);
	/* Half a request, then gone. */
	fd = raw_connect(h.socket);
	{
		static const char half[] =
			"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"jobs/su";

		assert_true(write(fd, half, sizeof half - 1) ==
			    (ssize_t)(sizeof half - 1));
	}
	close(fd);
	/* A batch of 500 submissions and a wait, then gone before any reply
	 * is read; and once more, closing in the middle of the line. */
	len += (size_t)snprintf(batch + len, cap - len, "[");
	for (int i = 0; i < 500; i++)
		len += (size_t)snprintf(batch + len, cap - len,
					"%s{\"jsonrpc\":\"2.0\",\"id\":%d,"
					"\"method\":\"jobs/submit\",\"params\":"
					"{\"tool\":\"crash-echo\",\"input\":"
					"{\"n\":%d},\"idempotencyKey\":\"b%d\"}}",
					i ? "," : "", i, i, i);
	len += (size_t)snprintf(batch + len, cap - len, "]\n");
	fd = raw_connect(h.socket);
	assert_true(write(fd, batch, len) == (ssize_t)len);
	{
		static const char wait[] =
			"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"jobs/wait\","
			"\"params\":{\"id\":\"x\",\"timeoutMs\":60000}}\n";

		assert_true(write(fd, wait, sizeof wait - 1) ==
			    (ssize_t)(sizeof wait - 1));
	}
	close(fd);
	fd = raw_connect(h.socket);
	assert_true(write(fd, batch, len / 2) == (ssize_t)(len / 2));
	close(fd);
	free(batch);
	/* The daemon serves on, and the batch's keys made at most one job
	 * each, all of which run. */
	c = harness_connect(&h);
	assert_non_null(c);
	j = harness_call(c, "ping", NULL, NULL);
	json_decref(j);
	for (int round = 0; round < 600; round++) {
		json_t *l = harness_call(c, "jobs/list",
					 json_pack("{s:s, s:i}", "status",
						   "pending", "limit", 1),
					 NULL);
		size_t n = json_array_size(json_object_get(l, "jobs"));

		json_decref(l);
		if (n == 0)
			break;
		sleep_ms(100);
	}
	j = harness_call(c, "jobs/list", json_pack("{s:i}", "limit", 1000), NULL);
	fprintf(stderr, "disconnects: %zu jobs from the abandoned batch\n",
		json_array_size(json_object_get(j, "jobs")));
	assert_true(json_array_size(json_object_get(j, "jobs")) <= 500);
	json_decref(j);
	berth_client_close(c);
	stop_cleanly(&h);
}


/* ---- security ---------------------------------------------------------- */

static json_t *raw_roundtrip(struct berth_client *c, const char *line,
			     size_t len)
{
	char *reply;
	json_t *j;

	assert_int_equal(berth_client_send_line(c, line, len), 0);
	reply = berth_client_read_line(c, 60000);
	assert_non_null(reply);
	j = json_loads(reply, 0, NULL);
	free(reply);
	assert_non_null(j);
	return j;
}

static json_int_t error_code(const json_t *reply)
{
	return json_integer_value(
		json_object_get(json_object_get(reply, "error"), "code"));
}

static void security__socket_tools_limits_tcp_and_ids(void **state)
{
	const char *tools = getenv("CRASH_TOOLS");
	char token_file[400], listen[64];
	const char *args[] = {"--tools", tools, "--quiet", "--listen", listen,
			      "--token-file", token_file, NULL};
	struct harness h = {.no_examples = true};
	struct berth_client *c, *t;
	struct stat st;
	char *id = NULL, *id2 = NULL, *line;
	json_t *j, *out, *reply;
	FILE *f;
	int port = 20000 + (int)(getpid() % 20000);
	size_t n;

	assert_non_null(tools);
	snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
	/* The token file lives outside the harness dir, made before it. */
	snprintf(token_file, sizeof token_file, "/tmp/berth-token-%d",
		 (int)getpid());
	f = fopen(token_file, "w");
	assert_non_null(f);
	fputs("s3cret-t0ken\n", f);
	fclose(f);
	setenv("BERTH_TEST_SECRET", "must-not-reach-tools", 1);
	assert_int_equal(harness_start(&h, args), 0);
	unsetenv("BERTH_TEST_SECRET");

	/* The socket is 0600. */
	assert_int_equal(stat(h.socket, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	/* A tool's argv reaches it verbatim (no shell), and its environment
	 * is scrubbed of what berthd's had. */
	c = harness_connect(&h);
	assert_non_null(c);
	assert_int_equal(submit(c, json_pack("{s:s, s:{}}", "tool", "sec-env",
					     "input"), &id), 0);
	j = wait_terminal(c, id, 20000);
	assert_string_equal(status_of(j), "completed");
	out = json_object_get(j, "output");
	assert_null(strstr(json_string_value(json_object_get(out, "env")),
			   "BERTH_TEST_SECRET"));
	assert_string_equal(json_string_value(json_array_get(
				    json_object_get(out, "args"), 0)),
			    "$(touch /tmp/berth-pwned)");
	assert_string_equal(json_string_value(json_array_get(
				    json_object_get(out, "args"), 2)),
			    "`id`");
	assert_int_equal(access("/tmp/berth-pwned", F_OK), -1);
	json_decref(j);

	/* Ids are UUIDv7 with random bits: two in a row differ beyond the
	 * time and version fields. */
	assert_int_equal(submit(c, json_pack("{s:s, s:{s:i}}", "tool",
					     "crash-echo", "input", "n", 1),
				&id2), 0);
	assert_int_equal(strlen(id2), 36);
	assert_int_equal(id2[14], '7');
	assert_true(strcmp(id + 19, id2 + 19) != 0);

	/* Nesting past the limit is refused before any parser runs, and the
	 * connection stays usable. */
	{
		char deep[400];

		n = 0;
		n += (size_t)snprintf(deep, sizeof deep,
				      "{\"jsonrpc\":\"2.0\",\"id\":1,"
				      "\"method\":\"ping\",\"params\":{\"x\":");
		for (int i = 0; i < 100; i++)
			deep[n++] = '[';
		for (int i = 0; i < 100; i++)
			deep[n++] = ']';
		deep[n++] = '}';
		deep[n++] = '}';
		reply = raw_roundtrip(c, deep, n);
		assert_true(error_code(reply) == -32600 ||
			    error_code(reply) == -32700);
		json_decref(reply);
	}
	/* A line over 16 MiB is answered -32600 with its limit, then the
	 * next line is served. */
	n = 17u << 20;
	line = malloc(n);
	assert_non_null(line);
	memset(line, ' ', n);
	{
		static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":2,"
					   "\"method\":\"ping\",\"params\":"
					   "{\"p\":\"";

		memcpy(line, head, sizeof head - 1);
	}
	line[n - 3] = '"';
	line[n - 2] = '}';
	line[n - 1] = '}';
	reply = raw_roundtrip(c, line, n);
	free(line);
	assert_int_equal(error_code(reply), -32600);
	json_decref(reply);
	j = harness_call(c, "ping", NULL, NULL);
	json_decref(j);
	berth_client_close(c);

	/* TCP: nothing but server/auth before the token; a wrong token is
	 * refused; the right one opens the door. */
	{
		char where[80];

		snprintf(where, sizeof where, "tcp:%s", listen);
		t = berth_client_connect(where);
		assert_non_null(t);
		j = NULL;
		harness_call(t, "jobs/list", json_object(), &j);
		assert_int_equal(json_integer_value(json_object_get(j, "code")),
				 -32010);
		json_decref(j);
		j = NULL;
		harness_call(t, "server/auth",
			     json_pack("{s:s}", "token", "wrong"), &j);
		assert_int_equal(json_integer_value(json_object_get(j, "code")),
				 -32010);
		json_decref(j);
		/* Before server/auth a batch is one -32010, unparsed, and a
		 * line may hold 64 KiB, not 16 MiB. */
		reply = raw_roundtrip(t, "[{},{},{}]", 10);
		assert_true(json_is_object(reply));
		assert_int_equal(error_code(reply), -32010);
		json_decref(reply);
		/* A third wrong token closes the connection. */
		for (int i = 0; i < 2; i++) {
			j = NULL;
			harness_call(t, "server/auth",
				     json_pack("{s:s}", "token", "wrong"), &j);
			assert_int_equal(json_integer_value(json_object_get(
						 j, "code")), -32010);
			json_decref(j);
		}
		line = berth_client_read_line(t, 30000);
		assert_null(line);
		assert_int_equal(errno, ECONNRESET); /* its end, not a timeout */
		berth_client_close(t);
		/* A line over 64 KiB before server/auth is answered, and its
		 * connection closed. */
		t = berth_client_connect(where);
		assert_non_null(t);
		n = 100 * 1024;
		line = malloc(n);
		assert_non_null(line);
		memset(line, ' ', n);
		memcpy(line, "{\"x\":\"", 6);
		memcpy(line + n - 2, "\"}", 2);
		reply = raw_roundtrip(t, line, n);
		free(line);
		assert_int_equal(error_code(reply), -32600);
		assert_int_equal(json_integer_value(json_object_get(json_object_get(
			json_object_get(reply, "error"), "data"), "limit")), 65536);
		json_decref(reply);
		line = berth_client_read_line(t, 30000);
		assert_null(line);
		berth_client_close(t);
		t = berth_client_connect(where);
		assert_non_null(t);
		j = harness_call(t, "server/auth",
				 json_pack("{s:s}", "token", "s3cret-t0ken"),
				 NULL);
		json_decref(j);
		j = harness_call(t, "jobs/list", json_object(), NULL);
		json_decref(j);
		berth_client_close(t);
	}
	free(id);
	free(id2);
	unlink(token_file);
	stop_cleanly(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			poison_tool__crashing_the_daemon__is_failed_after_its_retries),
		cmocka_unit_test(
			disk_full__answers_storage_error__and_recovers_when_space_returns),
		cmocka_unit_test(
			disk_full__a_refused_nonblocking_submission__leaves_no_run_behind),
		cmocka_unit_test(
			locked_database__answers_storage_error__and_recovers),
		cmocka_unit_test(
			second_daemon__on_the_same_database__refuses_to_start),
		cmocka_unit_test(
			damaged_database__berthd_refuses_to_start_and_says_why),
		cmocka_unit_test(
			misbehaving_tools__fail_their_jobs__and_the_daemon_serves_on),
		cmocka_unit_test(
			kill9__a_tool_left_running__is_killed_before_its_job_runs_again),
		cmocka_unit_test(kill9__what_a_tool_started_stops_with_berthd),
		cmocka_unit_test(
			kill9__after_its_keeper_was_killed__what_a_tool_started_stops_with_berthd),
		cmocka_unit_test(
			client_disconnects__mid_request_and_mid_batch__harm_no_one),
		cmocka_unit_test(security__socket_tools_limits_tcp_and_ids),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * harness.c: a real berthd for integration tests (harness.h).
 */
#include "tests/harness/harness.h"
#include "tests/harness/child.h"

#include <arpa/inet.h>
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#define START_TIMEOUT_MS 30000
#define STOP_TIMEOUT_MS 30000
#define CALL_TIMEOUT_MS 60000

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void print_log(const struct harness *h)
{
	char buf[4096];
	size_t n;
	FILE *f = fopen(h->log, "r");

	if (!f)
		return;
	fprintf(stderr, "---- berthd's log (%s) ----\n", h->log);
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		fwrite(buf, 1, n, stderr);
	fprintf(stderr, "---- end of berthd's log ----\n");
	fclose(f);
}

/* serves is true once berthd answered a ping on c, with a result or an
 * error (a peer it refuses is still answered): its loop runs, so what
 * it starts before the loop (the --listen and --http sockets) is open
 * too. The socket alone is not enough: berthd listens on it before it
 * binds those, and a test that connected over TCP in between was
 * refused (test_transport, on a loaded machine). */
static bool serves(struct berth_client *c, int timeout_ms)
{
	json_t *result = NULL, *error = NULL;
	int rc = berth_client_call(c, "ping", NULL, timeout_ms, &result,
				   &error);

	json_decref(result);
	json_decref(error);
	return rc >= 0;
}

/* spawn starts berthd with h's paths and args and waits until it answers
 * on its socket. berthd gets SIGKILL when the test process dies
 * (child.h), so a test that fails before it stops berthd leaves none
 * behind. Returns 0 or -1 after printing why. */
static int spawn(struct harness *h)
{
	const char *berthd = getenv("BERTHD");
	const char *examples = getenv("BERTH_EXAMPLES");
	const char *argv[48];
	size_t n = 0;
	pid_t pid;

	if (!berthd) {
		fprintf(stderr, "harness: $BERTHD is not set\n");
		return -1;
	}
	argv[n++] = berthd;
	argv[n++] = "--db";
	argv[n++] = h->db;
	argv[n++] = "--socket";
	argv[n++] = h->socket;
	if (!h->no_examples && examples) {
		argv[n++] = "--tools";
		argv[n++] = examples;
	}
	for (size_t i = 0; h->args[i] && n < 47; i++)
		argv[n++] = h->args[i];
	argv[n] = NULL;

	pid = harness_fork();
	if (pid < 0) {
		perror("harness: cannot start berthd");
		return -1;
	}
	if (pid == 0) {
		int fd = open(h->log, O_WRONLY | O_CREAT | O_APPEND, 0600);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execv(berthd, (char *const *)argv);
		fprintf(stderr, "harness: cannot run %s: %s\n", berthd,
			strerror(errno));
		_exit(127);
	}
	h->pid = pid;
	h->start_status = 0;
	for (int64_t end = now_ms() + START_TIMEOUT_MS; now_ms() < end;) {
		struct berth_client *c;
		int status;

		if (waitpid(pid, &status, WNOHANG) == pid) {
			h->pid = 0;
			h->start_status = status;
			fprintf(stderr, "harness: berthd exited while starting "
				"(status %d)\n", status);
			print_log(h);
			return -1;
		}
		c = berth_client_connect(h->socket);
		if (c) {
			int left = (int)(end - now_ms());
			bool ready = left > 0 && serves(c, left);

			berth_client_close(c);
			if (ready)
				return 0;
		}
		sleep_ms(10);
	}
	fprintf(stderr, "harness: berthd did not answer on %s in time\n",
		h->socket);
	print_log(h);
	harness_kill9(h);
	return -1;
}

int harness_start(struct harness *h, const char *const *extra_args)
{
	const char *tmp = getenv("TMPDIR");
	size_t n = 0;

	snprintf(h->dir, sizeof h->dir, "%s/berth-test-XXXXXX",
		 tmp && *tmp && strlen(tmp) < 64 ? tmp : "/tmp");
	if (!mkdtemp(h->dir)) {
		perror("harness: mkdtemp");
		return -1;
	}
	snprintf(h->db, sizeof h->db, "%s/berth.db", h->dir);
	snprintf(h->socket, sizeof h->socket, "%s/berth.sock", h->dir);
	snprintf(h->log, sizeof h->log, "%s/berthd.log", h->dir);
	h->pid = 0;
	for (; extra_args && extra_args[n] && n < 31; n++)
		h->args[n] = extra_args[n];
	h->args[n] = NULL;
	return spawn(h);
}

int harness_restart(struct harness *h)
{
	if (h->pid)
		harness_stop(h);
	return spawn(h);
}

int harness_kill9(struct harness *h)
{
	int status;

	if (!h->pid)
		return -1;
	kill(h->pid, SIGKILL);
	while (waitpid(h->pid, &status, 0) < 0 && errno == EINTR)
		;
	h->pid = 0;
	return 0;
}

int harness_stop(struct harness *h)
{
	int status;

	if (!h->pid)
		return -1;
	kill(h->pid, SIGTERM);
	for (int waited = 0; waited < STOP_TIMEOUT_MS; waited += 10) {
		if (waitpid(h->pid, &status, WNOHANG) == h->pid) {
			h->pid = 0;
			if (WIFEXITED(status))
				return WEXITSTATUS(status);
			fprintf(stderr, "harness: berthd died of signal %d\n",
				WTERMSIG(status));
			print_log(h);
			return -1;
		}
		sleep_ms(10);
	}
	fprintf(stderr, "harness: berthd did not stop in time\n");
	print_log(h);
	harness_kill9(h);
	return -1;
}

static int remove_one(const char *path, const struct stat *st, int flag,
		      struct FTW *ftw)
{
	remove(path);
	return 0;
}

void harness_cleanup(struct harness *h)
{
	if (h->pid)
		harness_stop(h);
	if (h->dir[0]) {
		if (getenv("BERTH_KEEP_TEST_DIR"))
			fprintf(stderr, "harness: kept %s\n", h->dir);
		else
			nftw(h->dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	}
	h->dir[0] = '\0';
}

struct berth_client *harness_connect(struct harness *h)
{
	return berth_client_connect(h->socket);
}

json_t *harness_call(struct berth_client *c, const char *method,
		     json_t *params, json_t **error)
{
	json_t *result = NULL, *err = NULL;
	int rc = berth_client_call(c, method, params, CALL_TIMEOUT_MS, &result,
				   &err);

	json_decref(params);
	if (error)
		*error = NULL;
	if (rc == 1) {
		if (error) {
			*error = err;
			return NULL;
		}
		char *s = json_dumps(err, JSON_COMPACT);

		print_message("%s answered an error: %s\n", method, s);
		free(s);
		json_decref(err);
		fail_msg("%s failed", method);
	}
	if (rc < 0)
		fail_msg("%s: %s", method, strerror(-rc));
	return result;
}

char *harness_submit_held(struct harness *h, const char *submission,
			  int hold_ms)
{
	struct berth_client *c = harness_connect(h);
	json_t *answer, *result;
	char *line, *id;
	sqlite3 *db;

	assert_non_null(c);
	assert_int_equal(sqlite3_open(h->db, &db), SQLITE_OK);
	assert_int_equal(sqlite3_busy_timeout(db, 10000), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL),
			 SQLITE_OK);
	assert_int_equal(berth_client_send_line(c, submission,
						strlen(submission)),
			 0);
	sleep_ms(hold_ms);
	assert_int_equal(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	line = berth_client_read_line(c, CALL_TIMEOUT_MS);
	assert_non_null(line);
	answer = json_loads(line, 0, NULL);
	free(line);
	assert_non_null(answer);
	result = json_object_get(answer, "result");
	if (!json_is_string(json_object_get(result, "id")))
		fail_msg("the submission failed: %s",
			 json_string_value(json_object_get(
				 json_object_get(answer, "error"), "message")));
	id = strdup(json_string_value(json_object_get(result, "id")));
	json_decref(answer);
	berth_client_close(c);
	assert_non_null(id);
	return id;
}

/* The lowest port the kernel hands out for connections, from
 * ip_local_port_range (32768 when it cannot be read). */
static int ephemeral_low(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	int low = 32768;

	if (f) {
		if (fscanf(f, "%d", &low) != 1)
			low = 32768;
		fclose(f);
	}
	return low;
}

int harness_free_port(void)
{
	/* Below the range the kernel gives connections their local ports
	 * from: a port from bind(0) could be taken by another test's
	 * connection while berthd is down between a kill and its restart,
	 * which then cannot listen on it again. */
	int high = ephemeral_low() - 1, low = high - 8000 < 1024 ? 1024
							   : high - 8000;
	static unsigned seed;

	if (!seed)
		seed = (unsigned)getpid() ^ (unsigned)time(NULL);
	for (int tries = 0; tries < 1000; tries++) {
		struct sockaddr_in sin = {
			.sin_family = AF_INET,
			.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		int fd = socket(AF_INET, SOCK_STREAM, 0), port, rc;

		assert_true(fd >= 0);
		port = low + (int)(rand_r(&seed) % (unsigned)(high - low + 1));
		sin.sin_port = htons((uint16_t)port);
		rc = bind(fd, (struct sockaddr *)&sin, sizeof sin);
		close(fd);
		if (rc == 0)
			return port;
	}
	fail_msg("no free TCP port between %d and %d", low, high);
	return -1;
}

const char *harness_event_types(const json_t *page, char *buf, size_t size)
{
	size_t i, len = 0;
	json_t *ev;

	buf[0] = '\0';
	json_array_foreach(json_object_get(page, "events"), i, ev) {
		const char *type = json_string_value(json_object_get(ev, "type"));

		len += (size_t)snprintf(buf + len, size - len, "%s ",
					type ? type : "(none)");
		assert_true(len < size);
	}
	return buf;
}

/*
 * test_transport.c: the socket, the peer check, TCP and its token, and the
 * limits of PROTOCOL.md (line size, nesting, pipelining, idle and excess
 * connections, a client that does not read), against a real berthd.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/api/support.h"

/* The nobody user, for the peer check. */
#define OTHER_UID 65534

/* run_berthd runs berthd with args to its end and returns its exit status,
 * with its stderr in err (at most size bytes). */
static int run_berthd(const char *const *args, char *err, size_t size)
{
	int pfd[2];
	const char *argv[24];
	size_t n = 0, got = 0;
	pid_t pid;
	int status;
	ssize_t r;

	argv[n++] = getenv("BERTHD");
	for (size_t i = 0; args[i] && n < 23; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(pfd[1], 2);
		dup2(pfd[1], 1);
		close(pfd[0]);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	while (got + 1 < size && (r = read(pfd[0], err + got, size - got - 1)) > 0)
		got += (size_t)r;
	err[got] = '\0';
	close(pfd[0]);
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- the Unix socket --------------------------------------------------- */

static void the_socket__is_0600_in_a_directory_made_0700(void **state)
{
	struct harness h;
	char sock[320], dir[300];
	struct stat st;
	struct berth_client *c;
	json_t *r;

	support_start(&h, NULL);
	assert_int_equal(stat(h.socket, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	harness_stop(&h);

	/* A --socket in directories that do not exist: they are made. */
	snprintf(dir, sizeof dir, "%.256s/run/berth", h.dir);
	snprintf(sock, sizeof sock, "%.290s/berth.sock", dir);
	memcpy(h.socket, sock, sizeof sock);
	assert_int_equal(harness_restart(&h), 0);
	assert_int_equal(stat(sock, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	c = berth_client_connect(sock);
	assert_non_null(c);
	r = call_ok(c, "ping", NULL);
	json_decref(r);
	berth_client_close(c);
	harness_cleanup(&h);
}

static void a_live_socket__is_not_taken_over(void **state)
{
	struct harness h;
	char db[400], err[4096];
	const char *args[8];

	support_start(&h, NULL);
	snprintf(db, sizeof db, "%s/other.db", h.dir);
	args[0] = "--db";
	args[1] = db;
	args[2] = "--socket";
	args[3] = h.socket;
	args[4] = NULL;
	assert_int_equal(run_berthd(args, err, sizeof err), 1);
	assert_non_null(strstr(err, "another berthd"));
	/* The first daemon still serves. */
	{
		struct berth_client *c = support_connect(&h);

		json_decref(call_ok(c, "ping", NULL));
		berth_client_close(c);
	}
	harness_cleanup(&h);
}

static void a_stale_socket__is_replaced(void **state)
{
	struct harness h;
	struct stat st;
	struct berth_client *c;

	support_start(&h, NULL);
	assert_int_equal(harness_kill9(&h), 0);
	assert_int_equal(stat(h.socket, &st), 0); /* left behind */
	assert_int_equal(harness_restart(&h), 0);
	c = support_connect(&h);
	json_decref(call_ok(c, "ping", NULL));
	berth_client_close(c);
	harness_cleanup(&h);
}

/* connect_as connects to path as uid and calls ping; returns 0 when ping
 * answered, 10 when the answer was -32010, or another code. */
static int connect_as(const char *path, uid_t uid)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		struct berth_client *c;
		json_t *res = NULL, *err = NULL;
		int rc;

		if (setgid(uid) < 0 || setuid(uid) < 0)
			_exit(3);
		c = berth_client_connect(path);
		if (!c)
			_exit(4);
		rc = berth_client_call(c, "ping", NULL, 10000, &res, &err);
		if (rc == 0)
			_exit(0);
		if (rc == 1 && json_integer_value(json_object_get(err, "code")) == -32010)
			_exit(10);
		_exit(5);
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void another_user__is_refused_unless_allowed(void **state)
{
	struct harness h;
	const char *allow[] = {"--allow-uid", "65534", NULL};

	if (geteuid() != 0) {
		print_message("not root: cannot act as another user; the peer "
			      "check is not exercised\n");
		skip();
	}
	support_start(&h, NULL);
	/* Let the other user reach the socket file, so that only the peer
	 * check stands in its way. */
	chmod(h.dir, 0755);
	chmod(h.socket, 0666);
	assert_int_equal(connect_as(h.socket, OTHER_UID), 10);
	assert_int_equal(connect_as(h.socket, 0), 0);
	harness_stop(&h);
	h.args[2] = allow[0];
	h.args[3] = allow[1];
	h.args[4] = NULL;
	assert_int_equal(harness_restart(&h), 0);
	chmod(h.socket, 0666);
	assert_int_equal(connect_as(h.socket, OTHER_UID), 0);
	harness_cleanup(&h);
}

/* ---- TCP --------------------------------------------------------------- */

/* free_port returns a TCP port on 127.0.0.1 that was free a moment ago. */
static int free_port(void)
{
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof sin;
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	port = ntohs(sin.sin_port);
	close(fd);
	return port;
}

static void tcp__needs_the_token_before_anything_else(void **state)
{
	struct harness h;
	char listen[64], where[80], token_file[] = "/tmp/berth-token-XXXXXX";
	const char *extra[] = {"--listen", listen, "--token-file", token_file, NULL};
	const char *args[8];
	char err[4096];
	struct berth_client *c;
	int fd, port = free_port();
	json_t *r;

	fd = mkstemp(token_file);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "s3cret-token\n", 13), 13);
	close(fd);
	snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
	snprintf(where, sizeof where, "tcp:127.0.0.1:%d", port);
	support_start(&h, extra);

	c = berth_client_connect(where);
	assert_non_null(c);
	json_decref(call_err(c, "ping", NULL, -32010));
	json_decref(call_err(c, "jobs/list", json_object(), -32010));
	json_decref(call_err(c, "server/auth", json_pack("{s:s}", "token", "s3cret"),
			     -32010));
	json_decref(call_err(c, "server/auth", json_pack("{s:s}", "token",
							 "s3cret-token-and-more"),
			     -32010));
	json_decref(call_err(c, "ping", NULL, -32010));
	r = call_ok(c, "server/auth", json_pack("{s:s}", "token", "s3cret-token"));
	json_decref(r);
	json_decref(call_ok(c, "ping", NULL));
	json_decref(call_ok(c, "server/info", NULL));
	berth_client_close(c);

	/* Without a token file, --listen is refused. */
	args[0] = "--db";
	args[1] = h.db;
	args[2] = "--listen";
	args[3] = listen;
	args[4] = NULL;
	assert_int_equal(run_berthd(args, err, sizeof err), 2);
	assert_non_null(strstr(err, "token"));
	harness_cleanup(&h);
	unlink(token_file);
}

/* ---- limits ------------------------------------------------------------ */

static struct harness shared;

static int start_shared(void **state)
{
	support_start(&shared, NULL);
	return 0;
}

static int stop_shared(void **state)
{
	int rc = harness_stop(&shared);

	harness_cleanup(&shared);
	return rc == 0 ? 0 : -1;
}

static void a_line_over_16_mib__is_refused_and_the_connection_lives(void **state)
{
	struct berth_client *c = support_connect(&shared);
	size_t n = 16u * 1024 * 1024 + 64;
	char *big = malloc(n + 1);
	json_t *r;
	char *line;

	/* A valid request whose string makes the line too long. */
	memcpy(big, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"", 56);
	memset(big + 56, 'a', n - 56 - 3);
	memcpy(big + n - 3, "\"}}", 3);
	big[n] = '\0';
	assert_int_equal(berth_client_send_line(c, big, n), 0);
	free(big);
	line = berth_client_read_line(c, 60000);
	assert_non_null(line);
	r = json_loads(line, 0, NULL);
	free(line);
	assert_int_equal(error_code(r), -32600);
	assert_true(json_is_null(json_object_get(r, "id")));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(
				 json_object_get(r, "error"), "data"), "limit")),
			 16 * 1024 * 1024);
	json_decref(r);
	r = exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}");
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 2);
	assert_non_null(json_object_get(r, "result"));
	json_decref(r);
	berth_client_close(c);
}

static void nesting_past_the_limit__is_refused_and_the_connection_lives(void **state)
{
	struct berth_client *c = support_connect(&shared);
	char line[4096];
	size_t n = 0;
	json_t *r;

	n += (size_t)snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":1,"
			      "\"method\":\"jobs/submit\",\"params\":{\"tool\":"
			      "\"noop\",\"input\":");
	for (int i = 0; i < 100; i++)
		line[n++] = '[';
	for (int i = 0; i < 100; i++)
		line[n++] = ']';
	line[n++] = '}';
	line[n++] = '}';
	line[n] = '\0';
	r = exchange(c, line);
	assert_int_equal(error_code(r), -32600);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(
				 json_object_get(r, "error"), "data"), "limit")), 64);
	json_decref(r);
	/* Deep, but within the limit, is fine. */
	n = (size_t)snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":2,"
			     "\"method\":\"jobs/submit\",\"params\":{\"tool\":"
			     "\"noop\",\"input\":");
	n += (size_t)snprintf(line + n, sizeof line - n, "{\"a\":");
	for (int i = 0; i < 50; i++)
		line[n++] = '[';
	for (int i = 0; i < 50; i++)
		line[n++] = ']';
	line[n++] = '}';
	line[n++] = '}';
	line[n++] = '}';
	line[n] = '\0';
	r = exchange(c, line);
	assert_non_null(json_object_get(r, "result"));
	json_decref(r);
	berth_client_close(c);
}

#define PIPELINED 10000

static void ten_thousand_pipelined_requests__are_all_answered(void **state)
{
	struct berth_client *c = support_connect(&shared);
	size_t size = PIPELINED * 200, len = 0;
	char *buf = malloc(size);
	char *seen = calloc(PIPELINED, 1);
	int64_t t0 = support_now_ms();
	int submits = 0, out_of_order = 0, last = -1;

	/* Mostly reads, answered at once, with a submit every tenth request,
	 * answered after its commit: the replies may come back in another
	 * order than the requests went out. */
	for (int i = 0; i < PIPELINED; i++) {
		if (i % 10 == 0) {
			len += (size_t)snprintf(buf + len, size - len,
				"{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":"
				"\"jobs/submit\",\"params\":{\"tool\":\"noop\","
				"\"input\":{\"i\":%d}}}\n", i, i);
			submits++;
		} else if (i % 2) {
			len += (size_t)snprintf(buf + len, size - len,
				"{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"ping\"}\n", i);
		} else {
			len += (size_t)snprintf(buf + len, size - len,
				"{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":"
				"\"jobs/list\",\"params\":{\"limit\":1}}\n", i);
		}
	}
	assert_int_equal(berth_client_send_line(c, buf, len), 0);
	free(buf);
	for (int got = 0; got < PIPELINED; got++) {
		char *line = berth_client_read_line(c, 60000);
		json_t *r;
		int id;

		assert_non_null(line);
		r = json_loads(line, 0, NULL);
		free(line);
		assert_non_null(r);
		assert_non_null(json_object_get(r, "result"));
		id = (int)json_integer_value(json_object_get(r, "id"));
		assert_true(id >= 0 && id < PIPELINED);
		assert_int_equal(seen[id], 0);
		seen[id] = 1;
		if (id < last)
			out_of_order++;
		last = id;
		json_decref(r);
	}
	print_message("%d requests (%d submits) answered in %lld ms, %d out of "
		      "order\n", PIPELINED, submits, (long long)(support_now_ms() - t0),
		      out_of_order);
	free(seen);
	berth_client_close(c);
}

/* open_raw connects a plain Unix socket to path, or returns -1. */
static int open_raw(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (strlen(path) >= sizeof sun.sun_path) {
		close(fd);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ping_raw sends a ping on fd and returns true when its answer comes. */
static bool ping_raw(int fd)
{
	static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	char buf[256];
	ssize_t n;

	if (write(fd, ping, sizeof ping - 1) != (ssize_t)sizeof ping - 1)
		return false;
	if (poll(&pfd, 1, 10000) != 1)
		return false;
	n = read(fd, buf, sizeof buf - 1);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return strstr(buf, "\"result\"") != NULL;
}

#define IDLE 10000
#define MAX_CONNECTIONS 16384

static void ten_thousand_idle_connections__do_not_disturb_the_others(void **state)
{
	long limit = support_raise_nofile();
	int want = IDLE, total, refused = 0;
	int *fds;
	struct berth_client *c;
	int64_t t0, took;

	if (limit < IDLE + 64) {
		want = (int)limit - 64;
		print_message("RLIMIT_NOFILE is %ld: using %d idle connections, "
			      "not %d\n", limit, want, IDLE);
	}
	/* Past the daemon's connection limit too, when descriptors allow. */
	total = limit > MAX_CONNECTIONS + 200 ? MAX_CONNECTIONS + 16 : want;
	fds = calloc((size_t)total, sizeof *fds);
	for (int i = 0; i < want; i++) {
		fds[i] = open_raw(shared.socket);
		assert_true(fds[i] >= 0);
	}
	/* Every one of them is served, and a client beside them is as fast
	 * as ever. */
	for (int i = 0; i < want; i += 997)
		assert_true(ping_raw(fds[i]));
	c = support_connect(&shared);
	t0 = support_now_ms();
	for (int i = 0; i < 200; i++)
		json_decref(call_ok(c, "ping", NULL));
	json_decref(call_ok(c, "server/info", NULL));
	took = support_now_ms() - t0;
	print_message("%d idle connections; 200 pings beside them took %lld ms\n",
		      want, (long long)took);
	assert_true(took < 10000);

	/* Beyond the daemon's limit, a connection is told so and closed. */
	if (total > want) {
		char buf[512];

		for (int i = want; i < total; i++) {
			fds[i] = open_raw(shared.socket);
			assert_true(fds[i] >= 0);
		}
		for (int i = MAX_CONNECTIONS + 1; i < total; i++) {
			struct pollfd pfd = {.fd = fds[i], .events = POLLIN};
			ssize_t n;

			assert_int_equal(poll(&pfd, 1, 10000), 1);
			n = read(fds[i], buf, sizeof buf - 1);
			assert_true(n > 0);
			buf[n] = '\0';
			if (strstr(buf, "-32013"))
				refused++;
		}
		/* The excess ones are exactly those past the limit, less the
		 * one the test's own client holds. */
		print_message("%d connections past the limit were refused\n",
			      refused);
		assert_true(refused >= total - MAX_CONNECTIONS - 2);
	} else {
		print_message("too few descriptors to pass the limit of %d "
			      "connections; not tested\n", MAX_CONNECTIONS);
	}
	for (int i = 0; i < total; i++)
		close(fds[i]);
	free(fds);
	json_decref(call_ok(c, "ping", NULL));
	berth_client_close(c);
}

static void a_client_that_never_reads__is_cut_off_and_nobody_waits(void **state)
{
	struct berth_client *lazy = support_connect(&shared);
	struct berth_client *busy = support_connect(&shared);
	char *input = malloc(1024 * 1024 + 32);
	int64_t t0, slowest = 0;
	size_t total = 0;
	char buf[65536];
	ssize_t n;
	bool closed = false;
	int fd = berth_client_fd(lazy);

	/* The lazy client subscribes and then reads nothing. */
	json_decref(call_ok(lazy, "events/subscribe", json_object()));
	snprintf(input, 16, "{\"s\":\"");
	memset(input + 6, 'z', 1024 * 1024);
	strcpy(input + 6 + 1024 * 1024, "\"}");
	/* Each job puts about 2 MiB of events in the lazy client's queue
	 * (its input in "created", its output in "completed"): 48 jobs
	 * pass the 64 MiB cap. */
	for (int i = 0; i < 48; i++) {
		json_t *job;

		t0 = support_now_ms();
		job = submit(busy, "noop", input);
		json_decref(wait_for(busy, jstr(job, "id"), "completed"));
		json_decref(job);
		if (support_now_ms() - t0 > slowest)
			slowest = support_now_ms() - t0;
	}
	free(input);
	print_message("the slowest of 48 jobs beside the lazy client took %lld ms\n",
		      (long long)slowest);
	/* Now the lazy client reads: what was queued before the cut-off,
	 * then the end of the stream. */
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};

		if (poll(&pfd, 1, 20000) != 1)
			break;
		n = read(fd, buf, sizeof buf);
		if (n <= 0) {
			closed = true;
			break;
		}
		total += (size_t)n;
	}
	print_message("the lazy client got %zu bytes, then the end\n", total);
	assert_true(closed);
	assert_true(total < 80u * 1024 * 1024);
	berth_client_close(lazy);
	json_decref(call_ok(busy, "ping", NULL));
	berth_client_close(busy);
}

int main(void)
{
	const struct CMUnitTest alone[] = {
		cmocka_unit_test(the_socket__is_0600_in_a_directory_made_0700),
		cmocka_unit_test(a_live_socket__is_not_taken_over),
		cmocka_unit_test(a_stale_socket__is_replaced),
		cmocka_unit_test(another_user__is_refused_unless_allowed),
		cmocka_unit_test(tcp__needs_the_token_before_anything_else),
	};
	const struct CMUnitTest limits[] = {
		cmocka_unit_test(a_line_over_16_mib__is_refused_and_the_connection_lives),
		cmocka_unit_test(nesting_past_the_limit__is_refused_and_the_connection_lives),
		cmocka_unit_test(ten_thousand_pipelined_requests__are_all_answered),
		cmocka_unit_test(ten_thousand_idle_connections__do_not_disturb_the_others),
		cmocka_unit_test(a_client_that_never_reads__is_cut_off_and_nobody_waits),
	};
	int failed;

	if (getenv("BERTH_TEST_FILTER"))
		cmocka_set_test_filter(getenv("BERTH_TEST_FILTER"));
	failed = cmocka_run_group_tests_name("transport", alone, NULL, NULL);
	failed += cmocka_run_group_tests_name("limits", limits, start_shared,
					      stop_shared);
	return failed;
}

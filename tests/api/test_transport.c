/*
 * test_transport.c: the socket, the peer check, TCP and its token, and the
 * limits of PROTOCOL.md and docs/API.md (line size, nesting, batches,
 * pipelining, idle and excess connections, a client that does not read,
 * clients that vanish), and what a stranger on TCP may cost before
 * server/auth (docs/SECURITY.md), against a real berthd.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/api/support.h"
#include "tests/harness/child.h"

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
	pid = harness_fork();
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


/* ---- raw sockets, and berthd's process ---------------------------------- */

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* tcp_connect returns a socket connected to 127.0.0.1:port, or -1. */
static int tcp_connect(int port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sin, sizeof sin) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void send_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(fd, s, n);

		if (w < 0 && errno == EINTR)
			continue;
		assert_true(w > 0);
		s += w;
		n -= (size_t)w;
	}
}

static void send_str(int fd, const char *s)
{
	send_all(fd, s, strlen(s));
}

/* read_line_fd reads one line from fd into buf (without its newline) and
 * returns its length, 0 at EOF, or -1 when nothing came in timeout_ms. It
 * reads a byte at a time, so that nothing after the line is taken. */
static ssize_t read_line_fd(int fd, char *buf, size_t size, int timeout_ms)
{
	size_t n = 0;

	while (n + 1 < size) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t r;

		if (poll(&p, 1, timeout_ms) != 1)
			return -1;
		r = read(fd, buf + n, 1);
		if (r < 0 && errno == ECONNRESET)
			r = 0;
		if (r <= 0)
			break;
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = '\0';
	return (ssize_t)n;
}

/* json_line reads a line from fd and parses it; fails the test when none
 * comes in timeout_ms. */
static json_t *json_line(int fd, int timeout_ms)
{
	static char buf[1 << 20];
	ssize_t n = read_line_fd(fd, buf, sizeof buf, timeout_ms);
	json_t *v;

	assert_true(n > 0);
	v = json_loads(buf, JSON_DECODE_ANY, NULL);
	if (!v)
		print_message("not JSON: %s\n", buf);
	assert_non_null(v);
	return v;
}

/* proc_kib returns the field (VmRSS:, VmHWM:) of /proc/PID/status in KiB. */
static long proc_kib(pid_t pid, const char *field)
{
	char path[64], line[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof line, f))
		if (strncmp(line, field, strlen(field)) == 0)
			v = atol(line + strlen(field));
	fclose(f);
	return v;
}

/* proc_fds returns how many descriptors berthd has open. */
static int proc_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	d = opendir(path);
	assert_non_null(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* fds_fall_to waits (up to a minute) until berthd holds at most want
 * descriptors and returns how many it holds. */
static int fds_fall_to(pid_t pid, int want)
{
	int n = proc_fds(pid);

	for (int i = 0; i < 600 && n > want; i++) {
		sleep_ms(100);
		n = proc_fds(pid);
	}
	return n;
}

/* log_has is true when berthd's log holds needle. */
static bool log_has(const struct harness *h, const char *needle)
{
	FILE *f = fopen(h->log, "r");
	static char buf[1 << 20];
	size_t n;

	if (!f)
		return false;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, needle) != NULL;
}

/* make_token_file writes token into a new file of mode in dir and returns
 * its path (static). */
static const char *make_token_file(const char *dir, const char *token,
				   mode_t mode)
{
	static char path[400];
	FILE *f;

	snprintf(path, sizeof path, "%s/token", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%s\n", token);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
	return path;
}

/* ---- the Unix socket ---------------------------------------------------- */

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

/* A berthd killed while it started a tool leaves the tool's process,
 * between its clone and its exec, holding copies of its descriptors, the
 * listening socket's among them, for tens of ms after the berthd is gone
 * (store/lock.c). A restart meanwhile waits for it rather than take it
 * for another berthd serving the socket (as on PostgreSQL, where no
 * database lock makes the restart wait first). Here the socket is made by
 * a process that ends at once, and its child keeps it for half a second;
 * the restarted berthd has a database of its own. */
static void a_socket_still_held_by_the_child_of_a_berthd_that_ended__is_waited_for(
	void **state)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct harness h;
	struct berth_client *c;
	int status;
	pid_t maker;

	support_start(&h, NULL);
	assert_int_equal(harness_stop(&h), 0);
	assert_true(strlen(h.socket) < sizeof sun.sun_path);
	memcpy(sun.sun_path, h.socket, strlen(h.socket) + 1);
	unlink(h.socket);
	maker = fork();
	assert_true(maker >= 0);
	if (maker == 0) {
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);

		if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof sun) < 0 ||
		    listen(fd, 8) < 0)
			_exit(1);
		if (fork() == 0) {
			usleep(500 * 1000);
			_exit(0);
		}
		_exit(0);
	}
	assert_int_equal(waitpid(maker, &status, 0), maker);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* Its maker has ended, and the socket is still served. */
	{
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		assert_int_equal(connect(fd, (struct sockaddr *)&sun, sizeof sun), 0);
		close(fd);
	}
	assert_int_equal(harness_restart(&h), 0);
	c = support_connect(&h);
	json_decref(call_ok(c, "ping", NULL));
	berth_client_close(c);
	harness_cleanup(&h);
}

/* connect_as connects to path as uid and calls ping; returns 0 when ping
 * answered, 10 when the answer was -32010, or another code. (setuid
 * clears harness_fork's request; the call's 10 s bound the child.) */
static int connect_as(const char *path, uid_t uid)
{
	pid_t pid = harness_fork();
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


/* --allow-uid alone lets that user in: berthd makes the socket reachable
 * (0666, in a directory it creates 0711) and leaves the filtering to the
 * peer check; a user it does not allow still gets -32010. */
static void allow_uid__alone_lets_that_user_reach_the_socket(void **state)
{
	struct harness h;
	const char *allow[] = {"--allow-uid", "65534", NULL};
	char base[] = "/tmp/berth-allow-XXXXXX", sock[320];
	struct stat st;

	if (geteuid() != 0) {
		print_message("not root: cannot act as another user; skipped\n");
		skip();
	}
	assert_non_null(mkdtemp(base));
	assert_int_equal(chmod(base, 0755), 0);
	snprintf(sock, sizeof sock, "%s/run/berth.sock", base);
	support_start(&h, allow);
	harness_stop(&h);
	memcpy(h.socket, sock, sizeof sock);
	assert_int_equal(harness_restart(&h), 0);
	assert_int_equal(stat(sock, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0666);
	/* Nothing was changed by hand: the allowed user connects. */
	assert_int_equal(connect_as(sock, OTHER_UID), 0);
	assert_int_equal(connect_as(sock, 0), 0);
	/* A user berthd does not allow reaches the file, and is refused. */
	assert_int_equal(connect_as(sock, 65533), 10);
	harness_cleanup(&h);
	snprintf(sock, sizeof sock, "%s/run", base);
	rmdir(sock);
	rmdir(base);

	/* A socket in a directory the user cannot search: berthd says so. */
	support_start(&h, allow);
	assert_true(log_has(&h, "--allow-uid 65534: that user cannot reach"));
	harness_cleanup(&h);
}

/* The token of --token-file is warned about at start when it is short or
 * its file is open to other users; a good one is not. */
static void the_token_file__is_warned_about_when_short_or_open_to_others(void **state)
{
	struct harness h;
	char dir[] = "/tmp/berth-tok-XXXXXX";
	const char *extra[] = {"--token-file", NULL, NULL};

	assert_non_null(mkdtemp(dir));
	extra[1] = make_token_file(dir, "short", 0644);
	support_start(&h, extra);
	assert_true(log_has(&h, "is mode 0644: other users may read it"));
	assert_true(log_has(&h, "is 5 bytes long"));
	harness_cleanup(&h);
	extra[1] = make_token_file(dir, "0123456789abcdef0123456789abcdef0123",
				   0600);
	support_start(&h, extra);
	assert_false(log_has(&h, "other users may read it"));
	assert_false(log_has(&h, "bytes long"));
	harness_cleanup(&h);
	unlink(extra[1]);
	rmdir(dir);
}

/* ---- TCP ---------------------------------------------------------------- */

static void tcp__needs_the_token_before_anything_else(void **state)
{
	struct harness h;
	char listen[64], where[80], token_file[] = "/tmp/berth-token-XXXXXX";
	const char *extra[] = {"--listen", listen, "--token-file", token_file, NULL};
	const char *args[8];
	char err[4096];
	struct berth_client *c;
	int fd, port = harness_free_port();
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


/* ---- strangers: TCP before server/auth ---------------------------------- */

#define GOOD_TOKEN "7c1f0b0a9e5d4c3b2a19f8e7d6c5b4a3-berth-test"

static struct harness tcpd; /* berthd with --listen, for the strangers */
static int tcpd_port;
static char tcpd_dir[] = "/tmp/berth-tcpd-XXXXXX";

static int start_tcpd(void **state)
{
	static char listen[64];
	const char *extra[] = {"--listen", listen, "--token-file", NULL, NULL};

	assert_non_null(mkdtemp(tcpd_dir));
	extra[3] = make_token_file(tcpd_dir, GOOD_TOKEN, 0600);
	tcpd_port = harness_free_port();
	snprintf(listen, sizeof listen, "127.0.0.1:%d", tcpd_port);
	support_start(&tcpd, extra);
	return 0;
}

static int stop_tcpd(void **state)
{
	int rc = harness_stop(&tcpd);
	char path[400];

	harness_cleanup(&tcpd);
	snprintf(path, sizeof path, "%s/token", tcpd_dir);
	unlink(path);
	rmdir(tcpd_dir);
	return rc == 0 ? 0 : -1;
}

/* tcp_login connects to tcpd and authenticates; returns the socket. */
static int tcp_login(void)
{
	static const char auth[] = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":"
				   "\"server/auth\",\"params\":{\"token\":\""
				   GOOD_TOKEN "\"}}\n";
	int fd = tcp_connect(tcpd_port);
	json_t *r;

	assert_true(fd >= 0);
	send_all(fd, auth, sizeof auth - 1);
	r = json_line(fd, 30000);
	assert_non_null(json_object_get(r, "result"));
	json_decref(r);
	return fd;
}

/* unix_ping is true when a new client of the Unix socket gets ping
 * answered. */
static bool unix_ping(struct harness *h)
{
	struct berth_client *c = harness_connect(h);
	json_t *res = NULL, *err = NULL;
	int rc;

	if (!c)
		return false;
	rc = berth_client_call(c, "ping", NULL, 60000, &res, &err);
	json_decref(res);
	json_decref(err);
	berth_client_close(c);
	return rc == 0;
}

/* The start-up line names the socket whole and the TCP address, so that
 * a client can be pointed at either from any folder (before: the socket
 * as given, "./berth.sock", and no TCP address at all). */
static void the_start_line__names_the_socket_and_the_tcp_address(void **state)
{
	char want[512];

	snprintf(want, sizeof want, "serving %s, and TCP on 127.0.0.1:%d (",
		 tcpd.socket, tcpd_port);
	assert_true(tcpd.socket[0] == '/');
	assert_true(log_has(&tcpd, want));
}

/* Before server/auth a batch is answered once, -32010, whatever it holds,
 * and nothing in it is parsed or run. */
static void a_batch_before_login__gets_one_unauthorized(void **state)
{
	int fd = tcp_connect(tcpd_port);
	char line[4096];
	size_t n = 0;
	json_t *r;

	assert_true(fd >= 0);
	n += (size_t)snprintf(line, sizeof line, "[");
	for (int i = 0; i < 20; i++)
		n += (size_t)snprintf(line + n, sizeof line - n,
				      "%s{\"jsonrpc\":\"2.0\",\"id\":%d,"
				      "\"method\":\"ping\"}", i ? "," : "", i);
	n += (size_t)snprintf(line + n, sizeof line - n, "]\n");
	send_all(fd, line, n);
	r = json_line(fd, 30000);
	/* One error object, not an array of twenty. */
	assert_true(json_is_object(r));
	assert_int_equal(error_code(r), -32010);
	assert_true(json_is_null(json_object_get(r, "id")));
	json_decref(r);
	/* Nothing else follows it: the next answer is the next request's. */
	send_str(fd, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}\n");
	r = json_line(fd, 30000);
	assert_string_equal(jstr(r, "id"), "p");
	assert_int_equal(error_code(r), -32010);
	json_decref(r);
	close(fd);
}

/* A stranger that pipelines more requests than its 16 KiB of unread
 * replies holds is paused until it reads them, and then read again: its
 * login, pipelined after 300 pings, is answered as soon as it has read
 * the pings' answers. Before, a connection whose replies all went out at
 * once was never read again, and its login waited for the 10 s deadline
 * to close it. */
static void pipelined_pings_before_login__pause_it_only_until_it_reads(void **state)
{
	static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
	static const char login[] = "{\"jsonrpc\":\"2.0\",\"id\":\"login\",\"method\":"
				    "\"server/auth\",\"params\":{\"token\":\""
				    GOOD_TOKEN "\"}}\n";
	size_t n = 300 * (sizeof ping - 1) + sizeof login - 1, off = 0;
	char *all = malloc(n), line[512];
	int fd = tcp_connect(tcpd_port), pings = 0;
	json_t *r = NULL;

	assert_non_null(all);
	assert_true(fd >= 0);
	for (int i = 0; i < 300; i++, off += sizeof ping - 1)
		memcpy(all + off, ping, sizeof ping - 1);
	memcpy(all + off, login, sizeof login - 1);
	send_all(fd, all, n);
	free(all);
	/* 300 refusals, then the login's answer, well before the deadline
	 * (a 5 s wait for each line: the deadline is 10 s). */
	for (;;) {
		ssize_t got = read_line_fd(fd, line, sizeof line, 5000);

		if (got <= 0)
			fail_msg("after %d refusals: %s", pings,
				 got == 0 ? "closed" : "no answer in 5 s");
		r = json_loads(line, 0, NULL);
		assert_non_null(r);
		if (json_is_string(json_object_get(r, "id")))
			break;
		assert_int_equal(error_code(r), -32010);
		pings++;
		json_decref(r);
	}
	assert_int_equal(pings, 300);
	assert_string_equal(jstr(r, "id"), "login");
	assert_non_null(json_object_get(r, "result"));
	json_decref(r);
	close(fd);
}

/* The 6 MB batch of {} made berthd allocate 2.85 GB and stall
 * everyone for 12 s. Before server/auth a line may hold 64 KiB: a
 * megabyte of batch is refused as too long, unparsed, its connection
 * closed, and it costs berthd next to nothing while the owner is
 * served. */
static void a_megabyte_batch_before_login__costs_little_and_stalls_no_one(void **state)
{
	size_t n = 1u << 20;
	char *batch = malloc(n + 2);
	long hwm0, hwm1;
	int fd = tcp_connect(tcpd_port);
	json_t *r;

	assert_non_null(batch);
	assert_true(fd >= 0);
	batch[0] = '[';
	for (size_t i = 1; i + 3 < n; i += 3)
		memcpy(batch + i, "{},", 3);
	memcpy(batch + n - 3, "{}]\n", 4);
	hwm0 = proc_kib(tcpd.pid, "VmHWM:");
	/* berthd reads 64 KiB of it, answers, and closes: the rest of the
	 * megabyte may find the connection gone. */
	for (size_t off = 0; off < n + 1;) {
		ssize_t w = send(fd, batch + off, n + 1 - off, MSG_NOSIGNAL);

		if (w <= 0) {
			assert_true(errno == EPIPE || errno == ECONNRESET);
			break;
		}
		off += (size_t)w;
	}
	free(batch);
	{
		char line[512];
		ssize_t got = read_line_fd(fd, line, sizeof line, 60000);

		/* Its answer, unless the close overtook it; then the end. */
		assert_true(got >= 0);
		if (got > 0) {
			r = json_loads(line, 0, NULL);
			assert_int_equal(error_code(r), -32600);
			assert_int_equal(json_integer_value(json_object_get(
				json_object_get(json_object_get(r, "error"),
						"data"), "limit")), 64 * 1024);
			json_decref(r);
			assert_int_equal(read_line_fd(fd, line, sizeof line,
						      60000), 0);
		}
	}
	assert_true(unix_ping(&tcpd));
	hwm1 = proc_kib(tcpd.pid, "VmHWM:");
	print_message("berthd's peak RSS: %ld KiB before, %ld KiB after\n",
		      hwm0, hwm1);
	/* Generous: the old code's peak grew by hundreds of MiB here. */
	assert_true(hwm1 - hwm0 < 64 * 1024);
	close(fd);
}

/* A stranger that never authenticates is told so and closed at the login
 * deadline (10 s), and not before. */
static void a_stranger__is_closed_at_the_login_deadline(void **state)
{
	int fd = tcp_connect(tcpd_port);
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char buf[512];
	json_t *r;

	assert_true(fd >= 0);
	assert_int_equal(poll(&p, 1, 3000), 0); /* still open at 3 s */
	r = json_line(fd, 60000);
	assert_int_equal(error_code(r), -32010);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(
				 json_object_get(r, "error"), "data"), "limit")),
			 10000);
	json_decref(r);
	assert_int_equal(read_line_fd(fd, buf, sizeof buf, 30000), 0); /* EOF */
	close(fd);
	/* Authenticated, a client stays as long as it likes. */
	fd = tcp_login();
	p.fd = fd;
	assert_int_equal(poll(&p, 1, 12000), 0);
	send_str(fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
	r = json_line(fd, 30000);
	assert_non_null(json_object_get(r, "result"));
	json_decref(r);
	close(fd);
}

#define STRANGERS 16384

/* 16,384 idle TCP connections used to fill berthd's connection limit, so
 * that its owner got -32013 on the Unix socket. Strangers now have 256
 * places, the oldest giving way to a newcomer: the owner, and a TCP
 * client with the token, are served beside any number of them, and
 * berthd holds a few hundred descriptors for them, not thousands. */
static void sixteen_thousand_idle_strangers__never_lock_the_owner_out(void **state)
{
	long limit = support_raise_nofile();
	int want = STRANGERS, *fds, fd, held;
	json_t *r;

	if (limit < STRANGERS + 256) {
		want = (int)limit - 256;
		print_message("RLIMIT_NOFILE is %ld: %d strangers, not %d\n",
			      limit, want, STRANGERS);
	}
	fds = calloc((size_t)want, sizeof *fds);
	assert_non_null(fds);
	for (int i = 0; i < want; i++) {
		fds[i] = tcp_connect(tcpd_port);
		assert_true(fds[i] >= 0);
	}
	assert_true(unix_ping(&tcpd));
	fd = tcp_login();
	send_str(fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
	r = json_line(fd, 30000);
	assert_non_null(json_object_get(r, "result"));
	json_decref(r);
	held = fds_fall_to(tcpd.pid, 256 + 128);
	print_message("%d strangers connected; berthd holds %d descriptors\n",
		      want, held);
	assert_true(held <= 256 + 128);
	/* The oldest were told why they were closed. */
	{
		char buf[512];

		assert_true(read_line_fd(fds[0], buf, sizeof buf, 30000) > 0);
		assert_non_null(strstr(buf, "-32013"));
	}
	for (int i = 0; i < want; i++)
		close(fds[i]);
	free(fds);
	close(fd);
	assert_true(unix_ping(&tcpd));
}

/* tcp_clients_that_vanish: TCP clients that wait (jobs/wait, a long
 * events/poll) and close give their connections back at once, though the
 * job has not moved. */
static void tcp_clients_that_vanish__release_their_connections_at_once(void **state)
{
	struct berth_client *d = support_connect(&tcpd);
	json_t *job = submit(d, "api-approve", "{\"action\":\"hold\"}");
	int base = proc_fds(tcpd.pid), n = 100, left;
	char line[512];

	for (int i = 0; i < n; i++) {
		int fd = tcp_login();
		int len = snprintf(line, sizeof line,
				   "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
				   "\"jobs/wait\",\"params\":{\"id\":\"%s\","
				   "\"until\":[\"declined\"]}}\n"
				   "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":"
				   "\"events/poll\",\"params\":{\"since\":"
				   "999999999,\"waitMs\":600000}}\n",
				   jstr(job, "id"));

		send_all(fd, line, (size_t)len);
		close(fd);
	}
	left = fds_fall_to(tcpd.pid, base + 8);
	print_message("%d TCP clients waited and left: berthd holds %d "
		      "descriptors, %d before\n", n, left, base);
	assert_true(left <= base + 8);
	json_decref(call_ok(d, "jobs/decline",
			    json_pack("{s:s}", "id", jstr(job, "id"))));
	json_decref(job);
	berth_client_close(d);
}

/* Guesses of the token are checked at most 10 at once and 1 a second from
 * one peer (all of loopback is one), each logged with its address and
 * counted; past that they are refused unchecked, and a connection is
 * closed after 3 failures. The right token gets in once the credit has
 * come back. */
static void token_guesses__are_throttled_logged_and_refused_unchecked(void **state)
{
	struct harness h;
	char dir[] = "/tmp/berth-guess-XXXXXX", listen[64], line[256];
	const char *extra[] = {"--listen", listen, "--token-file", NULL, NULL};
	int port = harness_free_port(), checked = 0, throttled = 0, conns = 0;
	int64_t t0, elapsed, retry = 0;
	json_t *r;

	assert_non_null(mkdtemp(dir));
	extra[3] = make_token_file(dir, GOOD_TOKEN, 0600);
	snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
	support_start(&h, extra);
	t0 = support_now_ms();
	while (support_now_ms() - t0 < 3000) {
		int fd = tcp_connect(port);

		assert_true(fd >= 0);
		conns++;
		for (int i = 0; i < 3; i++) {
			int len = snprintf(line, sizeof line,
					   "{\"jsonrpc\":\"2.0\",\"id\":%d,"
					   "\"method\":\"server/auth\",\"params\":"
					   "{\"token\":\"guess-%d-%d\"}}\n",
					   i, conns, i);
			const char *msg;

			send_all(fd, line, (size_t)len);
			r = json_line(fd, 30000);
			assert_int_equal(error_code(r), -32010);
			msg = jstr(json_object_get(r, "error"), "message");
			if (strstr(msg, "wrong token"))
				checked++;
			else if (strstr(msg, "too many failed"))
				throttled++;
			else
				fail_msg("unexpected answer: %s", msg);
			json_decref(r);
		}
		/* Three failures, and the connection is closed. */
		assert_int_equal(read_line_fd(fd, line, sizeof line, 30000), 0);
		close(fd);
	}
	elapsed = support_now_ms() - t0;
	print_message("%d guesses in %lld ms: %d checked, %d refused unchecked\n",
		      checked + throttled, (long long)elapsed, checked, throttled);
	assert_true(checked <= 10 + (int)(elapsed / 1000) + 2);
	assert_true(throttled > 0);
	assert_true(log_has(&h, "refused login from 127.0.0.1:"));
	/* By its transport, as a job's submittedVia: it said "socket". */
	assert_true(log_has(&h, "(tcp, server/auth): wrong token"));
	assert_true(log_has(&h, "throttling logins from the loopback addresses"));

	/* The right token is refused unchecked too, for now... */
	{
		int fd = tcp_connect(port);
		int len = snprintf(line, sizeof line,
				   "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
				   "\"server/auth\",\"params\":{\"token\":\"%s\"}}\n",
				   GOOD_TOKEN);

		send_all(fd, line, (size_t)len);
		r = json_line(fd, 30000);
		if (error_code(r) == -32010) {
			retry = json_integer_value(json_object_get(json_object_get(
				json_object_get(r, "error"), "data"),
				"retryAfterMs"));
			assert_true(retry > 0);
		}
		json_decref(r);
		/* ...and once the credit is back, it gets in. */
		sleep_ms((int)retry + 100);
		send_all(fd, line, (size_t)len);
		r = json_line(fd, 30000);
		assert_non_null(json_object_get(r, "result"));
		json_decref(r);
		close(fd);
	}
	harness_cleanup(&h);
	unlink(extra[3]);
	rmdir(dir);
}

/* ---- limits ------------------------------------------------------------- */

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
	assert_pings(c, 2);
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
	int want = IDLE, total;
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

	/* Unix peers that pass the peer check always have room: past the
	 * 16384 connections that bound TCP, they are served still. */
	if (total > want) {
		for (int i = want; i < total; i++) {
			fds[i] = open_raw(shared.socket);
			assert_true(fds[i] >= 0);
		}
		for (int i = MAX_CONNECTIONS; i < total; i++)
			assert_true(ping_raw(fds[i]));
		print_message("%d connections, past %d, all served\n", total,
			      MAX_CONNECTIONS);
	} else {
		print_message("too few descriptors to pass %d connections; "
			      "not tested\n", MAX_CONNECTIONS);
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


/* One reply longer than the 64 MiB of unread replies berthd allows is not
 * a client that does not read: here a batch of five jobs/get of a job of
 * 30 MiB (its 15 MiB input and its output) is one line of 150 MiB, which
 * reaches the client whole, and the connection goes on. */
static void a_reply_longer_than_the_cap__reaches_a_client_that_reads(void **state)
{
	struct berth_client *c = support_connect(&shared);
	size_t big = 15u * 1024 * 1024, n = 0;
	char *input = malloc(big + 16), batch[1024], *line;
	json_t *job, *msg;

	assert_non_null(input);
	n = (size_t)snprintf(input, 16, "{\"s\":\"");
	memset(input + n, 'q', big);
	strcpy(input + n + big, "\"}");
	job = submit(c, "noop", input);
	free(input);
	json_decref(wait_for(c, jstr(job, "id"), "completed"));
	n = (size_t)snprintf(batch, sizeof batch, "[");
	for (int i = 0; i < 5; i++)
		n += (size_t)snprintf(batch + n, sizeof batch - n,
				      "%s{\"jsonrpc\":\"2.0\",\"id\":%d,"
				      "\"method\":\"jobs/get\",\"params\":"
				      "{\"id\":\"%s\"}}",
				      i ? "," : "", i, jstr(job, "id"));
	snprintf(batch + n, sizeof batch - n, "]");
	json_decref(job);
	assert_int_equal(berth_client_send_line(c, batch, strlen(batch)), 0);
	line = berth_client_read_line(c, 120000);
	assert_non_null(line);
	print_message("the batch's answer: %zu bytes\n", strlen(line));
	assert_true(strlen(line) > 5 * 2 * big);
	msg = json_loads(line, 0, NULL);
	free(line);
	assert_int_equal(json_array_size(msg), 5);
	for (size_t i = 0; i < 5; i++)
		assert_non_null(json_object_get(json_array_get(msg, i),
						"result"));
	json_decref(msg);
	json_decref(call_ok(c, "ping", NULL));
	berth_client_close(c);
}

#define ASKED_CALLS 1100

/* An MCP client whose tools/call wait for its own answers to berthd's
 * elicitation/create is not one with that many requests unanswered: past
 * 1024 such calls berthd still reads it, and so reads the answers that
 * end the calls, and a ping after them. Before, it stopped reading at
 * 1024 and the session hung for good. */
static void calls_waiting_on_the_clients_own_answers__do_not_pause_it(void **state)
{
	struct berth_client *c = support_connect(&shared);
	int fd = berth_client_fd(c), asked = 0, ended = 0;
	size_t outcap = (ASKED_CALLS + 4) * 256, outlen = 0, outoff = 0;
	size_t incap = 1 << 20, inlen = 0;
	char *out = malloc(outcap), *in = malloc(incap);
	bool pinged = false;
	int64_t deadline = support_now_ms() + 60000;

	assert_non_null(out);
	assert_non_null(in);
	outlen += (size_t)snprintf(out + outlen, outcap - outlen,
		"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
		"\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":"
		"{\"elicitation\":{}},\"clientInfo\":{\"name\":\"t\","
		"\"version\":\"1\"}}}\n{\"jsonrpc\":\"2.0\",\"method\":"
		"\"notifications/initialized\"}\n");
	for (int i = 1; i <= ASKED_CALLS; i++)
		outlen += (size_t)snprintf(out + outlen, outcap - outlen,
			"{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\","
			"\"params\":{\"name\":\"api-approve\",\"arguments\":"
			"{\"action\":\"a%d\"}}}\n", i, i);
	outlen += (size_t)snprintf(out + outlen, outcap - outlen,
		"{\"jsonrpc\":\"2.0\",\"id\":\"ping\",\"method\":\"ping\"}\n");
	assert_true(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0);
	while (!(pinged && ended == ASKED_CALLS) &&
	       support_now_ms() < deadline) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		char *nl;
		ssize_t n;

		if (outoff < outlen)
			pfd.events |= POLLOUT;
		if (poll(&pfd, 1, 1000) <= 0)
			continue;
		if ((pfd.revents & POLLOUT) &&
		    (n = write(fd, out + outoff, outlen - outoff)) > 0)
			outoff += (size_t)n;
		if (!(pfd.revents & (POLLIN | POLLHUP)))
			continue;
		n = read(fd, in + inlen, incap - inlen);
		assert_true(n > 0);
		inlen += (size_t)n;
		while ((nl = memchr(in, '\n', inlen))) {
			json_t *m = json_loadb(in, (size_t)(nl - in), 0, NULL);
			const char *method = jstr(m, "method");
			json_t *id = json_object_get(m, "id");

			assert_non_null(m);
			if (method && strcmp(method, "elicitation/create") == 0) {
				/* Declined: the call ends, no tool runs. */
				char *idt = json_dumps(id, JSON_ENCODE_ANY);
				size_t need = 128 + strlen(idt);

				if (outcap - outlen < need) {
					memmove(out, out + outoff,
						outlen - outoff);
					outlen -= outoff;
					outoff = 0;
				}
				assert_true(outcap - outlen >= need);
				outlen += (size_t)snprintf(out + outlen,
					outcap - outlen, "{\"jsonrpc\":\"2.0\","
					"\"id\":%s,\"result\":{\"action\":"
					"\"decline\"}}\n", idt);
				free(idt);
				asked++;
			} else if (json_is_string(id)) {
				pinged = true;
			} else if (json_is_integer(id) &&
				   json_integer_value(id) > 0) {
				ended++;
			}
			json_decref(m);
			inlen -= (size_t)(nl + 1 - in);
			memmove(in, nl + 1, inlen);
		}
	}
	print_message("%d calls asked about, %d ended, ping %s\n", asked,
		      ended, pinged ? "answered" : "not answered");
	assert_true(pinged);
	assert_int_equal(ended, ASKED_CALLS);
	free(out);
	free(in);
	berth_client_close(c);
}

/* An MCP notifications/cancelled that comes before the call's job is
 * stored (here in the same write as the call) drops the call unanswered,
 * as one that comes later does. Before, it matched nothing and the call
 * was answered anyway. */
static void a_cancel_right_after_its_call__drops_the_call(void **state)
{
	struct berth_client *c = support_connect(&shared);
	static const char lines[] =
		"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\","
		"\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":"
		"{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n"
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
		"\"params\":{\"name\":\"noop\",\"arguments\":{\"k\":1}}}\n"
		"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
		"\"params\":{\"requestId\":7,\"reason\":\"changed my mind\"}}\n"
		"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\","
		"\"params\":{\"name\":\"noop\",\"arguments\":{\"k\":2}}}\n";
	bool got7 = false, got8 = false;
	int64_t until = 0;

	assert_int_equal(berth_client_send_line(c, lines, sizeof lines - 2), 0);
	/* Call 8 is answered; call 7 is not, in the second after. */
	for (;;) {
		int64_t left = until ? until - support_now_ms() : 30000;
		char *line = left > 0 ? berth_client_read_line(c, (int)left)
				      : NULL;
		json_t *m, *id;

		if (!line)
			break;
		m = json_loads(line, 0, NULL);
		free(line);
		id = json_object_get(m, "id");
		if (json_is_integer(id) && json_integer_value(id) == 7)
			got7 = true;
		if (json_is_integer(id) && json_integer_value(id) == 8) {
			got8 = true;
			until = support_now_ms() + 1000;
		}
		json_decref(m);
	}
	assert_true(got8);
	assert_false(got7);
	berth_client_close(c);
}

/* A batch is at most 1000 requests: one more and it is refused as a whole
 * (-32600 with the limit), before any of it is parsed or run. */
static void a_batch_over_1000__is_refused_before_it_is_parsed(void **state)
{
	struct berth_client *c = support_connect(&shared);
	size_t size = 1001 * 64, n;
	char *line = malloc(size);
	json_t *r;

	for (int count = 1001; count >= 1000; count--) {
		n = (size_t)snprintf(line, size, "[");
		for (int i = 0; i < count; i++)
			n += (size_t)snprintf(line + n, size - n,
					      "%s{\"jsonrpc\":\"2.0\",\"id\":%d,"
					      "\"method\":\"ping\"}",
					      i ? "," : "", i);
		n += (size_t)snprintf(line + n, size - n, "]");
		assert_int_equal(berth_client_send_line(c, line, n), 0);
		{
			char *reply = berth_client_read_line(c, 60000);

			assert_non_null(reply);
			r = json_loads(reply, JSON_DECODE_ANY, NULL);
			free(reply);
		}
		assert_non_null(r);
		if (count == 1001) {
			assert_true(json_is_object(r));
			assert_int_equal(error_code(r), -32600);
			assert_int_equal(json_integer_value(json_object_get(
				json_object_get(json_object_get(r, "error"),
						"data"), "limit")), 1000);
		} else {
			assert_int_equal(json_array_size(r), 1000);
		}
		json_decref(r);
	}
	free(line);
	berth_client_close(c);
}

/* raw_unix connects to the shared daemon's socket. */
static int raw_unix(void)
{
	int fd = open_raw(shared.socket);

	assert_true(fd >= 0);
	return fd;
}

/* 300 clients that send jobs/wait and a long events/poll and close used
 * to hold 300 descriptors until the job moved. Their waits are dropped,
 * and their connections closed, as soon as they hang up. */
static void unix_clients_that_vanish__release_their_waits_at_once(void **state)
{
	struct berth_client *d = support_connect(&shared);
	json_t *job = submit(d, "api-approve", "{\"action\":\"hold\"}");
	int base = proc_fds(shared.pid), n = 300, left;
	char line[512];

	for (int i = 0; i < n; i++) {
		int fd = raw_unix();
		int len = snprintf(line, sizeof line,
				   "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
				   "\"jobs/wait\",\"params\":{\"id\":\"%s\","
				   "\"until\":[\"declined\"]}}\n"
				   "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":"
				   "\"events/poll\",\"params\":{\"since\":"
				   "999999999,\"waitMs\":600000}}\n",
				   jstr(job, "id"));

		send_all(fd, line, (size_t)len);
		close(fd);
	}
	left = fds_fall_to(shared.pid, base + 8);
	print_message("%d clients waited and left: berthd holds %d "
		      "descriptors, %d before\n", n, left, base);
	assert_true(left <= base + 8);
	json_decref(call_ok(d, "jobs/decline",
			    json_pack("{s:s}", "id", jstr(job, "id"))));
	json_decref(job);
	berth_client_close(d);
}

/* A client that only shuts down its sending side (as `nc -N` does) still
 * wants its answers: its wait is answered when the job moves. */
static void a_half_closed_unix_client__still_gets_its_answers(void **state)
{
	struct berth_client *d = support_connect(&shared);
	json_t *job = submit(d, "api-approve", "{\"action\":\"hold\"}"), *r;
	int fd = raw_unix();
	char line[512];
	int len = snprintf(line, sizeof line,
			   "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"jobs/wait\","
			   "\"params\":{\"id\":\"%s\",\"until\":[\"declined\"]}}\n",
			   jstr(job, "id"));
	struct pollfd p = {.fd = fd, .events = POLLIN};

	send_all(fd, line, (size_t)len);
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	/* It waits: nothing comes while the job holds. */
	assert_int_equal(poll(&p, 1, 1500), 0);
	json_decref(call_ok(d, "jobs/decline",
			    json_pack("{s:s}", "id", jstr(job, "id"))));
	r = json_line(fd, 30000);
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 7);
	assert_string_equal(jstr(json_object_get(r, "result"), "status"),
			    "declined");
	json_decref(r);
	assert_int_equal(read_line_fd(fd, line, sizeof line, 30000), 0);
	close(fd);
	json_decref(job);
	berth_client_close(d);
}

#define PIPELINED_WAITS 5000

/* A jobs/wait or events/poll sent as a notification waited like a
 * request, though its answer goes nowhere: each counted as unanswered,
 * and 1,024 of them stopped berthd reading the connection for as long as
 * they waited (without timeoutMs, for good), with no answer to say so.
 * They do not wait now, and what follows them is answered. */
static void notifications_that_would_wait__do_not_hold_the_connection(void **state)
{
	struct berth_client *c = support_connect(&shared);
	json_t *job = submit(c, "api-approve", "{\"action\":\"hold\"}");
	char line[256];

	for (int i = 0; i < 1200; i++) {
		if (i % 2)
			snprintf(line, sizeof line,
				 "{\"jsonrpc\":\"2.0\",\"method\":\"jobs/wait\","
				 "\"params\":{\"id\":\"%s\",\"until\":"
				 "[\"declined\"]}}", jstr(job, "id"));
		else
			snprintf(line, sizeof line,
				 "{\"jsonrpc\":\"2.0\",\"method\":\"events/poll\","
				 "\"params\":{\"since\":1000000000000,"
				 "\"waitMs\":600000}}");
		assert_int_equal(berth_client_send_line(c, line, strlen(line)),
				 0);
	}
	assert_pings(c, 1201);
	json_decref(call_ok(c, "jobs/cancel",
			    json_pack("{s:s}", "id", jstr(job, "id"))));
	json_decref(job);
	berth_client_close(c);
	(void)state;
}

/* A client that pipelines more than 1024 requests that wait used to get
 * -32013 for the excess. berthd now stops reading it at 1024 unanswered
 * and reads on as answers drain: every request is answered, none
 * refused. The test writes without blocking, so it sees berthd stop
 * reading. */
static void pipelining_past_the_unanswered_limit__pauses_and_answers_all(void **state)
{
	struct berth_client *d = support_connect(&shared);
	json_t *job = submit(d, "api-approve", "{\"action\":\"hold\"}");
	size_t size = (PIPELINED_WAITS + 1) * 160, len = 0, sent = 0;
	char *buf = malloc(size), *seen = calloc(PIPELINED_WAITS + 1, 1);
	static char in[1 << 16];
	size_t inlen = 0;
	int fd = raw_unix(), got = 0;
	bool declined = false;

	for (int i = 0; i < PIPELINED_WAITS; i++)
		len += (size_t)snprintf(buf + len, size - len,
					"{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":"
					"\"jobs/wait\",\"params\":{\"id\":\"%s\","
					"\"until\":[\"declined\"]}}\n",
					i, jstr(job, "id"));
	len += (size_t)snprintf(buf + len, size - len,
				"{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":"
				"\"ping\"}\n", PIPELINED_WAITS);
	assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	while (got < PIPELINED_WAITS + 1) {
		struct pollfd p = {.fd = fd,
				   .events = POLLIN | (sent < len ? POLLOUT : 0)};
		int rc = poll(&p, 1, declined ? 60000 : 2000);

		assert_true(rc >= 0);
		if (rc == 0 && !declined) {
			/* berthd stopped reading with most of it unsent:
			 * only now does the job move. */
			assert_true(sent < len);
			assert_int_equal(got, 0);
			json_decref(call_ok(d, "jobs/decline", json_pack(
				"{s:s}", "id", jstr(job, "id"))));
			declined = true;
			continue;
		}
		assert_true(rc == 1);
		if (p.revents & POLLOUT) {
			ssize_t w = write(fd, buf + sent, len - sent);

			if (w > 0)
				sent += (size_t)w;
		}
		if (p.revents & POLLIN) {
			ssize_t r = read(fd, in + inlen, sizeof in - inlen);
			char *nl;

			assert_true(r > 0);
			inlen += (size_t)r;
			while ((nl = memchr(in, '\n', inlen))) {
				json_t *m = json_loadb(in, (size_t)(nl - in), 0,
						       NULL);
				int id;

				assert_non_null(m);
				if (!json_object_get(m, "result")) {
					char *t = json_dumps(m, JSON_COMPACT);

					fail_msg("refused: %s", t);
				}
				id = (int)json_integer_value(json_object_get(m, "id"));
				assert_true(id >= 0 && id <= PIPELINED_WAITS);
				assert_int_equal(seen[id], 0);
				seen[id] = 1;
				if (id < PIPELINED_WAITS)
					assert_string_equal(jstr(json_object_get(
						m, "result"), "status"), "declined");
				json_decref(m);
				got++;
				inlen -= (size_t)(nl + 1 - in);
				memmove(in, nl + 1, inlen);
			}
		}
	}
	assert_true(declined);
	print_message("%d pipelined waits and a ping: all answered\n",
		      PIPELINED_WAITS);
	free(buf);
	free(seen);
	close(fd);
	json_decref(job);
	berth_client_close(d);
}

int main(void)
{
	const struct CMUnitTest alone[] = {
		cmocka_unit_test(the_socket__is_0600_in_a_directory_made_0700),
		cmocka_unit_test(a_live_socket__is_not_taken_over),
		cmocka_unit_test(a_stale_socket__is_replaced),
		cmocka_unit_test(a_socket_still_held_by_the_child_of_a_berthd_that_ended__is_waited_for),
		cmocka_unit_test(another_user__is_refused_unless_allowed),
		cmocka_unit_test(allow_uid__alone_lets_that_user_reach_the_socket),
		cmocka_unit_test(the_token_file__is_warned_about_when_short_or_open_to_others),
		cmocka_unit_test(tcp__needs_the_token_before_anything_else),
		cmocka_unit_test(token_guesses__are_throttled_logged_and_refused_unchecked),
	};
	const struct CMUnitTest strangers[] = {
		cmocka_unit_test(the_start_line__names_the_socket_and_the_tcp_address),
		cmocka_unit_test(a_batch_before_login__gets_one_unauthorized),
		cmocka_unit_test(a_megabyte_batch_before_login__costs_little_and_stalls_no_one),
		cmocka_unit_test(a_stranger__is_closed_at_the_login_deadline),
		cmocka_unit_test(pipelined_pings_before_login__pause_it_only_until_it_reads),
		cmocka_unit_test(sixteen_thousand_idle_strangers__never_lock_the_owner_out),
		cmocka_unit_test(tcp_clients_that_vanish__release_their_connections_at_once),
	};
	const struct CMUnitTest limits[] = {
		cmocka_unit_test(a_line_over_16_mib__is_refused_and_the_connection_lives),
		cmocka_unit_test(nesting_past_the_limit__is_refused_and_the_connection_lives),
		cmocka_unit_test(a_batch_over_1000__is_refused_before_it_is_parsed),
		cmocka_unit_test(ten_thousand_pipelined_requests__are_all_answered),
		cmocka_unit_test(pipelining_past_the_unanswered_limit__pauses_and_answers_all),
		cmocka_unit_test(notifications_that_would_wait__do_not_hold_the_connection),
		cmocka_unit_test(unix_clients_that_vanish__release_their_waits_at_once),
		cmocka_unit_test(a_half_closed_unix_client__still_gets_its_answers),
		cmocka_unit_test(ten_thousand_idle_connections__do_not_disturb_the_others),
		cmocka_unit_test(a_reply_longer_than_the_cap__reaches_a_client_that_reads),
		cmocka_unit_test(calls_waiting_on_the_clients_own_answers__do_not_pause_it),
		cmocka_unit_test(a_cancel_right_after_its_call__drops_the_call),
		cmocka_unit_test(a_client_that_never_reads__is_cut_off_and_nobody_waits),
	};
	int failed;

	signal(SIGPIPE, SIG_IGN);
	if (getenv("BERTH_TEST_FILTER"))
		cmocka_set_test_filter(getenv("BERTH_TEST_FILTER"));
	failed = cmocka_run_group_tests_name("transport", alone, NULL, NULL);
	failed += cmocka_run_group_tests_name("strangers", strangers,
					      start_tcpd, stop_tcpd);
	failed += cmocka_run_group_tests_name("limits", limits, start_shared,
					      stop_shared);
	return failed;
}

/*
 * test_activation.c: berthd started the way systemd starts it from a
 * .socket unit (api/activation.h): the test binds and listens on the
 * sockets itself, connects and sends requests before berthd runs, then
 * execs the real berthd ($BERTHD) with LISTEN_PID, LISTEN_FDS and
 * LISTEN_FDNAMES set, and reads the answers. Nothing here uses systemd:
 * the test is the service manager.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/harness/child.h"

/* Generous: the machine may be loaded, and berthd runs under ASan. */
#define READ_TIMEOUT_MS 60000
#define STOP_TIMEOUT_MS 30000
#define TOKEN "activation-test-token"

struct fixture {
	char dir[256];
	char sock[300];
	char log[300];
	char token_file[300];
	pid_t pid;
};

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static int remove_one(const char *path, const struct stat *st, int flag,
		      struct FTW *ftw)
{
	remove(path);
	return 0;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	FILE *t;

	assert_non_null(f);
	snprintf(f->dir, sizeof f->dir, "/tmp/berth-activation-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->sock, sizeof f->sock, "%s/berth.sock", f->dir);
	snprintf(f->log, sizeof f->log, "%s/berthd.log", f->dir);
	snprintf(f->token_file, sizeof f->token_file, "%s/token", f->dir);
	t = fopen(f->token_file, "w");
	assert_non_null(t);
	fputs(TOKEN "\n", t);
	fclose(t);
	*state = f;
	return 0;
}

static void print_log(const struct fixture *f)
{
	char buf[4096];
	size_t n;
	FILE *l = fopen(f->log, "r");

	if (!l)
		return;
	fprintf(stderr, "---- berthd's log ----\n");
	while ((n = fread(buf, 1, sizeof buf, l)) > 0)
		fwrite(buf, 1, n, stderr);
	fprintf(stderr, "---- end of berthd's log ----\n");
	fclose(l);
}

/* stop sends SIGTERM and returns berthd's exit status (-1: killed). */
static int stop(struct fixture *f)
{
	int status;

	if (!f->pid)
		return -1;
	kill(f->pid, SIGTERM);
	for (int waited = 0; waited < STOP_TIMEOUT_MS; waited += 10) {
		if (waitpid(f->pid, &status, WNOHANG) == f->pid) {
			f->pid = 0;
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		}
		sleep_ms(10);
	}
	kill(f->pid, SIGKILL);
	waitpid(f->pid, &status, 0);
	f->pid = 0;
	print_log(f);
	return -1;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (f->pid)
		stop(f);
	if (getenv("BERTH_KEEP_TEST_DIR"))
		fprintf(stderr, "kept %s\n", f->dir);
	else
		nftw(f->dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

/* unix_addr fills sun with path, which must fit (the test's paths are
 * short: /tmp/berth-activation-XXXXXX/...). */
static void unix_addr(struct sockaddr_un *sun, const char *path)
{
	size_t len = strlen(path);

	assert_true(len < sizeof sun->sun_path);
	memset(sun, 0, sizeof *sun);
	sun->sun_family = AF_UNIX;
	memcpy(sun->sun_path, path, len + 1);
}

/* listen_unix returns a listening Unix socket bound at path. */
static int listen_unix(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	unix_addr(&sun, path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof sun), 0);
	assert_int_equal(listen(fd, 16), 0);
	return fd;
}

/* listen_tcp returns a listening TCP socket on 127.0.0.1 at a port the
 * kernel picks, and that port in *port. */
static int listen_tcp(int *port)
{
	struct sockaddr_in in = {.sin_family = AF_INET};
	socklen_t len = sizeof in;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&in, sizeof in), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&in, &len), 0);
	*port = ntohs(in.sin_port);
	return fd;
}

static int connect_unix(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	unix_addr(&sun, path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sun, sizeof sun), 0);
	return fd;
}

static int connect_tcp(int port)
{
	struct sockaddr_in in = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	in.sin_port = htons((uint16_t)port);
	assert_int_equal(connect(fd, (struct sockaddr *)&in, sizeof in), 0);
	return fd;
}

static void send_all(int fd, const char *s)
{
	size_t len = strlen(s), off = 0;

	while (off < len) {
		ssize_t n = send(fd, s + off, len - off, MSG_NOSIGNAL);

		assert_true(n > 0);
		off += (size_t)n;
	}
}

/* read_until reads from fd into buf until it holds want (or the peer
 * closes, or the time-out passes). Returns true when want arrived. */
static bool read_until(int fd, char *buf, size_t size, const char *want)
{
	size_t len = 0;

	buf[0] = '\0';
	for (int waited = 0; waited < READ_TIMEOUT_MS && !strstr(buf, want);) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&p, 1, 100) == 0) {
			waited += 100;
			continue;
		}
		n = recv(fd, buf + len, size - 1 - len, 0);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		if (len == size - 1)
			break;
	}
	return strstr(buf, want) != NULL;
}

/* read_more is read_until that keeps what buf already holds. */
static bool read_more(int fd, char *buf, size_t size, const char *want)
{
	size_t len = strlen(buf);

	return read_until(fd, buf + len, size - len, want);
}

/*
 * start execs berthd on dir/berth.db with the example tools (and extra,
 * NULL-ended) after putting fds[0..n-1] at descriptors 3.. and setting
 * LISTEN_FDS to n, LISTEN_FDNAMES to names (or leaving it unset when
 * NULL) and LISTEN_PID to berthd's pid (or to listen_pid when non-zero).
 */
static void start(struct fixture *f, const int *fds, int n, const char *names,
		  pid_t listen_pid, const char *const *extra)
{
	const char *berthd = getenv("BERTHD"), *examples = getenv("BERTH_EXAMPLES");
	pid_t pid;

	assert_non_null(berthd);
	pid = harness_fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		const char *argv[32];
		char db[320], num[32];
		int moved[8], out, k = 0;

		/* Move the sockets out of the way first: one of them may sit
		 * at a descriptor another is about to take. */
		for (int i = 0; i < n; i++)
			moved[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 100);
		for (int i = 0; i < n; i++)
			if (dup2(moved[i], 3 + i) < 0)
				_exit(126);
		out = open(f->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (out >= 0) {
			dup2(out, 1);
			dup2(out, 2);
		}
		snprintf(num, sizeof num, "%d", n);
		setenv("LISTEN_FDS", num, 1);
		snprintf(num, sizeof num, "%d", listen_pid ? (int)listen_pid
							   : (int)getpid());
		setenv("LISTEN_PID", num, 1);
		if (names)
			setenv("LISTEN_FDNAMES", names, 1);
		else
			unsetenv("LISTEN_FDNAMES");
		snprintf(db, sizeof db, "%s/berth.db", f->dir);
		argv[k++] = berthd;
		argv[k++] = "--db";
		argv[k++] = db;
		argv[k++] = "--tools";
		argv[k++] = examples;
		for (int i = 0; extra && extra[i] && k < 31; i++)
			argv[k++] = extra[i];
		argv[k] = NULL;
		execv(berthd, (char *const *)argv);
		_exit(127);
	}
	f->pid = pid;
}

/* wait_exit waits for berthd to exit by itself and returns its status. */
static int wait_exit(struct fixture *f)
{
	int status;

	for (int waited = 0; waited < STOP_TIMEOUT_MS; waited += 10) {
		if (waitpid(f->pid, &status, WNOHANG) == f->pid) {
			f->pid = 0;
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		}
		sleep_ms(10);
	}
	return -2;
}

static bool log_has(const struct fixture *f, const char *want)
{
	char buf[16384];
	size_t n;
	FILE *l = fopen(f->log, "r");

	if (!l)
		return false;
	n = fread(buf, 1, sizeof buf - 1, l);
	buf[n] = '\0';
	fclose(l);
	return strstr(buf, want) != NULL;
}

/* ---- the tests ---------------------------------------------------------- */

static void activation__request_sent_before_berthd_runs__is_answered_from_the_backlog(void **state)
{
	struct fixture *f = *state;
	int lfd = listen_unix(f->sock), c;
	char buf[65536];
	struct stat st;

	/* The client connects and asks while nothing but the backlog is
	 * there: as with systemd, the connection is accepted by the
	 * kernel, and the request waits in it. */
	c = connect_unix(f->sock);
	send_all(c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"jobs/submit\","
		    "\"params\":{\"tool\":\"weather-tool\",\"input\":"
		    "{\"location\":\"Seattle\"}}}\n"
		    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"server/info\"}\n");
	start(f, &lfd, 1, "socket", 0, NULL);
	/* Pipelined requests may be answered in any order. */
	if (!read_until(c, buf, sizeof buf, "\"id\":2") ||
	    !(strstr(buf, "\"id\":1") || read_more(c, buf, sizeof buf, "\"id\":1"))) {
		print_log(f);
		fail_msg("no answer from berthd; got '%s'", buf);
	}
	assert_non_null(strstr(buf, "\"tool\":\"weather-tool\""));
	assert_non_null(strstr(buf, "\"durability\"")); /* server/info */
	close(c);

	/* A stop leaves the socket to its owner: the file stays, and a
	 * client that connects while berthd is down waits for the next. */
	assert_int_equal(stop(f), 0);
	assert_int_equal(lstat(f->sock, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	c = connect_unix(f->sock);
	send_all(c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"jobs/list\","
		    "\"params\":{\"tool\":\"weather-tool\"}}\n");
	start(f, &lfd, 1, "socket", 0, NULL);
	if (!read_until(c, buf, sizeof buf, "\"id\":3")) {
		print_log(f);
		fail_msg("no answer from the restarted berthd; got '%s'", buf);
	}
	/* The job of the first run, completed (the example tool is quick,
	 * but the list is read when it is read: completed or still on its
	 * way there). */
	assert_non_null(strstr(buf, "\"location\":\"Seattle\""));
	close(c);
	assert_int_equal(stop(f), 0);
	assert_true(log_has(f, "socket activation: the Unix socket (--socket)"));
	close(lfd);
}

static void activation__tcp_and_http_sockets__are_served_by_their_names(void **state)
{
	struct fixture *f = *state;
	const char *extra[] = {"--token-file", f->token_file, NULL};
	int fds[3], tcp_port, http_port, t, h, u;
	char buf[65536], req[512];

	/* The Unix socket unnamed (a socket unit's default name): it is the
	 * only Unix one, so it is --socket. No --listen and no --http:
	 * the passed sockets stand for them. */
	fds[0] = listen_tcp(&http_port);
	fds[1] = listen_unix(f->sock);
	fds[2] = listen_tcp(&tcp_port);
	t = connect_tcp(tcp_port);
	send_all(t, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/auth\","
		    "\"params\":{\"token\":\"" TOKEN "\"}}\n"
		    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n");
	h = connect_tcp(http_port);
	snprintf(req, sizeof req, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
		 "Authorization: Bearer " TOKEN "\r\nConnection: close\r\n\r\n",
		 http_port);
	send_all(h, req);
	u = connect_unix(f->sock);
	send_all(u, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n");
	start(f, fds, 3, "http:berthd.socket:listen", 0, extra);

	if (!read_until(t, buf, sizeof buf, "\"id\":2")) {
		print_log(f);
		fail_msg("no answer on TCP; got '%s'", buf);
	}
	assert_non_null(strstr(buf, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}"));
	if (!read_until(h, buf, sizeof buf, "berth_")) {
		print_log(f);
		fail_msg("no metrics over HTTP; got '%s'", buf);
	}
	assert_memory_equal(buf, "HTTP/1.1 200", 12);
	assert_true(read_until(u, buf, sizeof buf, "\"id\":7"));
	close(t);
	close(h);
	close(u);
	assert_int_equal(stop(f), 0);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
}

static void activation__passed_sockets__are_not_inherited_by_tools(void **state)
{
	struct fixture *f = *state;
	char tools[320], path[400], buf[65536], inode[64];
	const char *extra[] = {"--tools", tools, NULL};
	int lfd = listen_unix(f->sock), c;
	struct stat st;
	FILE *m;

	/* A tool that answers with the descriptors it holds besides its
	 * stdin, stdout and stderr. */
	snprintf(tools, sizeof tools, "%s/tools", f->dir);
	assert_int_equal(mkdir(tools, 0700), 0);
	snprintf(path, sizeof path, "%s/fds.json", tools);
	m = fopen(path, "w");
	assert_non_null(m);
	fputs("{\"id\": \"fds\", \"description\": \"lists its descriptors\", "
	      "\"command\": [\"./fds.sh\"]}\n", m);
	fclose(m);
	snprintf(path, sizeof path, "%s/fds.sh", tools);
	m = fopen(path, "w");
	assert_non_null(m);
	fputs("#!/bin/sh\n"
	      "read -r line\n"
	      "fds=$(ls -l /proc/$$/fd | sed -n 's/.*-> //p' | tr '\\n' ' ')\n"
	      "printf '{\"output\":{\"fds\":\"%s\"}}\\n' \"$fds\"\n", m);
	fclose(m);
	assert_int_equal(chmod(path, 0700), 0);

	start(f, &lfd, 1, "socket", 0, extra);
	c = connect_unix(f->sock);
	send_all(c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"jobs/submit\","
		    "\"params\":{\"tool\":\"fds\",\"input\":{}}}\n");
	assert_true(read_until(c, buf, sizeof buf, "\"id\":1"));
	{
		/* The job's id, to wait for it. */
		char *id = strstr(buf, "\"id\":\"");
		char wait[256];

		assert_non_null(id);
		id += 6;
		*strchr(id, '"') = '\0';
		snprintf(wait, sizeof wait, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":"
			 "\"jobs/wait\",\"params\":{\"id\":\"%s\"}}\n", id);
		send_all(c, wait);
	}
	if (!read_until(c, buf, sizeof buf, "\"id\":2")) {
		print_log(f);
		fail_msg("the job did not end; got '%s'", buf);
	}
	if (!strstr(buf, "\"status\":\"completed\"")) {
		print_log(f);
		fail_msg("the job did not complete: %s", buf);
	}
	/* What the tool's shell holds ("socket:[INODE]", "pipe:[...]", paths)
	 * must not include the passed socket. */
	assert_int_equal(fstat(lfd, &st), 0);
	snprintf(inode, sizeof inode, "socket:[%lu]", (unsigned long)st.st_ino);
	assert_non_null(strstr(buf, "\"fds\":\""));
	if (strstr(buf, inode))
		fail_msg("the tool holds the passed socket %s: %s", inode, buf);
	close(c);
	assert_int_equal(stop(f), 0);
	close(lfd);
}

static void activation__socket_under_an_unknown_name__is_refused_naming_it(void **state)
{
	struct fixture *f = *state;
	int fds[2], port;

	fds[0] = listen_unix(f->sock);
	fds[1] = listen_tcp(&port);
	start(f, fds, 2, "socket:metrics", 0, NULL);
	assert_int_equal(wait_exit(f), 1);
	assert_true(log_has(f, "descriptor 4"));
	assert_true(log_has(f, "named 'metrics', which berthd does not know"));

	/* Names that do not add up are refused too. */
	start(f, fds, 2, "socket", 0, NULL);
	assert_int_equal(wait_exit(f), 1);
	assert_true(log_has(f, "LISTEN_FDNAMES names 1 sockets, LISTEN_FDS says 2"));

	/* A Unix socket named as the TCP one. */
	start(f, fds, 1, "listen", 0, NULL);
	assert_int_equal(wait_exit(f), 1);
	assert_true(log_has(f, "named 'listen', which is the TCP socket (--listen), "
			    "but it is a Unix socket"));
	close(fds[0]);
	close(fds[1]);
}

static void activation__variables_for_another_pid__are_ignored(void **state)
{
	struct fixture *f = *state;
	const char *extra[] = {"--socket", f->sock, NULL};
	int other = listen_tcp(&(int){0}), c;
	char buf[4096];

	/* LISTEN_PID names another process: berthd binds --socket itself,
	 * as if nothing had been passed. */
	start(f, &other, 1, "socket", 1, extra);
	for (int waited = 0; waited < READ_TIMEOUT_MS; waited += 10) {
		struct stat st;

		if (lstat(f->sock, &st) == 0)
			break;
		assert_int_equal(waitpid(f->pid, NULL, WNOHANG), 0);
		sleep_ms(10);
	}
	/* The socket file appears at bind, a moment before listen. */
	for (int tries = 0; (c = socket(AF_UNIX, SOCK_STREAM, 0)) >= 0; tries++) {
		struct sockaddr_un sun = {.sun_family = AF_UNIX};

		unix_addr(&sun, f->sock);
		if (connect(c, (struct sockaddr *)&sun, sizeof sun) == 0)
			break;
		close(c);
		assert_true(tries < READ_TIMEOUT_MS / 10);
		sleep_ms(10);
	}
	send_all(c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
	assert_true(read_until(c, buf, sizeof buf, "\"id\":1"));
	close(c);
	assert_int_equal(stop(f), 0);
	assert_false(log_has(f, "socket activation:"));
	close(other);
}

static void activation__notify_socket__hears_ready_once_berthd_serves(void **state)
{
	struct fixture *f = *state;
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char path[320], buf[256];
	int lfd = listen_unix(f->sock), n, c;
	int ns = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct pollfd p = {.events = POLLIN};

	snprintf(path, sizeof path, "%s/notify", f->dir);
	unix_addr(&sun, path);
	assert_true(ns >= 0);
	assert_int_equal(bind(ns, (struct sockaddr *)&sun, sizeof sun), 0);
	setenv("NOTIFY_SOCKET", path, 1);
	start(f, &lfd, 1, "socket", 0, NULL);
	unsetenv("NOTIFY_SOCKET");
	p.fd = ns;
	assert_int_equal(poll(&p, 1, READ_TIMEOUT_MS), 1);
	n = (int)recv(ns, buf, sizeof buf - 1, 0);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_string_equal(buf, "READY=1");
	/* Ready means serving: a request now is answered. */
	c = connect_unix(f->sock);
	send_all(c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
	assert_true(read_until(c, buf, sizeof buf, "\"id\":1"));
	close(c);
	assert_int_equal(stop(f), 0);
	close(ns);
	close(lfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(activation__request_sent_before_berthd_runs__is_answered_from_the_backlog, setup, teardown),
		cmocka_unit_test_setup_teardown(activation__tcp_and_http_sockets__are_served_by_their_names, setup, teardown),
		cmocka_unit_test_setup_teardown(activation__passed_sockets__are_not_inherited_by_tools, setup, teardown),
		cmocka_unit_test_setup_teardown(activation__socket_under_an_unknown_name__is_refused_naming_it, setup, teardown),
		cmocka_unit_test_setup_teardown(activation__variables_for_another_pid__are_ignored, setup, teardown),
		cmocka_unit_test_setup_teardown(activation__notify_socket__hears_ready_once_berthd_serves, setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests_name("activation", tests, NULL, NULL);
}

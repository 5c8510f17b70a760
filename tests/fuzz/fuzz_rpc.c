/*
 * fuzz_rpc.c: the socket server, the JSON-RPC dispatcher and every method
 * behind it, against a real store on a temporary database.
 *
 * A whole daemon (berth_main with the built-in tools noop, sleep and fail)
 * runs on a thread of the fuzzing process, so that the fuzzer sees the
 * coverage of the framer, the dispatcher, the params checks, the worker
 * and the store. Each input is one connection: its bytes are written as a
 * client would write them (newlines and all), the replies are read while
 * writing so the server never blocks on an unread client, then the client
 * half-closes and reads until the server closes or goes quiet. The
 * daemon must stay up: after every input a fresh connection must still be
 * answered by ping.
 *
 * The daemon is stopped (SIGTERM, as berthd is) and its thread joined
 * before the process exits. exit() runs libuv's library destructor,
 * uv_library_shutdown, which joins and destroys the thread pool; a daemon
 * still running beside it (a job starting the pool, or queueing work on
 * it) made that destructor read thread ids that were not written yet
 * (SIGSEGV) or lock a destroyed mutex (a silent SIGABRT from inside
 * libuv). On a loaded machine the daemon lags behind the client, so that
 * is when the replay failed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "berth/berth.h"
#include "worker/builtin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* How long a connection may stay quiet after the input was written before
 * it is dropped (a jobs/wait or a subscription keeps it open). */
#define QUIET_MS 30

/* How long the daemon may take to stop at exit: it cancels running jobs
 * and waits out its shutdown grace. */
#define STOP_SECONDS 30

static char dir[48];
static char sock_path[96];
static char db_path[128];
static bool started;
static pthread_t daemon_thread;
static atomic_bool stopping;

/* daemon_main runs berth_main; it returns only after stop asked it to. */
static void *daemon_main(void *arg)
{
	size_t n;
	const struct berth_tool *const *tools = worker_builtin_tools(&n);
	char *argv[] = {
		"fuzz-rpc", "--db", db_path, "--socket", sock_path,
		"--workers", "2", "--quiet", NULL,
	};
	int status = berth_main(8, argv, tools, n);

	if (!atomic_load(&stopping) || status != 0) {
		fprintf(stderr, "fuzz-rpc: the daemon stopped (status %d)\n",
			status);
		abort();
	}
	return NULL;
}

/* remove_dir deletes the temporary folder and what the daemon left in it
 * (the database and its -wal and -shm files, the socket). */
static void remove_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[sizeof dir + 256];

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

/* stop runs at exit (atexit, registered by start): it stops the daemon as
 * SIGTERM stops berthd and waits for its thread, so that no libuv call of
 * the daemon overlaps libuv's destructor (see the top of this file). Every
 * input has been answered by ping by then, so the daemon's signal watchers
 * are started. */
static void stop(void)
{
	struct timespec deadline;
	int rc;

	atomic_store(&stopping, true);
	raise(SIGTERM);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += STOP_SECONDS;
	rc = pthread_timedjoin_np(daemon_thread, NULL, &deadline);
	if (rc != 0) {
		fprintf(stderr, "fuzz-rpc: the daemon did not stop: %s\n",
			strerror(rc));
		abort();
	}
	remove_dir();
}

static int connect_sock(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void start(void)
{
	char tmpl[] = "/tmp/berth-fuzz-rpc-XXXXXX";

	if (!mkdtemp(tmpl))
		abort();
	snprintf(dir, sizeof dir, "%s", tmpl);
	snprintf(sock_path, sizeof sock_path, "%s/s", dir);
	snprintf(db_path, sizeof db_path, "%s/berth.db", dir);
	signal(SIGPIPE, SIG_IGN);
	if (pthread_create(&daemon_thread, NULL, daemon_main, NULL) != 0)
		abort();
	for (int i = 0; i < 3000; i++) {
		int fd = connect_sock();

		if (fd >= 0) {
			close(fd);
			started = true;
			if (atexit(stop) != 0)
				abort();
			return;
		}
		usleep(10000);
	}
	fprintf(stderr, "fuzz-rpc: the daemon did not start\n");
	abort();
}

/* talk writes data to fd while draining replies, half-closes, and reads
 * until the server closes or stays quiet for QUIET_MS. */
static void talk(int fd, const uint8_t *data, size_t size)
{
	char buf[65536];
	size_t off = 0;
	bool shut = false;

	fcntl(fd, F_SETFL, O_NONBLOCK);
	for (;;) {
		struct pollfd p = {fd, POLLIN | (off < size ? POLLOUT : 0), 0};
		int n = poll(&p, 1, off < size ? 1000 : QUIET_MS);

		if (n <= 0)
			return; /* quiet: drop the connection mid-request */
		if (p.revents & POLLIN) {
			ssize_t r = read(fd, buf, sizeof buf);

			if (r == 0 || (r < 0 && errno != EAGAIN))
				return;
		} else if (p.revents & (POLLHUP | POLLERR)) {
			return;
		}
		if (off < size && (p.revents & POLLOUT)) {
			ssize_t w = write(fd, data + off, size - off);

			if (w < 0 && errno != EAGAIN)
				return;
			if (w > 0)
				off += (size_t)w;
		}
		if (off == size && !shut) {
			shutdown(fd, SHUT_WR);
			shut = true;
		}
	}
}

static void ping(void)
{
	static const char req[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
	char buf[256];
	size_t got = 0;
	int fd = connect_sock();

	if (fd < 0 || write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1))
		goto dead;
	while (got < sizeof buf - 1) {
		struct pollfd p = {fd, POLLIN, 0};
		ssize_t r;

		if (poll(&p, 1, 10000) <= 0)
			goto dead;
		r = read(fd, buf + got, sizeof buf - 1 - got);
		if (r <= 0)
			goto dead;
		got += (size_t)r;
		if (memchr(buf, '\n', got))
			break;
	}
	buf[got] = '\0';
	if (!strstr(buf, "\"result\""))
		goto dead;
	close(fd);
	return;
dead:
	fprintf(stderr, "fuzz-rpc: the daemon no longer answers ping\n");
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd;

	if (!started)
		start();
	fd = connect_sock();
	/* Connections of earlier inputs may still be closing on a loaded
	 * machine: wait for up to 5 s, and say why before giving up. */
	for (int i = 0; fd < 0 && i < 500; i++) {
		usleep(10000);
		fd = connect_sock();
	}
	if (fd < 0) {
		fprintf(stderr, "fuzz-rpc: cannot connect to the daemon: %s\n",
			strerror(errno));
		abort();
	}
	talk(fd, data, size);
	close(fd);
	ping();
	return 0;
}

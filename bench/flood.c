/*
 * flood.c: berth-flood, what strangers can do to berthd before they log
 * in (docs/SECURITY.md). It starts a berthd of its own with --listen and
 * --http, lets the attacks of issue 17 loose on it at once, each in a
 * thread of its own, and measures meanwhile what the owner sees: the
 * latency of a ping on the Unix socket every 10 ms (and on a TCP
 * connection that logged in before the flood), whether a new TCP client
 * with the token still gets in, whether an HTTP request with the token is
 * served, and berthd's memory and descriptors.
 *
 * The attacks:
 *   idle   TCP connections that never log in, as many as --idle, and a new
 *          one for each that berthd closes (so a berthd that evicts is
 *          flooded with connections as fast as one thread can make them)
 *   batch  lines of --batch-mb MB holding a batch of {} elements, sent over
 *          TCP before server/auth by --batchers connections, over and over
 *   drip   --drippers HTTP connections each sending a byte of a request
 *          head every second, never finishing it; a new one for each that
 *          is closed
 *   guess  --guessers connections sending server/auth with wrong tokens as
 *          fast as the answers come
 *
 * It is a benchmark, not a test: it prints figures and asserts nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include "berth/client.h"
#include "stats.h"

extern char **environ;

struct opts {
	const char *berthd;
	const char *dir;
	double duration; /* seconds of flood */
	int idle, batchers, drippers, guessers;
	double batch_mb;
	int batches;     /* per batcher, 0: as many as fit */
};

static struct opts o = {
	.berthd = "build-bench/berthd/berthd",
	.dir = "/tmp/berth-flood",
	.duration = 20,
	.batch_mb = 6,
};

static int tcp_port, http_port;
static char token[65];
static atomic_bool stop;

/* What the attacks did. */
static atomic_long idle_opened, idle_closed, batches_sent, batch_replies;
static atomic_long batch_reply_bytes, drips_sent, drippers_closed;
static atomic_long guesses_checked, guesses_throttled, guess_conns;

/* ---- sockets ------------------------------------------------------------ */

static int free_port(void)
{
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof sin;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&sin, sizeof sin) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sin, &len) == 0)
		port = ntohs(sin.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* tcp_connect returns a socket connected to 127.0.0.1:port, or -1. */
static int tcp_connect(int port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sin, sizeof sin) < 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return fd;
}

static int send_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

/* read_line reads a line from fd into buf (NUL-ended, without its
 * newline; a longer line is cut, and the rest of it read and dropped).
 * It takes nothing after the line from the socket. Returns the line's
 * full length and its newline, 0 at EOF, or -1 on time-out or error. */
static ssize_t read_line(int fd, char *buf, size_t size, int timeout_ms)
{
	char chunk[65536];
	size_t n = 0;

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t r;
		char *nl;
		size_t take;

		if (poll(&p, 1, timeout_ms) != 1)
			return -1;
		r = recv(fd, chunk, sizeof chunk, MSG_PEEK);
		if (r <= 0)
			return r == 0 || errno == ECONNRESET ? 0 : -1;
		nl = memchr(chunk, '\n', (size_t)r);
		take = nl ? (size_t)(nl - chunk) + 1 : (size_t)r;
		if (recv(fd, chunk, take, 0) != (ssize_t)take)
			return -1;
		for (size_t i = 0; i < take; i++)
			if (n + i + 1 < size && chunk[i] != '\n')
				buf[n + i] = chunk[i];
		n += take;
		if (nl) {
			buf[n - 1 < size ? n - 1 : size - 1] = '\0';
			return (ssize_t)n;
		}
	}
}

/* ---- berthd ------------------------------------------------------------- */

static pid_t daemon_start(void)
{
	char db[600], sock[600], log[600], tok[600], listen[64], http[64];
	const char *argv[20];
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int n = 0, fd;
	FILE *f;

	snprintf(db, sizeof db, "%s/berth.db", o.dir);
	snprintf(sock, sizeof sock, "%s/berth.sock", o.dir);
	snprintf(log, sizeof log, "%s/berthd.log", o.dir);
	snprintf(tok, sizeof tok, "%s/token", o.dir);
	f = fopen(tok, "w");
	if (!f)
		return -1;
	fprintf(f, "%s\n", token);
	fclose(f);
	chmod(tok, 0600);
	tcp_port = free_port();
	http_port = free_port();
	snprintf(listen, sizeof listen, "127.0.0.1:%d", tcp_port);
	snprintf(http, sizeof http, "127.0.0.1:%d", http_port);
	argv[n++] = o.berthd;
	argv[n++] = "--db";
	argv[n++] = db;
	argv[n++] = "--socket";
	argv[n++] = sock;
	argv[n++] = "--listen";
	argv[n++] = listen;
	argv[n++] = "--token-file";
	argv[n++] = tok;
	argv[n++] = "--http";
	argv[n++] = http;
	argv[n] = NULL;
	fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd, 1);
	posix_spawn_file_actions_adddup2(&fa, fd, 2);
	if (posix_spawn(&pid, o.berthd, &fa, NULL, (char **)argv, environ)) {
		fprintf(stderr, "berth-flood: cannot start %s\n", o.berthd);
		pid = -1;
	}
	posix_spawn_file_actions_destroy(&fa);
	close(fd);
	for (int i = 0; pid > 0 && i < 3000; i++) {
		struct berth_client *c = berth_client_connect(sock);

		if (c) {
			berth_client_close(c);
			return pid;
		}
		usleep(10000);
	}
	return -1;
}

static int count_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* ---- the attacks -------------------------------------------------------- */

/* idle keeps o.idle strangers connected, a new one for each closed. */
static void *idle_thread(void *arg)
{
	int ep = epoll_create1(EPOLL_CLOEXEC), open_now = 0;
	struct epoll_event evs[256];

	while (!stop) {
		while (open_now < o.idle && !stop) {
			int fd = tcp_connect(tcp_port);
			struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP};

			if (fd < 0) {
				usleep(1000);
				break;
			}
			ev.data.fd = fd;
			epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
			open_now++;
			idle_opened++;
		}
		int n = epoll_wait(ep, evs, 256, 100);

		for (int i = 0; i < n; i++) {
			char buf[512];

			/* An answer, or the end: a closed one is replaced. */
			if (read(evs[i].data.fd, buf, sizeof buf) <= 0 ||
			    (evs[i].events & (EPOLLRDHUP | EPOLLHUP))) {
				close(evs[i].data.fd);
				open_now--;
				idle_closed++;
			}
		}
	}
	close(ep);
	return arg;
}

/* batch sends a batch of {} before server/auth, reads its answer, and
 * goes on with a new connection. */
static void *batch_thread(void *arg)
{
	size_t n = (size_t)(o.batch_mb * 1e6);
	char *line = malloc(n + 2), *reply = malloc(256);

	/* "[{},{},...,{}]\n": k elements take 3k + 1 bytes and the newline. */
	n = (n - 1) / 3 * 3 + 1;
	line[0] = '[';
	for (size_t i = 1; i < n; i += 3)
		memcpy(line + i, "{},", 3);
	line[n - 1] = ']';
	line[n] = '\n';
	for (int k = 0; !stop && (!o.batches || k < o.batches); k++) {
		int fd = tcp_connect(tcp_port);
		ssize_t got;

		if (fd < 0) {
			usleep(10000);
			continue;
		}
		/* A berthd that closes the connection after the first 64
		 * KiB cuts the send short; its answer is read all the same. */
		batches_sent++;
		send_all(fd, line, n + 1);
		got = read_line(fd, reply, 256, 120000);
		if (got > 0) {
			batch_replies++;
			batch_reply_bytes += got;
		}
		close(fd);
	}
	free(line);
	free(reply);
	return arg;
}

/* drip keeps o.drippers HTTP connections that send a byte of a head every
 * second and never finish it. */
static void *drip_thread(void *arg)
{
	static const char head[] = "GET /api/info HTTP/1.1\r\nHost: x\r\nX-Drip: ";
	int *fds = calloc((size_t)o.drippers, sizeof *fds);
	size_t *sent = calloc((size_t)o.drippers, sizeof *sent);

	for (int i = 0; i < o.drippers; i++)
		fds[i] = -1;
	while (!stop) {
		uint64_t next = stats_now() + 1000000000u;

		for (int i = 0; i < o.drippers && !stop; i++) {
			char ch;

			if (fds[i] >= 0) {
				struct pollfd p = {.fd = fds[i], .events = POLLIN};
				char buf[512];

				if (poll(&p, 1, 0) == 1 &&
				    read(fds[i], buf, sizeof buf) <= 0) {
					close(fds[i]);
					fds[i] = -1;
					drippers_closed++;
				}
			}
			if (fds[i] < 0) {
				fds[i] = tcp_connect(http_port);
				sent[i] = 0;
				if (fds[i] < 0)
					continue;
			}
			ch = sent[i] < sizeof head - 1 ? head[sent[i]] : 'a';
			if (send(fds[i], &ch, 1, MSG_NOSIGNAL) == 1) {
				sent[i]++;
				drips_sent++;
			}
		}
		stats_sleep_until(next);
	}
	for (int i = 0; i < o.drippers; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
	free(sent);
	return arg;
}

/* guess sends server/auth with wrong tokens as fast as answers come. */
static void *guess_thread(void *arg)
{
	char line[256], reply[512];
	long k = 0;

	while (!stop) {
		int fd = tcp_connect(tcp_port);

		if (fd < 0) {
			usleep(1000);
			continue;
		}
		guess_conns++;
		while (!stop) {
			int len = snprintf(line, sizeof line,
					   "{\"jsonrpc\":\"2.0\",\"id\":%ld,"
					   "\"method\":\"server/auth\",\"params\":"
					   "{\"token\":\"guess-%ld\"}}\n", k, k);

			k++;
			if (send_all(fd, line, (size_t)len) < 0 ||
			    read_line(fd, reply, sizeof reply, 30000) <= 0)
				break;
			if (strstr(reply, "wrong token"))
				guesses_checked++;
			else if (strstr(reply, "too many failed"))
				guesses_throttled++;
		}
		close(fd);
	}
	return arg;
}

/* ---- what the owner sees ------------------------------------------------ */

/* tcp_login connects with the token; returns the socket, or -1. */
static int tcp_login(int timeout_ms)
{
	char line[256], reply[512];
	int fd = tcp_connect(tcp_port);
	int len = snprintf(line, sizeof line,
			   "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":"
			   "\"server/auth\",\"params\":{\"token\":\"%s\"}}\n",
			   token);

	if (fd < 0)
		return -1;
	if (send_all(fd, line, (size_t)len) < 0 ||
	    read_line(fd, reply, sizeof reply, timeout_ms) <= 0 ||
	    !strstr(reply, "\"result\"")) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ping_fd pings over a raw connection; returns its latency in ns, or 0. */
static uint64_t ping_fd(int fd)
{
	static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
				   "\"ping\"}\n";
	char reply[512];
	uint64_t t0 = stats_now();

	if (send_all(fd, ping, sizeof ping - 1) < 0 ||
	    read_line(fd, reply, sizeof reply, 10000) <= 0 ||
	    !strstr(reply, "\"result\""))
		return 0;
	return stats_now() - t0;
}

/* http_status sends a GET with the token and returns its status, or -1. */
static int http_status(uint64_t *ns)
{
	char rq[256], buf[512];
	int fd = tcp_connect(http_port), status = -1;
	uint64_t t0 = stats_now();
	int len = snprintf(rq, sizeof rq, "GET /api/info HTTP/1.1\r\nHost: x\r\n"
			   "Authorization: Bearer %s\r\nConnection: close\r\n"
			   "\r\n", token);

	if (fd < 0)
		return -1;
	if (send_all(fd, rq, (size_t)len) == 0 &&
	    read_line(fd, buf, sizeof buf, 10000) > 0)
		status = atoi(buf + 9);
	*ns = stats_now() - t0;
	close(fd);
	return status;
}

static void print_summary(const char *what, struct stats_sample *s,
			  long failed)
{
	struct stats_summary sum;

	stats_summarize(s, &sum);
	printf("%-34s p50 %7.2f ms  p99 %7.2f ms  max %8.2f ms  (%zu, %ld "
	       "failed)\n", what, sum.p50, sum.p99, sum.max, sum.n, failed);
}

/* ---- options ------------------------------------------------------------ */

static const char usage[] =
	"Usage: berth-flood [OPTION]...\n"
	"Start berthd (--listen and --http) and flood it with strangers while\n"
	"the owner pings it; print what the owner saw (docs/SECURITY.md).\n"
	"\n"
	"  --berthd PATH     the daemon (default build-bench/berthd/berthd)\n"
	"  --dir DIR         its database, socket, token and log (default\n"
	"                    /tmp/berth-flood; made if missing)\n"
	"  --duration S      seconds of flood (default 20)\n"
	"  --idle N          strangers kept connected over TCP (default 0)\n"
	"  --batchers N      connections sending batches before login (0)\n"
	"  --batch-mb MB     the size of each batch line (default 6)\n"
	"  --batches N       batches per batcher (default: until the end)\n"
	"  --drippers N      HTTP connections dripping a head (default 0)\n"
	"  --guessers N      connections guessing the token (default 0)\n"
	"  --all             --idle 16384 --batchers 2 --drippers 1024\n"
	"                    --guessers 2\n";

static int parse(int argc, char **argv)
{
	static const struct option opts[] = {
		{"berthd", required_argument, NULL, 'b'},
		{"dir", required_argument, NULL, 'd'},
		{"duration", required_argument, NULL, 't'},
		{"idle", required_argument, NULL, 'i'},
		{"batchers", required_argument, NULL, 'B'},
		{"batch-mb", required_argument, NULL, 'm'},
		{"batches", required_argument, NULL, 'n'},
		{"drippers", required_argument, NULL, 'D'},
		{"guessers", required_argument, NULL, 'g'},
		{"all", no_argument, NULL, 'a'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'b': o.berthd = optarg; break;
		case 'd': o.dir = optarg; break;
		case 't': o.duration = atof(optarg); break;
		case 'i': o.idle = atoi(optarg); break;
		case 'B': o.batchers = atoi(optarg); break;
		case 'm': o.batch_mb = atof(optarg); break;
		case 'n': o.batches = atoi(optarg); break;
		case 'D': o.drippers = atoi(optarg); break;
		case 'g': o.guessers = atoi(optarg); break;
		case 'a':
			o.idle = 16384;
			o.batchers = 2;
			o.drippers = 1024;
			o.guessers = 2;
			break;
		case 'h':
			fputs(usage, stdout);
			return 1;
		default:
			fputs("Try 'berth-flood --help'.\n", stderr);
			return 2;
		}
	}
	if (o.duration <= 0 || o.idle < 0 || o.batchers < 0 || o.drippers < 0 ||
	    o.guessers < 0 || o.batch_mb <= 0) {
		fputs("berth-flood: figures must be positive\n", stderr);
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct stats_sample unix_ping = {0}, tcp_ping = {0}, logins = {0};
	struct stats_sample http = {0}, unix_new = {0};
	long unix_failed = 0, tcp_failed = 0, login_failed = 0, http_bad = 0;
	long unix_new_failed = 0;
	long rss, hwm, rss_max = 0, peak_fds = 0;
	pthread_t th[64];
	int nth = 0, rc, owner_tcp;
	char sock[600];
	struct berth_client *owner;
	struct rlimit rl;
	uint64_t t_end, next_login, next_http;
	pid_t pid;

	rc = parse(argc, argv);
	if (rc)
		return rc == 1 ? 0 : rc;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	mkdir(o.dir, 0700);
	{
		FILE *r = fopen("/dev/urandom", "r");
		unsigned char raw[32];

		if (!r || fread(raw, 1, sizeof raw, r) != sizeof raw)
			return 1;
		fclose(r);
		for (int i = 0; i < 32; i++)
			snprintf(token + 2 * i, 3, "%02x", raw[i]);
	}
	pid = daemon_start();
	if (pid <= 0) {
		fprintf(stderr, "berth-flood: berthd did not start; see "
			"%s/berthd.log\n", o.dir);
		return 1;
	}
	snprintf(sock, sizeof sock, "%s/berth.sock", o.dir);
	owner = berth_client_connect(sock);
	owner_tcp = tcp_login(10000);
	if (!owner || owner_tcp < 0) {
		fprintf(stderr, "berth-flood: the owner cannot connect\n");
		kill(pid, SIGKILL);
		return 1;
	}
	stats_rss_kib(pid, &rss, &hwm);
	printf("berthd %s, pid %d: %ld KiB resident before the flood\n",
	       o.berthd, (int)pid, rss);
	printf("flood: %d idle strangers, %d batchers of %.1f MB, %d "
	       "drippers, %d guessers, for %.0f s\n", o.idle, o.batchers,
	       o.batch_mb, o.drippers, o.guessers, o.duration);
	fflush(stdout);
	for (int i = 0; i < (o.idle ? 1 : 0); i++)
		pthread_create(&th[nth++], NULL, idle_thread, NULL);
	for (int i = 0; i < o.batchers && nth < 60; i++)
		pthread_create(&th[nth++], NULL, batch_thread, NULL);
	if (o.drippers)
		pthread_create(&th[nth++], NULL, drip_thread, NULL);
	for (int i = 0; i < o.guessers && nth < 62; i++)
		pthread_create(&th[nth++], NULL, guess_thread, NULL);

	t_end = stats_now() + (uint64_t)(o.duration * 1e9);
	next_login = next_http = stats_now();
	for (uint64_t t = stats_now(); t < t_end; t = stats_now()) {
		json_t *res = NULL, *err = NULL;
		uint64_t t0 = stats_now(), d;
		int n;

		/* The owner on the Unix socket, every 10 ms. */
		if (berth_client_call(owner, "ping", NULL, 10000, &res, &err) == 0)
			stats_add(&unix_ping, stats_now() - t0);
		else
			unix_failed++;
		json_decref(res);
		json_decref(err);
		/* A TCP client that logged in before the flood. */
		d = ping_fd(owner_tcp);
		if (d)
			stats_add(&tcp_ping, d);
		else
			tcp_failed++;
		/* Once a second, the owner connects anew (as each berth
		 * command does), a new TCP client with the token logs in,
		 * and an HTTP request with the token is made. */
		if (stats_now() >= next_login) {
			struct berth_client *fresh;
			int fd;

			next_login += 1000000000u;
			t0 = stats_now();
			fresh = berth_client_connect(sock);
			res = err = NULL;
			if (fresh && berth_client_call(fresh, "ping", NULL, 10000,
						       &res, &err) == 0)
				stats_add(&unix_new, stats_now() - t0);
			else
				unix_new_failed++;
			json_decref(res);
			json_decref(err);
			if (fresh)
				berth_client_close(fresh);
			t0 = stats_now();
			fd = tcp_login(10000);
			if (fd >= 0) {
				stats_add(&logins, stats_now() - t0);
				close(fd);
			} else {
				login_failed++;
			}
		}
		if (http_port && stats_now() >= next_http) {
			next_http += 1000000000u;
			if (http_status(&d) == 200)
				stats_add(&http, d);
			else
				http_bad++;
		}
		if (stats_rss_kib(pid, &rss, &hwm) == 0 && rss > rss_max)
			rss_max = rss;
		n = count_fds(pid);
		if (n > peak_fds)
			peak_fds = n;
		stats_sleep_until(t + 10000000u);
	}
	stop = true;
	for (int i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	stats_rss_kib(pid, &rss, &hwm);

	print_summary("ping, Unix socket, every 10 ms", &unix_ping, unix_failed);
	print_summary("ping, TCP, logged in before", &tcp_ping, tcp_failed);
	print_summary("a new Unix client's ping, 1/s", &unix_new,
		      unix_new_failed);
	print_summary("a new TCP login, once a second", &logins, login_failed);
	print_summary("GET /api/info with the token, 1/s", &http, http_bad);
	printf("berthd: %ld KiB resident at most (VmHWM %ld KiB), %ld "
	       "descriptors at most\n", rss_max, hwm, peak_fds);
	if (o.idle)
		printf("idle: %ld strangers connected, %ld closed by berthd\n",
		       (long)idle_opened, (long)idle_closed);
	if (o.batchers)
		printf("batch: %ld lines of %.1f MB begun, %ld answered (%ld "
		       "bytes of answers)\n", (long)batches_sent, o.batch_mb,
		       (long)batch_replies, (long)batch_reply_bytes);
	if (o.drippers)
		printf("drip: %ld bytes dripped, %ld dripping connections "
		       "closed by berthd\n", (long)drips_sent,
		       (long)drippers_closed);
	if (o.guessers)
		printf("guess: %ld connections, %ld tokens checked (%.1f/s), "
		       "%ld refused unchecked\n", (long)guess_conns,
		       (long)guesses_checked,
		       (double)guesses_checked / o.duration,
		       (long)guesses_throttled);
	berth_client_close(owner);
	close(owner_tcp);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	stats_free(&unix_ping);
	stats_free(&tcp_ping);
	stats_free(&logins);
	stats_free(&http);
	stats_free(&unix_new);
	return 0;
}

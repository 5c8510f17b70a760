/*
 * beanstalk.c: the beanstalkd text protocol over one loopback TCP
 * connection (protocol.txt of beanstalkd: "put <pri> <delay> <ttr>
 * <bytes>\r\n<data>\r\n" answered "INSERTED <id>\r\n", and so on).
 *
 * Replies are read through one buffer. Its size only bounds a reply line
 * and the part of a reserved body held at once: a body longer than the
 * buffer is read and dropped in pieces, so any job size works.
 */
#include "beanstalk.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#define BEANSTALK_BUF 65536
#define BEANSTALK_LINE 256 /* the longest reply line the benchmark reads */

struct beanstalk {
	int fd;
	size_t start, end; /* unread bytes are buf[start, end) */
	char line[BEANSTALK_LINE];
	char buf[BEANSTALK_BUF];
};

struct beanstalk *beanstalk_connect(int port)
{
	struct sockaddr_in sa = {
		.sin_family = AF_INET,
		.sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	struct beanstalk *b = calloc(1, sizeof *b);
	int one = 1;

	if (!b)
		return NULL;
	b->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (b->fd < 0) {
		free(b);
		return NULL;
	}
	/* One small request per round trip: Nagle would add delay to every
	 * put that follows an unacknowledged one. */
	setsockopt(b->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(b->fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int e = errno;

		close(b->fd);
		free(b);
		errno = e;
		return NULL;
	}
	return b;
}

void beanstalk_close(struct beanstalk *b)
{
	if (!b)
		return;
	close(b->fd);
	free(b);
}

int beanstalk_fd(const struct beanstalk *b)
{
	return b->fd;
}

const char *beanstalk_last_reply(const struct beanstalk *b)
{
	return b->line;
}

/* send_all writes len bytes of p. Returns 0 or a negative errno. */
static int send_all(struct beanstalk *b, const void *p, size_t len)
{
	const char *s = p;

	while (len > 0) {
		ssize_t n = send(b->fd, s, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		s += n;
		len -= (size_t)n;
	}
	return 0;
}

/* fill reads more bytes into the buffer, waiting up to timeout_ms (<0:
 * forever). Returns 0, -ETIMEDOUT, -ECONNRESET or another negative errno. */
static int fill(struct beanstalk *b, int timeout_ms)
{
	struct pollfd pfd = { .fd = b->fd, .events = POLLIN };
	ssize_t n;
	int rc;

	if (b->start > 0) {
		memmove(b->buf, b->buf + b->start, b->end - b->start);
		b->end -= b->start;
		b->start = 0;
	}
	if (b->end == sizeof b->buf)
		return -EPROTO;
	/* A time-out of 0 asks only for what is there (one read that does
	 * not wait) and one of -1 for the next bytes whenever they come (one
	 * read that waits): only a finite time-out needs a poll first. */
	if (timeout_ms > 0) {
		do
			rc = poll(&pfd, 1, timeout_ms);
		while (rc < 0 && errno == EINTR);
		if (rc < 0)
			return -errno;
		if (rc == 0)
			return -ETIMEDOUT;
	}
	do
		n = recv(b->fd, b->buf + b->end, sizeof b->buf - b->end,
			 timeout_ms == 0 ? MSG_DONTWAIT : 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT
							       : -errno;
	if (n == 0)
		return -ECONNRESET;
	b->end += (size_t)n;
	return 0;
}

/* read_line reads one reply line into b->line, without its "\r\n". */
static int read_line(struct beanstalk *b, int timeout_ms)
{
	for (;;) {
		char *nl = memchr(b->buf + b->start, '\n', b->end - b->start);

		if (nl) {
			size_t len = (size_t)(nl - (b->buf + b->start));

			if (len > 0 && nl[-1] == '\r')
				len--;
			if (len >= sizeof b->line)
				len = sizeof b->line - 1;
			memcpy(b->line, b->buf + b->start, len);
			b->line[len] = '\0';
			b->start = (size_t)(nl - b->buf) + 1;
			return 0;
		}
		int rc = fill(b, timeout_ms);

		if (rc < 0)
			return rc;
	}
}

/* skip drops len bytes of input (a reserved body and its "\r\n"). */
static int skip(struct beanstalk *b, size_t len)
{
	while (len > 0) {
		size_t have = b->end - b->start;

		if (have == 0) {
			int rc = fill(b, -1);

			if (rc < 0)
				return rc;
			continue;
		}
		if (have > len)
			have = len;
		b->start += have;
		len -= have;
	}
	return 0;
}

/* command sends a one-line command and reads its reply line; returns 0
 * when the reply starts with want, else -EPROTO. */
static int command(struct beanstalk *b, const char *cmd, const char *want)
{
	char out[BEANSTALK_LINE];
	int n = snprintf(out, sizeof out, "%s\r\n", cmd);
	int rc;

	if (n < 0 || (size_t)n >= sizeof out)
		return -EINVAL;
	rc = send_all(b, out, (size_t)n);
	if (rc == 0)
		rc = read_line(b, -1);
	if (rc == 0 && strncmp(b->line, want, strlen(want)) != 0)
		rc = -EPROTO;
	return rc;
}

int beanstalk_use(struct beanstalk *b, const char *tube)
{
	char cmd[BEANSTALK_LINE];

	snprintf(cmd, sizeof cmd, "use %s", tube);
	return command(b, cmd, "USING ");
}

int beanstalk_watch(struct beanstalk *b, const char *tube)
{
	char cmd[BEANSTALK_LINE];

	snprintf(cmd, sizeof cmd, "watch %s", tube);
	return command(b, cmd, "WATCHING ");
}

int beanstalk_ignore(struct beanstalk *b, const char *tube)
{
	char cmd[BEANSTALK_LINE];

	snprintf(cmd, sizeof cmd, "ignore %s", tube);
	return command(b, cmd, "WATCHING ");
}

int beanstalk_put_send(struct beanstalk *b, uint32_t pri, uint32_t delay,
		       uint32_t ttr, const void *body, size_t len)
{
	char out[BEANSTALK_BUF];
	int n = snprintf(out, sizeof out, "put %u %u %u %zu\r\n", pri, delay,
			 ttr, len);

	if (n < 0)
		return -EINVAL;
	/* One write for the command, the body and its "\r\n" when they fit:
	 * a put is then one segment on the wire. */
	if ((size_t)n + len + 2 <= sizeof out) {
		memcpy(out + n, body, len);
		memcpy(out + n + len, "\r\n", 2);
		return send_all(b, out, (size_t)n + len + 2);
	}
	int rc = send_all(b, out, (size_t)n);

	if (rc == 0)
		rc = send_all(b, body, len);
	if (rc == 0)
		rc = send_all(b, "\r\n", 2);
	return rc;
}

int beanstalk_put_recv(struct beanstalk *b, int timeout_ms, uint64_t *id)
{
	unsigned long long v;
	int rc = read_line(b, timeout_ms);

	if (rc < 0)
		return rc;
	if (sscanf(b->line, "INSERTED %llu", &v) != 1)
		return -EPROTO;
	*id = v;
	return 0;
}

int beanstalk_reserve(struct beanstalk *b, int timeout_s, uint64_t *id,
		      size_t *len)
{
	char cmd[64];
	unsigned long long v;
	size_t n;
	int rc;

	snprintf(cmd, sizeof cmd, "reserve-with-timeout %d\r\n", timeout_s);
	rc = send_all(b, cmd, strlen(cmd));
	if (rc == 0)
		rc = read_line(b, -1);
	if (rc < 0)
		return rc;
	if (strcmp(b->line, "TIMED_OUT") == 0 ||
	    strcmp(b->line, "DEADLINE_SOON") == 0)
		return -ETIMEDOUT;
	if (sscanf(b->line, "RESERVED %llu %zu", &v, &n) != 2)
		return -EPROTO;
	rc = skip(b, n + 2);
	if (rc < 0)
		return rc;
	*id = v;
	*len = n;
	return 0;
}

int beanstalk_delete(struct beanstalk *b, uint64_t id)
{
	char cmd[64];

	snprintf(cmd, sizeof cmd, "delete %llu", (unsigned long long)id);
	return command(b, cmd, "DELETED");
}

/*
 * client.c: the blocking client of berthd's socket protocol (client.h).
 *
 * Plain sockets and poll(): a line is read into a growing buffer, replies
 * are matched to the call by id, and notifications (and requests of the
 * server's own) that arrive meanwhile are queued in arrival order.
 */
#include "berth/client.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct berth_client {
	int fd;
	char *buf;      /* bytes read and not yet handed out */
	size_t off;     /* the first byte not handed out */
	size_t len;     /* the end of what was read */
	size_t cap;
	bool eof;
	json_int_t next_id;
	json_t **notes; /* a ring of queued notifications */
	size_t nhead, nlen, ncap;
};

char *berth_client_default_socket(char *buf, size_t size)
{
	const char *env = getenv("BERTH_SOCKET");
	const char *xdg = getenv("XDG_RUNTIME_DIR");

	if (env && *env)
		snprintf(buf, size, "%s", env);
	else if (xdg && *xdg)
		snprintf(buf, size, "%s/berth/berth.sock", xdg);
	else
		snprintf(buf, size, "./berth.sock");
	return buf;
}

static int connect_unix(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof sun.sun_path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* connect_tcp connects to "HOST:PORT" or "[V6]:PORT". */
static int connect_tcp(const char *spec)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
	char host[256];
	const char *port;
	int fd = -1, e = ECONNREFUSED;

	if (spec[0] == '[') {
		const char *close_br = strchr(spec, ']');

		if (!close_br || close_br[1] != ':' ||
		    (size_t)(close_br - spec) > sizeof host)
			goto bad;
		snprintf(host, sizeof host, "%.*s", (int)(close_br - spec - 1),
			 spec + 1);
		port = close_br + 2;
	} else {
		port = strrchr(spec, ':');
		if (!port || (size_t)(port - spec) >= sizeof host)
			goto bad;
		snprintf(host, sizeof host, "%.*s", (int)(port - spec), spec);
		port++;
	}
	if (getaddrinfo(host[0] ? host : "127.0.0.1", port, &hints, &res) != 0)
		goto bad;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0) {
			e = errno;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		e = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		errno = e;
	return fd;
bad:
	errno = EINVAL;
	return -1;
}

struct berth_client *berth_client_connect(const char *where)
{
	struct berth_client *c;
	int fd;

	if (strncmp(where, "tcp:", 4) == 0)
		fd = connect_tcp(where + 4);
	else
		fd = connect_unix(where);
	if (fd < 0)
		return NULL;
	c = calloc(1, sizeof *c);
	if (!c) {
		close(fd);
		errno = ENOMEM;
		return NULL;
	}
	c->fd = fd;
	return c;
}

void berth_client_close(struct berth_client *c)
{
	if (!c)
		return;
	close(c->fd);
	while (c->nlen) {
		json_decref(c->notes[c->nhead]);
		c->nhead = (c->nhead + 1) % c->ncap;
		c->nlen--;
	}
	free(c->notes);
	free(c->buf);
	free(c);
}

char *berth_client_read_token(const char *path)
{
	char buf[4097], *nl, *token;
	size_t n = 0;
	ssize_t got;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	while (n < sizeof buf - 1 &&
	       (got = read(fd, buf + n, sizeof buf - 1 - n)) != 0) {
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int e = errno;

			close(fd);
			explicit_bzero(buf, sizeof buf);
			errno = e;
			return NULL;
		}
		n += (size_t)got;
	}
	close(fd);
	buf[n] = '\0';
	if ((nl = strpbrk(buf, "\r\n")))
		*nl = '\0';
	n = strlen(buf);
	while (n > 0 && (buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		buf[--n] = '\0';
	token = n ? strdup(buf) : NULL;
	explicit_bzero(buf, sizeof buf);
	if (!token)
		errno = n ? ENOMEM : EINVAL;
	return token;
}

int berth_client_auth(struct berth_client *c, const char *token,
		      json_t **error)
{
	json_t *params = json_pack("{s:s}", "token", token), *result = NULL;
	int rc;

	if (!params)
		return -ENOMEM;
	rc = berth_client_call(c, "server/auth", params, -1, &result, error);
	json_decref(params);
	json_decref(result);
	return rc;
}

int berth_client_fd(const struct berth_client *c)
{
	return c->fd;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* remaining returns the milliseconds left until deadline (-1: none), for
 * poll. */
static int remaining(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - now_ms();
	return left < 0 ? 0 : left > 1000000000 ? 1000000000 : (int)left;
}

static int64_t deadline_of(int timeout_ms)
{
	return timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
}

int berth_client_send_line(struct berth_client *c, const char *line,
			   size_t len)
{
	bool nl = len > 0 && line[len - 1] == '\n';
	size_t total = len + (nl ? 0 : 1), done = 0;

	while (done < total) {
		const char *p = done < len ? line + done : "\n";
		size_t n = done < len ? len - done : 1;
		ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);

		if (w < 0) {
			struct pollfd pfd = {.fd = c->fd, .events = POLLOUT};

			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return -errno;
			poll(&pfd, 1, -1);
			continue;
		}
		done += (size_t)w;
	}
	return 0;
}

/* fill reads more bytes into the buffer, waiting up to the deadline.
 * Returns 0, -ETIMEDOUT, -ECONNRESET at the end of the stream, or another
 * negative errno. */
static int fill(struct berth_client *c, int64_t deadline)
{
	struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
	ssize_t n;
	int rc;

	if (c->eof)
		return -ECONNRESET;
	if (c->off > 0 && c->off == c->len)
		c->off = c->len = 0;
	if (c->len + 65536 > c->cap) {
		size_t cap = c->cap ? c->cap : 65536;
		char *b;

		if (c->off > 0) {
			memmove(c->buf, c->buf + c->off, c->len - c->off);
			c->len -= c->off;
			c->off = 0;
		}
		while (c->len + 65536 > cap)
			cap *= 2;
		if (cap != c->cap) {
			b = realloc(c->buf, cap);
			if (!b)
				return -ENOMEM;
			c->buf = b;
			c->cap = cap;
		}
	}
	do {
		rc = poll(&pfd, 1, remaining(deadline));
	} while (rc < 0 && errno == EINTR);
	if (rc < 0)
		return -errno;
	if (rc == 0)
		return -ETIMEDOUT;
	do {
		n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == ECONNRESET ? -ECONNRESET : -errno;
	if (n == 0) {
		c->eof = true;
		return -ECONNRESET;
	}
	c->len += (size_t)n;
	return 0;
}

/* next_line returns the next whole line (malloc'd, without "\r\n"), or
 * NULL with *rc set. */
static char *next_line(struct berth_client *c, int64_t deadline, int *rc)
{
	size_t rel = 0; /* bytes after off already searched */

	for (;;) {
		char *nl = c->buf ? memchr(c->buf + c->off + rel, '\n',
					   c->len - c->off - rel)
				  : NULL;

		if (nl) {
			size_t n = (size_t)(nl - (c->buf + c->off));
			char *line = malloc(n + 1);

			if (!line) {
				*rc = -ENOMEM;
				return NULL;
			}
			memcpy(line, c->buf + c->off, n);
			if (n > 0 && line[n - 1] == '\r')
				n--;
			line[n] = '\0';
			c->off = (size_t)(nl - c->buf) + 1;
			*rc = 0;
			return line;
		}
		rel = c->len - c->off;
		*rc = fill(c, deadline);
		if (*rc < 0)
			return NULL;
	}
}

char *berth_client_read_line(struct berth_client *c, int timeout_ms)
{
	int rc;
	char *line = next_line(c, deadline_of(timeout_ms), &rc);

	if (!line)
		errno = -rc;
	return line;
}

static int queue_note(struct berth_client *c, json_t *msg)
{
	if (c->nlen == c->ncap) {
		size_t cap = c->ncap ? c->ncap * 2 : 16;
		json_t **n = malloc(cap * sizeof *n);

		if (!n)
			return -ENOMEM;
		for (size_t i = 0; i < c->nlen; i++)
			n[i] = c->notes[(c->nhead + i) % c->ncap];
		free(c->notes);
		c->notes = n;
		c->ncap = cap;
		c->nhead = 0;
	}
	c->notes[(c->nhead + c->nlen) % c->ncap] = msg;
	c->nlen++;
	return 0;
}

/* read_message reads and parses the next message; lines that are not
 * JSON are skipped. Returns a new reference or NULL with *rc set. */
static json_t *read_message(struct berth_client *c, int64_t deadline, int *rc)
{
	for (;;) {
		char *line = next_line(c, deadline, rc);
		json_t *msg;

		if (!line)
			return NULL;
		msg = json_loads(line, JSON_DECODE_ANY, NULL);
		free(line);
		if (msg)
			return msg;
	}
}

int berth_client_call(struct berth_client *c, const char *method,
		      json_t *params, int timeout_ms, json_t **result,
		      json_t **error)
{
	int64_t deadline = deadline_of(timeout_ms);
	json_int_t id = ++c->next_id;
	json_t *req;
	char *text;
	int rc;

	*result = NULL;
	if (error)
		*error = NULL;
	req = json_pack("{s:s, s:I, s:s}", "jsonrpc", "2.0", "id", id,
			"method", method);
	if (!req)
		return -ENOMEM;
	if (params)
		json_object_set(req, "params", params);
	text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (!text)
		return -ENOMEM;
	rc = berth_client_send_line(c, text, strlen(text));
	free(text);
	if (rc < 0) {
		/* A server that refused the connection has said why before
		 * it closed: that line is the answer, if it is there. */
		json_t *msg = read_message(c, now_ms(), &rc);
		json_t *err = json_object_get(msg, "error");

		if (err && json_is_null(json_object_get(msg, "id"))) {
			if (error)
				*error = json_incref(err);
			json_decref(msg);
			return 1;
		}
		json_decref(msg);
		return -EPIPE;
	}

	for (;;) {
		json_t *msg = read_message(c, deadline, &rc), *mid;

		if (!msg)
			return rc;
		if (json_object_get(msg, "method")) {
			/* A notification, or a request of the server's. */
			if (queue_note(c, msg) < 0)
				json_decref(msg);
			continue;
		}
		mid = json_object_get(msg, "id");
		/* An error with a null id is the server refusing the
		 * connection or the line, which is our answer too. */
		if ((json_is_integer(mid) && json_integer_value(mid) == id) ||
		    (json_is_null(mid) && json_object_get(msg, "error"))) {
			json_t *err = json_object_get(msg, "error");

			if (err) {
				if (error)
					*error = json_incref(err);
				json_decref(msg);
				return 1;
			}
			*result = json_incref(json_object_get(msg, "result"));
			json_decref(msg);
			return *result ? 0 : -EPROTO;
		}
		json_decref(msg); /* the answer to a call that timed out */
	}
}

json_t *berth_client_next_notification(struct berth_client *c, int timeout_ms)
{
	int64_t deadline = deadline_of(timeout_ms);
	int rc;

	for (;;) {
		json_t *msg;

		if (c->nlen) {
			msg = c->notes[c->nhead];
			c->nhead = (c->nhead + 1) % c->ncap;
			c->nlen--;
			return msg;
		}
		msg = read_message(c, deadline, &rc);
		if (!msg) {
			errno = -rc;
			return NULL;
		}
		if (json_object_get(msg, "method"))
			return msg;
		json_decref(msg);
	}
}

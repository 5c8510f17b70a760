/*
 * conn.c: HTTP/1.1 connections: reading and parsing requests within fixed
 * bounds (internal.h), writing responses and event streams.
 *
 * A connection is a small state machine:
 *
 *   READING ──a whole request──► HANDLING ──response queued──► READING
 *      │                            │
 *      │                            └──an event stream──► STREAMING
 *      └──EOF, an error, a limit, a deadline, http_stop──► CLOSING
 *
 * READING takes a head first; once the head is whole it is judged
 * (http_route_head: route, method, credentials) before a byte of its body
 * is read, so that a stranger's body is never read. Its deadlines run
 * from fixed points (internal.h): bytes that trickle in extend none of
 * them. The end of a head is searched for only in bytes not yet looked
 * at, so a head that arrives a byte at a time costs its length, not its
 * length squared.
 *
 * One request is answered at a time: requests a client pipelines wait in
 * the buffer until the one before them is answered, so responses leave in
 * order without any queue of their own. Only Content-Length bodies are
 * taken; a chunked request body is refused (no browser sends one for
 * fetch() with a string body, and it would need a second parser).
 */
#include "http/internal.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "api/local.h"
#include "log/log.h"

struct write_req {
	uv_write_t req;
	char *head;
	char *body;
};

static const char *reason_of(int status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 204: return "No Content";
	case 303: return "See Other";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 415: return "Unsupported Media Type";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	case 507: return "Insufficient Storage";
	default: return "Unknown";
	}
}

static void conn_free_maybe(struct http_conn *c)
{
	struct http *h = c->http;

	if (--c->handles > 0)
		return;
	free(c->buf);
	free(c);
	http_handle_closed(h);
}

static void on_handle_close(uv_handle_t *hd)
{
	conn_free_maybe(hd->data);
}

static void unauth_remove(struct http_conn *c)
{
	struct http *h = c->http;

	if (!c->unauth_prev && h->unauth_head != c)
		return;
	if (c->unauth_prev)
		c->unauth_prev->unauth_next = c->unauth_next;
	else
		h->unauth_head = c->unauth_next;
	if (c->unauth_next)
		c->unauth_next->unauth_prev = c->unauth_prev;
	else
		h->unauth_tail = c->unauth_prev;
	c->unauth_prev = c->unauth_next = NULL;
	h->nunauth--;
}

void http_conn_trust(struct http_conn *c)
{
	c->trusted = true;
	unauth_remove(c);
}

void http_conn_close(struct http_conn *c)
{
	struct http *h = c->http;

	if (c->state == HC_CLOSING)
		return;
	c->state = HC_CLOSING;
	unauth_remove(c);
	/* The api connection ends first: its waits and subscriptions stop,
	 * and replies still owed to this client are dropped, so the sink is
	 * never called for a connection that is gone. */
	if (c->local) {
		api_local_close(c->local);
		c->local = NULL;
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		h->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	h->nconns--;
	uv_timer_stop(&c->timer);
	uv_close((uv_handle_t *)&c->timer, on_handle_close);
	uv_close((uv_handle_t *)&c->tcp, on_handle_close);
}

/* session_bound is true when c's answer is one that lasts (an event
 * stream, a wait) opened with a session: it ends with the session. */
static bool session_bound(const struct http_conn *c)
{
	return c->session &&
	       (c->state == HC_STREAMING ||
		(c->state == HC_HANDLING && (c->long_poll || c->sse)));
}

void http_conn_end_session(struct http *h, const struct http_session *s)
{
	for (struct http_conn *c = h->conns, *next; c; c = next) {
		next = c->next;
		if (c->session == s && c->session_gen == s->gen &&
		    session_bound(c)) {
			log_debug("http: closed an event stream or a wait whose "
				  "session ended");
			http_conn_close(c);
		}
	}
}

const char *http_header_get(const struct http_conn *c, const char *name)
{
	for (int i = 0; i < c->req.nheaders; i++)
		if (strcasecmp(http_str(c, c->req.headers[i].name), name) == 0)
			return http_str(c, c->req.headers[i].value);
	return NULL;
}

/* ---- writing ------------------------------------------------------------ */

static void parse_next(struct http_conn *c);

/* over_hold is true when more of c's responses wait to be written than
 * lets it send the next request (internal.h, pipelining). */
static bool over_hold(struct http_conn *c)
{
	size_t queued = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);

	return queued > (c->trusted ? HTTP_HOLD_TRUSTED : HTTP_HOLD_UNTRUSTED);
}

static void on_write(uv_write_t *req, int status)
{
	struct write_req *wr = (struct write_req *)req;
	struct http_conn *c = req->handle->data;

	free(wr->head);
	free(wr->body);
	free(wr);
	if (c->state == HC_CLOSING)
		return;
	if (status < 0) {
		http_conn_close(c);
		return;
	}
	if (c->state == HC_STREAMING && c->local)
		api_local_drained(c->local);
	if (c->held && !c->in_dispatch && !over_hold(c)) {
		/* It read what held it: the next request starts now. */
		c->held = false;
		if (c->len)
			c->head_started = uv_now(c->http->loop);
		parse_next(c);
	}
}

/* conn_write queues head and body (both malloc'd, taken over; body may be
 * NULL). Returns 0 or a negative code, the connection then closing. */
static int conn_write(struct http_conn *c, char *head, size_t hlen,
		      char *body, size_t blen)
{
	struct write_req *wr;
	uv_buf_t bufs[2];
	unsigned n = 0;
	size_t queued;
	int rc;

	if (c->state == HC_CLOSING) {
		free(head);
		free(body);
		return -EPIPE;
	}
	wr = malloc(sizeof *wr);
	if (!wr) {
		free(head);
		free(body);
		http_conn_close(c);
		return -ENOMEM;
	}
	wr->head = head;
	wr->body = body;
	if (head && hlen)
		bufs[n++] = uv_buf_init(head, (unsigned)hlen);
	if (body && blen)
		bufs[n++] = uv_buf_init(body, (unsigned)blen);
	rc = n ? uv_write(&wr->req, (uv_stream_t *)&c->tcp, bufs, n, on_write)
	       : -EINVAL;
	if (rc < 0) {
		free(head);
		free(body);
		free(wr);
		http_conn_close(c);
		return rc;
	}
	queued = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
	if (queued <= hlen + blen || hlen + blen > c->out_big)
		c->out_big = hlen + blen;
	if (queued > c->http->max_outbuf + c->out_big) {
		/* The client does not read what it asked for (an event
		 * stream it stopped reading): cut off, as on the socket.
		 * One response, however long, is not such a client. */
		http_conn_close(c);
		return -ENOBUFS;
	}
	return 0;
}

static void on_alloc(uv_handle_t *hd, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

/* request_done consumes the answered request from the buffer and goes on
 * with the next one, or closes. */
static void request_done(struct http_conn *c)
{
	size_t used = c->req.head_len + c->req.body_len;

	if (c->state != HC_HANDLING)
		return;
	c->have_head = false;
	c->sse = false;
	c->want_id = 0;
	c->scanned = 0;
	c->waiting_since = uv_now(c->http->loop);
	c->head_started = 0;
	if (!c->keep_alive) {
		/* Nothing more is read; parse_next closes once the
		 * response is written. */
		c->state = HC_READING;
		c->eof = true;
		c->len = 0;
	} else {
		memmove(c->buf, c->buf + used, c->len - used);
		c->len -= used;
		c->state = HC_READING;
		/* A pipelined head that is already here started now. */
		if (c->len)
			c->head_started = c->waiting_since;
	}
	if (!c->in_dispatch)
		parse_next(c);
}

void http_respond(struct http_conn *c, int status, const char *content_type,
		  const char *extra_headers, const void *body, size_t len)
{
	char *head, *copy = NULL;
	int hlen;

	if (c->state != HC_HANDLING)
		return;
	/* A request answered before its body was read (refused on its
	 * head) leaves the stream at an unknown point: nothing after it
	 * is read. */
	if (c->len < c->req.head_len + c->req.body_len)
		c->keep_alive = false;
	hlen = asprintf(&head,
			"HTTP/1.1 %d %s\r\n"
			"Content-Type: %s\r\n"
			"Content-Length: %zu\r\n"
			"Cache-Control: no-store\r\n"
			"X-Content-Type-Options: nosniff\r\n"
			"X-Frame-Options: DENY\r\n"
			"Referrer-Policy: no-referrer\r\n"
			"%s"
			"Connection: %s\r\n\r\n",
			status, reason_of(status),
			content_type ? content_type : "application/json",
			len, extra_headers ? extra_headers : "",
			c->keep_alive ? "keep-alive" : "close");
	if (hlen < 0) {
		http_conn_close(c);
		return;
	}
	if (len) {
		copy = malloc(len);
		if (!copy) {
			free(head);
			http_conn_close(c);
			return;
		}
		memcpy(copy, body, len);
	}
	if (c->req.head_only) {
		/* GET's head, Content-Length included, without its body. */
		free(copy);
		copy = NULL;
		len = 0;
	}
	if (conn_write(c, head, (size_t)hlen, copy, len) < 0)
		return;
	request_done(c);
}

void http_respond_json(struct http_conn *c, int status, json_t *body,
		       const char *extra_headers)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;

	json_decref(body);
	if (!text) {
		static const char oom[] = "{\"error\":{\"code\":-32603,"
					  "\"message\":\"out of memory\"}}";

		http_respond(c, 500, NULL, NULL, oom, sizeof oom - 1);
		return;
	}
	http_respond(c, status, "application/json", extra_headers, text,
		     strlen(text));
	free(text);
}

void http_respond_error(struct http_conn *c, int status, int code,
			const char *message, json_t *data)
{
	json_t *err = json_pack("{s:i, s:s}", "code", code, "message", message);
	char hdr[64];

	if (err && data)
		json_object_set_new(err, "data", data);
	else
		json_decref(data);
	if (status == 429)
		snprintf(hdr, sizeof hdr, "Retry-After: %lld\r\n",
			 (long long)(c->retry_ms + 999) / 1000);
	else
		snprintf(hdr, sizeof hdr, "%s",
			 status == 401 ? "WWW-Authenticate: Bearer\r\n" : "");
	http_respond_json(c, status, err ? json_pack("{s:o}", "error", err)
					 : NULL, hdr);
}

static void on_ping(uv_timer_t *t);

/* stream_arm sets c's timer for its stream's next ping, or for the end of
 * the session that opened it when that comes first. */
static void stream_arm(struct http_conn *c)
{
	uint64_t now = uv_now(c->http->loop), wait = HTTP_SSE_PING_MS;

	if (c->session && c->session_expires < now + wait)
		wait = c->session_expires > now ? c->session_expires - now : 0;
	uv_timer_start(&c->timer, on_ping, wait, 0);
}

static void on_ping(uv_timer_t *t)
{
	static const char ping[] = ": ping\n\n";
	struct http_conn *c = t->data;

	if (c->state != HC_STREAMING)
		return;
	if (c->session && c->session_expires <= uv_now(c->http->loop)) {
		log_debug("http: closed an event stream whose session expired");
		http_conn_close(c);
		return;
	}
	if (http_stream_send(c, ping, sizeof ping - 1) == 0)
		stream_arm(c);
}

void http_stream_start(struct http_conn *c)
{
	static const char head[] =
		"HTTP/1.1 200 OK\r\n"
		"Content-Type: text/event-stream; charset=utf-8\r\n"
		"Cache-Control: no-store\r\n"
		"X-Content-Type-Options: nosniff\r\n"
		"Connection: close\r\n\r\n"
		/* EventSource waits this long before reconnecting. */
		"retry: 1000\n\n";
	char *copy;

	if (c->state != HC_HANDLING)
		return;
	copy = strdup(head);
	if (!copy) {
		http_conn_close(c);
		return;
	}
	if (c->req.head_only) {
		/* The stream's head alone, and the connection closed after
		 * it: a HEAD has no body to stream. */
		c->keep_alive = false;
		if (conn_write(c, copy, (size_t)(strstr(head, "\r\n\r\n") + 4 - head),
			       NULL, 0) == 0)
			request_done(c);
		return;
	}
	c->state = HC_STREAMING;
	/* The stream ends only when the connection does: nothing after it
	 * is read as a request. */
	c->keep_alive = false;
	if (conn_write(c, copy, sizeof head - 1, NULL, 0) < 0)
		return;
	stream_arm(c);
}

int http_stream_send(struct http_conn *c, const char *text, size_t len)
{
	char *copy;

	if (c->state != HC_STREAMING)
		return -EPIPE;
	copy = malloc(len);
	if (!copy) {
		http_conn_close(c);
		return -ENOMEM;
	}
	memcpy(copy, text, len);
	return conn_write(c, copy, len, NULL, 0);
}

/* ---- parsing ------------------------------------------------------------ */

/* fail answers a request that cannot be parsed and closes after it: what
 * follows it in the stream cannot be trusted to start a request. */
static void fail(struct http_conn *c, int status, int code, const char *msg,
		 json_t *data)
{
	c->state = HC_HANDLING;
	c->keep_alive = false;
	c->req.head_len = 0;
	c->req.body_len = 0;
	http_respond_error(c, status, code, msg, data);
}

static bool token_char(int ch)
{
	return ch > 32 && ch < 127 && !strchr("()<>@,;:\\\"/[]?={}", ch);
}

/* absolute_form sets r->target to the offset in p of the request
 * target t, in the origin form ("/path?query") a route reads. An
 * absolute-form target ("http://host:port/path?query", which a server
 * must accept, RFC 9112 3.2.2) is rewritten in place: its authority moves
 * over the scheme, NUL-ended, for r->authority, and its path starts at
 * its first "/" (one is put before a "?" or the end when it has none).
 * Returns 0, or -1 for an absolute form without a host or with user
 * information. */
static int absolute_form(struct http_request *r, char *p, char *t)
{
	size_t n, alen;
	char *a, *end;

	if (strncasecmp(t, "http://", 7) == 0)
		n = 7;
	else if (strncasecmp(t, "https://", 8) == 0)
		n = 8;
	else {
		r->target = (uint32_t)(t - p);
		return 0;
	}
	a = t + n;
	alen = strcspn(a, "/?");
	end = a + alen;
	if (!alen || memchr(a, '@', alen))
		return -1;
	memmove(t, a, alen);
	t[alen] = '\0';
	r->authority = (uint32_t)(t - p);
	if (*end != '/')
		*--end = '/'; /* the scheme's room: end - 1 > t + alen */
	r->target = (uint32_t)(end - p);
	return 0;
}

const char *http_request_host(const struct http_conn *c)
{
	if (c->req.authority)
		return c->buf + c->req.authority;
	return http_header_get(c, "Host");
}

/* parse_head parses the head that ends at end (the offset just past its
 * empty line) in place. Returns 0, or -1 after answering. */
static int parse_head(struct http_conn *c, size_t end)
{
	struct http_request *r = &c->req;
	char *p = c->buf, *line_end, *sp1, *sp2;
	const char *v;
	size_t off = 0;

	memset(r, 0, sizeof *r);
	r->head_len = end;
	/* Empty lines before a request line are tolerated (RFC 9112 2.2). */
	while (off + 1 < end && p[off] == '\r' && p[off + 1] == '\n')
		off += 2;
	line_end = memchr(p + off, '\n', end - off);
	if (!line_end)
		goto bad;
	*line_end = '\0';
	if (line_end > p + off && line_end[-1] == '\r')
		line_end[-1] = '\0';
	sp1 = strchr(p + off, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || sp1 == p + off)
		goto bad;
	*sp1 = *sp2 = '\0';
	for (char *m = p + off; *m; m++)
		if (!token_char((unsigned char)*m))
			goto bad;
	if (absolute_form(r, p, sp1 + 1) < 0)
		goto bad;
	if (p[r->target] != '/' && strcmp(p + r->target, "*") != 0)
		goto bad;
	if (strncmp(sp2 + 1, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)sp2[8]) ||
	    sp2[9]) {
		fail(c, 505, -32600, "invalid request: only HTTP/1.x is served",
		     NULL);
		return -1;
	}
	r->method = (uint32_t)off;
	r->minor = sp2[8] - '0';
	r->head_only = strcmp(p + off, "HEAD") == 0;
	off = (size_t)(line_end - p) + 1;

	while (off < end) {
		char *colon, *val, *e;

		line_end = memchr(p + off, '\n', end - off);
		if (!line_end)
			goto bad;
		*line_end = '\0';
		if (line_end > p + off && line_end[-1] == '\r')
			line_end[-1] = '\0';
		if (p[off] == '\0')
			break; /* the empty line */
		if (p[off] == ' ' || p[off] == '\t')
			goto bad; /* obsolete line folding */
		if (r->nheaders == HTTP_MAX_HEADERS) {
			fail(c, 431, -32600, "invalid request: more than 64 "
			     "header lines", json_pack("{s:i}", "limit",
							HTTP_MAX_HEADERS));
			return -1;
		}
		colon = strchr(p + off, ':');
		if (!colon || colon == p + off)
			goto bad;
		*colon = '\0';
		for (char *n = p + off; *n; n++)
			if (!token_char((unsigned char)*n))
				goto bad;
		val = colon + 1;
		while (*val == ' ' || *val == '\t')
			val++;
		e = val + strlen(val);
		while (e > val && (e[-1] == ' ' || e[-1] == '\t'))
			*--e = '\0';
		r->headers[r->nheaders].name = (uint32_t)off;
		r->headers[r->nheaders].value = (uint32_t)(val - p);
		r->nheaders++;
		off = (size_t)(line_end - p) + 1;
	}

	/* RFC 9112 3.2: exactly one Host in HTTP/1.1, at most one in
	 * 1.0; --http-open's loopback check reads the one there is. */
	{
		int hosts = 0;

		for (int i = 0; i < r->nheaders; i++)
			hosts += strcasecmp(http_str(c, r->headers[i].name),
					    "Host") == 0;
		if (hosts > 1 || (hosts == 0 && r->minor >= 1)) {
			fail(c, 400, -32600, hosts ? "invalid request: more "
			     "than one Host header" : "invalid request: an "
			     "HTTP/1.1 request needs a Host header", NULL);
			return -1;
		}
	}
	if (http_header_get(c, "Transfer-Encoding")) {
		fail(c, 501, -32600, "invalid request: a chunked request body "
		     "is not supported; send Content-Length", NULL);
		return -1;
	}
	v = http_header_get(c, "Content-Length");
	for (int i = 0; v && i < r->nheaders; i++) {
		/* Two lengths that disagree leave the body's end to whoever
		 * reads the request, which is how requests are smuggled
		 * past a proxy (RFC 9112 6.3): refused. */
		if (strcasecmp(http_str(c, r->headers[i].name),
			       "Content-Length") == 0 &&
		    strcmp(http_str(c, r->headers[i].value), v) != 0) {
			fail(c, 400, -32600, "invalid request: two "
			     "Content-Length headers that disagree", NULL);
			return -1;
		}
	}
	if (v) {
		char *endp;
		unsigned long long n;

		errno = 0;
		n = strtoull(v, &endp, 10);
		if (!isdigit((unsigned char)*v) || *endp || errno) {
			fail(c, 400, -32600, "invalid request: a malformed "
			     "Content-Length", NULL);
			return -1;
		}
		if (n > c->http->max_body) {
			char text[160];

			snprintf(text, sizeof text, "invalid request: the body "
				 "is longer than the limit of %zu bytes",
				 c->http->max_body);
			fail(c, 413, -32600, text, json_pack("{s:I}", "limit",
				(json_int_t)c->http->max_body));
			return -1;
		}
		r->body_len = (size_t)n;
	}
	v = http_header_get(c, "Connection");
	if (r->minor == 0)
		c->keep_alive = v && strcasestr(v, "keep-alive");
	else
		c->keep_alive = !(v && strcasestr(v, "close"));
	return 0;
bad:
	fail(c, 400, -32600, "invalid request: a malformed HTTP request", NULL);
	return -1;
}

/* ---- deadlines ---------------------------------------------------------- */

static void on_deadline(uv_timer_t *t);

/* conn_due returns when c's current wait ends (internal.h's bounds), or
 * 0 when it has none: a request being answered waits for berthd, a wait
 * opened with a session until the session expires at most. */
static uint64_t conn_due(const struct http_conn *c)
{
	uint64_t due = 0;
	int64_t login = api_login_ms(c->http->api);

	if (c->state == HC_READING) {
		if (c->held)
			due = c->held_since + HTTP_IDLE_MS;
		else if (c->have_head)
			due = c->body_started + HTTP_BODY_MS;
		else if (c->head_started)
			due = c->head_started + HTTP_HEAD_MS;
		else
			due = c->waiting_since + HTTP_IDLE_MS;
	} else if (session_bound(c)) {
		due = c->session_expires;
	}
	if (!c->trusted && c->state != HC_CLOSING &&
	    (!due || c->accepted + (uint64_t)login < due))
		due = c->accepted + (uint64_t)login;
	return due;
}

/* hangup_watched is true when c waits for a long answer (a wait) while
 * it is not read, because it pipelined more than its buffer holds behind
 * the wait: its EOF cannot be read then, so it is looked at once a second
 * for a peer that hung up (peer_hung_up), as the socket looks at the
 * connections it does not read. */
static bool hangup_watched(const struct http_conn *c)
{
	return c->state == HC_HANDLING && c->long_poll && !c->reading &&
	       !c->eof;
}

/* peer_hung_up is true when c's peer sent its end (or reset): TCP cannot
 * tell a close from a half-close, so it is taken as gone, as at EOF
 * (on_read). */
static bool peer_hung_up(struct http_conn *c)
{
	struct pollfd p = {.events = POLLRDHUP};
	uv_os_fd_t fd;

	if (uv_fileno((uv_handle_t *)&c->tcp, &fd) < 0)
		return true;
	p.fd = fd;
	return poll(&p, 1, 0) == 1 &&
	       (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* conn_arm sets c's timer for its deadline; an event stream's timer
 * sends pings instead. */
static void conn_arm(struct http_conn *c)
{
	uint64_t now = uv_now(c->http->loop), due;

	if (c->state == HC_STREAMING || c->state == HC_CLOSING ||
	    c->shutting_down)
		return;
	due = conn_due(c);
	if (hangup_watched(c) && (!due || due > now + 1000))
		due = now + 1000;
	if (!due)
		uv_timer_stop(&c->timer);
	else
		uv_timer_start(&c->timer, on_deadline, due > now ? due - now : 0,
			       0);
}

static void on_deadline(uv_timer_t *t)
{
	struct http_conn *c = t->data;
	uint64_t now = uv_now(c->http->loop), due = conn_due(c);

	if (hangup_watched(c) && peer_hung_up(c)) {
		log_debug("http: closed a wait whose client hung up");
		http_conn_close(c);
		return;
	}
	if (due > now || (!due && hangup_watched(c))) {
		conn_arm(c);
		return;
	}
	if (c->state == HC_READING && !c->held && (c->len > 0 || c->have_head)) {
		/* A request started and did not arrive whole in time. */
		log_debug("http: closed a connection whose request did not "
			  "arrive in time");
		fail(c, 408, -32600, "invalid request: the request did not "
		     "arrive in time (10 s for its head, 60 s for its body)",
		     NULL);
		return;
	}
	http_conn_close(c);
}

static void on_closing_timeout(uv_timer_t *t)
{
	http_conn_close(t->data);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
	struct http_conn *c = req->data;

	free(req);
	http_conn_close(c);
}

/* close_after_writes closes c once what is queued for it is written:
 * uv_close alone would cancel the writes still in the queue. */
static void close_after_writes(struct http_conn *c)
{
	uv_shutdown_t *req;

	if (c->state == HC_CLOSING || c->shutting_down)
		return;
	if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0 ||
	    !(req = malloc(sizeof *req))) {
		http_conn_close(c);
		return;
	}
	req->data = c;
	if (uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown) < 0) {
		free(req);
		http_conn_close(c);
		return;
	}
	c->shutting_down = true;
	uv_timer_start(&c->timer, on_closing_timeout, HTTP_IDLE_MS, 0);
}

/* head_end returns the offset just past the empty line that ends the head
 * in c's buffer, or 0 while there is none. A line may end in a bare LF
 * (RFC 9112 2.2, as parse_head takes it), so the end is an LF followed by
 * LF or CR LF. Only bytes not looked at before are scanned (and the two
 * before them, which an end split across reads may begin in). */
static size_t head_end(struct http_conn *c)
{
	size_t i = c->scanned > 2 ? c->scanned - 2 : 0;
	const char *p;

	while (i + 1 < c->len &&
	       (p = memchr(c->buf + i, '\n', c->len - 1 - i))) {
		i = (size_t)(p - c->buf);
		if (p[1] == '\n')
			return i + 2;
		if (p[1] == '\r' && i + 2 < c->len && p[2] == '\n')
			return i + 3;
		i++;
	}
	c->scanned = c->len;
	return 0;
}

/* continue_if_expected tells a client that sent "Expect: 100-continue"
 * and waits for a go before its body, now that its head passed, to send
 * it (RFC 9110 10.1.1). A refused head was answered with its final
 * status instead. */
static void continue_if_expected(struct http_conn *c)
{
	static const char go[] = "HTTP/1.1 100 Continue\r\n\r\n";
	const char *v = http_header_get(c, "Expect");
	char *copy;

	if (!v || strcasecmp(v, "100-continue") != 0 || c->req.minor < 1 ||
	    !(copy = strdup(go)))
		return;
	conn_write(c, copy, sizeof go - 1, NULL, 0);
}

/* parse_next answers the requests that are whole in the buffer, one at a
 * time, and waits for more bytes otherwise. */
static void parse_next(struct http_conn *c)
{
	/* Answers given while this runs (even at once, from inside
	 * http_route) come back here rather than recursing. */
	c->in_dispatch = true;
	while (c->state == HC_READING && !c->held) {
		if (!c->have_head) {
			size_t end;

			if (c->len && over_hold(c)) {
				/* A pipelined request waits until the client
				 * reads what it asked before (on_write). */
				c->held = true;
				c->held_since = uv_now(c->http->loop);
				break;
			}
			end = head_end(c);

			if (!end) {
				if (c->len >= HTTP_MAX_HEAD) {
					fail(c, 431, -32600, "invalid request: "
					     "the head is longer than 64 KiB",
					     json_pack("{s:i}", "limit",
						       HTTP_MAX_HEAD));
					continue;
				}
				break;
			}
			if (parse_head(c, end) < 0)
				continue;
			/* Judged on its head: nothing of a body is read for
			 * a request that would be refused. */
			c->state = HC_HANDLING;
			c->long_poll = false;
			if (http_route_head(c) < 0)
				continue;
			c->state = HC_READING;
			c->have_head = true;
			c->body_started = uv_now(c->http->loop);
			if (c->len < c->req.head_len + c->req.body_len)
				continue_if_expected(c);
		}
		if (c->len < c->req.head_len + c->req.body_len)
			break;
		c->state = HC_HANDLING;
		http_route(c);
	}
	c->in_dispatch = false;
	if (c->state == HC_READING && c->held) {
		if (c->reading) {
			uv_read_stop((uv_stream_t *)&c->tcp);
			c->reading = false;
		}
	} else if (c->state == HC_READING) {
		if (c->eof) {
			close_after_writes(c);
			return;
		}
		if (!c->reading &&
		    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
			c->reading = true;
	}
	conn_arm(c);
}

/* ---- reading ------------------------------------------------------------ */

static void on_alloc(uv_handle_t *hd, size_t suggested, uv_buf_t *buf)
{
	struct http_conn *c = hd->data;
	/* Room for a head, and for a body only once its head passed. */
	size_t limit = HTTP_MAX_HEAD + (c->have_head ? c->req.body_len : 0);
	size_t want = HTTP_READ_CHUNK;

	if (c->cap - c->len < want && c->cap < limit) {
		size_t cap = c->cap ? c->cap : HTTP_READ_CHUNK;
		char *nb;

		while (cap - c->len < want && cap < limit)
			cap *= 2;
		nb = realloc(c->buf, cap);
		if (nb) {
			c->buf = nb;
			c->cap = cap;
		}
	}
	buf->base = c->buf ? c->buf + c->len : NULL;
	buf->len = c->buf ? c->cap - c->len : 0;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct http_conn *c = s->data;

	if (c->state == HC_CLOSING)
		return;
	if (n > 0) {
		c->len += (size_t)n;
		if (c->state == HC_STREAMING) {
			c->len = 0; /* nothing after a stream is a request */
			return;
		}
		if (c->state == HC_READING) {
			if (!c->head_started && !c->have_head)
				c->head_started = uv_now(c->http->loop);
			parse_next(c);
		} else if (c->len >= c->cap) {
			/* A client that pipelines more than the buffer
			 * holds waits until its earlier answers are out;
			 * while it waits for a wait, its hang-up is watched
			 * for (conn_arm). */
			uv_read_stop(s);
			c->reading = false;
			conn_arm(c);
		}
		return;
	}
	if (n == UV_EOF) {
		c->eof = true;
		uv_read_stop(s);
		c->reading = false;
		/* A client that goes away while a long answer (a wait, a
		 * stream) is open no longer wants it; one that only shut
		 * its side down after a request gets its answer. */
		if (c->state == HC_STREAMING || c->long_poll)
			http_conn_close(c);
		else if (c->state == HC_READING)
			parse_next(c);
		return;
	}
	if (n < 0)
		http_conn_close(c); /* an error, or out of memory (ENOBUFS) */
}

/* make_room closes the oldest strangers while there are more of them, or
 * more connections in all, than the gateway holds (internal.h). Returns
 * false when c itself would have to go: every other connection has
 * credentials. */
static bool make_room(struct http *h, struct http_conn *c)
{
	size_t max_unauth = (size_t)api_max_unauth(h->api);

	while (h->unauth_head && (h->nunauth > max_unauth ||
				  h->nconns > (size_t)h->cfg.max_connections)) {
		struct http_conn *old = h->unauth_head;

		if (old == c)
			return false;
		log_debug("http: closed the oldest connection without "
			  "credentials, to make room");
		http_conn_close(old);
	}
	return true;
}

void http_conn_accept(struct http *h)
{
	struct http_conn *c = calloc(1, sizeof *c);
	int len;

	if (!c) {
		log_error("http: out of memory accepting a connection");
		return;
	}
	c->http = h;
	if (uv_tcp_init(h->loop, &c->tcp) < 0) {
		free(c);
		return;
	}
	uv_timer_init(h->loop, &c->timer);
	c->tcp.data = c;
	c->timer.data = c;
	c->handles = 2;
	h->handles++;
	c->accepted = c->waiting_since = uv_now(h->loop);
	c->next = h->conns;
	if (h->conns)
		h->conns->prev = c;
	h->conns = c;
	h->nconns++;
	/* A stranger until a request of it passes the auth check. */
	c->unauth_prev = h->unauth_tail;
	if (h->unauth_tail)
		h->unauth_tail->unauth_next = c;
	else
		h->unauth_head = c;
	h->unauth_tail = c;
	h->nunauth++;
	if (uv_accept((uv_stream_t *)&h->listener, (uv_stream_t *)&c->tcp) < 0) {
		http_conn_close(c);
		return;
	}
	uv_tcp_nodelay(&c->tcp, 1);
	len = sizeof c->peer;
	uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&c->peer, &len);
	if (!make_room(h, c)) {
		c->state = HC_HANDLING;
		c->keep_alive = false;
		c->eof = true;
		http_respond_error(c, 503, -32013, "overloaded: too many "
				   "connections", json_pack("{s:i}", "limit",
					h->cfg.max_connections));
		return;
	}
	conn_arm(c);
	if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
		http_conn_close(c);
	else
		c->reading = true;
}

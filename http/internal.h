/*
 * internal.h: the gateway's own state, shared by the files of http/. Not a
 * public header: http.h is.
 */
#ifndef BERTH_HTTP_INTERNAL_H
#define BERTH_HTTP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "http/http.h"

/*
 * The bounds of a connection, and why:
 *   HTTP_MAX_HEAD     64 KiB of request line and headers: browsers send a
 *                     few KiB at most; a head is parsed whole, so it is
 *                     bounded on its own (431 beyond it).
 *   HTTP_MAX_HEADERS  64 header lines, for the same reason.
 *   body              the socket's max_line (16 MiB): a body is one JSON
 *                     message, held whole while it is parsed (413 beyond).
 *   HTTP_IDLE_MS      a connection that has not sent a whole request this
 *                     long after its last one is closed, so that idle and
 *                     slow clients cannot pin descriptors.
 *   write queue       the socket's max_outbuf: an event stream whose
 *                     reader stops reading is cut off there.
 */
#define HTTP_MAX_HEAD (64 * 1024)
#define HTTP_MAX_HEADERS 64
#define HTTP_IDLE_MS 60000
#define HTTP_SSE_PING_MS 15000
#define HTTP_DEFAULT_MAX_CONNECTIONS 1024
#define HTTP_MAX_SESSIONS 64
#define HTTP_SESSION_MS (7LL * 24 * 3600 * 1000)
#define HTTP_READ_CHUNK (64 * 1024)

struct http_metrics;

struct http_session {
	char id[65];        /* hex; "" when the slot is free */
	uint64_t expires;   /* uv_now */
};

struct http {
	uv_loop_t *loop;
	struct api *api;
	struct worker *worker;
	struct store *store;
	struct http_config cfg;

	char origin[160];     /* "http://HOST:PORT", as printed */
	char *token;          /* --token-file's token, or NULL */
	size_t token_len;
	char login_token[65]; /* the one-time token of the login URL */
	struct http_session sessions[HTTP_MAX_SESSIONS];

	size_t max_body;      /* the api's limits (api_local_limits) */
	int max_depth;
	size_t max_outbuf;

	uv_tcp_t listener;
	bool bound;
	uv_check_t check;     /* ends a commit batch for the metrics */
	bool check_started;
	struct http_metrics *metrics;

	struct http_conn *conns;
	size_t nconns;

	int handles;          /* open handles; stop finishes at zero */
	bool stopping;
	void (*stop_done)(void *arg);
	void *stop_arg;
};

enum http_conn_state {
	HC_READING = 0, /* reading a request */
	HC_HANDLING,    /* a request is being answered; reading is paused */
	HC_STREAMING,   /* an event stream: only events are written */
	HC_CLOSING,     /* uv_close called */
};

/* A header of the current request: offsets into the connection's buf. */
struct http_header {
	uint32_t name, value;
};

/* The current request; every string is an offset into c->buf, NUL-ended
 * in place by the parser. */
struct http_request {
	uint32_t method, target;
	int minor;              /* HTTP/1.minor */
	struct http_header headers[HTTP_MAX_HEADERS];
	int nheaders;
	size_t head_len;        /* bytes of request line and headers */
	size_t body_len;        /* Content-Length */
};

struct http_conn {
	struct http *http;
	uv_tcp_t tcp;
	uv_timer_t timer;       /* idle limit; event-stream pings */
	int state;              /* enum http_conn_state */
	int handles;            /* tcp and timer; freed at zero */

	char *buf;              /* bytes read and not yet consumed */
	size_t len, cap;
	bool have_head;         /* req holds a parsed head */
	struct http_request req;
	bool keep_alive;        /* after the current response */
	bool eof;               /* the client sent all it will send */
	bool reading;           /* uv_read_start is in effect */
	bool shutting_down;     /* closing once the writes are out */
	bool long_poll;         /* the request waits (jobs/wait): a client
				   that hangs up ends it */

	/* The api connection of this client (api/local.h), opened at its
	 * first API request; want_id is the id of the reply it waits for
	 * (0: none). */
	struct api_conn *local;
	int64_t next_id, want_id;
	int ok_status;          /* status of a successful reply */
	bool sse;               /* the request is an event stream */
	bool in_dispatch;       /* inside route dispatch: the next request
				   is parsed when it returns */

	struct http_conn *prev, *next; /* in http->conns */
};

/* http_handle_closed is called by the close of every handle the gateway
 * counts in handles; http_stop finishes once none is left. */
void http_handle_closed(struct http *h);

/* ---- conn.c ---------------------------------------------------------- */

void http_conn_accept(struct http *h);
void http_conn_close(struct http_conn *c);

/* http_header_get returns the value of the current request's header name
 * (case-insensitive), or NULL; borrowed from c->buf. */
const char *http_header_get(const struct http_conn *c, const char *name);

static inline const char *http_str(const struct http_conn *c, uint32_t off)
{
	return c->buf + off;
}

/* http_respond answers the current request with status and body (copied;
 * may be NULL), and extra header lines (each ending "\r\n", or NULL). */
void http_respond(struct http_conn *c, int status, const char *content_type,
		  const char *extra_headers, const void *body, size_t len);

/* http_respond_json answers with body (stolen) as JSON. */
void http_respond_json(struct http_conn *c, int status, json_t *body,
		       const char *extra_headers);

/* http_respond_error answers with {"error": {code, message, data?}} (data
 * stolen), the error object of the socket. */
void http_respond_error(struct http_conn *c, int status, int code,
			const char *message, json_t *data);

/* http_stream_start sends the head of an event stream; http_stream_send
 * writes text to it. Returns 0 or a negative code (the connection is then
 * closing). */
void http_stream_start(struct http_conn *c);
int http_stream_send(struct http_conn *c, const char *text, size_t len);

/* ---- routes.c -------------------------------------------------------- */

/* http_route answers the request in c->req (now or later). */
void http_route(struct http_conn *c);

/* http_api_message is the sink of c's local api connection. */
int http_api_message(void *arg, const json_t *msg);

/* ---- auth.c ---------------------------------------------------------- */

enum http_auth {
	HTTP_AUTH_NONE = 0, /* not authenticated */
	HTTP_AUTH_OPEN,     /* --http-open */
	HTTP_AUTH_BEARER,   /* Authorization: Bearer */
	HTTP_AUTH_COOKIE,   /* a session of the login URL */
};

int http_auth_check(struct http_conn *c);
/* http_csrf_ok is true when a state-changing request may come from where
 * it comes from (auth.c explains the rules); *why is set when not. */
bool http_csrf_ok(struct http_conn *c, int auth, const char **why);
/* http_host_ok is false for a Host header an --http-open gateway must
 * refuse (DNS rebinding). */
bool http_host_ok(struct http_conn *c);
/* http_login takes the token of GET /login: a new session id in sid (hex)
 * and 0, or -1 for a wrong token. */
int http_login(struct http *h, const char *token, char sid[65]);
int http_auth_init(struct http *h, char **errmsg);
void http_auth_finish(struct http *h);
/* http_random_hex fills out with 2n hex digits and a NUL. */
int http_random_hex(char *out, size_t n);

/* ---- metrics.c ------------------------------------------------------- */

struct http_metrics *http_metrics_create(struct store *st, struct worker *w);
void http_metrics_destroy(struct http_metrics *m);
/* http_metrics_end_batch ends the commit batch the listener has seen so
 * far (called once per loop turn). */
void http_metrics_end_batch(struct http_metrics *m);
/* http_metrics_render returns the Prometheus text (malloc'd) and its
 * length, or NULL when out of memory. */
char *http_metrics_render(struct http_metrics *m, size_t *len);

/* ---- assets (generated by page/embed.py) ----------------------------- */

struct http_asset {
	const char *path;         /* "/", "/app.js", "/openapi.json" */
	const char *content_type;
	const unsigned char *data;
	size_t len;
};
extern const struct http_asset http_assets[];
extern const size_t http_assets_count;

#endif

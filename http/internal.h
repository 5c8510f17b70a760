/*
 * internal.h: the gateway's own state, shared by the files of http/. Not a
 * public header: http.h is.
 */
#ifndef BERTH_HTTP_INTERNAL_H
#define BERTH_HTTP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

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
 *                     It is read only once its head passed the auth check.
 *   HTTP_HEAD_MS      10 s for a request head from its first byte, and
 *   HTTP_BODY_MS      60 s for its body after it, whatever arrives in
 *                     between (408 past either): a client that drips a
 *                     byte now and then holds a connection no longer.
 *   HTTP_IDLE_MS      a kept-alive connection that starts no request this
 *                     long after its last one is closed, so that idle
 *                     clients cannot pin descriptors.
 *   strangers         a connection that has not sent a request with valid
 *                     credentials is a stranger's: it is closed at the
 *                     socket's login deadline (api_login_ms, 10 s) from
 *                     its accept, and at most api_max_unauth (256) of them
 *                     are open, the oldest closed for a newcomer, so that
 *                     strangers can never fill the 1024 connections.
 *   write queue       the socket's max_outbuf: an event stream whose
 *                     reader stops reading is cut off there.
 *   pipelining        the next request a client pipelined is not parsed,
 *                     nor more read, while more than HTTP_HOLD_UNTRUSTED
 *                     (16 KiB, the socket's API_UNAUTH_OUT) of responses
 *                     to a stranger, or HTTP_HOLD_TRUSTED (1 MiB) to
 *                     anyone else, is not written yet: a client that
 *                     does not read what it asked for holds itself, and
 *                     is closed HTTP_IDLE_MS after (a stranger at its
 *                     login deadline). A stranger's pipelined requests
 *                     cost 16 KiB, not max_outbuf each.
 */
#define HTTP_MAX_HEAD (64 * 1024)
#define HTTP_MAX_HEADERS 64
#define HTTP_HEAD_MS 10000
#define HTTP_BODY_MS 60000
#define HTTP_IDLE_MS 60000
#define HTTP_SSE_PING_MS 15000
#define HTTP_DEFAULT_MAX_CONNECTIONS 1024
#define HTTP_READ_CHUNK (64 * 1024)
#define HTTP_HOLD_UNTRUSTED (16 * 1024)
#define HTTP_HOLD_TRUSTED (1024 * 1024)

/*
 * Sessions of the page (auth.c): a login URL's token is good for
 * HTTP_LOGIN_MS and one use ($BERTH_HTTP_LOGIN_MS overrides it, for
 * tests); a session it opens lasts HTTP_SESSION_MS ($BERTH_HTTP_SESSION_MS
 * likewise) or until its logout, and at most HTTP_MAX_SESSIONS are open
 * (a new one takes the place of the one that expires first), at most
 * HTTP_PRINCIPAL_SESSIONS of them one principal's (its new one takes the
 * place of its own oldest, so that no principal can push out another's).
 * A connection on which HTTP_AUTH_TRIES credentials failed is closed
 * after its answer.
 */
#define HTTP_LOGIN_MS (10LL * 60 * 1000)
#define HTTP_MAX_SESSIONS 64
#define HTTP_PRINCIPAL_SESSIONS 8
#define HTTP_SESSION_MS (7LL * 24 * 3600 * 1000)
#define HTTP_AUTH_TRIES 3
/* A session's id is HTTP_SESSION_PREFIX and 64 hex digits (256 random
 * bits), HTTP_SESSION_LEN characters: berthd knows its own sessions by
 * that shape even after a restart has forgotten them (auth.c). */
#define HTTP_SESSION_PREFIX "berth-session-"
#define HTTP_SESSION_LEN (sizeof HTTP_SESSION_PREFIX - 1 + 64)

struct http_metrics;

struct api_principal;

struct http_session {
	char id[HTTP_SESSION_LEN + 1]; /* "" when the slot is free */
	char ended[HTTP_SESSION_LEN + 1]; /* the last session that held the slot and ended
			       (logged out, replaced), told apart from a
			       wrong token */
	uint64_t expires;   /* uv_now */
	uint64_t gen;       /* which session holds the slot (http->session_gen
			       when it opened): a slot is used again */
	/* Who it acts as (borrowed from the api): the principal whose token
	 * opened it, or berthd's own user for the login URL's. */
	const struct api_principal *principal;
};

struct http {
	uv_loop_t *loop;
	struct api *api;
	struct worker *worker;
	struct store *store;
	struct http_config cfg;

	char origin[160];     /* "http://HOST:PORT", as printed */
	char login_token[65]; /* the one-time token of the login URL */
	uint64_t login_expires; /* uv_now */
	int64_t login_ms;     /* its lifetime */
	char spent_token[65]; /* the one used last, to say so */
	struct http_session sessions[HTTP_MAX_SESSIONS];
	uint64_t session_gen; /* of the newest session */
	int64_t session_ms;   /* a session's lifetime */

	size_t max_body;      /* the api's limits (api_local_limits) */
	int max_depth;
	size_t max_outbuf;

	uv_tcp_t listener;
	bool bound;
	uv_check_t check;     /* ends a commit batch for the metrics, and a
				 turn's burst of accepts */
	bool check_started;
	int accepted;         /* connections accepted in this loop turn */
	bool deferred;        /* one waits to be accepted */
	uv_idle_t accept_later; /* accepts it on the next turn */
	struct http_metrics *metrics;

	struct http_conn *conns;
	size_t nconns;
	/* Strangers' connections, oldest first (the bounds above). */
	struct http_conn *unauth_head, *unauth_tail;
	size_t nunauth;

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

struct http_route;

/* The current request; every string is an offset into c->buf, NUL-ended
 * in place by the parser (offset 0, the method's, means none for the
 * others). */
struct http_request {
	uint32_t method, target; /* target: its path once query is cut */
	uint32_t authority;     /* an absolute-form target's HOST[:PORT], which
				   stands for Host (RFC 9112 3.2.2), or 0 */
	uint32_t query;         /* after "?", or 0 */
	uint32_t job;           /* /api/jobs/{id}...: the id, or 0 */
	const char *action;     /* /api/jobs/{id}/ACTION, or NULL */
	const struct http_route *route; /* found by http_route_head */
	int asset;              /* the asset served by the route, or -1 */
	int minor;              /* HTTP/1.minor */
	bool head_only;         /* HEAD: a GET answered without its body */
	struct http_header headers[HTTP_MAX_HEADERS];
	int nheaders;
	size_t head_len;        /* bytes of request line and headers */
	size_t body_len;        /* Content-Length */
};

struct http_conn {
	struct http *http;
	uv_tcp_t tcp;
	uv_timer_t timer;       /* deadlines; event-stream pings */
	int state;              /* enum http_conn_state */
	int handles;            /* tcp and timer; freed at zero */
	struct sockaddr_storage peer;
	uint64_t accepted;      /* uv_now at accept */
	uint64_t waiting_since; /* uv_now when it began to wait for the
				   current request */
	uint64_t head_started;  /* uv_now of the first byte of the current
				   head, 0 before it */
	uint64_t body_started;  /* uv_now when its head was accepted */
	bool trusted;           /* a request of it passed the auth check */
	int auth_failures;      /* credentials that failed on it */
	struct http_conn *unauth_prev, *unauth_next; /* in http->unauth_*
							while a stranger */

	char *buf;              /* bytes read and not yet consumed */
	size_t len, cap;
	size_t scanned;         /* buf[0..scanned) holds no end of head */
	bool have_head;         /* req holds a parsed head, which passed
				   http_route_head */
	struct http_request req;
	bool keep_alive;        /* after the current response */
	bool eof;               /* the client sent all it will send */
	bool reading;           /* uv_read_start is in effect */
	bool shutting_down;     /* closing once the writes are out */
	bool long_poll;         /* the request waits (jobs/wait, events/poll
				   with waitMs): a client that hangs up
				   ends it */
	bool held;              /* the next request waits for responses to
				   be written (pipelining, above) */
	uint64_t held_since;    /* uv_now when it began to wait so */
	/* The longest write queued since the queue was last empty: it
	 * counts on top of max_outbuf (conn_write). */
	size_t out_big;

	/* The api connection of this client (api/local.h), opened at its
	 * first API request; want_id is the id of the reply it waits for
	 * (0: none). */
	struct api_conn *local;
	int64_t next_id, want_id;
	int ok_status;          /* status of a successful reply */
	bool sse;               /* the request is an event stream */
	bool in_dispatch;       /* inside route dispatch: the next request
				   is parsed when it returns */
	int auth;               /* enum http_auth of the current request */
	/* The principal of the current request's credentials (borrowed):
	 * its requests run as it on the local connection. */
	const struct api_principal *principal;
	/* The session of the current request's credentials (HTTP_AUTH_SESSION),
	 * or NULL: an event stream or a wait the request opens ends when the
	 * session does (logout, its place taken, expiry), which session_gen
	 * (its gen then) and session_expires (uv_now) tell. */
	const struct http_session *session;
	uint64_t session_gen, session_expires;
	int64_t retry_ms;       /* HTTP_AUTH_THROTTLED: when to try again */

	struct http_conn *prev, *next; /* in http->conns */
};

/* http_handle_closed is called by the close of every handle the gateway
 * counts in handles; http_stop finishes once none is left. */
void http_handle_closed(struct http *h);

/* ---- conn.c ---------------------------------------------------------- */

void http_conn_accept(struct http *h);
void http_conn_close(struct http_conn *c);
/* http_conn_end_session closes the connections whose event stream or
 * wait session s (which is ending) opened. */
void http_conn_end_session(struct http *h, const struct http_session *s);

/* http_header_get returns the value of the current request's header name
 * (case-insensitive), or NULL; borrowed from c->buf. */
const char *http_header_get(const struct http_conn *c, const char *name);

/* http_request_host returns the host the current request names: an
 * absolute-form target's authority, else its Host header, or NULL. */
const char *http_request_host(const struct http_conn *c);

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

/* http_conn_trust marks c as a connection with credentials: it is no
 * longer a stranger's (the bounds above). */
void http_conn_trust(struct http_conn *c);

/* ---- routes.c -------------------------------------------------------- */

/* http_route_head judges the request in c->req by its head alone (the
 * route, the method, auth, cross-site rules), before any of its body is
 * read. Returns 0 to read the body and go on with http_route, or -1 after
 * answering. */
int http_route_head(struct http_conn *c);

/* http_route answers the request in c->req (now or later), once its
 * body is read. */
void http_route(struct http_conn *c);

/* http_api_message is the sink of c's local api connection. */
int http_api_message(void *arg, const json_t *msg);

/* ---- auth.c ---------------------------------------------------------- */

enum http_auth {
	HTTP_AUTH_NONE = 0, /* no credentials */
	HTTP_AUTH_OPEN,     /* --http-open */
	HTTP_AUTH_BEARER,   /* Authorization: Bearer with --token-file's */
	HTTP_AUTH_SESSION,  /* Authorization: Bearer with a session's */
	HTTP_AUTH_LOGIN,    /* Authorization: Bearer with the login URL's
			       token, which only opens a session */
	HTTP_AUTH_WRONG,    /* a token that is none of these */
	HTTP_AUTH_EXPIRED,  /* the login URL's token, too late or spent */
	HTTP_AUTH_ENDED,    /* a session's that ended: no guess */
	HTTP_AUTH_UNKNOWN,  /* of a session's shape, but none this berthd
			       gave (it restarted since): no guess */
	HTTP_AUTH_THROTTLED, /* not looked at: too many failed lately
				(c->retry_ms) */
};

/* http_auth_check judges the credentials of c's current request (auth.c
 * says how) and returns enum http_auth, with c->principal the principal
 * they stand for (OPEN, BEARER, SESSION; LOGIN: berthd's own user's); a
 * wrong token is logged and counted there. */
int http_auth_check(struct http_conn *c);
/* http_csrf_ok is true when a state-changing request may come from where
 * it comes from (auth.c explains the rules); *why is set when not. */
bool http_csrf_ok(struct http_conn *c, int auth, const char **why);
/* http_host_ok is false for a Host header an --http-open gateway must
 * refuse (DNS rebinding). */
bool http_host_ok(struct http_conn *c);
/* http_session_open opens a session for c's request (whose auth is
 * auth), spending the login URL's token when that was it: its id in sid and its end in *expires (ms since the epoch); returns 0, or -1
 * when out of randomness. */
int http_session_open(struct http_conn *c, int auth,
		      char sid[HTTP_SESSION_LEN + 1],
		      int64_t *expires);
/* http_session_close ends the session c's request carries; returns 0, or
 * -1 when it carries none. *ended is its slot, whose gen is kept, for
 * http_conn_end_session to close what it opened once the logout is
 * answered. */
int http_session_close(struct http_conn *c, const struct http_session **ended);
int http_auth_init(struct http *h, char **errmsg);
void http_auth_finish(struct http *h);
/* http_login_url logs where to log in (the login URL, with its token). */
void http_login_url(struct http *h, const char *why);
/* http_random_hex fills out with 2n hex digits and a NUL. */
int http_random_hex(char *out, size_t n);

/* ---- metrics.c ------------------------------------------------------- */

struct http_metrics *http_metrics_create(struct store *st, struct worker *w,
					 struct api *api);
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

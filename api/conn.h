/*
 * conn.h: a client connection, the requests it has in flight, and the one
 * way replies leave (api_reply, api_reply_error).
 *
 * A connection is a small state machine:
 *
 *   OPEN ──EOF, or refused at accept──► DRAINING ──replies written──► CLOSING
 *     │                                                                 │
 *     └──error, a client that does not read, api_stop──► CLOSING ──► CLOSED
 *
 * OPEN reads and answers requests; it may be paused (reading stopped)
 * while too much of what it asked is unanswered, and goes on once the
 * answers drain, as a TCP peer expects. DRAINING reads no more but still
 * sends the replies of requests in flight, then closes. CLOSING has
 * called uv_close: nothing is sent any more, and the close callback
 * cancels the connection's waits, subscriptions and outgoing calls.
 * CLOSED has no handle; the struct lives on only while requests handed to
 * the worker still point at it (refs), and is freed when the last one is
 * answered.
 *
 * A client that closes its side (EOF) still gets the answers of what it
 * sent, unless it is gone entirely: a Unix peer that closed (POLLHUP) is
 * closed at once, its waits dropped; TCP cannot tell a close from a
 * half-close, so there the waits end at once, answered as if their time
 * were up, and the connection closes once that is written.
 *
 * The bounds, and why they are what they are (api_config's defaults):
 *   max_line     16 MiB: a tool's input or resume data can be large, but a
 *                line is held whole while it is parsed, so it is bounded.
 *   max_depth    64: far beyond any real payload, far below what would
 *                strain a recursive parser.
 *   API_MAX_BATCH 1000 elements: a batch is answered with one array held
 *                whole; beyond this it is refused before it is parsed.
 *   max_inflight 1024 unanswered requests: each may hold a long-poll wait
 *                and a timer; at this many the connection is not read
 *                until three quarters of them are answered.
 *   max_outbuf   64 MiB of unwritten replies: a client that stops reading
 *                is cut off there (besides its longest reply, which
 *                a client that reads must be able to get however long),
 *                so it can never make berthd hold the whole event log
 *                in memory or slow anyone else.
 * Before server/auth (TCP), a connection is a stranger's, and costs
 * little:
 *   API_UNAUTH_LINE  64 KiB of line (a server/auth needs 4 KiB at most);
 *   API_UNAUTH_OUT   16 KiB of unread replies, past which it is not read;
 *   login_ms     10 s to succeed with server/auth, else it is closed;
 *   max_unauth   256 such connections at once: a new one closes the
 *                oldest, so that strangers who hold connections open can
 *                keep no one with the token out for longer than it takes
 *                to authenticate. Unix peers that pass the peer check are
 *                never refused; TCP connections are max_connections in
 *                all.
 */
#ifndef BERTH_API_CONN_H
#define BERTH_API_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <jansson.h>
#include <uv.h>

#include "api/frame.h"
#include "api/server.h"

/* A subscription's replay pauses while this much is queued for its client
 * and goes on once the queue drains below it, so that replaying a long log
 * to a slow reader never comes near max_outbuf. */
#define API_REPLAY_HIGH_WATER (1024 * 1024)

/* A connection's gathered messages are written as soon as they reach this
 * much, without waiting for the end of the loop turn: a turn that answers
 * a large batch or replays a log then holds at most this much per
 * connection beyond what the socket took, and a replay's high water is
 * still reached through the write queue. */
#define API_OUT_FLUSH (64 * 1024)

#define API_MAX_BATCH 1000
#define API_UNAUTH_LINE (64 * 1024)
#define API_UNAUTH_OUT (16 * 1024)

enum api_conn_state {
	API_CONN_OPEN = 0,
	API_CONN_DRAINING,
	API_CONN_CLOSING,
	API_CONN_CLOSED,
};

enum api_transport {
	API_TRANSPORT_UNIX = 0,
	API_TRANSPORT_TCP,
	API_TRANSPORT_LOCAL, /* no socket: messages go to sink (local.h) */
};

struct api_call;
struct api_principal;
struct worker_actor;

struct api_conn {
	struct api *api;
	union {
		uv_handle_t handle;
		uv_stream_t stream;
		uv_pipe_t pipe;
		uv_tcp_t tcp;
		uv_idle_t idle; /* API_TRANSPORT_LOCAL: never started; it
				   only gives closing its usual path */
	} h;
	int state;        /* enum api_conn_state */
	int transport;    /* enum api_transport */
	bool authed;      /* TCP: server/auth succeeded; Unix: always */
	/* Who the connection acts as (principal.h; borrowed from the api's
	 * set): set when it is authed, and again by a server/auth with a
	 * principal's token; per request on a local connection. And how it
	 * came, for the audit: "socket", "tcp", "http", or "mcp" once MCP's
	 * initialize came, with client the MCP clientInfo's {name,
	 * version} (owned). */
	const struct api_principal *principal;
	const char *via;
	json_t *client;
	bool paused;      /* OPEN, but not read until replies drain */
	bool resume_due;  /* a pause may end: looked at before the loop
			     blocks (api_conn_flush_all) */
	uint64_t id;      /* for log lines */
	int refs;         /* the handle's, and one per request or batch */
	int inflight;     /* requests not yet answered */
	int auth_failures; /* server/auth refused on this connection */
	struct api_frame frame;
	struct sockaddr_storage peer; /* TCP: its address; Unix: AF_UNIX */
	uint64_t accepted; /* uv_now at accept */
	struct api_conn *unauth_prev, *unauth_next; /* in api->unauth, while
						       a TCP client has not
						       authenticated */

	uint64_t next_call_id;   /* ids of our own requests to the client */
	struct api_call *calls;  /* our requests awaiting the client's answer */
	int ncalls;              /* how many */
	struct api_sub *subs;    /* this connection's subscriptions */
	int nsubs;
	struct api_wait *waits;  /* this connection's long-poll waits */
	bool replay_blocked;     /* a subscription waits for the writes to
				    drain before it replays more */

	/* A worker process's registration (api/workers.c, docs/WORKERS.md):
	 * set by worker/register, handed to worker_remote_detach when the
	 * connection closes, before its outgoing calls are cancelled, with
	 * close_why (NULL: it closed). heard is the loop time anything was
	 * last read from the client (its heartbeat). */
	struct worker_remote *remote;
	const char *close_why;
	uint64_t heard;

	/* Per-connection state of another protocol layered on the same
	 * methods (MCP: the negotiated version, client capabilities),
	 * freed with ext_free when the connection closes. */
	void *ext;
	void (*ext_free)(void *ext);

	/* API_TRANSPORT_LOCAL: every message for the client goes to
	 * sink(sink_arg, msg) (msg borrowed), and sink_pending(sink_arg)
	 * tells how much of it the client has yet to take. */
	int (*sink)(void *arg, const json_t *msg);
	size_t (*sink_pending)(void *arg);
	void *sink_arg;

	/* Messages for the client not yet handed to the socket: they are
	 * gathered per loop turn and written with one write when the loop
	 * is about to block (api_conn_flush_all), or at once when they
	 * reach API_OUT_FLUSH. They count towards max_outbuf. */
	char *out;
	size_t out_len, out_cap;
	/* The longest message queued since the queue was last empty: it
	 * counts on top of max_outbuf (conn_over_cap). */
	size_t out_big;
	bool dirty;                   /* in api->dirty, holding a ref */
	struct api_conn *dirty_next;

	struct api_conn *prev, *next; /* in api->conns */
};

struct api_batch;
struct api_method;

/*
 * struct api_req is one request in flight. A handler answers it exactly
 * once, now or later, with api_reply or api_reply_error, which free it.
 * id is NULL for a notification, whose answer is dropped.
 */
struct api_req {
	struct api_conn *conn;
	struct api_batch *batch;        /* NULL unless part of a batch */
	json_t *id;                     /* owned, or NULL */
	json_t *params;                 /* owned; {} when absent */
	const struct api_method *method;
};

/* api_conn_start prepares the api's timers of connections (the login
 * deadline, the hang-up check); api_conn_stop closes them. */
void api_conn_start(struct api *a);
void api_conn_stop(struct api *a);

/* api_conn_accept accepts a client of listener, checks its peer and the
 * connection limit, and starts reading. Errors are logged, never fatal. */
void api_conn_accept(struct api *a, uv_stream_t *listener, int transport);

/* api_conn_dispatch answers msg (borrowed): a JSON-RPC message or a
 * batch, as if c had sent it as one line. */
void api_conn_dispatch(struct api_conn *c, json_t *msg);

/* api_conn_close starts closing c (idempotent). */
void api_conn_close(struct api_conn *c);

/* api_conn_authed marks c as authenticated as p (borrowed; server/auth
 * succeeded): it leaves the strangers' list and its limits, and gets the
 * full ones. */
void api_conn_authed(struct api_conn *c, const struct api_principal *p);

/* api_conn_actor fills *out with who asks through c and how (for the
 * worker's audit and approval policy); its strings are borrowed from c
 * and its principal. */
void api_conn_actor(const struct api_conn *c, struct worker_actor *out);

/* api_conn_drain reads no more from c: it closes once the replies of what
 * it sent are written (server/auth refused it too often). */
void api_conn_drain(struct api_conn *c);

/* api_conn_live is true while c may still send (OPEN or DRAINING). */
bool api_conn_live(const struct api_conn *c);

/* api_conn_send_text queues head then tail (hlen and tlen bytes,
 * borrowed, a JSON text without its newline once joined) as one line, like
 * api_conn_send: a message serialized once can go to many connections with
 * a part of its own for each. */
int api_conn_send_text(struct api_conn *c, const char *head, size_t hlen,
		       const char *tail, size_t tlen);

/* api_conn_flush_all writes what every connection gathered in this loop
 * turn; the api's prepare handle calls it before the loop blocks. */
void api_conn_flush_all(struct api *a);

/* api_conn_send writes msg (borrowed) as one line. Returns 0, or a
 * negative code when c is not live or msg could not be written; a client
 * over max_outbuf is closed. */
int api_conn_send(struct api_conn *c, const json_t *msg);

/* api_conn_pending_bytes returns the bytes queued for c and not yet
 * written. */
size_t api_conn_pending_bytes(const struct api_conn *c);

/*
 * api_conn_call sends a request of our own to the client (an MCP server
 * asks its client for elicitation/create this way) with params (stolen,
 * may be NULL) and calls fn(arg, result, error) when the client answers:
 * result or error is set (borrowed). When c closes first, fn gets both
 * NULL. Returns 0, or a negative code, in which case fn is never called.
 */
typedef void (*api_call_fn)(void *arg, json_t *result, json_t *error);
int api_conn_call(struct api_conn *c, const char *method, json_t *params,
		  api_call_fn fn, void *arg);

/* api_reply answers r with result (stolen) and frees r. */
void api_reply(struct api_req *r, json_t *result);
/* api_reply_text answers r with result, a JSON text of len bytes
 * (borrowed), without parsing it, and frees r: returns true. When r cannot
 * be answered as text (in a batch, on a local connection, or dead) it
 * does nothing and returns false; the caller answers with api_reply. */
bool api_reply_text(struct api_req *r, const char *result, size_t len);

/* api_reply_error answers r with an error object {code, message, data?}
 * (data stolen, may be NULL) and frees r. */
void api_reply_error(struct api_req *r, int code, const char *message,
		     json_t *data);

/* api_req_drop frees r without an answer (its connection is gone). */
void api_req_drop(struct api_req *r);

/* api_req_dead is true when r's answer can no longer reach anyone; a
 * callback checks it before doing work for the reply. */
bool api_req_dead(const struct api_req *r);

#endif

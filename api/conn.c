/*
 * conn.c: client connections (conn.h): accepting and checking a peer,
 * framing, dispatch through the method table, batches, replies, and our
 * own requests to the client.
 */
#include "api/conn.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/auth.h"
#include "api/methods.h"
#include "api/principal.h"
#include "api/rpc.h"
#include "api/sub.h"
#include "api/wait.h"
#include "api/workers.h"
#include "log/log.h"
#include "store/jload.h"

/* A batch answers once, with one array, when its last element is
 * answered; elements that are notifications add nothing to it. */
struct api_batch {
	struct api_conn *conn;
	json_t *replies;
	int pending; /* elements dispatched and not yet answered */
	bool sealed; /* every element was dispatched */
};

/* One of our requests to the client, awaiting its answer. */
struct api_call {
	struct api_call *next;
	char id[32];
	api_call_fn fn;
	void *arg;
};

/* A write that uv_try_write could not finish at once. */
struct write_req {
	uv_write_t req;
	char *text; /* a connection's gathered messages (its out buffer) */
};


static char newline[] = "\n";

static void unauth_remove(struct api_conn *c);

static void conn_log(const struct api_conn *c, const char *what)
{
	log_info("connection %llu: %s",
		(unsigned long long)c->id, what);
}

/* conn_dropped logs a connection berthd itself cuts off, at warn: a client
 * lost its connection and may not know why. */
static void conn_dropped(const struct api_conn *c, const char *why)
{
	log_warn("connection %llu: dropped: %s", (unsigned long long)c->id,
		 why);
}

/* log_refused logs the connections closed past the connection limits
 * (make_room), at most one line a second with the count since the last
 * one, so that a flood of connections cannot flood the log too. */
static void log_refused(struct api *a)
{
	static uint64_t last_ms, count;
	uint64_t now = uv_now(a->loop);

	count++;
	if (last_ms && now - last_ms < 1000)
		return;
	log_warn("connections dropped: %llu closed past the limits of %d "
		 "connections and %d waiting for server/auth%s",
		 (unsigned long long)count, a->cfg.max_connections,
		 a->cfg.max_unauth, last_ms ? " since the last such line" : "");
	last_ms = now;
	count = 0;
}

/* conn_debug is conn_log for what a flood of strangers causes, which must
 * not become a flood of log lines at the default level. */
static void conn_debug(const struct api_conn *c, const char *what)
{
	log_debug("connection %llu: %s", (unsigned long long)c->id, what);
}

static void conn_unref(struct api_conn *c)
{
	if (--c->refs == 0) {
		api_frame_finish(&c->frame);
		free(c->out);
		free(c);
	}
}

bool api_conn_live(const struct api_conn *c)
{
	return c->state == API_CONN_OPEN || c->state == API_CONN_DRAINING;
}

size_t api_conn_pending_bytes(const struct api_conn *c)
{
	if (!api_conn_live(c))
		return 0;
	if (c->transport == API_TRANSPORT_LOCAL)
		return c->sink_pending ? c->sink_pending(c->sink_arg) : 0;
	return uv_stream_get_write_queue_size(&c->h.stream) + c->out_len;
}

static void on_close(uv_handle_t *h)
{
	struct api_conn *c = h->data;
	struct api *a = c->api;

	c->state = API_CONN_CLOSED;
	log_debug("connection %llu: closed", (unsigned long long)c->id);
	if (c->prev)
		c->prev->next = c->next;
	else
		a->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	a->nconns--;

	api_wait_cancel_conn(c);
	api_sub_cancel_conn(c);
	/* A worker process's runs end by their tools' onInterrupt before
	 * the "run" requests they wait on are cancelled below. */
	if (c->remote)
		api_workers_closed(c);
	while (c->calls) {
		struct api_call *call = c->calls;

		c->calls = call->next;
		c->ncalls--;
		call->fn(call->arg, NULL, NULL);
		free(call);
	}
	if (c->ext_free)
		c->ext_free(c->ext);
	c->ext = NULL;
	json_decref(c->client);
	c->client = NULL;
	api_frame_finish(&c->frame);
	conn_unref(c);
	api_handle_closed(a);
}

void api_conn_close(struct api_conn *c)
{
	if (c->state >= API_CONN_CLOSING)
		return;
	c->state = API_CONN_CLOSING;
	/* It holds no place under the caps from now on, though its
	 * handle closes on a later turn. */
	if (c->transport == API_TRANSPORT_TCP)
		c->api->ntcp--;
	unauth_remove(c);
	uv_close(&c->h.handle, on_close);
}

/* conn_maybe_finish closes a draining connection once it owes nothing:
 * no request is unanswered and every reply is written. */
static void conn_maybe_finish(struct api_conn *c)
{
	if (c->state == API_CONN_DRAINING && c->inflight == 0 &&
	    api_conn_pending_bytes(c) == 0)
		api_conn_close(c);
}

static void conn_poke(struct api_conn *c);

static void on_write(uv_write_t *req, int status)
{
	struct write_req *wr = (struct write_req *)req;
	struct api_conn *c = req->handle->data;

	free(wr->text);
	free(wr);
	if (status < 0) {
		api_conn_close(c);
		return;
	}
	if (c->replay_blocked && api_conn_pending_bytes(c) < API_REPLAY_HIGH_WATER)
		api_sub_resume(c);
	conn_poke(c);
	conn_maybe_finish(c);
}

/* conn_flush writes what c gathered with one write. Most of it is written
 * at once, without a copy or a request; what the socket does not take is
 * queued with the buffer itself, and a new one is gathered. Returns 0, or
 * a negative error after which c is closing. */
static int conn_flush(struct api_conn *c)
{
	struct write_req *wr;
	uv_buf_t buf;
	size_t len = c->out_len, off = 0;
	int n, rc;

	if (!len)
		return 0;
	if (uv_stream_get_write_queue_size(&c->h.stream) == 0) {
		buf = uv_buf_init(c->out, (unsigned)len);
		n = uv_try_write(&c->h.stream, &buf, 1);
		if (n == (int)len) {
			c->out_len = 0;
			if (c->out_cap > API_OUT_FLUSH) {
				/* A burst's buffer is not kept. */
				free(c->out);
				c->out = NULL;
				c->out_cap = 0;
			}
			/* A stranger paused on its unread replies has read
			 * them: no on_write will come to say so. */
			conn_poke(c);
			return 0;
		}
		if (n < 0 && n != UV_EAGAIN) {
			api_conn_close(c);
			return n;
		}
		if (n > 0)
			off = (size_t)n;
	}
	wr = malloc(sizeof *wr);
	if (!wr) {
		api_conn_close(c);
		return -ENOMEM;
	}
	wr->text = c->out;
	c->out = NULL;
	c->out_len = c->out_cap = 0;
	buf = uv_buf_init(wr->text + off, (unsigned)(len - off));
	wr->req.data = NULL;
	rc = uv_write(&wr->req, &c->h.stream, &buf, 1, on_write);
	if (rc < 0) {
		free(wr->text);
		free(wr);
		api_conn_close(c);
		return rc;
	}
	return 0;
}

/* conn_over_cap closes c when what it has not read exceeds max_outbuf
 * besides its largest reply: one reply, however long, is not a client
 * that does not read. */
static int conn_over_cap(struct api_conn *c)
{
	if (api_conn_pending_bytes(c) <= c->api->cfg.max_outbuf + c->out_big)
		return 0;
	/* The client does not read what it asked for. It is cut off here,
	 * so that it costs at most max_outbuf and nobody else waits for
	 * it. */
	conn_dropped(c, "it does not read its replies");
	api_conn_close(c);
	return -ENOBUFS;
}

static void on_flush(uv_prepare_t *h)
{
	api_conn_flush_all(h->data);
}

static void conn_resume(struct api_conn *c);

void api_conn_flush_all(struct api *a)
{
	/* Resuming a replay below can gather more; it is written in this
	 * same call, since the loop computes its poll timeout after the
	 * prepare handles ran and would block with it unwritten. */
	while (a->dirty) {
		struct api_conn *c = a->dirty, *next;

		a->dirty = NULL;
		for (; c; c = next) {
			next = c->dirty_next;
			c->dirty_next = NULL;
			c->dirty = false;
			if (api_conn_live(c) && conn_flush(c) == 0 &&
			    conn_over_cap(c) == 0) {
				if (c->replay_blocked &&
				    api_conn_pending_bytes(c) <
					    API_REPLAY_HIGH_WATER)
					api_sub_resume(c);
				conn_maybe_finish(c);
			}
			if (c->resume_due) {
				c->resume_due = false;
				if (c->state == API_CONN_OPEN && c->paused)
					conn_resume(c);
			}
			conn_unref(c);
		}
	}
	if (!uv_is_closing((uv_handle_t *)&a->flush))
		uv_prepare_stop(&a->flush);
}

/* out_reserve makes room for extra more bytes in c's buffer. */
static int out_reserve(struct api_conn *c, size_t extra)
{
	size_t cap = c->out_cap ? c->out_cap : 4096;
	char *p;

	if (c->out_len + extra <= c->out_cap)
		return 0;
	while (cap < c->out_len + extra)
		cap *= 2;
	p = realloc(c->out, cap);
	if (!p)
		return -ENOMEM;
	c->out = p;
	c->out_cap = cap;
	return 0;
}

static int out_dump(const char *buf, size_t size, void *data)
{
	struct api_conn *c = data;

	if (out_reserve(c, size))
		return -1;
	memcpy(c->out + c->out_len, buf, size);
	c->out_len += size;
	return 0;
}

/* mark_dirty lists c for api_conn_flush_all before the loop blocks. */
static void mark_dirty(struct api_conn *c)
{
	struct api *a = c->api;

	if (c->dirty)
		return;
	c->dirty = true;
	c->refs++;
	c->dirty_next = a->dirty;
	a->dirty = c;
	if (!uv_is_closing((uv_handle_t *)&a->flush))
		uv_prepare_start(&a->flush, on_flush);
}

/* conn_queued finishes a message of len bytes appended to c's buffer: it
 * ends the line, marks c for the flush before the loop blocks, writes at
 * once past API_OUT_FLUSH, and applies max_outbuf. */
static int conn_queued(struct api_conn *c, size_t len)
{
	size_t before = api_conn_pending_bytes(c) - len;
	int rc;

	if (out_dump(newline, 1, c)) {
		api_conn_close(c);
		return -ENOMEM;
	}
	/* The largest of the replies queued since the queue was empty. */
	if (before == 0 || len + 1 > c->out_big)
		c->out_big = len + 1;
	mark_dirty(c);
	if (c->out_len >= API_OUT_FLUSH && (rc = conn_flush(c)))
		return rc;
	return conn_over_cap(c);
}

int api_conn_send_text(struct api_conn *c, const char *head, size_t hlen,
		       const char *tail, size_t tlen)
{
	json_t *msg;
	char *text;
	int rc;

	if (!api_conn_live(c))
		return -EPIPE;
	if (c->transport == API_TRANSPORT_LOCAL) {
		/* The sink takes a tree; local clients are few. */
		text = malloc(hlen + tlen);
		msg = text ? (memcpy(text, head, hlen),
			      memcpy(text + hlen, tail, tlen),
			      store_json_load(text, hlen + tlen, 0, NULL))
			   : NULL;
		free(text);
		if (!msg)
			return -ENOMEM;
		rc = c->sink(c->sink_arg, msg);
		json_decref(msg);
		return rc;
	}
	if (out_dump(head, hlen, c) || out_dump(tail, tlen, c)) {
		api_conn_close(c);
		return -ENOMEM;
	}
	return conn_queued(c, hlen + tlen);
}

int api_conn_send(struct api_conn *c, const json_t *msg)
{
	char *text;
	size_t len;

	if (!api_conn_live(c))
		return -EPIPE;
	if (c->transport == API_TRANSPORT_LOCAL)
		return c->sink(c->sink_arg, msg);
	/* store_json_text is the writer's serializer: the same text as
	 * json_dumps, at a fraction of its instructions. */
	text = store_json_text((json_t *)msg);
	len = text ? strlen(text) : 0;
	if (!text || out_dump(text, len, c)) {
		free(text);
		api_conn_close(c);
		return -ENOMEM;
	}
	free(text);
	return conn_queued(c, len);
}

/* send_error sends a JSON-RPC error outside any request (a parse error,
 * an invalid request, a refusal). data is stolen. */
static void send_error(struct api_conn *c, struct api_batch *b, json_t *id,
		       int code, const char *message, json_t *data)
{
	json_t *msg = api_rpc_error(id, code, message, data);

	if (!msg)
		return;
	if (b)
		json_array_append_new(b->replies, msg);
	else {
		api_conn_send(c, msg);
		json_decref(msg);
	}
}

/* hex4 reads the 4 hex digits at p as a number, or -1. */
static long hex4(const char *p)
{
	long v = 0;

	for (int i = 0; i < 4; i++) {
		int ch = (unsigned char)p[i], d;

		if (ch >= '0' && ch <= '9')
			d = ch - '0';
		else if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f')
			d = (ch | 0x20) - 'a' + 10;
		else
			return -1;
		v = v * 16 + d;
	}
	return v;
}

/* lone_surrogates returns a malloc'd copy of line whose escapes of lone
 * UTF-16 surrogates (a \uD800 without its pair, which jansson refuses
 * as it refuses a \u0000) are \uFFFD, of the same length, with *first
 * the column of the first; NULL when there is none (or no memory).
 * Escapes appear only in strings, so each backslash starts one. */
static char *lone_surrogates(const char *line, size_t len, size_t *first)
{
	char *copy = NULL;

	for (size_t i = 0; i + 1 < len; i++) {
		long u, low;

		if (line[i] != '\\')
			continue;
		if (line[i + 1] != 'u' || i + 6 > len) {
			i++;
			continue;
		}
		u = hex4(line + i + 2);
		if (u >= 0xD800 && u <= 0xDBFF && i + 12 <= len &&
		    line[i + 6] == '\\' && line[i + 7] == 'u' &&
		    (low = hex4(line + i + 8)) >= 0xDC00 && low <= 0xDFFF) {
			i += 11; /* a pair */
			continue;
		}
		if (u >= 0xD800 && u <= 0xDFFF) {
			if (!copy) {
				if (!(copy = malloc(len)))
					return NULL;
				memcpy(copy, line, len);
				*first = i + 1;
			}
			memcpy(copy + i + 2, "FFFD", 4);
		}
		i += 5;
	}
	return copy;
}

/*
 * not_loaded answers a line that jansson did not load (jerr: its error;
 * store_json_load leaves every text that is not valid JSON to json_loadb).
 * Most such lines are not JSON: -32700, id null. Some are JSON that berth
 * does not take, a \u0000 in a string or an integer beyond 64 bits (which
 * JavaScript's JSON.stringify writes for 2 ** 63), a lone UTF-16
 * surrogate (what JavaScript's slice of a string may leave): -32600, and
 * a request among them gets it with its own id, so that its client learns
 * which request failed instead of waiting for it. A notification is not
 * answered; a response or a batch gets it with id null.
 */
static void not_loaded(struct api_conn *c, const char *line, size_t len,
		       const json_error_t *jerr)
{
	json_error_t again;
	json_t *v, *id = NULL;
	bool reals = false; /* every integer read as a real */
	bool exact;
	char text[512];
	double d;
	size_t lone_at = 0;
	char *patched = lone_surrogates(line, len, &lone_at);

	if (patched)
		line = patched;
	v = json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &again);
	if (!v) {
		v = json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL |
				   JSON_DECODE_INT_AS_REAL, &again);
		reals = true;
	}
	free(patched);
	if (!v) {
		snprintf(text, sizeof text, "parse error: %s at column %d",
			 jerr->text, jerr->column);
		send_error(c, NULL, NULL, API_PARSE_ERROR, text, NULL);
		return;
	}
	if (json_is_object(v) && json_object_get(v, "method")) {
		if (!json_object_get(v, "id")) {
			json_decref(v);
			return; /* a notification */
		}
		id = api_rpc_id(v);
	}
	/* Read with every integer a real, an integer id is given back as
	 * the integer it was, or as null when a double does not hold it
	 * exactly (it may be the integer beyond 64 bits); every double past
	 * 2^53 is a whole number. */
	d = json_real_value(id); /* 0 unless a real */
	exact = d >= -9007199254740992.0 && d <= 9007199254740992.0;

	if (reals && json_is_real(id) && !exact)
		id = NULL;
	else if (reals && json_is_real(id) && d == (double)(json_int_t)d)
		id = json_integer((json_int_t)d);
	else
		json_incref(id);
	if (lone_at)
		snprintf(text, sizeof text, "invalid request: a lone UTF-16 "
			 "surrogate (an escape \\uD800 to \\uDFFF without its "
			 "pair) at column %zu: a string holds Unicode characters "
			 "only", lone_at);
	else
		snprintf(text, sizeof text, "invalid request: %s at column %d "
			 "(berth takes no \\u0000 in a string, and integers only "
			 "within 64 bits)", jerr->text, jerr->column);
	send_error(c, NULL, id, API_INVALID_REQUEST, text, NULL);
	json_decref(id);
	json_decref(v);
}

/* ---- batches ------------------------------------------------------------ */

static struct api_batch *batch_new(struct api_conn *c)
{
	struct api_batch *b = calloc(1, sizeof *b);

	if (!b)
		return NULL;
	b->replies = json_array();
	if (!b->replies) {
		free(b);
		return NULL;
	}
	b->conn = c;
	c->refs++;
	return b;
}

static void batch_maybe_done(struct api_batch *b)
{
	struct api_conn *c = b->conn;

	if (!b->sealed || b->pending > 0)
		return;
	/* A batch of notifications only gets no reply at all. */
	if (json_array_size(b->replies) > 0)
		api_conn_send(c, b->replies);
	json_decref(b->replies);
	free(b);
	conn_unref(c);
}

/* ---- requests and replies ----------------------------------------------- */

/* req_deliver hands r's reply msg (stolen, NULL for none) to its batch or
 * its connection, and frees r. */
static void req_deliver(struct api_req *r, json_t *msg)
{
	struct api_conn *c = r->conn;
	struct api_batch *b = r->batch;

	if (b) {
		if (msg)
			json_array_append_new(b->replies, msg);
		b->pending--;
	} else if (msg) {
		api_conn_send(c, msg);
		json_decref(msg);
	}
	json_decref(r->id);
	json_decref(r->params);
	free(r);
	c->inflight--;
	if (b)
		batch_maybe_done(b);
	if (api_conn_live(c)) {
		conn_poke(c);
		conn_maybe_finish(c);
	}
	conn_unref(c);
}

bool api_req_dead(const struct api_req *r)
{
	return r->id == NULL || !api_conn_live(r->conn);
}

void api_reply(struct api_req *r, json_t *result)
{
	json_t *msg = NULL;

	if (api_req_dead(r)) {
		json_decref(result);
	} else if (!result) {
		msg = api_rpc_error(r->id, API_INTERNAL_ERROR, "out of memory",
				    NULL);
	} else {
		msg = api_rpc_result(r->id, result);
	}
	req_deliver(r, msg);
}

bool api_reply_text(struct api_req *r, const char *result, size_t len)
{
	static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":";
	static const char mid[] = ",\"result\":";
	struct api_conn *c = r->conn;
	char *id;

	if (api_req_dead(r) || r->batch || c->transport == API_TRANSPORT_LOCAL)
		return false;
	/* The members in api_rpc_result's order. */
	id = store_json_text(r->id);
	if (!id)
		return false;
	if (out_dump(head, sizeof(head) - 1, c) ||
	    out_dump(id, strlen(id), c) || out_dump(mid, sizeof(mid) - 1, c) ||
	    out_dump(result, len, c) || out_dump("}", 1, c))
		api_conn_close(c);
	else
		conn_queued(c, sizeof(head) + strlen(id) + sizeof(mid) + len -
				       1);
	free(id);
	req_deliver(r, NULL);
	return true;
}

void api_reply_error(struct api_req *r, int code, const char *message,
		     json_t *data)
{
	json_t *msg = NULL;

	if (api_req_dead(r))
		json_decref(data);
	else
		msg = api_rpc_error(r->id, code, message, data);
	req_deliver(r, msg);
}

void api_req_drop(struct api_req *r)
{
	req_deliver(r, NULL);
}

/* ---- our requests to the client ----------------------------------------- */

int api_conn_call(struct api_conn *c, const char *method, json_t *params,
		  api_call_fn fn, void *arg)
{
	struct api_call *call;
	json_t *msg;
	int rc;

	if (!api_conn_live(c)) {
		json_decref(params);
		return -EPIPE;
	}
	call = calloc(1, sizeof *call);
	if (!call) {
		json_decref(params);
		return -ENOMEM;
	}
	/* A string id of our own, so that it can never be confused with a
	 * number the client uses for its requests. */
	snprintf(call->id, sizeof call->id, "berth-%llu",
		 (unsigned long long)++c->next_call_id);
	msg = json_pack("{s:s, s:s, s:s}", "jsonrpc", "2.0", "id", call->id,
			"method", method);
	if (!msg) {
		json_decref(params);
		free(call);
		return -ENOMEM;
	}
	if (params)
		json_object_set_new(msg, "params", params);
	rc = api_conn_send(c, msg);
	json_decref(msg);
	if (rc < 0) {
		free(call);
		return rc;
	}
	call->fn = fn;
	call->arg = arg;
	call->next = c->calls;
	c->calls = call;
	c->ncalls++;
	/* A request that now waits on the client's answer no longer counts
	 * as unanswered: a client paused on such requests is read again. */
	conn_poke(c);
	return 0;
}

/* take_response matches the client's answer msg to a request of ours;
 * an answer to nothing we asked is ignored. */
/* take_call unlinks and returns c's call of id (one of berthd's own
 * requests), or NULL. */
static struct api_call *take_call(struct api_conn *c, const char *id)
{
	for (struct api_call **p = &c->calls; id && *p; p = &(*p)->next) {
		struct api_call *call = *p;

		if (strcmp(call->id, id) != 0)
			continue;
		*p = call->next;
		c->ncalls--;
		return call;
	}
	return NULL;
}

static void take_response(struct api_conn *c, json_t *msg)
{
	struct api_call *call =
		take_call(c, json_string_value(json_object_get(msg, "id")));

	if (!call)
		return;
	call->fn(call->arg, json_object_get(msg, "result"),
		 json_object_get(msg, "error"));
	free(call);
}

/* take_shapeless answers one of berthd's own requests with msg, an
 * answer to it (its id) with neither result nor error: its callback gets
 * the whole message as the result, which no caller takes for a valid
 * answer (a run's ends invalid_answer, with the message in the job's
 * log). Returns false when msg answers none of them. */
static bool take_shapeless(struct api_conn *c, json_t *msg)
{
	struct api_call *call;

	if (json_object_get(msg, "method") ||
	    !(call = take_call(c, json_string_value(
					  json_object_get(msg, "id")))))
		return false;
	call->fn(call->arg, msg, NULL);
	free(call);
	return true;
}

/* ---- dispatch ----------------------------------------------------------- */

/*
 * dispatch_one answers one message (a line, or an element of a batch).
 * Everything a request must pass before its handler runs is checked here,
 * in this order: its shape (JSON-RPC 2.0), auth, the method's existence,
 * the caller's role against the method's table row, the connection's
 * in-flight limit, and the params against the row. A request refused
 * before its handler changes nothing.
 */
static void dispatch_one(struct api_conn *c, json_t *msg, struct api_batch *b)
{
	const struct api_method *m;
	const char *why, *name;
	json_t *id = api_rpc_id(msg), *params, *errors;
	struct api_req *r;
	char text[512];
	int kind = api_rpc_classify(msg, &why);

	switch (kind) {
	case API_MSG_RESPONSE:
		take_response(c, msg);
		return;
	case API_MSG_INVALID:
		if (!take_shapeless(c, msg))
			send_error(c, b, id, API_INVALID_REQUEST, why, NULL);
		return;
	case API_MSG_BAD_PARAMS:
		/* A well-formed notification whose params are not an object
		 * is still a notification: its error is dropped. */
		if (!json_object_get(msg, "id"))
			return;
		snprintf(text, sizeof text, "invalid params: %s", why);
		send_error(c, b, id, API_INVALID_PARAMS, text,
			   json_pack("{s:[{s:s, s:s, s:s}]}", "errors",
				     "instancePath", "", "keyword", "type",
				     "message", why));
		return;
	default:
		break;
	}
	if (kind == API_MSG_NOTIFICATION)
		id = NULL;
	name = json_string_value(json_object_get(msg, "method"));
	m = api_method_find(name);
	if ((!c->authed || !c->principal) &&
	    !(m && (m->flags & API_M_NOAUTH))) {
		api_refused(c->api, API_REFUSED_UNAUTHENTICATED);
		if (id)
			send_error(c, b, id, API_UNAUTHORIZED,
				   "unauthorized: call server/auth with the "
				   "token first",
				   json_pack("{s:s}", "reason",
					     "unauthenticated"));
		return;
	}
	if (!m) {
		if (id) {
			snprintf(text, sizeof text, "method not found: %.400s",
				 name);
			send_error(c, b, id, API_METHOD_NOT_FOUND, text, NULL);
		}
		return;
	}
	/* The one place roles are checked (the table's role column): a
	 * handler never runs for a caller outside its role, so nothing a
	 * refused request asks for can change anything. */
	if (!(m->flags & API_M_NOAUTH) &&
	    !(c->principal->roles & (m->role ? m->role : BERTH_ROLE_ADMIN))) {
		unsigned role = m->role ? m->role : BERTH_ROLE_ADMIN;
		/* A row that several roles open names the first. */
		const char *need = berth_role_name(role & -role);

		api_refused(c->api, API_REFUSED_FORBIDDEN);
		if (id) {
			snprintf(text, sizeof text, "forbidden: %.64s may not "
				 "call %.200s, which needs the role %s",
				 c->principal->name, name, need);
			send_error(c, b, id, API_UNAUTHORIZED, text,
				   json_pack("{s:s, s:s, s:s}", "reason",
					     "forbidden", "principal",
					     c->principal->name, "role",
					     need));
		}
		return;
	}
	/* A socket connection is not read while this many are unanswered
	 * (conn_should_pause), so only a local client, which cannot be
	 * paused, meets this limit. */
	if (c->transport == API_TRANSPORT_LOCAL &&
	    c->inflight >= c->api->cfg.max_inflight) {
		if (id)
			send_error(c, b, id, API_OVERLOADED,
				   "overloaded: too many unanswered requests "
				   "on this connection",
				   api_rpc_limit(c->api->cfg.max_inflight));
		return;
	}
	params = json_object_get(msg, "params");
	if (params)
		json_incref(params);
	else
		params = json_object();
	if (!params || api_params_check(m->params, params, &errors) < 0) {
		if (id) {
			json_t *first = json_array_get(errors, 0);
			const char *em = json_string_value(
				json_object_get(first, "message"));

			snprintf(text, sizeof text, "invalid params: %.400s",
				 em ? em : "out of memory");
			send_error(c, b, id, API_INVALID_PARAMS, text,
				   errors ? json_pack("{s:o}", "errors", errors)
					  : NULL);
		} else {
			json_decref(errors);
		}
		json_decref(params);
		return;
	}
	r = calloc(1, sizeof *r);
	if (!r) {
		json_decref(params);
		if (id)
			send_error(c, b, id, API_INTERNAL_ERROR,
				   "out of memory", NULL);
		return;
	}
	r->conn = c;
	r->batch = b;
	r->id = id ? json_incref(id) : NULL;
	r->params = params;
	r->method = m;
	c->inflight++;
	c->refs++;
	if (b)
		b->pending++;
	m->handler(r, params);
}

void api_conn_dispatch(struct api_conn *c, json_t *msg)
{
	struct api_batch *b;
	size_t i;
	json_t *el;

	if (!json_is_array(msg)) {
		dispatch_one(c, msg, NULL);
		return;
	}
	if (json_array_size(msg) == 0) {
		send_error(c, NULL, NULL, API_INVALID_REQUEST,
			   "an empty batch", NULL);
		return;
	}
	if (json_array_size(msg) > API_MAX_BATCH) {
		send_error(c, NULL, NULL, API_INVALID_REQUEST,
			   "invalid request: a batch of more than 1000 "
			   "requests", api_rpc_limit(API_MAX_BATCH));
		return;
	}
	b = batch_new(c);
	if (!b) {
		send_error(c, NULL, NULL, API_INTERNAL_ERROR, "out of memory",
			   NULL);
		return;
	}
	json_array_foreach(msg, i, el)
		dispatch_one(c, el, b);
	b->sealed = true;
	batch_maybe_done(b);
}

/* ---- reading, and pausing it -------------------------------------------- */

/* unanswered is how many of c's requests wait on berthd: those that wait
 * for c's own answers to berthd's questions (an MCP tools/call waiting on
 * its elicitation/create) are not counted, or a client with that many
 * questions open would never be read again, its answers with it. */
static int unanswered(const struct api_conn *c)
{
	return c->inflight - c->ncalls;
}

/* conn_should_pause is true when c must not be read until some of what it
 * asked is answered (conn.h): too many requests unanswered, or, before
 * server/auth, replies it does not read. */
static bool conn_should_pause(const struct api_conn *c)
{
	if (unanswered(c) >= c->api->cfg.max_inflight)
		return true;
	return !c->authed && api_conn_pending_bytes(c) >= API_UNAUTH_OUT;
}

/* conn_may_resume is true when a paused c has drained enough to be read
 * again; the gap to conn_should_pause keeps a busy client from being
 * paused and resumed for every answer. */
static bool conn_may_resume(const struct api_conn *c)
{
	int max = c->api->cfg.max_inflight;

	if (unanswered(c) >= max - max / 4)
		return false;
	return c->authed || api_conn_pending_bytes(c) < API_UNAUTH_OUT / 2;
}

static void watch_hangup(struct api *a);

/* conn_pause stops reading c. */
static void conn_pause(struct api_conn *c)
{
	uv_read_stop(&c->h.stream);
	c->paused = true;
	watch_hangup(c->api);
}

/* conn_poke looks whether a paused c may be read again, and if so has it
 * resumed before the loop blocks: never from inside a dispatch, which
 * may be answering the very request that lets it go on. */
static void conn_poke(struct api_conn *c)
{
	if (c->paused && !c->resume_due && c->state == API_CONN_OPEN &&
	    conn_may_resume(c)) {
		c->resume_due = true;
		mark_dirty(c);
	}
}

/* conn_fed acts on what feeding c's frame returned. */
static void conn_fed(struct api_conn *c, int rc)
{
	if (c->state != API_CONN_OPEN)
		return;
	if (rc == API_FRAME_PAUSE)
		conn_pause(c);
	else if (rc == API_FRAME_STOP)
		api_conn_close(c); /* the rest could not be held */
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);
static int on_line(void *arg, const char *line, size_t len, bool oversize);
static void say_and_close(struct api_conn *c, int code, const char *message,
			  json_t *data);

static void conn_resume(struct api_conn *c)
{
	c->paused = false;
	conn_fed(c, api_frame_resume(&c->frame, on_line, c));
	if (c->state == API_CONN_OPEN && !c->paused &&
	    uv_read_start(&c->h.stream, on_alloc, on_read) < 0)
		api_conn_close(c);
}

/* is_batch is true when the line is a JSON array, by its first byte. */
static bool is_batch(const char *line, size_t len)
{
	size_t i = 0;

	while (i < len && (line[i] == ' ' || line[i] == '\t'))
		i++;
	return i < len && line[i] == '[';
}

/* on_line handles one line of the client (frame.h). Returns
 * API_FRAME_STOP once the connection stopped reading, so that the rest of
 * the read is dropped, and API_FRAME_PAUSE when it must wait for answers
 * to drain. */
static int on_line(void *arg, const char *line, size_t len, bool oversize)
{
	struct api_conn *c = arg;
	struct api *a = c->api;
	json_error_t jerr;
	json_t *msg;
	char text[256];

	if (c->state != API_CONN_OPEN)
		return API_FRAME_STOP;
	if (oversize && !c->authed) {
		/* No server/auth needs this much: a stranger that sends it is
		 * told so and closed, rather than read to its line's end. */
		snprintf(text, sizeof text, "invalid request: a line longer "
			 "than %zu bytes before server/auth; closing",
			 c->frame.max_line);
		conn_debug(c, "closed: a line too long before server/auth");
		say_and_close(c, API_INVALID_REQUEST, text,
			      api_rpc_limit((json_int_t)c->frame.max_line));
	} else if (oversize) {
		snprintf(text, sizeof text, "invalid request: the line is "
			 "longer than the limit of %zu bytes", c->frame.max_line);
		send_error(c, NULL, NULL, API_INVALID_REQUEST, text,
			   api_rpc_limit((json_int_t)c->frame.max_line));
	} else if (!c->authed && is_batch(line, len)) {
		/* One answer for the whole batch, and nothing of it parsed:
		 * a stranger's batch costs what its line costs. */
		api_refused(a, API_REFUSED_UNAUTHENTICATED);
		send_error(c, NULL, NULL, API_UNAUTHORIZED,
			   "unauthorized: a batch before server/auth; send "
			   "server/auth on its own first",
			   json_pack("{s:s}", "reason", "unauthenticated"));
	} else if (api_json_depth(line, len, a->cfg.max_depth) >
		   a->cfg.max_depth) {
		snprintf(text, sizeof text, "invalid request: JSON nested "
			 "deeper than the limit of %d", a->cfg.max_depth);
		send_error(c, NULL, NULL, API_INVALID_REQUEST, text,
			   api_rpc_limit(a->cfg.max_depth));
	} else if (is_batch(line, len) &&
		   api_json_batch_len(line, len, API_MAX_BATCH) > API_MAX_BATCH) {
		send_error(c, NULL, NULL, API_INVALID_REQUEST,
			   "invalid request: a batch of more than 1000 "
			   "requests", api_rpc_limit(API_MAX_BATCH));
	} else if (!(msg = store_json_load(line, len, JSON_DECODE_ANY,
					   &jerr))) {
		not_loaded(c, line, len, &jerr);
	} else {
		api_conn_dispatch(c, msg);
		json_decref(msg);
	}
	if (c->state != API_CONN_OPEN)
		return API_FRAME_STOP;
	return conn_should_pause(c) ? API_FRAME_PAUSE : API_FRAME_GO;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct api_conn *c = h->data;

	buf->base = c->api->readbuf;
	buf->len = sizeof c->api->readbuf;
}

/* peer_gone is true when c's peer closed its end entirely, not only its
 * sending side: a Unix socket tells (POLLHUP), TCP does not until a
 * write fails. */
static bool peer_gone(const struct api_conn *c)
{
	struct pollfd p = {.events = POLLRDHUP};
	uv_os_fd_t fd;

	if (uv_fileno(&c->h.handle, &fd) < 0)
		return true;
	p.fd = fd;
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR));
}

/* conn_eof handles the end of what c's client sends (conn.h's header says
 * what happens to its waits). */
static void conn_eof(struct api_conn *c)
{
	if (c->state != API_CONN_OPEN)
		return;
	c->state = API_CONN_DRAINING;
	/* A worker process that stops sending is gone: its runs end now,
	 * not once it is found to have closed entirely. */
	if (c->remote) {
		c->close_why = "it closed its connection";
		api_conn_close(c);
		return;
	}
	if (c->transport == API_TRANSPORT_UNIX && peer_gone(c)) {
		conn_debug(c, "closed by its client");
		api_conn_close(c);
		return;
	}
	if (c->transport == API_TRANSPORT_TCP)
		api_wait_end_conn(c);
	else if (c->waits)
		watch_hangup(c->api);
	conn_maybe_finish(c);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct api_conn *c = s->data;

	if (n > 0) {
		c->heard = uv_now(c->api->loop);
		conn_fed(c, api_frame_feed(&c->frame, buf->base, (size_t)n,
					   on_line, c));
		return;
	}
	if (n == UV_EOF && c->state == API_CONN_OPEN) {
		/* The client is done sending; it still gets the replies of
		 * what it sent, a last line without a newline included. */
		api_frame_eof(&c->frame, on_line, c);
		uv_read_stop(s);
		conn_eof(c);
		return;
	}
	if (n < 0)
		api_conn_close(c);
}

/* ---- peers that hang up while not read ---------------------------------- */

/* hangup_watched is true when c is not being read and its peer may go
 * without berthd noticing: paused, or a Unix peer that closed its sending
 * side while it waits for answers. */
static bool hangup_watched(const struct api_conn *c)
{
	if (c->transport == API_TRANSPORT_LOCAL)
		return false;
	return (c->state == API_CONN_OPEN && c->paused) ||
	       (c->state == API_CONN_DRAINING && c->waits);
}

static void on_hangup_timer(uv_timer_t *t)
{
	struct api *a = t->data;
	bool any = false;

	for (struct api_conn *c = a->conns, *next; c; c = next) {
		struct pollfd p = {.events = POLLRDHUP};
		uv_os_fd_t fd;

		next = c->next;
		if (!hangup_watched(c))
			continue;
		any = true;
		if (uv_fileno(&c->h.handle, &fd) < 0)
			continue;
		p.fd = fd;
		if (poll(&p, 1, 0) != 1)
			continue;
		if (p.revents & (POLLHUP | POLLERR)) {
			conn_debug(c, "closed by its client");
			api_conn_close(c);
		} else if ((p.revents & POLLRDHUP) &&
			   c->transport == API_TRANSPORT_TCP) {
			/* A paused TCP client sent its end: as at EOF, its
			 * waits end now, which lets it be read to that
			 * end. */
			api_wait_end_conn(c);
		}
	}
	if (!any)
		uv_timer_stop(t);
}

static void watch_hangup(struct api *a)
{
	if (!uv_is_active((uv_handle_t *)&a->hangup_timer) &&
	    !uv_is_closing((uv_handle_t *)&a->hangup_timer))
		uv_timer_start(&a->hangup_timer, on_hangup_timer, 1000, 1000);
}

/* ---- strangers: TCP connections before server/auth ---------------------- */

static void on_login_timer(uv_timer_t *t);

/* login_arm sets the login timer for the oldest stranger's deadline. */
static void login_arm(struct api *a)
{
	struct api_conn *c = a->unauth_head;
	uint64_t now = uv_now(a->loop), due;

	if (uv_is_closing((uv_handle_t *)&a->login_timer))
		return;
	if (!c) {
		uv_timer_stop(&a->login_timer);
		return;
	}
	due = c->accepted + (uint64_t)a->cfg.login_ms;
	uv_timer_start(&a->login_timer, on_login_timer, due > now ? due - now : 0,
		       0);
}

static void unauth_add(struct api_conn *c)
{
	struct api *a = c->api;

	c->unauth_prev = a->unauth_tail;
	c->unauth_next = NULL;
	if (a->unauth_tail)
		a->unauth_tail->unauth_next = c;
	else
		a->unauth_head = c;
	a->unauth_tail = c;
	if (++a->nunauth == 1)
		login_arm(a);
}

static void unauth_remove(struct api_conn *c)
{
	struct api *a = c->api;

	if (!c->unauth_prev && a->unauth_head != c)
		return;
	if (c->unauth_prev)
		c->unauth_prev->unauth_next = c->unauth_next;
	else
		a->unauth_head = c->unauth_next;
	if (c->unauth_next)
		c->unauth_next->unauth_prev = c->unauth_prev;
	else
		a->unauth_tail = c->unauth_prev;
	c->unauth_prev = c->unauth_next = NULL;
	a->nunauth--;
	/* A stale timer for a head that left only fires early and is set
	 * again. */
}

/* say_and_close sends c one error (data stolen) and closes it: what the
 * socket takes at once reaches the client; a client that does not read
 * it is not waited for. */
static void say_and_close(struct api_conn *c, int code, const char *message,
			  json_t *data)
{
	unauth_remove(c);
	send_error(c, NULL, NULL, code, message, data);
	if (api_conn_live(c))
		conn_flush(c);
	api_conn_close(c);
}

static void on_login_timer(uv_timer_t *t)
{
	struct api *a = t->data;
	uint64_t now = uv_now(a->loop);
	char text[160];

	while (a->unauth_head &&
	       a->unauth_head->accepted + (uint64_t)a->cfg.login_ms <= now) {
		struct api_conn *c = a->unauth_head;

		conn_debug(c, "closed: no server/auth in time");
		if (a->cfg.login_ms % 1000 == 0)
			snprintf(text, sizeof text, "unauthorized: no server/auth "
				 "within %lld s of connecting",
				 (long long)a->cfg.login_ms / 1000);
		else
			snprintf(text, sizeof text, "unauthorized: no server/auth "
				 "within %lld ms of connecting",
				 (long long)a->cfg.login_ms);
		say_and_close(c, API_UNAUTHORIZED, text,
			      json_pack("{s:I, s:s}", "limit",
					(json_int_t)a->cfg.login_ms, "reason",
					"unauthenticated"));
	}
	login_arm(a);
}

/* make_room closes the oldest stranger when there are more than the caps
 * allow (conn.h). Returns false when that was c itself. */
static bool make_room(struct api *a, struct api_conn *c)
{
	while (a->unauth_head && (a->nunauth > (size_t)a->cfg.max_unauth ||
				  a->ntcp > (size_t)a->cfg.max_connections)) {
		struct api_conn *old = a->unauth_head;
		bool all = a->ntcp > (size_t)a->cfg.max_connections;

		conn_debug(old, "closed: too many connections waiting for "
			   "server/auth, and it was the oldest");
		log_refused(a);
		say_and_close(old, API_OVERLOADED,
			      all ? "overloaded: too many connections"
				  : "overloaded: too many connections waiting "
				    "for server/auth; the oldest is closed",
			      api_rpc_limit(all ? a->cfg.max_connections
						: a->cfg.max_unauth));
		if (old == c)
			return false;
	}
	return true;
}

void api_conn_authed(struct api_conn *c, const struct api_principal *p)
{
	/* A connection that becomes a principal without read (an agent
	 * acting as less than its user) keeps no subscription: they would go
	 * on sending it every job's events. */
	if (c->subs && p && !(p->roles & BERTH_ROLE_READ)) {
		conn_debug(c, "its subscriptions end: the principal it "
			   "now acts as has no read role");
		api_sub_cancel_conn(c);
	}
	c->principal = p;
	c->authed = true;
	c->frame.max_line = c->api->cfg.max_line;
	unauth_remove(c);
	conn_poke(c);
}

void api_conn_drain(struct api_conn *c)
{
	if (c->state != API_CONN_OPEN)
		return;
	if (c->transport != API_TRANSPORT_LOCAL)
		uv_read_stop(&c->h.stream);
	c->paused = false;
	c->state = API_CONN_DRAINING;
	conn_maybe_finish(c);
}

void api_conn_actor(const struct api_conn *c, struct worker_actor *out)
{
	out->name = c->principal ? c->principal->name : NULL;
	out->via = c->via;
	out->client = c->client;
	out->roles = c->principal ? c->principal->roles : 0;
}

/* ---- accepting ---------------------------------------------------------- */

/* peer_principal returns the principal the Unix peer of c acts as: a
 * declared one with its uid, or an implicit one for berthd's own user,
 * root and the users of --allow-uid (principal.h); NULL when the peer
 * may not use the socket. *uid receives its uid. */
static const struct api_principal *peer_principal(struct api_conn *c,
						  uid_t *uid)
{
	struct api *a = c->api;
	struct ucred cred;
	socklen_t len = sizeof cred;
	uv_os_fd_t fd;

	*uid = (uid_t)-1;
	if (uv_fileno(&c->h.handle, &fd) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return NULL;
	*uid = cred.uid;
	return api_principal_of_uid(a->principals, cred.uid, a->allow_uids,
				    a->nallow_uids);
}

/* refuse answers a connection that may not be served with one error line
 * and closes it once that is written. data is stolen. */
static void refuse(struct api_conn *c, int code, const char *message,
		   json_t *data)
{
	c->state = API_CONN_DRAINING;
	send_error(c, NULL, NULL, code, message, data);
	conn_maybe_finish(c);
}

void api_conn_accept(struct api *a, uv_stream_t *listener, int transport)
{
	struct api_conn *c = calloc(1, sizeof *c);
	char text[160];
	uid_t uid;
	int rc, len;

	if (!c) {
		log_error("out of memory accepting a connection");
		return;
	}
	c->api = a;
	c->transport = transport;
	c->id = ++a->next_conn_id;
	c->refs = 1; /* the handle's, released in on_close */
	c->accepted = c->heard = uv_now(a->loop);
	api_frame_init(&c->frame, a->cfg.max_line);
	if (transport == API_TRANSPORT_TCP)
		rc = uv_tcp_init(a->loop, &c->h.tcp);
	else
		rc = uv_pipe_init(a->loop, &c->h.pipe, 0);
	if (rc < 0) {
		free(c);
		return;
	}
	c->h.handle.data = c;
	a->handles++;
	c->next = a->conns;
	if (a->conns)
		a->conns->prev = c;
	a->conns = c;
	a->nconns++;
	if (transport == API_TRANSPORT_TCP)
		a->ntcp++;

	rc = uv_accept(listener, &c->h.stream);
	if (rc < 0) {
		api_conn_close(c);
		return;
	}
	c->via = transport == API_TRANSPORT_TCP ? "tcp" : "socket";
	if (transport == API_TRANSPORT_TCP) {
		uv_tcp_nodelay(&c->h.tcp, 1);
		len = sizeof c->peer;
		uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&c->peer, &len);
		c->authed = false; /* until server/auth */
		if (c->frame.max_line > API_UNAUTH_LINE)
			c->frame.max_line = API_UNAUTH_LINE;
		unauth_add(c);
		if (!make_room(a, c))
			return;
	} else if (!(c->principal = peer_principal(c, &uid))) {
		c->peer.ss_family = AF_UNIX;
		snprintf(text, sizeof text, "refused uid %ld: not allowed to "
			 "use this socket", (long)uid);
		conn_log(c, text);
		api_refused(a, API_REFUSED_UNAUTHENTICATED);
		refuse(c, API_UNAUTHORIZED, "unauthorized: this user may not "
		       "use berthd's socket (see berthd --allow-uid and "
		       "--principals)",
		       json_pack("{s:s}", "reason", "unauthenticated"));
		return;
	} else {
		/* A peer the kernel vouches for always has room. */
		c->peer.ss_family = AF_UNIX;
		c->authed = true;
	}
	rc = uv_read_start(&c->h.stream, on_alloc, on_read);
	if (rc < 0)
		api_conn_close(c);
}

/* ---- the api's timers --------------------------------------------------- */

void api_conn_start(struct api *a)
{
	uv_timer_init(a->loop, &a->login_timer);
	uv_timer_init(a->loop, &a->hangup_timer);
	a->login_timer.data = a;
	a->hangup_timer.data = a;
	a->handles += 2;
}

static void on_timer_closed(uv_handle_t *h)
{
	api_handle_closed(h->data);
}

void api_conn_stop(struct api *a)
{
	if (!uv_is_closing((uv_handle_t *)&a->login_timer))
		uv_close((uv_handle_t *)&a->login_timer, on_timer_closed);
	if (!uv_is_closing((uv_handle_t *)&a->hangup_timer))
		uv_close((uv_handle_t *)&a->hangup_timer, on_timer_closed);
}

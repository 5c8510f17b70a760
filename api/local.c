/*
 * local.c: connections without a socket (local.h).
 *
 * A local connection is an api_conn of transport API_TRANSPORT_LOCAL. Its
 * handle is an idle handle that is never started: closing it through
 * api_conn_close takes the same path as a socket's (on_close in conn.c
 * cancels waits, subscriptions and outgoing calls), and the api's stop
 * waits for it like any other handle.
 */
#include "api/local.h"

#include <stdlib.h>

#include "api/conn.h"
#include "api/server.h"
#include "api/sub.h"

struct api_conn *api_local_open(struct api *a, const char *via,
				api_local_sink_fn sink,
				api_local_pending_fn pending, void *arg)
{
	struct api_conn *c;

	if (a->stopping)
		return NULL;
	c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	if (uv_idle_init(a->loop, &c->h.idle) < 0) {
		free(c);
		return NULL;
	}
	c->api = a;
	c->transport = API_TRANSPORT_LOCAL;
	c->authed = true; /* the local client checks its own caller */
	c->via = via;
	c->id = ++a->next_conn_id;
	c->refs = 1; /* the handle's, released in conn.c's on_close */
	c->sink = sink;
	c->sink_pending = pending;
	c->sink_arg = arg;
	/* The frame is never fed, but on_close finishes it. */
	api_frame_init(&c->frame, a->cfg.max_line);
	c->h.handle.data = c;
	a->handles++;
	c->next = a->conns;
	if (a->conns)
		a->conns->prev = c;
	a->conns = c;
	a->nconns++;
	return c;
}

void api_local_request(struct api_conn *c, const char *method, json_t *params,
		       int64_t id)
{
	json_t *msg = json_pack("{s:s, s:I, s:s}", "jsonrpc", "2.0", "id",
				(json_int_t)id, "method", method);

	if (msg && params)
		json_object_set(msg, "params", params);
	json_decref(params);
	if (!msg) {
		json_t *err = json_pack("{s:s, s:I, s:{s:i, s:s}}", "jsonrpc",
					"2.0", "id", (json_int_t)id, "error",
					"code", -32603, "message",
					"out of memory");

		if (err && api_conn_live(c))
			c->sink(c->sink_arg, err);
		json_decref(err);
		return;
	}
	api_conn_dispatch(c, msg);
	json_decref(msg);
}

void api_local_as(struct api_conn *c, const struct api_principal *p)
{
	c->principal = p;
}

void api_local_drained(struct api_conn *c)
{
	if (c->replay_blocked && api_conn_live(c) &&
	    api_conn_pending_bytes(c) < API_REPLAY_HIGH_WATER)
		api_sub_resume(c);
}

void api_local_close(struct api_conn *c)
{
	api_conn_close(c);
}

void api_local_limits(const struct api *a, size_t *max_line, int *max_depth,
		      size_t *max_outbuf)
{
	*max_line = a->cfg.max_line;
	*max_depth = a->cfg.max_depth;
	*max_outbuf = a->cfg.max_outbuf;
}

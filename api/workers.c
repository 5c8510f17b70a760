/*
 * workers.c: worker processes on the socket (docs/WORKERS.md). A client
 * connection becomes a worker process's by worker/register; from then on
 * berthd also sends it requests of its own (run, input, transform, ping)
 * and notifications (abort), through api_conn_call and api_conn_send, and
 * the worker's registry and executor (worker/remote.c) hold it through
 * struct worker_remote_ops. Everything PROTOCOL.md says holds on the same
 * connection: a worker may submit, get and wait for jobs too.
 */
#include "api/workers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/methods.h"
#include "api/params.h"
#include "api/rpc.h"
#include "api/server.h"
#include "log/log.h"
#include "worker/worker.h"

/* ---- the connection, as the worker reaches it ------------------------------ */

static int ops_call(void *conn, const char *method, json_t *params,
		    worker_call_fn done, void *arg)
{
	return api_conn_call(conn, method, params, done, arg);
}

static void ops_notify(void *conn, const char *method, json_t *params)
{
	json_t *msg = json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method",
				method, "params", params);

	if (msg)
		api_conn_send(conn, msg);
	json_decref(msg);
}

static void ops_close(void *conn, const char *why)
{
	struct api_conn *c = conn;

	c->close_why = why;
	api_conn_close(c);
}

static uint64_t ops_heard(void *conn)
{
	return ((struct api_conn *)conn)->heard;
}

static const struct worker_remote_ops remote_ops = {
	.call = ops_call,
	.notify = ops_notify,
	.close = ops_close,
	.heard = ops_heard,
};

void api_workers_closed(struct api_conn *c)
{
	struct worker_remote *rem = c->remote;

	c->remote = NULL;
	worker_remote_detach(rem, c->close_why ? c->close_why
					       : "its connection closed");
}

/* ---- the methods ----------------------------------------------------------- */

/* registered answers worker/register once its definitions are durable:
 * res->data is the result (worker.h). */
static void registered(void *arg, const struct worker_result *res)
{
	struct api_req *r = arg;

	if (api_req_dead(r))
		api_req_drop(r);
	else if (res->err != WORKER_OK)
		api_reply_worker_error(r, res);
	else
		api_reply(r, json_incref(res->data));
}

void api_m_worker_register(struct api_req *r, json_t *params)
{
	struct api_conn *c = r->conn;
	struct worker_actor by;
	int rc;

	if (c->remote) {
		api_reply_error(r, API_CONFLICT,
				"conflict: this connection registered its tools "
				"already (a connection registers once)",
				json_pack("{s:s}", "status", "registered"));
		return;
	}
	/* A local connection (the HTTP gateway's, berth mcp's relay) has no
	 * peer to push runs to. */
	if (c->transport == API_TRANSPORT_LOCAL) {
		api_reply_error(r, API_INVALID_REQUEST,
				"invalid request: worker/register needs a "
				"socket connection (docs/WORKERS.md)",
				NULL);
		return;
	}
	api_conn_actor(c, &by);
	rc = worker_remote_register(c->api->worker, &remote_ops, c, params,
				    &by, &c->remote, registered, r);
	if (rc == -ESHUTDOWN)
		api_reply_error(r, API_INTERNAL_ERROR, "berthd is shutting down",
				NULL);
	else if (rc < 0)
		api_reply_error(r, API_INTERNAL_ERROR, strerror(-rc), NULL);
	else if (c->remote)
		log_info("connection %llu: worker %s registered",
			 (unsigned long long)c->id,
			 worker_remote_id(c->remote));
}

/* not_running answers a message about a job that is not running on this
 * connection (docs/WORKERS.md); a notification's answer is dropped. */
static void not_running(struct api_req *r, const char *id)
{
	char text[200];

	snprintf(text, sizeof text,
		 "not found: job %.64s is not running on this connection", id);
	api_reply_error(r, API_NOT_FOUND, text, json_pack("{s:s}", "id", id));
}

void api_m_worker_progress(struct api_req *r, json_t *params)
{
	const char *id = api_params_str(params, "jobId");
	json_t *p = json_pack("{s:O}", "progress",
			      json_object_get(params, "progress"));

	if (p && json_object_get(params, "total"))
		json_object_set(p, "total", json_object_get(params, "total"));
	if (p && json_object_get(params, "message"))
		json_object_set(p, "message", json_object_get(params, "message"));
	if (!r->conn->remote || !p ||
	    worker_remote_progress(r->conn->remote, id, p) < 0)
		not_running(r, id);
	else
		api_reply(r, json_object());
	json_decref(p);
}

void api_m_worker_log(struct api_req *r, json_t *params)
{
	const char *id = api_params_str(params, "jobId");
	const char *level = api_params_str(params, "level");
	json_t *m = json_object_get(params, "message");
	/* A message that is not a string is written as its JSON. */
	char *text = json_is_string(m) ? NULL
				       : json_dumps(m, JSON_COMPACT |
							       JSON_ENCODE_ANY);

	if (!r->conn->remote ||
	    worker_remote_log(r->conn->remote, id, level ? level : "info",
			      text ? text : json_string_value(m),
			      json_object_get(params, "data")) < 0)
		not_running(r, id);
	else
		api_reply(r, json_object());
	free(text);
}

void api_m_worker_checkpoint(struct api_req *r, json_t *params)
{
	const char *id = api_params_str(params, "jobId");
	int rc = -ENOENT;

	if (r->conn->remote)
		rc = worker_remote_checkpoint(r->conn->remote, id,
					      json_object_get(params, "value"),
					      api_reply_after_commit, r);
	if (rc == -ENOENT)
		not_running(r, id);
	else if (rc == -ESHUTDOWN)
		api_reply_error(r, API_INTERNAL_ERROR, "berthd is shutting down",
				NULL);
	else if (rc < 0)
		api_reply_error(r, API_INTERNAL_ERROR, strerror(-rc), NULL);
}

void api_m_worker_drain(struct api_req *r, json_t *params)
{
	if (!r->conn->remote) {
		api_reply_error(r, API_CONFLICT,
				"conflict: this connection registered no tools "
				"(worker/register)",
				json_pack("{s:s}", "status", "unregistered"));
		return;
	}
	worker_remote_drain(r->conn->remote);
	api_reply(r, json_object());
}

void api_m_tools_forget(struct api_req *r, json_t *params)
{
	int rc = worker_forget(r->conn->api->worker,
			       api_params_str(params, "name"),
			       api_reply_after_commit, r);

	if (rc == -ESHUTDOWN)
		api_reply_error(r, API_INTERNAL_ERROR, "berthd is shutting down",
				NULL);
	else if (rc < 0)
		api_reply_error(r, API_INTERNAL_ERROR, strerror(-rc), NULL);
}

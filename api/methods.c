/*
 * methods.c: the method table of PROTOCOL.md and the handlers that are
 * not long-poll waits or subscriptions (those are in wait.c and sub.c).
 *
 * The table is the one place that says, per method, which params it
 * takes (checked by conn.c before the handler runs), whether it changes
 * state, and whether it may run before auth. MCP's methods (api/mcp.c)
 * join this same table; MCP's tools/list is berth's tools/list, whose Tool
 * objects are MCP Tools extended with berth's fields.
 */
#include "api/methods.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/cursor.h"
#include "api/principal.h"
#include "api/rpc.h"
#include "api/server.h"
#include "api/sub.h"
#include "api/wait.h"
#include "api/workers.h"
#include "berth/berth.h"
#ifdef BERTH_HAVE_MCP
#include "api/mcp.h"
#endif

/* The version of this protocol, reported by server/info; it changes only
 * when an existing method changes incompatibly. */
#define API_PROTOCOL_VERSION "1"

/* Tools per tools/list page. */
#define TOOLS_PAGE 100

#define MS_MAX ((int64_t)1 << 42) /* about 139 years: any sane duration */

static struct api *api_of(struct api_req *r)
{
	return r->conn->api;
}

void api_reply_store_error(struct api_req *r, int rc, const char *id)
{
	char text[160];

	if (rc == STORE_ENOTFOUND) {
		snprintf(text, sizeof text, "not found: no job %.64s",
			 id ? id : "");
		api_reply_error(r, API_NOT_FOUND, text,
				json_pack("{s:s}", "id", id ? id : ""));
	} else if (rc == -ENOMEM) {
		api_reply_error(r, API_INTERNAL_ERROR, "out of memory", NULL);
	} else if (rc == -EIO && store_shared(api_of(r)->store)) {
		/* On PostgreSQL -EIO is the server out of reach or the
		 * connection lost, as writes say (worker.c): SQLite's "disk
		 * I/O error" sent operators to the wrong place. The callers
		 * only read. */
		char msg[240];

		snprintf(msg, sizeof msg, "storage failure: PostgreSQL could "
			 "not be reached, or the connection was lost (%s); "
			 "nothing was changed", strerror(-rc));
		api_reply_error(r, API_STORAGE, msg,
				json_pack("{s:s, s:s}", "sqlite", strerror(-rc),
					  "backend", "postgresql"));
	} else {
		snprintf(text, sizeof text, "storage failure: %s",
			 store_error_text(rc));
		api_reply_error(r, API_STORAGE, text,
				json_pack("{s:s}", "sqlite", store_error_text(rc)));
	}
}

/* subject_of returns what a request is about, for the {id} of a
 * not-found error the worker gave no data for. */
static const char *subject_of(const struct api_req *r)
{
	static const char *const keys[] = {"id", "name", "tool", NULL};

	for (size_t i = 0; keys[i]; i++) {
		const char *s = api_params_str(r->params, keys[i]);

		if (s)
			return s;
	}
	return "";
}

void api_reply_worker_error(struct api_req *r, const struct worker_result *res)
{
	const char *msg = res->message;
	json_t *data = res->data ? json_incref(res->data) : NULL;
	int code;

	switch (res->err) {
	case WORKER_EINVAL:
		code = API_INVALID_PARAMS;
		msg = msg ? msg : "invalid params";
		break;
	case WORKER_ENOTFOUND:
		code = API_NOT_FOUND;
		msg = msg ? msg : "not found";
		if (!data)
			data = json_pack("{s:s}", "id", subject_of(r));
		break;
	case WORKER_ECONFLICT:
		code = API_CONFLICT;
		msg = msg ? msg : "conflict: the job's status does not allow this";
		if (!data && res->job)
			data = json_pack("{s:s}", "status",
					 store_status_name(res->job->status));
		break;
	case WORKER_EOVERLOAD:
		code = API_OVERLOADED;
		msg = msg ? msg : "overloaded";
		break;
	case WORKER_ESTORAGE:
		code = API_STORAGE;
		msg = msg ? msg : "storage failure; nothing was changed";
		break;
	case WORKER_EFORBIDDEN:
		/* The approval policy's refusals are -32010 like a role's,
		 * told apart by data.reason (docs/API.md). */
		code = API_UNAUTHORIZED;
		msg = msg ? msg : "forbidden";
		api_refused(api_of(r), api_refusal_parse(json_string_value(
					       json_object_get(data, "reason"))));
		break;
	default:
		code = API_INTERNAL_ERROR;
		msg = msg ? msg : "internal error";
		break;
	}
	api_reply_error(r, code, msg, data);
}

/* reply_bad_cursor answers r: its cursor is not one this server gave out
 * (docs/API.md), in the shape of a schema error. */
static void reply_bad_cursor(struct api_req *r)
{
	api_reply_error(r, API_INVALID_PARAMS,
			"invalid params: cursor is not one this server gave out",
			json_pack("{s:[{s:s, s:s, s:s}]}", "errors",
				  "instancePath", "/cursor", "keyword", "format",
				  "message",
				  "cursor is not one this server gave out"));
}

/* reply_job answers r with the raw view of j: written as text, or through
 * a tree where r needs one (batches, local connections). The raw view is
 * the stored job, which store_job_text writes. */
static void reply_job(struct api_req *r, const struct store_job *j)
{
	char *text = store_job_text(j);
	bool sent = text && api_reply_text(r, text, strlen(text));

	free(text);
	if (!sent)
		api_reply(r, worker_job_to_json(api_of(r)->worker, j,
						WORKER_VIEW_RAW));
}

/*
 * api_reply_after_commit answers a request that changed a job or a tool.
 * The worker calls it only once the change is durable in the store (its
 * callbacks run after the group commit that holds the change, worker.h),
 * so this is the place that makes every reply to a mutation leave after
 * its commit: no mutating handler answers any other way.
 */
void api_reply_after_commit(void *arg, const struct worker_result *res)
{
	struct api_req *r = arg;

	if (api_req_dead(r))
		api_req_drop(r);
	else if (res->err != WORKER_OK)
		api_reply_worker_error(r, res);
	else if (res->job)
		reply_job(r, res->job);
	else
		api_reply(r, json_object());
}

/* worker_refused answers r when a worker operation failed at once (its
 * callback will never run). */
static void worker_refused(struct api_req *r, int rc)
{
	if (rc == -EINVAL)
		api_reply_error(r, API_INVALID_PARAMS, "invalid params", NULL);
	else if (rc == -ESHUTDOWN)
		api_reply_error(r, API_INTERNAL_ERROR,
				"berthd is shutting down", NULL);
	else
		api_reply_error(r, API_INTERNAL_ERROR, strerror(-rc), NULL);
}

int api_job_exists(struct api *a, const char *id)
{
	struct store_job *job;
	int rc = store_get(a->store, id, &job);

	if (rc < 0)
		return rc;
	store_job_free(job);
	return 0;
}

void api_job_reply(struct api_req *r, const char *id)
{
	struct store_job *job;
	int rc = store_get(api_of(r)->store, id, &job);

	if (rc < 0) {
		api_reply_store_error(r, rc, id);
		return;
	}
	reply_job(r, job);
	store_job_free(job);
}

/* ---- server ------------------------------------------------------------ */

static void m_server_info(struct api_req *r, json_t *params)
{
	struct api *a = api_of(r);
	int64_t counts[STORE_NSTATUS];
	struct worker_stats ws;
	json_t *jobs;
	int rc;

	rc = store_count_by_status(a->store, counts);
	if (rc < 0) {
		api_reply_store_error(r, rc, NULL);
		return;
	}
	jobs = json_object();
	for (int s = 0; s < STORE_NSTATUS && jobs; s++)
		json_object_set_new(jobs, store_status_name(s),
				    json_integer(counts[s]));
	worker_stats(a->worker, &ws);
	/* principal: who asks, so that berth info and the inbox can say
	 * who is logged in (docs/API.md). */
	api_reply(r, json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:o, s:{s:i, s:i},"
			       " s:{s:s, s:o, s:s}}",
			       "name", "berth",
			       "version", BERTH_VERSION,
			       "protocolVersion", API_PROTOCOL_VERSION,
			       "durability", store_durability_name(a->store),
			       "database", store_path(a->store),
			       "uptimeMs",
			       (json_int_t)((uv_hrtime() - a->started_ns) / 1000000),
			       "jobs", jobs,
			       "workers", "size", ws.size, "busy", ws.busy,
			       "principal", "name", r->conn->principal->name,
			       "roles",
			       api_principal_roles_json(r->conn->principal),
			       "via", r->conn->via));
}

/* A connection on which server/auth failed this many times is closed: a
 * client that has the token does not need more tries. */
#define AUTH_TRIES_PER_CONN 3

static void m_server_auth(struct api_req *r, json_t *params)
{
	struct api *a = api_of(r);
	struct api_conn *c = r->conn;
	const struct sockaddr *peer = (const struct sockaddr *)&c->peer;
	json_t *token = json_object_get(params, "token");
	const struct api_principal *who = NULL;
	int64_t retry_ms;
	char text[160];
	int rc;

	if (api_auth_gate(a, peer, API_AUTH_VIA_SOCKET, &retry_ms) < 0) {
		snprintf(text, sizeof text, "unauthorized: too many failed "
			 "logins lately; try again in %lld ms",
			 (long long)retry_ms);
		api_refused(a, API_REFUSED_UNAUTHENTICATED);
		api_reply_error(r, API_UNAUTHORIZED, text,
				json_pack("{s:I, s:s}", "retryAfterMs",
					  (json_int_t)retry_ms, "reason",
					  "unauthenticated"));
	} else if ((rc = api_auth_check(a, json_string_value(token),
					json_string_length(token),
					&who)) == 0) {
		/* From now on the connection acts as the token's principal,
		 * a Unix peer too: a process may act as less than its
		 * user (an agent with a submit token). */
		api_conn_authed(c, who);
		api_reply(r, json_object());
		return;
	} else if (rc == -ENOENT && c->authed) {
		/* A Unix peer is in already; there is no token to check. */
		api_reply(r, json_object());
		return;
	} else if (rc == -ENOENT) {
		api_refused(a, API_REFUSED_UNAUTHENTICATED);
		api_reply_error(r, API_UNAUTHORIZED, "unauthorized: this "
				"server takes no token",
				json_pack("{s:s}", "reason", "unauthenticated"));
	} else if (rc == -ENOMEM) {
		api_reply_error(r, API_INTERNAL_ERROR, "out of memory", NULL);
		return;
	} else {
		api_auth_failed(a, peer, API_AUTH_VIA_SOCKET, "server/auth");
		api_refused(a, API_REFUSED_UNAUTHENTICATED);
		api_reply_error(r, API_UNAUTHORIZED,
				"unauthorized: wrong token",
				json_pack("{s:s}", "reason", "unauthenticated"));
	}
	if (++c->auth_failures >= AUTH_TRIES_PER_CONN)
		api_conn_drain(c);
}

static void m_ping(struct api_req *r, json_t *params)
{
	api_reply(r, json_object());
}

/* ---- tools ------------------------------------------------------------- */

/* tool_json returns the Tool of t as r's client is shown it: an MCP
 * client gets MCP's form of it (api/mcp.c). */
static json_t *tool_json(struct api_req *r, const struct worker_tool *t)
{
#ifdef BERTH_HAVE_MCP
	return api_mcp_tool_to_json(r->conn, t);
#else
	return worker_tool_to_json(api_of(r)->worker, t);
#endif
}

static void m_tools_list(struct api_req *r, json_t *params)
{
	struct api *a = api_of(r);
	const char *cursor = api_params_str(params, "cursor");
	size_t n = worker_tool_count(a->worker), i = 0;
	char *after = NULL, *next;
	json_t *tools, *result;

	/* A cursor holds the name of the last tool of the page before,
	 * signed (api/cursor.h); the page goes on after that name even if
	 * a reload removed its tool since. */
	if (cursor && !(after = api_cursor_open(API_CURSOR_TOOLS, cursor))) {
		reply_bad_cursor(r);
		return;
	}
	if (after)
		while (i < n &&
		       strcmp(worker_tool_name(worker_tool_at(a->worker, i)),
			      after) <= 0)
			i++;
	free(after);
	tools = json_array();
	for (; i < n && json_array_size(tools) < TOOLS_PAGE; i++)
		json_array_append_new(tools, tool_json(
			r, worker_tool_at(a->worker, i)));
	result = json_pack("{s:o}", "tools", tools);
	if (result && i < n) {
		next = api_cursor_make(API_CURSOR_TOOLS,
				       worker_tool_name(worker_tool_at(
					       a->worker, i - 1)));
		json_object_set_new(result, "nextCursor", json_string(next));
		free(next);
	}
	api_reply(r, result);
}

static void pause_tool(struct api_req *r, bool paused)
{
	struct api *a = api_of(r);
	const char *name = api_params_str(r->params, "name");
	char text[200];
	int rc;

	if (!worker_tool_find(a->worker, name)) {
		snprintf(text, sizeof text, "not found: no tool %.128s", name);
		api_reply_error(r, API_NOT_FOUND, text,
				json_pack("{s:s}", "id", name));
		return;
	}
	rc = worker_pause(a->worker, name, paused, api_reply_after_commit, r);
	if (rc < 0)
		worker_refused(r, rc);
}

static void m_tools_pause(struct api_req *r, json_t *params)
{
	pause_tool(r, true);
}

static void m_tools_unpause(struct api_req *r, json_t *params)
{
	pause_tool(r, false);
}

/* ---- jobs -------------------------------------------------------------- */

static void m_jobs_submit(struct api_req *r, json_t *params)
{
	struct api *a = api_of(r);
	struct worker_submit s = {0};
	struct worker_actor by;
	const char *run_at = api_params_str(params, "runAt");
	int rc;

	api_conn_actor(r->conn, &by);
	s.by = &by;
	s.tool = api_params_str(params, "tool");
	s.input = json_object_get(params, "input");
	s.request_context = json_object_get(params, "requestContext");
	s.metadata = json_object_get(params, "metadata");
	s.run_id = api_params_str(params, "runId");
	s.tool_call_id = api_params_str(params, "toolCallId");
	s.idempotency_key = api_params_str(params, "idempotencyKey");
	s.has_priority = json_object_get(params, "priority") != NULL;
	s.priority = (int)api_params_int(params, "priority", 0);
	if (run_at)
		store_parse_time(run_at, &s.run_at); /* checked already */
	else if (json_object_get(params, "delayMs"))
		s.run_at = store_now() + api_params_int(params, "delayMs", 0);
	s.timeout_ms = api_params_int(params, "timeoutMs", 0);
	s.has_max_retries = json_object_get(params, "maxRetries") != NULL;
	s.max_retries = (int)api_params_int(params, "maxRetries", 0);
	s.ttl_ms = api_params_int(params, "ttlMs", 0);
	/* Every string and value in s is borrowed from r->params, which
	 * lives until the callback has answered. */
	rc = worker_submit(a->worker, &s, api_reply_after_commit, r);
	if (rc < 0)
		worker_refused(r, rc);
}

static const char *const view_names[] = {"raw", "display", "transcript", NULL};

static void m_jobs_get(struct api_req *r, json_t *params)
{
	struct api *a = api_of(r);
	const char *id = api_params_str(params, "id");
	const char *view = api_params_str(params, "view");
	int v = WORKER_VIEW_RAW;
	struct store_job *job;
	int rc;

	if (view && strcmp(view, "display") == 0)
		v = WORKER_VIEW_DISPLAY;
	else if (view && strcmp(view, "transcript") == 0)
		v = WORKER_VIEW_TRANSCRIPT;
	rc = store_get(a->store, id, &job);
	if (rc < 0) {
		api_reply_store_error(r, rc, id);
		return;
	}
	api_reply(r, worker_job_to_json(a->worker, job, v));
	store_job_free(job);
}

static void m_jobs_list(struct api_req *r, json_t *params)
{
	struct api *a = api_of(r);
	struct store_filter f = {
		.status_mask = api_params_status_mask(
			json_object_get(params, "status")),
		.tool = api_params_str(params, "tool"),
		.run_id = api_params_str(params, "runId"),
	};
	const char *prefix = api_params_str(params, "idPrefix");
	char lower[40];
	const char *cursor = api_params_str(params, "cursor");
	struct store_job **jobs = NULL;
	size_t n = 0;
	char *next = NULL, *position = NULL, *signed_next;
	bool cut_short = false;
	json_t *arr, *result;
	int rc;

	/* The store's cursor, signed (api/cursor.h): the store's own check
	 * tells only a well-formed id from garbage. */
	if (cursor && !(position = api_cursor_open(API_CURSOR_JOBS, cursor))) {
		reply_bad_cursor(r);
		return;
	}
	/* Ids are written in lower case; a prefix in either case finds
	 * them (the params check bounds its length). */
	if (prefix) {
		size_t i = 0;

		for (; prefix[i] && i < sizeof lower - 1; i++)
			lower[i] = (char)tolower((unsigned char)prefix[i]);
		lower[i] = '\0';
		f.id_prefix = lower;
	}
	rc = store_list(a->store, &f, (int)api_params_int(params, "limit", 50),
			position, &jobs, &n, &next);
	free(position);
	if (rc == -EINVAL) {
		reply_bad_cursor(r);
		return;
	}
	if (rc < 0) {
		api_reply_store_error(r, rc, NULL);
		return;
	}
	arr = json_array();
	for (size_t i = 0, bytes = 0; i < n; i++) {
		/* The page ends after the job that takes it past its
		 * budget, and the cursor goes on from there. */
		if (bytes <= API_PAGE_BYTES) {
			json_t *job = worker_job_to_json(a->worker, jobs[i],
							 WORKER_VIEW_RAW);

			bytes += api_json_size(job, API_PAGE_BYTES);
			json_array_append_new(arr, job);
			if (bytes > API_PAGE_BYTES && i + 1 < n) {
				free(next);
				if (!(next = store_list_cursor(jobs[i]->id)))
					cut_short = true;
			}
		}
		store_job_free(jobs[i]);
	}
	free(jobs);
	if (cut_short) {
		json_decref(arr);
		api_reply_error(r, API_INTERNAL_ERROR, "out of memory", NULL);
		return;
	}
	result = json_pack("{s:o}", "jobs", arr);
	if (result && next) {
		signed_next = api_cursor_make(API_CURSOR_JOBS, next);
		json_object_set_new(result, "nextCursor",
				    json_string(signed_next));
		free(signed_next);
	}
	free(next);
	api_reply(r, result);
}

/* The handlers below hand the worker who asks (api_conn_actor): the
 * audit of the transition, and the judge of a tool's approval policy. */

static void m_jobs_resume(struct api_req *r, json_t *params)
{
	struct worker_actor by;
	int rc;

	api_conn_actor(r->conn, &by);
	rc = worker_resume(api_of(r)->worker, api_params_str(params, "id"),
			   json_object_get(params, "resumeData"), &by,
			   api_reply_after_commit, r);
	if (rc < 0)
		worker_refused(r, rc);
}

static void m_jobs_approve(struct api_req *r, json_t *params)
{
	struct worker_actor by;
	int rc;

	api_conn_actor(r->conn, &by);
	rc = worker_approve(api_of(r)->worker, api_params_str(params, "id"),
			    api_params_str(params, "note"), &by,
			    api_reply_after_commit, r);
	if (rc < 0)
		worker_refused(r, rc);
}

static void m_jobs_decline(struct api_req *r, json_t *params)
{
	struct worker_actor by;
	int rc;

	api_conn_actor(r->conn, &by);
	rc = worker_decline(api_of(r)->worker, api_params_str(params, "id"),
			    api_params_str(params, "reason"), &by,
			    api_reply_after_commit, r);
	if (rc < 0)
		worker_refused(r, rc);
}

static void m_jobs_cancel(struct api_req *r, json_t *params)
{
	struct worker_actor by;
	int rc;

	api_conn_actor(r->conn, &by);
	rc = worker_cancel(api_of(r)->worker, api_params_str(params, "id"),
			   api_params_str(params, "reason"), &by,
			   api_reply_after_commit, r);
	if (rc < 0)
		worker_refused(r, rc);
}

static void m_jobs_retry(struct api_req *r, json_t *params)
{
	struct worker_actor by;
	int rc;

	api_conn_actor(r->conn, &by);
	rc = worker_retry(api_of(r)->worker, api_params_str(params, "id"), &by,
			  api_reply_after_commit, r);
	if (rc < 0)
		worker_refused(r, rc);
}

static void m_jobs_logs(struct api_req *r, json_t *params)
{
	struct api *a = api_of(r);
	const char *id = api_params_str(params, "id");
	int64_t after = api_params_int(params, "after", 0);
	struct store_log_line *lines = NULL;
	size_t n = 0;
	json_t *arr;
	char at[32];
	int rc;

	if ((rc = api_job_exists(a, id)) < 0) {
		api_reply_store_error(r, rc, id);
		return;
	}
	rc = store_logs(a->store, id, after,
			(int)api_params_int(params, "limit", 100), &lines, &n);
	if (rc < 0) {
		api_reply_store_error(r, rc, id);
		return;
	}
	arr = json_array();
	for (size_t i = 0; i < n; i++) {
		json_t *l = json_pack("{s:I, s:s, s:s, s:s}",
				      "n", (json_int_t)lines[i].n,
				      "at", store_format_time(lines[i].at, at),
				      "level", lines[i].level ? lines[i].level : "info",
				      "message", lines[i].message ? lines[i].message : "");

		if (l && lines[i].data)
			json_object_set(l, "data", lines[i].data);
		json_array_append_new(arr, l);
		after = lines[i].n;
		store_log_line_finish(&lines[i]);
	}
	free(lines);
	api_reply(r, json_pack("{s:o, s:I}", "lines", arr, "next",
			       (json_int_t)after));
}

/* ---- the table --------------------------------------------------------- */

#define REQ API_P_REQUIRED
#define STR(name, flags) {name, API_P_STRING, flags, 0, 0, NULL, NULL}
#define ID_PARAM {"id", API_P_STRING, REQ | API_P_LOWER, 0, 64, NULL, NULL}
#define INT(name, lo, hi) {name, API_P_INT, 0, lo, hi, NULL, NULL}
#define END {NULL, 0, 0, 0, 0, NULL, NULL}

static const struct api_param p_auth[] = {STR("token", REQ), END};
static const struct api_param p_tools_list[] = {STR("cursor", 0), END};
static const struct api_param p_tool_name[] = {STR("name", REQ), END};
static const struct api_param p_submit[] = {
	{"tool", API_P_STRING, REQ, 0, 128, NULL, NULL},
	{"input", API_P_ANY, REQ, 0, 0, NULL, NULL},
	{"requestContext", API_P_OBJECT, 0, 0, 0, NULL, NULL},
	{"metadata", API_P_OBJECT, 0, 0, 0, NULL, NULL},
	STR("runId", 0),
	STR("toolCallId", 0),
	STR("idempotencyKey", 0),
	INT("priority", INT32_MIN, INT32_MAX),
	{"runAt", API_P_TIME, 0, 0, 0, NULL, "delayMs"},
	INT("delayMs", 0, MS_MAX),
	INT("timeoutMs", 1, MS_MAX),
	INT("maxRetries", 0, 1000),
	INT("ttlMs", 1, MS_MAX),
	END,
};
static const struct api_param p_get[] = {
	ID_PARAM,
	{"view", API_P_ENUM, 0, 0, 0, view_names, NULL},
	END,
};
static const struct api_param p_list[] = {
	{"status", API_P_STATUSES, 0, 0, 0, NULL, NULL},
	{"tool", API_P_STRING, 0, 0, 128, NULL, NULL},
	STR("runId", 0),
	/* A berth extension (docs/API.md): what `berth get 01a2` uses. */
	{"idPrefix", API_P_ID_PREFIX, 0, 0, 36, NULL, NULL},
	INT("limit", 1, 1000),
	STR("cursor", 0),
	END,
};
static const struct api_param p_wait[] = {
	ID_PARAM,
	INT("timeoutMs", 0, MS_MAX),
	{"until", API_P_STATUSES, 0, 0, 0, NULL, NULL},
	END,
};
static const struct api_param p_resume[] = {
	ID_PARAM,
	{"resumeData", API_P_ANY, REQ, 0, 0, NULL, NULL},
	END,
};
static const struct api_param p_approve[] = {ID_PARAM, STR("note", 0), END};
static const struct api_param p_reason[] = {ID_PARAM, STR("reason", 0), END};
static const struct api_param p_id[] = {ID_PARAM, END};
static const struct api_param p_logs[] = {
	ID_PARAM,
	INT("after", 0, INT64_MAX),
	INT("limit", 1, 1000),
	END,
};
static const struct api_param p_poll[] = {
	INT("since", 0, INT64_MAX),
	INT("limit", 1, 1000),
	INT("waitMs", 0, MS_MAX),
	{"jobId", API_P_STRING, API_P_LOWER, 0, 64, NULL, NULL},
	{"types", API_P_EVENT_TYPES, 0, 0, 0, NULL, NULL},
	END,
};
static const struct api_param p_subscribe[] = {
	INT("since", 0, INT64_MAX),
	{"jobId", API_P_STRING, API_P_LOWER, 0, 64, NULL, NULL},
	{"progress", API_P_BOOL, 0, 0, 0, NULL, NULL},
	{"types", API_P_EVENT_TYPES, 0, 0, 0, NULL, NULL},
	END,
};
static const struct api_param p_unsubscribe[] = {STR("subscription", REQ), END};
/* The worker protocol (docs/WORKERS.md, api/workers.c). The definitions
 * of worker/register are checked by the worker, which names each refusal
 * by its place in params. */
static const struct api_param p_register[] = {
	{"tools", API_P_ARRAY, REQ, 1, 1000, NULL, NULL},
	INT("concurrency", 1, 1024),
	{"name", API_P_STRING, 0, 0, 256, NULL, NULL},
	{"sdk", API_P_OBJECT, 0, 0, 0, NULL, NULL},
	END,
};
static const char *const log_levels[] = {"debug", "info", "warn", "error",
					 NULL};
static const struct api_param p_wprogress[] = {
	{"jobId", API_P_STRING, REQ | API_P_LOWER, 0, 64, NULL, NULL},
	{"progress", API_P_NUMBER, REQ, 0, 0, NULL, NULL},
	{"total", API_P_NUMBER, 0, 0, 0, NULL, NULL},
	{"message", API_P_STRING, 0, 0, 0, NULL, NULL},
	END,
};
static const struct api_param p_wlog[] = {
	{"jobId", API_P_STRING, REQ | API_P_LOWER, 0, 64, NULL, NULL},
	{"level", API_P_ENUM, 0, 0, 0, log_levels, NULL},
	{"message", API_P_ANY, REQ, 0, 0, NULL, NULL},
	{"data", API_P_ANY, 0, 0, 0, NULL, NULL},
	END,
};
static const struct api_param p_wcheckpoint[] = {
	{"jobId", API_P_STRING, REQ | API_P_LOWER, 0, 64, NULL, NULL},
	{"value", API_P_ANY, REQ, 0, 0, NULL, NULL},
	END,
};

#define READ BERTH_ROLE_READ

/* The role column is the whole of who may call what (docs/API.md): a new
 * method is one row, and its role is decided here. */
static const struct api_method methods[] = {
	{"server/info", m_server_info, 0, READ, NULL},
	{"server/auth", m_server_auth, API_M_NOAUTH, 0, p_auth},
	/* A worker process pings berthd when it has heard nothing for a
	 * while (docs/WORKERS.md, heartbeats): a principal that only serves
	 * tools may too. */
	{"ping", m_ping, 0, READ | BERTH_ROLE_WORKER, NULL},
	{"tools/list", m_tools_list, 0, READ, p_tools_list},
	{"tools/pause", m_tools_pause, API_M_MUTATES, BERTH_ROLE_OPERATE,
	 p_tool_name},
	{"tools/unpause", m_tools_unpause, API_M_MUTATES, BERTH_ROLE_OPERATE,
	 p_tool_name},
	{"jobs/submit", m_jobs_submit, API_M_MUTATES, BERTH_ROLE_SUBMIT,
	 p_submit},
	{"jobs/get", m_jobs_get, 0, READ, p_get},
	{"jobs/list", m_jobs_list, 0, READ, p_list},
	{"jobs/wait", api_m_jobs_wait, 0, READ, p_wait},
	{"jobs/resume", m_jobs_resume, API_M_MUTATES, BERTH_ROLE_RESUME,
	 p_resume},
	{"jobs/approve", m_jobs_approve, API_M_MUTATES, BERTH_ROLE_APPROVE,
	 p_approve},
	{"jobs/decline", m_jobs_decline, API_M_MUTATES, BERTH_ROLE_APPROVE,
	 p_reason},
	{"jobs/cancel", m_jobs_cancel, API_M_MUTATES, BERTH_ROLE_OPERATE,
	 p_reason},
	{"jobs/retry", m_jobs_retry, API_M_MUTATES, BERTH_ROLE_OPERATE, p_id},
	{"jobs/logs", m_jobs_logs, 0, READ, p_logs},
	{"events/poll", api_m_events_poll, 0, READ, p_poll},
	{"events/subscribe", api_m_events_subscribe, 0, READ, p_subscribe},
	{"events/unsubscribe", api_m_events_unsubscribe, 0, READ,
	 p_unsubscribe},
	/* Worker processes (docs/WORKERS.md): a worker registers and serves
	 * with the role "worker" alone; forgetting a worker's tool removes
	 * its stored definition for every node, which is admin's. */
	{"worker/register", api_m_worker_register, API_M_MUTATES,
	 BERTH_ROLE_WORKER, p_register},
	{"worker/progress", api_m_worker_progress, 0, BERTH_ROLE_WORKER,
	 p_wprogress},
	{"worker/log", api_m_worker_log, 0, BERTH_ROLE_WORKER, p_wlog},
	{"worker/checkpoint", api_m_worker_checkpoint, API_M_MUTATES,
	 BERTH_ROLE_WORKER, p_wcheckpoint},
	{"worker/drain", api_m_worker_drain, 0, BERTH_ROLE_WORKER, NULL},
	{"tools/forget", api_m_tools_forget, API_M_MUTATES, 0, p_tool_name},
};

const struct api_method *api_method_find(const char *name)
{
	for (size_t i = 0; name && i < sizeof methods / sizeof methods[0]; i++)
		if (strcmp(methods[i].name, name) == 0)
			return &methods[i];
#ifdef BERTH_HAVE_MCP
	/* MCP's rows (api/mcp.c) continue the table; a name both define
	 * (ping, tools/list) is berth's, whose answer is already MCP's. */
	if (name)
		return api_mcp_method_find(name);
#endif
	return NULL;
}

/*
 * mcp.c: berth as an MCP server (mcp.h, docs/MCP.md).
 *
 * MCP's tools are berth's tools and MCP's tasks are berth's jobs: a
 * tools/call submits a job like jobs/submit does, and the task id is the
 * job id, so a task outlives the connection, the client and a restart of
 * berthd. Nothing here keeps job state of its own: every answer is built
 * from the job as the store has it.
 *
 * Status mapping (PROTOCOL.md): pending and running are "working";
 * awaiting_approval and suspended are "input_required"; completed is
 * "completed"; cancelled is "cancelled"; failed, timed_out, declined and
 * expired are "failed". A completed job whose modelOutput says the call
 * failed (error-text, error-json, execution-denied) is "failed" too, as
 * MCP asks of a tool result with isError.
 *
 * What a client is shown of a job's payloads is the tool's transcript
 * view (Mastra's transform.transcript), everywhere: results, errors, task
 * status messages and notifications. A secret a tool's transform hides
 * never reaches an MCP client. Questions to a person show the display
 * view, as berth's own approval prompts do.
 *
 * A request that waits for a job (a tools/call without a task, a
 * tasks/result) is a watch on that job. The hub indexes the watches of
 * all MCP connections by job id and re-reads a watched job when the
 * store's listener reports an event for it. A third kind of watch sends
 * notifications/tasks/status to the connection that created a task (its
 * owner) or asked about it.
 *
 * A job that needs input is asked about with elicitation/create, when the
 * client declared form elicitation: by a waiting tools/call or
 * tasks/result, and by the owner's status watch as soon as the task
 * enters input_required, with the related-task _meta, because a task
 * client need not call tasks/result before the task ends (the ext-tasks
 * client only polls tasks/get). The owner is asked only once it has
 * asked about the task after the reply that made it the owner (the
 * CreateTaskResult, or the reply to the tasks/get that took the task
 * over): that reply is the client's first sight of the task, and a
 * question that overtakes it cannot be placed. One connection is asked
 * once per wait: its watches of one job share the question. The answer
 * approves, declines or resumes the job through the worker, like
 * jobs/approve, jobs/decline and jobs/resume do.
 */
#include "api/mcp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/mcp_content.h"
#include "api/principal.h"
#include "api/rpc.h"
#include "api/server.h"
#include "berth/berth.h"

#define MCP_LATEST "2025-11-25"
#define MCP_RELATED "io.modelcontextprotocol/related-task"
#define MCP_TASKS_EXT "io.modelcontextprotocol/tasks"

/* The _meta keys of a tools/call that berth reads (docs/MCP.md). */
#define MCP_META_CONTEXT "berth/requestContext"
#define MCP_META_TTL "berth/ttlMs"

/* The poll interval suggested to clients. Jobs run for seconds to hours;
 * a second keeps a polling client responsive and costs one read. */
#define MCP_POLL_MS 1000

/* Tasks per tasks/list page. */
#define MCP_TASKS_PAGE 50

/* Jobs whose status changes one connection is told about because it
 * asked about them. Status notifications are optional in MCP, so past
 * this a connection simply gets no more of them; the bound keeps a client
 * that asks about many tasks from growing the index without end. */
#define MCP_MAX_STATUS_WATCHES 1024

/* Unfinished tasks one connection created that it follows (notifications
 * and questions). A watch is about 200 bytes, so this bounds what one
 * connection holds to a few MiB; a task past it is still answered through
 * tasks/result, and told about through tasks/get. */
#define MCP_MAX_OWNED 16384

/* Answers that fail a job's resumeSchema before berth stops asking again
 * (an automated client that always answers the same wrong thing must not
 * loop forever). */
#define MCP_MAX_BAD_ANSWERS 3

/* The longest ttl berth/ttlMs takes, as jobs/submit's ttlMs. */
#define MCP_MS_MAX ((int64_t)1 << 42)

#define MCP_BUCKETS 64

static const char *const mcp_versions[] = {
	"2025-11-25", "2025-06-18", "2025-03-26", NULL,
};

enum mcp_status {
	MCP_WORKING = 0,
	MCP_INPUT_REQUIRED,
	MCP_COMPLETED,
	MCP_FAILED,
	MCP_CANCELLED,
};

static const char *const mcp_status_names[] = {
	"working", "input_required", "completed", "failed", "cancelled",
};

enum mcp_watch_kind {
	MCP_W_CALL = 0, /* a tools/call without a task: answered at the end */
	MCP_W_RESULT,   /* a tasks/result: answered at the end */
	MCP_W_STATUS,   /* notifications/tasks/status for one job */
};

struct mcp_watch;

/* The watches of every MCP connection of one api, by job id, and the
 * store listener that feeds them. Found through any MCP connection of the
 * api; freed with the last of them. */
struct mcp_hub {
	struct api *api;
	int nconns;
	struct mcp_watch *buckets[MCP_BUCKETS];
};

/* One connection's MCP state (api_conn.ext). */
struct mcp_conn {
	struct mcp_hub *hub;
	struct api_conn *conn;
	char version[16];  /* negotiated; empty before initialize */
	bool elicitation;  /* the client declared form elicitation */
	bool tasks;        /* tasks were offered: 2025-11-25, or the
			      client declared the tasks extension */
	json_t *client_info; /* initialize's clientInfo, or NULL */
	struct mcp_watch *watches;
	struct mcp_call *calls; /* tools/call whose job is not stored yet */
	int nstatus;       /* status watches of tasks asked about */
	int nowned;        /* status watches of tasks created here */
};

struct mcp_ask;

/* A tools/call on its way through worker_submit: the request and the
 * metadata its job is created with, which must live until the callback.
 * It is listed in its connection's calls until then, so that a
 * notifications/cancelled that comes before the job is stored is not
 * lost: the call is then dropped unanswered once it is. */
struct mcp_call {
	struct api_req *r;
	json_t *metadata;
	struct mcp_conn *mc; /* NULL once the connection is gone */
	struct mcp_call *next, **pprev;
	bool cancelled;
};

struct mcp_watch {
	struct mcp_watch *prev, *next;   /* in the hub's bucket */
	struct mcp_watch *cprev, *cnext; /* in the connection's list */
	struct mcp_conn *mc;
	int kind;              /* enum mcp_watch_kind */
	char job_id[40];
	struct api_req *req;   /* CALL and RESULT */
	int last;              /* STATUS: the status last told, or -1 */
	bool owner;            /* STATUS: the task was created here, or
				  taken over, so its questions are asked
				  here */
	bool followed;         /* STATUS, owner: the client has asked about
				  the task (tasks/get, tasks/result) since
				  the reply that made it the owner */
	struct mcp_ask *ask;   /* a question or its answer under way */
	int64_t episode;       /* updated_at of the wait asked about */
	bool held;             /* no more questions in this episode */
	int bad_answers;
	char *last_error;      /* why the last answer was refused */
};

/* One elicitation/create and what is done with its answer. It outlives
 * its watch when the watch ends first (w is then NULL); an answer that
 * comes then is still applied to the wait it was asked about. */
struct mcp_ask {
	struct mcp_watch *w;
	struct api *api;
	struct api_conn *conn; /* where the answer comes from: alive when
				  it does (a closed one answers nothing) */
	int refs;          /* the client's answer, the worker operation */
	bool approval;     /* else a resume */
	char job_id[40];
	int64_t episode;
};

static void mcp_conn_free(void *ext);
static void watch_update(struct mcp_watch *w, const struct store_job *j);

/* ---- small helpers ----------------------------------------------------- */

static int mcp_status_of(int s)
{
	switch (s) {
	case STORE_PENDING:
	case STORE_RUNNING:
		return MCP_WORKING;
	case STORE_AWAITING_APPROVAL:
	case STORE_SUSPENDED:
		return MCP_INPUT_REQUIRED;
	case STORE_COMPLETED:
		return MCP_COMPLETED;
	case STORE_CANCELLED:
		return MCP_CANCELLED;
	default:
		return MCP_FAILED;
	}
}

/* model_failed is true for a completed job whose modelOutput says the
 * call failed: its result has isError, and MCP counts such a task as
 * failed. */
static bool model_failed(const struct store_job *j)
{
	return j->status == STORE_COMPLETED &&
	       api_mcp_says_failed(j->model_output);
}

/* task_status is the MCP status of job j. */
static int task_status(const struct store_job *j)
{
	return model_failed(j) ? MCP_FAILED : mcp_status_of(j->status);
}

static unsigned bucket_of(const char *id)
{
	unsigned h = 2166136261u;

	for (; *id; id++)
		h = (h ^ (unsigned char)*id) * 16777619u;
	return h % MCP_BUCKETS;
}

/* text_content returns a new [{"type": "text", "text": s}]. */
static json_t *text_content(const char *s)
{
	return json_pack("[{s:s, s:s}]", "type", "text", "text", s ? s : "");
}

static json_t *related(const char *job_id)
{
	return json_pack("{s:{s:s}}", MCP_RELATED, "taskId", job_id);
}

/* error_message returns the message of job j's error as the tool's
 * transcript view shows it (malloc'd), or NULL when it has none. A
 * transform may present the error as an object with a message or as a
 * string. */
static char *error_message(struct worker *wk, const struct store_job *j)
{
	json_t *v;
	const char *m;
	char *s;

	if (!j->error)
		return NULL;
	v = worker_payload_view(wk, j, WORKER_VIEW_TRANSCRIPT,
				BERTH_PAYLOAD_ERROR, j->error);
	m = json_is_string(v) ? json_string_value(v)
			      : json_string_value(json_object_get(v, "message"));
	s = m ? strdup(m) : NULL;
	json_decref(v);
	return s;
}

/* ---- connections and the hub ------------------------------------------- */

static void hub_on_event(void *arg, const struct store_event *ev);

static struct mcp_conn *conn_mcp(struct api_conn *c)
{
	return c->ext_free == mcp_conn_free ? c->ext : NULL;
}

/* mcp_conn_get returns c's MCP state, made on first use, or NULL when c
 * is closing or memory ran out. */
static struct mcp_conn *mcp_conn_get(struct api_conn *c)
{
	struct mcp_conn *mc = conn_mcp(c);
	struct mcp_hub *hub = NULL;

	if (mc)
		return mc;
	if (!api_conn_live(c) || c->ext)
		return NULL;
	for (struct api_conn *o = c->api->conns; o && !hub; o = o->next)
		if (conn_mcp(o))
			hub = conn_mcp(o)->hub;
	mc = calloc(1, sizeof *mc);
	if (!mc)
		return NULL;
	if (!hub) {
		hub = calloc(1, sizeof *hub);
		if (!hub || store_add_listener(c->api->store, hub_on_event,
					       hub) < 0) {
			free(hub);
			free(mc);
			return NULL;
		}
		hub->api = c->api;
	}
	hub->nconns++;
	mc->hub = hub;
	mc->conn = c;
	c->ext = mc;
	c->ext_free = mcp_conn_free;
	return mc;
}

static struct mcp_watch *watch_new(struct mcp_conn *mc, int kind,
				   const char *job_id, struct api_req *req)
{
	struct mcp_watch *w = calloc(1, sizeof *w);
	struct mcp_watch **b;

	if (!w)
		return NULL;
	w->mc = mc;
	w->kind = kind;
	w->req = req;
	w->last = -1;
	snprintf(w->job_id, sizeof w->job_id, "%s", job_id);
	b = &mc->hub->buckets[bucket_of(w->job_id)];
	w->next = *b;
	if (*b)
		(*b)->prev = w;
	*b = w;
	w->cnext = mc->watches;
	if (mc->watches)
		mc->watches->cprev = w;
	mc->watches = w;
	return w;
}

/* watch_free unlinks and frees w; a request it still holds is dropped
 * unanswered (callers answer it first and clear req). */
static void watch_free(struct mcp_watch *w)
{
	struct mcp_conn *mc = w->mc;

	if (w->prev)
		w->prev->next = w->next;
	else
		mc->hub->buckets[bucket_of(w->job_id)] = w->next;
	if (w->next)
		w->next->prev = w->prev;
	if (w->cprev)
		w->cprev->cnext = w->cnext;
	else
		mc->watches = w->cnext;
	if (w->cnext)
		w->cnext->cprev = w->cprev;
	if (w->kind == MCP_W_STATUS && w->owner)
		mc->nowned--;
	else if (w->kind == MCP_W_STATUS)
		mc->nstatus--;
	if (w->ask)
		w->ask->w = NULL;
	if (w->req)
		api_req_drop(w->req);
	free(w->last_error);
	free(w);
}

/* mcp_conn_free is the connection's ext_free: its waits end unanswered
 * (the client is gone), and the hub goes with the last connection. */
static void mcp_conn_free(void *ext)
{
	struct mcp_conn *mc = ext;
	struct mcp_hub *hub = mc->hub;

	while (mc->watches)
		watch_free(mc->watches);
	for (struct mcp_call *call = mc->calls; call; call = call->next)
		call->mc = NULL;
	if (--hub->nconns == 0) {
		store_remove_listener(hub->api->store, hub_on_event, hub);
		free(hub);
	}
	json_decref(mc->client_info);
	free(mc);
}

/* ---- tasks and results -------------------------------------------------- */

/* status_message says what a task is doing, and for one that waits, how a
 * person answers it outside MCP too. A failure is told as the tool's
 * transcript view shows its error. Returns a malloc'd string or NULL. */
static char *status_message(struct worker *wk, const struct store_job *j)
{
	const char *pm = json_string_value(json_object_get(j->progress,
							   "message"));
	/* A cancel's reason is a person's or berth's words, not a payload
	 * of the tool, so it is told as it was given. */
	const char *reason = json_string_value(json_object_get(j->error,
							       "message"));
	char *em = NULL, *s = NULL;
	int rc = 0;

	switch (j->status) {
	case STORE_PENDING:
		rc = asprintf(&s, "queued (attempt %d)", j->attempt);
		break;
	case STORE_RUNNING:
		rc = pm ? asprintf(&s, "running: %s", pm)
			: asprintf(&s, "running (attempt %d)", j->attempt);
		break;
	case STORE_AWAITING_APPROVAL:
		rc = asprintf(&s, "waiting for approval: answer the question "
			      "berth asks the session that created the task "
			      "(or tasks/result), or run `berth approve %s` or "
			      "`berth decline %s`", j->id, j->id);
		break;
	case STORE_SUSPENDED:
		rc = asprintf(&s, "waiting for input: answer the question "
			      "berth asks the session that created the task "
			      "(or tasks/result), or run `berth resume %s "
			      "'JSON'` with JSON matching the tool's "
			      "resumeSchema", j->id);
		break;
	case STORE_COMPLETED:
		/* A result that says the call failed is a failed task. */
		return api_mcp_error_text(j->model_output);
	case STORE_DECLINED:
		rc = j->reason ? asprintf(&s, "declined: %s", j->reason)
			       : asprintf(&s, "declined");
		break;
	case STORE_CANCELLED:
		rc = reason ? asprintf(&s, "cancelled: %s", reason)
			    : asprintf(&s, "cancelled");
		break;
	case STORE_EXPIRED:
		em = error_message(wk, j);
		rc = asprintf(&s, "expired: nobody answered in time%s%s",
			      em ? ": " : "", em ? em : "");
		break;
	case STORE_TIMED_OUT:
		em = error_message(wk, j);
		rc = asprintf(&s, "timed out: %s", em ? em : "the tool ran "
			      "longer than its timeout");
		break;
	default:
		em = error_message(wk, j);
		rc = asprintf(&s, "%s", em ? em : "failed");
		break;
	}
	free(em);
	return rc < 0 ? NULL : s;
}

/*
 * task_json returns a new Task for j. Its ttl is null, and stays null for
 * the task's whole life: berth keeps a task for as long as it can still
 * change and for --retention after it has ended, never for a fixed time
 * from its creation (a task.ttl a client asks for is met or exceeded, as
 * MCP allows; docs/MCP.md, "ttl"). status is forced to as_status when
 * that is >= 0, and the statusMessage left out then.
 */
static json_t *task_json(struct worker *wk, const struct store_job *j,
			 int as_status)
{
	char created[32], updated[32];
	int s = as_status >= 0 ? as_status : task_status(j);
	json_t *t;
	char *msg;

	t = json_pack("{s:s, s:s, s:s, s:s, s:n, s:i}",
		      "taskId", j->id,
		      "status", mcp_status_names[s],
		      "createdAt", store_format_time(j->created_at, created),
		      "lastUpdatedAt",
		      store_format_time(j->updated_at ? j->updated_at
						      : j->created_at, updated),
		      "ttl",
		      "pollInterval", MCP_POLL_MS);
	if (!t || as_status >= 0)
		return t;
	msg = status_message(wk, j);
	if (msg)
		json_object_set_new(t, "statusMessage", json_string(msg));
	free(msg);
	return t;
}

/* job_meta returns the _meta of a result about job j: berth's own key
 * with the job, and the related task for tasks/result. */
static json_t *job_meta(const struct store_job *j, bool related_task)
{
	json_t *m = json_pack("{s:{s:s, s:s}}", "berth/job", "id", j->id,
			      "status", store_status_name(j->status));

	if (m && related_task)
		json_object_set_new(m, MCP_RELATED,
				    json_pack("{s:s}", "taskId", j->id));
	return m;
}

/* error_result returns a new CallToolResult with isError and text. */
static json_t *error_result(const char *text, json_t *meta)
{
	json_t *r = json_pack("{s:o, s:b}", "content", text_content(text),
			      "isError", 1);

	if (r && meta)
		json_object_set_new(r, "_meta", meta);
	else
		json_decref(meta);
	return r;
}

/*
 * completed_result returns the CallToolResult of a completed job: as
 * structuredContent the tool's transcript view of its output (wrapped as
 * {"result": ...} when it is not an object, or when the tool's
 * outputSchema is not an object schema, which MCP clients are shown
 * wrapped), and as content the blocks of its modelOutput, or the same
 * view as JSON text. A modelOutput that says the call failed sets
 * isError.
 */
static json_t *completed_result(struct mcp_conn *mc, const struct store_job *j,
				bool related_task)
{
	struct worker *wk = mc->hub->api->worker;
	const struct worker_tool *t = worker_tool_find(wk, j->tool);
	const json_t *schema = t ? worker_tool_schema(t, WORKER_SCHEMA_OUTPUT)
				 : NULL;
	bool links = strcmp(mc->version, "2025-03-26") != 0;
	bool is_error = false;
	json_t *view, *content, *r;
	char *text;

	view = worker_payload_view(wk, j, WORKER_VIEW_TRANSCRIPT,
				   BERTH_PAYLOAD_OUTPUT, j->output);
	if (j->model_output) {
		content = api_mcp_content(j->model_output, j->id, links,
					  &is_error);
	} else {
		text = api_mcp_dumps(view, SIZE_MAX);
		content = text ? text_content(text) : NULL;
		free(text);
	}
	r = json_pack("{s:o, s:o}", "content", content, "structuredContent",
		      api_mcp_structured(view, schema &&
						       !api_mcp_object_schema(schema)));
	json_decref(view);
	if (r && is_error)
		json_object_set_new(r, "isError", json_true());
	if (r)
		json_object_set_new(r, "_meta", job_meta(j, related_task));
	return r;
}

/*
 * call_result returns the CallToolResult of a finished job: for a
 * completed one completed_result; for any other end an isError result
 * that says what happened, with the error as the tool's transcript view
 * shows it and a cancel's or decline's reason as it was given.
 */
static json_t *call_result(struct mcp_conn *mc, const struct store_job *j,
			   bool related_task)
{
	const char *reason = json_string_value(json_object_get(j->error,
							       "message"));
	json_t *r;
	char *text = NULL, *em = NULL;
	int rc = 0;

	if (j->status == STORE_COMPLETED)
		return completed_result(mc, j, related_task);
	if (j->status != STORE_DECLINED && j->status != STORE_CANCELLED)
		em = error_message(mc->hub->api->worker, j);
	switch (j->status) {
	case STORE_DECLINED:
		rc = asprintf(&text, "berth job %s of tool %s was declined%s%s; "
			      "the tool did not run", j->id, j->tool,
			      j->reason ? ": " : "", j->reason ? j->reason : "");
		break;
	case STORE_CANCELLED:
		rc = asprintf(&text, "berth job %s of tool %s was cancelled%s%s",
			      j->id, j->tool, reason ? ": " : "",
			      reason ? reason : "");
		break;
	case STORE_EXPIRED:
		rc = asprintf(&text, "berth job %s of tool %s expired: nobody "
			      "answered it before its ttl%s%s", j->id, j->tool,
			      em ? ": " : "", em ? em : "");
		break;
	case STORE_TIMED_OUT:
		rc = asprintf(&text, "berth job %s of tool %s timed out%s%s",
			      j->id, j->tool, em ? ": " : "", em ? em : "");
		break;
	default:
		rc = asprintf(&text, "berth job %s of tool %s failed: %s",
			      j->id, j->tool, em ? em : "no reason given");
		break;
	}
	free(em);
	if (rc < 0)
		return NULL;
	r = error_result(text, job_meta(j, related_task));
	free(text);
	return r;
}

/* ---- elicitation forms --------------------------------------------------- */

/* resolve follows a local "$ref" ("#/$defs/x") of s within root, a few
 * hops at most; anything else is returned as it is. */
static const json_t *resolve(const json_t *root, const json_t *s)
{
	for (int hops = 0; hops < 8; hops++) {
		const char *ref = json_string_value(json_object_get(s, "$ref"));
		const json_t *at = root;
		char seg[256];

		if (!ref || ref[0] != '#')
			return s;
		ref++;
		while (at && *ref == '/') {
			size_t n = 0;

			ref++;
			while (*ref && *ref != '/' && n + 1 < sizeof seg) {
				if (ref[0] == '~' && ref[1] == '0') {
					seg[n++] = '~';
					ref += 2;
				} else if (ref[0] == '~' && ref[1] == '1') {
					seg[n++] = '/';
					ref += 2;
				} else {
					seg[n++] = *ref++;
				}
			}
			seg[n] = '\0';
			at = json_object_get(at, seg);
		}
		if (!at)
			return s;
		s = at;
	}
	return s;
}

static bool all_strings(const json_t *a)
{
	size_t i;
	json_t *v;

	if (!json_is_array(a) || json_array_size(a) == 0)
		return false;
	json_array_foreach(a, i, v)
		if (!json_is_string(v))
			return false;
	return true;
}

/* titled_choices returns a new [{const, title}] from a oneOf/anyOf whose
 * members are all string consts, or NULL. */
static json_t *titled_choices(const json_t *a)
{
	json_t *out, *v;
	size_t i;

	if (!json_is_array(a) || json_array_size(a) == 0)
		return NULL;
	out = json_array();
	json_array_foreach(a, i, v) {
		json_t *c = json_object_get(v, "const");
		json_t *t = json_object_get(v, "title");

		if (!json_is_string(c)) {
			json_decref(out);
			return NULL;
		}
		json_array_append_new(out, json_pack("{s:O, s:O}", "const", c,
						     "title", json_is_string(t) ? t : c));
	}
	return out;
}

/* type_of returns the one JSON type s accepts besides null, inferred from
 * enum, const or oneOf when s names none; NULL when there is not one. */
static const char *type_of(const json_t *s)
{
	json_t *t = json_object_get(s, "type");
	const char *one = NULL;
	size_t i;
	json_t *v;

	if (json_is_string(t))
		return json_string_value(t);
	if (json_is_array(t)) {
		json_array_foreach(t, i, v) {
			const char *name = json_string_value(v);

			if (!name || strcmp(name, "null") == 0)
				continue;
			if (one)
				return NULL;
			one = name;
		}
		return one;
	}
	if (all_strings(json_object_get(s, "enum")) ||
	    json_is_string(json_object_get(s, "const")))
		return "string";
	if (json_object_get(s, "oneOf") || json_object_get(s, "anyOf")) {
		json_t *c = titled_choices(json_object_get(s, "oneOf"));

		if (!c)
			c = titled_choices(json_object_get(s, "anyOf"));
		json_decref(c);
		return c ? "string" : NULL;
	}
	return NULL;
}

static void copy_if(json_t *out, const json_t *s, const char *key,
		    int (*is)(const json_t *))
{
	json_t *v = json_object_get(s, key);

	if (v && is(v))
		json_object_set(out, key, v);
}

static int is_string(const json_t *v) { return json_is_string(v); }
static int is_number(const json_t *v) { return json_is_number(v); }
static int is_integer(const json_t *v) { return json_is_integer(v); }
static int is_boolean(const json_t *v) { return json_is_boolean(v); }
static int is_string_array(const json_t *v) { return all_strings(v); }

static int is_format(const json_t *v)
{
	static const char *const ok[] = {"email", "uri", "date", "date-time",
					 NULL};
	const char *f = json_string_value(v);

	for (size_t i = 0; f && ok[i]; i++)
		if (strcmp(f, ok[i]) == 0)
			return 1;
	return 0;
}

/*
 * form_field returns a new MCP form field (a PrimitiveSchemaDefinition)
 * for the property schema s of root, keeping what MCP forms can say and
 * leaving out other constraints (berth still checks the answer against the
 * whole schema, and asks again with the error). NULL with *why set (a
 * malloc'd sentence) when the property cannot be a form field.
 */
static json_t *form_field(const json_t *root, const char *name,
			  const json_t *s, char **why)
{
	const char *type;
	json_t *out, *c;

	s = resolve(root, s);
	if (json_is_true(s))
		return json_pack("{s:s}", "type", "string");
	type = json_is_object(s) ? type_of(s) : NULL;
	if (!type || strcmp(type, "object") == 0 || strcmp(type, "null") == 0) {
		if (asprintf(why, "property '%s' is %s", name,
			     !type ? "not of one type" :
			     strcmp(type, "object") == 0 ? "an object"
							 : "always null") < 0)
			*why = NULL;
		return NULL;
	}
	out = json_pack("{s:s}", "type", type);
	if (!out)
		return NULL;
	copy_if(out, s, "title", is_string);
	copy_if(out, s, "description", is_string);
	if (strcmp(type, "string") == 0) {
		copy_if(out, s, "minLength", is_integer);
		copy_if(out, s, "maxLength", is_integer);
		copy_if(out, s, "pattern", is_string);
		copy_if(out, s, "format", is_format);
		copy_if(out, s, "default", is_string);
		copy_if(out, s, "enum", is_string_array);
		if (json_is_string(json_object_get(s, "const")))
			json_object_set_new(out, "enum", json_pack("[O]",
				json_object_get(s, "const")));
		c = titled_choices(json_object_get(s, "oneOf"));
		if (!c)
			c = titled_choices(json_object_get(s, "anyOf"));
		if (c)
			json_object_set_new(out, "oneOf", c);
	} else if (strcmp(type, "number") == 0 ||
		   strcmp(type, "integer") == 0) {
		copy_if(out, s, "minimum", is_number);
		copy_if(out, s, "maximum", is_number);
		copy_if(out, s, "default", is_number);
	} else if (strcmp(type, "boolean") == 0) {
		copy_if(out, s, "default", is_boolean);
	} else if (strcmp(type, "array") == 0) {
		const json_t *items = resolve(root, json_object_get(s, "items"));
		json_t *e = json_object_get(items, "enum");

		if (all_strings(e)) {
			json_object_set_new(out, "items", json_pack("{s:s, s:O}",
				"type", "string", "enum", e));
		} else if ((c = titled_choices(json_object_get(items, "anyOf"))) ||
			   (c = titled_choices(json_object_get(items, "oneOf")))) {
			json_object_set_new(out, "items",
					    json_pack("{s:o}", "anyOf", c));
		} else {
			json_decref(out);
			if (asprintf(why, "property '%s' is an array of other "
				     "things than string choices", name) < 0)
				*why = NULL;
			return NULL;
		}
		copy_if(out, s, "minItems", is_integer);
		copy_if(out, s, "maxItems", is_integer);
		copy_if(out, s, "default", is_string_array);
	} else {
		json_decref(out);
		if (asprintf(why, "property '%s' is of type %s", name, type) < 0)
			*why = NULL;
		return NULL;
	}
	return out;
}

/* unaskable_required returns a malloc'd sentence naming the first name
 * required by s that is not a field of the form (props), or NULL. */
static char *unaskable_required(const json_t *s, const json_t *props,
				const char *where)
{
	const json_t *v;
	size_t i;
	char *why;

	json_array_foreach(json_object_get(s, "required"), i, v) {
		if (!json_is_string(v) ||
		    json_object_get(props, json_string_value(v)))
			continue;
		if (asprintf(&why, "%sproperty '%s' is required but not among "
			     "its properties", where, json_string_value(v)) < 0)
			why = strdup("out of memory");
		return why;
	}
	return NULL;
}

/*
 * unaskable returns a malloc'd sentence saying why no answer to the form
 * of the object schema s (its fields props) could fit s, or NULL: a
 * required member that is not a field, or members declared under a root
 * allOf, anyOf or oneOf, which a flat form cannot show (Zod's .and(),
 * unions and records make these). Such a question was sent as a form that
 * every answer failed, three times.
 */
static char *unaskable(const json_t *root, const json_t *s,
		       const json_t *props)
{
	static const char *const groups[] = {"allOf", "anyOf", "oneOf"};
	char *why = unaskable_required(s, props, "");
	const json_t *b;
	size_t i;

	for (size_t g = 0; !why && g < sizeof groups / sizeof *groups; g++) {
		json_array_foreach(json_object_get(s, groups[g]), i, b) {
			char where[64];

			b = resolve(root, b);
			if (json_object_size(json_object_get(b, "properties"))) {
				if (asprintf(&why, "its properties are declared "
					     "under %s, which a form cannot "
					     "ask", groups[g]) < 0)
					why = strdup("out of memory");
				break;
			}
			snprintf(where, sizeof where, "%s/%zu: ", groups[g], i);
			/* A branch's required names that are fields leave
			 * the answer possible: it is checked, and the
			 * question asked again with the reason. */
			if ((why = unaskable_required(b, props, where)))
				break;
		}
	}
	return why;
}

/*
 * form_schema flattens a tool's resumeSchema into the requestedSchema of
 * a form: a flat object of strings, numbers, integers, booleans and
 * string choices, which is all MCP forms allow. Returns a new schema, or
 * NULL with *why set to a malloc'd sentence naming what cannot be asked.
 * A tool without a resumeSchema gets an empty form (resumed with {}).
 */
static json_t *form_schema(const json_t *schema, char **why)
{
	json_t *props, *out, *req, *v;
	const json_t *root = schema;
	const char *type, *key;
	size_t i;

	*why = NULL;
	if (!schema)
		return json_pack("{s:s, s:{}}", "type", "object",
				 "properties");
	schema = resolve(root, schema);
	type = json_is_object(schema) ? type_of(schema) : NULL;
	if (!json_is_object(schema) ||
	    (type && strcmp(type, "object") != 0) ||
	    (!type && json_object_get(schema, "type"))) {
		*why = strdup("it is not an object schema");
		return NULL;
	}
	props = json_object();
	json_object_foreach(json_object_get(schema, "properties"), key, v) {
		json_t *f = form_field(root, key, v, why);

		if (!f) {
			json_decref(props);
			if (!*why)
				*why = strdup("out of memory");
			return NULL;
		}
		json_object_set_new(props, key, f);
	}
	if ((*why = unaskable(root, schema, props))) {
		json_decref(props);
		return NULL;
	}
	out = json_pack("{s:s, s:o}", "type", "object", "properties", props);
	req = json_array();
	json_array_foreach(json_object_get(schema, "required"), i, v)
		if (json_is_string(v))
			json_array_append(req, v);
	if (out && json_array_size(req) > 0)
		json_object_set(out, "required", req);
	json_decref(req);
	return out;
}

/* approval_form returns the requestedSchema of an approval question. */
static json_t *approval_form(void)
{
	return json_pack(
		"{s:s, s:{s:{s:s, s:s, s:s, s:b}, s:{s:s, s:s, s:s}}, s:[s]}",
		"type", "object", "properties",
		"approve", "type", "boolean", "title", "Approve",
		"description", "Let the tool run (checked), or decline it",
		"default", 1,
		"reason", "type", "string", "title", "Reason",
		"description", "Optional: why; kept with the decision",
		"required", "approve");
}

/* ---- waiting for a job ------------------------------------------------- */

/*
 * explain_wait answers a tools/call whose job waits for an answer that
 * this client cannot give through MCP (it declared no elicitation, put
 * the question aside, or the question cannot be a form): an isError
 * result naming the job and how to answer it through berth. The job keeps
 * waiting; nothing is lost.
 */
static void explain_wait(struct mcp_watch *w, const struct store_job *j,
			 const char *why)
{
	struct worker *wk = w->mc->hub->api->worker;
	struct api_req *r = w->req;
	char *text = NULL, *payload = NULL, *schema = NULL;
	const struct worker_tool *t;
	json_t *view;
	int rc;

	if (j->status == STORE_AWAITING_APPROVAL) {
		rc = asprintf(&text, "berth job %s of tool %s is waiting for "
			      "approval%s%s. It keeps waiting. Approve or "
			      "decline it through berth: `berth approve %s` or "
			      "`berth decline %s --reason TEXT` (the "
			      "jobs/approve and jobs/decline methods), or from "
			      "an MCP client with elicitation: tasks/result on "
			      "task %s.",
			      j->id, j->tool, why ? ": " : "", why ? why : "",
			      j->id, j->id, j->id);
	} else {
		/* This text is a tool result, read by the model: the
		 * payload is quoted as the transcript view shows it. */
		t = worker_tool_find(wk, j->tool);
		view = worker_payload_view(wk, j, WORKER_VIEW_TRANSCRIPT,
					   BERTH_PAYLOAD_SUSPEND,
					   j->suspend_payload);
		payload = api_mcp_dumps(view, API_MCP_QUOTE_MAX);
		json_decref(view);
		schema = api_mcp_dumps(t ? worker_tool_schema(
						   t, WORKER_SCHEMA_RESUME)
					 : NULL, API_MCP_QUOTE_MAX);
		rc = asprintf(&text, "berth job %s of tool %s is suspended and "
			      "waits for resume data%s%s. It keeps waiting. "
			      "It asked: %s. Resume it through berth: `berth "
			      "resume %s 'JSON'` with JSON matching this "
			      "resumeSchema: %s (the jobs/resume method), or "
			      "from an MCP client with elicitation: tasks/result "
			      "on task %s.",
			      j->id, j->tool, why ? ": " : "", why ? why : "",
			      payload ? payload : "null", j->id,
			      schema ? schema : "null", j->id);
	}
	free(payload);
	free(schema);
	w->req = NULL;
	api_reply(r, rc < 0 ? NULL : error_result(text, job_meta(j, false)));
	free(text);
	watch_free(w);
}

/* cannot_ask handles a waiting job that will not be asked about now:
 * a tools/call is answered (explain_wait), a tasks/result holds on until
 * the job moves on (its task's statusMessage says how to answer). */
static void cannot_ask(struct mcp_watch *w, const struct store_job *j,
		       const char *why)
{
	if (w->kind == MCP_W_CALL) {
		explain_wait(w, j, why);
	} else {
		w->held = true;
	}
}

static void ask_unref(struct mcp_ask *a)
{
	if (--a->refs == 0)
		free(a);
}

/* recheck reads w's job again and brings w up to date with it. */
static void recheck(struct mcp_watch *w)
{
	struct store_job *j;
	int rc = store_get(w->mc->hub->api->store, w->job_id, &j);

	if (rc < 0) {
		if (w->req) {
			struct api_req *r = w->req;

			w->req = NULL;
			if (rc == STORE_ENOTFOUND)
				api_reply_error(r, API_INVALID_PARAMS,
						"Task not found: the job is "
						"gone", NULL);
			else
				api_reply_store_error(r, rc, w->job_id);
		}
		watch_free(w);
		return;
	}
	watch_update(w, j);
	store_job_free(j);
}

/* refused_answer is true when res refuses who answered, rather than the
 * answer: the approval policy (self approval, not an approver), or an
 * approval of theirs already counted. Asking them again would only be
 * refused again. */
static bool refused_answer(struct api *api, const struct worker_result *res)
{
	const char *reason = json_string_value(json_object_get(res->data,
							       "reason"));

	if (res->err == WORKER_EFORBIDDEN) {
		api_refused(api, api_refusal_parse(reason));
		return true;
	}
	return res->err == WORKER_ECONFLICT && reason &&
	       strcmp(reason, "already_approved") == 0;
}

/*
 * approval_misfit says what in content, an accepted answer to the
 * approval form, does not fit the form, or NULL when it fits: the
 * content absent or an object, approve absent or a boolean, reason absent
 * or a string. A client that does not check its answers against the form
 * must not approve a job with approve "false", 0 or null.
 */
static const char *approval_misfit(const json_t *content)
{
	const json_t *approve = json_object_get(content, "approve");
	const json_t *reason = json_object_get(content, "reason");

	if (content && !json_is_object(content))
		return "the answer's content must be an object";
	if (approve && !json_is_boolean(approve))
		return "approve must be true or false";
	if (reason && !json_is_string(reason))
		return "reason must be a string";
	return NULL;
}

/* note_bad_answer keeps why w's last answer was refused, for the question
 * asked again (ask: its message, and the count that ends the asking). */
static void note_bad_answer(struct mcp_watch *w, const char *why)
{
	free(w->last_error);
	w->last_error = strdup(why);
	w->bad_answers++;
}

/* note_refusal keeps why the worker refused w's last answer: its message
 * and the first schema errors of its data, each "/path: message" as
 * berth resume prints them, so that the person asked again knows which
 * field to change. */
static void note_refusal(struct mcp_watch *w, const struct worker_result *res)
{
	const json_t *errors = json_object_get(res->data, "errors"), *e;
	char *text = NULL;
	size_t len = 0, i;
	FILE *fp = open_memstream(&text, &len);

	if (!fp) {
		note_bad_answer(w, "invalid answer");
		return;
	}
	fputs(res->message ? res->message : "invalid answer", fp);
	json_array_foreach(errors, i, e) {
		const char *at = json_string_value(json_object_get(
			e, "instancePath"));
		const char *msg = json_string_value(json_object_get(
			e, "message"));

		if (i == 3) {
			fprintf(fp, " (and %zu more)", json_array_size(errors) - i);
			break;
		}
		fprintf(fp, "%s %s: %.200s", i ? ";" : ":", at && *at ? at : "/",
			msg ? msg : "?");
	}
	if (fclose(fp) != 0 || !text) {
		free(text);
		note_bad_answer(w, "invalid answer");
		return;
	}
	note_bad_answer(w, text);
	free(text);
}

/* on_applied runs when the worker applied (or refused) an answer. */
static void on_applied(void *arg, const struct worker_result *res)
{
	struct mcp_ask *a = arg;
	struct mcp_watch *w = a->w;
	bool refused = refused_answer(a->api, res);

	if (w) {
		w->ask = NULL;
		if (res->err == WORKER_EINVAL)
			note_refusal(w, res);
		if (refused && res->job) {
			/* Not asked again in this wait: the same person
			 * would be refused the same way. */
			cannot_ask(w, res->job, res->message);
		} else {
			recheck(w);
		}
	}
	ask_unref(a);
}

/*
 * on_answer takes the client's answer to an elicitation/create. It is
 * applied to the wait it was asked about, even when the watch that asked
 * has ended (the client gave up waiting on tasks/result, but the person
 * still answered), and never to a later wait of the job.
 */
static void on_answer(void *arg, json_t *result, json_t *error)
{
	struct mcp_ask *a = arg;
	struct mcp_watch *w = a->w;
	struct worker *wk = a->api->worker;
	const char *action = json_string_value(json_object_get(result, "action"));
	json_t *content = json_object_get(result, "content"), *none = NULL;
	const char *reason = json_string_value(json_object_get(content, "reason"));
	bool answered = action && (strcmp(action, "accept") == 0 ||
				   strcmp(action, "decline") == 0);
	struct store_job *j = NULL;
	struct worker_actor by;
	const char *misfit;
	unsigned need;
	int rc = 0;

	if (w)
		w->ask = NULL;
	if (!result && !error) {
		/* The connection closed: nobody answered. */
		ask_unref(a);
		return;
	}
	if (store_get(a->api->store, a->job_id, &j) < 0 ||
	    j->updated_at != a->episode ||
	    mcp_status_of(j->status) != MCP_INPUT_REQUIRED) {
		/* The job moved on while the question was open (answered
		 * elsewhere, cancelled, expired): this answer is about a
		 * wait that is over, and must never apply to a later one. */
		store_job_free(j);
		if (w)
			recheck(w);
		ask_unref(a);
		return;
	}
	if (!answered) {
		/* cancel (the person dismissed it), an error, or an action
		 * MCP does not define: the job keeps waiting. */
		const char *em = json_string_value(json_object_get(error,
								   "message"));
		char why[320];

		if (error)
			snprintf(why, sizeof why, "the client could not ask: "
				 "%.256s", em ? em : "an error");
		else
			snprintf(why, sizeof why, "the question was put aside");
		if (w)
			cannot_ask(w, j, why);
		store_job_free(j);
		ask_unref(a);
		return;
	}
	/* An answer is checked against the roles of the connection's
	 * principal when it is applied, as the method it stands for would
	 * be (docs/MCP.md): approve for an approval, resume for a question
	 * of a suspended job, whether it is accepted or declined. */
	need = a->approval ? BERTH_ROLE_APPROVE : BERTH_ROLE_RESUME;
	if (!a->conn->principal || !(a->conn->principal->roles & need)) {
		char why[320];

		api_refused(a->api, API_REFUSED_FORBIDDEN);
		snprintf(why, sizeof why, "forbidden: %.64s may not %s it, "
			 "which needs the role %s",
			 a->conn->principal ? a->conn->principal->name : "?",
			 a->approval ? "approve or decline" : "answer",
			 berth_role_name(need));
		if (w)
			cannot_ask(w, j, why);
		store_job_free(j);
		ask_unref(a);
		return;
	}
	misfit = a->approval && strcmp(action, "accept") == 0
			 ? approval_misfit(content)
			 : NULL;
	if (misfit) {
		/* Asked again with the reason, as an answer that fails a
		 * resumeSchema is; the job keeps waiting. */
		if (w) {
			note_bad_answer(w, misfit);
			recheck(w);
		}
		store_job_free(j);
		ask_unref(a);
		return;
	}
	api_conn_actor(a->conn, &by);
	a->refs++;
	/* An accept without content (MCP allows it) resumes with {}; the
	 * worker takes its own reference. */
	if (!a->approval && !content)
		none = json_object();
	if (a->approval && strcmp(action, "accept") == 0 &&
	    !json_is_false(json_object_get(content, "approve")))
		rc = worker_approve(wk, a->job_id, reason, &by, on_applied, a);
	else if (a->approval)
		rc = worker_decline(wk, a->job_id,
				    reason ? reason : "declined through MCP",
				    &by, on_applied, a);
	else if (strcmp(action, "accept") == 0)
		rc = worker_resume(wk, a->job_id, content ? content : none,
				   &by, on_applied, a);
	else
		rc = worker_cancel(wk, a->job_id, "the user declined to answer "
				   "(MCP elicitation)", &by, on_applied, a);
	json_decref(none);
	if (rc < 0) {
		a->refs--;
		if (w)
			cannot_ask(w, j, "berthd could not take the answer");
	} else if (w) {
		/* The answer is under way: no new question until it lands. */
		w->ask = a;
	}
	store_job_free(j);
	ask_unref(a);
}

/*
 * ask sends w's client an elicitation/create for the wait of job j. A
 * form that cannot be made, or a question that cannot be sent, goes to
 * cannot_ask.
 */
static void ask(struct mcp_watch *w, const struct store_job *j)
{
	struct api *api = w->mc->hub->api;
	bool approval = j->status == STORE_AWAITING_APPROVAL;
	json_t *view, *form, *params;
	char *why = NULL, *quote, *msg = NULL, *reason = NULL;
	const struct worker_tool *t;
	struct mcp_ask *a;
	int rc;

	if (w->bad_answers >= MCP_MAX_BAD_ANSWERS) {
		if (asprintf(&reason, "the last %d answers did not fit the "
			     "%s (%s)", w->bad_answers,
			     approval ? "approval form" : "resumeSchema",
			     w->last_error ? w->last_error : "invalid") < 0)
			reason = NULL;
		cannot_ask(w, j, reason);
		free(reason);
		return;
	}
	t = worker_tool_find(api->worker, j->tool);
	if (approval) {
		form = approval_form();
	} else if (!t) {
		cannot_ask(w, j, "its tool is not registered in this berthd");
		return;
	} else {
		form = form_schema(worker_tool_schema(t, WORKER_SCHEMA_RESUME),
				   &why);
		if (!form) {
			if (asprintf(&reason, "its resumeSchema cannot be asked "
				     "as an MCP form: %s; MCP forms hold only "
				     "strings, numbers, integers, booleans and "
				     "string choices", why ? why : "?") < 0)
				reason = NULL;
			cannot_ask(w, j, reason);
			free(reason);
			free(why);
			return;
		}
	}
	/* What the person sees is the tool's display view of the payload;
	 * of a tool that declares a transcript view and no display view,
	 * the transcript view, since an undeclared display view is the
	 * payload as it is, and what the transcript hides must reach no
	 * MCP client. */
	view = worker_job_to_json(
		api->worker, j,
		worker_tool_has_view(t, WORKER_VIEW_TRANSCRIPT) &&
				!worker_tool_has_view(t, WORKER_VIEW_DISPLAY)
			? WORKER_VIEW_TRANSCRIPT
			: WORKER_VIEW_DISPLAY);
	if (approval) {
		quote = api_mcp_dumps(json_object_get(view, "input"),
				      API_MCP_QUOTE_MAX);
		rc = asprintf(&msg, "%s%s%sApprove running the tool %s (berth "
			      "job %s) with this input? %s",
			      w->last_error ? "Not done: " : "",
			      w->last_error ? w->last_error : "",
			      w->last_error ? ". " : "", j->tool, j->id,
			      quote ? quote : "");
	} else {
		json_t *p = json_object_get(view, "suspendPayload");

		quote = json_is_string(p) ? strdup(json_string_value(p))
					  : api_mcp_dumps(p, API_MCP_QUOTE_MAX);
		rc = asprintf(&msg, "%s%s%sThe tool %s (berth job %s) asks: %s",
			      w->last_error ? "That answer was not accepted: "
					    : "",
			      w->last_error ? w->last_error : "",
			      w->last_error ? ". " : "", j->tool, j->id,
			      quote ? quote : "");
	}
	free(quote);
	json_decref(view);
	params = rc < 0 ? NULL : json_pack("{s:s, s:o}", "message", msg,
					   "requestedSchema", form);
	free(msg);
	a = calloc(1, sizeof *a);
	if (!params || !a) {
		json_decref(params);
		free(a);
		cannot_ask(w, j, "out of memory");
		return;
	}
	if (strcmp(w->mc->version, "2025-11-25") == 0)
		json_object_set_new(params, "mode", json_string("form"));
	/* A question about a task says which (MCP: "an elicitation that a
	 * task-augmented tool call depends on MUST share the same related
	 * task ID"). */
	if (w->kind != MCP_W_CALL)
		json_object_set_new(params, "_meta", related(j->id));
	a->w = w;
	a->api = api;
	a->conn = w->mc->conn;
	a->refs = 1;
	a->approval = approval;
	a->episode = j->updated_at;
	snprintf(a->job_id, sizeof a->job_id, "%s", j->id);
	w->ask = a;
	rc = api_conn_call(w->mc->conn, "elicitation/create", params,
			   on_answer, a);
	if (rc < 0) {
		w->ask = NULL;
		free(a);
		cannot_ask(w, j, "the question could not be sent");
	}
}

/* approved_here is true when the principal of c has approved job j
 * already (below its quorum): asking again would be answered
 * "already_approved". */
static bool approved_here(const struct api_conn *c, const struct store_job *j)
{
	size_t i;
	json_t *e;

	json_array_foreach(j->approvals, i, e) {
		const char *by = json_string_value(json_object_get(e, "by"));

		if (c->principal && by && strcmp(by, c->principal->name) == 0)
			return true;
	}
	return false;
}

/* asked_here is true when another watch of w's connection on the same
 * job has the question of this wait open, or put it aside: a connection
 * is asked once per wait, whichever of its requests asks. */
static bool asked_here(const struct mcp_watch *w, const struct store_job *j)
{
	for (const struct mcp_watch *o = w->mc->watches; o; o = o->cnext)
		if (o != w && strcmp(o->job_id, j->id) == 0 &&
		    (o->ask || (o->held && o->episode == j->updated_at)))
			return true;
	return false;
}

/* notify sends notifications/tasks/status about j on w's connection. */
static void notify(struct mcp_watch *w, const struct store_job *j)
{
	json_t *msg = json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0",
				"method", "notifications/tasks/status",
				"params", task_json(w->mc->hub->api->worker,
						    j, -1));

	if (msg)
		api_conn_send(w->mc->conn, msg);
	json_decref(msg);
}

/* watch_update brings w up to date with its job j (borrowed): a status
 * notification when the task's status changed, the answer of a request
 * once the job ended, a question while it waits (from a waiting request,
 * or from the status watch of the connection that created the task). w
 * may be freed. */
static void watch_update(struct mcp_watch *w, const struct store_job *j)
{
	int s = task_status(j);

	if (w->kind == MCP_W_STATUS) {
		if (s != w->last) {
			notify(w, j);
			w->last = s;
		}
		if (store_status_terminal(j->status)) {
			watch_free(w);
			return;
		}
		/* The owner is asked once it has shown that it follows the
		 * task: a question sent with the reply that made it the
		 * owner can reach a client before it has taken in the
		 * task, and a client that cannot place it answers "cancel"
		 * (the ext-tasks client does), after which it is not asked
		 * again in this wait (watch_status). */
		if (!w->owner || !w->followed)
			return;
	} else if (store_status_terminal(j->status)) {
		struct api_req *r = w->req;

		w->req = NULL;
		api_reply(r, call_result(w->mc, j, w->kind == MCP_W_RESULT));
		watch_free(w);
		return;
	}
	if (s != MCP_INPUT_REQUIRED)
		return;
	if (j->updated_at != w->episode) {
		/* A new wait (a first one, or a later suspend). */
		w->episode = j->updated_at;
		w->held = false;
		w->bad_answers = 0;
		free(w->last_error);
		w->last_error = NULL;
	}
	if (w->ask || w->held || asked_here(w, j))
		return;
	if (!w->mc->elicitation)
		cannot_ask(w, j, "this MCP client declared no form elicitation");
	else if (j->status == STORE_AWAITING_APPROVAL &&
		 approved_here(w->mc->conn, j))
		cannot_ask(w, j, "you approved it already; it waits for the "
			   "approvals of others (its tool's quorum)");
	else
		ask(w, j);
}

/* hub_on_event re-reads a job that a watch is about when its status
 * changes in a way the watch cares for. */
static void hub_on_event(void *arg, const struct store_event *ev)
{
	struct mcp_hub *hub = arg;
	int s = mcp_status_of(ev->status);
	bool wanted = false;
	struct store_job *j;
	struct mcp_watch *w, *next;

	for (w = hub->buckets[bucket_of(ev->job_id)]; w && !wanted; w = w->next)
		if (strcmp(w->job_id, ev->job_id) == 0)
			wanted = w->kind == MCP_W_STATUS
					 ? s != w->last
					 : s != MCP_WORKING;
	if (!wanted || store_get(hub->api->store, ev->job_id, &j) < 0)
		return;
	for (w = hub->buckets[bucket_of(ev->job_id)]; w; w = next) {
		next = w->next;
		if (strcmp(w->job_id, ev->job_id) == 0)
			watch_update(w, j);
	}
	store_job_free(j);
}

/* has_asker is true when some connection of hub owns the task job_id
 * and can be asked its questions (it declared elicitation). */
static bool has_asker(const struct mcp_hub *hub, const char *job_id)
{
	for (const struct mcp_watch *w = hub->buckets[bucket_of(job_id)]; w;
	     w = w->next)
		if (w->owner && w->mc->elicitation &&
		    strcmp(w->job_id, job_id) == 0)
			return true;
	return false;
}

/*
 * watch_status starts status notifications about job j on mc (unless it
 * has them already, or too many), as if last had been told. owner: mc
 * created the task, so it is also asked the task's questions, once it
 * follows the task. A connection with elicitation that asks about a task
 * no such connection owns (its creator is gone: a restart of berthd or of
 * the client, a task resumed from a stored reference; its creator cannot
 * answer; a job submitted through berth's own protocol) takes it over, or
 * its questions would reach nobody who only polls.
 *
 * An owner follows the task from its first request about it after the
 * reply that made it the owner, never on that reply: then it is asked a
 * waiting question. The reply to a tasks/get that takes a task over is
 * the client's first sight of it, as a CreateTaskResult is, and a
 * question sent with it overtakes it: the ext-tasks client's resumeTask
 * takes in the task only once that reply has come back, answers the
 * question it cannot place yet with "cancel", and then polls tasks/get
 * as long as the task waits, since a question put aside is not asked
 * again in that wait.
 * A tasks/result that takes a task over is asked on its own (it waits for
 * the task, so its client has it in hand).
 */
static void watch_status(struct mcp_conn *mc, const struct store_job *j,
			 int last, bool owner)
{
	bool adopt = !owner && mc->elicitation && !has_asker(mc->hub, j->id);
	struct mcp_watch *w;

	if (store_status_terminal(j->status))
		return;
	for (w = mc->watches; w; w = w->cnext) {
		if (w->kind != MCP_W_STATUS || strcmp(w->job_id, j->id) != 0)
			continue;
		if (owner)
			return;
		if (w->owner && !w->followed) {
			w->followed = true;
			watch_update(w, j);
		} else if (!w->owner && adopt && mc->nowned < MCP_MAX_OWNED) {
			/* Taken over: followed from the next request. */
			w->owner = true;
			mc->nstatus--;
			mc->nowned++;
		}
		return;
	}
	if ((owner || adopt) ? mc->nowned >= MCP_MAX_OWNED
			     : mc->nstatus >= MCP_MAX_STATUS_WATCHES)
		return;
	w = watch_new(mc, MCP_W_STATUS, j->id, NULL);
	if (!w)
		return;
	w->owner = owner || adopt;
	if (w->owner)
		mc->nowned++;
	else
		mc->nstatus++;
	w->last = last;
	watch_update(w, j);
}

/* ---- methods ------------------------------------------------------------ */

/* audit_client returns the client of the audit, {name, version} of
 * clientInfo (borrowed; NULL: none), each member a string of at most 128
 * bytes: the audit keeps who it was, not what the client said about
 * itself at length. */
static json_t *audit_client(const json_t *info)
{
	static const char *const keys[] = {"name", "version"};
	json_t *c;

	if (!json_is_object(info))
		return NULL;
	c = json_object();
	for (size_t i = 0; c && i < 2; i++) {
		const char *v = json_string_value(json_object_get(info, keys[i]));

		if (v)
			json_object_set_new(c, keys[i],
					    json_stringn(v, strnlen(v, 128)));
	}
	if (c && json_object_size(c) == 0) {
		json_decref(c);
		return NULL;
	}
	return c;
}

static bool form_elicitation(const json_t *caps)
{
	json_t *e = json_object_get(caps, "elicitation");

	if (!json_is_object(e))
		return false;
	/* An empty elicitation capability means form mode (MCP keeps that
	 * for clients of 2025-06-18). */
	return json_object_get(e, "form") || !json_object_get(e, "url");
}

static void m_initialize(struct api_req *r, json_t *params)
{
	const char *asked = api_params_str(params, "protocolVersion");
	const char *version = MCP_LATEST;
	json_t *asked_caps = json_object_get(params, "capabilities");
	struct mcp_conn *mc = mcp_conn_get(r->conn);
	json_t *caps, *result;

	if (!mc) {
		api_reply_error(r, API_INTERNAL_ERROR, "out of memory", NULL);
		return;
	}
	for (size_t i = 0; asked && mcp_versions[i]; i++)
		if (strcmp(asked, mcp_versions[i]) == 0)
			version = mcp_versions[i];
	snprintf(mc->version, sizeof mc->version, "%s", version);
	mc->elicitation = form_elicitation(asked_caps);
	json_decref(mc->client_info);
	mc->client_info = json_incref(json_object_get(params, "clientInfo"));
	/* From now on the connection's requests come through MCP, and the
	 * audit names the client beside the principal (docs/MCP.md). */
	r->conn->via = "mcp";
	json_decref(r->conn->client);
	r->conn->client = audit_client(mc->client_info);
	/* Tasks came with 2025-11-25, as a part of the core; they left it
	 * for the extension io.modelcontextprotocol/tasks. A client of an
	 * older revision that declares either form gets them too. Both
	 * forms are advertised, because clients look for one or the
	 * other; the methods and shapes are those of 2025-11-25 either
	 * way. */
	mc->tasks = strcmp(version, "2025-11-25") == 0 ||
		    json_is_object(json_object_get(asked_caps, "tasks")) ||
		    json_is_object(json_object_get(
			    json_object_get(asked_caps, "extensions"),
			    MCP_TASKS_EXT));
	caps = json_pack("{s:{s:b}}", "tools", "listChanged", 0);
	if (caps && mc->tasks) {
		json_object_set_new(caps, "tasks", json_pack(
			"{s:{}, s:{}, s:{s:{s:{}}}}", "list", "cancel",
			"requests", "tools", "call"));
		json_object_set_new(caps, "extensions",
				    json_pack("{s:{}}", MCP_TASKS_EXT));
	}
	result = json_pack(
		"{s:s, s:o, s:{s:s, s:s, s:s}, s:s}",
		"protocolVersion", version,
		"capabilities", caps,
		"serverInfo", "name", "berth", "title", "berth",
		"version", BERTH_VERSION,
		"instructions",
		"berth runs each tool call as a durable job: a call that waits "
		"for approval or input survives restarts, and a job's id is "
		"its task id. Calls can also be answered from the berth "
		"command line (berth approve, berth decline, berth resume).");
	api_reply(r, result);
}

static void m_initialized(struct api_req *r, json_t *params)
{
	api_reply(r, json_object());
}

/* m_cancelled ends the wait of a request the client gave up on
 * (notifications/cancelled): it is dropped unanswered, as MCP asks. The
 * job itself goes on; tasks/cancel is how a client stops one. */
static void m_cancelled(struct api_req *r, json_t *params)
{
	struct mcp_conn *mc = conn_mcp(r->conn);
	json_t *id = json_object_get(params, "requestId");

	for (struct mcp_watch *w = mc ? mc->watches : NULL; w && id;
	     w = w->cnext) {
		if (w->req && json_equal(w->req->id, id)) {
			watch_free(w); /* drops w->req */
			break;
		}
	}
	/* A call whose job is not stored yet is dropped once it is. */
	for (struct mcp_call *call = mc ? mc->calls : NULL; call && id;
	     call = call->next)
		if (json_equal(call->r->id, id))
			call->cancelled = true;
	api_reply(r, json_object());
}

/* invalid_input_result is the isError result for arguments that fail the
 * tool's inputSchema: MCP counts them as tool errors, which a model can
 * correct, rather than protocol errors. */
static json_t *invalid_input_result(const char *tool,
				    const struct worker_result *res)
{
	json_t *errs = json_object_get(res->data, "errors"), *e, *r;
	size_t len = 0, i;
	char *text;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	fprintf(f, "Invalid call of tool %s: %s", tool,
		res->message ? res->message : "the arguments do not match "
		"its inputSchema");
	json_array_foreach(errs, i, e) {
		const char *path = json_string_value(json_object_get(
			e, "instancePath"));
		const char *m = json_string_value(json_object_get(e, "message"));

		fprintf(f, "\n- %s: %s", path && *path ? path : "(root)",
			m ? m : "invalid");
	}
	fclose(f);
	r = error_result(text, NULL);
	free(text);
	return r;
}

/* call_unlink takes call out of its connection's list, if it is still
 * there. */
static void call_unlink(struct mcp_call *call)
{
	if (!call->mc)
		return;
	*call->pprev = call->next;
	if (call->next)
		call->next->pprev = call->pprev;
	call->mc = NULL;
}

/* on_submitted answers a tools/call once its job is durable: at once with
 * a CreateTaskResult for a task, else when the job ends (a watch). */
static void on_submitted(void *arg, const struct worker_result *res)
{
	struct mcp_call *call = arg;
	struct api_req *r = call->r;
	bool task = json_object_get(r->params, "task") != NULL;
	const char *name = api_params_str(r->params, "name");
	bool cancelled = call->cancelled;
	struct mcp_conn *mc;
	struct mcp_watch *w;
	char text[200];

	call_unlink(call);
	json_decref(call->metadata);
	free(call);
	if (api_req_dead(r) || cancelled) {
		api_req_drop(r);
		return;
	}
	if (res->err == WORKER_EINVAL && !task) {
		api_reply(r, invalid_input_result(name, res));
		return;
	}
	if (res->err == WORKER_ENOTFOUND) {
		snprintf(text, sizeof text, "Unknown tool: %.128s", name);
		api_reply_error(r, API_INVALID_PARAMS, text, NULL);
		return;
	}
	if (res->err != WORKER_OK) {
		api_reply_worker_error(r, res);
		return;
	}
	mc = mcp_conn_get(r->conn);
	if (!mc) {
		api_reply_error(r, API_INTERNAL_ERROR, "out of memory", NULL);
		return;
	}
	if (task) {
		/* MCP tasks begin "working"; one that waits for approval
		 * from the start says so in its first status notification,
		 * which follows this answer, and so does its question. */
		api_reply(r, json_pack("{s:o}", "task",
				       task_json(mc->hub->api->worker, res->job,
						 MCP_WORKING)));
		watch_status(mc, res->job, MCP_WORKING, true);
		return;
	}
	w = watch_new(mc, MCP_W_CALL, res->job->id, r);
	if (!w) {
		api_reply_error(r, API_INTERNAL_ERROR, "out of memory", NULL);
		return;
	}
	recheck(w);
}

/* The _meta members of a tools/call that berth reads. */
static const struct api_param p_call_meta[] = {
	{MCP_META_CONTEXT, API_P_OBJECT, 0, 0, 0, NULL, NULL},
	{MCP_META_TTL, API_P_INT, 0, 1, MCP_MS_MAX, NULL, NULL},
	{NULL, 0, 0, 0, 0, NULL, NULL},
};

/* check_meta checks the _meta of a tools/call; on an error it answers r
 * with -32602 and the errors at their place in params, and returns -1. */
static int check_meta(struct api_req *r, const json_t *meta)
{
	json_t *errors = NULL, *e;
	size_t i;

	if (!meta || api_params_check(p_call_meta, meta, &errors) == 0)
		return 0;
	json_array_foreach(errors, i, e) {
		const char *path = json_string_value(json_object_get(
			e, "instancePath"));
		size_t len = 0;
		char *s = NULL;
		FILE *f = open_memstream(&s, &len);

		/* "/berth/ttlMs" names the member "berth/ttlMs", which a
		 * JSON Pointer spells "berth~1ttlMs". */
		if (!f)
			continue;
		fputs("/_meta/", f);
		for (const char *p = path && *path ? path + 1 : ""; *p; p++) {
			if (*p == '/' || *p == '~')
				fputs(*p == '/' ? "~1" : "~0", f);
			else
				fputc(*p, f);
		}
		if (fclose(f) == 0)
			json_object_set_new(e, "instancePath", json_string(s));
		free(s);
	}
	api_reply_error(r, API_INVALID_PARAMS, "Invalid _meta of tools/call",
			json_pack("{s:o}", "errors", errors));
	return -1;
}

/* call_metadata returns what an MCP job keeps as its metadata.mcp
 * (worker_submit's mcp): {"_meta": the request's _meta, "clientInfo":
 * initialize's}, each when there is one; never NULL but out of memory. */
static json_t *call_metadata(const struct mcp_conn *mc, json_t *meta)
{
	json_t *m;

	m = json_object();
	if (m && meta)
		json_object_set(m, "_meta", meta);
	if (m && mc && mc->client_info)
		json_object_set(m, "clientInfo", mc->client_info);
	return m;
}

static void m_tools_call(struct api_req *r, json_t *params)
{
	struct api *a = r->conn->api;
	struct mcp_conn *mc = conn_mcp(r->conn);
	const char *name = api_params_str(params, "name");
	json_t *task = json_object_get(params, "task");
	json_t *meta = json_object_get(params, "_meta");
	struct worker_submit s = {0};
	struct worker_actor by;
	const struct worker_tool *t = worker_tool_find(a->worker, name);
	struct mcp_call *call;
	char text[200];
	int rc;

	if (!t) {
		snprintf(text, sizeof text, "Unknown tool: %.128s", name);
		api_reply_error(r, API_INVALID_PARAMS, text, NULL);
		return;
	}
	if (check_meta(r, meta) < 0)
		return;
	/* A server that did not offer tasks processes a task-augmented
	 * request normally, ignoring the task (MCP, "Task Support and
	 * Handling"). A client that never initialized is taken to speak
	 * the latest revision. */
	if (task && mc && mc->version[0] && !mc->tasks) {
		json_object_del(params, "task");
		task = NULL;
	}
	if (task) {
		json_t *tj = worker_tool_to_json(a->worker, t);
		const char *support = json_string_value(json_object_get(
			json_object_get(tj, "execution"), "taskSupport"));
		bool forbidden = support && strcmp(support, "forbidden") == 0;

		json_decref(tj);
		if (forbidden) {
			snprintf(text, sizeof text, "Tool %.128s does not run "
				 "as a task (execution.taskSupport is "
				 "forbidden)", name);
			api_reply_error(r, API_METHOD_NOT_FOUND, text, NULL);
			return;
		}
	}
	call = calloc(1, sizeof *call);
	if (!call) {
		api_reply_error(r, API_INTERNAL_ERROR, "out of memory", NULL);
		return;
	}
	call->r = r;
	call->metadata = call_metadata(mc, meta);
	if ((call->mc = mcp_conn_get(r->conn))) {
		call->next = call->mc->calls;
		if (call->next)
			call->next->pprev = &call->next;
		call->pprev = &call->mc->calls;
		call->mc->calls = call;
	}
	/* Absent arguments are an empty object; r->params keeps it alive. */
	if (!json_object_get(params, "arguments"))
		json_object_set_new(params, "arguments", json_object());
	s.tool = name;
	s.input = json_object_get(params, "arguments");
	s.request_context = json_object_get(meta, MCP_META_CONTEXT);
	s.mcp = call->metadata;
	api_conn_actor(r->conn, &by);
	s.by = &by;
	/* How long the job may wait for approval or input: what its tool
	 * allows, or shorter when the client asks with berth/ttlMs. A
	 * task's ttl is how long the client wants the task kept, and never
	 * abandons a question (docs/MCP.md, "ttl"). */
	s.ttl_ms = api_params_int(meta, MCP_META_TTL, 0);
	/* Everything else in s is borrowed from r->params, which lives
	 * until r is answered. */
	rc = worker_submit(a->worker, &s, on_submitted, call);
	if (rc < 0) {
		call_unlink(call);
		json_decref(call->metadata);
		free(call);
		api_reply_error(r, API_INTERNAL_ERROR, rc == -ESHUTDOWN
				? "berthd is shutting down" : strerror(-rc),
				NULL);
	}
}

/* get_task reads the job that a tasks/... request names into *j; on an error it
 * answers r and returns -1. */
static int get_task(struct api_req *r, struct store_job **j)
{
	const char *id = api_params_str(r->params, "taskId");
	int rc = store_get(r->conn->api->store, id, j);

	if (rc == STORE_ENOTFOUND) {
		api_reply_error(r, API_INVALID_PARAMS, "Failed to retrieve "
				"task: Task not found", NULL);
		return -1;
	}
	if (rc < 0) {
		api_reply_store_error(r, rc, id);
		return -1;
	}
	return 0;
}

static void m_tasks_get(struct api_req *r, json_t *params)
{
	struct mcp_conn *mc = mcp_conn_get(r->conn);
	struct store_job *j;

	if (get_task(r, &j) < 0)
		return;
	api_reply(r, task_json(r->conn->api->worker, j, -1));
	/* A client that asks about a task is told when it changes. */
	if (mc)
		watch_status(mc, j, task_status(j), false);
	store_job_free(j);
}

static void m_tasks_result(struct api_req *r, json_t *params)
{
	struct mcp_conn *mc = mcp_conn_get(r->conn);
	struct mcp_watch *w;
	struct store_job *j;

	if (get_task(r, &j) < 0)
		return;
	if (!mc) {
		api_reply_error(r, API_INTERNAL_ERROR, "out of memory", NULL);
	} else if ((w = watch_new(mc, MCP_W_RESULT, j->id, r))) {
		watch_status(mc, j, task_status(j), false);
		watch_update(w, j);
	} else {
		api_reply_error(r, API_INTERNAL_ERROR, "out of memory", NULL);
	}
	store_job_free(j);
}

static void m_tasks_list(struct api_req *r, json_t *params)
{
	struct store_filter f = {0};
	struct store_job **jobs = NULL;
	size_t n = 0;
	char *next = NULL;
	json_t *tasks, *result;
	int rc;

	rc = store_list(r->conn->api->store, &f, MCP_TASKS_PAGE,
			api_params_str(params, "cursor"), &jobs, &n, &next);
	if (rc == -EINVAL) {
		api_reply_error(r, API_INVALID_PARAMS, "Invalid cursor: not "
				"one this server gave out", NULL);
		return;
	}
	if (rc < 0) {
		api_reply_store_error(r, rc, NULL);
		return;
	}
	tasks = json_array();
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(tasks, task_json(r->conn->api->worker,
						       jobs[i], -1));
		store_job_free(jobs[i]);
	}
	free(jobs);
	result = json_pack("{s:o}", "tasks", tasks);
	if (result && next)
		json_object_set_new(result, "nextCursor", json_string(next));
	free(next);
	api_reply(r, result);
}

static void on_cancelled(void *arg, const struct worker_result *res)
{
	struct api_req *r = arg;
	char text[200];

	if (api_req_dead(r)) {
		api_req_drop(r);
	} else if (res->err == WORKER_ECONFLICT && res->job) {
		snprintf(text, sizeof text, "Cannot cancel task: already in "
			 "terminal status '%s'",
			 mcp_status_names[task_status(res->job)]);
		api_reply_error(r, API_INVALID_PARAMS, text, NULL);
	} else if (res->err == WORKER_ENOTFOUND) {
		api_reply_error(r, API_INVALID_PARAMS, "Failed to retrieve "
				"task: Task not found", NULL);
	} else if (res->err != WORKER_OK) {
		api_reply_worker_error(r, res);
	} else {
		api_reply(r, task_json(r->conn->api->worker, res->job, -1));
	}
}

static void m_tasks_cancel(struct api_req *r, json_t *params)
{
	struct worker_actor by;
	struct store_job *j;
	char text[200];
	int rc;

	if (get_task(r, &j) < 0)
		return;
	if (store_status_terminal(j->status)) {
		snprintf(text, sizeof text, "Cannot cancel task: already in "
			 "terminal status '%s'",
			 mcp_status_names[task_status(j)]);
		api_reply_error(r, API_INVALID_PARAMS, text, NULL);
		store_job_free(j);
		return;
	}
	store_job_free(j);
	api_conn_actor(r->conn, &by);
	rc = worker_cancel(r->conn->api->worker,
			   api_params_str(params, "taskId"),
			   "cancelled through MCP tasks/cancel", &by,
			   on_cancelled, r);
	if (rc < 0)
		api_reply_error(r, API_INTERNAL_ERROR, strerror(-rc), NULL);
}

/* ---- tools/list ---------------------------------------------------------- */

json_t *api_mcp_tool_to_json(struct api_conn *c, const struct worker_tool *t)
{
	struct worker *wk = c->api->worker;
	json_t *tj = worker_tool_to_json(wk, t);
	const json_t *schema = worker_tool_schema(t, WORKER_SCHEMA_OUTPUT);
	static const char *const listed[] = {"inputSchema", "outputSchema"};

	if (!tj || !conn_mcp(c))
		return tj;
	if (schema && worker_tool_has_view(t, WORKER_VIEW_TRANSCRIPT)) {
		/* structuredContent is the transcript view, which a
		 * transform may have made into anything: a schema that no
		 * longer describes it would make clients refuse the result
		 * (the TypeScript SDK checks it), so none is listed. */
		json_object_del(tj, "outputSchema");
	} else if (schema && !api_mcp_object_schema(schema)) {
		json_object_set_new(tj, "outputSchema",
				    api_mcp_output_schema(schema));
	}
	for (size_t i = 0; i < sizeof listed / sizeof listed[0]; i++) {
		json_t *s = json_object_get(tj, listed[i]);

		if (s)
			json_object_set_new(tj, listed[i],
					    api_mcp_listed_schema(s));
	}
	return tj;
}

/* ---- the table ---------------------------------------------------------- */

#define REQ API_P_REQUIRED
#define END {NULL, 0, 0, 0, 0, NULL, NULL}

static const struct api_param p_initialize[] = {
	{"protocolVersion", API_P_STRING, REQ, 0, 64, NULL, NULL},
	{"capabilities", API_P_OBJECT, 0, 0, 0, NULL, NULL},
	{"clientInfo", API_P_OBJECT, 0, 0, 0, NULL, NULL},
	END,
};
static const struct api_param p_cancelled[] = {
	{"requestId", API_P_ANY, 0, 0, 0, NULL, NULL},
	END,
};
static const struct api_param p_call[] = {
	{"name", API_P_STRING, REQ, 0, 128, NULL, NULL},
	{"arguments", API_P_OBJECT, 0, 0, 0, NULL, NULL},
	{"task", API_P_OBJECT, 0, 0, 0, NULL, NULL},
	{"_meta", API_P_OBJECT, 0, 0, 0, NULL, NULL},
	END,
};
static const struct api_param p_task[] = {
	{"taskId", API_P_STRING, REQ, 0, 64, NULL, NULL},
	END,
};
static const struct api_param p_tasks_list[] = {
	{"cursor", API_P_STRING, 0, 0, 0, NULL, NULL},
	END,
};

/* Roles as berth's own methods have them (methods.c): reading is read,
 * a call submits, a cancel operates. */
static const struct api_method mcp_methods[] = {
	{"initialize", m_initialize, 0, BERTH_ROLE_READ, p_initialize},
	{"notifications/initialized", m_initialized, 0, BERTH_ROLE_READ, NULL},
	{"notifications/cancelled", m_cancelled, 0, BERTH_ROLE_READ,
	 p_cancelled},
	{"tools/call", m_tools_call, API_M_MUTATES, BERTH_ROLE_SUBMIT, p_call},
	{"tasks/get", m_tasks_get, 0, BERTH_ROLE_READ, p_task},
	{"tasks/result", m_tasks_result, 0, BERTH_ROLE_READ, p_task},
	{"tasks/list", m_tasks_list, 0, BERTH_ROLE_READ, p_tasks_list},
	{"tasks/cancel", m_tasks_cancel, API_M_MUTATES, BERTH_ROLE_OPERATE,
	 p_task},
};

const struct api_method *api_mcp_method_find(const char *name)
{
	for (size_t i = 0; name && i < sizeof mcp_methods / sizeof mcp_methods[0];
	     i++)
		if (strcmp(mcp_methods[i].name, name) == 0)
			return &mcp_methods[i];
	return NULL;
}

/*
 * remote.c: tools served by worker processes (docs/WORKERS.md), the third
 * executor beside exec.c (C tools) and proc.c (external commands).
 *
 * A worker process connects to the api, registers the definitions of the
 * tools it serves and how many runs it takes at once, and runs the jobs
 * pushed to it. The api owns the connection; the worker reaches it only
 * through struct worker_remote_ops (worker.h), so that nothing here knows
 * the wire protocol. A run of a worker process's tool is a struct
 * worker__run like any other: its timeout, cancel, retries, the checks of
 * its outcome and its final transition are run.c's.
 *
 * The connection is the lease on the runs pushed to it. When it closes
 * (the process exited or was killed, the network failed, two heartbeats
 * went unanswered), each of its runs that is still undecided is ended at
 * once by its tool's onInterrupt policy (worker__run_interrupted), in one
 * commit. A run that was told to abort (a cancel, a timeout, a shutdown)
 * has the kill grace to answer; then its run there is given up, the
 * connection's room for it freed, and an answer that comes later dropped
 * and logged.
 *
 * Definitions are stored (STORE_OP_TOOL_DEFINE) and loaded again at
 * start, so that a tool is listed, and its jobs submitted, approved and
 * resumed, while no worker process serves it; its jobs wait pending until
 * one connects (sched.c leaves them out of claims until then).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log/log.h"
#include "worker/internal.h"

/* Runs a worker process may take at once, and its default. */
#define MAX_CONCURRENCY 1024
#define DEFAULT_CONCURRENCY 16
/* Tools one registration may carry. */
#define MAX_TOOLS 1000
/* The stored definitions of worker processes' tools berthd keeps, in
 * count and in their compact JSON's bytes: a worker adds to them until
 * tools/forget, and each costs memory while berthd runs. */
#define MAX_STORED_TOOLS 10000
#define MAX_STORED_BYTES ((size_t)64 << 20)
/* Differences a conflict names, and log lines an answer may carry. */
#define MAX_DIFFERENCES 20
#define MAX_ANSWER_LOGS 100

/* ---- the connections ---------------------------------------------------- */

int worker__remote_free_runs(const struct worker_remote *rem)
{
	int free_runs = rem->concurrency - rem->inflight;

	return free_runs > 0 ? free_runs : 0;
}

const char *worker_remote_id(const struct worker_remote *rem)
{
	return rem->id;
}

/* serves is true when rem registered tool t (by id: its tools are sorted). */
static bool serves(const struct worker_remote *rem, const char *id)
{
	size_t lo = 0, hi = rem->ntools;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(rem->tools[mid]->id, id);

		if (c == 0)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* pick returns the connection serving tool id that takes runs and has the
 * most free runs (docs/WORKERS.md), or NULL; with any, one with no free
 * run will do (a question about a job, which takes no run). */
static struct worker_remote *pick(struct worker *w, const char *id, bool any)
{
	struct worker_remote *best = NULL;
	int most = any ? -1 : 0;

	for (struct worker_remote *rem = w->remotes; rem; rem = rem->next) {
		int f = worker__remote_free_runs(rem);

		if (rem->draining || f <= most || !serves(rem, id))
			continue;
		best = rem;
		most = f;
	}
	return best;
}

bool worker__remote_may_start(struct worker *w, struct worker_tool *t,
			      const struct store_job *j, int64_t now)
{
	struct worker_remote *rem;

	if (!w->started || w->stopping || store_shared(w->st) ||
	    t->bg.concurrency > 0 || j->status != STORE_PENDING ||
	    j->run_at > now || j->idempotency_key)
		return false;
	rem = pick(w, t->id, false);
	if (!rem || !rem->dry ||
	    worker__remote_free_runs(rem) <= w->remote_starting)
		return false;
	return worker__tool_unpaused(w, t);
}

/* attached counts the connections, draining or not, that serve tool id. */
static int attached(const struct worker *w, const char *id)
{
	int n = 0;

	for (const struct worker_remote *rem = w->remotes; rem; rem = rem->next)
		if (serves(rem, id))
			n++;
	return n;
}

/* serving_add counts rem's room in its tools' tools/list figures (sign 1)
 * or takes it out (-1). */
static void serving_add(struct worker_remote *rem, int sign)
{
	for (size_t i = 0; i < rem->ntools; i++) {
		rem->tools[i]->serving += sign;
		rem->tools[i]->capacity += sign * rem->concurrency;
	}
}

static void remote_free(struct worker_remote *rem)
{
	for (size_t i = 0; i < rem->ntools; i++)
		worker__tool_unref(rem->tools[i]);
	free(rem->tools);
	free(rem->name);
	free(rem->by);
	json_decref(rem->sdk);
	free(rem);
}

static void remote_maybe_free(struct worker_remote *rem)
{
	if (!rem->api_held && !rem->timer_open)
		remote_free(rem);
}

static void heartbeat_closed(uv_handle_t *h)
{
	struct worker_remote *rem = h->data;

	rem->timer_open = false;
	remote_maybe_free(rem);
}

/* remote_unlist takes rem out of its worker: no run, question or claim
 * reaches it any more, and its heartbeat stops. */
static void remote_unlist(struct worker_remote *rem)
{
	struct worker *w = rem->w;

	if (!w)
		return;
	if (!rem->draining)
		serving_add(rem, -1);
	if (rem->prev)
		rem->prev->next = rem->next;
	else
		w->remotes = rem->next;
	if (rem->next)
		rem->next->prev = rem->prev;
	rem->prev = rem->next = NULL;
	rem->w = NULL;
	if (rem->timer_open && !uv_is_closing((uv_handle_t *)&rem->heartbeat))
		uv_close((uv_handle_t *)&rem->heartbeat, heartbeat_closed);
}

void worker__remote_wake(struct worker *w, const char *tool)
{
	w->wakes++;
	for (struct worker_remote *rem = w->remotes; rem; rem = rem->next)
		if (!tool || serves(rem, tool))
			rem->dry = false;
}

/* ---- the job a worker process is told about ------------------------------ */

/* job_json returns the job of a run, input or transform request
 * (docs/WORKERS.md): j's fields with the input, request context and resume
 * data given (their schemas' defaults filled in), and the deadline of a
 * run (0: none). A new reference, or NULL when out of memory. */
static json_t *job_json(const struct store_job *j, const json_t *input,
			const json_t *rc, const json_t *resume,
			int64_t deadline)
{
	json_t *o, *approval = NULL;
	char at[32];

	o = json_pack("{s:s, s:s, s:i, s:i, s:I, s:O, s:O*, s:O*, s:O*, "
		      "s:O*, s:s*, s:s*, s:O*, s:O*}",
		      "id", j->id, "tool", j->tool, "attempt", j->attempt,
		      "maxRetries", j->max_retries, "timeoutMs",
		      (json_int_t)j->timeout_ms, "input", input,
		      "requestContext", rc, "resumeData", resume,
		      "suspendPayload", j->suspend_payload, "checkpoint",
		      j->checkpoint, "toolCallId", j->tool_call_id, "runId",
		      j->run_id, "metadata", j->metadata, "mcp",
		      json_object_get(j->metadata, WORKER__MCP_META));
	if (!o)
		return NULL;
	if (deadline)
		json_object_set_new(o, "deadline",
				    json_string(store_format_time(deadline, at)));
	if (j->decision == STORE_DECISION_APPROVED) {
		approval = json_pack("{s:s}", "decision", "approved");
		if (approval && j->reason)
			json_object_set_new(approval, "note",
					    json_string(j->reason));
		if (approval && j->decided_at)
			json_object_set_new(approval, "decidedAt",
					    json_string(store_format_time(
						    j->decided_at, at)));
		json_object_set_new(o, "approval", approval);
	}
	return o;
}

/* ---- definitions -------------------------------------------------------- */

/* stage_list reads functions.transform.TARGET, an array of stage names,
 * into *stages. Returns NULL, or why it is refused (malloc'd). */
static char *stage_list(const json_t *v, const char *target,
			unsigned *stages)
{
	size_t i;
	json_t *s;

	if (!json_is_array(v))
		return worker__errmsg("functions.transform.%s must be an array "
				      "of stages",
				      target);
	json_array_foreach(v, i, s) {
		int k = worker__stage_parse(json_string_value(s));

		if (json_is_string(s) &&
		    strcmp(json_string_value(s), "inputDelta") == 0)
			return worker__errmsg(
				"functions.transform.%s[%zu] inputDelta has no "
				"source in a daemon: a tool call's input "
				"streams from the agent's model, and berth "
				"receives it whole (its stage is \"input\")",
				target, i);
		if (k < 0)
			return worker__errmsg(
				"functions.transform.%s[%zu] is not a stage "
				"berth has (input, output, error, suspend, "
				"resume, approval)",
				target, i);
		*stages |= 1u << k;
	}
	return NULL;
}

/* parse_functions reads a definition's "functions" into t. Returns NULL,
 * or why it is refused (malloc'd). */
static char *parse_functions(struct worker_tool *t, const json_t *f)
{
	const char *key;
	json_t *v;

	if (!json_is_object(f))
		return worker__errmsg("functions must be an object");
	json_object_foreach((json_t *)f, key, v) {
		unsigned bit = strcmp(key, "toModelOutput") == 0
				       ? WORKER__FN_TO_MODEL_OUTPUT
			       : strcmp(key, "onInputAvailable") == 0
				       ? WORKER__FN_ON_INPUT
			       : strcmp(key, "onOutput") == 0 ? WORKER__FN_ON_OUTPUT
							      : 0;

		if (strcmp(key, "transform") == 0)
			continue;
		if (!bit)
			return worker__errmsg(
				"functions.%s is not a known field "
				"(toModelOutput, transform, onInputAvailable, "
				"onOutput)",
				key);
		if (!json_is_boolean(v))
			return worker__errmsg("functions.%s must be true or "
					      "false",
					      key);
		if (json_is_true(v))
			t->fns |= bit;
	}
	v = json_object_get(f, "transform");
	if (!v)
		return NULL;
	if (!json_is_object(v))
		return worker__errmsg("functions.transform must be an object "
				      "of \"display\" and \"transcript\"");
	json_object_foreach(v, key, f) {
		int target = strcmp(key, "display") == 0      ? 0
			     : strcmp(key, "transcript") == 0 ? 1
							      : -1;
		char *why;

		if (target < 0)
			return worker__errmsg("functions.transform.%s is not a "
					      "known target (display, "
					      "transcript)",
					      key);
		if ((why = stage_list(f, key, &t->view_stages[target])))
			return why;
		t->view_declared[target] = true;
	}
	return NULL;
}

/* pointer_of turns the field a definition's refusal names ("background."
 * "retries.maxRetries", "inputExamples[2]") into a JSON Pointer below
 * base ("/tools/3"), so that data.errors point into params. A message
 * that names no field points at the definition. */
static char *pointer_of(const char *base, const char *msg, const char *id)
{
	char field[256], out[512];
	size_t n = 0, k;

	/* Messages of the schema and annotation checks begin with the
	 * tool ("tool ID: inputSchema does not compile ..."). */
	if (id && strncmp(msg, "tool ", 5) == 0 &&
	    strncmp(msg + 5, id, strlen(id)) == 0 &&
	    strncmp(msg + 5 + strlen(id), ": ", 2) == 0)
		msg += 5 + strlen(id) + 2;
	/* worker__tool_check quotes an id that is not a tool name. */
	else if (strncmp(msg, "tool \"", 6) == 0 && strstr(msg, "\": "))
		msg = strstr(msg, "\": ") + 3;
	while (msg[n] && msg[n] != ' ' && n < sizeof(field) - 1) {
		field[n] = msg[n];
		n++;
	}
	field[n] = '\0';
	if (strncmp(field, "the", 4) == 0 || !n)
		return strdup(base);
	k = (size_t)snprintf(out, sizeof(out), "%s/", base);
	for (const char *p = field; *p && k < sizeof(out) - 2; p++) {
		if (*p == '.' || *p == '[')
			out[k++] = '/';
		else if (*p != ']')
			out[k++] = *p;
	}
	out[k] = '\0';
	return strdup(out);
}

/* add_error appends a refusal of params' /tools/i to errors. */
static void add_error(json_t *errors, size_t i, const char *id,
		      const char *why)
{
	char base[32];
	char *path;

	snprintf(base, sizeof(base), "/tools/%zu", i);
	path = pointer_of(base, why, id);
	json_array_append_new(errors,
			      json_pack("{s:s, s:s, s:s}", "instancePath",
					path ? path : base, "keyword",
					"definition", "message", why));
	free(path);
}

/*
 * parse_definition reads one worker definition (borrowed) into a new tool:
 * the fields of a manifest (worker__tool_from_json, with its checks),
 * requireApproval "function", and "functions". Returns 0, or -EINVAL with
 * *why (malloc'd), -ENOMEM.
 */
static int parse_definition(const json_t *def, struct worker_tool **out,
			    char **why)
{
	const json_t *ra = json_object_get(def, "requireApproval");
	const char *id = json_string_value(json_object_get(def, "id"));
	struct worker_tool *t = NULL;
	json_t *copy;
	char where[160];
	int rc;

	*out = NULL;
	*why = NULL;
	if (!json_is_object(def)) {
		*why = worker__errmsg("the definition must be an object");
		return -EINVAL;
	}
	if (json_object_get(def, "transform")) {
		*why = worker__errmsg(
			"transform is declared by functions.transform in a "
			"worker process's definition: its functions compute "
			"the views");
		return -EINVAL;
	}
	if (json_is_string(ra) && strcmp(json_string_value(ra), "function")) {
		*why = worker__errmsg("requireApproval must be true, false or "
				      "\"function\"");
		return -EINVAL;
	}
	/* The manifest's parser reads the rest; "functions" is this
	 * file's, and requireApproval "function" asks at each submission. */
	copy = json_copy((json_t *)def);
	if (!copy)
		return -ENOMEM;
	json_object_del(copy, "functions");
	if (json_is_string(ra))
		json_object_set_new(copy, "requireApproval", json_true());
	snprintf(where, sizeof(where), "tool %.128s", id ? id : "(no id)");
	rc = worker__tool_from_json(copy, where, NULL, &t, why);
	json_decref(copy);
	if (rc)
		return rc;
	/* worker__tool_from_json prefixes its messages with where; the
	 * caller names the tool itself. */
	if (json_is_string(ra)) {
		t->fns |= WORKER__FN_APPROVAL;
		t->require_approval = false;
	}
	if (json_object_get(def, "functions") &&
	    (*why = parse_functions(t, json_object_get(def, "functions"))))
		rc = -EINVAL;
	if (rc == 0 && (rc = worker__tool_check(t, why)) != 0)
		rc = -EINVAL;
	if (rc == 0 && !(t->definition = json_deep_copy(def)))
		rc = -ENOMEM;
	if (rc == 0)
		t->definition_size = json_dumpb(def, NULL, 0, JSON_COMPACT);
	if (rc) {
		worker__tool_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

/* strip_where drops the "tool ID: " that worker__tool_from_json put before
 * a message (why, malloc'd), in place. */
static void strip_where(char *why, const char *id)
{
	size_t n;

	if (!why || !id)
		return;
	n = 5 + strlen(id);
	if (strncmp(why, "tool ", 5) == 0 && strncmp(why + 5, id, n - 5) == 0 &&
	    strncmp(why + n, ": ", 2) == 0)
		memmove(why, why + n + 2, strlen(why + n + 2) + 1);
}

/* ---- differences ---------------------------------------------------------- */

/* escape_token appends a JSON Pointer token to path (~ and / escaped). */
static void escape_token(char *path, size_t size, const char *token)
{
	size_t k = strlen(path);

	if (k + 1 < size)
		path[k++] = '/';
	for (; *token && k + 2 < size; token++) {
		if (*token == '~' || *token == '/') {
			path[k++] = '~';
			path[k++] = *token == '~' ? '0' : '1';
		} else {
			path[k++] = *token;
		}
	}
	path[k] = '\0';
}

/* differences appends to out the places where a (registered) and b
 * (offered) differ, as {"field", "registered", "offered"}, descending into
 * objects; an absent side is left out of its entry. */
static void differences(json_t *out, const char *tool, const char *path,
			const json_t *a, const json_t *b)
{
	char sub[512];
	const char *key;
	json_t *v;

	if (json_array_size(out) >= MAX_DIFFERENCES ||
	    (a && b && json_equal(a, b)))
		return;
	if (json_is_object(a) && json_is_object(b)) {
		json_object_foreach((json_t *)a, key, v) {
			snprintf(sub, sizeof(sub), "%s", path);
			escape_token(sub, sizeof(sub), key);
			differences(out, tool, sub, v, json_object_get(b, key));
		}
		json_object_foreach((json_t *)b, key, v) {
			if (json_object_get(a, key))
				continue;
			snprintf(sub, sizeof(sub), "%s", path);
			escape_token(sub, sizeof(sub), key);
			differences(out, tool, sub, NULL, v);
		}
		return;
	}
	v = json_pack("{s:s, s:s, s:O*, s:O*}", "tool", tool, "field",
		      *path ? path : "", "registered", a, "offered", b);
	json_array_append_new(out, v);
}

/* fields_of writes the distinct top-level fields of differences into buf
 * ("inputSchema, description"), for the message. */
static void fields_of(const json_t *diffs, char *buf, size_t size)
{
	size_t i, k = 0;
	json_t *d;

	buf[0] = '\0';
	json_array_foreach(diffs, i, d) {
		const char *f = json_string_value(json_object_get(d, "field"));
		char top[128];
		size_t n = 0;

		if (!f || *f != '/')
			continue;
		for (f++; f[n] && f[n] != '/' && n < sizeof(top) - 1; n++)
			top[n] = f[n];
		top[n] = '\0';
		if (strstr(buf, top))
			continue;
		k += (size_t)snprintf(buf + k, k < size ? size - k : 0, "%s%s",
				      k ? ", " : "", top);
		if (k >= size)
			break;
	}
}

/* ---- registration ----------------------------------------------------------- */

/* A registration being stored: the definitions it stores, and the reply
 * once the last of them is durable. */
struct registration {
	struct worker__op *reply; /* answers the registration */
	char id[48];              /* the connection's, for the log */
	int pending; /* store requests not yet done */
	int rc;      /* the first one's failure */
	json_t *result;
};

static void registration_end(struct registration *reg)
{
	struct worker__op *op = reg->reply;

	if (reg->rc)
		worker__op_reply_store(op, reg->rc);
	else
		worker__op_reply(op, WORKER_OK, NULL, reg->result, NULL, false);
	json_decref(reg->result);
	free(reg);
}

static void definition_stored(struct worker__op *op, int rc)
{
	struct registration *reg = op->arg;

	if (rc && !reg->rc) {
		reg->rc = rc;
		log_error("worker %s: storing its tools' definitions failed "
			  "(%s); they are served, and not kept across a "
			  "restart until it registers again",
			  reg->id, strerror(-rc));
	}
	op->arg = NULL;
	worker__op_free(op);
	if (--reg->pending == 0)
		registration_end(reg);
}

/* store_definition stores t's definition for reg. Returns 0, or a
 * negative code when it could not be asked. */
static int store_definition(struct worker *w, struct registration *reg,
			    struct worker_tool *t)
{
	struct worker__op *op = worker__op_new(w, NULL, reg);

	if (!op)
		return -ENOMEM;
	op->tool = t;
	worker__tool_ref(t);
	op->req.op = STORE_OP_TOOL_DEFINE;
	op->req.u.define.name = t->id;
	op->req.u.define.definition = t->definition;
	reg->pending++;
	if (worker__op_submit(op, definition_stored)) {
		reg->pending--;
		op->arg = NULL;
		worker__op_free(op);
		return -ESHUTDOWN;
	}
	return 0;
}

/* replace puts t in the registry in place of old, a stored definition no
 * connected worker process serves (a new deployment): t counts old's
 * running jobs and keeps its pause state; old goes with its last run. */
static void replace(struct worker *w, struct worker_tool *old,
		    struct worker_tool *t)
{
	for (size_t i = 0; i < w->ntools; i++) {
		if (w->tools[i] != old)
			continue;
		w->tools[i] = t;
		t->refs = 1;
		t->running = old->running;
		t->pause = old->pause;
		worker__tool_unref(old);
		return;
	}
}

/* refuse answers a registration (on the next loop turn) and frees its
 * parsed tools. */
static void refuse(struct worker__op *op, struct worker_tool **parsed,
		   size_t n, int err, const char *message, json_t *data)
{
	for (size_t i = 0; i < n; i++)
		worker__tool_free(parsed[i]);
	free(parsed);
	worker__op_defer(op, err, message, data);
}

/* check_ids refuses a C or external tool's id (builtin) and a definition
 * that differs from the one a connected worker process serves
 * (conflict). Returns 0, or 1 after answering op. */
static int check_ids(struct worker *w, struct worker__op *op,
		     struct worker_tool **parsed, size_t n)
{
	json_t *diffs = NULL;
	char msg[1024], fields[512];

	for (size_t i = 0; i < n; i++) {
		struct worker_tool *old = worker__tool_find(w, parsed[i]->id);

		if (!old)
			continue;
		if (!old->definition) {
			snprintf(msg, sizeof(msg),
				 "tool %s is a %s tool of this berthd; a "
				 "worker process cannot serve it",
				 old->id, old->c ? "C" : "manifest");
			refuse(op, parsed, n, WORKER_ECONFLICT, msg,
			       json_pack("{s:s, s:s}", "status", "builtin",
					 "tool", old->id));
			json_decref(diffs);
			return 1;
		}
		if (json_equal(old->definition, parsed[i]->definition) ||
		    attached(w, old->id) == 0)
			continue;
		if (!diffs && !(diffs = json_array()))
			continue;
		differences(diffs, old->id, "", old->definition,
			    parsed[i]->definition);
	}
	if (!diffs || json_array_size(diffs) == 0) {
		json_decref(diffs);
		return 0;
	}
	fields_of(diffs, fields, sizeof(fields));
	snprintf(msg, sizeof(msg),
		 "conflict: a connected worker process serves tool %s with "
		 "another definition (it differs in %s); workers that share a "
		 "tool must register the same definition",
		 json_string_value(json_object_get(json_array_get(diffs, 0),
						   "tool")),
		 fields);
	refuse(op, parsed, n, WORKER_ECONFLICT, msg,
	       json_pack("{s:s, s:o}", "status", "conflict", "differences",
			 diffs));
	return 1;
}

/* check_room refuses a registration that would take the stored
 * definitions past MAX_STORED_TOOLS or MAX_STORED_BYTES; one that
 * replaces definitions counts the new in place of the old. Returns 0, or
 * 1 after answering op. */
static int check_room(struct worker *w, struct worker__op *op,
		      struct worker_tool **parsed, size_t n)
{
	size_t count = 0, bytes = 0;
	char msg[400];

	for (size_t i = 0; i < w->ntools; i++)
		if (w->tools[i]->definition) {
			count++;
			bytes += w->tools[i]->definition_size;
		}
	for (size_t i = 0; i < n; i++) {
		struct worker_tool *old = worker__tool_find(w, parsed[i]->id);

		if (old) /* a worker process's: check_ids refused the rest */
			bytes -= old->definition_size;
		else
			count++;
		bytes += parsed[i]->definition_size;
	}
	if (count > MAX_STORED_TOOLS) {
		snprintf(msg, sizeof(msg),
			 "worker processes' tools would be %zu, over berthd's "
			 "limit of %d stored definitions; tools/forget removes "
			 "the tools no worker serves any more",
			 count, MAX_STORED_TOOLS);
		refuse(op, parsed, n, WORKER_EOVERLOAD, msg,
		       json_pack("{s:i}", "limit", MAX_STORED_TOOLS));
		return 1;
	}
	if (bytes > MAX_STORED_BYTES) {
		snprintf(msg, sizeof(msg),
			 "the stored definitions of worker processes' tools "
			 "would take %zu bytes, over berthd's limit of %zu "
			 "(64 MiB of compact JSON); tools/forget removes the "
			 "tools no worker serves any more",
			 bytes, MAX_STORED_BYTES);
		refuse(op, parsed, n, WORKER_EOVERLOAD, msg,
		       json_pack("{s:I}", "limit",
				 (json_int_t)MAX_STORED_BYTES));
		return 1;
	}
	return 0;
}

static void heartbeat_cb(uv_timer_t *h);

int worker_remote_register(struct worker *w,
			   const struct worker_remote_ops *ops, void *conn,
			   const json_t *params,
			   const struct worker_actor *by,
			   struct worker_remote **out, worker_cb cb,
			   void *arg)
{
	const json_t *defs = json_object_get(params, "tools");
	const json_t *c = json_object_get(params, "concurrency"), *def;
	struct worker_tool **parsed = NULL;
	struct worker__op *op;
	struct registration *reg;
	struct worker_remote *rem;
	json_t *errors, *names;
	size_t n = json_array_size(defs), i;
	char msg[600], uuid[40];
	int rc;

	*out = NULL;
	if (w->stopping)
		return -ESHUTDOWN;
	if (!(op = worker__op_new(w, cb, arg)))
		return -ENOMEM;
	if (n < 1 || n > MAX_TOOLS) {
		worker__op_defer(op, WORKER_EINVAL,
				 "invalid params: tools must hold 1 to 1000 "
				 "definitions",
				 json_pack("{s:[{s:s, s:s, s:s}]}", "errors",
					   "instancePath", "/tools", "keyword",
					   "minItems", "message",
					   "tools must hold 1 to 1000 "
					   "definitions"));
		return 0;
	}
	if (c && (!json_is_integer(c) || json_integer_value(c) < 1 ||
		  json_integer_value(c) > MAX_CONCURRENCY)) {
		worker__op_defer(op, WORKER_EINVAL,
				 "invalid params: concurrency must be an "
				 "integer from 1 to 1024",
				 json_pack("{s:[{s:s, s:s, s:s}]}", "errors",
					   "instancePath", "/concurrency",
					   "keyword", "maximum", "message",
					   "concurrency must be an integer from "
					   "1 to 1024"));
		return 0;
	}
	parsed = calloc(n, sizeof(*parsed));
	errors = json_array();
	if (!parsed || !errors) {
		free(parsed);
		json_decref(errors);
		op->cb = NULL;
		worker__op_free(op);
		return -ENOMEM;
	}
	/* Every definition is checked, and every refusal named, before
	 * anything is registered: a refused registration registers none of
	 * its tools. */
	json_array_foreach(defs, i, def) {
		const char *id = json_string_value(json_object_get(def, "id"));
		char *why = NULL;

		rc = parse_definition(def, &parsed[i], &why);
		if (rc == -ENOMEM && !why)
			why = worker__errmsg("out of memory");
		strip_where(why, id);
		if (rc) {
			add_error(errors, i, id, why ? why : "refused");
			free(why);
			continue;
		}
		for (size_t k = 0; k < i; k++)
			if (parsed[k] && !strcmp(parsed[k]->id, parsed[i]->id)) {
				add_error(errors, i, NULL,
					  "id names a tool given twice in "
					  "tools");
				worker__tool_free(parsed[i]);
				parsed[i] = NULL;
				break;
			}
	}
	if (json_array_size(errors)) {
		const json_t *e = json_array_get(errors, 0);

		snprintf(msg, sizeof(msg), "invalid params: %s: %s",
			 json_string_value(json_object_get(e, "instancePath")),
			 json_string_value(json_object_get(e, "message")));
		refuse(op, parsed, n, WORKER_EINVAL, msg,
		       json_pack("{s:o}", "errors", errors));
		return 0;
	}
	json_decref(errors);
	if (check_ids(w, op, parsed, n) || check_room(w, op, parsed, n))
		return 0;

	rem = calloc(1, sizeof(*rem));
	reg = calloc(1, sizeof(*reg));
	names = json_array();
	if (!rem || !reg || !names ||
	    !(rem->tools = calloc(n, sizeof(*rem->tools))) ||
	    (json_is_string(json_object_get(params, "name")) &&
	     !(rem->name = strdup(json_string_value(
		       json_object_get(params, "name"))))) ||
	    (by && by->name && !(rem->by = strdup(by->name)))) {
		if (rem) {
			free(rem->tools);
			free(rem->name);
		}
		free(rem);
		free(reg);
		json_decref(names);
		refuse(op, parsed, n, WORKER_EINTERNAL, "out of memory", NULL);
		return 0;
	}
	store_uuid7(uuid);
	snprintf(rem->id, sizeof(rem->id), "W-%s", uuid);
	rem->w = w;
	rem->ops = ops;
	rem->conn = conn;
	rem->sdk = json_is_object(json_object_get(params, "sdk"))
			   ? json_deep_copy(json_object_get(params, "sdk"))
			   : NULL;
	rem->concurrency = json_is_integer(json_object_get(params,
							   "concurrency"))
				   ? (int)json_integer_value(json_object_get(
					     params, "concurrency"))
				   : DEFAULT_CONCURRENCY;
	rem->api_held = true;
	reg->reply = op;
	snprintf(reg->id, sizeof(reg->id), "%s", rem->id);

	/* In the registry now, stored below: a registration that comes
	 * meanwhile sees these tools served. */
	for (i = 0; i < n; i++) {
		struct worker_tool *t = parsed[i], *old = worker__tool_find(w, t->id);
		char *why = NULL;
		bool store = true;

		if (old && json_equal(old->definition, t->definition)) {
			worker__tool_free(t);
			t = old;
			store = false;
		} else if (old) {
			log_info("tool %s: worker %s%s%s registers a new "
				 "definition, which replaces the stored one "
				 "(no worker process served it)",
				 t->id, rem->id, rem->name ? " " : "",
				 rem->name ? rem->name : "");
			replace(w, old, t);
		} else if ((rc = worker__tool_register(w, t, &why))) {
			/* Checked already; only memory can fail here. */
			log_error("worker %s: tool %s: %s", rem->id, t->id,
				  why ? why : "cannot be registered");
			free(why);
			worker__tool_free(t);
			parsed[i] = NULL;
			continue;
		}
		worker__tool_ref(t);
		rem->tools[rem->ntools++] = t;
		json_array_append_new(names, json_string(t->id));
		if (store && (rc = store_definition(w, reg, t)) && !reg->rc)
			reg->rc = rc;
	}
	free(parsed);
	/* Sorted by id, as serves() looks them up. */
	for (size_t a = 1; a < rem->ntools; a++)
		for (size_t b = a; b > 0 && strcmp(rem->tools[b - 1]->id,
						    rem->tools[b]->id) > 0;
		     b--) {
			struct worker_tool *x = rem->tools[b];

			rem->tools[b] = rem->tools[b - 1];
			rem->tools[b - 1] = x;
		}
	rem->next = w->remotes;
	if (w->remotes)
		w->remotes->prev = rem;
	w->remotes = rem;
	serving_add(rem, 1);
	uv_timer_init(w->loop, &rem->heartbeat);
	rem->heartbeat.data = rem;
	rem->timer_open = true;
	uv_timer_start(&rem->heartbeat, heartbeat_cb,
		       (uint64_t)w->cfg.heartbeat_ms,
		       (uint64_t)w->cfg.heartbeat_ms);
	reg->result = json_pack("{s:s, s:o, s:I}", "worker", rem->id,
				"tools", names, "heartbeatMs",
				(json_int_t)w->cfg.heartbeat_ms);
	log_info("worker %s%s%s registered %zu tool%s (concurrency %d)",
		 rem->id, rem->name ? " " : "", rem->name ? rem->name : "",
		 rem->ntools, rem->ntools == 1 ? "" : "s", rem->concurrency);
	*out = rem;
	/* Its tools' jobs may wait for it. */
	for (i = 0; i < rem->ntools; i++)
		worker__tool_present(w, rem->tools[i]->id);
	w->wakes++;
	worker__sched_kick(w);
	worker__sched_rearm(w);
	if (reg->pending == 0) {
		/* Nothing new to store: the answer waits for nothing. */
		worker__op_defer(op, reg->rc ? WORKER_ESTORAGE : WORKER_OK,
				 reg->rc ? "storage failed" : NULL,
				 reg->rc ? NULL : json_incref(reg->result));
		json_decref(reg->result);
		free(reg);
	}
	return 0;
}

/* ---- loading the stored definitions --------------------------------------- */

int worker__remote_load(struct worker *w)
{
	struct store_definition *defs;
	size_t n;
	int rc = store_definitions(w->st, &defs, &n), loaded = 0;

	if (rc < 0) {
		log_error("reading the stored definitions of worker processes' "
			  "tools failed (%s); they are not listed until a worker "
			  "registers them again",
			  strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < n; i++) {
		struct worker_tool *t = NULL, *old;
		char *why = NULL;

		old = worker__tool_find(w, defs[i].name);
		if (old) {
			log_warn("tool %s: the stored definition of a worker "
				 "process's tool is left out: a %s tool has "
				 "its id now (tools/forget removes the "
				 "stored one)",
				 defs[i].name, old->c ? "C" : "manifest");
		} else if (!defs[i].definition ||
			   parse_definition(defs[i].definition, &t, &why) ||
			   strcmp(t->id, defs[i].name) ||
			   worker__tool_register(w, t, &why)) {
			log_error("tool %s: its stored definition does not "
				  "load (%s); a worker process that registers "
				  "it again replaces it",
				  defs[i].name, why ? why : "not JSON");
			worker__tool_free(t);
		} else {
			loaded++;
		}
		free(why);
		store_definition_finish(&defs[i]);
	}
	free(defs);
	if (loaded)
		log_info("loaded %d stored definition%s of worker processes' "
			 "tools",
			 loaded, loaded == 1 ? "" : "s");
	return 0;
}

/* ---- forgetting one --------------------------------------------------------- */

static void forgotten(struct worker__op *op, int rc)
{
	if (rc) {
		worker__op_reply_store(op, rc);
		return;
	}
	worker__op_reply(op, WORKER_OK, NULL, NULL, NULL, false);
}

/* stored_definition tells whether the store holds a definition of a
 * worker process's tool named name (one a C or manifest tool may have
 * left out at start). A store that cannot be read holds none here. */
static bool stored_definition(struct worker *w, const char *name)
{
	struct store_definition *defs;
	size_t n;
	bool found = false;

	if (store_definitions(w->st, &defs, &n) < 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		found = found || strcmp(defs[i].name, name) == 0;
		store_definition_finish(&defs[i]);
	}
	free(defs);
	return found;
}

int worker_forget(struct worker *w, const char *name, worker_cb cb,
		  void *arg)
{
	struct store_filter f = {
		.status_mask = ~STORE_MASK_TERMINAL &
			       ((1u << STORE_NSTATUS) - 1),
		.tool = name,
	};
	struct worker_tool *t;
	struct worker__op *op;
	struct store_job **jobs = NULL;
	char msg[400], *next = NULL;
	size_t njobs = 0;
	int rc;

	if (w->stopping)
		return -ESHUTDOWN;
	if (!name)
		return -EINVAL;
	if (!(op = worker__op_new(w, cb, arg)))
		return -ENOMEM;
	t = worker__tool_find(w, name);
	if (!t) {
		worker__op_defer_no_tool(op, name);
		return 0;
	}
	if (!t->definition && stored_definition(w, name)) {
		/* A definition stored before a C or manifest tool took its
		 * id, left out at start (the log says to forget it here).
		 * The tool that has the id now, and its jobs, stay. */
		if (!(op->sown[0] = strdup(name))) {
			op->cb = NULL;
			worker__op_free(op);
			return -ENOMEM;
		}
		op->req.op = STORE_OP_TOOL_DEFINE;
		op->req.u.define.name = op->sown[0];
		op->req.u.define.remove = true;
		if (worker__op_submit(op, forgotten)) {
			op->cb = NULL;
			worker__op_free(op);
			return -ESHUTDOWN;
		}
		log_info("tool %s: the stored definition a %s tool left out is "
			 "forgotten", name, t->c ? "C" : "manifest");
		return 0;
	}
	if (!t->definition) {
		snprintf(msg, sizeof(msg),
			 "tool %s is a %s tool of this berthd, not a worker "
			 "process's: there is no stored definition to forget",
			 t->id, t->c ? "C" : "manifest");
		worker__op_defer(op, WORKER_ECONFLICT, msg,
				 json_pack("{s:s}", "status", "builtin"));
		return 0;
	}
	if (attached(w, t->id)) {
		snprintf(msg, sizeof(msg),
			 "tool %s is served by %d connected worker process%s; "
			 "it can be forgotten once none serves it",
			 t->id, attached(w, t->id),
			 attached(w, t->id) == 1 ? "" : "es");
		worker__op_defer(op, WORKER_ECONFLICT, msg,
				 json_pack("{s:s}", "status", "serving"));
		return 0;
	}
	if (t->submitting) {
		/* A submission judged under it and not yet stored makes a job
		 * the store cannot show yet: forgotten now, it would wait
		 * pending for a tool that is no more. */
		snprintf(msg, sizeof(msg),
			 "tool %s has %d submission%s being stored; it can be "
			 "forgotten once its jobs are finished or cancelled",
			 t->id, t->submitting, t->submitting == 1 ? "" : "s");
		worker__op_defer(op, WORKER_ECONFLICT, msg,
				 json_pack("{s:s}", "status", "jobs"));
		return 0;
	}
	rc = store_list(w->st, &f, 1, NULL, &jobs, &njobs, &next);
	free(next);
	if (rc < 0 || njobs) {
		if (rc < 0)
			snprintf(msg, sizeof(msg), "storage failed: %s",
				 strerror(-rc));
		else
			snprintf(msg, sizeof(msg),
				 "tool %s has jobs that may still run (job %s "
				 "is %s); it can be forgotten once they are "
				 "finished or cancelled",
				 t->id, jobs[0]->id,
				 store_status_name(jobs[0]->status));
		worker__op_defer(op, rc < 0 ? WORKER_ESTORAGE : WORKER_ECONFLICT,
				 msg,
				 rc < 0 ? json_pack("{s:s}", "sqlite",
						    strerror(-rc))
					: json_pack("{s:s}", "status", "jobs"));
		for (size_t i = 0; i < njobs; i++)
			store_job_free(jobs[i]);
		free(jobs);
		return 0;
	}
	free(jobs);
	op->tool = t; /* keeps the name the store reads alive */
	worker__tool_ref(t);
	op->req.op = STORE_OP_TOOL_DEFINE;
	op->req.u.define.name = t->id;
	op->req.u.define.remove = true;
	if (worker__op_submit(op, forgotten)) {
		op->cb = NULL;
		worker__op_free(op);
		return -ESHUTDOWN;
	}
	/* Out of the registry now: nothing new is submitted to it. */
	for (size_t i = 0; i < w->ntools; i++) {
		if (w->tools[i] != t)
			continue;
		memmove(&w->tools[i], &w->tools[i + 1],
			(w->ntools - i - 1) * sizeof(w->tools[0]));
		w->ntools--;
		worker__tool_unref(t);
		break;
	}
	log_info("tool %s: its stored definition is forgotten", name);
	return 0;
}

/* ---- runs ----------------------------------------------------------------- */

/*
 * struct worker__rcall is a "run" request in flight. The api calls back
 * exactly once (answered, or the connection closed), possibly after the
 * run stopped waiting for it (given up at the kill grace): run is then
 * NULL and the answer is dropped and logged.
 */
struct worker__rcall {
	struct worker__run *run; /* holds a reference while it waits */
	struct worker *w;
	char job_id[40];
	char tool[130];
	char remote[48];
};

static void grace_closed(uv_handle_t *h)
{
	worker__run_unref(h->data);
}

/* remote_end ends r's run on its connection: the connection's room for
 * it is free again, and the executor is over (run.c). */
static void remote_end(struct worker__run *r)
{
	struct worker_remote *rem = r->remote;
	struct worker *w;

	if (!rem)
		return;
	if (r->rprev)
		r->rprev->rnext = r->rnext;
	else
		rem->runs = r->rnext;
	if (r->rnext)
		r->rnext->rprev = r->rprev;
	r->rprev = r->rnext = NULL;
	r->remote = NULL;
	rem->inflight--;
	if (r->grace_open) {
		r->grace_open = false;
		uv_close((uv_handle_t *)&r->grace, grace_closed);
	}
	w = rem->w;
	worker__run_exec_ended(r);
	/* A free run: the connection takes the next job, unless the last
	 * claim found none of its tools' left (it is dry, sched.c): then
	 * the next job that becomes runnable asks for a claim itself, and
	 * a run's end costs no claim. It frees no slot of the pool. */
	if (w && !rem->draining && !rem->dry)
		worker__sched_kick(w);
}

/* give_up stops r waiting for its answer (the kill grace passed, or the
 * connection is gone); an answer that still comes is dropped. */
static void give_up(struct worker__run *r)
{
	struct worker__rcall *call = r->rcall;

	if (call) {
		r->rcall = NULL;
		call->run = NULL;
		worker__run_unref(r);
	}
	remote_end(r);
}

static void grace_cb(uv_timer_t *h)
{
	struct worker__run *r = h->data;

	if (!r->remote)
		return;
	log_warn("job %s (%s): worker %s did not answer within the kill grace "
		 "(%lld ms) after it was told to abort; its run there is given "
		 "up, and an answer that comes later is dropped",
		 r->job->id, r->job->tool, r->remote->id,
		 (long long)(r->w ? r->w->cfg.kill_grace_ms : 0));
	give_up(r);
}

static const char *abort_name(int reason)
{
	switch (reason) {
	case WORKER__ABORT_CANCEL:
		return "cancelled";
	case WORKER__ABORT_TIMEOUT:
		return "timed_out";
	case WORKER__ABORT_FINISHED:
		return "finished";
	default:
		return "shutdown";
	}
}

void worker__remote_abort(struct worker__run *r, int reason)
{
	struct worker_remote *rem = r->remote;

	if (!rem || !r->rcall)
		return;
	if (rem->w && !uv_is_active((uv_handle_t *)&r->grace) && r->grace_open) {
		rem->ops->notify(rem->conn, "abort",
				 json_pack("{s:s, s:s}", "jobId", r->job->id,
					   "reason", abort_name(reason)));
		uv_timer_start(&r->grace, grace_cb,
			       (uint64_t)rem->w->cfg.kill_grace_ms, 0);
	}
	/* A shutdown that cannot wait (worker_shutdown_now). */
	if (r->w && r->w->now)
		give_up(r);
}

/* parse_views keeps the views of an answer that t declares into r. */
static void take_views(struct worker__run *r, const json_t *answer)
{
	json_decref(r->fresh);
	r->fresh = worker__views_take(r->tool, json_object_get(answer,
							       "views"));
}

/* outcome_of reads the answer to "run" into *o (docs/WORKERS.md): an
 * output, a suspend payload or an error; a JSON-RPC error, or an answer
 * of another shape, is an error berthd makes of it. Such an error's
 * message holds nothing of what the worker sent, which may be what the
 * tool's views hide: that goes to the job's log (and, for the JSON-RPC
 * error, the error's data). */
static void outcome_of(struct worker__run *r, const char *remote,
		       const json_t *result, const json_t *error,
		       struct berth_outcome *o)
{
	const json_t *v, *e;
	int kinds;

	memset(o, 0, sizeof(*o));
	if (error) {
		const char *m = json_string_value(json_object_get(error,
								 "message"));
		json_int_t code = json_integer_value(json_object_get(error,
								    "code"));

		log_warn("job %s (%s): worker %s answered run with JSON-RPC "
			 "error %lld",
			 r->job->id, r->job->tool, remote, (long long)code);
		worker__run_log(r, "warn", m ? m : "(no message)",
				json_object_get(error, "data"));
		*o = berth_error(true, json_pack("{s:O}", "error", error),
				 "the worker process answered run with "
				 "JSON-RPC error %lld (its message is in the "
				 "job's log)",
				 (long long)code);
		free(r->code);
		r->code = strdup("worker_error");
		return;
	}
	kinds = worker__finals(result);
	e = json_object_get(result, "error");
	if (!json_is_object(result) || kinds != 1 ||
	    (e && !json_is_string(e) &&
	     !json_is_string(json_object_get(e, "message")))) {
		char *s = json_dumps(result, JSON_COMPACT | JSON_ENCODE_ANY);
		json_t *d = json_pack("{s:s}", "answer", s ? s : "(not JSON)");

		log_warn("job %s (%s): worker %s answered run with neither an "
			 "output, a suspend payload nor an error",
			 r->job->id, r->job->tool, remote);
		worker__run_log(r, "warn", "the worker's answer to run", d);
		json_decref(d);
		*o = berth_error(false, NULL,
				 "the worker process answered run with "
				 "something else than output, suspend or error "
				 "(it is in the job's log)");
		free(s);
		free(r->code);
		r->code = strdup("invalid_answer");
		return;
	}
	r->answered = true;
	take_views(r, result);
	if ((v = json_object_get(result, "output"))) {
		const json_t *mo = json_object_get(result, "modelOutput");

		*o = berth_output_model(json_incref((json_t *)v),
					mo ? json_incref((json_t *)mo) : NULL);
	} else if ((v = json_object_get(result, "suspend"))) {
		*o = berth_suspend(json_incref((json_t *)v));
	} else {
		const json_t *code = json_object_get(e, "code");
		const json_t *data = json_object_get(e, "data");
		const char *m = json_is_string(e)
					? json_string_value(e)
					: json_string_value(json_object_get(
						  e, "message"));

		/* Retried while tries are left, unless the worker says it
		 * is not retryable (docs/WORKERS.md). */
		*o = berth_error(!json_is_false(json_object_get(e, "retryable")),
				 data ? json_incref((json_t *)data) : NULL,
				 "%s", m);
		r->worker_error = true;
		free(r->code);
		r->code = json_is_string(code) && json_string_length(code) &&
					  json_string_length(code) <= 128
				  ? strdup(json_string_value(code))
				  : NULL;
	}
}

/* run_answered takes the answer to a "run" request (docs/WORKERS.md). */
static void run_answered(void *arg, json_t *result, json_t *error)
{
	struct worker__rcall *call = arg;
	struct worker__run *r = call->run;
	struct berth_outcome o;

	if (!r) {
		/* Given up at the kill grace (or the connection closed after
		 * that): too late. */
		if ((result || error) && call->w && !call->w->closing) {
			log_warn("job %s (%s): worker %s answered run after its "
				 "run there was given up; the answer is "
				 "dropped",
				 call->job_id, call->tool, call->remote);
			worker__job_log(call->w, call->job_id, "warn", NULL,
					"worker %s answered after the kill grace "
					"that followed its abort; its answer "
					"is dropped",
					call->remote);
		}
		free(call);
		return;
	}
	r->rcall = NULL;
	call->run = NULL;
	free(call);
	if (!result && !error) {
		/* The connection closed (worker_remote_detach ended the run
		 * already, unless it could not be reached). */
		remote_end(r);
		worker__run_unref(r);
		return;
	}
	/* An answer to an abort decides nothing: the abort's cause does
	 * (remote_end ends a timed-out try with its timeout). */
	if (r->w && r->state == WORKER__RUN_ACTIVE &&
	    r->abort_reason == WORKER__ABORT_NONE) {
		outcome_of(r, r->remote ? r->remote->id : "?", result, error,
			   &o);
		/* The transition the answer makes is the worker's. */
		r->by_remote = r->remote && r->remote->by ? r->remote->by
							  : NULL;
		worker__run_outcome(r, &o);
		r->by_remote = NULL;
	}
	remote_end(r);
	worker__run_unref(r);
}

int worker__remote_start(struct worker__run *r)
{
	struct worker *w = r->w;
	const struct worker_tool *t = r->tool;
	struct worker_remote *rem = pick(w, t->id, false);
	struct worker__rcall *call;
	json_t *params, *pending, *job;
	unsigned stages;
	bool hook;
	int64_t timeout = r->job->timeout_ms > 0 ? r->job->timeout_ms
						 : w->cfg.default_timeout_ms;
	int rc;

	if (!rem)
		return -EAGAIN;
	/* What berthd still lacks of this job: the views of the stages no
	 * worker process answered for (the job carries their payloads), and
	 * the hook that has not run. */
	stages = worker__views_pending(r->job->views, &hook) &
		 ((1u << BERTH_PAYLOAD_INPUT) | (1u << BERTH_PAYLOAD_APPROVAL));
	if (r->job->resume_data &&
	    (worker__views_pending(r->job->views, NULL) &
	     (1u << BERTH_PAYLOAD_RESUME)))
		stages |= 1u << BERTH_PAYLOAD_RESUME;
	if (r->job->suspend_payload &&
	    (worker__views_pending(r->job->views, NULL) &
	     (1u << BERTH_PAYLOAD_SUSPEND)))
		stages |= 1u << BERTH_PAYLOAD_SUSPEND;
	hook = hook && (t->fns & WORKER__FN_ON_INPUT);
	r->asked = stages;
	r->asked_hook = hook;
	job = job_json(r->job, r->p_input, r->p_rc, r->p_resume,
		       store_now() + timeout);
	params = json_pack("{s:o}", "job", job);
	call = calloc(1, sizeof(*call));
	if (!params || !call) {
		json_decref(params);
		free(call);
		return -ENOMEM;
	}
	if (stages || hook) {
		pending = json_object();
		if (stages) {
			json_t *a = json_array();

			for (int k = 0; k <= BERTH_PAYLOAD_APPROVAL; k++)
				if (stages & (1u << k))
					json_array_append_new(
						a, json_string(
							   worker__stage_name(k)));
			json_object_set_new(pending, "views", a);
		}
		if (hook)
			json_object_set_new(pending, "onInputAvailable",
					    json_true());
		json_object_set_new(params, "pending", pending);
	}
	call->run = r;
	call->w = w;
	snprintf(call->job_id, sizeof(call->job_id), "%s", r->job->id);
	snprintf(call->tool, sizeof(call->tool), "%s", r->job->tool);
	snprintf(call->remote, sizeof(call->remote), "%s", rem->id);
	worker__run_ref(r);
	rc = rem->ops->call(rem->conn, "run", params, run_answered, call);
	if (rc) {
		/* The connection is going: the job goes back for another. */
		worker__run_unref(r);
		free(call);
		return -EAGAIN;
	}
	r->rcall = call;
	r->remote = rem;
	r->rnext = rem->runs;
	if (rem->runs)
		rem->runs->rprev = r;
	rem->runs = r;
	rem->inflight++;
	r->exec_started = true;
	/* Its timeout runs from now, as the deadline the worker was sent
	 * says, and not from its claim: a run started by its creation
	 * waited for that commit first. */
	worker__run_arm_timeout(r);
	uv_timer_init(w->loop, &r->grace);
	r->grace.data = r;
	r->grace_open = true;
	worker__run_ref(r); /* the grace timer's, until closed */
	return 0;
}

/* ---- what a run reports ----------------------------------------------------- */

/* run_of returns job_id's run on rem, or NULL. */
static struct worker__run *run_of(struct worker_remote *rem,
				  const char *job_id)
{
	for (struct worker__run *r = rem->runs; r; r = r->rnext)
		if (strcmp(r->job->id, job_id) == 0)
			return r;
	return NULL;
}

int worker_remote_progress(struct worker_remote *rem, const char *job_id,
			   const json_t *progress)
{
	struct worker__run *r = rem->w ? run_of(rem, job_id) : NULL;

	if (!r || r->state != WORKER__RUN_ACTIVE)
		return -ENOENT;
	worker__run_progress(r, json_deep_copy(progress));
	return 0;
}

int worker_remote_log(struct worker_remote *rem, const char *job_id,
		      const char *level, const char *message,
		      const json_t *data)
{
	struct worker__run *r = rem->w ? run_of(rem, job_id) : NULL;

	if (!r)
		return -ENOENT;
	worker__run_log(r, level, message, data);
	return 0;
}

/* refuse_checkpoint answers op's checkpoint -32012, naming what ended
 * r's hold on its job as WORKERS.md lists it: cancelled, timed_out,
 * shutdown or finished. */
static void refuse_checkpoint(struct worker__op *op,
			      const struct worker__run *r)
{
	static const struct {
		const char *status, *why;
	} whys[] = {
		{"cancelled", "the job was cancelled"},
		{"timed_out", "the run timed out"},
		{"shutdown", "berthd is stopping"},
		{"finished", "the run has ended"},
	};
	const char *status = r->abort_reason != WORKER__ABORT_NONE
				     ? abort_name(r->abort_reason)
				     : "finished";
	const char *why = "the run has ended";
	char msg[160];

	for (size_t i = 0; i < sizeof whys / sizeof *whys; i++)
		if (strcmp(whys[i].status, status) == 0)
			why = whys[i].why;
	snprintf(msg, sizeof msg,
		 "the run is no longer this connection's to save (%s)", why);
	worker__op_defer(op, WORKER_ECONFLICT, msg,
			 json_pack("{s:s}", "status", status));
}

static void checkpoint_done(struct worker__op *op, int rc)
{
	if (rc == STORE_ECONFLICT || rc == STORE_ENOTFOUND) {
		/* The job left running first: a cancel or a timeout
		 * committed before it (and aborted the run), or its end. */
		refuse_checkpoint(op, op->run);
		return;
	}
	if (rc) {
		worker__op_reply_store(op, rc);
		return;
	}
	worker__op_reply(op, WORKER_OK, NULL, NULL, NULL, false);
}

int worker_remote_checkpoint(struct worker_remote *rem, const char *job_id,
			     const json_t *value, worker_cb cb, void *arg)
{
	struct worker *w = rem->w;
	struct worker__run *r = w ? run_of(rem, job_id) : NULL;
	struct worker__op *op;

	if (!r)
		return -ENOENT;
	if (w->stopping && w->closing)
		return -ESHUTDOWN;
	if (!(op = worker__op_new(w, cb, arg)))
		return -ENOMEM;
	if (r->state != WORKER__RUN_ACTIVE ||
	    r->abort_reason != WORKER__ABORT_NONE) {
		/* Decided already (a cancel, a timeout): a later run must
		 * not get a state this one saved after it. */
		refuse_checkpoint(op, r);
		return 0;
	}
	op->run = r;
	worker__run_ref(r);
	op->own[0] = json_deep_copy(value);
	op->req.op = STORE_OP_CHECKPOINT;
	snprintf(op->req.u.checkpoint.job_id,
		 sizeof(op->req.u.checkpoint.job_id), "%s", job_id);
	op->req.u.checkpoint.value = op->own[0];
	if (!op->own[0] || worker__op_submit(op, checkpoint_done)) {
		op->cb = NULL;
		worker__op_free(op);
		return -ENOMEM;
	}
	return 0;
}

/* ---- questions before a stage commits ------------------------------------- */

/*
 * struct worker__ask is an "input" or "transform" request: op waits for its
 * answer for at most WORKER__ASK_MS, then goes on without it. It is
 * freed once the api called back (answered or closed) and its timer is
 * closed.
 */
struct worker__ask {
	struct worker__op *op; /* NULL once op went on */
	struct worker__ask *next, **pprev; /* in w->asks while op waits */
	void (*done)(struct worker__op *op, json_t *answer);
	uv_timer_t timer;
	int refs; /* the call's, the timer's */
	char what[16];
	char job_id[40];
	char remote[48];
};

static void ask_unref(struct worker__ask *a)
{
	if (--a->refs == 0)
		free(a);
}

static void ask_timer_closed(uv_handle_t *h)
{
	ask_unref(h->data);
}

/* ask_go hands op on, with answer (borrowed) or NULL, once. */
static void ask_go(struct worker__ask *a, json_t *answer)
{
	struct worker__op *op = a->op;

	if (!op)
		return;
	a->op = NULL;
	if (a->next)
		a->next->pprev = a->pprev;
	*a->pprev = a->next;
	uv_close((uv_handle_t *)&a->timer, ask_timer_closed);
	a->done(op, answer);
}

void worker__remote_asks_end(struct worker *w)
{
	while (w->asks) {
		struct worker__ask *a = w->asks;

		log_warn("job %s: berthd stops before worker %s answered %s; "
			 "the job goes on without it (views pending, approval "
			 "asked of a person)",
			 a->job_id, a->remote, a->what);
		ask_go(a, NULL); /* takes a out of w->asks */
	}
}

static void ask_timeout(uv_timer_t *h)
{
	struct worker__ask *a = h->data;

	log_warn("job %s: worker %s did not answer %s within %d ms; the job "
		 "goes on without it (views pending, approval asked of a "
		 "person)",
		 a->job_id, a->remote, a->what, WORKER__ASK_MS);
	ask_go(a, NULL);
}

static void ask_answered(void *arg, json_t *result, json_t *error)
{
	struct worker__ask *a = arg;

	if (error && a->op)
		log_warn("job %s: worker %s answered %s with an error (%s); "
			 "the job goes on without it",
			 a->job_id, a->remote, a->what,
			 json_string_value(json_object_get(error, "message"))
				 ? json_string_value(
					   json_object_get(error, "message"))
				 : "no message");
	else if (!result && a->op)
		log_warn("job %s: the connection of worker %s closed before it "
			 "answered %s; the job goes on without it",
			 a->job_id, a->remote, a->what);
	ask_go(a, json_is_object(result) ? result : NULL);
	ask_unref(a);
}

/* ask sends method with params (stolen) to a worker process serving t,
 * for op; done(op, answer) follows once. */
static void ask(struct worker__op *op, const struct worker_tool *t,
		const char *job_id, const char *method, json_t *params,
		void (*done)(struct worker__op *op, json_t *answer))
{
	struct worker *w = op->w;
	struct worker_remote *rem = pick(w, t->id, true);
	struct worker__ask *a = rem && params ? calloc(1, sizeof(*a)) : NULL;

	if (!a) {
		json_decref(params);
		done(op, NULL);
		return;
	}
	a->op = op;
	a->done = done;
	a->refs = 2;
	snprintf(a->what, sizeof(a->what), "%s", method);
	snprintf(a->job_id, sizeof(a->job_id), "%s", job_id);
	snprintf(a->remote, sizeof(a->remote), "%s", rem->id);
	if (rem->ops->call(rem->conn, method, params, ask_answered, a)) {
		free(a);
		done(op, NULL);
		return;
	}
	uv_timer_init(w->loop, &a->timer);
	a->timer.data = a;
	uv_timer_start(&a->timer, ask_timeout, WORKER__ASK_MS, 0);
	a->next = w->asks;
	if (a->next)
		a->next->pprev = &a->next;
	a->pprev = &w->asks;
	w->asks = a;
}

void worker__remote_input(struct worker__op *op, struct worker_tool *t,
			  const struct store_job *j, const json_t *input,
			  const json_t *rc,
			  void (*done)(struct worker__op *op, json_t *answer))
{
	ask(op, t, j->id, "input",
	    json_pack("{s:o}", "job", job_json(j, input, rc, NULL, 0)), done);
}

void worker__remote_transform(struct worker__op *op, struct worker_tool *t,
			      const struct store_job *j, int stage,
			      const json_t *payload,
			      void (*done)(struct worker__op *op,
					   json_t *answer))
{
	json_t *in = worker__with_defaults(t, WORKER_SCHEMA_INPUT, j->input);
	json_t *rc = j->request_context
			     ? worker__with_defaults(
				       t, WORKER_SCHEMA_REQUEST_CONTEXT,
				       j->request_context)
			     : NULL;

	ask(op, t, j->id, "transform",
	    json_pack("{s:s, s:s, s:s, s:O, s:o}", "jobId", j->id, "tool",
		      j->tool, "stage", worker__stage_name(stage), "payload",
		      payload, "job", job_json(j, in, rc, NULL, 0)),
	    done);
	json_decref(in);
	json_decref(rc);
}

void worker__remote_logs(struct worker *w, const char *job_id,
			 const json_t *answer)
{
	const json_t *logs = json_object_get(answer, "logs");
	size_t i;
	json_t *l;

	json_array_foreach(logs, i, l) {
		const char *level = json_string_value(json_object_get(l, "level"));
		const char *m = json_string_value(json_object_get(l, "message"));

		if (i == MAX_ANSWER_LOGS) {
			worker__job_log(w, job_id, "warn", NULL,
					"the worker's answer held %zu log lines; "
					"the %zu after the first %d are dropped",
					json_array_size(logs),
					json_array_size(logs) - MAX_ANSWER_LOGS,
					MAX_ANSWER_LOGS);
			break;
		}
		if (!m)
			continue;
		if (!level || (strcmp(level, "debug") && strcmp(level, "info") &&
			       strcmp(level, "warn") && strcmp(level, "error")))
			level = "info";
		worker__job_log(w, job_id, level, json_object_get(l, "data"),
				"%s", m);
	}
}

/* ---- the connection's life ------------------------------------------------- */

static void ping_answered(void *arg, json_t *result, json_t *error)
{
	/* Any message counts as heard (heartbeat_cb asks the api). */
}

/*
 * heartbeat_cb runs every heartbeat. A connection that has been silent
 * for a heartbeat is pinged; one that has answered none of the last two
 * pings is closed, and its runs end by onInterrupt (docs/WORKERS.md): a
 * worker on a network that vanished would otherwise hold its jobs.
 */
static void heartbeat_cb(uv_timer_t *h)
{
	struct worker_remote *rem = h->data;
	struct worker *w = rem->w;
	uint64_t now, heard;

	if (!w)
		return;
	now = uv_now(w->loop);
	heard = rem->ops->heard(rem->conn);
	/* Anything heard since the last ping answers it. */
	if (rem->pings && heard >= rem->ping_at)
		rem->pings = 0;
	if (now < heard + (uint64_t)w->cfg.heartbeat_ms)
		return;
	if (rem->pings >= 2) {
		log_warn("worker %s%s%s answered none of two heartbeats (%lld ms "
			 "each); its connection is closed",
			 rem->id, rem->name ? " " : "",
			 rem->name ? rem->name : "",
			 (long long)w->cfg.heartbeat_ms);
		rem->ops->close(rem->conn, "it missed two heartbeats");
		return;
	}
	rem->pings++;
	rem->ping_at = now;
	rem->ops->call(rem->conn, "ping", json_object(), ping_answered, NULL);
}

void worker_remote_drain(struct worker_remote *rem)
{
	if (!rem->w || rem->draining)
		return;
	rem->draining = true;
	serving_add(rem, -1);
	log_info("worker %s%s%s drains: no new run is pushed to it; %d "
		 "running",
		 rem->id, rem->name ? " " : "", rem->name ? rem->name : "",
		 rem->inflight);
}

void worker_remote_detach(struct worker_remote *rem, const char *why)
{
	struct worker *w = rem->w;
	struct worker__run *r, *next;
	int n = 0;

	rem->api_held = false;
	if (w) {
		for (r = rem->runs; r; r = r->rnext)
			n++;
		if (n)
			log_info("worker %s%s%s is gone (%s); the %d job%s it "
				 "was running end%s by %s onInterrupt",
				 rem->id, rem->name ? " " : "",
				 rem->name ? rem->name : "", why, n,
				 n == 1 ? "" : "s", n == 1 ? "s" : "",
				 n == 1 ? "its tool's" : "their tools'");
		else
			log_info("worker %s%s%s is gone (%s)", rem->id,
				 rem->name ? " " : "",
				 rem->name ? rem->name : "", why);
		/* Each undecided run ends now, in one commit; a decided one
		 * (cancelled, timed out) only frees its room. */
		for (r = rem->runs; r; r = next) {
			next = r->rnext;
			worker__run_ref(r);
			if (r->state == WORKER__RUN_ACTIVE &&
			    r->abort_reason == WORKER__ABORT_NONE)
				worker__run_interrupted(r, why);
			else if (r->state == WORKER__RUN_ACTIVE &&
				 !r->timed_out)
				/* Stopped by a shutdown, which puts its job
				 * back (worker.c). */
				worker__run_give_up(r);
			/* A timed-out run ends with its timeout here. */
			give_up(r);
			worker__run_unref(r);
		}
		remote_unlist(rem);
	}
	remote_maybe_free(rem);
}

void worker__remote_shutdown(struct worker *w)
{
	while (w->remotes) {
		struct worker_remote *rem = w->remotes;

		/* No run is left (the shutdown waited for them). */
		remote_unlist(rem);
	}
}

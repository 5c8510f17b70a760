/*
 * ops.c: the operations on jobs the api calls (submit, resume, approve,
 * decline, cancel, retry, pause). Each checks what it can before anything
 * is stored (the tool, the input against its schema, the resume data),
 * then commits one compare-and-set transition; its callback runs once the
 * change is durable. A second resume, approve or decline of the same job
 * fails the compare-and-set and is a conflict, never a second run.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/internal.h"

/* How often a decision is judged again when another approval of the same
 * job committed between its read and its own commit (decide_again). Each
 * round needs someone else's approval to land in that window, so a few
 * are plenty; past them the caller is answered with the conflict. */
#define DECIDE_TRIES 8

/* set_actor keeps a copy of by (NULL: berthd) in op, for the audit of the
 * transition it makes. Returns 0 or -ENOMEM. */
static int set_actor(struct worker__op *op, const struct worker_actor *by)
{
	if (!by || !by->name)
		return 0;
	op->by_name = strdup(by->name);
	op->by_via = by->via ? strdup(by->via) : NULL;
	op->by_client = by->client ? json_deep_copy(by->client) : NULL;
	op->by_roles = by->roles;
	if (!op->by_name || (by->via && !op->by_via) ||
	    (by->client && !op->by_client))
		return -ENOMEM;
	return 0;
}

/* audit_transition makes op's actor the maker of its transition. */
static void audit_transition(struct worker__op *op)
{
	struct store_transition *tr = &op->req.u.transition;

	tr->by = op->by_name;
	tr->via = op->by_via;
	tr->client = op->by_client;
}

static void reply_created(struct worker__op *op, int rc)
{
	struct worker *w = op->w;
	const struct store_job *j = op->req.job ? op->req.job : op->job;
	const struct worker_tool *t = op->tool;
	struct berth_call call;
	int hrc;

	/* A run started at submission (submit_and_run) began before this
	 * commit. Any other new job that is runnable waits for a claim, and
	 * so does every job after it. */
	if (!op->run_now && rc == 0 && !op->req.existed &&
	    j->status == STORE_PENDING)
		w->backlog = true;
	if (op->run_now && t->definition)
		w->remote_starting--;
	if (rc) {
		struct worker__run *r;

		/* The submission is refused and nothing was changed, so a run
		 * it started is dropped now, with its result: the final
		 * transition queued behind the creation failed with it (the
		 * same storage error) or finds no job, and must never be
		 * stored again, nor its hooks run. Its callback comes after
		 * this one (the store answers in order) and sees the run
		 * done. A worker process's run was not pushed yet. */
		if (op->run_now && (r = worker__run_find(w, op->job->id)))
			worker__run_cancelled(r);
		worker__op_reply_store(op, rc);
		return;
	}
	/* A worker process's or an external tool's job started by its
	 * creation: pushed, or its process started, now that it is durable
	 * (start_held). */
	if (op->run_now && (t->definition || t->cmd)) {
		struct worker__run *r = worker__run_find(w, op->job->id);

		if (r)
			worker__run_push(r);
	}
	/* The log lines a worker process's functions wrote while it was
	 * asked about the job (remote.c), now that the job exists. */
	if (!op->req.existed && op->own[5])
		worker__remote_logs(w, j->id, op->own[5]);
	if (!op->req.existed && t->c && t->c->on_input_available) {
		call.job_id = j->id;
		call.tool = j->tool;
		call.tool_call_id = j->tool_call_id;
		call.run_id = j->run_id;
		call.request_context = j->request_context;
		call.metadata = j->metadata;
		/* The input as execute will get it: defaults filled in. */
		hrc = t->c->on_input_available(op->own[3] ? op->own[3]
							  : j->input,
					       &call, t->c->data);
		if (hrc)
			worker__job_log(w, j->id, "warn", NULL,
					"the onInputAvailable hook of tool %s "
					"failed (it returned %d); the job is "
					"not affected",
					j->tool, hrc);
	}
	/* The "created" event asked for a claim already (on_store_event);
	 * a delayed job's time is kept so the run timer fires for it even
	 * while earlier jobs wait for a slot. (A job run at its submission
	 * is done; one due now needs no second claim.) */
	if (!op->run_now && !op->req.existed && j->status == STORE_PENDING &&
	    j->run_at > store_now())
		worker__sched_wakeup(w, j->run_at);
	if (!op->req.existed && j->expires_at)
		worker__expiry_rearm(w);
	worker__op_reply(op, WORKER_OK, NULL, NULL, j, op->req.existed);
}

static char *dup_or_null(const char *s, bool *ok)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*ok = false;
	return d;
}

/* started_copy returns a copy of j, about to be created, as its creation
 * records it when the job starts with it: running, made and started now.
 * NULL without memory. */
static struct store_job *started_copy(const struct store_job *j)
{
	struct store_job *running = store_job_copy(j);

	if (running) {
		running->status = STORE_RUNNING;
		running->created_at = running->updated_at =
			running->started_at = store_now();
	}
	return running;
}

/*
 * submit_and_run creates j, started, through op and runs it at once: a
 * nonblocking tool's execute is pure computation on its input, so it may
 * run before its job is durable. Its final transition is queued behind the
 * creation while the store holds both, and the two usually commit
 * together (unless a batch ends between them): one commit per job. A crash
 * before that commit loses the job and its result together, and the
 * submitter, which had no answer, submits again.
 */
static int submit_and_run(struct worker__op *op, struct store_job *j)
{
	struct worker *w = op->w;
	struct store_job *running;

	store_uuid7(j->id); /* the run needs the id the store will use */
	running = started_copy(j);
	if (!running)
		return -ENOMEM;
	store_hold(w->st);
	op->run_now = true;
	op->req.u.create.start = true;
	if (worker__op_submit(op, reply_created)) {
		store_release(w->st);
		store_job_free(running);
		return -ESHUTDOWN;
	}
	w->started_at_submit++;
	worker__run_start(w, running);
	/* worker__exec_start left the execution to the idle handle (its
	 * outcome must not arrive inside it); it has returned, so run it
	 * now: its final transition is queued behind the creation. */
	worker__exec_inline(w);
	store_release(w->st);
	return 0;
}

/* needs_input is true when a new job of t, a worker process's tool, has
 * functions to ask about before its creation commits (docs/WORKERS.md,
 * "Functions at the stages berthd sees"): requireApproval as a function,
 * the views of its input or of its approval, onInputAvailable. */
static bool needs_input(const struct worker_tool *t)
{
	unsigned stages = (1u << BERTH_PAYLOAD_INPUT);

	if (t->require_approval || (t->fns & WORKER__FN_APPROVAL))
		stages |= 1u << BERTH_PAYLOAD_APPROVAL;
	return (t->fns & (WORKER__FN_APPROVAL | WORKER__FN_ON_INPUT)) ||
	       ((t->view_stages[0] | t->view_stages[1]) & stages);
}

static int submit_create(struct worker__op *op, int64_t now);

/* submit_asked creates op's job once the worker process answered "input"
 * (answer borrowed), or did not (NULL): then a function that decides the
 * approval counts as asking for one (a person decides), the views are
 * pending, and onInputAvailable runs at the job's first run. */
static void submit_asked(struct worker__op *op, json_t *answer)
{
	struct worker_tool *t = op->tool;
	struct store_job *j = op->job;
	const json_t *ra = json_object_get(answer, "requireApproval");
	unsigned stages = 1u << BERTH_PAYLOAD_INPUT;
	json_t *fresh;
	int rc;

	if (t->fns & WORKER__FN_APPROVAL)
		j->approval_required = json_is_boolean(ra) ? json_is_true(ra)
							   : true;
	else
		j->approval_required = t->require_approval;
	if (j->approval_required)
		stages |= 1u << BERTH_PAYLOAD_APPROVAL;
	fresh = worker__views_take(t, json_object_get(answer, "views"));
	j->views = worker__views_merge(t, NULL, fresh, stages, NULL,
				       !answer && (t->fns & WORKER__FN_ON_INPUT));
	json_decref(fresh);
	if (answer && json_object_get(answer, "logs"))
		op->own[5] = json_incref(answer);
	rc = submit_create(op, store_now());
	if (rc) {
		/* Refused at once by the store: berthd is stopping. */
		worker__op_reply(op, WORKER_EINTERNAL, "berthd is shutting down",
				 NULL, NULL, false);
	}
}

/* submit_op checks p and creates the job through op (which it answers,
 * now or later). Returns 0 or -ENOMEM (op is then the caller's). */
static int submit_op(struct worker__op *op, const struct worker_submit *p)
{
	struct worker *w = op->w;
	struct worker_tool *t = worker__tool_find(w, p->tool);
	json_t *errors = NULL;
	struct store_job *j;
	int64_t now = store_now();
	bool ok = true;
	char msg[300];

	if (!t) {
		worker__op_defer_no_tool(op, p->tool);
		return 0;
	}
	/* The submission is judged and answered under this definition,
	 * whatever a reload does meanwhile. */
	op->tool = t;
	worker__tool_ref(t);
	op->submitting = true;
	t->submitting++;
	if ((p->has_max_retries && p->max_retries < 0) || p->timeout_ms < 0 ||
	    p->ttl_ms < 0 || p->run_at < 0) {
		worker__op_defer(op, WORKER_EINVAL,
				 "maxRetries, timeoutMs, ttlMs and runAt must "
				 "not be negative",
				 NULL);
		return 0;
	}
	op->own[0] = p->input ? json_incref(p->input) : json_object();
	if (!op->own[0])
		return -ENOMEM;
	/* The job keeps the input as the client sent it; the schema's
	 * defaults are filled in for the check, the approval policy, the
	 * hook and, at each run, for execute (run.c). */
	if (worker__check(t, WORKER_SCHEMA_INPUT, op->own[0], &op->own[3],
			  &errors)) {
		snprintf(msg, sizeof(msg),
			 "the input does not match the inputSchema of tool %s",
			 t->id);
		worker__op_defer(op, WORKER_EINVAL, msg,
				 json_pack("{s:o}", "errors", errors));
		return 0;
	}
	/* Checked here too, not only before execute (run.c), so that a job
	 * certain to fail is never created, nor shown to a person for
	 * approval. */
	if (t->schema[WORKER_SCHEMA_REQUEST_CONTEXT]) {
		json_t *rc0 = p->request_context
				      ? json_incref(p->request_context)
				      : json_object();
		int rc = worker__check(t, WORKER_SCHEMA_REQUEST_CONTEXT, rc0,
				       NULL, &errors);

		json_decref(rc0);
		if (rc) {
			snprintf(msg, sizeof(msg),
				 "the requestContext does not match the "
				 "requestContextSchema of tool %s",
				 t->id);
			worker__op_defer(op, WORKER_EINVAL, msg,
					 json_pack("{s:o}", "errors", errors));
			return 0;
		}
	}
	/* metadata.mcp says where an MCP job came from (the request's
	 * _meta and the client; berth.h, berth_ctx_mcp_meta), so that a
	 * tool can trust it: only the MCP server sets it (and a retry keeps
	 * the one its job had). */
	if (!p->mcp && !p->retry_of &&
	    json_object_get(p->metadata, WORKER__MCP_META)) {
		worker__op_defer(op, WORKER_EINVAL,
				 "metadata." WORKER__MCP_META " describes the "
				 "MCP tools/call a job came from, which "
				 "berthd sets for a job that came through "
				 "MCP; a submission cannot set it",
				 json_pack("{s:[{s:s, s:s, s:s}]}", "errors",
					   "instancePath",
					   "/metadata/" WORKER__MCP_META,
					   "keyword", "reserved", "message",
					   "is set by berthd for a job that "
					   "came through MCP"));
		return 0;
	}
	j = op->job = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->tool = dup_or_null(t->id, &ok);
	j->input = json_incref(op->own[0]);
	j->request_context = json_incref(p->request_context);
	if (json_is_object(p->mcp)) {
		j->metadata = p->metadata ? json_copy(p->metadata)
					  : json_object();
		if (!j->metadata ||
		    json_object_set(j->metadata, WORKER__MCP_META,
				    p->mcp))
			ok = false;
	} else {
		j->metadata = json_incref(p->metadata);
	}
	j->run_id = dup_or_null(p->run_id, &ok);
	j->tool_call_id = dup_or_null(p->tool_call_id, &ok);
	j->idempotency_key = dup_or_null(p->idempotency_key, &ok);
	j->retry_of = dup_or_null(p->retry_of, &ok);
	/* The audit: who submitted, and so who may not decide it unless its
	 * tool allows (decide). */
	if (set_actor(op, p->by))
		return -ENOMEM;
	if (p->submitted_by) {
		/* Another's request made again: the events name who did. */
		j->submitted_by = dup_or_null(p->submitted_by, &ok);
		j->submitted_via = dup_or_null(p->submitted_via, &ok);
		op->creator = true;
	} else {
		j->submitted_by = dup_or_null(op->by_name ? op->by_name
							  : STORE_BERTHD, &ok);
		j->submitted_via = dup_or_null(op->by_name && op->by_via
						       ? op->by_via
						       : STORE_BERTHD, &ok);
	}
	if (!ok)
		return -ENOMEM;
	j->priority = p->has_priority ? p->priority : 0;
	j->run_at = p->run_at > 0 ? p->run_at : now;
	j->attempt = 1;
	j->max_retries = p->has_max_retries ? p->max_retries
					    : t->bg.max_retries;
	j->timeout_ms = p->timeout_ms > 0	  ? p->timeout_ms
			: t->bg.timeout_ms > 0 ? t->bg.timeout_ms
					       : w->cfg.default_timeout_ms;
	j->ttl_ms = p->ttl_ms;
	if (t->definition && needs_input(t)) {
		/* A worker process's functions decide the approval and make
		 * the views before the creation commits: the job needs its
		 * id now. */
		json_t *rc0 = p->request_context
				      ? json_incref(p->request_context)
				      : json_object();

		store_uuid7(j->id);
		/* The request context as a run gets it (run.c). */
		op->own[4] = t->schema[WORKER_SCHEMA_REQUEST_CONTEXT]
				     ? worker__with_defaults(
					       t, WORKER_SCHEMA_REQUEST_CONTEXT,
					       rc0)
				     : json_incref(p->request_context);
		json_decref(rc0);
		worker__remote_input(op, t, j, op->own[3], op->own[4],
				     submit_asked);
		return 0;
	}
	j->approval_required = t->c && t->c->require_approval_fn
				       ? t->c->require_approval_fn(op->own[3],
								   t->c->data)
				       : t->require_approval;
	return submit_create(op, now);
}

/*
 * start_held creates j, started, through op, and starts its run without
 * its executor: a worker process's tool whose connection found nothing of
 * its tools left to claim (worker__remote_may_start), or an external tool
 * with a slot free and nothing runnable ahead of the job
 * (worker__sched_may_start_proc). The claim's commit and its wait are
 * saved. The executor starts once the creation, which records the job
 * running, is durable (reply_created): neither a worker's execute nor a
 * process is a pure function, and neither may have effects for a job that
 * a crash before the commit would lose. The job is then as a claim would
 * have left it, and a crash after the commit recovers it as any
 * interrupted run.
 */
static int start_held(struct worker__op *op, struct store_job *j)
{
	struct worker *w = op->w;
	struct store_job *running;

	running = started_copy(j);
	if (!running)
		return -ENOMEM;
	op->run_now = true;
	op->req.u.create.start = true;
	if (worker__op_submit(op, reply_created)) {
		store_job_free(running);
		return -ESHUTDOWN;
	}
	if (op->tool->definition)
		w->remote_starting++;
	w->started_at_submit++;
	worker__run_start_held(w, running);
	return 0;
}

/* submit_create creates op's job (op->job, checked), now or once a run at
 * its submission started (submit_and_run). Returns 0 or -ESHUTDOWN. */
static int submit_create(struct worker__op *op, int64_t now)
{
	struct worker *w = op->w;
	struct worker_tool *t = op->tool;
	struct store_job *j = op->job;

	j->status = j->approval_required ? STORE_AWAITING_APPROVAL
					 : STORE_PENDING;
	if (j->approval_required)
		j->quorum = t->policy.quorum;
	if (j->approval_required && j->ttl_ms > 0)
		j->expires_at = now + j->ttl_ms;
	/* The "created" event shows the input's display view; the
	 * "approval_requested" event the store appends with it shows the
	 * approval view (BERTH_PAYLOAD_APPROVAL through the display
	 * transform; without one, the input). A worker process's tool
	 * shows the views stored with the job (submit_asked), and nothing
	 * of a view still to come. */
	if (t->definition) {
		op->own[1] = worker__stored_view(t, j->views,
						 WORKER_VIEW_DISPLAY,
						 BERTH_PAYLOAD_INPUT, j->input);
		if (j->approval_required)
			op->own[2] = worker__stored_view(
				t, j->views, WORKER_VIEW_DISPLAY,
				BERTH_PAYLOAD_APPROVAL, j->input);
		op->req.u.create.approval_event_empty =
			j->approval_required && !op->own[2];
	} else {
		op->own[1] = worker__view(t, WORKER_VIEW_DISPLAY,
					  BERTH_PAYLOAD_INPUT, j->input);
		if (j->approval_required)
			op->own[2] = worker__view(t, WORKER_VIEW_DISPLAY,
						  BERTH_PAYLOAD_APPROVAL,
						  j->input);
	}
	op->req.op = STORE_OP_CREATE;
	op->req.u.create.job = j;
	op->req.u.create.event_data = op->own[1];
	op->req.u.create.approval_event_data = op->own[2];
	op->req.u.create.client = op->by_client;
	if (op->creator) {
		op->req.u.create.by = op->by_name ? op->by_name : STORE_BERTHD;
		op->req.u.create.via = op->by_name && op->by_via ? op->by_via
							      : STORE_BERTHD;
	}
	/* Started in this transaction: one commit less on the job's way
	 * (the claim's) when the pool has room and nothing waits. Not
	 * under a cluster-wide bound, which only claims count. */
	if (w->cfg.cluster_workers && store_shared(w->st))
		;
	else if (worker__sched_may_start(w, t, j, now))
		return submit_and_run(op, j);
	else if ((t->definition && worker__remote_may_start(w, t, j, now)) ||
		 worker__sched_may_start_proc(w, t, j, now)) {
		if (!j->id[0])
			store_uuid7(j->id);
		return start_held(op, j);
	}
	if (worker__op_submit(op, reply_created))
		return -ESHUTDOWN;
	return 0;
}

int worker_submit(struct worker *w, const struct worker_submit *p,
		  worker_cb cb, void *arg)
{
	struct worker__op *op;
	int rc;

	if (!p || !p->tool)
		return -EINVAL;
	if (w->stopping)
		return -ESHUTDOWN;
	op = worker__op_new(w, cb, arg);
	if (!op)
		return -ENOMEM;
	rc = submit_op(op, p);
	if (rc) {
		op->cb = NULL;
		worker__op_free(op);
	}
	return rc;
}

/* ---- transitions of one job ------------------------------------------- */

static void reply_transition(struct worker__op *op, int rc)
{
	struct worker *w = op->w;
	const struct store_job *j = op->req.job;
	struct worker__run *r;

	if (rc) {
		worker__op_reply_store(op, rc);
		return;
	}
	/* Its event ("resumed", "approved") asked for a claim already; a
	 * claim in the same batch went first and did not see it. */
	if (j && j->status == STORE_PENDING)
		worker__sched_wakeup(w, j->run_at);
	/* The "cancelled" event stopped a run of the job already
	 * (on_store_event); this finds one only if that event never came. */
	if (j && j->status == STORE_CANCELLED &&
	    (r = worker__run_find(w, j->id)))
		worker__run_cancelled(r);
	/* A worker process's log lines while it made the views. */
	if (j && op->own[5])
		worker__remote_logs(w, j->id, op->own[5]);
	worker__op_reply(op, WORKER_OK, NULL, NULL, j, false);
}

/* transition_op starts an op for a transition of job id. */
static struct worker__op *transition_op(struct worker *w, const char *id,
					worker_cb cb, void *arg)
{
	struct worker__op *op;

	if (!id || strlen(id) >= sizeof(op->req.u.transition.job_id))
		return NULL;
	op = worker__op_new(w, cb, arg);
	if (!op)
		return NULL;
	op->req.op = STORE_OP_TRANSITION;
	snprintf(op->req.u.transition.job_id,
		 sizeof(op->req.u.transition.job_id), "%s", id);
	return op;
}

static int submit_transition(struct worker__op *op)
{
	if (worker__op_submit(op, reply_transition)) {
		op->cb = NULL;
		worker__op_free(op);
		return -ESHUTDOWN;
	}
	return 0;
}

/* read_job reads job id for an operation that must look at it before it
 * changes it; on an error it answers op later and returns NULL. */
static struct store_job *read_job(struct worker__op *op, const char *id)
{
	struct store_job *j = NULL;
	int rc = store_get(op->w->st, id, &j);
	char msg[160];

	if (rc == STORE_ENOTFOUND) {
		snprintf(msg, sizeof(msg), "not found: no job %.64s", id);
		worker__op_defer(op, WORKER_ENOTFOUND, msg,
				 json_pack("{s:s}", "id", id));
		return NULL;
	}
	if (rc) {
		snprintf(msg, sizeof(msg), "storage failed: %s",
			 store_error_text(rc));
		worker__op_defer(op, WORKER_ESTORAGE, msg,
				 json_pack("{s:s}", "sqlite",
					   store_error_text(rc)));
		return NULL;
	}
	op->job2 = j;
	return j;
}

static void defer_conflict(struct worker__op *op, const struct store_job *j)
{
	char msg[160];

	snprintf(msg, sizeof(msg), "the job is %s", store_status_name(j->status));
	worker__op_defer(op, WORKER_ECONFLICT, msg,
			 json_pack("{s:s}", "status",
				   store_status_name(j->status)));
}

/* resume_prepare fills op's transition: the resume of its job (op->job2,
 * read), of tool t, with the resume data of op->own[0]. */
static void resume_prepare(struct worker__op *op, const struct worker_tool *t)
{
	struct store_transition *tr = &op->req.u.transition;

	tr->from_mask = STORE_MASK(STORE_SUSPENDED);
	tr->to = STORE_PENDING;
	tr->event = STORE_EV_RESUMED;
	if (t && t->definition)
		op->own[1] = tr->event_data = worker__stored_view(
			t, tr->views, WORKER_VIEW_DISPLAY, BERTH_PAYLOAD_RESUME,
			op->own[0]);
	else
		op->own[1] = tr->event_data = worker__view(
			t, WORKER_VIEW_DISPLAY, BERTH_PAYLOAD_RESUME,
			op->own[0]);
	tr->set |= STORE_SET_RESUME | STORE_SET_RUN_AT | STORE_SET_EXPIRES_AT;
	tr->resume_data = op->own[0];
	tr->run_at = store_now();
	tr->expires_at = 0;
}

/* resume_asked commits a resume once the worker process answered
 * "transform" (answer borrowed) or did not (NULL: the resume's views are
 * pending, and the next run asks for them). */
static void resume_asked(struct worker__op *op, json_t *answer)
{
	struct store_transition *tr = &op->req.u.transition;
	json_t *fresh = worker__views_take(op->tool,
					   json_object_get(answer, "views"));

	op->own[4] = tr->views = worker__views_merge(
		op->tool, op->job2->views, fresh, 1u << BERTH_PAYLOAD_RESUME,
		NULL, -1);
	tr->set |= STORE_SET_VIEWS;
	json_decref(fresh);
	if (answer && json_object_get(answer, "logs"))
		op->own[5] = json_incref(answer);
	resume_prepare(op, op->tool);
	if (worker__op_submit(op, reply_transition))
		worker__op_reply(op, WORKER_EINTERNAL, "berthd is shutting down",
				 NULL, NULL, false);
}

int worker_resume(struct worker *w, const char *id, json_t *resume_data,
		  const struct worker_actor *by, worker_cb cb, void *arg)
{
	struct worker__op *op;
	const struct worker_tool *t;
	struct store_job *j;
	json_t *errors = NULL;
	char msg[300];

	if (w->stopping)
		return -ESHUTDOWN;
	if (!(op = transition_op(w, id, cb, arg)))
		return id ? -ENOMEM : -EINVAL;
	if (set_actor(op, by)) {
		op->cb = NULL;
		worker__op_free(op);
		return -ENOMEM;
	}
	audit_transition(op);
	if (!(j = read_job(op, id)))
		return 0;
	if (j->status != STORE_SUSPENDED) {
		defer_conflict(op, j);
		return 0;
	}
	t = worker__tool_find(w, j->tool);
	op->own[0] = resume_data ? json_incref(resume_data) : json_null();
	/* Checked with the schema's defaults filled in, as the run gets it;
	 * the job keeps what the client sent. */
	if (worker__check(t, WORKER_SCHEMA_RESUME, op->own[0], NULL,
			  &errors)) {
		snprintf(msg, sizeof(msg),
			 "the resume data does not match the resumeSchema of "
			 "tool %s; the job stays suspended",
			 j->tool);
		worker__op_defer(op, WORKER_EINVAL, msg,
				 json_pack("{s:o}", "errors", errors));
		return 0;
	}
	if (t && t->definition &&
	    ((t->view_stages[0] | t->view_stages[1]) &
	     (1u << BERTH_PAYLOAD_RESUME))) {
		/* A worker process's functions make the views of the resume
		 * data before the resume commits. */
		op->own[2] = worker__with_defaults(t, WORKER_SCHEMA_RESUME,
						   op->own[0]);
		op->tool = (struct worker_tool *)t;
		worker__tool_ref(op->tool);
		worker__remote_transform(op, op->tool, j,
					 BERTH_PAYLOAD_RESUME, op->own[2],
					 resume_asked);
		return 0;
	}
	resume_prepare(op, t);
	return submit_transition(op);
}

/* approved_by returns the approval of name among approvals, or NULL. */
static const json_t *approved_by(const json_t *approvals, const char *name)
{
	size_t i;
	json_t *a;

	json_array_foreach(approvals, i, a)
		if (name && json_is_string(json_object_get(a, "by")) &&
		    strcmp(json_string_value(json_object_get(a, "by")), name) == 0)
			return a;
	return NULL;
}

/* counts is true when approval a of job j still counts toward the quorum
 * under policy pol: its approver may still decide the job. A policy that
 * stopped letting the submitter approve, or no longer names the approver,
 * takes back what they gave (an approval by a role the policy names
 * still counts: an approval keeps its approver's name, not their roles).
 * berthd's own approvals (no principals) always count. */
static bool counts(const struct worker__policy *pol, const struct worker *w,
		   const struct store_job *j, const json_t *a)
{
	const char *by = json_string_value(json_object_get(a, "by"));

	if (!by || !strcmp(by, STORE_BERTHD))
		return true;
	if (!worker__policy_self(pol, w) && j->submitted_by &&
	    !strcmp(j->submitted_by, by))
		return false;
	if (!pol->napprovers || pol->approver_roles)
		return true;
	for (size_t i = 0; i < pol->napprovers; i++)
		if (!strcmp(pol->approvers[i], by))
			return true;
	return false;
}

/* counted returns how many of job j's approvals count under pol. */
static size_t counted(const struct worker__policy *pol,
		      const struct worker *w, const struct store_job *j)
{
	size_t i, n = 0;
	json_t *a;

	json_array_foreach(j->approvals, i, a)
		n += counts(pol, w, j, a);
	return n;
}

/* refuse_decider answers op: its actor may not decide job j, for reason
 * ("self_approval", "not_an_approver"), in a sentence why. */
static void refuse_decider(struct worker__op *op, const struct store_job *j,
			   const char *reason, const char *why)
{
	worker__op_defer(op, WORKER_EFORBIDDEN, why,
			 json_pack("{s:s, s:s, s:s}", "reason", reason,
				   "principal", op->by_name, "jobId", j->id));
}

/*
 * judge decides what op's decision of job j does under its tool's
 * approvalPolicy (policy.c), and fills op's transition, or answers op
 * (deferred) and returns 1. The job's tool as registered now is the
 * policy's (a reload that changes it applies to the jobs that wait: an
 * approver removed from a policy can no longer decide); a job whose tool
 * berthd does not have is judged by the defaults, with the quorum it was
 * submitted with.
 */
static int judge(struct worker__op *op, const struct store_job *j)
{
	struct worker *w = op->w;
	const struct worker_tool *t = worker__tool_find(w, j->tool);
	struct worker__policy dflt;
	const struct worker__policy *pol;
	struct store_transition *tr = &op->req.u.transition;
	struct worker_actor by = {op->by_name, op->by_via, op->by_client,
				  op->by_roles};
	const char *text = op->sown[0];
	const json_t *mine;
	json_t *entry, *list;
	size_t had, valid;
	char at[32], msg[400];
	int quorum;
	bool again;

	worker__policy_init(&dflt);
	dflt.quorum = j->quorum > 0 ? j->quorum : 1;
	pol = t ? &t->policy : &dflt;
	quorum = pol->quorum;
	/* had: the approvals stored, which the commit checks are still
	 * there; valid: those that count under the policy as it is now. */
	had = json_array_size(j->approvals);
	valid = counted(pol, w, j);
	mine = op->approve && op->by_name
		       ? approved_by(j->approvals, op->by_name)
		       : NULL;
	/* One that no longer counts is judged as a new decision: refused
	 * below, as its approver may no longer decide. One that counts,
	 * given again when the approvals that count meet the quorum now
	 * (a reload lowered it), decides the job with them: else nobody
	 * might ever be let to. */
	again = mine && counts(pol, w, j, mine);
	if (again && (j->status == STORE_AWAITING_APPROVAL || quorum > 1) &&
	    !(j->status == STORE_AWAITING_APPROVAL && (int)valid >= quorum)) {
		/* The same approver twice counts once, and is told so, also
		 * once a quorum of several is met: an approval that raced
		 * the one that met it is judged again after it. With a
		 * quorum of one the job's status answers, {status} as
		 * PROTOCOL.md has it. */
		if (j->status == STORE_AWAITING_APPROVAL)
			snprintf(msg, sizeof(msg), "conflict: %.64s approved "
				 "job %s already; it waits for %d approval%s "
				 "of %d", op->by_name, j->id,
				 quorum - (int)valid,
				 quorum - (int)valid == 1 ? "" : "s", quorum);
		else
			snprintf(msg, sizeof(msg), "conflict: %.64s approved "
				 "job %s already; it is %s", op->by_name,
				 j->id, store_status_name(j->status));
		worker__op_defer(op, WORKER_ECONFLICT, msg,
				 json_pack("{s:s, s:s, s:i, s:i}", "status",
					   store_status_name(j->status),
					   "reason", "already_approved",
					   "approvals", (int)valid, "quorum",
					   quorum));
		return 1;
	}
	if (j->status != STORE_AWAITING_APPROVAL) {
		defer_conflict(op, j);
		return 1;
	}
	if (op->by_name) {
		/* Separation of duties: a request is not its own approval. */
		if (!worker__policy_self(pol, w) && j->submitted_by &&
		    strcmp(j->submitted_by, op->by_name) == 0) {
			snprintf(msg, sizeof(msg), "forbidden: %.64s submitted "
				 "job %s and may not %s it (tool %.128s has no "
				 "approvalPolicy.selfApproval)", op->by_name,
				 j->id, op->approve ? "approve" : "decline",
				 j->tool);
			refuse_decider(op, j, "self_approval", msg);
			return 1;
		}
		if (!worker__policy_approver(pol, &by)) {
			snprintf(msg, sizeof(msg), "forbidden: %.64s is not "
				 "among the approvers of tool %.128s "
				 "(approvalPolicy.approvers)", op->by_name,
				 j->tool);
			refuse_decider(op, j, "not_an_approver", msg);
			return 1;
		}
	}
	tr->from_mask = STORE_MASK(STORE_AWAITING_APPROVAL);
	if (!op->approve) {
		/* One decline ends the job, whatever approvals it has. */
		tr->to = STORE_DECLINED;
		tr->event = STORE_EV_DECLINED;
		tr->set = STORE_SET_DECISION | STORE_SET_EXPIRES_AT;
		tr->decision = STORE_DECISION_DECLINED;
		tr->reason = text;
		tr->expires_at = 0;
		op->own[0] = tr->event_data = json_pack("{s:s*}", "reason",
							 text);
		return 0;
	}
	/* The approvals as they are, with this one added unless it is
	 * there already (again). */
	entry = again ? NULL
		      : json_pack("{s:s, s:s, s:s}", "by",
				  op->by_name ? op->by_name : STORE_BERTHD,
				  "via",
				  op->by_name && op->by_via ? op->by_via
							    : STORE_BERTHD,
				  "at", store_format_time(store_now(), at));
	list = j->approvals ? json_copy(j->approvals) : json_array();
	if (!list || (!again &&
		      (!entry ||
		       (text && json_object_set_new(entry, "note",
						    json_string(text))) ||
		       (op->by_client &&
			json_object_set(entry, "client", op->by_client)) ||
		       json_array_append(list, entry)))) {
		json_decref(entry);
		json_decref(list);
		worker__op_defer(op, WORKER_EINTERNAL, "out of memory", NULL);
		return 1;
	}
	json_decref(entry);
	if (!again)
		valid++;
	op->own[1] = tr->approvals = list;
	tr->approvals_had = (int)had;
	tr->quorum = quorum;
	tr->event = STORE_EV_APPROVED;
	tr->set = STORE_SET_APPROVALS | STORE_SET_EXPIRES_AT;
	if ((int)valid >= quorum) {
		tr->to = STORE_PENDING;
		tr->set |= STORE_SET_DECISION;
		tr->decision = STORE_DECISION_APPROVED;
		tr->reason = text;
		tr->expires_at = 0;
	} else {
		/* Below the quorum the job goes on waiting, and keeps the
		 * time it may wait: an approval does not extend it. */
		tr->to = STORE_AWAITING_APPROVAL;
		tr->expires_at = j->expires_at;
	}
	op->own[0] = tr->event_data = json_pack("{s:s*}", "note", text);
	if (op->own[0] && quorum > 1) {
		json_object_set_new(op->own[0], "approvals",
				    json_integer((json_int_t)valid));
		json_object_set_new(op->own[0], "quorum", json_integer(quorum));
	}
	return 0;
}

static void reply_decided(struct worker__op *op, int rc);

/* decide_op reads op's job and judges op's decision of it; the
 * transition is committed, or op answered. Returns 0, or -ESHUTDOWN when
 * the store takes nothing more (op is then still the caller's). */
static int decide_op(struct worker__op *op)
{
	struct store_job *j;

	store_job_free(op->job2);
	op->job2 = NULL;
	if (!(j = read_job(op, op->req.u.transition.job_id)))
		return 0;
	if (judge(op, j))
		return 0;
	audit_transition(op);
	return worker__op_submit(op, reply_decided) ? -ESHUTDOWN : 0;
}

/* reply_decided answers a decision, unless another approval of the job
 * committed after it was judged (its list of approvals is not the one
 * the decision was made on: STORE_SET_APPROVALS): it is then judged again
 * on the job as it is now, which may find the quorum met, or the job
 * gone on. */
static void reply_decided(struct worker__op *op, int rc)
{
	const struct store_job *j = op->req.job;

	if (rc == STORE_ECONFLICT && j && j->status == STORE_AWAITING_APPROVAL &&
	    (op->req.u.transition.set & STORE_SET_APPROVALS) &&
	    ++op->tries < DECIDE_TRIES && !op->w->stopping) {
		store_req_finish(&op->req);
		for (int i = 0; i < 2; i++) {
			json_decref(op->own[i]);
			op->own[i] = NULL;
		}
		memset(&op->req.u.transition.from_mask, 0,
		       sizeof(op->req.u.transition) -
			       offsetof(struct store_transition, from_mask));
		if (decide_op(op) == 0)
			return;
		/* The store is closing: answer what the commit said. */
	}
	reply_transition(op, rc);
}

static int decide(struct worker *w, const char *id, bool approve,
		  const char *text, const struct worker_actor *by,
		  worker_cb cb, void *arg)
{
	struct worker__op *op;

	if (w->stopping)
		return -ESHUTDOWN;
	if (!(op = transition_op(w, id, cb, arg)))
		return id ? -ENOMEM : -EINVAL;
	op->approve = approve;
	if ((text && !(op->sown[0] = strdup(text))) || set_actor(op, by)) {
		op->cb = NULL;
		worker__op_free(op);
		return -ENOMEM;
	}
	if (decide_op(op) < 0) {
		op->cb = NULL;
		worker__op_free(op);
		return -ESHUTDOWN;
	}
	return 0;
}

int worker_approve(struct worker *w, const char *id, const char *note,
		   const struct worker_actor *by, worker_cb cb, void *arg)
{
	return decide(w, id, true, note, by, cb, arg);
}

int worker_decline(struct worker *w, const char *id, const char *reason,
		   const struct worker_actor *by, worker_cb cb, void *arg)
{
	return decide(w, id, false, reason, by, cb, arg);
}

int worker_cancel(struct worker *w, const char *id, const char *reason,
		  const struct worker_actor *by, worker_cb cb, void *arg)
{
	struct worker__op *op;
	struct store_transition *tr;

	if (w->stopping)
		return -ESHUTDOWN;
	if (!(op = transition_op(w, id, cb, arg)))
		return id ? -ENOMEM : -EINVAL;
	if (set_actor(op, by)) {
		op->cb = NULL;
		worker__op_free(op);
		return -ENOMEM;
	}
	audit_transition(op);
	tr = &op->req.u.transition;
	tr->from_mask = STORE_MASK(STORE_PENDING) |
			STORE_MASK(STORE_AWAITING_APPROVAL) |
			STORE_MASK(STORE_SUSPENDED) | STORE_MASK(STORE_RUNNING);
	tr->to = STORE_CANCELLED;
	tr->event = STORE_EV_CANCELLED;
	/* A job cancelled while it waited for someone waits no more: its
	 * expiresAt goes, as a decision or a resume drops it. */
	tr->set = STORE_SET_ERROR | STORE_SET_EXPIRES_AT;
	tr->expires_at = 0;
	op->own[0] = tr->error = json_pack(
		"{s:s, s:s}", "message",
		reason && *reason ? reason : "cancelled", "code", "cancelled");
	op->own[1] = tr->event_data = json_pack("{s:s*}", "reason", reason);
	return submit_transition(op);
}

int worker_retry(struct worker *w, const char *id,
		 const struct worker_actor *by, worker_cb cb, void *arg)
{
	struct worker_submit p = {0};
	struct worker__op *op;
	struct store_job *j;
	int rc;

	if (w->stopping)
		return -ESHUTDOWN;
	if (!id)
		return -EINVAL;
	op = worker__op_new(w, cb, arg);
	if (!op)
		return -ENOMEM;
	if (!(j = read_job(op, id)))
		return 0;
	if (j->status != STORE_FAILED && j->status != STORE_TIMED_OUT &&
	    j->status != STORE_EXPIRED) {
		defer_conflict(op, j);
		return 0;
	}
	p.tool = j->tool;
	p.input = j->input;
	p.request_context = j->request_context;
	p.metadata = j->metadata;
	p.run_id = j->run_id;
	p.tool_call_id = j->tool_call_id;
	p.has_priority = true;
	p.priority = j->priority;
	p.timeout_ms = j->timeout_ms;
	p.has_max_retries = true;
	p.max_retries = j->max_retries;
	p.ttl_ms = j->ttl_ms;
	p.retry_of = j->id;
	p.by = by;
	p.submitted_by = j->submitted_by;
	p.submitted_via = j->submitted_via;
	/* The deferred conflict replies name op->job2; a successful create
	 * does not, so the old job may go with the op. */
	rc = submit_op(op, &p);
	if (rc) {
		op->cb = NULL;
		worker__op_free(op);
	}
	return rc;
}

static void reply_paused(struct worker__op *op, int rc)
{
	struct worker *w = op->w;
	struct worker_tool *t = worker__tool_find(w, op->req.u.pause.tool);

	/* Whatever the store holds now is read again when needed. */
	if (t)
		t->pause = rc ? WORKER__PAUSE_UNKNOWN
			      : op->req.u.pause.paused ? WORKER__PAUSE_YES
						       : WORKER__PAUSE_NO;
	/* Unpaused, or a pause that failed: the tool's pending jobs are
	 * runnable, and those created while the pause was asked for were
	 * not claimed (on_store_event skips a paused tool's). */
	if (rc || !op->req.u.pause.paused) {
		w->backlog = true;
		worker__remote_wake(w, op->req.u.pause.tool);
		worker__sched_kick(w);
		worker__sched_rearm(w);
	}
	if (rc) {
		worker__op_reply_store(op, rc);
		return;
	}
	worker__op_reply(op, WORKER_OK, NULL, NULL, NULL, false);
}

int worker_pause(struct worker *w, const char *tool, bool paused,
		 worker_cb cb, void *arg)
{
	struct worker_tool *t;
	struct worker__op *op;

	if (w->stopping)
		return -ESHUTDOWN;
	if (!tool)
		return -EINVAL;
	op = worker__op_new(w, cb, arg);
	if (!op)
		return -ENOMEM;
	t = worker__tool_find(w, tool);
	if (!t) {
		worker__op_defer_no_tool(op, tool);
		return 0;
	}
	op->req.op = STORE_OP_TOOL_PAUSE;
	op->tool = t; /* keeps the name the store reads alive */
	worker__tool_ref(t);
	op->req.u.pause.tool = t->id;
	op->req.u.pause.paused = paused;
	if (paused)
		t->pause = WORKER__PAUSE_YES; /* no job starts at submission now */
	if (worker__op_submit(op, reply_paused)) {
		t->pause = WORKER__PAUSE_UNKNOWN;
		op->cb = NULL;
		worker__op_free(op);
		return -ESHUTDOWN;
	}
	return 0;
}

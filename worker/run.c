/*
 * run.c: one try of a claimed job, from the claim to the transition that
 * ends it (completed, suspended, a retry, failed, timed_out), whichever
 * executor runs it (exec.c for C tools, proc.c for external ones, remote.c
 * for worker processes' tools).
 *
 * A run's outcome is used only while the run is active: once a timeout or
 * a cancel has decided the job, whatever execute or the process produces
 * later is discarded. The slot a run holds is released when its executor
 * is gone; a C tool that ignores its abort flag cannot be stopped, so its
 * slot is released as soon as its job is decided and its thread is left
 * to finish on its own.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "log/log.h"
#include "worker/internal.h"

/* A final transition that failed in the store is tried again after this. */
#define FINAL_RETRY_MS 1000

void worker__run_ref(struct worker__run *r)
{
	atomic_fetch_add(&r->refs, 1);
}

static void run_free(struct worker__run *r)
{
	worker__tool_unref(r->tool);
	store_job_free(r->job);
	json_decref(r->p_input);
	json_decref(r->p_rc);
	json_decref(r->p_resume);
	json_decref(r->x_input);
	json_decref(r->x_metadata);
	json_decref(r->x_rc);
	json_decref(r->x_resume);
	json_decref(r->x_suspend);
	json_decref(r->x_checkpoint);
	worker__outcome_finish(&r->outcome);
	json_decref(r->progress_latest);
	json_decref(r->progress_next);
	json_decref(r->fresh);
	json_decref(r->timed_out);
	free(r->code);
	if (r->hub)
		worker__hub_unref(r->hub);
	free(r);
}

void worker__run_unref(struct worker__run *r)
{
	if (atomic_fetch_sub(&r->refs, 1) == 1)
		run_free(r);
}

/* id_bucket returns the by_id bucket of a job id (FNV-1a). */
static struct worker__run **id_bucket(struct worker *w, const char *id)
{
	uint64_t h = 14695981039346656037u;

	for (; *id; id++)
		h = (h ^ (unsigned char)*id) * 1099511628211u;
	return &w->by_id[h & (w->nby_id - 1)];
}

struct worker__run *worker__run_find(struct worker *w, const char *job_id)
{
	for (struct worker__run *r = *id_bucket(w, job_id); r; r = r->id_next)
		if (r->state != WORKER__RUN_DONE &&
		    strcmp(r->job->id, job_id) == 0)
			return r;
	return NULL;
}

/* list puts r on the worker's list of runs and in by_id. */
static void list(struct worker *w, struct worker__run *r)
{
	struct worker__run **b = id_bucket(w, r->job->id);

	r->next = w->runs;
	if (w->runs)
		w->runs->prev = r;
	w->runs = r;
	r->id_next = *b;
	*b = r;
	r->listed = true;
}

static void unlist(struct worker__run *r)
{
	struct worker *w = r->w;

	if (!r->listed)
		return;
	for (struct worker__run **p = id_bucket(w, r->job->id); *p;
	     p = &(*p)->id_next)
		if (*p == r) {
			*p = r->id_next;
			break;
		}
	r->id_next = NULL;
	if (r->prev)
		r->prev->next = r->next;
	else
		w->runs = r->next;
	if (r->next)
		r->next->prev = r->prev;
	r->prev = r->next = NULL;
	r->listed = false;
}

/* run_maybe_end releases the slot and the list entry once they are no
 * longer needed. The slot (the pool's, and the tool's concurrency count)
 * is released as soon as the run is decided and its executor is gone:
 * execute has returned or the process has exited. It is not held for the
 * final commit: the tool sees no overlap (its next execute starts after
 * this one ended), and the store still shows the job running until the
 * commit, which can only make a cluster-wide count on a shared database
 * (pg.c) count one job too many for a moment, never too few. The final
 * transition is queued before the kick's claim, but the writer takes
 * claims first (store.c), so that count may see the run still running:
 * final_done claims again once the end has committed. A C tool that
 * ignores its abort flag gives up its slot once its job is decided (the
 * file's comment). */
static void run_maybe_end(struct worker__run *r)
{
	struct worker *w = r->w;
	bool running = r->exec_started && !r->exec_done;
	bool done = r->state == WORKER__RUN_DONE;
	struct worker_tool *freed = NULL;
	bool kick = false, thread = false;

	if (!w || r->state == WORKER__RUN_ACTIVE)
		return;
	if (r->slot_held && (!running || (done && r->c))) {
		struct worker_tool *t = worker__tool_find(w, r->job->tool);

		r->slot_held = false;
		if (r->slot)
			w->busy--;
		thread = r->thread_slot;
		if (r->thread_slot)
			w->threads_busy--;
		/* The definition that holds the id now counts the slot: a
		 * reload counted this run for it (internal.h). */
		if (t)
			t->running--;
		freed = t;
		kick = true;
	}
	if (done && !running)
		unlist(r);
	else if (done && r->proc)
		worker__run_abort(r, WORKER__ABORT_FINISHED);
	if (kick)
		worker__sched_freed(w, freed, thread);
	if (done)
		worker__check_shutdown(w);
}

static void timer_closed(uv_handle_t *h)
{
	worker__run_unref(h->data);
}

/* run_set_done: the job is no longer this run's. The timer's close
 * callback drops the scheduler's reference. A final transition waiting
 * for its retry timer (a storage error; a cancel decided the job in the
 * meantime) is dropped here: closing the timer means final_retry_cb never
 * runs, and an op left behind would keep the worker's inflight count up
 * and hold up its shutdown. One in the store is freed by final_done. */
static void run_set_done(struct worker__run *r)
{
	if (r->state == WORKER__RUN_DONE)
		return;
	r->state = WORKER__RUN_DONE;
	if (r->final_waiting) {
		struct worker__op *op = r->final;

		r->final_waiting = false;
		r->final = NULL;
		worker__op_free(op);
	}
	uv_close((uv_handle_t *)&r->timer, timer_closed);
	run_maybe_end(r);
}

void worker__run_give_up(struct worker__run *r)
{
	run_set_done(r);
}

static void run_fail(struct worker__run *r, json_t *error, bool retryable,
		     bool timed_out);

bool worker__run_end_timed_out(struct worker__run *r)
{
	json_t *error = r->timed_out;

	if (!error || r->state != WORKER__RUN_ACTIVE)
		return false;
	r->timed_out = NULL;
	run_fail(r, error, true, true);
	return true;
}

void worker__run_abort(struct worker__run *r, int reason)
{
	if (r->abort_reason == WORKER__ABORT_NONE ||
	    r->abort_reason == WORKER__ABORT_FINISHED)
		r->abort_reason = reason;
	atomic_store(&r->aborted, true);
	worker__exec_abort(r);
	if (r->proc && r->w && r->w->now)
		worker__proc_kill_now(r->proc);
	else if (r->proc)
		worker__proc_kill(r->proc, reason == WORKER__ABORT_FINISHED);
	else if (r->remote && reason != WORKER__ABORT_FINISHED)
		worker__remote_abort(r, reason);
}

void worker__run_cancelled(struct worker__run *r)
{
	worker__run_abort(r, WORKER__ABORT_CANCEL);
	run_set_done(r);
}

/* ---- hooks ------------------------------------------------------------ */

static void call_of(const struct store_job *j, struct berth_call *call)
{
	call->job_id = j->id;
	call->tool = j->tool;
	call->tool_call_id = j->tool_call_id;
	call->run_id = j->run_id;
	call->request_context = j->request_context;
	call->metadata = j->metadata;
}

static void hook_failed(struct worker *w, const struct store_job *j,
			const char *hook, int rc)
{
	worker__job_log(w, j->id, "warn", NULL,
			"the %s hook of tool %s failed (it returned %d); the "
			"job is not affected",
			hook, j->tool, rc);
}

static void run_hooks(struct worker *w, const struct worker_tool *t,
		      const struct store_job *j)
{
	const struct berth_tool *c = t ? t->c : NULL;
	struct berth_call call;
	json_t *o;
	int rc;

	if (!c)
		return;
	call_of(j, &call);
	if (j->status == STORE_COMPLETED && c->on_output &&
	    (rc = c->on_output(j->output, &call, c->data)))
		hook_failed(w, j, "onOutput", rc);
	if (j->status == STORE_COMPLETED && c->on_complete) {
		o = worker_job_to_json(w, j, WORKER_VIEW_RAW);
		if ((rc = c->on_complete(o, c->data)))
			hook_failed(w, j, "onComplete", rc);
		json_decref(o);
	}
	if ((j->status == STORE_FAILED || j->status == STORE_TIMED_OUT) &&
	    c->on_failed) {
		o = worker_job_to_json(w, j, WORKER_VIEW_RAW);
		if ((rc = c->on_failed(o, c->data)))
			hook_failed(w, j, "onFailed", rc);
		json_decref(o);
	}
}

/* ---- the final transition --------------------------------------------- */

static void final_submit(struct worker__run *r);

/* error_message returns the message of a job's error object, or "". */
static const char *error_message(const json_t *error)
{
	const char *m = json_string_value(json_object_get(error, "message"));

	return m ? m : "";
}

/*
 * log_end logs how a run of this node ended, once its end is committed:
 * a failure or a timeout is a warning (the job is over and did not do its
 * work), a retry is information, and the rest is left to the debug line of
 * each transition (on_store_event). The job's tool and its attempt come
 * first, so that a grep by either finds the line.
 */
static void log_end(const struct worker__run *r, const struct store_job *j)
{
	const json_t *err = r->final->req.u.transition.error;
	const char *code = json_string_value(json_object_get(err, "code"));
	int64_t in;

	if (!r->tool)
		return; /* wait_for_tool said why */
	switch (j->status) {
	case STORE_FAILED:
		log_warn("job %s (%s): failed on attempt %d of %d: %s", j->id,
			 j->tool, r->job->attempt, r->job->max_retries + 1,
			 error_message(err));
		break;
	case STORE_TIMED_OUT:
		log_warn("job %s (%s): timed out on attempt %d of %d: %s",
			 j->id, j->tool, r->job->attempt,
			 r->job->max_retries + 1, error_message(err));
		break;
	case STORE_PENDING:
		/* A job put back without an error (its tool is missing, its
		 * worker process went away) was logged where that was
		 * decided. */
		if (!err)
			break;
		in = j->run_at - store_now();
		log_info("job %s (%s): attempt %d of %d %s; retry in %lld ms: %s",
			 j->id, j->tool, r->job->attempt,
			 r->job->max_retries + 1,
			 code && strcmp(code, "timeout") == 0 ? "timed out"
							       : "failed",
			 (long long)(in > 0 ? in : 0), error_message(err));
		break;
	default:
		break;
	}
}

static void final_done(struct worker__op *op, int rc)
{
	struct worker__run *r = op->run;
	struct worker *w = op->w;
	const struct store_job *j = op->req.job;

	if (rc == 0 && j) {
		log_end(r, j);
		r->final = NULL;
		run_hooks(w, r->tool, j);
		/* A retry: the claim the released slot asked for may have
		 * run before this commit (the writer takes claims first) and
		 * not seen it, so it is claimed from here (now or at its
		 * run_at), and until a later claim comes back short nothing
		 * runs at its submission ahead of it. */
		if (j->status == STORE_PENDING)
			worker__sched_wakeup(w, j->run_at);
		/* A tool with a concurrency limit on a shared database: the
		 * same claim may have counted this run among the tool's
		 * running jobs (there the store counts them, pg.c) and left
		 * its next job pending, which no event asks for again; claim
		 * now that the run no longer counts. */
		else if (r->tool && r->tool->bg.concurrency > 0 &&
			 store_shared(w->st)) {
			worker__remote_wake(w, r->tool->id);
			worker__sched_kick(w);
		}
		if (j->status == STORE_SUSPENDED && j->expires_at)
			worker__expiry_rearm(w);
		run_set_done(r);
		worker__op_free(op);
		return;
	}
	if (rc == 0 || rc == STORE_ECONFLICT || rc == STORE_ENOTFOUND ||
	    w->stopping || r->state == WORKER__RUN_DONE) {
		/* Decided elsewhere, or given up at shutdown, where the job
		 * goes back to pending. A conflict is a cancel, or on a
		 * shared database a lost lease: another node recovered the
		 * job after this node's lease expired, and this node no
		 * longer owns it. The result is dropped (its hooks do not
		 * run) and the slot released. A run stopped by the event of
		 * that change (on_store_event) is done already and needs no
		 * word. */
		if (rc == STORE_ECONFLICT && r->state != WORKER__RUN_DONE)
			log_warn("job %s: its result is dropped: the "
				 "job is %s now (cancelled, or taken over by "
				 "another node after this node's lease "
				 "expired)",
				r->job->id,
				j ? store_status_name(j->status) : "changed");
		r->final = NULL;
		run_set_done(r);
		worker__op_free(op);
		return;
	}
	/* The store failed (a full disk, a locked database): the job stays
	 * running in the store, so keep trying rather than leave it there. */
	log_error("job %s: storing its result failed (%s); "
		  "trying again",
		r->job->id, strerror(-rc));
	store_req_finish(&op->req);
	final_submit(r);
}

static void final_retry_cb(uv_timer_t *h)
{
	struct worker__run *r = h->data;
	struct worker__op *op = r->final;

	if (!op || !r->final_waiting)
		return;
	r->final_waiting = false;
	if (worker__op_submit(op, final_done)) {
		r->final = NULL;
		run_set_done(r);
		worker__op_free(op);
	}
}

static void final_submit(struct worker__run *r)
{
	r->final_waiting = true;
	uv_timer_start(&r->timer, final_retry_cb, FINAL_RETRY_MS, 0);
}

static void progress_write(struct worker__run *r, json_t *progress);
static void run_oom(struct worker__run *r);

/* run_finish commits op, the run's final transition (from running). */
static void run_finish(struct worker__run *r, struct worker__op *op)
{
	uv_timer_stop(&r->timer);
	/* The last progress the tool reported may wait behind a write still
	 * in flight; queue it now, ahead of the final transition (the store
	 * commits in order), or the job keeps the one before it. */
	if (r->progress_next && r->w) {
		json_t *last = r->progress_next;

		r->progress_next = NULL;
		progress_write(r, last);
	}
	/* An answer of a worker process ends the run: recorded as its
	 * connection's principal, via "worker" (docs/API.md, the audit). */
	if (r->by_remote) {
		op->by_name = strdup(r->by_remote);
		op->by_via = strdup("worker");
		if (!op->by_name || !op->by_via) {
			worker__op_free(op);
			run_oom(r);
			return;
		}
		op->req.u.transition.by = op->by_name;
		op->req.u.transition.via = op->by_via;
	}
	r->state = WORKER__RUN_FINISHING;
	r->final = op;
	op->run = r;
	worker__run_ref(r);
	op->req.op = STORE_OP_TRANSITION;
	snprintf(op->req.u.transition.job_id,
		 sizeof(op->req.u.transition.job_id), "%s", r->job->id);
	op->req.u.transition.from_mask = STORE_MASK(STORE_RUNNING);
	if (worker__op_submit(op, final_done)) {
		r->final = NULL;
		run_set_done(r);
		worker__op_free(op);
		return;
	}
	run_maybe_end(r);
}

/* run_oom gives up on a run whose result cannot even be recorded; the
 * job stays running in the store until a restart recovers it. */
static void run_oom(struct worker__run *r)
{
	log_error("job %s: out of memory recording its result",
		r->job->id);
	worker__run_abort(r, WORKER__ABORT_SHUTDOWN);
	run_set_done(r);
}

/*
 * stage_view sets, for a job of a worker process's tool, the views op's
 * final transition stores (those stored with the job, and those of the
 * answer: the stage `which` of its outcome when the worker answered with
 * one, and the pending stages the run asked for), and returns the display
 * view of payload for its event: NULL while it is still to come, so that
 * the event carries nothing of it. For any other tool it returns the
 * display view by the tool's transform.
 */
static json_t *stage_view(struct worker__run *r, struct worker__op *op,
			  int which, const json_t *payload)
{
	struct store_transition *tr = &op->req.u.transition;
	const struct worker_tool *t = r->tool;
	unsigned stages = 0;
	json_t *views;

	if (!t || !t->definition)
		return worker__view(t, WORKER_VIEW_DISPLAY, which, payload);
	/* A tool that transforms nothing stores no views. */
	if (!t->view_declared[0] && !t->view_declared[1] && !r->job->views)
		return json_incref((json_t *)payload);
	if (r->answered) {
		stages = r->asked;
		/* An error berthd made (a timeout, a schema failure) keeps
		 * the views stored for the worker's last error, which
		 * errorOf then tells apart from it. */
		if (which != BERTH_PAYLOAD_ERROR || r->worker_error)
			stages |= 1u << which;
	}
	views = worker__views_merge(t, r->job->views, r->fresh, stages,
				    which == BERTH_PAYLOAD_ERROR ? payload : NULL,
				    r->answered && r->asked_hook ? 0 : -1);
	op->own[4] = tr->views = views;
	tr->set |= STORE_SET_VIEWS;
	return worker__stored_view(t, views, WORKER_VIEW_DISPLAY, which,
				   payload);
}

/* run_fail ends the run with error (stolen): a retry while tries are
 * left and the error is retryable, else failed (or timed_out). */
static void run_fail(struct worker__run *r, json_t *error, bool retryable,
		     bool timed_out)
{
	struct worker *w = r->w;
	const struct store_job *j = r->job;
	struct worker__op *op = worker__op_new(w, NULL, NULL);
	struct store_transition *tr;
	json_t *view;

	if (!op) {
		json_decref(error);
		run_oom(r);
		return;
	}
	tr = &op->req.u.transition;
	op->own[0] = error;
	view = stage_view(r, op, BERTH_PAYLOAD_ERROR, error);
	tr->error = error;
	tr->set |= STORE_SET_ERROR;
	if (retryable && j->attempt <= j->max_retries) {
		int64_t base = r->tool ? r->tool->bg.backoff_ms : 0;
		int64_t max = r->tool ? r->tool->bg.backoff_max_ms : 0;
		char at[32];

		tr->to = STORE_PENDING;
		tr->event = STORE_EV_RETRYING;
		tr->set |= STORE_SET_RUN_AT | STORE_SET_ATTEMPT;
		tr->run_at = store_now() + worker__backoff_ms(j->attempt, base,
							      max,
							      worker__random());
		tr->attempt = j->attempt + 1;
		tr->event_data = json_pack(
			"{s:i, s:s, s:s, s:o?}", "attempt", tr->attempt,
			"runAt", store_format_time(tr->run_at, at), "reason",
			timed_out ? "timeout" : "error", "error", view);
	} else {
		tr->to = timed_out ? STORE_TIMED_OUT : STORE_FAILED;
		tr->event = timed_out ? STORE_EV_TIMED_OUT : STORE_EV_FAILED;
		tr->event_data = view;
	}
	op->own[1] = tr->event_data;
	run_finish(r, op);
}

/* error_json returns a new {"message", "code", "data"?} (data stolen). */
static json_t *error_json(const char *code, json_t *data, const char *fmt,
			  ...) __attribute__((format(printf, 3, 4)));
static json_t *error_json(const char *code, json_t *data, const char *fmt,
			  ...)
{
	va_list ap;
	char *msg, *text = NULL;
	json_t *e;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	/* A message may quote what a tool printed: made UTF-8, or jansson
	 * would refuse it and the job would fail with no error at all. */
	if (msg)
		text = berth_utf8_repair(msg, strlen(msg));
	e = json_pack("{s:s, s:s, s:o*}", "message", text ? text : code, "code",
		      code, "data", data);
	free(msg);
	free(text);
	return e;
}

static void timeout_cb(uv_timer_t *h)
{
	struct worker__run *r = h->data;
	int64_t ms = r->job->timeout_ms > 0 ? r->job->timeout_ms
					    : r->w->cfg.default_timeout_ms;
	json_t *error;

	if (r->state != WORKER__RUN_ACTIVE)
		return;
	error = error_json("timeout", NULL, "timed out after %lld ms",
			   (long long)ms);
	worker__run_abort(r, WORKER__ABORT_TIMEOUT);
	/* A process, or a worker process's run, ends the try once it is
	 * gone (worker__run_exec_ended): after SIGTERM, and SIGKILL at the
	 * kill grace, or the worker's answer to its abort, or the grace.
	 * Its retry, or timed_out, must not come while it still runs. A C
	 * tool cannot be stopped: its try ends now. */
	if (!r->c && r->exec_started && !r->exec_done && !r->w->now) {
		r->timed_out = error;
		return;
	}
	run_fail(r, error, true, true);
}

/*
 * A job's timeout is the time its tool gets to run (createTool's
 * background.timeoutMs, as its users read it), so it starts when the tool
 * does, whatever the tool waited for before: a thread for a C tool, the
 * creation's commit for a run started by it, a spawner's thread and the
 * kernel's exec for a process. A run that has ended, or was told to abort,
 * gets none: its job's fate is decided, and its timer may hold the final
 * transition's retry by then.
 */
void worker__run_arm_timeout(struct worker__run *r)
{
	int64_t ms;

	if (!r->w || r->state != WORKER__RUN_ACTIVE ||
	    r->abort_reason != WORKER__ABORT_NONE)
		return;
	ms = r->job->timeout_ms > 0 ? r->job->timeout_ms
				    : r->w->cfg.default_timeout_ms;
	uv_timer_start(&r->timer, timeout_cb, (uint64_t)ms, 0);
}

/*
 * start_timeout_cb: r's process has not started within the start timeout.
 * Nothing bounds the wait otherwise: a start waits for the starts queued
 * ahead of it, and an exec the kernel holds up (a hung filesystem) holds
 * its thread of the spawner for as long, which no signal can shorten. The
 * try fails with "start_timeout", retried while tries are left (the tool
 * never ran, and the next try may start at once; one that always hangs
 * ends the job once its tries are spent). The start is no longer wanted:
 * one not begun is not made, and a process that starts later is stopped
 * at once (proc.c, spawned); until then it keeps its slot.
 */
static void start_timeout_cb(uv_timer_t *h)
{
	struct worker__run *r = h->data;
	long long ms = (long long)r->w->cfg.start_timeout_ms;
	const char *program = r->tool->cmd->argv[0];
	bool exec;
	char why[PATH_MAX + 160];
	json_t *error;

	/* A cancel or a shutdown decided the run already; the start it no
	 * longer wants is being given up. */
	if (r->state != WORKER__RUN_ACTIVE ||
	    r->abort_reason != WORKER__ABORT_NONE)
		return;
	exec = r->proc && worker__proc_exec_begun(r->proc);
	if (exec)
		snprintf(why, sizeof why, "the exec of %s had not returned (the "
			 "kernel held it up: a slow or hung filesystem?)",
			 program);
	else
		snprintf(why, sizeof why, "it was still waiting behind the "
			 "starts of other processes, which were slow (berthd "
			 "makes %d at a time)", WORKER__SPAWN_THREADS);
	error = error_json("start_timeout",
			   json_pack("{s:I, s:s, s:s}", "startTimeoutMs",
				     (json_int_t)ms, "stage",
				     exec ? "exec" : "queue", "program",
				     program),
			   "tool %s did not start within %lld ms: %s",
			   r->job->tool, ms, why);
	worker__run_abort(r, WORKER__ABORT_TIMEOUT);
	run_fail(r, error, true, false);
}

void worker__run_arm_start(struct worker__run *r)
{
	uv_timer_start(&r->timer, start_timeout_cb,
		       (uint64_t)r->w->cfg.start_timeout_ms, 0);
}

/* ---- outcomes --------------------------------------------------------- */

static void complete(struct worker__run *r, json_t *output,
		     json_t *model_output)
{
	const struct worker_tool *t = r->tool;
	struct worker__op *op = worker__op_new(r->w, NULL, NULL);
	struct store_transition *tr;

	if (!op) {
		json_decref(output);
		json_decref(model_output);
		run_oom(r);
		return;
	}
	if (!model_output && t->c && t->c->to_model_output)
		model_output = t->c->to_model_output(output, t->c->data);
	tr = &op->req.u.transition;
	op->own[0] = tr->output = output;
	op->own[1] = tr->model_output = model_output;
	op->own[2] = tr->event_data =
		stage_view(r, op, BERTH_PAYLOAD_OUTPUT, output);
	tr->to = STORE_COMPLETED;
	tr->event = STORE_EV_COMPLETED;
	/* An earlier attempt's error ends with the job's success (its
	 * retrying event keeps it): error NULL. */
	tr->set |= STORE_SET_OUTPUT | STORE_SET_ERROR;
	run_finish(r, op);
}

static void suspend(struct worker__run *r, json_t *payload)
{
	struct worker__op *op = worker__op_new(r->w, NULL, NULL);
	struct store_transition *tr;

	if (!op) {
		json_decref(payload);
		run_oom(r);
		return;
	}
	tr = &op->req.u.transition;
	op->own[0] = tr->suspend_payload = payload;
	op->own[1] = tr->event_data =
		stage_view(r, op, BERTH_PAYLOAD_SUSPEND, payload);
	tr->to = STORE_SUSPENDED;
	tr->event = STORE_EV_SUSPENDED;
	tr->set |= STORE_SET_SUSPEND | STORE_SET_EXPIRES_AT;
	tr->expires_at = r->job->ttl_ms > 0 ? store_now() + r->job->ttl_ms : 0;
	run_finish(r, op);
}

void worker__run_outcome(struct worker__run *r, struct berth_outcome *o)
{
	json_t *errors = NULL, *filled = NULL;
	json_t *v = o->value;

	if (!r->w || r->state != WORKER__RUN_ACTIVE ||
	    r->abort_reason != WORKER__ABORT_NONE) {
		worker__outcome_finish(o);
		if (r->w && r->state == WORKER__RUN_ACTIVE &&
		    r->abort_reason == WORKER__ABORT_SHUTDOWN)
			run_set_done(r);
		return;
	}
	o->value = NULL;
	/* An output and a suspend payload are kept as a Zod parse of them
	 * gives them back: with their schema's defaults filled in. */
	switch (o->kind) {
	case BERTH_OUTPUT:
		if (worker__check(r->tool, WORKER_SCHEMA_OUTPUT, v, &filled,
				  &errors)) {
			run_fail(r,
				 error_json("invalid_output",
					    json_pack("{s:o}", "errors", errors),
					    "the output of tool %s does not "
					    "match its outputSchema",
					    r->job->tool),
				 false, false);
			json_decref(v);
			break;
		}
		json_decref(v);
		complete(r, filled, o->model_output);
		o->model_output = NULL;
		break;
	case BERTH_SUSPEND:
		if (worker__check(r->tool, WORKER_SCHEMA_SUSPEND, v, &filled,
				  &errors)) {
			run_fail(r,
				 error_json("invalid_suspend",
					    json_pack("{s:o}", "errors", errors),
					    "the suspend payload of tool %s "
					    "does not match its suspendSchema",
					    r->job->tool),
				 false, false);
			json_decref(v);
			break;
		}
		json_decref(v);
		suspend(r, filled);
		break;
	case BERTH_ERROR:
		/* A worker process names its error's code; every other
		 * tool's is tool_error. */
		run_fail(r,
			 error_json(r->code ? r->code : "tool_error", v, "%s",
				    o->message ? o->message : "execute failed"),
			 o->retryable, false);
		break;
	default:
		json_decref(v);
		run_fail(r,
			 error_json("internal", NULL,
				    "tool %s returned an outcome of unknown "
				    "kind %d",
				    r->job->tool, (int)o->kind),
			 false, false);
		break;
	}
	worker__outcome_finish(o);
}

void worker__run_exec_ended(struct worker__run *r)
{
	r->exec_done = true;
	if (!r->w)
		return;
	/* A timeout waited for the executor to be gone. */
	if (r->state == WORKER__RUN_ACTIVE && !worker__run_end_timed_out(r)) {
		if (r->abort_reason != WORKER__ABORT_NONE)
			/* A shutdown's, which puts the job back. */
			run_set_done(r);
		else
			run_fail(r,
				 error_json("internal", NULL,
					    "tool %s ended without an outcome",
					    r->job->tool),
				 false, false);
	}
	run_maybe_end(r);
}

/* ---- start ------------------------------------------------------------ */

/* prepare fills r's input and resume data with their schemas' defaults
 * (the request context is prepared with its check). Returns 0 or
 * -ENOMEM. */
static int prepare(struct worker__run *r)
{
	const struct store_job *j = r->job;
	json_t *in = j->input ? json_incref(j->input) : json_object();

	r->p_input = worker__with_defaults(r->tool, WORKER_SCHEMA_INPUT, in);
	json_decref(in);
	if (j->resume_data)
		r->p_resume = worker__with_defaults(r->tool,
						    WORKER_SCHEMA_RESUME,
						    j->resume_data);
	return r->p_input && (r->p_resume || !j->resume_data) ? 0 : -ENOMEM;
}

void worker__run_put_back(struct worker__run *r, const char *reason)
{
	struct worker__op *op = worker__op_new(r->w, NULL, NULL);
	struct store_transition *tr;

	if (!op) {
		run_oom(r);
		return;
	}
	tr = &op->req.u.transition;
	op->own[0] = tr->event_data = json_pack("{s:s}", "reason", reason);
	tr->to = STORE_PENDING;
	tr->event = STORE_EV_RETRYING;
	tr->set = STORE_SET_RUN_AT;
	tr->run_at = store_now();
	run_finish(r, op);
}

/*
 * wait_for_tool puts back a claimed job whose tool this berthd does not
 * have: removed by a reload of --tools (its jobs are left out of claims
 * from then on, but one may have been claimed just before), gone after a
 * restart, or, on a shared database, a tool of other nodes. Its job goes
 * back to pending with its attempt unchanged (it did not run), and the
 * tool's jobs are left out of this node's claims until a tool of that
 * name is registered again; a node that has the tool takes them.
 */
static void wait_for_tool(struct worker__run *r)
{
	worker__tool_missing(r->w, r->job->tool);
	log_info("job %s (%s): no tool of that name is registered here; the "
		 "job waits for one (a reload of --tools that brings it back "
		 "runs it)",
		 r->job->id, r->job->tool);
	worker__run_put_back(r, "tool_missing");
}

bool worker__interrupt_retry(const struct worker__run *r,
			     struct worker__op *op)
{
	const struct store_job *j = r->job;
	struct store_transition *tr = &op->req.u.transition;

	if (!r->tool || r->tool->bg.on_interrupt != BERTH_INTERRUPT_RETRY ||
	    j->attempt >= store_interrupted_tries(j->max_retries))
		return false;
	tr->to = STORE_PENDING;
	tr->event = STORE_EV_RETRYING;
	op->own[0] = tr->event_data = json_pack("{s:s}", "reason",
						"interrupted");
	tr->set = STORE_SET_RUN_AT | STORE_SET_ATTEMPT;
	tr->run_at = store_now();
	tr->attempt = j->attempt + 1;
	return true;
}

void worker__run_interrupted(struct worker__run *r, const char *why)
{
	const struct store_job *j = r->job;
	struct worker__op *op;
	struct store_transition *tr;

	if (!r->w || r->state != WORKER__RUN_ACTIVE)
		return;
	atomic_store(&r->aborted, true);
	if (!(op = worker__op_new(r->w, NULL, NULL))) {
		run_oom(r);
		return;
	}
	tr = &op->req.u.transition;
	if (worker__interrupt_retry(r, op)) {
		log_warn("job %s (%s): its worker process went away (%s); "
			 "attempt %d of %d is interrupted, and the job runs "
			 "again (onInterrupt retry)",
			 j->id, j->tool, why, j->attempt,
			 store_interrupted_tries(j->max_retries));
	} else {
		op->own[0] = tr->error = json_pack(
			"{s:s+++, s:s}", "message",
			"interrupted: the worker process running it went away (",
			why, ")",
			r->tool && r->tool->bg.on_interrupt ==
					   BERTH_INTERRUPT_FAIL
				? "; its tool must not run again after an "
				  "interruption (onInterrupt fail)"
				: "; no retry was left",
			"code", "interrupted");
		op->own[1] = tr->event_data =
			stage_view(r, op, BERTH_PAYLOAD_ERROR, tr->error);
		tr->to = STORE_FAILED;
		tr->event = STORE_EV_FAILED;
		tr->set |= STORE_SET_ERROR;
	}
	run_finish(r, op);
}

static void run_exec(struct worker__run *r);

void worker__run_push(struct worker__run *r)
{
	if (!r->held || !r->w || r->state != WORKER__RUN_ACTIVE)
		return;
	r->held = false;
	/* Stopped before it was pushed (a shutdown): its job stays running,
	 * and the shutdown puts it back. */
	if (r->abort_reason != WORKER__ABORT_NONE) {
		run_set_done(r);
		return;
	}
	run_exec(r);
}

static void run_start(struct worker *w, struct store_job *job, bool held);

/* fail_start fails r's run, which never began: its tool could not be
 * started, for why ("start_failed", not retryable). */
static void fail_start(struct worker__run *r, const char *why)
{
	run_fail(r,
		 error_json("start_failed", NULL,
			    "tool %s could not be started: %s", r->job->tool,
			    why),
		 false, false);
}

void worker__run_start(struct worker *w, struct store_job *job)
{
	run_start(w, job, false);
}

void worker__run_start_held(struct worker *w, struct store_job *job)
{
	run_start(w, job, true);
}

static void run_start(struct worker *w, struct store_job *job, bool held)
{
	struct worker__run *r = calloc(1, sizeof(*r));
	json_t *errors = NULL;
	int rc;

	if (!r) {
		/* The job stays running until a restart recovers it. */
		log_error("job %s: out of memory starting it",
			job->id);
		store_job_free(job);
		return;
	}
	atomic_init(&r->refs, 1);
	atomic_init(&r->aborted, false);
	r->w = w;
	r->job = job;
	r->tool = worker__tool_find(w, job->tool);
	worker__tool_ref(r->tool);
	r->ctx.run = r;
	r->slot_held = true;
	/* A worker process's run takes room of its own (remote.c), not one
	 * of the slots. */
	r->slot = !r->tool || !r->tool->definition;
	if (r->slot)
		w->busy++;
	if (r->tool)
		r->tool->running++;
	r->thread_slot = r->tool && worker__tool_uses_thread(r->tool);
	if (r->thread_slot)
		w->threads_busy++;
	list(w, r);
	uv_timer_init(w->loop, &r->timer);
	r->timer.data = r;

	if (!r->tool) {
		wait_for_tool(r);
		return;
	}
	/* Checked at submission (ops.c) and again here, before each run:
	 * the tool may have been given another schema since (a restart on
	 * changed manifests). */
	if (r->tool->schema[WORKER_SCHEMA_REQUEST_CONTEXT]) {
		json_t *rc0 = job->request_context ? json_incref(job->request_context)
						   : json_object();

		rc = worker__check(r->tool, WORKER_SCHEMA_REQUEST_CONTEXT, rc0,
				   &r->p_rc, &errors);
		json_decref(rc0);
		if (rc) {
			run_fail(r,
				 error_json("invalid_request_context",
					    json_pack("{s:o}", "errors", errors),
					    "the requestContext does not match "
					    "the requestContextSchema of tool "
					    "%s",
					    job->tool),
				 false, false);
			return;
		}
	} else if (job->request_context) {
		r->p_rc = json_incref(job->request_context);
	}
	if (prepare(r)) {
		fail_start(r, "out of memory");
		return;
	}
	/* Its timeout starts with its tool (run_exec), not here: a held run
	 * waits for its creation's commit first. */
	if (held) {
		r->held = true;
		return;
	}
	run_exec(r);
}

void worker__run_start_failed(struct worker__run *r, const char *why)
{
	if (!r->w || r->state != WORKER__RUN_ACTIVE)
		return;
	fail_start(r, why);
}

/* run_exec hands r to its executor: the worker process it was claimed
 * for, a thread or the loop (a C tool), or a process of its own. */
static void run_exec(struct worker__run *r)
{
	char *why = NULL;
	int rc;

	if (r->tool->definition) {
		rc = worker__remote_start(r);
		/* Claimed for a connection that has gone since. */
		if (rc == -EAGAIN) {
			worker__run_put_back(r, "no_worker");
			return;
		}
	} else if (r->tool->c) {
		r->c = r->tool->c;
		/* At once; a run that has to wait for a thread stops it until
		 * one takes it (exec.c). */
		worker__run_arm_timeout(r);
		rc = worker__exec_start(r);
	} else {
		/* Until its process has started (proc.c, spawned). */
		worker__run_arm_start(r);
		rc = worker__proc_start(r, &why);
	}
	if (rc) {
		fail_start(r, why ? why : strerror(-rc));
		free(why);
	}
}

/* ---- messages of a running tool --------------------------------------- */

static void progress_done(struct worker__op *op, int rc);

static void progress_write(struct worker__run *r, json_t *progress)
{
	struct worker__op *op = worker__op_new(r->w, NULL, NULL);

	if (!op) {
		json_decref(progress);
		return;
	}
	op->run = r;
	worker__run_ref(r);
	op->own[0] = progress;
	op->req.op = STORE_OP_PROGRESS;
	snprintf(op->req.u.progress.job_id, sizeof(op->req.u.progress.job_id),
		 "%s", r->job->id);
	op->req.u.progress.progress = progress;
	r->progress_writing = true;
	if (worker__op_submit(op, progress_done)) {
		r->progress_writing = false;
		worker__op_free(op);
	}
}

static void progress_done(struct worker__op *op, int rc)
{
	struct worker__run *r = op->run;
	json_t *next = r->progress_next;

	r->progress_writing = false;
	r->progress_next = NULL;
	if (next && r->w && r->state == WORKER__RUN_ACTIVE)
		progress_write(r, next);
	else
		json_decref(next);
	worker__op_free(op);
}

void worker__run_progress(struct worker__run *r, json_t *progress)
{
	if (!r->w || r->state != WORKER__RUN_ACTIVE) {
		json_decref(progress);
		return;
	}
	worker__progress(r->w, r->job, progress);
	/* One write in flight; newer values wait and replace each other. */
	if (r->progress_writing) {
		json_decref(r->progress_next);
		r->progress_next = progress;
		return;
	}
	progress_write(r, progress);
}

void worker__run_log_full(struct worker__run *r)
{
	const struct worker_config *cfg = &r->w->cfg;

	if (r->log_capped)
		return;
	r->log_capped = true;
	worker__job_log(r->w, r->job->id, "warn", NULL,
			"the log of this run is full (it keeps %lld bytes and "
			"%lld lines a run); the rest of it is dropped",
			(long long)cfg->max_log_bytes,
			(long long)cfg->max_log_lines);
}

void worker__run_log(struct worker__run *r, const char *level,
		     const char *message, const json_t *data)
{
	int64_t n;

	if (!r->w || r->log_capped)
		return;
	if (!message)
		message = "";
	n = (int64_t)strlen(message) +
	    (data ? (int64_t)json_dumpb(data, NULL, 0, JSON_COMPACT) : 0);
	/* The note is the last of max_log_lines lines: the store, which
	 * keeps the newest max_log_lines of a job, drops none of this run's
	 * for it. */
	if (r->log_bytes + n > r->w->cfg.max_log_bytes ||
	    r->log_lines >= r->w->cfg.max_log_lines - 1) {
		worker__run_log_full(r);
		return;
	}
	r->log_bytes += n;
	r->log_lines++;
	worker__job_log(r->w, r->job->id, level, data, "%s", message);
}

static void checkpoint_done(struct worker__op *op, int rc)
{
	if (op->wait)
		worker__hub_complete(op->run->hub, op->wait, rc);
	worker__op_free(op);
}

void worker__run_checkpoint(struct worker__run *r, json_t *value,
			    struct worker__wait *wait)
{
	struct worker__op *op;

	if (!r->w || r->state != WORKER__RUN_ACTIVE ||
	    !(op = worker__op_new(r->w, NULL, NULL))) {
		json_decref(value);
		if (wait)
			worker__hub_complete(r->hub, wait, -ECANCELED);
		return;
	}
	op->run = r;
	worker__run_ref(r);
	op->wait = wait;
	op->own[0] = value;
	op->req.op = STORE_OP_CHECKPOINT;
	snprintf(op->req.u.checkpoint.job_id,
		 sizeof(op->req.u.checkpoint.job_id), "%s", r->job->id);
	op->req.u.checkpoint.value = value;
	if (worker__op_submit(op, checkpoint_done)) {
		if (wait)
			worker__hub_complete(r->hub, wait, -ESHUTDOWN);
		op->wait = NULL;
		worker__op_free(op);
	}
}

/*
 * exec.c: C tools. execute runs on the libuv thread pool (uv_queue_work),
 * or, for a nonblocking tool, on the loop thread from the worker's idle
 * handle; the built-in sleep waits on a timer of the loop instead. Its context reaches the loop thread through the hub (worker.c):
 * progress is coalesced, log lines are queued, and a checkpoint blocks the
 * pool thread on the hub's condition variable until the store has
 * committed it, so that "returns once it is committed" holds.
 *
 * The pool thread reads only the run's deep copies (x_*), its job's id,
 * tool, attempt, tool call id and run id, which never change while the
 * run exists, and the atomic abort flag.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/builtin.h"
#include "worker/internal.h"

static void work_cb(uv_work_t *req)
{
	struct worker__run *r = req->data;

	r->outcome = r->c->execute(r->x_input, &r->ctx, r->c->data);
}

/* exec_end hands r's outcome to the run, on the loop thread. */
static void exec_end(struct worker__run *r)
{
	struct berth_outcome o = r->outcome;

	memset(&r->outcome, 0, sizeof(r->outcome));
	/* What execute reported before it returned (progress, logs) comes
	 * before its outcome: libuv may run this callback before the hub's
	 * async callback. */
	if (r->w)
		worker__hub_drain(r->w);
	if (r->w)
		worker__run_outcome(r, &o);
	else
		worker__outcome_finish(&o);
	worker__run_exec_ended(r);
	worker__run_unref(r);
}

static void pump(struct worker *w);

static void after_work_cb(uv_work_t *req, int status)
{
	struct worker__run *r = req->data;
	struct worker *w = r->w; /* NULL: detached at shutdown */

	if (w)
		w->threads_running--;
	exec_end(r);
	if (w)
		pump(w);
}

void worker__exec_inline(struct worker *w)
{
	struct worker__run *list = w->inline_head;

	w->inline_head = w->inline_tail = NULL;
	while (list) {
		struct worker__run *r = list;

		list = r->inline_next;
		r->inline_next = NULL;
		/* A queued run aborted before it had a thread has its
		 * outcome already (unrun). */
		if (!r->exec_unrun)
			work_cb(&r->work);
		exec_end(r);
	}
}

/* queue_inline queues r for worker__exec_inline: from the idle handle, so
 * that the outcome never arrives before worker__exec_start returned. */
static void queue_inline(struct worker__run *r)
{
	struct worker *w = r->w;

	if (w->inline_tail)
		w->inline_tail->inline_next = r;
	else
		w->inline_head = r;
	w->inline_tail = r;
	worker__idle_kick(w);
}

/* ---- the threads ------------------------------------------------------ */

/*
 * At most cfg.threads executions run on the pool at once (berthd
 * --threads): the pool's other threads are for filesystem requests and
 * for tools that ignore their abort. Claims take more of these jobs
 * (sched.c's in_hand), so that a thread that frees finds its next job at
 * hand instead of behind a claim's commit: the rest wait here, in the
 * order they were claimed, running in the store, with their timeout not
 * yet started.
 */

/* unrun ends r, a queued run that was aborted, without calling execute;
 * on the next loop turn, as an abort's caller expects. */
static void unrun(struct worker__run *r)
{
	r->outcome = berth_error(false, NULL,
				 "aborted before a thread was free to run it");
	r->exec_unrun = true;
	queue_inline(r);
}

/* on_thread hands r's execution to the pool. */
static int on_thread(struct worker__run *r)
{
	int rc = uv_queue_work(r->w->loop, &r->work, work_cb, after_work_cb);

	if (rc == 0)
		r->w->threads_running++;
	return rc;
}

/* pump gives the threads that are free to the runs that wait for one. */
static void pump(struct worker *w)
{
	if (w->stopping) {
		/* A shutdown starts no execution; worker_shutdown put those
		 * waiting back already. */
		worker__exec_stop_queued(w);
		return;
	}
	while (w->queued_head && (w->cfg.threads <= 0 ||
				  w->threads_running < w->cfg.threads)) {
		struct worker__run *r = w->queued_head;
		int rc;

		w->queued_head = r->queued_next;
		if (!w->queued_head)
			w->queued_tail = NULL;
		r->queued_next = NULL;
		r->queued = false;
		worker__run_arm_timeout(r);
		if ((rc = on_thread(r)) != 0) {
			r->outcome = berth_error(false, NULL,
						 "no thread could run it: %s",
						 uv_strerror(rc));
			r->exec_unrun = true;
			queue_inline(r);
		}
	}
}

void worker__exec_stop_queued(struct worker *w)
{
	while (w->queued_head)
		worker__run_abort(w->queued_head, WORKER__ABORT_SHUTDOWN);
}

/* dequeue takes r out of the runs that wait for a thread. */
static void dequeue(struct worker__run *r)
{
	struct worker *w = r->w;
	struct worker__run **pp = &w->queued_head, *prev = NULL;

	while (*pp && *pp != r) {
		prev = *pp;
		pp = &(*pp)->queued_next;
	}
	if (!*pp)
		return;
	*pp = r->queued_next;
	if (w->queued_tail == r)
		w->queued_tail = prev;
	r->queued_next = NULL;
	r->queued = false;
}

/* copy returns a deep copy of v, or NULL for NULL; *ok turns false when
 * memory ran out. */
static json_t *copy(const json_t *v, bool *ok)
{
	json_t *c;

	if (!v)
		return NULL;
	c = json_deep_copy(v);
	if (!c)
		*ok = false;
	return c;
}

/* ---- the built-in sleep, on a timer ------------------------------------- */

/*
 * The built-in sleep only waits. Its execute on a thread would hold the
 * thread for the whole wait and wake every 10 ms to look at its abort
 * flag; berthd waits on a timer of the loop instead, reporting progress
 * about every 100 ms as execute does, and an abort (a cancel, a timeout, a
 * shutdown) ends the wait on the next loop turn. A sleep so takes a slot of
 * --workers and no thread, and thousands may wait at once.
 */
enum { WAIT_REPORT_MS = 100 };

static void wait_closed(uv_handle_t *h)
{
	worker__run_unref(h->data);
}

static void wait_cb(uv_timer_t *h)
{
	struct worker__run *r = h->data;
	int64_t slept = (int64_t)uv_now(h->loop) - r->wait_from;
	bool aborted = atomic_load(&r->aborted);

	if (slept > r->wait_ms)
		slept = r->wait_ms;
	if (!aborted && slept < r->wait_ms) {
		int64_t left = r->wait_ms - slept;

		berth_ctx_progress(&r->ctx, (double)slept, (double)r->wait_ms,
				   "sleeping");
		uv_timer_start(&r->wait, wait_cb,
			       (uint64_t)(left < WAIT_REPORT_MS ? left
							       : WAIT_REPORT_MS),
			       0);
		return;
	}
	r->waiting = false;
	uv_close((uv_handle_t *)&r->wait, wait_closed);
	if (aborted && slept < r->wait_ms)
		r->outcome = berth_error(false, NULL, "aborted after %lld ms",
					 (long long)slept);
	else
		r->outcome = berth_output(json_pack("{s:I}", "slept",
						    (json_int_t)r->wait_ms));
	exec_end(r);
}

/* wait_start starts the built-in sleep's wait for its input's ms (an
 * integer >= 0: its inputSchema). */
static int wait_start(struct worker__run *r)
{
	json_int_t ms = json_integer_value(json_object_get(r->p_input, "ms"));
	int rc = uv_timer_init(r->w->loop, &r->wait);

	if (rc)
		return rc;
	r->wait.data = r;
	r->wait_ms = ms > 0 ? ms : 0;
	r->wait_from = (int64_t)uv_now(r->w->loop);
	r->hub = worker__hub_ref(r->w->hub);
	r->exec_started = true;
	r->waiting = true;
	worker__run_ref(r); /* the execution's: exec_end drops it */
	worker__run_ref(r); /* the timer's: wait_closed drops it */
	uv_timer_start(&r->wait, wait_cb,
		       (uint64_t)(r->wait_ms < WAIT_REPORT_MS ? r->wait_ms
							      : WAIT_REPORT_MS),
		       0);
	return 0;
}

void worker__exec_abort(struct worker__run *r)
{
	/* On the next loop turn: the caller of an abort does not expect the
	 * outcome inside it. */
	if (r->waiting)
		uv_timer_start(&r->wait, wait_cb, 0, 0);
	if (r->queued) {
		dequeue(r);
		unrun(r);
	}
}

int worker__exec_start(struct worker__run *r)
{
	const struct store_job *j = r->job;
	bool ok = true;
	int rc;

	if (worker__builtin_is_sleep(r->c))
		return wait_start(r);

	/* The input, request context and resume data are the run's
	 * prepared values (worker__run_start: defaults filled in). */
	r->exec_inline = r->c->nonblocking;
	if (r->exec_inline) {
		/* Read on the loop thread while the job cannot change. */
		r->x_input = json_incref(r->p_input);
		r->x_rc = json_incref(r->p_rc);
		r->x_resume = json_incref(r->p_resume);
		r->x_suspend = json_incref(j->suspend_payload);
		r->x_checkpoint = json_incref(j->checkpoint);
		r->x_metadata = json_incref(j->metadata);
	} else {
		r->x_input = copy(r->p_input, &ok);
		r->x_rc = copy(r->p_rc, &ok);
		r->x_resume = copy(r->p_resume, &ok);
		r->x_suspend = copy(j->suspend_payload, &ok);
		r->x_checkpoint = copy(j->checkpoint, &ok);
		r->x_metadata = copy(j->metadata, &ok);
	}
	if (!ok || !r->x_input)
		return -ENOMEM;
	r->hub = worker__hub_ref(r->w->hub);
	r->work.data = r;
	worker__run_ref(r);
	r->exec_started = true;
	if (r->exec_inline) {
		queue_inline(r);
		return 0;
	}
	if (r->w->cfg.threads > 0 &&
	    r->w->threads_running >= r->w->cfg.threads) {
		/* Its timeout starts with its execution (pump). */
		uv_timer_stop(&r->timer);
		r->queued = true;
		if (r->w->queued_tail)
			r->w->queued_tail->queued_next = r;
		else
			r->w->queued_head = r;
		r->w->queued_tail = r;
		return 0;
	}
	rc = on_thread(r);
	if (rc) {
		r->exec_started = false;
		worker__run_unref(r);
		return rc;
	}
	return 0;
}

/* ---- the context (pool thread) ---------------------------------------- */

const char *berth_ctx_job_id(const struct berth_ctx *ctx)
{
	return ctx->run->job->id;
}

const char *berth_ctx_tool(const struct berth_ctx *ctx)
{
	return ctx->run->job->tool;
}

int berth_ctx_attempt(const struct berth_ctx *ctx)
{
	return ctx->run->job->attempt;
}

const char *berth_ctx_tool_call_id(const struct berth_ctx *ctx)
{
	return ctx->run->job->tool_call_id;
}

const char *berth_ctx_run_id(const struct berth_ctx *ctx)
{
	return ctx->run->job->run_id;
}

const json_t *berth_ctx_metadata(const struct berth_ctx *ctx)
{
	return ctx->run->x_metadata;
}

const json_t *berth_ctx_mcp_meta(const struct berth_ctx *ctx)
{
	return json_object_get(json_object_get(ctx->run->x_metadata,
					       WORKER__MCP_META), "_meta");
}

const json_t *berth_ctx_request_context(const struct berth_ctx *ctx)
{
	return ctx->run->x_rc;
}

const json_t *berth_ctx_resume_data(const struct berth_ctx *ctx)
{
	return ctx->run->x_resume;
}

const json_t *berth_ctx_suspend_payload(const struct berth_ctx *ctx)
{
	return ctx->run->x_suspend;
}

const json_t *berth_ctx_checkpoint(const struct berth_ctx *ctx)
{
	return ctx->run->x_checkpoint;
}

bool berth_ctx_aborted(const struct berth_ctx *ctx)
{
	return atomic_load(&ctx->run->aborted);
}

/* post queues a message of r for the loop thread; it holds a reference to
 * r until the loop has handled it. Returns false when the hub is closed
 * (the message is freed). */
static bool post(struct worker__run *r, struct worker__msg *m)
{
	m->run = r;
	worker__run_ref(r);
	if (worker__hub_post(r->hub, m))
		return true;
	/* The hub is closed, so the loop is no longer reading; this is the
	 * last use of r's reference here and the loop holds others (the
	 * work request), so dropping it cannot free r on this thread. */
	atomic_fetch_sub(&r->refs, 1);
	json_decref(m->value);
	free(m->level);
	free(m->message);
	free(m);
	return false;
}

int berth_ctx_save_checkpoint(struct berth_ctx *ctx, const json_t *value)
{
	struct worker__run *r = ctx->run;
	struct worker__hub *h = r->hub;
	struct worker__wait wait = {0};
	struct worker__msg *m;
	int rc;

	if (atomic_load(&r->aborted))
		return -ECANCELED;
	if (r->exec_inline)
		return -ENOTSUP; /* the loop thread cannot wait for itself */
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->kind = WORKER__MSG_CHECKPOINT;
	m->value = value ? json_deep_copy(value) : json_null();
	m->wait = &wait;
	if (!m->value) {
		free(m);
		return -ENOMEM;
	}
	if (!post(r, m))
		return -ECANCELED;
	uv_mutex_lock(&h->mu);
	while (!wait.done)
		uv_cond_wait(&h->cond, &h->mu);
	rc = wait.rc;
	uv_mutex_unlock(&h->mu);
	if (rc == STORE_ECONFLICT || rc == STORE_ENOTFOUND)
		rc = -ECANCELED;
	return rc;
}

void berth_ctx_progress(struct berth_ctx *ctx, double progress, double total,
			const char *message)
{
	struct worker__run *r = ctx->run;
	struct worker__hub *h = r->hub;
	struct worker__msg *m;
	json_t *p;
	bool queue;

	p = json_pack("{s:f}", "progress", progress);
	if (!p)
		return;
	if (total >= 0)
		json_object_set_new(p, "total", json_real(total));
	if (message)
		json_object_set_new(p, "message", json_string(message));
	/* Coalesced: only the newest value waits for the loop, and at most
	 * one message for it is queued. */
	uv_mutex_lock(&h->mu);
	json_decref(r->progress_latest);
	r->progress_latest = p;
	queue = !r->progress_queued && !h->closed;
	if (queue)
		r->progress_queued = true;
	uv_mutex_unlock(&h->mu);
	if (!queue)
		return;
	m = calloc(1, sizeof(*m));
	if (!m) {
		uv_mutex_lock(&h->mu);
		r->progress_queued = false;
		uv_mutex_unlock(&h->mu);
		return;
	}
	m->kind = WORKER__MSG_PROGRESS;
	post(r, m);
}

void berth_ctx_log(struct berth_ctx *ctx, const char *level,
		   const json_t *data, const char *fmt, ...)
{
	struct worker__msg *m = calloc(1, sizeof(*m));
	va_list ap;

	if (!m)
		return;
	m->kind = WORKER__MSG_LOG;
	m->level = strdup(level ? level : "info");
	va_start(ap, fmt);
	if (vasprintf(&m->message, fmt, ap) < 0)
		m->message = NULL;
	va_end(ap);
	m->value = data ? json_deep_copy(data) : NULL;
	m->at = store_now();
	if (!m->level || !m->message) {
		json_decref(m->value);
		free(m->level);
		free(m->message);
		free(m);
		return;
	}
	post(ctx->run, m);
}

/*
 * worker.c: the worker object, its operations' plumbing (store requests,
 * and the idle handle that runs deferred replies and nonblocking tools'
 * executions), the hub that brings messages from pool threads to the
 * loop, start-up and shutdown.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "log/log.h"
#include "worker/internal.h"

/* ---- operations ------------------------------------------------------- */

struct worker__op *worker__op_new(struct worker *w, worker_cb cb, void *arg)
{
	struct worker__op *op = calloc(1, sizeof(*op));

	if (!op)
		return NULL;
	op->w = w;
	op->cb = cb;
	op->arg = arg;
	op->req.data = op;
	w->inflight++;
	return op;
}

void worker__op_free(struct worker__op *op)
{
	struct worker *w = op->w;

	store_req_finish(&op->req);
	for (size_t i = 0; i < sizeof(op->own) / sizeof(op->own[0]); i++)
		json_decref(op->own[i]);
	for (size_t i = 0; i < sizeof(op->sown) / sizeof(op->sown[0]); i++)
		free(op->sown[i]);
	store_job_free(op->job);
	store_job_free(op->job2);
	free(op->caps);
	for (size_t i = 0; i < op->nlines; i++)
		store_log_line_finish(&op->lines[i]);
	free(op->lines);
	free(op->message);
	json_decref(op->data);
	free(op->by_name);
	free(op->by_via);
	json_decref(op->by_client);
	if (op->run)
		worker__run_unref(op->run);
	if (op->submitting)
		op->tool->submitting--;
	worker__tool_unref(op->tool);
	free(op);
	w->inflight--;
	worker__check_shutdown(w);
}

static void op_store_done(struct store_req *req, int rc)
{
	struct worker__op *op = req->data;

	op->then(op, rc);
}

int worker__op_submit(struct worker__op *op,
		      void (*then)(struct worker__op *op, int rc))
{
	op->then = then;
	op->req.done = op_store_done;
	op->req.data = op;
	/* A run's own transition (its end, run.c) holds for the attempt it
	 * ran alone: on a shared database the node may have claimed the job
	 * again, at the next attempt, while that end waited for the
	 * database (store_transition.run_attempt). */
	if (op->run && op->req.op == STORE_OP_TRANSITION)
		op->req.u.transition.run_attempt = op->run->job->attempt;
	return store_submit(op->w->st, &op->req);
}

void worker__op_reply(struct worker__op *op, int err, const char *message,
		      json_t *data, const struct store_job *job, bool existed)
{
	struct worker_result res = {
		.err = err,
		.message = message,
		.data = data,
		.job = job,
		.existed = existed,
	};

	if (op->cb)
		op->cb(op->arg, &res);
	worker__op_free(op);
}

static void idle_cb(uv_idle_t *h)
{
	struct worker *w = h->data;
	struct worker__op *list = w->deferred;

	w->deferred = w->deferred_tail = NULL;
	uv_idle_stop(h);
	/* The delivery that showed jobs submitted is over: those whose
	 * start it did not show may wait for a claim (on_store_event). */
	if (w->npeer_created > 0 || w->peer_created_over) {
		w->npeer_created = 0;
		w->peer_created_over = false;
		worker__sched_kick(w);
	}
	worker__exec_inline(w);
	while (list) {
		struct worker__op *op = list;
		list = op->next;
		worker__op_reply(op, op->err, op->message, op->data, op->job2,
				 false);
	}
}

void worker__op_defer(struct worker__op *op, int err, const char *message,
		      json_t *data)
{
	struct worker *w = op->w;

	op->err = err;
	op->message = message ? strdup(message) : NULL;
	op->data = data;
	op->next = NULL;
	if (w->deferred_tail)
		w->deferred_tail->next = op;
	else
		w->deferred = op;
	w->deferred_tail = op;
	worker__idle_kick(w);
}

void worker__op_defer_no_tool(struct worker__op *op, const char *name)
{
	char msg[160];

	snprintf(msg, sizeof(msg), "not found: no tool %.128s", name);
	worker__op_defer(op, WORKER_ENOTFOUND, msg,
			 json_pack("{s:s}", "id", name));
}

void worker__idle_kick(struct worker *w)
{
	uv_idle_start(&w->idle, idle_cb);
}

void worker__op_reply_store(struct worker__op *op, int rc)
{
	const struct store_job *j = op->req.job;
	char msg[160];

	if (rc == STORE_ENOTFOUND) {
		json_t *data = json_pack("{s:s}", "id",
					 op->req.u.transition.job_id);

		/* The phrase of every missing job (api/methods.c). */
		snprintf(msg, sizeof(msg), "not found: no job %.64s",
			 op->req.u.transition.job_id);
		worker__op_reply(op, WORKER_ENOTFOUND, msg, data, NULL, false);
		json_decref(data);
	} else if (rc == STORE_ECONFLICT) {
		const char *s = j ? store_status_name(j->status) : "unknown";
		json_t *data = json_pack("{s:s}", "status", s);

		snprintf(msg, sizeof(msg), "the job is %s", s);
		worker__op_reply(op, WORKER_ECONFLICT, msg, data, j, false);
		json_decref(data);
	} else if (rc == -ESHUTDOWN) {
		worker__op_reply(op, WORKER_EINTERNAL, "berthd is shutting down",
				 NULL, NULL, false);
	} else if (rc == -EIO && store_shared(op->w->st)) {
		/* The server out of reach, or the connection lost: if that
		 * was while the commit was under way, it may have been
		 * made (docs/POSTGRES.md). */
		char text[400];
		json_t *data = json_pack("{s:s, s:s, s:s}", "sqlite",
					 strerror(-rc), "backend", "postgresql",
					 "committed", "unknown");

		snprintf(text, sizeof(text), "storage failed: PostgreSQL could "
			 "not be reached, or the connection was lost (%s); a "
			 "change whose commit was under way may have been "
			 "stored: retry a submit with the same idempotencyKey, "
			 "which never makes a second job", strerror(-rc));
		worker__op_reply(op, WORKER_ESTORAGE, text, data, NULL, false);
		json_decref(data);
	} else {
		json_t *data = json_pack("{s:s}", "sqlite",
					 store_error_text(rc));

		snprintf(msg, sizeof(msg), "storage failed: %s",
			 store_error_text(rc));
		worker__op_reply(op, WORKER_ESTORAGE, msg, data, NULL, false);
		json_decref(data);
	}
}

/* ---- job logs --------------------------------------------------------- */

static void log_done(struct worker__op *op, int rc)
{
	worker__op_free(op);
}

void worker__job_log(struct worker *w, const char *job_id, const char *level,
		     const json_t *data, const char *fmt, ...)
{
	struct worker__op *op = worker__op_new(w, NULL, NULL);
	struct store_log_line *l;
	char *text;
	va_list ap;

	if (!op)
		return;
	op->lines = l = calloc(1, sizeof(*l));
	if (!l)
		goto fail;
	op->nlines = 1;
	l->at = store_now();
	l->level = strdup(level);
	va_start(ap, fmt);
	if (vasprintf(&text, fmt, ap) < 0)
		text = NULL;
	va_end(ap);
	/* A line of a tool's stderr is whatever bytes it wrote: stored as
	 * UTF-8, so that jobs/logs can give it back as a JSON string. */
	l->message = text ? berth_utf8_repair(text, strlen(text)) : NULL;
	free(text);
	l->data = data ? json_deep_copy(data) : NULL;
	if (!l->level || !l->message)
		goto fail;
	op->req.op = STORE_OP_LOG;
	snprintf(op->req.u.log.job_id, sizeof(op->req.u.log.job_id), "%s",
		 job_id);
	op->req.u.log.lines = l;
	op->req.u.log.nlines = 1;
	op->req.u.log.max_lines = w->cfg.max_log_lines;
	if (worker__op_submit(op, log_done) == 0)
		return;
fail:
	worker__op_free(op);
}

/* ---- progress listeners ----------------------------------------------- */

int worker_add_progress_listener(struct worker *w, worker_progress_fn fn,
				 void *arg)
{
	struct worker__listener *p;

	p = realloc(w->listeners, (w->nlisteners + 1) * sizeof(*p));
	if (!p)
		return -ENOMEM;
	w->listeners = p;
	p[w->nlisteners].fn = fn;
	p[w->nlisteners].arg = arg;
	w->nlisteners++;
	return 0;
}

void worker_remove_progress_listener(struct worker *w, worker_progress_fn fn,
				     void *arg)
{
	for (size_t i = 0; i < w->nlisteners; i++) {
		struct worker__listener *l = &w->listeners[i];

		if (l->fn != fn || l->arg != arg)
			continue;
		if (w->notifying) {
			/* worker__progress is walking the array: leave a
			 * hole it skips, compacted when it is done. */
			l->fn = NULL;
			w->listeners_dirty = true;
		} else {
			memmove(l, l + 1,
				(w->nlisteners - i - 1) * sizeof(*l));
			w->nlisteners--;
		}
		return;
	}
}

void worker__progress(struct worker *w, const struct store_job *job,
		      const json_t *progress)
{
	bool outer = !w->notifying;
	size_t k = 0;

	w->notifying = true;
	/* A listener may add or remove listeners: the array is indexed
	 * afresh each time, and a removed one is skipped. */
	for (size_t i = 0; i < w->nlisteners; i++)
		if (w->listeners[i].fn)
			w->listeners[i].fn(w->listeners[i].arg, job->id,
					   job->tool, progress);
	if (!outer)
		return;
	w->notifying = false;
	if (!w->listeners_dirty)
		return;
	for (size_t i = 0; i < w->nlisteners; i++)
		if (w->listeners[i].fn)
			w->listeners[k++] = w->listeners[i];
	w->nlisteners = k;
	w->listeners_dirty = false;
}

void worker_stats(const struct worker *w, struct worker_stats *out)
{
	out->size = w->cfg.workers;
	out->running = 0;
	for (const struct worker__run *r = w->runs; r; r = r->next)
		if (r->state == WORKER__RUN_ACTIVE)
			out->running++;
	/* A claimed job is running in the database from its commit on;
	 * its slot is taken from then, not only once its run began. */
	out->busy = w->busy + store_claimed_undelivered(w->st);
	out->started_at_submit = w->started_at_submit;
	out->started_by_claim = w->started_by_claim;
	out->claims = w->claims;
	out->claims_empty = w->claims_empty;
}

int64_t worker__kill_grace(const struct worker *w)
{
	return w->cfg.kill_grace_ms;
}

/* ---- the hub ---------------------------------------------------------- */

struct worker__hub *worker__hub_ref(struct worker__hub *h)
{
	atomic_fetch_add(&h->refs, 1);
	return h;
}

void worker__hub_unref(struct worker__hub *h)
{
	if (!h || atomic_fetch_sub(&h->refs, 1) != 1)
		return;
	uv_mutex_destroy(&h->mu);
	uv_cond_destroy(&h->cond);
	free(h);
}

bool worker__hub_post(struct worker__hub *h, struct worker__msg *m)
{
	uv_mutex_lock(&h->mu);
	if (h->closed) {
		uv_mutex_unlock(&h->mu);
		return false;
	}
	m->next = NULL;
	if (h->tail)
		h->tail->next = m;
	else
		h->head = m;
	h->tail = m;
	uv_async_send(h->async);
	uv_mutex_unlock(&h->mu);
	return true;
}

void worker__hub_complete(struct worker__hub *h, struct worker__wait *wt,
			  int rc)
{
	if (!wt)
		return;
	uv_mutex_lock(&h->mu);
	wt->rc = rc;
	wt->done = true;
	uv_cond_broadcast(&h->cond);
	uv_mutex_unlock(&h->mu);
}

static void msg_free(struct worker__msg *m)
{
	json_decref(m->value);
	free(m->level);
	free(m->message);
	free(m);
}

/* hub_take returns the queued messages, oldest first. */
static struct worker__msg *hub_take(struct worker__hub *h)
{
	struct worker__msg *m;

	uv_mutex_lock(&h->mu);
	m = h->head;
	h->head = h->tail = NULL;
	uv_mutex_unlock(&h->mu);
	return m;
}

static void async_cb(uv_async_t *a)
{
	worker__hub_drain(a->data);
}

void worker__hub_drain(struct worker *w)
{
	struct worker__msg *m = hub_take(w->hub);

	while (m) {
		struct worker__msg *next = m->next;
		struct worker__run *r = m->run;

		if (m->kind == WORKER__MSG_PROGRESS) {
			json_t *p;

			uv_mutex_lock(&w->hub->mu);
			p = r->progress_latest;
			r->progress_latest = NULL;
			r->progress_queued = false;
			uv_mutex_unlock(&w->hub->mu);
			if (p)
				worker__run_progress(r, p);
		} else if (m->kind == WORKER__MSG_LOG) {
			worker__run_log(r, m->level, m->message, m->value);
		} else if (m->kind == WORKER__MSG_CHECKPOINT) {
			worker__run_checkpoint(r, m->value, m->wait);
			m->value = NULL;
		}
		worker__run_unref(r);
		msg_free(m);
		m = next;
	}
}

/* hub_close refuses further messages, answers waiting checkpoints and
 * drops what is queued. */
static void hub_close(struct worker__hub *h)
{
	struct worker__msg *m;

	uv_mutex_lock(&h->mu);
	h->closed = true;
	h->async = NULL;
	m = h->head;
	h->head = h->tail = NULL;
	for (struct worker__msg *x = m; x; x = x->next) {
		if (x->wait) {
			x->wait->rc = -ECANCELED;
			x->wait->done = true;
		}
	}
	uv_cond_broadcast(&h->cond);
	uv_mutex_unlock(&h->mu);
	while (m) {
		struct worker__msg *next = m->next;
		worker__run_unref(m->run);
		msg_free(m);
		m = next;
	}
}

/* ---- create, start, destroy ------------------------------------------- */

struct worker *worker_create(uv_loop_t *loop, struct store *st,
			     const struct worker_config *cfg)
{
	struct worker *w = calloc(1, sizeof(*w));
	struct worker__hub *h = calloc(1, sizeof(*h));
	char n[32];
	int pool;

	if (!w || !h)
		goto fail;
	if (uv_mutex_init(&h->mu)) {
		free(h);
		h = NULL;
		goto fail;
	}
	if (uv_cond_init(&h->cond)) {
		uv_mutex_destroy(&h->mu);
		free(h);
		h = NULL;
		goto fail;
	}
	atomic_init(&h->refs, 1);
	h->async = &w->async;
	w->hub = h;
	w->loop = loop;
	w->st = st;
	if (cfg)
		w->cfg = *cfg;
	if (w->cfg.workers <= 0)
		w->cfg.workers = WORKER__WORKERS;
	/* Runs by job id: every event of the store looks its job up. */
	w->nby_id = 16;
	while (w->nby_id < 2 * (size_t)w->cfg.workers && w->nby_id < (1u << 20))
		w->nby_id *= 2;
	w->by_id = calloc(w->nby_id, sizeof(*w->by_id));
	if (!w->by_id)
		goto fail;
	if (w->cfg.default_timeout_ms <= 0)
		w->cfg.default_timeout_ms = WORKER__TIMEOUT_MS;
	if (w->cfg.kill_grace_ms <= 0)
		w->cfg.kill_grace_ms = WORKER__KILL_GRACE_MS;
	if (w->cfg.start_timeout_ms <= 0)
		w->cfg.start_timeout_ms = WORKER__START_TIMEOUT_MS;
	if (w->cfg.shutdown_grace_ms == 0)
		w->cfg.shutdown_grace_ms = WORKER__SHUTDOWN_GRACE_MS;
	if (w->cfg.max_output_bytes <= 0)
		w->cfg.max_output_bytes = WORKER__MAX_OUTPUT;
	if (w->cfg.max_log_bytes <= 0)
		w->cfg.max_log_bytes = WORKER__MAX_LOG;
	if (w->cfg.max_log_lines <= 0)
		w->cfg.max_log_lines = WORKER__MAX_LOG_LINES;
	if (w->cfg.retention_ms <= 0)
		w->cfg.retention_ms = WORKER__RETENTION_MS;
	if (w->cfg.heartbeat_ms <= 0)
		w->cfg.heartbeat_ms = WORKER__HEARTBEAT_MS;

	/*
	 * Two process-wide settings, made here because the worker is what
	 * needs them. libuv sizes its thread pool once, at the first
	 * uv_queue_work, from UV_THREADPOOL_SIZE: C tools need one thread
	 * per slot they may hold (threads, else workers), plus spares for
	 * tools that ignore their abort flag and keep a thread after their
	 * job was finished. And writing a job's input to a process that
	 * exited early must be an EPIPE error, not a SIGPIPE that kills the
	 * daemon.
	 */
	if (w->cfg.threads > w->cfg.workers)
		w->cfg.threads = w->cfg.workers;
	pool = (w->cfg.threads > 0 ? w->cfg.threads : w->cfg.workers) + 4;
	snprintf(n, sizeof(n), "%d", pool > 1024 ? 1024 : pool);
	setenv("UV_THREADPOOL_SIZE", n, 0);
	signal(SIGPIPE, SIG_IGN);

	uv_timer_init(loop, &w->run_timer);
	uv_timer_init(loop, &w->expiry_timer);
	uv_timer_init(loop, &w->prune_timer);
	uv_timer_init(loop, &w->grace_timer);
	uv_idle_init(loop, &w->idle);
	if (uv_async_init(loop, &w->async, async_cb)) {
		/* The four timers and the idle handle are closed without a
		 * callback below; they hold no memory of their own. */
		uv_close((uv_handle_t *)&w->run_timer, NULL);
		uv_close((uv_handle_t *)&w->expiry_timer, NULL);
		uv_close((uv_handle_t *)&w->prune_timer, NULL);
		uv_close((uv_handle_t *)&w->grace_timer, NULL);
		uv_close((uv_handle_t *)&w->idle, NULL);
		uv_run(loop, UV_RUN_NOWAIT);
		goto fail;
	}
	w->run_timer.data = w->expiry_timer.data = w->prune_timer.data = w;
	w->grace_timer.data = w->idle.data = w->async.data = w;
	/* The async handle must not keep the loop alive by itself. */
	uv_unref((uv_handle_t *)&w->async);
	return w;
fail:
	if (h)
		worker__hub_unref(h);
	if (w)
		free(w->by_id);
	free(w);
	return NULL;
}

/* may_rerun answers store_recover: a run interrupted by a restart is run
 * again unless its tool says it must not be, or is gone. */
static bool may_rerun(void *arg, const char *tool)
{
	struct worker_tool *t = worker__tool_find(arg, tool);

	return t && t->bg.on_interrupt == BERTH_INTERRUPT_RETRY;
}

/* knows_tool answers the store's recovery of another node's expired lease
 * (store_know_tools): a job of a tool this node does not have is left to
 * a node that has it, which knows whether it may run again. */
static bool knows_tool(void *arg, const char *tool)
{
	return worker__tool_find(arg, tool) != NULL;
}

static void prune_done(struct worker__op *op, int rc)
{
	worker__op_free(op);
}

static void prune_cb(uv_timer_t *h)
{
	struct worker *w = h->data;
	struct worker__op *op = worker__op_new(w, NULL, NULL);

	if (!op)
		return;
	op->req.op = STORE_OP_PRUNE;
	op->req.u.prune.before = store_now() - w->cfg.retention_ms;
	if (worker__op_submit(op, prune_done))
		worker__op_free(op);
}

/* paused_here is true for a tool this node knows to be paused (on a
 * database of its own: on a shared one another node may unpause it). A
 * claim for its new job would find nothing to take, after walking every
 * pending job of the tool; its unpause claims them all. */
static bool paused_here(const struct worker *w, const char *tool)
{
	const struct worker_tool *t = worker__tool_find(w, tool);

	return t && t->pause == WORKER__PAUSE_YES && !store_shared(w->st);
}

/* ends_run is true for the events that may end a run (a cancel may also
 * end a job that did not run). */
static bool ends_run(int type)
{
	return type == STORE_EV_SUSPENDED || type == STORE_EV_COMPLETED ||
	       type == STORE_EV_FAILED || type == STORE_EV_TIMED_OUT ||
	       type == STORE_EV_CANCELLED;
}

/* note_created notes a job that its "created" event showed submitted on
 * a shared database, for the claim that the idle handle asks once the
 * delivery is over (on_store_event). */
static void note_created(struct worker *w, const char *id)
{
	size_t cap = sizeof(w->peer_created) / sizeof(w->peer_created[0]);

	if ((size_t)w->npeer_created < cap &&
	    strlen(id) < sizeof(w->peer_created[0]))
		strcpy(w->peer_created[w->npeer_created++], id);
	else
		w->peer_created_over = true;
	worker__idle_kick(w);
}

/* note_moved forgets a noted job that a later event of the same delivery
 * showed out of pending: started by its creation on another node, or
 * ended. */
static void note_moved(struct worker *w, const char *id)
{
	for (int i = 0; i < w->npeer_created; i++) {
		if (strcmp(w->peer_created[i], id) != 0)
			continue;
		w->npeer_created--;
		if (i < w->npeer_created)
			memcpy(w->peer_created[i],
			       w->peer_created[w->npeer_created],
			       sizeof(w->peer_created[i]));
		return;
	}
}

/* limited is true for a tool with a concurrency limit. */
static bool limited(const struct worker *w, const char *tool)
{
	const struct worker_tool *t = worker__tool_find(w, tool);

	return t && t->bg.concurrency > 0;
}

/*
 * on_store_event hears every committed event of the store, this node's and,
 * on a shared database, every other node's, before the done callbacks of
 * the transaction that appended it. An event that leaves a job runnable
 * asks for a claim: on one node this is the kick that follows a local
 * submit, resume or approve (their callbacks only note a future run_at);
 * on several it is how a node hears of work submitted elsewhere, or of a
 * dead node's jobs recovered by the lease reaper. worker__sched_kick
 * keeps one claim in flight and marks a burst of events for one more
 * claim after it, so events never pile up claims. A delayed job's time
 * is learnt by that claim: claim_done re-arms the run timer from the
 * claim's next run_at; with no free slot the claim that follows the next
 * freed slot does.
 */
static void on_store_event(void *arg, const struct store_event *ev)
{
	struct worker *w = arg;
	struct worker__run *r;

	if (log_enabled(LOG_LEVEL_DEBUG))
		log_debug("job %s (%s): %s, now %s (event %lld)", ev->job_id,
			  ev->tool, store_event_name(ev->type),
			  store_status_name(ev->status), (long long)ev->seq);
	if (!w->started || w->stopping)
		return;
	r = worker__run_find(w, ev->job_id);
	if (r && ev->status == STORE_CANCELLED) {
		/* Cancelled through any node: the run gets its abort flag,
		 * its process group is killed and its late result is
		 * discarded, as for a cancel made here. */
		worker__run_cancelled(r);
		return;
	}
	/* A job started by its creation (ops.c) has its run before the
	 * "created" event, which shows it as submitted. */
	if (r && r->state == WORKER__RUN_ACTIVE && ev->status != STORE_RUNNING &&
	    ev->type != STORE_EV_CREATED) {
		/* While a run is active only another node moves its job
		 * (this node's own end of the run is committed while the
		 * run is finishing): the lease reaper of a node that
		 * presumed this one dead. The job is no longer this
		 * node's; stop the run and drop whatever it produces. */
		log_warn("job %s: taken over by another node (now %s, "
			 "this node's lease had expired); its run here is "
			 "stopped and its result dropped",
			r->job->id, store_status_name(ev->status));
		worker__run_cancelled(r);
		r = NULL;
	}
	if (w->npeer_created > 0 && ev->status != STORE_PENDING)
		note_moved(w, ev->job_id);
	/* A job that waits for someone may have a ttl, which every node
	 * enforces: only the node that set it armed its timer, and a job
	 * of a node that died then waited past its expiresAt. (One node's
	 * own jobs rearm it where they are made.) */
	if (store_shared(w->st) && (ev->status == STORE_AWAITING_APPROVAL ||
				    ev->status == STORE_SUSPENDED))
		worker__expiry_rearm(w);
	/* An event that leaves a job runnable wakes the scheduler. The retry
	 * of a run of this node is claimed by final_done (run.c), or its
	 * run_at is a wakeup already. */
	switch (ev->type) {
	case STORE_EV_CREATED:
		/* A job started by its creation has its run already. */
		if (ev->status == STORE_PENDING && !r)
			worker__remote_wake(w, ev->tool);
		if (ev->status != STORE_PENDING || r || paused_here(w, ev->tool))
			break;
		/* Not the backlog: another node's job started by its
		 * creation shows as submitted here too. A kick that finds
		 * no slot sets it (sched.c). On a shared database that
		 * job's "started" event comes in the same delivery (one
		 * transaction wrote both): the claim waits for the end of
		 * the delivery, and is not asked for a job that started.
		 * A claim for each of them found nothing: with two nodes, a
		 * no-op job cost 1.53 statements instead of 1.31. */
		if (store_shared(w->st))
			note_created(w, ev->job_id);
		else
			worker__sched_kick(w);
		break;
	case STORE_EV_RETRYING:
	case STORE_EV_RESUMED:
	case STORE_EV_APPROVED:
		w->backlog = true;
		worker__remote_wake(w, ev->tool);
		if (!r)
			worker__sched_kick(w);
		break;
	default:
		/* Another node's run of a tool whose limit holds for the
		 * cluster ended: a job of that tool that the last claim left
		 * out may start now. (This node's own runs claim when their
		 * slot is freed, run.c.) */
		if (!r && ends_run(ev->type) && store_shared(w->st) &&
		    limited(w, ev->tool)) {
			w->backlog = true;
			worker__remote_wake(w, ev->tool);
			worker__sched_kick(w);
		}
		break;
	}
}

/*
 * count_interrupted counts, before the recovery at start-up, the jobs it
 * will run again (*rerun) and fail (*fail), by store_recover's own rule: a
 * job runs again when its tool allows it and a retry is left. On a
 * database of its own every running job is this node's; on a shared one
 * the store recovers this node's alone, which a listing cannot tell
 * apart, and both counts are left at -1.
 */
static void count_interrupted(struct worker *w, int *rerun, int *fail)
{
	struct store_filter f = {.status_mask = STORE_MASK(STORE_RUNNING)};
	struct store_job **jobs;
	char *cursor = NULL, *next;
	size_t n;

	*rerun = *fail = store_shared(w->st) ? -1 : 0;
	if (*rerun < 0)
		return;
	do {
		if (store_list(w->st, &f, 1000, cursor, &jobs, &n, &next) < 0) {
			*rerun = *fail = -1;
			next = NULL;
			n = 0;
			jobs = NULL;
		}
		for (size_t i = 0; i < n; i++) {
			if (*rerun >= 0 && may_rerun(w, jobs[i]->tool) &&
			    jobs[i]->attempt < store_interrupted_tries(
						       jobs[i]->max_retries))
				(*rerun)++;
			else if (*fail >= 0)
				(*fail)++;
			store_job_free(jobs[i]);
		}
		free(jobs);
		free(cursor);
		cursor = next;
	} while (cursor);
}

/* log_recovered reports the recovery at start-up: n jobs were found
 * running, rerun of them run again and fail failed (-1: not counted). */
static void log_recovered(struct worker *w, int n, int rerun, int fail)
{
	if (n == 0)
		return;
	if (rerun < 0 || rerun + fail != n)
		log_info("recovered %d job%s interrupted by the last stop of "
			 "berthd: back to pending, or failed where its tries "
			 "were used up or the tool must not run again",
			 n, n == 1 ? "" : "s");
	else
		log_info("recovered %d job%s interrupted by the last stop of "
			 "berthd: %d back to pending (attempt raised), %d "
			 "failed (its tries used up, or the tool must not "
			 "run again after an interruption)",
			 n, n == 1 ? "" : "s", rerun, fail);
}

int worker_start(struct worker *w, char **errmsg)
{
	int rerun, fail;
	int rc;

	if (errmsg)
		*errmsg = NULL;
	if (w->started || w->stopping)
		return -EINVAL;
	/* What a berthd that died left running goes before its jobs run
	 * again (orphans.c). Its failure is logged; recovery goes on. */
	worker__orphans_kill(w);
	/* The tools of worker processes before the recovery, which reads
	 * their onInterrupt; a failure leaves them out until a worker
	 * registers them again (remote.c logs it). */
	worker__remote_load(w);
	count_interrupted(w, &rerun, &fail);
	store_know_tools(w->st, knows_tool, w);
	rc = store_recover(w->st, may_rerun, w);
	if (rc < 0) {
		if (errmsg)
			*errmsg = worker__errmsg("recovering interrupted jobs "
						 "failed: %s",
						 strerror(-rc));
		return rc;
	}
	log_recovered(w, rc, rerun, fail);
	rc = store_add_listener(w->st, on_store_event, w);
	if (rc) {
		if (errmsg)
			*errmsg = worker__errmsg("listening to the store's "
						 "events failed: %s",
						 strerror(-rc));
		return rc;
	}
	w->started = true;
	w->backlog = true; /* until the first claim comes back short */
	if ((rc = worker__keeper_watch(w->loop)) < 0)
		log_warn("the keeper cannot be watched (%s): should it end, "
			 "berthd would not replace it",
			 strerror(-rc));
	/* Terminal jobs past the retention are pruned now and hourly. */
	uv_timer_start(&w->prune_timer, prune_cb, 0, 3600 * 1000);
	uv_unref((uv_handle_t *)&w->prune_timer);
	worker__expiry_rearm(w);
	worker__sched_kick(w);
	worker__sched_rearm(w);
	return 0;
}

/* ---- shutdown --------------------------------------------------------- */

static void handle_closed(uv_handle_t *h)
{
	struct worker *w = h->data;

	if (--w->open_handles == 0 && w->shutdown_done)
		w->shutdown_done(w->shutdown_arg);
}

static void spawner_closed(void *arg)
{
	struct worker *w = arg;

	if (--w->open_handles == 0 && w->shutdown_done)
		w->shutdown_done(w->shutdown_arg);
}

static void close_handle(struct worker *w, void *h)
{
	w->open_handles++;
	uv_close(h, handle_closed);
}

/* shutdown_timer_cb fires twice: after the shutdown grace it aborts every
 * running job; after the kill grace that follows it gives up on C tools
 * that ignore their abort flag (their threads are left to finish, their
 * results discarded). */
static void shutdown_timer_cb(uv_timer_t *h)
{
	struct worker *w = h->data;
	struct worker__run *r, *next;

	if (!w->aborting) {
		w->aborting = true;
		/* The grace is over for questions to worker processes too:
		 * their operations go on without an answer. */
		worker__remote_asks_end(w);
		for (r = w->runs; r; r = r->next)
			if (r->state == WORKER__RUN_ACTIVE)
				worker__run_abort(r, WORKER__ABORT_SHUTDOWN);
		uv_timer_start(&w->grace_timer, shutdown_timer_cb,
			       (uint64_t)w->cfg.kill_grace_ms + 100, 0);
	} else {
		for (r = w->runs; r; r = next) {
			next = r->next;
			if (r->state == WORKER__RUN_ACTIVE && r->c)
				worker__run_give_up(r);
		}
	}
	worker__check_shutdown(w);
}

/* shutdown_ready returns true once no run, claim or store request of the
 * worker is left. */
static bool shutdown_ready(const struct worker *w)
{
	if (!w->stopping || w->closing)
		return false;
	for (const struct worker__run *r = w->runs; r; r = r->next) {
		if (r->state != WORKER__RUN_DONE)
			return false;
		if (!r->c && !r->exec_done && r->exec_started)
			return false;
	}
	return !w->claim_inflight && w->inflight == 0;
}

static void finish_shutdown(uv_timer_t *h);

/* worker__check_shutdown is called from store callbacks, where the store
 * must not be waited on (store_requeue_running is synchronous); the end of
 * the shutdown runs from a timer of its own instead. */
void worker__check_shutdown(struct worker *w)
{
	if (shutdown_ready(w))
		uv_timer_start(&w->grace_timer, finish_shutdown, 0, 0);
}

static void finish_shutdown(uv_timer_t *h)
{
	struct worker *w = h->data;
	struct worker__run *r, *next;
	int rc;

	if (!shutdown_ready(w))
		return;
	w->closing = true;
	if (w->started)
		store_remove_listener(w->st, on_store_event, w);
	/* Every job still running in the store was stopped by this
	 * shutdown (or claimed after it began): back to pending without
	 * using up a retry. */
	if (w->started && (rc = store_requeue_running(w->st)) < 0)
		log_error("putting running jobs back to pending "
			  "failed (%s); the next start recovers them",
			strerror(-rc));
	/* C tools that never returned are detached: their thread keeps the
	 * run (and the hub) alive and touches nothing else. */
	for (r = w->runs; r; r = next) {
		next = r->next;
		r->w = NULL;
		r->listed = false;
		r->prev = r->next = r->id_next = NULL;
	}
	w->runs = NULL;
	memset(w->by_id, 0, w->nby_id * sizeof(*w->by_id));
	worker__remote_shutdown(w);
	if (worker__keeper_unwatch(handle_closed, w))
		w->open_handles++;
	hub_close(w->hub);
	close_handle(w, &w->run_timer);
	close_handle(w, &w->expiry_timer);
	close_handle(w, &w->prune_timer);
	close_handle(w, &w->grace_timer);
	close_handle(w, &w->idle);
	close_handle(w, &w->async);
	/* Every process was reaped (shutdown_ready): the spawner's threads
	 * may end. */
	if (w->spawner) {
		w->open_handles++;
		worker__spawner_close(w->spawner, spawner_closed, w);
		w->spawner = NULL;
	}
}

void worker_shutdown(struct worker *w, void (*done)(void *arg), void *arg)
{
	if (w->stopping)
		return;
	w->stopping = true;
	w->shutdown_done = done;
	w->shutdown_arg = arg;
	worker__exec_stop_queued(w);
	uv_timer_stop(&w->run_timer);
	uv_timer_stop(&w->expiry_timer);
	uv_timer_stop(&w->prune_timer);
	if (w->runs || w->asks)
		uv_timer_start(&w->grace_timer, shutdown_timer_cb,
			       w->cfg.shutdown_grace_ms < 0
				       ? 0
				       : (uint64_t)w->cfg.shutdown_grace_ms,
			       0);
	worker__check_shutdown(w);
}

static void interrupted_done(struct worker__op *op, int rc)
{
	/* A conflict: the run's own end committed first. */
	if (rc && rc != STORE_ECONFLICT && rc != STORE_ENOTFOUND)
		log_error("job %s: putting it back after an immediate stop "
			  "failed (%s); the next start recovers it",
			  op->req.u.transition.job_id, strerror(-rc));
	worker__op_free(op);
}

/* put_back_interrupted commits for r's job what the recovery after a crash
 * would (store_recover): pending with its attempt raised, or failed when
 * no retry is left or the tool it ran under must not run again after an
 * interruption. On an error the job stays running, which the next start
 * recovers the same way. */
static void put_back_interrupted(struct worker *w, struct worker__run *r)
{
	const struct store_job *j = r->job;
	struct worker__op *op = worker__op_new(w, NULL, NULL);
	struct store_transition *tr;
	char msg[160];

	if (!op)
		return;
	tr = &op->req.u.transition;
	op->req.op = STORE_OP_TRANSITION;
	snprintf(tr->job_id, sizeof(tr->job_id), "%s", j->id);
	tr->from_mask = STORE_MASK(STORE_RUNNING);
	if (!worker__interrupt_retry(r, op)) {
		snprintf(msg, sizeof(msg),
			 "interrupted by an immediate stop of berthd "
			 "(attempt %d of %d)",
			 j->attempt,
			 r->tool && r->tool->bg.on_interrupt ==
					    BERTH_INTERRUPT_RETRY
				 ? store_interrupted_tries(j->max_retries)
				 : j->max_retries + 1);
		op->own[0] = tr->error = tr->event_data = json_pack(
			"{s:s, s:s}", "message", msg, "code", "interrupted");
		tr->to = STORE_FAILED;
		tr->event = STORE_EV_FAILED;
		tr->set = STORE_SET_ERROR;
	}
	if (!op->own[0] || worker__op_submit(op, interrupted_done))
		worker__op_free(op);
}

int worker_shutdown_now(struct worker *w)
{
	struct worker__run *r, *next;
	int n = 0;

	if (!w->stopping || w->now || w->closing)
		return 0;
	w->now = true;
	w->aborting = true;
	uv_timer_stop(&w->grace_timer);
	worker__remote_asks_end(w);
	for (r = w->runs; r; r = next) {
		next = r->next;
		/* A finished run's process may still be reaped: it goes too. */
		if (r->proc)
			worker__proc_kill_now(r->proc);
		if (r->state != WORKER__RUN_ACTIVE)
			continue;
		n++;
		/* One whose timeout waits for its process ends with it. */
		if (!worker__run_end_timed_out(r))
			put_back_interrupted(w, r);
		worker__run_abort(r, WORKER__ABORT_SHUTDOWN);
		/* A C tool cannot be killed: its thread is left to return,
		 * and what it returns is dropped. */
		if (r->c)
			worker__run_give_up(r);
	}
	worker__check_shutdown(w);
	return n;
}

void worker_destroy(struct worker *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->ntools; i++)
		worker__tool_unref(w->tools[i]);
	free(w->tools);
	for (size_t i = 0; i < w->ndirs; i++)
		free(w->dirs[i]);
	free(w->dirs);
	for (size_t i = 0; i < w->nmissing; i++)
		free(w->missing[i]);
	free(w->missing);
	free(w->by_id);
	free(w->wakeups);
	free(w->listeners);
	free(w->proc_buf);
	worker__hub_unref(w->hub);
	free(w);
}

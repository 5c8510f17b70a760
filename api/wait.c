/*
 * wait.c: long-poll waits (wait.h).
 *
 * A wait sits in one list of the api: job waits in a bucket hashed by job
 * id, event waits in one list. The store's listener (api_wait_on_event)
 * looks only at the waits the event can concern, so a transition wakes its
 * waiters without any polling loop, however many waits are open.
 */
#include "api/wait.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/methods.h"
#include "api/rpc.h"

enum wait_kind {
	WAIT_JOB = 0, /* jobs/wait */
	WAIT_EVENTS,  /* events/poll */
};

struct api_wait {
	struct api *api;
	struct api_req *req; /* answered when the wait ends */
	int kind;            /* enum wait_kind */
	char job_id[40];     /* the job (WAIT_JOB), a filter or "" (EVENTS) */
	unsigned until;      /* WAIT_JOB: statuses that end the wait */
	int64_t since;       /* WAIT_EVENTS: events after this seq */
	unsigned types;      /* WAIT_EVENTS: event types wanted; 0: all */
	int limit;           /* WAIT_EVENTS: events in the answer */
	uv_timer_t timer;    /* its time limit; closed when the wait ends */

	struct api_wait *next, **pprev;           /* in the api's list */
	struct api_wait *conn_next, **conn_pprev; /* in its connection's */
};

static unsigned bucket_of(const char *id)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (; *id; id++)
		h = (h ^ (unsigned char)*id) * 16777619u;
	return h % API_WAIT_BUCKETS;
}

static void on_timer_close(uv_handle_t *h)
{
	struct api_wait *w = h->data;
	struct api *a = w->api;

	free(w);
	api_handle_closed(a);
}

/* wait_unlink takes w out of both lists; idempotent. */
static void wait_unlink(struct api_wait *w)
{
	if (w->pprev) {
		*w->pprev = w->next;
		if (w->next)
			w->next->pprev = w->pprev;
		w->pprev = NULL;
	}
	if (w->conn_pprev) {
		*w->conn_pprev = w->conn_next;
		if (w->conn_next)
			w->conn_next->conn_pprev = w->conn_pprev;
		w->conn_pprev = NULL;
	}
}

/* wait_free unlinks w and closes its timer, which frees it. */
static void wait_free(struct api_wait *w)
{
	wait_unlink(w);
	uv_timer_stop(&w->timer);
	uv_close((uv_handle_t *)&w->timer, on_timer_close);
}

/* events_page returns a new {events, next} of up to limit events after
 * since (of one job when job is not empty, of types when they are not 0),
 * or NULL with *rc set. *more (may be NULL) is false when the read looked
 * at every event there was after since: none the page could hold is in
 * the log past its next yet. */
static json_t *events_page(struct api *a, int64_t since, const char *job,
			   unsigned types, int limit, bool *more, int *rc)
{
	struct store_event *evs = NULL;
	size_t n = 0;
	json_t *arr, *page;
	int64_t next = since;
	bool rest = false;

	if (job && !*job)
		job = NULL;
	if (types) {
		/* Read by type in the store, so that limit counts the
		 * events of those types, and next passes the others by
		 * (store_events_typed). */
		struct store_event_query q = {since, job, types, limit,
					      STORE_EVENTS_SCAN};

		*rc = store_events_typed(a->store, &q, &evs, &n, &next, &rest);
	} else {
		*rc = store_events(a->store, since, job, limit, &evs, &n);
		rest = n == (size_t)limit;
	}
	if (*rc < 0)
		return NULL;
	arr = json_array();
	for (size_t i = 0, bytes = 0; i < n; i++) {
		/* The page ends after the event that takes it past its
		 * budget; next is that event's seq, and more follow. */
		if (arr && bytes <= API_PAGE_BYTES) {
			json_t *ev = store_event_to_json(&evs[i]);

			bytes += api_json_size(ev, API_PAGE_BYTES);
			json_array_append_new(arr, ev);
			if (bytes > API_PAGE_BYTES && i + 1 < n) {
				next = evs[i].seq;
				rest = true;
			} else if (!types) {
				next = evs[i].seq;
			}
		}
		store_event_finish(&evs[i]);
	}
	free(evs);
	if (more)
		*more = rest;
	page = arr ? json_pack("{s:o, s:I}", "events", arr, "next",
			       (json_int_t)next)
		   : NULL;
	if (!page)
		*rc = -ENOMEM;
	return page;
}

static void reply_page(struct api_req *r, int64_t since, const char *job,
		       unsigned types, int limit)
{
	struct api *a = r->conn->api;
	int rc;
	json_t *page = events_page(a, since, job, types, limit, NULL, &rc);

	if (!page)
		api_reply_store_error(r, rc, job);
	else
		api_reply(r, page);
}

/* wait_finish answers w's request with what it waited for (or, after a
 * time-out, with things as they are) and frees w. */
static void wait_finish(struct api_wait *w)
{
	struct api_req *r = w->req;
	struct api_wait done = *w; /* w is freed once its timer closes */

	w->req = NULL;
	wait_free(w);
	if (api_req_dead(r))
		api_req_drop(r);
	else if (done.kind == WAIT_JOB)
		api_job_reply(r, done.job_id);
	else
		reply_page(r, done.since, done.job_id, done.types, done.limit);
}

static void on_timeout(uv_timer_t *t)
{
	struct api_wait *w = t->data;

	wait_finish(w);
}

/* wait_start parks r in a new wait, listed in *list, with a time limit of
 * timeout_ms (< 0: none). Returns 0 or -ENOMEM. */
static int wait_start(struct api_req *r, struct api_wait *proto,
		      struct api_wait **list, int64_t timeout_ms)
{
	struct api *a = r->conn->api;
	struct api_conn *c = r->conn;
	struct api_wait *w = malloc(sizeof *w);

	if (!w)
		return -ENOMEM;
	*w = *proto;
	w->api = a;
	w->req = r;
	uv_timer_init(a->loop, &w->timer);
	w->timer.data = w;
	a->handles++;

	w->next = *list;
	if (w->next)
		w->next->pprev = &w->next;
	*list = w;
	w->pprev = list;
	w->conn_next = c->waits;
	if (w->conn_next)
		w->conn_next->conn_pprev = &w->conn_next;
	c->waits = w;
	w->conn_pprev = &c->waits;

	if (timeout_ms >= 0)
		uv_timer_start(&w->timer, on_timeout, (uint64_t)timeout_ms, 0);
	return 0;
}

/* The default of jobs/wait's until: any status a job does not leave by
 * itself. */
#define DEFAULT_UNTIL                                                          \
	(((1u << STORE_NSTATUS) - 1) &                                         \
	 ~(STORE_MASK(STORE_PENDING) | STORE_MASK(STORE_RUNNING)))

void api_m_jobs_wait(struct api_req *r, json_t *params)
{
	struct api *a = r->conn->api;
	const char *id = api_params_str(params, "id");
	int64_t timeout = api_params_int(params, "timeoutMs", -1);
	unsigned until = api_params_status_mask(json_object_get(params, "until"));
	struct api_wait proto = {.kind = WAIT_JOB};
	struct store_job *job;
	bool now;
	int rc;

	if (!until)
		until = DEFAULT_UNTIL;
	rc = store_get(a->store, id, &job);
	if (rc < 0) {
		api_reply_store_error(r, rc, id);
		return;
	}
	/* A terminal job never changes again: waiting for it to reach some
	 * other status would only wait for the time-out. */
	/* A notification's answer goes nowhere: it does not wait, which
	 * would only hold the connection's room for unanswered requests
	 * (1,024 of them stopped berthd reading it, with no answer to say
	 * so). */
	now = (until & STORE_MASK(job->status)) ||
	      store_status_terminal(job->status) || timeout == 0 || !r->id;
	if (now) {
		api_reply(r, worker_job_to_json(a->worker, job, WORKER_VIEW_RAW));
		store_job_free(job);
		return;
	}
	snprintf(proto.job_id, sizeof proto.job_id, "%s", job->id);
	proto.until = until;
	store_job_free(job);
	if (wait_start(r, &proto, &a->job_waits[bucket_of(proto.job_id)],
		       timeout) < 0)
		api_reply_error(r, API_INTERNAL_ERROR, "out of memory", NULL);
}

void api_m_events_poll(struct api_req *r, json_t *params)
{
	struct api *a = r->conn->api;
	struct api_wait proto = {.kind = WAIT_EVENTS};
	const char *job = api_params_str(params, "jobId");
	int64_t wait_ms = api_params_int(params, "waitMs", 0);
	json_t *page;
	bool more;
	int rc;

	proto.since = api_params_int(params, "since", 0);
	proto.limit = (int)api_params_int(params, "limit", 100);
	proto.types = api_params_event_mask(json_object_get(params, "types"));
	if (job)
		snprintf(proto.job_id, sizeof proto.job_id, "%s", job);
	page = events_page(a, proto.since, job, proto.types, proto.limit, &more,
			   &rc);
	if (!page) {
		api_reply_store_error(r, rc, job);
		return;
	}
	/* A job's log starts with its created event, so an empty page of a
	 * job's events is the one place where the job may not exist: -32011,
	 * as jobs/get and jobs/logs answer, rather than a page that would
	 * stay empty for as long as one waits on it. */
	if (job && !json_array_size(json_object_get(page, "events")) &&
	    (rc = api_job_exists(a, job)) < 0) {
		json_decref(page);
		api_reply_store_error(r, rc, job);
		return;
	}
	/* An empty page read by type whose span stopped short of the end of
	 * the log is answered at once, its next past what it looked at:
	 * events of those types may already be there, and no new one would
	 * wake the wait for them. */
	if (wait_ms == 0 || !r->id ||
	    json_array_size(json_object_get(page, "events")) || more) {
		api_reply(r, page);
		return;
	}
	/* The wait reads on from the end of what this read looked at (by
	 * type, past since; without types, since itself). */
	proto.since = json_integer_value(json_object_get(page, "next"));
	json_decref(page);
	if (wait_start(r, &proto, &a->event_waits, wait_ms) < 0)
		api_reply_error(r, API_INTERNAL_ERROR, "out of memory", NULL);
}

void api_wait_on_event(struct api *a, const struct store_event *ev)
{
	struct api_wait *fired = NULL, *w, *next;

	/* The waits to wake are taken out of the lists first and answered
	 * afterwards: an answer may close a connection, which must not
	 * change a list that is being walked. */
	for (w = a->job_waits[bucket_of(ev->job_id)]; w; w = next) {
		next = w->next;
		if (strcmp(w->job_id, ev->job_id) != 0)
			continue;
		if (!(w->until & STORE_MASK(ev->status)) &&
		    !store_status_terminal(ev->status))
			continue;
		wait_unlink(w);
		w->next = fired;
		fired = w;
	}
	for (w = a->event_waits; w; w = next) {
		next = w->next;
		if (ev->seq <= w->since ||
		    (w->job_id[0] && strcmp(w->job_id, ev->job_id) != 0) ||
		    (w->types && !(w->types & STORE_MASK(ev->type))))
			continue;
		wait_unlink(w);
		w->next = fired;
		fired = w;
	}
	for (w = fired; w; w = next) {
		next = w->next;
		wait_finish(w);
	}
}

void api_wait_end_conn(struct api_conn *c)
{
	/* wait_finish takes each out of c's list before it answers. */
	while (c->waits)
		wait_finish(c->waits);
}

void api_wait_cancel_conn(struct api_conn *c)
{
	while (c->waits) {
		struct api_wait *w = c->waits;
		struct api_req *r = w->req;

		w->req = NULL;
		wait_free(w);
		api_req_drop(r);
	}
}

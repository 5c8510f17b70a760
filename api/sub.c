/*
 * sub.c: event subscriptions (sub.h).
 *
 * A subscription is "replaying" while it reads the log from its last seq
 * in chunks, and "live" once a read comes back short: from then on the
 * store's listener hands it every new event. The listener runs on the
 * loop thread after the commit, so it can never slip between a chunk read
 * and the switch; events the replay already read are skipped by seq.
 */
#include "api/sub.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/methods.h"
#include "api/rpc.h"
#include "log/log.h"

/* Events read from the store per replay step. */
#define REPLAY_CHUNK 256
/* Replay steps per turn of the loop. A replay whose client reads fast, or
 * whose types pass over most of the log and so send nothing, would
 * otherwise read the whole log in one turn while every other connection
 * waits; it goes on in the next turn instead (replay_later). A step is a
 * read of at most REPLAY_CHUNK events, or by type of at most
 * STORE_EVENTS_SCAN seqs: a few milliseconds at most. */
#define REPLAY_STEPS_PER_TURN 1
/* Subscriptions one connection may hold. */
#define MAX_SUBS_PER_CONN 256

struct api_sub {
	struct api_conn *conn;
	char id[32];
	/* ,"subscription":"sub-N"}}: how each of its events/event ends
	 * (send_event); tail_len counts it from the comma. */
	char tail[64];
	size_t tail_len;
	char job_id[40]; /* only this job's events, or "" for all */
	unsigned types;  /* STORE_MASK of the event types it wants; 0: all */
	bool progress;   /* also live events/progress */
	bool replaying;
	bool yielded;     /* its replay waits for its next turn */
	int64_t last_seq; /* the last seq sent (or skipped as not wanted) */
	/* Events its replay reads a step: REPLAY_CHUNK, fewer after a step
	 * the high water cut short (large events), so that what a step
	 * reads is about what it sends. */
	int chunk;

	struct api_sub *next, **pprev;           /* in api->subs */
	struct api_sub *conn_next, **conn_pprev; /* in conn->subs */
};

static void sub_free(struct api_sub *s)
{
	*s->pprev = s->next;
	if (s->next)
		s->next->pprev = s->pprev;
	*s->conn_pprev = s->conn_next;
	if (s->conn_next)
		s->conn_next->conn_pprev = s->conn_pprev;
	s->conn->nsubs--;
	free(s);
}

/* An events/event notification serialized once for every subscriber of
 * its event: head is the message up to the Event's closing brace, and
 * each subscription appends its id (the Event's "subscription" member)
 * and the closing braces. Building and dumping a tree per subscriber cost
 * ~43k instructions per notification; store_json_text, not json_dumps,
 * dumps it (jansson's dumper tracks every container it enters in a hash
 * table, keyed by a snprintf'd pointer). */
struct event_text {
	char *head; /* malloc'd, or NULL until built */
	size_t len;
	bool empty; /* the Event has no member before "subscription" */
};

#define EVENT_PREFIX "{\"jsonrpc\":\"2.0\",\"method\":\"events/event\"," \
		     "\"params\":"

/* event_text_build fills t from ev. Returns 0 or -ENOMEM. */
static int event_text_build(struct event_text *t, const struct store_event *ev)
{
	size_t plen = strlen(EVENT_PREFIX), blen;
	char *body = store_event_text(ev);

	if (!body)
		return -ENOMEM;
	blen = strlen(body); /* an object: "{...}" */
	t->head = malloc(plen + blen);
	if (!t->head) {
		free(body);
		return -ENOMEM;
	}
	memcpy(t->head, EVENT_PREFIX, plen);
	memcpy(t->head + plen, body, blen - 1); /* without its "}" */
	t->len = plen + blen - 1;
	t->empty = blen == 2;
	free(body);
	return 0;
}

/* send_event sends ev to s as an events/event notification whose params
 * are the Event with the subscription's id. t caches the serialized event
 * for the other subscribers of ev (event_text); its owner frees t->head. */
static int send_event(struct api_sub *s, const struct store_event *ev,
		      struct event_text *t)
{
	/* Without its comma when the Event has no member before it. */
	size_t skip = t->empty ? 1 : 0;
	int rc;

	if (!t->head && event_text_build(t, ev))
		return -ENOMEM;
	rc = api_conn_send_text(s->conn, t->head, t->len, s->tail + skip,
				s->tail_len - skip);
	s->last_seq = ev->seq;
	return rc;
}

/* wants is true when ev is of a type s asked for (its job was checked
 * before, by the caller): for the live events, which the replay's reads
 * filter in the store. */
static bool wants(const struct api_sub *s, const struct store_event *ev)
{
	return s->types == 0 || (s->types & STORE_MASK(ev->type)) != 0;
}

/* replay_read reads the next step of s's replay into *evs: the events
 * after its last seq (of its job), or, when it asks for some types, those
 * of them within the next STORE_EVENTS_SCAN seqs (store_events_typed),
 * whose *next passes over the others. *caught_up is set when no event it
 * could want lies past what was read. Returns 0 or a negative errno. */
static int replay_read(struct api_sub *s, struct store_event **evs, size_t *n,
		       int64_t *next, bool *caught_up)
{
	struct store *st = s->conn->api->store;
	const char *job = s->job_id[0] ? s->job_id : NULL;
	bool more;
	int rc;

	if (s->types) {
		struct store_event_query q = {s->last_seq, job, s->types,
					      s->chunk, STORE_EVENTS_SCAN};

		rc = store_events_typed(st, &q, evs, n, next, &more);
		*caught_up = !more;
		return rc;
	}
	rc = store_events(st, s->last_seq, job, s->chunk, evs, n);
	*next = *n ? (*evs)[*n - 1].seq : s->last_seq;
	*caught_up = *n < (size_t)s->chunk;
	return rc;
}

static void on_replay_later(uv_idle_t *h);

/* sub_replay sends s the logged events it has not had yet, until it has
 * caught up (it is then live), its client's queue is full (api_sub_resume
 * goes on once it has drained) or its turn is over (on_replay_later goes
 * on in the next one). */
static void sub_replay(struct api_sub *s)
{
	struct api_conn *c = s->conn;

	for (int step = 0; s->replaying && api_conn_live(c); step++) {
		struct store_event *evs = NULL;
		size_t n = 0;
		int64_t next;
		bool caught_up;
		int rc;

		if (api_conn_pending_bytes(c) >= API_REPLAY_HIGH_WATER) {
			c->replay_blocked = true;
			return;
		}
		if (step == REPLAY_STEPS_PER_TURN) {
			uv_idle_t *later = &c->api->replay_later;

			/* (A connection is live only while the api runs, so
			 * the handle is not closing; the test keeps it so.) */
			s->yielded = true;
			if (!uv_is_closing((uv_handle_t *)later))
				uv_idle_start(later, on_replay_later);
			return;
		}
		rc = replay_read(s, &evs, &n, &next, &caught_up);
		if (rc < 0) {
			/* Going live here would leave a gap, so the client
			 * is cut off; it resumes with since. */
			log_warn("connection %llu: closed: "
				 "cannot read the event log (%s)",
				(unsigned long long)c->id, strerror(-rc));
			api_conn_close(c);
			return;
		}
		/* Every event read is one it wants: the read filtered by
		 * its types. The step stops at the high water (large
		 * events), and the next one reads on after the last sent. */
		size_t sent = 0;

		for (; sent < n && api_conn_live(c) &&
		       api_conn_pending_bytes(c) < API_REPLAY_HIGH_WATER;
		     sent++) {
			struct event_text t = {0};

			send_event(s, &evs[sent], &t);
			free(t.head);
		}
		for (size_t i = 0; i < n; i++)
			store_event_finish(&evs[i]);
		free(evs);
		if (sent < n) {
			s->chunk = sent ? (int)sent : 1;
			continue;
		}
		if (s->chunk < REPLAY_CHUNK)
			s->chunk = s->chunk * 2 < REPLAY_CHUNK ? s->chunk * 2
							       : REPLAY_CHUNK;
		/* The next read starts after what this one looked at, the
		 * events it passed over included. */
		if (next > s->last_seq)
			s->last_seq = next;
		if (caught_up)
			s->replaying = false;
	}
}

/* on_replay_later goes on with the replays that gave up their turn. */
static void on_replay_later(uv_idle_t *h)
{
	struct api *a = h->data;

	uv_idle_stop(h);
	/* A replay may close its connection, but a connection lets go of
	 * its subscriptions only in its close callback: the list does not
	 * change under this walk. */
	for (struct api_sub *s = a->subs; s; s = s->next) {
		if (!s->yielded)
			continue;
		s->yielded = false;
		if (s->replaying && !s->conn->replay_blocked)
			sub_replay(s);
	}
}

void api_m_events_subscribe(struct api_req *r, json_t *params)
{
	struct api_conn *c = r->conn;
	struct api *a = c->api;
	const char *job = api_params_str(params, "jobId");
	struct api_sub *s;
	int rc;

	/* A subscription to a job that is not stored would wait for events
	 * that never come: -32011, as events/poll answers. */
	if (job && (rc = api_job_exists(a, job)) < 0) {
		api_reply_store_error(r, rc, job);
		return;
	}
	if (c->nsubs >= MAX_SUBS_PER_CONN) {
		api_reply_error(r, API_OVERLOADED, "overloaded: too many "
				"subscriptions on this connection",
				api_rpc_limit(MAX_SUBS_PER_CONN));
		return;
	}
	s = calloc(1, sizeof *s);
	if (!s) {
		api_reply_error(r, API_INTERNAL_ERROR, "out of memory", NULL);
		return;
	}
	s->conn = c;
	s->chunk = REPLAY_CHUNK;
	snprintf(s->id, sizeof s->id, "sub-%llu",
		 (unsigned long long)++a->next_sub_id);
	/* s->id is "sub-N": nothing in it needs escaping. */
	s->tail_len = (size_t)snprintf(s->tail, sizeof s->tail,
				       ",\"subscription\":\"%s\"}}", s->id);
	if (job)
		snprintf(s->job_id, sizeof s->job_id, "%s", job);
	s->progress = api_params_bool(params, "progress", false);
	s->types = api_params_event_mask(json_object_get(params, "types"));
	/* Without since, the subscription starts with what happens next. */
	s->last_seq = api_params_int(params, "since", -1);
	if (s->last_seq < 0)
		s->last_seq = store_last_seq(a->store);
	s->replaying = true;

	s->next = a->subs;
	if (s->next)
		s->next->pprev = &s->next;
	a->subs = s;
	s->pprev = &a->subs;
	s->conn_next = c->subs;
	if (s->conn_next)
		s->conn_next->conn_pprev = &s->conn_next;
	c->subs = s;
	s->conn_pprev = &c->subs;
	c->nsubs++;

	/* The answer goes first, so that the client knows the subscription
	 * before its first notification. */
	api_reply(r, json_pack("{s:s}", "subscription", s->id));
	sub_replay(s);
}

void api_m_events_unsubscribe(struct api_req *r, json_t *params)
{
	const char *id = api_params_str(params, "subscription");

	for (struct api_sub *s = r->conn->subs; s; s = s->conn_next) {
		if (strcmp(s->id, id) == 0) {
			sub_free(s);
			api_reply(r, json_object());
			return;
		}
	}
	api_reply_error(r, API_NOT_FOUND, "not found: no such subscription "
			"on this connection", json_pack("{s:s}", "id", id));
}

void api_sub_on_event(struct api *a, const struct store_event *ev)
{
	/* Sending may start closing a connection, but a connection only
	 * lets go of its subscriptions in its close callback, so the list
	 * does not change under this walk. */
	struct event_text t = {0};

	for (struct api_sub *s = a->subs; s; s = s->next) {
		if (s->replaying || ev->seq <= s->last_seq ||
		    !api_conn_live(s->conn))
			continue;
		if (s->job_id[0] && strcmp(s->job_id, ev->job_id) != 0)
			continue;
		if (!wants(s, ev))
			continue;
		send_event(s, ev, &t);
	}
	free(t.head);
}

void api_sub_on_progress(struct api *a, const char *job_id,
			 const json_t *progress)
{
	for (struct api_sub *s = a->subs; s; s = s->next) {
		json_t *params, *msg;

		if (!s->progress || !api_conn_live(s->conn))
			continue;
		if (s->job_id[0] && strcmp(s->job_id, job_id) != 0)
			continue;
		params = json_pack("{s:s, s:s}", "subscription", s->id,
				   "jobId", job_id);
		if (!params)
			continue;
		if (json_is_object(progress))
			json_object_update(params, (json_t *)progress);
		msg = json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method",
				"events/progress", "params", params);
		if (msg)
			api_conn_send(s->conn, msg);
		json_decref(msg);
	}
}

void api_sub_resume(struct api_conn *c)
{
	c->replay_blocked = false;
	for (struct api_sub *s = c->subs; s && !c->replay_blocked;
	     s = s->conn_next)
		if (s->replaying)
			sub_replay(s);
}

void api_sub_cancel_conn(struct api_conn *c)
{
	while (c->subs)
		sub_free(c->subs);
}

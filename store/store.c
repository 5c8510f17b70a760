/*
 * store.c: the store's front: open and close, the group-commit writer,
 * delivery of results to the loop thread, listeners, and the reads, each
 * dispatched to the backend's table (store_int.h).
 *
 * Group commit. store_submit serializes a request's JSON on the loop thread
 * and queues it. The writer thread takes everything queued (up to
 * max_batch) and applies it in one transaction; while that commit and its
 * fsync run, new requests queue up and form the next transaction. A
 * settled batch goes onto the delivery list and the loop thread is woken
 * (common/wakeup.h: uv_async_send's way, without its spin); since wake-ups
 * coalesce, the loop drains the whole list each time.
 *
 * A shared backend (PostgreSQL: several nodes on one database) also
 * commits events this node did not make. Listeners then get every event by
 * seq: deliver and the notification handler read the events between the
 * last one delivered and the next local one from the database (catch_up),
 * so each listener sees each committed event once, in seq order, whichever
 * node made it. A timer (tick) renews this node's leases, recovers the
 * jobs of nodes whose leases expired, and catches up in case a
 * notification was lost.
 */
#include <ctype.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/wakeup.h"
#include "log/log.h"
#include "store/jload.h"
#include "store/store.h"
#include "store/store_int.h"

enum { DEFAULT_MAX_BATCH = 1024 };

/* A batch that holds a claim takes at most this many other requests.
 * Claims go first into the next batch, whatever is queued ahead of them:
 * while a flood of submissions keeps the queue full, a claim would
 * otherwise wait behind batches of max_batch submissions and jobs would
 * hardly run (146 jobs/s during a fill of 512 submissions in flight).
 * Taking a claim ahead of requests queued before it is safe: none of them
 * is answered yet, so they are concurrent with it, and a claim that does
 * not see a job (a submit, a resume, a final transition to pending) is
 * followed by another, which that commit's event asks for. A claim that
 * still counts a run whose end is queued behind it (a limited tool on a
 * shared database, where the store counts the running jobs) is followed
 * by the one that end's commit asks for (worker/run.c, final_done). */
enum { CLAIM_BATCH_OTHERS = 32 };

/* A batch that failed on a deadlock or a serialization failure (two
 * nodes' transactions crossing) is run again this many times. */
enum { MAX_BATCH_TRIES = 5 };

struct listener {
	store_listener_fn fn; /* NULL once removed during a delivery */
	void *arg;
};

struct store {
	uv_loop_t *loop;
	const struct store__backend *ops;
	void *be;
	char *path;
	int durability;
	int max_batch;

	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t work;    /* the writer waits here for requests */
	pthread_cond_t settled; /* a synchronous caller waits for a batch */
	/* Under mu: requests waiting for the writer, settled batches
	 * waiting for delivery, and the writer's state. */
	struct store__wreq *qhead, *qtail;
	int qclaims; /* STORE_OP_CLAIM requests in the queue */
	struct store__batch *dhead, *dtail;
	bool stop;
	bool writer_done;
	/* The integrity check the writer ran first failed (store_config's
	 * check_inline_max): every request fails with this code, and the
	 * loop thread reports failed_msg once (on_fatal). */
	int failed;
	char *failed_msg;
	/* The writer sleeps on work. The first request queued wakes it,
	 * after unlocking mu; the others of the same burst find it awake.
	 * A signal per request, under mu, made waking threads 27 % of the
	 * loop thread's perf samples (docs/BENCHMARKS.md). */
	bool writer_waiting;
	/* Jobs claimed by committed batches not yet delivered: the writer
	 * adds them before its commit makes them visible, delivery takes
	 * them off as each claim's done runs (store_claimed_undelivered). */
	atomic_int claimed;

	/* Loop thread: requests held back by store_hold, in order. */
	int holds;
	struct store__wreq *hhead, *htail;

	/* Loop thread only. */
	struct wakeup wake; /* the writer's: a batch settled */
	bool closing;
	bool closed;
	bool delivering;
	void (*close_done)(void *arg);
	void *close_arg;
	struct listener *listeners;
	size_t nlisteners, cap_listeners;
	bool listeners_dirty;
	int64_t delivered; /* the last seq given to the listeners */

	/* Loop thread, shared backends only. */
	uv_poll_t poll;
	int poll_fd; /* -1: not polling */
	uv_timer_t tick;
	bool ticking;
	int nclosing; /* handles whose close callbacks are still due */
	bool recovering; /* store_recover ran, store_requeue_running not */
	void (*on_fatal)(void *arg, const char *message);
	void *fatal_arg;
	bool fatal_told;
	bool (*may_rerun)(void *arg, const char *tool);
	void *may_rerun_arg;
	bool (*known)(void *arg, const char *tool); /* store_know_tools */
	void *known_arg;
};

/* ---- batches ----------------------------------------------------------- */

int store__batch_event(struct store__batch *b, int64_t seq, const char *job_id,
		       const char *tool, int type, int status, int64_t at,
		       json_t *data, const struct store__who *who)
{
	if (b->nevents == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 64;
		void *v = realloc(b->events, cap * sizeof(*b->events));
		if (v == NULL)
			return -ENOMEM;
		b->events = v;
		b->cap = cap;
	}
	struct store_event *ev = &b->events[b->nevents];
	ev->tool = (char *)tool; /* borrowed, as data is */
	ev->seq = seq;
	size_t len = strnlen(job_id, sizeof(ev->job_id) - 1);
	memcpy(ev->job_id, job_id, len);
	ev->job_id[len] = '\0';
	ev->type = type;
	ev->status = status;
	ev->at = at;
	ev->data = data; /* borrowed from the request */
	ev->by = (char *)(who && who->by ? who->by : STORE_BERTHD);
	ev->via = (char *)(who && who->via ? who->via : STORE_BERTHD);
	ev->client = who ? who->client : NULL;
	b->nevents++;
	return 0;
}

int store__wreq_raw(struct store__wreq *w, json_t **field, const char *text,
		    size_t len)
{
	if (w->nraw == w->cap_raw) {
		size_t cap = w->cap_raw ? w->cap_raw * 2 : 4;
		void *v = realloc(w->raw, cap * sizeof(*w->raw));
		if (v == NULL)
			return -ENOMEM;
		w->raw = v;
		w->cap_raw = cap;
	}
	char *t = malloc(len + 1);
	if (t == NULL)
		return -ENOMEM;
	memcpy(t, text, len);
	t[len] = '\0';
	w->raw[w->nraw++] = (struct store__raw){field, t};
	return 0;
}

/* drop_raw forgets the values still to parse (their jobs are gone or
 * parsed). */
static void drop_raw(struct store__wreq *w)
{
	for (size_t i = 0; i < w->nraw; i++)
		free(w->raw[i].text);
	w->nraw = 0;
}

/* parse_raw parses the JSON texts the writer left in w's result jobs. A
 * text that does not parse (it was stored by this store, so only when out
 * of memory) leaves the value absent, as a read of the row would. */
static void parse_raw(struct store__wreq *w)
{
	for (size_t i = 0; i < w->nraw; i++)
		*w->raw[i].field = store_json_load(w->raw[i].text,
						   strlen(w->raw[i].text),
						   JSON_DECODE_ANY, NULL);
	drop_raw(w);
}

static void batch_drop_events(struct store__batch *b)
{
	b->nevents = 0;
}

static void wreq_free(struct store__wreq *w)
{
	if (w->text[STORE__T_EVENT] == w->text[STORE__T_INPUT] ||
	    w->text[STORE__T_EVENT] == w->text[STORE__T_OUTPUT])
		w->text[STORE__T_EVENT] = NULL; /* shared (see prepare) */
	for (int i = 0; i < STORE__T_COUNT; i++)
		free(w->text[i]);
	if (w->line_data != NULL) {
		for (size_t i = 0; i < w->req->u.log.nlines; i++)
			free(w->line_data[i]);
		free(w->line_data);
	}
	store_job_free(w->job);
	drop_raw(w);
	free(w->raw);
	free(w);
}

/* ---- the writer thread ------------------------------------------------- */

/* run_batch applies b in one transaction. A request's logical failure is
 * its own; a storage failure rolls back the transaction and fails every
 * request of it with that code, results dropped. */
static void run_batch(struct store *st, struct store__batch *b)
{
	for (int tries = 1;; tries++) {
		int rc = st->ops->begin(st->be);
		int claimed = 0;
		for (struct store__wreq *w = b->head; rc == 0 && w != NULL; w = w->next)
			rc = st->ops->apply(st->be, w, b);
		if (rc == 0 && st->ops->settle != NULL)
			rc = st->ops->settle(st->be);
		for (struct store__wreq *w = b->head; rc == 0 && w != NULL; w = w->next)
			if (w->req->op == STORE_OP_CLAIM && w->rc == 0)
				claimed += (int)w->req->njobs;
		atomic_fetch_add(&st->claimed, claimed);
		if (rc == 0)
			rc = st->ops->commit(st->be);
		if (rc == 0)
			return;

		atomic_fetch_sub(&st->claimed, claimed);
		st->ops->rollback(st->be);
		batch_drop_events(b);
		for (struct store__wreq *w = b->head; w != NULL; w = w->next) {
			drop_raw(w);
			w->absorbed = false;
			store_req_finish(w->req);
			w->req->existed = false;
			w->req->count = 0;
			w->req->next_run_at = 0;
			w->rc = rc;
		}
		/* -EDEADLK: nothing was written; running the same requests
		 * again is safe. */
		if (rc != -EDEADLK || tries == MAX_BATCH_TRIES)
			return;
	}
}

static void *writer_main(void *arg)
{
	struct store *st = arg;

	pthread_setname_np(pthread_self(), "berth-writer");
	/* The check open left to the writer runs before anything is written;
	 * requests queue behind it. */
	if (st->ops->check != NULL) {
		char *msg = NULL;
		int rc = st->ops->check(st->be, &msg);
		if (rc != 0) {
			log_error("%s", msg != NULL ? msg : "the database fails its integrity check");
			pthread_mutex_lock(&st->mu);
			st->failed = rc;
			st->failed_msg = msg;
			pthread_mutex_unlock(&st->mu);
			wakeup_send(&st->wake);
		}
	}
	pthread_mutex_lock(&st->mu);
	for (;;) {
		while (st->qhead == NULL && !st->stop) {
			st->writer_waiting = true;
			pthread_cond_wait(&st->work, &st->mu);
		}
		st->writer_waiting = false;
		if (st->qhead == NULL)
			break;

		struct store__batch *b;
		while ((b = calloc(1, sizeof(*b))) == NULL) {
			/* Nothing can be answered without a batch; wait for
			 * memory rather than drop requests. */
			pthread_mutex_unlock(&st->mu);
			nanosleep(&(struct timespec){0, 1000000}, NULL);
			pthread_mutex_lock(&st->mu);
		}
		struct store__wreq *first = NULL, *last = NULL;
		size_t max = (size_t)st->max_batch;
		if (st->qclaims > 0) {
			/* Claims first (see CLAIM_BATCH_OTHERS), still at
			 * most max_batch requests: max_batch 1 (one
			 * transaction per request, bench_store's baseline)
			 * must stay one. */
			struct store__wreq **pp = &st->qhead, *prev = NULL;
			while (*pp != NULL && b->n < max) {
				struct store__wreq *w = *pp;
				if (w->req->op != STORE_OP_CLAIM) {
					prev = w;
					pp = &w->next;
					continue;
				}
				*pp = w->next;
				if (st->qtail == w)
					st->qtail = prev;
				w->next = NULL;
				if (last != NULL)
					last->next = w;
				else
					first = w;
				last = w;
				b->n++;
			}
			st->qclaims -= (int)b->n;
			if (b->n + CLAIM_BATCH_OTHERS < max)
				max = b->n + CLAIM_BATCH_OTHERS;
		}
		if (st->qhead != NULL && b->n < max) {
			if (last != NULL)
				last->next = st->qhead;
			else
				first = st->qhead;
			last = st->qhead;
			b->n++;
			while (last->next != NULL && b->n < max) {
				last = last->next;
				b->n++;
			}
			st->qhead = last->next;
			if (st->qhead == NULL)
				st->qtail = NULL;
			last->next = NULL;
		}
		b->head = first;
		pthread_mutex_unlock(&st->mu);

		if (st->failed != 0) {
			/* The database failed its check: nothing touches it. */
			for (struct store__wreq *w = b->head; w != NULL; w = w->next)
				w->rc = st->failed;
		} else {
			run_batch(st, b);
		}

		pthread_mutex_lock(&st->mu);
		for (struct store__wreq *w = b->head; w != NULL; w = w->next)
			w->durable = true;
		if (st->dtail != NULL)
			st->dtail->next = b;
		else
			st->dhead = b;
		st->dtail = b;
		pthread_cond_broadcast(&st->settled);
		wakeup_send(&st->wake);
	}
	st->writer_done = true;
	pthread_mutex_unlock(&st->mu);
	wakeup_send(&st->wake);
	return NULL;
}

/* ---- delivery on the loop thread --------------------------------------- */

static void compact_listeners(struct store *st)
{
	size_t k = 0;
	for (size_t i = 0; i < st->nlisteners; i++)
		if (st->listeners[i].fn != NULL)
			st->listeners[k++] = st->listeners[i];
	st->nlisteners = k;
	st->listeners_dirty = false;
}

/* call_listeners gives ev to every listener and records it delivered. */
static void call_listeners(struct store *st, const struct store_event *ev)
{
	for (size_t i = 0; i < st->nlisteners; i++)
		if (st->listeners[i].fn != NULL)
			st->listeners[i].fn(st->listeners[i].arg, ev);
	st->delivered = ev->seq;
}

/*
 * catch_up gives the listeners the committed events after the last one
 * delivered, up to upto (INT64_MAX: all), read from the database. On a
 * shared backend they include other nodes' events; seqs become visible in
 * order (docs/POSTGRES.md), so reading after the last seq delivered skips
 * none. A read failure leaves the rest for the next call.
 */
static void catch_up(struct store *st, int64_t upto)
{
	while (st->delivered < upto) {
		struct store_event *v = NULL;
		size_t n = 0;
		if (st->ops->events(st->be, st->delivered, NULL, 256, &v, &n) != 0)
			return;
		for (size_t i = 0; i < n; i++) {
			if (v[i].seq <= upto)
				call_listeners(st, &v[i]);
			store_event_finish(&v[i]);
		}
		free(v);
		if (n < 256) {
			/* Events of pruned jobs are gone; the ones up to
			 * upto are committed, so none can come later. */
			if (upto != INT64_MAX && st->delivered < upto)
				st->delivered = upto;
			return;
		}
	}
}

/* emit gives a local batch's event to the listeners: once, and after the
 * events of other nodes that committed before it. */
static void emit(struct store *st, const struct store_event *ev)
{
	if (ev->seq <= st->delivered && st->ops->shared)
		return;
	if (st->ops->shared && ev->seq > st->delivered + 1)
		catch_up(st, ev->seq - 1);
	call_listeners(st, ev);
}

static void free_store(struct store *st)
{
	pthread_mutex_destroy(&st->mu);
	pthread_cond_destroy(&st->work);
	pthread_cond_destroy(&st->settled);
	free(st->listeners);
	free(st->path);
	free(st->failed_msg);
	free(st);
}

static void on_closed(uv_handle_t *h)
{
	struct store *st = h->data;
	if (--st->nclosing > 0)
		return;
	if (st->close_done != NULL)
		st->close_done(st->close_arg);
	free_store(st);
}

static void finish_close(struct store *st)
{
	st->closed = true;
	pthread_join(st->thread, NULL);
	/* The poll goes before the backend closes the socket it watches. */
	st->nclosing++;
	if (st->poll_fd >= 0) {
		st->nclosing++;
		uv_close((uv_handle_t *)&st->poll, on_closed);
		st->poll_fd = -1;
	}
	if (st->ticking) {
		st->nclosing++;
		uv_close((uv_handle_t *)&st->tick, on_closed);
		st->ticking = false;
	}
	st->ops->close(st->be);
	st->be = NULL;
	wakeup_close(&st->wake, on_closed);
}

/*
 * deliver answers the settled batches, oldest first. This is the one place
 * that makes a mutation's result visible: the writer put a batch here only
 * after its transaction committed (durably, under synchronous=FULL) or
 * rolled back. Listeners see each event first, in seq order; then each
 * request's done runs, once.
 */
static void deliver(struct store *st)
{
	struct store__batch *b;
	bool finished, more;

	/* Only the batches committed before this call: one committed while
	 * their callbacks run waits for the next loop turn (the writer's
	 * wakeup_send woke it). What these callbacks gathered for a
	 * client (replies, written before the loop blocks) then leaves
	 * before a later commit's callbacks act on it: the claim that starts
	 * a job comes after its submission was answered, as DESIGN.md
	 * promises, even when the loop thread was held up long enough for
	 * the writer to commit the claim meanwhile. */
	st->delivering = true;
	pthread_mutex_lock(&st->mu);
	b = st->dhead;
	st->dhead = st->dtail = NULL;
	pthread_mutex_unlock(&st->mu);
	while (b != NULL) {
		for (size_t e = 0; e < b->nevents; e++)
			emit(st, &b->events[e]);
		struct store__wreq *w = b->head;
		while (w != NULL) {
			struct store__wreq *next = w->next;
			struct store_req *req = w->req;
			int rc = w->rc;
			parse_raw(w);
			if (rc == 0 && ((req->op == STORE_OP_CREATE &&
					 !req->existed) ||
					w->absorbed)) {
				req->job = w->job;
				w->job = NULL;
			}
			wreq_free(w);
			if (req->op == STORE_OP_CLAIM && rc == 0)
				atomic_fetch_sub(&st->claimed,
						 (int)req->njobs);
			req->done(req, rc);
			w = next;
		}
		struct store__batch *nb = b->next;
		batch_drop_events(b);
		free(b->events);
		free(b);
		b = nb;
	}
	pthread_mutex_lock(&st->mu);
	more = st->dhead != NULL;
	finished = !more && st->writer_done;
	pthread_mutex_unlock(&st->mu);
	st->delivering = false;
	if (more)
		wakeup_send(&st->wake);
	if (st->listeners_dirty)
		compact_listeners(st);
	if (finished && st->closing && !st->closed)
		finish_close(st);
}

/* report_failure tells on_fatal, once, that the database failed the
 * check the writer ran first. From the loop's callback only: the caller
 * may stop everything from there. */
static void report_failure(struct store *st)
{
	pthread_mutex_lock(&st->mu);
	int failed = st->failed;
	pthread_mutex_unlock(&st->mu);
	if (failed == 0 || st->fatal_told || st->closing)
		return;
	st->fatal_told = true;
	if (st->on_fatal != NULL)
		st->on_fatal(st->fatal_arg, st->failed_msg != NULL
						    ? st->failed_msg
						    : "the database fails its integrity check");
}

static void on_wake(struct wakeup *w)
{
	struct store *st = w->poll.data;

	report_failure(st);
	deliver(st);
}

/* ---- opening and closing ----------------------------------------------- */

static void set_errmsg(char **errmsg, const char *s)
{
	if (errmsg != NULL && *errmsg == NULL)
		*errmsg = strdup(s);
}

static void on_open_failed(uv_handle_t *h)
{
	free_store(h->data);
}

/* ---- shared backends: notifications and the tick ----------------------- */

static void watch(struct store *st);

static void on_poll(uv_poll_t *h, int status, int events)
{
	struct store *st = h->data;
	if (st->closing)
		return;
	int rc = st->ops->notified(st->be);
	if (rc < 0) {
		/* The connection is lost: stop polling it; the tick
		 * reconnects and polls the new one. */
		uv_poll_stop(&st->poll);
		return;
	}
	if (rc > 0 && !st->delivering) {
		st->delivering = true;
		catch_up(st, INT64_MAX);
		st->delivering = false;
		if (st->listeners_dirty)
			compact_listeners(st);
	}
}

static void on_poll_replaced(uv_handle_t *h)
{
	struct store *st = h->data;
	if (st->closed) {
		on_closed(h);
		return;
	}
	st->nclosing--;
	watch(st);
}

/* watch polls the backend's notification socket, again when it changed. */
static void watch(struct store *st)
{
	int fd = st->ops->watch_fd(st->be);
	if (st->closing || st->nclosing > 0)
		return;
	if (st->poll_fd >= 0 && st->poll_fd != fd) {
		/* A new connection: the old handle must close first. */
		st->nclosing++;
		st->poll_fd = -1;
		uv_close((uv_handle_t *)&st->poll, on_poll_replaced);
		return;
	}
	if (fd < 0 || st->poll_fd == fd) {
		if (fd >= 0)
			uv_poll_start(&st->poll, UV_READABLE, on_poll);
		return;
	}
	if (uv_poll_init(st->loop, &st->poll, fd) != 0)
		return;
	st->poll.data = st;
	st->poll_fd = fd;
	uv_poll_start(&st->poll, UV_READABLE, on_poll);
}

/* rerun answers for the tick's recoveries with store_recover's policy,
 * and -1 for a tool this node does not know (store_know_tools), whose
 * policy is a node's that has it. */
static int rerun(void *arg, const char *tool)
{
	struct store *st = arg;
	if (st->known != NULL && !st->known(st->known_arg, tool))
		return -1;
	return st->may_rerun == NULL || st->may_rerun(st->may_rerun_arg, tool);
}

void store_know_tools(struct store *st, bool (*known)(void *arg, const char *tool),
		      void *arg)
{
	st->known = known;
	st->known_arg = arg;
}

static void on_tick(uv_timer_t *h)
{
	struct store *st = h->data;
	if (st->closing)
		return;
	st->ops->tick(st->be, st->recovering ? rerun : NULL, st);
	watch(st);
	if (!st->delivering) {
		st->delivering = true;
		catch_up(st, INT64_MAX);
		st->delivering = false;
		if (st->listeners_dirty)
			compact_listeners(st);
	}
}

/* secret_key is true for a URI query parameter that holds a password
 * (libpq's password and sslpassword), given its key's n characters as
 * written: libpq decodes %XX in keys too, so "pass%77ord" is one. */
static bool secret_key(const char *k, size_t n)
{
	char key[16];
	size_t len = 0;
	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)k[i];
		if (c == '%' && i + 2 < n &&
		    isxdigit((unsigned char)k[i + 1]) &&
		    isxdigit((unsigned char)k[i + 2])) {
			char hex[3] = {k[i + 1], k[i + 2], '\0'};
			c = (int)strtol(hex, NULL, 16);
			i += 2;
		}
		if (len + 1 >= sizeof(key))
			return false;
		key[len++] = (char)c;
	}
	key[len] = '\0';
	return strcmp(key, "password") == 0 || strcmp(key, "sslpassword") == 0;
}

/* redact returns a malloc'd copy of a URL with every password replaced by
 * "***", for server/info and logs: the one of user:password@ and those
 * of the query's password= (and sslpassword=), which libpq takes as
 * well, wherever they are. Anything else is copied as is. */
static char *redact(const char *url)
{
	const char *scheme = strstr(url, "://");
	if (!store__is_pg_url(url) || scheme == NULL)
		return strdup(url);
	size_t len = strlen(url);
	/* A password, even an empty one, becomes "***": 3 characters more
	 * at most for the userinfo's, and for each of the query's, which
	 * takes 9 characters of url or more ("password="). */
	char *s = malloc(len + 3 * (len / 9 + 2) + 1);
	if (s == NULL)
		return NULL;
	const char *p = scheme + 3;
	size_t o = (size_t)(p - url);
	memcpy(s, url, o);
	/* The userinfo ends at the first '@' before any '/' (libpq's own
	 * reading of the URI). */
	const char *at = strchr(p, '@');
	const char *slash = strchr(p, '/');
	if (at != NULL && (slash == NULL || at < slash)) {
		const char *colon = memchr(p, ':', (size_t)(at - p));
		if (colon != NULL) {
			memcpy(s + o, p, (size_t)(colon - p));
			o += (size_t)(colon - p);
			memcpy(s + o, ":***", 4);
			o += 4;
			p = at;
		}
	}
	const char *q = strchr(p, '?');
	if (q == NULL)
		q = url + len;
	memcpy(s + o, p, (size_t)(q - p));
	o += (size_t)(q - p);
	/* The query: key=value pairs split by '&'. */
	while (*q != '\0') {
		s[o++] = *q++; /* the '?' or '&' */
		size_t n = strcspn(q, "&");
		const char *eq = memchr(q, '=', n);
		if (eq != NULL && secret_key(q, (size_t)(eq - q))) {
			memcpy(s + o, q, (size_t)(eq - q) + 1);
			o += (size_t)(eq - q) + 1;
			memcpy(s + o, "***", 3);
			o += 3;
		} else {
			memcpy(s + o, q, n);
			o += n;
		}
		q += n;
	}
	s[o] = '\0';
	return s;
}

int store_open(uv_loop_t *loop, const struct store_config *cfg,
	       struct store **out, char **errmsg)
{
	char *msg = NULL;
	if (errmsg == NULL)
		errmsg = &msg;
	*errmsg = NULL;
	*out = NULL;
	if (cfg == NULL || cfg->path == NULL || cfg->path[0] == '\0') {
		set_errmsg(errmsg, "no database path was given");
		return -EINVAL;
	}
	const struct store__backend *ops = &store__sqlite;
	if (store__is_pg_url(cfg->path)) {
#ifdef BERTH_HAVE_PQ
		ops = &store__pg;
#else
		set_errmsg(errmsg, "this berth was built without PostgreSQL (libpq)");
		return -ENOTSUP;
#endif
	}

	struct store *st = calloc(1, sizeof(*st));
	if (st == NULL || (st->path = redact(cfg->path)) == NULL) {
		free(st);
		set_errmsg(errmsg, "out of memory");
		return -ENOMEM;
	}
	st->loop = loop;
	st->ops = ops;
	st->poll_fd = -1;
	st->durability = cfg->durability == STORE_DURABILITY_NORMAL
				 ? STORE_DURABILITY_NORMAL
				 : STORE_DURABILITY_FULL;
	st->max_batch = cfg->max_batch > 0 ? cfg->max_batch : DEFAULT_MAX_BATCH;
	st->on_fatal = cfg->on_fatal;
	st->fatal_arg = cfg->fatal_arg;
	pthread_mutex_init(&st->mu, NULL);
	pthread_cond_init(&st->work, NULL);
	pthread_cond_init(&st->settled, NULL);

	int rc = st->ops->open(cfg, &st->be, errmsg);
	if (rc != 0) {
		set_errmsg(errmsg, "cannot open the database");
		on_open_failed(&(uv_handle_t){.data = st});
		free(msg);
		return rc;
	}
	rc = wakeup_init(loop, &st->wake, on_wake);
	if (rc != 0) {
		st->ops->close(st->be);
		set_errmsg(errmsg, "cannot create the store's wake-up handle");
		on_open_failed(&(uv_handle_t){.data = st});
		free(msg);
		return rc;
	}
	st->wake.poll.data = st;
	int64_t last = st->ops->last_seq(st->be);
	st->delivered = last > 0 ? last : 0;
	rc = pthread_create(&st->thread, NULL, writer_main, st);
	if (rc != 0) {
		st->ops->close(st->be);
		set_errmsg(errmsg, "cannot start the store's writer thread");
		wakeup_close(&st->wake, on_open_failed);
		free(msg);
		return -rc;
	}
	free(msg);
	if (st->ops->shared) {
		uv_timer_init(loop, &st->tick);
		st->tick.data = st;
		st->ticking = true;
		uint64_t every = (uint64_t)st->ops->tick_ms(st->be);
		uv_timer_start(&st->tick, on_tick, every, every);
		watch(st);
	}
	*out = st;
	return 0;
}

void store_close(struct store *st, void (*done)(void *arg), void *arg)
{
	if (st->closing)
		return;
	st->closing = true;
	st->close_done = done;
	st->close_arg = arg;
	/* Whatever a hold kept back is written before the close. */
	st->holds = 1;
	store_release(st);
	pthread_mutex_lock(&st->mu);
	st->stop = true;
	pthread_cond_signal(&st->work);
	pthread_mutex_unlock(&st->mu);
	/* The writer commits what it holds, then wakes the loop; deliver
	 * answers the last requests and finishes the close. */
}

const char *store_durability_name(const struct store *st)
{
	return st->durability == STORE_DURABILITY_NORMAL ? "normal" : "full";
}

const char *store_path(const struct store *st)
{
	return st->path;
}

bool store_shared(const struct store *st)
{
	return st->ops->shared;
}

/* ---- listeners --------------------------------------------------------- */

int store_add_listener(struct store *st, store_listener_fn fn, void *arg)
{
	if (st->nlisteners == st->cap_listeners) {
		size_t cap = st->cap_listeners ? st->cap_listeners * 2 : 4;
		void *v = realloc(st->listeners, cap * sizeof(*st->listeners));
		if (v == NULL)
			return -ENOMEM;
		st->listeners = v;
		st->cap_listeners = cap;
	}
	st->listeners[st->nlisteners++] = (struct listener){fn, arg};
	return 0;
}

void store_remove_listener(struct store *st, store_listener_fn fn, void *arg)
{
	for (size_t i = 0; i < st->nlisteners; i++) {
		if (st->listeners[i].fn == fn && st->listeners[i].arg == arg) {
			st->listeners[i].fn = NULL;
			st->listeners_dirty = true;
			break;
		}
	}
	if (!st->delivering)
		compact_listeners(st);
}

/* ---- submitting -------------------------------------------------------- */

/* dump serializes v (NULL stays NULL) into *out. Returns false when v
 * cannot be serialized (out of memory, or a NaN). */
static bool dump(json_t *v, char **out)
{
	*out = NULL;
	if (v == NULL)
		return true;
	*out = store__json_text(v);
	return *out != NULL;
}

static bool valid_id(const char *id)
{
	return id[0] != '\0' && memchr(id, '\0', 40) != NULL;
}

/* check returns 0 when req is well formed, else -EINVAL. */
static int check(const struct store_req *req)
{
	switch (req->op) {
	case STORE_OP_CREATE: {
		const struct store_job *j = req->u.create.job;
		if (j == NULL || j->tool == NULL || memchr(j->id, '\0', 40) == NULL ||
		    (j->status != STORE_PENDING &&
		     j->status != STORE_AWAITING_APPROVAL))
			return -EINVAL;
		if (req->u.create.start &&
		    (j->status != STORE_PENDING || j->idempotency_key != NULL))
			return -EINVAL;
		return 0;
	}
	case STORE_OP_TRANSITION: {
		const struct store_transition *t = &req->u.transition;
		unsigned all = (1u << STORE_NSTATUS) - 1;
		/* A terminal job never changes again. */
		if (!valid_id(t->job_id) || t->from_mask == 0 ||
		    (t->from_mask & ~all) != 0 ||
		    (t->from_mask & STORE_MASK_TERMINAL) != 0 || t->to < 0 ||
		    t->to >= STORE_NSTATUS || t->event < 0 ||
		    t->event >= STORE_NEVENT)
			return -EINVAL;
		return 0;
	}
	case STORE_OP_CLAIM:
		if (req->u.claim.ncaps > 0 && req->u.claim.caps == NULL)
			return -EINVAL;
		for (size_t i = 0; i < req->u.claim.ncaps; i++)
			if (req->u.claim.caps[i].tool == NULL)
				return -EINVAL;
		return 0;
	case STORE_OP_CHECKPOINT:
		return valid_id(req->u.checkpoint.job_id) ? 0 : -EINVAL;
	case STORE_OP_PROGRESS:
		return valid_id(req->u.progress.job_id) ? 0 : -EINVAL;
	case STORE_OP_LOG:
		return valid_id(req->u.log.job_id) &&
			       (req->u.log.nlines == 0 || req->u.log.lines != NULL)
			       ? 0
			       : -EINVAL;
	case STORE_OP_TOOL_PAUSE:
		return req->u.pause.tool != NULL ? 0 : -EINVAL;
	case STORE_OP_PROC:
		return req->u.proc.proc.pid > 0 &&
			       valid_id(req->u.proc.proc.job_id) &&
			       memchr(req->u.proc.proc.boot_id, '\0', 40) != NULL
			       ? 0
			       : -EINVAL;
	case STORE_OP_TOOL_DEFINE:
		return req->u.define.name != NULL &&
			       (req->u.define.remove ||
				json_is_object(req->u.define.definition))
			       ? 0
			       : -EINVAL;
	case STORE_OP_EXPIRE:
	case STORE_OP_PRUNE:
	case STORE__OP_MAX_PAGES:
		return 0;
	default:
		return -EINVAL;
	}
}

/* prepare fills w from its request on the loop thread: the JSON texts and,
 * for a creation, the stamps and the job done will see. */
static int prepare(struct store__wreq *w)
{
	struct store_req *req = w->req;
	char **t = w->text;
	bool ok = true;

	switch (req->op) {
	case STORE_OP_CREATE: {
		struct store_job *j = req->u.create.job;
		if (j->id[0] == '\0')
			store_uuid7(j->id);
		ok = dump(j->input, &t[STORE__T_INPUT]) &&
		     dump(j->request_context, &t[STORE__T_REQUEST_CONTEXT]) &&
		     dump(j->metadata, &t[STORE__T_METADATA]) &&
		     dump(j->output, &t[STORE__T_OUTPUT]) &&
		     dump(j->model_output, &t[STORE__T_MODEL_OUTPUT]) &&
		     dump(j->error, &t[STORE__T_ERROR]) &&
		     dump(j->suspend_payload, &t[STORE__T_SUSPEND]) &&
		     dump(j->resume_data, &t[STORE__T_RESUME]) &&
		     dump(j->checkpoint, &t[STORE__T_CHECKPOINT]) &&
		     dump(j->progress, &t[STORE__T_PROGRESS]) &&
		     dump(j->approvals, &t[STORE__T_APPROVALS]) &&
		     dump(req->u.create.client, &t[STORE__T_CLIENT]) &&
		     dump(j->views, &t[STORE__T_VIEWS]);
		/* The created event often carries the input itself. */
		if (ok && req->u.create.event_data == j->input && j->input != NULL)
			t[STORE__T_EVENT] = t[STORE__T_INPUT]; /* shared */
		else if (ok)
			ok = dump(req->u.create.event_data, &t[STORE__T_EVENT]);
		if (ok && req->u.create.approval_event_data != NULL)
			ok = dump(req->u.create.approval_event_data,
				  &t[STORE__T_APPROVAL_EVENT]);
		if (!ok)
			return -ENOMEM;
		w->created_at = store_now();
		w->run_at = j->run_at != 0 ? j->run_at : w->created_at;
		w->expires_at = j->expires_at;
		if (w->expires_at == 0 && j->ttl_ms > 0 &&
		    j->status == STORE_AWAITING_APPROVAL)
			w->expires_at = w->created_at + j->ttl_ms;
		if ((w->job = store__job_copy(j)) == NULL)
			return -ENOMEM;
		w->job->created_at = w->job->updated_at = w->created_at;
		w->job->run_at = w->run_at;
		w->job->expires_at = w->expires_at;
		if (w->job->attempt <= 0)
			w->job->attempt = 1;
		return 0;
	}
	case STORE_OP_TRANSITION: {
		const struct store_transition *tr = &req->u.transition;
		if (tr->set & STORE_SET_OUTPUT)
			ok = dump(tr->output, &t[STORE__T_OUTPUT]) &&
			     dump(tr->model_output, &t[STORE__T_MODEL_OUTPUT]);
		if (ok && (tr->set & STORE_SET_ERROR))
			ok = dump(tr->error, &t[STORE__T_ERROR]);
		if (ok && (tr->set & STORE_SET_SUSPEND))
			ok = dump(tr->suspend_payload, &t[STORE__T_SUSPEND]);
		if (ok && (tr->set & STORE_SET_RESUME))
			ok = dump(tr->resume_data, &t[STORE__T_RESUME]);
		if (ok && (tr->set & STORE_SET_CHECKPOINT))
			ok = dump(tr->checkpoint, &t[STORE__T_CHECKPOINT]);
		if (ok && (tr->set & STORE_SET_PROGRESS))
			ok = dump(tr->progress, &t[STORE__T_PROGRESS]);
		if (ok && (tr->set & STORE_SET_APPROVALS))
			ok = dump(tr->approvals, &t[STORE__T_APPROVALS]);
		if (ok)
			ok = dump(tr->client, &t[STORE__T_CLIENT]);
		if (ok && (tr->set & STORE_SET_VIEWS))
			ok = dump(tr->views, &t[STORE__T_VIEWS]);
		/* A completion's event often carries its output itself. */
		if (ok && (tr->set & STORE_SET_OUTPUT) &&
		    tr->event_data == tr->output && tr->output != NULL)
			t[STORE__T_EVENT] = t[STORE__T_OUTPUT]; /* shared */
		else if (ok)
			ok = dump(tr->event_data, &t[STORE__T_EVENT]);
		return ok ? 0 : -ENOMEM;
	}
	case STORE_OP_CHECKPOINT:
		return dump(req->u.checkpoint.value, &t[STORE__T_CHECKPOINT]) ? 0 : -ENOMEM;
	case STORE_OP_PROGRESS:
		return dump(req->u.progress.progress, &t[STORE__T_PROGRESS]) ? 0 : -ENOMEM;
	case STORE_OP_LOG:
		if (req->u.log.nlines == 0)
			return 0;
		w->line_data = calloc(req->u.log.nlines, sizeof(*w->line_data));
		if (w->line_data == NULL)
			return -ENOMEM;
		for (size_t i = 0; i < req->u.log.nlines; i++)
			if (!dump(req->u.log.lines[i].data, &w->line_data[i]))
				return -ENOMEM;
		return 0;
	case STORE_OP_TOOL_DEFINE:
		if (req->u.define.remove)
			return 0;
		return dump(req->u.define.definition, &t[STORE__T_DEFINITION])
			       ? 0
			       : -ENOMEM;
	case STORE_OP_EXPIRE:
		w->arg = req->u.expire.now != 0 ? req->u.expire.now : store_now();
		return 0;
	case STORE__OP_MAX_PAGES:
		w->arg = req->u.prune.before;
		return 0;
	default:
		return 0;
	}
}

static void hand_over(struct store *st, struct store__wreq *first,
		      struct store__wreq *last);

/* enqueue prepares req and queues it for the writer (or, while a hold is
 * on, behind it); *wout is its node. */
static int enqueue(struct store *st, struct store_req *req,
		   struct store__wreq **wout)
{
	if (req == NULL || req->done == NULL)
		return -EINVAL;
	if (st->closing)
		return -ESHUTDOWN;
	int rc = check(req);
	if (rc != 0)
		return rc;

	req->job = NULL;
	req->jobs = NULL;
	req->njobs = 0;
	req->existed = false;
	req->count = 0;
	req->next_ = NULL;

	struct store__wreq *w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -ENOMEM;
	w->req = req;
	if ((rc = prepare(w)) != 0) {
		wreq_free(w);
		return rc;
	}

	if (wout != NULL)
		*wout = w;
	w->next = NULL;
	if (st->holds > 0) {
		if (st->htail != NULL)
			st->htail->next = w;
		else
			st->hhead = w;
		st->htail = w;
		return 0;
	}
	hand_over(st, w, w);
	return 0;
}

/* hand_over queues the requests first..last (linked) for the writer. */
static void hand_over(struct store *st, struct store__wreq *first,
		      struct store__wreq *last)
{
	int claims = 0;

	for (struct store__wreq *w = first; w != NULL; w = w->next)
		claims += w->req->op == STORE_OP_CLAIM;
	pthread_mutex_lock(&st->mu);
	if (st->qtail != NULL)
		st->qtail->next = first;
	else
		st->qhead = first;
	st->qtail = last;
	st->qclaims += claims;
	bool wake = st->writer_waiting;
	st->writer_waiting = false;
	pthread_mutex_unlock(&st->mu);
	/* After the unlock, so that the writer does not wake into a held
	 * mutex; it is inside pthread_cond_wait, so the signal is not lost. */
	if (wake)
		pthread_cond_signal(&st->work);
}

int store_claimed_undelivered(const struct store *st)
{
	return atomic_load(&st->claimed);
}

void store_hold(struct store *st)
{
	st->holds++;
}

/* How many requests after a held creation pair_held looks through for
 * its transition. */
enum { PAIR_WINDOW = 8 };

/* pair_held prepares, for a held creation that starts its job followed by
 * a transition of that job out of running (its run ended before the
 * creation was written), the job as the transition leaves it, so that the
 * backend may write the row once in its final state (absorb_into). The
 * backend decides: the pair only counts when both land in one transaction
 * with nothing else reading the job in between. Out of memory just leaves
 * a pair unprepared. */
static void pair_held(struct store__wreq *first)
{
	for (struct store__wreq *c = first; c != NULL; c = c->next) {
		if (c->req->op != STORE_OP_CREATE || !c->req->u.create.start)
			continue;
		const char *id = c->req->u.create.job->id;
		struct store__wreq *t = c->next;
		for (int k = 0; t != NULL && k < PAIR_WINDOW; t = t->next, k++)
			if (t->req->op == STORE_OP_TRANSITION &&
			    strcmp(t->req->u.transition.job_id, id) == 0)
				break;
		if (t == NULL || t->absorb_into != NULL ||
		    !(t->req->u.transition.from_mask & STORE_MASK(STORE_RUNNING)))
			continue;
		struct store_job *j = store__job_copy(c->job);
		if (j == NULL)
			continue;
		j->status = STORE_RUNNING;
		j->started_at = c->created_at;
		if (store__job_apply(j, &t->req->u.transition, store_now()) != 0) {
			store_job_free(j);
			continue;
		}
		t->job = j;
		t->absorb_into = c;
	}
}

void store_release(struct store *st)
{
	if (st->holds == 0 || --st->holds > 0 || st->hhead == NULL)
		return;
	struct store__wreq *first = st->hhead, *last = st->htail;
	st->hhead = st->htail = NULL;
	pair_held(first);
	hand_over(st, first, last);
}

int store_submit(struct store *st, struct store_req *req)
{
	if (req != NULL && req->op == STORE__OP_MAX_PAGES)
		return -EINVAL; /* only through store__max_page_count */
	return enqueue(st, req, NULL);
}

void store_req_finish(struct store_req *req)
{
	store_job_free(req->job);
	req->job = NULL;
	for (size_t i = 0; i < req->njobs; i++)
		store_job_free(req->jobs[i]);
	free(req->jobs);
	req->jobs = NULL;
	req->njobs = 0;
}

/* ---- synchronous requests (start-up, shutdown, tests) ------------------ */

struct sync_req {
	struct store_req req;
	int rc;
};

static void sync_done(struct store_req *req, int rc)
{
	((struct sync_req *)req)->rc = rc;
}

/*
 * run_sync submits the n requests and blocks the loop thread until the
 * writer settled the last of them, then delivers (so listeners and done
 * callbacks keep their order). Only for start-up and shutdown, when no
 * client waits on the loop; never from inside a store callback.
 */
static int run_sync(struct store *st, struct sync_req *v, size_t n)
{
	struct store__wreq *last = NULL;
	if (st->delivering || st->holds > 0)
		return -EDEADLK; /* the writer would never see them */
	for (size_t i = 0; i < n; i++) {
		v[i].req.done = sync_done;
		v[i].rc = 0;
		int rc = enqueue(st, &v[i].req, &last);
		if (rc != 0) {
			v[i].rc = rc;
			/* done will never run for it; keep the others. */
		}
	}
	if (last != NULL) {
		pthread_mutex_lock(&st->mu);
		while (!last->durable)
			pthread_cond_wait(&st->settled, &st->mu);
		pthread_mutex_unlock(&st->mu);
		deliver(st);
	}
	return 0;
}

int store__max_page_count(struct store *st, int64_t pages)
{
	struct sync_req r = {.req = {.op = STORE__OP_MAX_PAGES}};
	r.req.u.prune.before = pages;
	int rc = run_sync(st, &r, 1);
	return rc != 0 ? rc : r.rc;
}

/* requeue moves every running job back to pending (or to failed); see
 * store_recover and store_requeue_running. */
static int requeue(struct store *st, bool raise,
		   bool (*may_rerun)(void *arg, const char *tool), void *arg)
{
	struct store_job **jobs = NULL;
	size_t n = 0;
	int rc = st->ops->running(st->be, &jobs, &n);
	if (rc != 0)
		return rc;
	if (n == 0) {
		free(jobs);
		return 0;
	}

	struct sync_req *v = calloc(n, sizeof(*v));
	json_t *retry = json_pack("{s:s}", "reason", raise ? "interrupted" : "shutdown");
	json_t **errors = calloc(n, sizeof(*errors));
	if (v == NULL || retry == NULL || errors == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	int64_t now = store_now();
	for (size_t i = 0; i < n; i++) {
		const struct store_job *j = jobs[i];
		struct store_transition *t = &v[i].req.u.transition;
		v[i].req.op = STORE_OP_TRANSITION;
		snprintf(t->job_id, sizeof(t->job_id), "%s", j->id);
		t->from_mask = STORE_MASK(STORE_RUNNING);
		bool may = may_rerun == NULL || may_rerun(arg, j->tool);
		int tries = may ? store_interrupted_tries(j->max_retries)
				: j->max_retries + 1;
		bool rerun = !raise || (may && j->attempt < tries);
		if (rerun) {
			t->to = STORE_PENDING;
			t->event = STORE_EV_RETRYING;
			t->event_data = retry;
			t->set = STORE_SET_RUN_AT | STORE_SET_ATTEMPT;
			t->run_at = now;
			t->attempt = raise ? j->attempt + 1 : j->attempt;
			continue;
		}
		char msg[160];
		snprintf(msg, sizeof(msg),
			 "interrupted by a restart of berthd (attempt %d of %d)",
			 j->attempt, tries);
		errors[i] = json_pack("{s:s,s:s}", "message", msg, "code", "interrupted");
		if (errors[i] == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		t->to = STORE_FAILED;
		t->event = STORE_EV_FAILED;
		t->event_data = errors[i];
		t->set = STORE_SET_ERROR;
		t->error = errors[i];
	}
	if ((rc = run_sync(st, v, n)) != 0)
		goto out;
	int count = 0;
	for (size_t i = 0; i < n; i++) {
		/* Every transition is in the debug log (docs/API.md), these
		 * too: a shutdown's are made after the worker stopped
		 * hearing the store's events, which log the others. */
		if (v[i].rc == 0 && log_enabled(LOG_LEVEL_DEBUG))
			log_debug("job %s (%s): %s, now %s", jobs[i]->id,
				  jobs[i]->tool,
				  store_event_name(v[i].req.u.transition.event),
				  store_status_name(v[i].req.u.transition.to));
		if (v[i].rc == 0)
			count++;
		else if (v[i].rc != STORE_ECONFLICT && v[i].rc != STORE_ENOTFOUND && rc == 0)
			rc = v[i].rc;
		store_req_finish(&v[i].req);
	}
	if (rc == 0)
		rc = count;
out:
	for (size_t i = 0; i < n; i++) {
		store_job_free(jobs[i]);
		if (errors != NULL)
			json_decref(errors[i]);
	}
	free(jobs);
	free(errors);
	free(v);
	json_decref(retry);
	return rc;
}

int store_recover(struct store *st, bool (*may_rerun)(void *arg, const char *tool),
		  void *arg)
{
	/* Kept for the jobs of other nodes whose leases expire later (a
	 * shared backend's tick). */
	st->recovering = true;
	st->may_rerun = may_rerun;
	st->may_rerun_arg = arg;
	return requeue(st, true, may_rerun, arg);
}

int store_requeue_running(struct store *st)
{
	/* A clean shutdown: this node recovers nobody's jobs any more. */
	st->recovering = false;
	st->may_rerun = NULL;
	st->may_rerun_arg = NULL;
	return requeue(st, false, NULL, NULL);
}

/* ---- reads ------------------------------------------------------------- */

int store_get(struct store *st, const char *id, struct store_job **out)
{
	*out = NULL;
	if (id == NULL)
		return -EINVAL;
	return st->ops->get(st->be, id, out);
}

/* A cursor is "c1" and the hex of the last id listed: opaque to clients,
 * and checkable. */
static char *cursor_make(const char *id)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = strlen(id);
	char *c = malloc(2 + 2 * n + 1);
	if (c == NULL)
		return NULL;
	c[0] = 'c';
	c[1] = '1';
	for (size_t i = 0; i < n; i++) {
		c[2 + 2 * i] = hex[(unsigned char)id[i] >> 4];
		c[3 + 2 * i] = hex[(unsigned char)id[i] & 15];
	}
	c[2 + 2 * n] = '\0';
	return c;
}

static int unhex(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int cursor_read(const char *c, char id[40])
{
	size_t n = strlen(c);
	if (n < 4 || n % 2 != 0 || c[0] != 'c' || c[1] != '1' || (n - 2) / 2 >= 40)
		return -EINVAL;
	for (size_t i = 0; i < (n - 2) / 2; i++) {
		int hi = unhex(c[2 + 2 * i]), lo = unhex(c[3 + 2 * i]);
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
			return -EINVAL;
		id[i] = (char)(hi << 4 | lo);
	}
	id[(n - 2) / 2] = '\0';
	return 0;
}

void store__prefix_end(const char *prefix, char *end)
{
	size_t n = strlen(prefix);

	memcpy(end, prefix, n + 1);
	while (n > 0) {
		char c = end[n - 1];

		if (c == '-' || c == 'f') {
			end[--n] = '\0'; /* nothing to raise, or a carry */
			continue;
		}
		end[n - 1] = c == '9' ? 'a' : (char)(c + 1);
		return;
	}
}

char *store_list_cursor(const char *id)
{
	return cursor_make(id);
}

int store_list(struct store *st, const struct store_filter *f, int limit,
	       const char *cursor, struct store_job ***jobs, size_t *n,
	       char **next)
{
	char before[40];
	*jobs = NULL;
	*n = 0;
	*next = NULL;
	if (cursor != NULL && cursor_read(cursor, before) != 0)
		return -EINVAL;
	if (limit <= 0)
		return -EINVAL;
	int want = limit < INT32_MAX ? limit + 1 : limit;
	int rc = st->ops->list(st->be, f, want, cursor != NULL ? before : NULL,
			       jobs, n);
	if (rc != 0)
		return rc;
	if (*n > (size_t)limit) {
		store_job_free((*jobs)[limit]);
		*n = (size_t)limit;
		if ((*next = cursor_make((*jobs)[limit - 1]->id)) == NULL) {
			for (size_t i = 0; i < *n; i++)
				store_job_free((*jobs)[i]);
			free(*jobs);
			*jobs = NULL;
			*n = 0;
			return -ENOMEM;
		}
	}
	return 0;
}

int store_events(struct store *st, int64_t after, const char *job_id,
		 int limit, struct store_event **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (limit <= 0)
		return limit == 0 ? 0 : -EINVAL;
	return st->ops->events(st->be, after, job_id, limit, out, n);
}

int store_events_typed(struct store *st, const struct store_event_query *q,
		       struct store_event **out, size_t *n, int64_t *next,
		       bool *more)
{
	*out = NULL;
	*n = 0;
	*next = q->after;
	*more = false;
	if (q->types == 0 || q->limit <= 0 || q->scan <= 0)
		return -EINVAL;
	return st->ops->events_typed(st->be, q, out, n, next, more);
}

int64_t store_last_seq(struct store *st)
{
	return st->ops->last_seq(st->be);
}

int store_count_by_status(struct store *st, int64_t counts[STORE_NSTATUS])
{
	return st->ops->count_by_status(st->be, counts);
}

int store_logs(struct store *st, const char *job_id, int64_t after, int limit,
	       struct store_log_line **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (job_id == NULL || limit < 0)
		return -EINVAL;
	if (limit == 0)
		return 0;
	return st->ops->logs(st->be, job_id, after, limit, out, n);
}

int store_procs(struct store *st, struct store_proc **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	return st->ops->procs(st->be, out, n);
}

int store_definitions(struct store *st, struct store_definition **out,
		      size_t *n)
{
	*out = NULL;
	*n = 0;
	return st->ops->definitions(st->be, out, n);
}

void store_definition_finish(struct store_definition *d)
{
	free(d->name);
	json_decref(d->definition);
	d->name = NULL;
	d->definition = NULL;
}

int store_tool_paused(struct store *st, const char *tool)
{
	if (tool == NULL)
		return -EINVAL;
	return st->ops->tool_paused(st->be, tool);
}

int store_next_run_at(struct store *st, int64_t *at)
{
	return st->ops->next_run_at(st->be, at);
}

int store_next_expiry(struct store *st, int64_t *at)
{
	return st->ops->next_expiry(st->be, at);
}

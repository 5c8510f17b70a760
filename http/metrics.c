/*
 * metrics.c: the Prometheus text of GET /metrics.
 *
 * Everything is derived from what the store and the worker already offer,
 * without hooks in their code: the counters and latencies from the
 * store's event listener (called once per event after its commit), the
 * stored totals from store_count_by_status, busy workers from
 * worker_stats. To count jobs by tool and status, and to time a job from
 * submit to start and completion, the metrics keep one small record per
 * job that is not terminal (its tool, status, and when it was created and
 * last started), seeded from the store at start and dropped when the job
 * ends. Counters count from the daemon's start, as Prometheus expects.
 *
 * A commit batch is the events the listener sees in one loop turn: the
 * writer delivers a transaction's events together, so a turn holds one
 * batch (two batches finished in the same turn count as one).
 */
#include "http/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "store/store.h"
#include "worker/worker.h"

#define SEED_PAGE 500

static const double latency_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
					 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900,
					 3600};
#define NLAT (sizeof latency_buckets / sizeof latency_buckets[0])
static const double batch_buckets[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512,
				       1024};
#define NBATCH (sizeof batch_buckets / sizeof batch_buckets[0])

struct histogram {
	const double *bounds;
	size_t n;
	uint64_t counts[NLAT + 1]; /* per bucket (not cumulative), +Inf last */
	double sum;
	uint64_t count;
};

/* A counter per event type, named as Prometheus users look for it. */
static const char *const event_metric[STORE_NEVENT] = {
	[STORE_EV_CREATED] = "berth_submissions_total",
	[STORE_EV_APPROVAL_REQUESTED] = "berth_approval_requests_total",
	[STORE_EV_APPROVED] = "berth_approvals_total",
	[STORE_EV_DECLINED] = "berth_declines_total",
	[STORE_EV_STARTED] = "berth_starts_total",
	[STORE_EV_SUSPENDED] = "berth_suspensions_total",
	[STORE_EV_RESUMED] = "berth_resumes_total",
	[STORE_EV_RETRYING] = "berth_retries_total",
	[STORE_EV_COMPLETED] = "berth_completions_total",
	[STORE_EV_FAILED] = "berth_failures_total",
	[STORE_EV_TIMED_OUT] = "berth_timeouts_total",
	[STORE_EV_CANCELLED] = "berth_cancellations_total",
	[STORE_EV_EXPIRED] = "berth_expirations_total",
};

struct tool_stats {
	char *name;
	int64_t jobs[STORE_NSTATUS]; /* non-terminal jobs now */
	uint64_t events[STORE_NEVENT];
};

/* Decisions (approved and declined events) of one principal about one
 * tool's jobs. The pairs are as many as the principals who decide times
 * the tools that ask, which a deployment keeps small; past DECISIONS_MAX
 * pairs a new one is counted under the principal "other". */
struct decisions {
	int16_t tool;
	char *principal;
	uint64_t n[2]; /* approved, declined */
};

#define DECISIONS_MAX 4096

struct job_rec {
	char id[37];      /* "" free, "-" a tombstone */
	int16_t tool;
	int8_t status;
	int64_t created;  /* ms, 0 unknown */
	int64_t started;  /* ms of the last start, 0 none */
};

struct http_metrics {
	struct store *store;
	struct worker *worker;
	struct api *api;
	struct tool_stats *tools;
	size_t ntools;
	struct decisions *decisions;
	size_t ndecisions;
	struct job_rec *recs;
	size_t cap, used; /* used counts tombstones too */
	size_t live;
	size_t batch;     /* events seen in this loop turn */
	struct histogram queue, run, total, batches;
};

static void hist_init(struct histogram *h, const double *b, size_t n)
{
	memset(h, 0, sizeof *h);
	h->bounds = b;
	h->n = n;
}

static void hist_observe(struct histogram *h, double v)
{
	size_t i = 0;

	while (i < h->n && v > h->bounds[i])
		i++;
	h->counts[i]++;
	h->sum += v;
	h->count++;
}

static int tool_index(struct http_metrics *m, const char *name)
{
	struct tool_stats *t;

	for (size_t i = 0; i < m->ntools; i++)
		if (strcmp(m->tools[i].name, name) == 0)
			return (int)i;
	if (m->ntools >= INT16_MAX)
		return -1;
	t = realloc(m->tools, (m->ntools + 1) * sizeof *t);
	if (!t)
		return -1;
	m->tools = t;
	t = &m->tools[m->ntools];
	memset(t, 0, sizeof *t);
	t->name = strdup(name);
	if (!t->name)
		return -1;
	return (int)m->ntools++;
}

/* ---- the job records: open addressing, linear probing ---------------- */

static size_t hash_id(const char *id)
{
	size_t h = 1469598103934665603u;

	for (; *id; id++)
		h = (h ^ (unsigned char)*id) * 1099511628211u;
	return h;
}

static struct job_rec *rec_find(struct http_metrics *m, const char *id)
{
	if (!m->cap)
		return NULL;
	for (size_t i = hash_id(id) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct job_rec *r = &m->recs[i];

		if (!r->id[0])
			return NULL;
		if (strcmp(r->id, id) == 0)
			return r;
	}
}

static int rec_grow(struct http_metrics *m)
{
	size_t cap = 1024, old = m->cap;
	struct job_rec *recs, *prev = m->recs;

	/* Room for four times the live records; tombstones are dropped. */
	while (cap < (m->live + 1) * 4)
		cap *= 2;
	recs = calloc(cap, sizeof *recs);

	if (!recs)
		return -ENOMEM;
	m->recs = recs;
	m->cap = cap;
	m->used = 0;
	m->live = 0;
	for (size_t i = 0; i < old; i++) {
		if (prev[i].id[0] && prev[i].id[0] != '-') {
			size_t j = hash_id(prev[i].id) & (cap - 1);

			while (recs[j].id[0])
				j = (j + 1) & (cap - 1);
			recs[j] = prev[i];
			m->used++;
			m->live++;
		}
	}
	free(prev);
	return 0;
}

static struct job_rec *rec_add(struct http_metrics *m, const char *id)
{
	size_t i;

	if ((m->used + 1) * 10 > m->cap * 7 && rec_grow(m) < 0)
		return NULL;
	i = hash_id(id) & (m->cap - 1);
	while (m->recs[i].id[0] && m->recs[i].id[0] != '-')
		i = (i + 1) & (m->cap - 1);
	if (!m->recs[i].id[0])
		m->used++;
	memset(&m->recs[i], 0, sizeof m->recs[i]);
	snprintf(m->recs[i].id, sizeof m->recs[i].id, "%s", id);
	m->live++;
	return &m->recs[i];
}

static void rec_del(struct http_metrics *m, struct job_rec *r)
{
	r->id[0] = '-';
	r->id[1] = '\0';
	m->live--;
}

/* ---- the listener ----------------------------------------------------- */

/* count_decision counts an approval (or a decline) by principal of a job
 * of tool t. */
static void count_decision(struct http_metrics *m, int t, const char *by,
			   bool declined)
{
	struct decisions *d;

	if (m->ndecisions >= DECISIONS_MAX)
		by = "other";
	for (size_t i = 0; i < m->ndecisions; i++) {
		d = &m->decisions[i];
		if (d->tool == t && strcmp(d->principal, by) == 0) {
			d->n[declined]++;
			return;
		}
	}
	d = realloc(m->decisions, (m->ndecisions + 1) * sizeof *d);
	if (!d)
		return;
	m->decisions = d;
	d = &m->decisions[m->ndecisions];
	memset(d, 0, sizeof *d);
	d->tool = (int16_t)t;
	d->principal = strdup(by);
	if (!d->principal)
		return;
	d->n[declined]++;
	m->ndecisions++;
}

static void on_event(void *arg, const struct store_event *ev)
{
	struct http_metrics *m = arg;
	struct job_rec *r;
	int t = tool_index(m, ev->tool ? ev->tool : "");
	int was;

	m->batch++;
	if (t < 0)
		return;
	if (ev->type >= 0 && ev->type < STORE_NEVENT)
		m->tools[t].events[ev->type]++;
	/* Each approval counts, one of a quorum too: it is one person's
	 * decision. */
	if (ev->type == STORE_EV_APPROVED || ev->type == STORE_EV_DECLINED)
		count_decision(m, t, ev->by ? ev->by : "unknown",
			       ev->type == STORE_EV_DECLINED);
	r = rec_find(m, ev->job_id);
	if (!r) {
		if (store_status_terminal(ev->status))
			return;
		r = rec_add(m, ev->job_id);
		if (!r)
			return;
		r->tool = (int16_t)t;
		r->status = (int8_t)ev->status;
		r->created = ev->type == STORE_EV_CREATED ? ev->at : 0;
		if (ev->type == STORE_EV_STARTED)
			r->started = ev->at;
		m->tools[t].jobs[ev->status]++;
		return;
	}
	was = r->status;
	m->tools[r->tool].jobs[was]--;
	if (ev->type == STORE_EV_STARTED) {
		if (r->created && !r->started)
			hist_observe(&m->queue, (double)(ev->at - r->created) / 1e3);
		r->started = ev->at;
	} else if (was == STORE_RUNNING && ev->status != STORE_RUNNING &&
		   r->started) {
		hist_observe(&m->run, (double)(ev->at - r->started) / 1e3);
	}
	if (ev->type == STORE_EV_COMPLETED && r->created)
		hist_observe(&m->total, (double)(ev->at - r->created) / 1e3);
	if (store_status_terminal(ev->status)) {
		rec_del(m, r);
	} else {
		r->status = (int8_t)ev->status;
		m->tools[r->tool].jobs[ev->status]++;
	}
}

void http_metrics_end_batch(struct http_metrics *m)
{
	if (m->batch) {
		hist_observe(&m->batches, (double)m->batch);
		m->batch = 0;
	}
}

/* seed reads the jobs that are not terminal, so that the gauges by tool
 * start true. */
static void seed(struct http_metrics *m)
{
	struct store_filter f = {.status_mask = ~STORE_MASK_TERMINAL &
					       ((1u << STORE_NSTATUS) - 1)};
	char *cursor = NULL;

	do {
		struct store_job **jobs = NULL;
		size_t n = 0;
		char *next = NULL;

		if (store_list(m->store, &f, SEED_PAGE, cursor, &jobs, &n,
			       &next) < 0)
			n = 0;
		for (size_t i = 0; i < n; i++) {
			struct store_job *j = jobs[i];
			int t = tool_index(m, j->tool ? j->tool : "");
			struct job_rec *r = t < 0 || rec_find(m, j->id)
						    ? NULL
						    : rec_add(m, j->id);

			if (r) {
				r->tool = (int16_t)t;
				r->status = (int8_t)j->status;
				r->created = j->created_at;
				r->started = j->started_at;
				m->tools[t].jobs[j->status]++;
			}
			store_job_free(j);
		}
		free(jobs);
		free(cursor);
		cursor = next;
	} while (cursor);
}

struct http_metrics *http_metrics_create(struct store *st, struct worker *w,
					 struct api *api)
{
	struct http_metrics *m = calloc(1, sizeof *m);

	if (!m)
		return NULL;
	m->store = st;
	m->worker = w;
	m->api = api;
	hist_init(&m->queue, latency_buckets, NLAT);
	hist_init(&m->run, latency_buckets, NLAT);
	hist_init(&m->total, latency_buckets, NLAT);
	hist_init(&m->batches, batch_buckets, NBATCH);
	for (size_t i = 0; i < worker_tool_count(w); i++)
		tool_index(m, worker_tool_name(worker_tool_at(w, i)));
	if (store_add_listener(st, on_event, m) < 0) {
		http_metrics_destroy(m);
		return NULL;
	}
	seed(m);
	return m;
}

void http_metrics_destroy(struct http_metrics *m)
{
	if (!m)
		return;
	store_remove_listener(m->store, on_event, m);
	for (size_t i = 0; i < m->ntools; i++)
		free(m->tools[i].name);
	free(m->tools);
	for (size_t i = 0; i < m->ndecisions; i++)
		free(m->decisions[i].principal);
	free(m->decisions);
	free(m->recs);
	free(m);
}

/* ---- rendering -------------------------------------------------------- */

struct text {
	char *s;
	size_t len, cap;
	bool failed;
};

static void put(struct text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->failed)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->failed = true;
			return;
		}
		if ((size_t)n < t->cap - t->len) {
			t->len += (size_t)n;
			return;
		}
		{
			size_t cap = (t->cap + (size_t)n + 1) * 2;
			char *s = realloc(t->s, cap);

			if (!s) {
				t->failed = true;
				return;
			}
			t->s = s;
			t->cap = cap;
		}
	}
}

/* label writes a label value with \, " and newline escaped. */
static void put_label(struct text *t, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			put(t, "\\%c", *v);
		else if (*v == '\n')
			put(t, "\\n");
		else
			put(t, "%c", *v);
	}
}

static void put_hist(struct text *t, const char *name, const char *help,
		     const struct histogram *h)
{
	uint64_t cum = 0;

	put(t, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	for (size_t i = 0; i < h->n; i++) {
		cum += h->counts[i];
		put(t, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i],
		    (unsigned long long)cum);
	}
	put(t, "%s_bucket{le=\"+Inf\"} %llu\n", name,
	    (unsigned long long)h->count);
	put(t, "%s_sum %.6f\n%s_count %llu\n", name, h->sum, name,
	    (unsigned long long)h->count);
}

char *http_metrics_render(struct http_metrics *m, size_t *len)
{
	struct text t = {0};
	int64_t counts[STORE_NSTATUS];
	struct worker_stats ws;
	struct api_auth_stats auth;
	bool have_counts = store_count_by_status(m->store, counts) == 0;

	t.cap = 8192;
	t.s = malloc(t.cap);
	if (!t.s)
		return NULL;
	t.s[0] = '\0';
	worker_stats(m->worker, &ws);

	put(&t, "# HELP berth_jobs Jobs that are not finished, by tool and "
	    "status.\n# TYPE berth_jobs gauge\n");
	for (size_t i = 0; i < m->ntools; i++) {
		for (int s = 0; s < STORE_NSTATUS; s++) {
			if (store_status_terminal(s))
				continue;
			put(&t, "berth_jobs{tool=\"");
			put_label(&t, m->tools[i].name);
			put(&t, "\",status=\"%s\"} %lld\n", store_status_name(s),
			    (long long)m->tools[i].jobs[s]);
		}
	}
	if (have_counts) {
		put(&t, "# HELP berth_jobs_stored Jobs in the database, by "
		    "status.\n# TYPE berth_jobs_stored gauge\n");
		for (int s = 0; s < STORE_NSTATUS; s++)
			put(&t, "berth_jobs_stored{status=\"%s\"} %lld\n",
			    store_status_name(s), (long long)counts[s]);
		put(&t, "# HELP berth_queue_depth Jobs pending (waiting for a "
		    "worker or their runAt).\n# TYPE berth_queue_depth gauge\n"
		    "berth_queue_depth %lld\n", (long long)counts[STORE_PENDING]);
	}
	put(&t, "# HELP berth_workers Worker slots.\n# TYPE berth_workers "
	    "gauge\nberth_workers %d\n", ws.size);
	put(&t, "# HELP berth_workers_busy Worker slots running a job.\n"
	    "# TYPE berth_workers_busy gauge\nberth_workers_busy %d\n", ws.busy);
	put(&t, "# HELP berth_jobs_started_total Jobs started by this daemon: "
	    "started by their submission (a nonblocking tool, an external "
	    "tool or a worker process's tool, with room and nothing waiting) "
	    "or by a claim.\n# TYPE berth_jobs_started_total counter\n"
	    "berth_jobs_started_total{path=\"submit\"} %llu\n"
	    "berth_jobs_started_total{path=\"claim\"} %llu\n",
	    (unsigned long long)ws.started_at_submit,
	    (unsigned long long)ws.started_by_claim);
	put(&t, "# HELP berth_claims_total Claims this daemon asked of the "
	    "database for jobs waiting to run.\n# TYPE berth_claims_total "
	    "counter\nberth_claims_total %llu\n"
	    "# HELP berth_claims_empty_total Claims that found no job to "
	    "take.\n# TYPE berth_claims_empty_total counter\n"
	    "berth_claims_empty_total %llu\n",
	    (unsigned long long)ws.claims,
	    (unsigned long long)ws.claims_empty);
	put(&t, "# HELP berth_event_seq The seq of the last event.\n# TYPE "
	    "berth_event_seq gauge\nberth_event_seq %lld\n",
	    (long long)store_last_seq(m->store));
	for (int e = 0; e < STORE_NEVENT; e++) {
		put(&t, "# HELP %s Jobs with a '%s' event since berthd "
		    "started, by tool.\n# TYPE %s counter\n", event_metric[e],
		    store_event_name(e), event_metric[e]);
		for (size_t i = 0; i < m->ntools; i++) {
			put(&t, "%s{tool=\"", event_metric[e]);
			put_label(&t, m->tools[i].name);
			put(&t, "\"} %llu\n",
			    (unsigned long long)m->tools[i].events[e]);
		}
	}
	api_auth_stats(m->api, &auth);
	put(&t, "# HELP berth_auth_failures_total Tokens that failed their "
	    "check (server/auth on the socket, Bearer tokens and logins over "
	    "HTTP), each logged with its peer.\n# TYPE "
	    "berth_auth_failures_total counter\n"
	    "berth_auth_failures_total{via=\"socket\"} %llu\n"
	    "berth_auth_failures_total{via=\"http\"} %llu\n",
	    (unsigned long long)auth.failures[API_AUTH_VIA_SOCKET],
	    (unsigned long long)auth.failures[API_AUTH_VIA_HTTP]);
	put(&t, "# HELP berth_auth_throttled_total Tokens refused unchecked "
	    "because their peer, or everyone, failed too often lately.\n"
	    "# TYPE berth_auth_throttled_total counter\n"
	    "berth_auth_throttled_total{via=\"socket\"} %llu\n"
	    "berth_auth_throttled_total{via=\"http\"} %llu\n",
	    (unsigned long long)auth.throttled[API_AUTH_VIA_SOCKET],
	    (unsigned long long)auth.throttled[API_AUTH_VIA_HTTP]);
	put(&t, "# HELP berth_decisions_total Approvals (each of a quorum "
	    "too) and declines since berthd started, by tool and principal."
	    "\n# TYPE berth_decisions_total counter\n");
	for (size_t i = 0; i < m->ndecisions; i++) {
		for (int k = 0; k < 2; k++) {
			if (!m->decisions[i].n[k])
				continue;
			put(&t, "berth_decisions_total{tool=\"");
			put_label(&t, m->tools[m->decisions[i].tool].name);
			put(&t, "\",principal=\"");
			put_label(&t, m->decisions[i].principal);
			put(&t, "\",decision=\"%s\"} %llu\n",
			    k ? "declined" : "approved",
			    (unsigned long long)m->decisions[i].n[k]);
		}
	}
	put(&t, "# HELP berth_refusals_total Requests refused -32010 since "
	    "berthd started, by data.reason.\n# TYPE berth_refusals_total "
	    "counter\n");
	for (int r = 0; r < API_NREFUSAL; r++)
		put(&t, "berth_refusals_total{reason=\"%s\"} %llu\n",
		    api_refusal_name(r), (unsigned long long)auth.refusals[r]);
	put_hist(&t, "berth_commit_batch_events", "Events per commit of the "
		 "group-commit writer, as the event listener sees them.",
		 &m->batches);
	put_hist(&t, "berth_job_queue_seconds", "From submit to the first "
		 "start of a job.", &m->queue);
	put_hist(&t, "berth_job_run_seconds", "Run time of each run of a "
		 "job (start to its end, suspension or retry).", &m->run);
	put_hist(&t, "berth_job_completion_seconds", "From submit to "
		 "completed.", &m->total);
	if (t.failed) {
		free(t.s);
		return NULL;
	}
	*len = t.len;
	return t.s;
}

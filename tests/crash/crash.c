/*
 * crash.c: the crash driver. It runs crashd (a berthd with the C test
 * tools of crashd.c, plus the example tools) on a temporary database under
 * a mixed workload from several client threads, kills it with SIGKILL at
 * random moments, restarts it, and checks after every kill that nothing
 * acknowledged was lost:
 *
 *   crash [--seed N] [--kills N] [--clients N] [--min-ms N] [--max-ms N]
 *
 * After each kill, before the restart, the database itself is read (the
 * daemon is dead, so it is quiescent):
 *   - PRAGMA integrity_check is "ok";
 *   - every acknowledged submission has its row; every acknowledged
 *     cancel, decline, approve and resume is reflected in it;
 *   - a job once seen terminal has the same status and finished_at;
 *   - each checkpointing job's checkpoint is remembered, so that its final
 *     output can prove it resumed from at least there.
 * After each restart, through the socket:
 *   - the event log, read from where the last check stopped, has seq
 *     strictly increasing by one with no gap, and every event is a legal
 *     transition of its job (DESIGN.md's lifecycle) whose type matches its
 *     status; nothing follows a terminal event;
 *   - every acknowledged job exists, its status is one its history passed
 *     through, a terminal job never changed (status, output, error,
 *     finishedAt), and each acknowledged transition has exactly one event;
 *   - no (tool, idempotencyKey) has two jobs, and a key submitted again
 *     always answers the first job.
 * When the workload ends every waiting job is approved or resumed, every
 * job must reach a terminal state, and every checkpointing job that
 * completed must have counted fully and resumed from no earlier than the
 * checkpoint it had when the daemon was last killed under it.
 *
 * The last line is the summary: kills, jobs, transitions (events)
 * checked, violations. The exit status is 0 only without violations.
 *
 * The seed fixes the kill moments and each client's choice of operations;
 * the interleaving of threads and the daemon's own timing still vary.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "tests/harness/harness.h"

enum {
	ST_PENDING = 0, ST_AWAITING, ST_RUNNING, ST_SUSPENDED, ST_COMPLETED,
	ST_FAILED, ST_TIMED_OUT, ST_DECLINED, ST_CANCELLED, ST_EXPIRED, NST
};

static const char *const st_names[NST] = {
	"pending", "awaiting_approval", "running", "suspended", "completed",
	"failed", "timed_out", "declined", "cancelled", "expired",
};

#define TERMINAL(s) ((s) >= ST_COMPLETED)

enum {
	EV_CREATED = 0, EV_APPROVAL_REQUESTED, EV_APPROVED, EV_DECLINED,
	EV_STARTED, EV_SUSPENDED, EV_RESUMED, EV_RETRYING, EV_COMPLETED,
	EV_FAILED, EV_TIMED_OUT, EV_CANCELLED, EV_EXPIRED, NEV
};

static const char *const ev_names[NEV] = {
	"created", "approval_requested", "approved", "declined", "started",
	"suspended", "resumed", "retrying", "completed", "failed",
	"timed_out", "cancelled", "expired",
};

/* What status each event type leaves its job in (-1: either of two). */
static const int ev_status[NEV] = {
	-1, ST_AWAITING, ST_PENDING, ST_DECLINED, ST_RUNNING, ST_SUSPENDED,
	ST_PENDING, ST_PENDING, ST_COMPLETED, ST_FAILED, ST_TIMED_OUT,
	ST_CANCELLED, ST_EXPIRED,
};

#define M(s) (1u << (s))
/* legal_from[s]: the statuses a job may be in just before it enters s. */
static const unsigned legal_from[NST] = {
	[ST_PENDING] = M(ST_AWAITING) | M(ST_SUSPENDED) | M(ST_RUNNING),
	[ST_AWAITING] = M(ST_AWAITING),
	[ST_RUNNING] = M(ST_PENDING),
	[ST_SUSPENDED] = M(ST_RUNNING),
	[ST_COMPLETED] = M(ST_RUNNING),
	[ST_FAILED] = M(ST_RUNNING) | M(ST_PENDING),
	[ST_TIMED_OUT] = M(ST_RUNNING),
	[ST_DECLINED] = M(ST_AWAITING),
	[ST_CANCELLED] = M(ST_PENDING) | M(ST_AWAITING) | M(ST_SUSPENDED) |
			 M(ST_RUNNING),
	[ST_EXPIRED] = M(ST_AWAITING) | M(ST_SUSPENDED),
};

enum kind { K_ECHO, K_CKPT, K_SUSPEND, K_APPROVE, K_FLAKY, K_COUNT_TO,
	    K_PURE, NKIND };

static const char *const kind_tool[NKIND] = {
	"crash-echo", "crash-ckpt", "crash-suspend", "crash-approve",
	"crash-flaky", "count-to", "crash-pure",
};

enum { ACK_APPROVE = 1, ACK_DECLINE = 2, ACK_CANCEL = 4, ACK_RESUME = 8 };

struct job {
	char id[64];
	int kind;
	char key[48];         /* idempotency key or "" */
	bool acked;           /* its submission was answered */
	unsigned acks;        /* ACK_* answered */
	int to;               /* K_CKPT, K_COUNT_TO */
	/* From the event log. */
	int ev_status;        /* -1: no event yet */
	unsigned ev_seen;     /* statuses its events passed through */
	int nev[NEV];         /* partial approvals are not counted here */
	int partial;          /* approvals below a quorum */
	/* The first terminal state seen (status|finished_at|output|error). */
	char *terminal;
	int64_t db_terminal_finished; /* finished_at when the db saw it terminal */
	int db_terminal_status;       /* -1 until then */
	long kill_ckpt;       /* the checkpoint at the last kill */
	bool final_checked;
};

/* A hash table of jobs by id (open addressing; never shrinks). */
#define TABLE_SIZE (1u << 16)
static struct job *table[TABLE_SIZE];
static size_t njobs;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* table, counters */
static pthread_rwlock_t op_lock;  /* clients read, the killer writes */

static struct harness h;
static atomic_bool stop_clients;
static unsigned long long seed = 1;
static int nkills = 50, nclients = 4, min_ms = 100, max_ms = 600;

static long violations, kills, events_checked, gets_checked, acked_ops;
static long unknown_outcomes, resumed_from_ckpt, key_repeats;
static int64_t t_lock, t_db, t_restart, t_api; /* ms spent in each phase */
static int64_t next_seq;       /* the last seq checked */
static bool seq_started;

static void violation(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static void violation(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "VIOLATION: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	violations++;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* rnd is splitmix64 over a caller's state: reproducible per seed. */
static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int rnd_in(uint64_t *s, int lo, int hi)
{
	return lo + (int)(rnd(s) % (uint64_t)(hi - lo + 1));
}

static unsigned hash(const char *s)
{
	unsigned x = 2166136261u;

	while (*s)
		x = (x ^ (unsigned char)*s++) * 16777619u;
	return x;
}

/* job_get returns the job with id, creating it when create is set (mu). */
static struct job *job_get(const char *id, bool create)
{
	unsigned i = hash(id) & (TABLE_SIZE - 1);

	while (table[i]) {
		if (strcmp(table[i]->id, id) == 0)
			return table[i];
		i = (i + 1) & (TABLE_SIZE - 1);
	}
	if (!create || njobs >= TABLE_SIZE / 2)
		return NULL;
	table[i] = calloc(1, sizeof *table[i]);
	if (!table[i])
		abort();
	snprintf(table[i]->id, sizeof table[i]->id, "%s", id);
	table[i]->kind = -1;
	table[i]->ev_status = -1;
	table[i]->db_terminal_status = -1;
	njobs++;
	return table[i];
}

static int status_of(const char *name)
{
	for (int i = 0; name && i < NST; i++)
		if (strcmp(name, st_names[i]) == 0)
			return i;
	return -1;
}

static int event_of(const char *name)
{
	for (int i = 0; name && i < NEV; i++)
		if (strcmp(name, ev_names[i]) == 0)
			return i;
	return -1;
}

/* ---- the clients ------------------------------------------------------- */

struct client {
	int n;
	uint64_t rs;
	struct berth_client *c;
	pthread_t thread;
	/* Keys whose submission got no answer: submitted again first. */
	struct {
		int kind;
		char key[48];
		json_t *params;
	} pending_keys[64];
	int npending;
	int nkeys;
};

/* call returns 0 (result), 1 (error reply), or -1: the outcome is unknown
 * (the connection broke), and the connection is dropped. */
static int call(struct client *cl, const char *method, json_t *params,
		json_t **result, json_t **error)
{
	int rc;

	*result = NULL;
	*error = NULL;
	rc = berth_client_call(cl->c, method, params, 10000, result, error);
	if (rc < 0) {
		berth_client_close(cl->c);
		cl->c = NULL;
		pthread_mutex_lock(&mu);
		unknown_outcomes++;
		pthread_mutex_unlock(&mu);
		return -1;
	}
	return rc;
}

static json_int_t err_code(const json_t *e)
{
	return json_integer_value(json_object_get(e, "code"));
}

/* submit_params builds jobs/submit params for kind (new reference). */
static json_t *submit_params(struct client *cl, int kind, int *to)
{
	json_t *input;
	json_t *p;

	*to = 0;
	switch (kind) {
	case K_ECHO:
		input = json_pack("{s:i, s:i}", "n", rnd_in(&cl->rs, 0, 1000000),
				  "ms", rnd_in(&cl->rs, 0, 50));
		break;
	case K_CKPT:
		*to = rnd_in(&cl->rs, 5, 25);
		input = json_pack("{s:i, s:i}", "to", *to, "ms",
				  rnd_in(&cl->rs, 20, 60));
		break;
	case K_COUNT_TO:
		*to = rnd_in(&cl->rs, 3, 8);
		input = json_pack("{s:i, s:i}", "to", *to, "delayMs", 60);
		break;
	default:
		input = json_pack("{s:i}", "n", rnd_in(&cl->rs, 0, 1000000));
		break;
	}
	p = json_pack("{s:s, s:o, s:i}", "tool", kind_tool[kind], "input",
		      input, "maxRetries", 1000);
	if (rnd(&cl->rs) % 4 == 0)
		json_object_set_new(p, "delayMs",
				    json_integer(rnd_in(&cl->rs, 1, 400)));
	return p;
}

/* record_submit records an answered submission of result for kind/key. */
static void record_submit(int kind, const char *key, int to,
			  const json_t *result)
{
	const char *id = json_string_value(json_object_get(result, "id"));
	struct job *j;

	pthread_mutex_lock(&mu);
	if (!id) {
		violation("jobs/submit answered without an id");
		pthread_mutex_unlock(&mu);
		return;
	}
	j = job_get(id, true);
	if (j) {
		if (j->acked && key && *key && strcmp(j->key, key) != 0)
			violation("job %s answered for two keys", id);
		j->acked = true;
		j->kind = kind;
		j->to = to;
		if (key)
			snprintf(j->key, sizeof j->key, "%s", key);
		acked_ops++;
	}
	pthread_mutex_unlock(&mu);
}

/* Keys: key -> id, to check that a key always answers its first job. */
#define KEYS_SIZE (1u << 14)
static struct {
	char key[48];
	char id[64];
	int kind;
} keys[KEYS_SIZE];

static void record_key(const char *key, const char *id, int kind)
{
	unsigned i = hash(key) & (KEYS_SIZE - 1);

	pthread_mutex_lock(&mu);
	for (;;) {
		if (!keys[i].key[0]) {
			snprintf(keys[i].key, sizeof keys[i].key, "%s", key);
			snprintf(keys[i].id, sizeof keys[i].id, "%s", id);
			keys[i].kind = kind;
			break;
		}
		if (strcmp(keys[i].key, key) == 0) {
			if (strcmp(keys[i].id, id) != 0)
				violation("key %s made two jobs: %s and %s",
					  key, keys[i].id, id);
			else
				key_repeats++;
			break;
		}
		i = (i + 1) & (KEYS_SIZE - 1);
	}
	pthread_mutex_unlock(&mu);
}

/* key_kind returns the kind a key was first answered for (K_ECHO when it
 * was not answered yet): a key is unique per tool. */
static int key_kind(const char *key)
{
	unsigned i = hash(key) & (KEYS_SIZE - 1);
	int kind = K_ECHO;

	pthread_mutex_lock(&mu);
	for (; keys[i].key[0]; i = (i + 1) & (KEYS_SIZE - 1)) {
		if (strcmp(keys[i].key, key) == 0) {
			kind = keys[i].kind;
			break;
		}
	}
	pthread_mutex_unlock(&mu);
	return kind;
}

static void op_submit(struct client *cl, int kind, const char *key,
		      json_t *params)
{
	json_t *res, *err;
	int to = 0;
	int rc;

	if (!params) {
		params = submit_params(cl, kind, &to);
		if (key)
			json_object_set_new(params, "idempotencyKey",
					    json_string(key));
	} else {
		json_t *in = json_object_get(params, "input");

		to = (int)json_integer_value(json_object_get(in, "to"));
		json_incref(params);
	}
	rc = call(cl, "jobs/submit", params, &res, &err);
	if (rc < 0 && key && cl->npending < 64) {
		/* Unknown: the same key must be submitted again until it is
		 * answered, and must then never make a second job. */
		cl->pending_keys[cl->npending].kind = kind;
		snprintf(cl->pending_keys[cl->npending].key, 48, "%s", key);
		cl->pending_keys[cl->npending].params = json_incref(params);
		cl->npending++;
	} else if (rc == 0) {
		record_submit(kind, key, to, res);
		if (key)
			record_key(key, json_string_value(
						json_object_get(res, "id")), kind);
	} else if (rc == 1 && err_code(err) != -32013) {
		char *s = json_dumps(err, 0);

		pthread_mutex_lock(&mu);
		violation("jobs/submit of %s failed: %s", kind_tool[kind], s);
		pthread_mutex_unlock(&mu);
		free(s);
	}
	json_decref(params);
	json_decref(res);
	json_decref(err);
}

/* pick returns the id of a random acknowledged job of kind (-1: any) that
 * is not terminal as far as the events tell, copied to id; false if none. */
static bool pick(struct client *cl, int kind, char *id, size_t size)
{
	bool found = false;

	pthread_mutex_lock(&mu);
	if (njobs) {
		unsigned start = (unsigned)rnd(&cl->rs) & (TABLE_SIZE - 1);

		for (unsigned k = 0; k < TABLE_SIZE; k++) {
			struct job *j = table[(start + k) & (TABLE_SIZE - 1)];

			if (!j || !j->acked || (kind >= 0 && j->kind != kind) ||
			    (j->ev_status >= 0 && TERMINAL(j->ev_status)))
				continue;
			snprintf(id, size, "%s", j->id);
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&mu);
	return found;
}

static void op_transition(struct client *cl, const char *method, int kind,
			  unsigned ack)
{
	char id[64];
	json_t *p, *res, *err;
	int rc;

	if (!pick(cl, kind, id, sizeof id))
		return;
	if (ack == ACK_RESUME)
		p = json_pack("{s:s, s:{s:i}}", "id", id, "resumeData", "answer",
			      rnd_in(&cl->rs, 0, 1000));
	else if (ack == ACK_DECLINE || ack == ACK_CANCEL)
		p = json_pack("{s:s, s:s}", "id", id, "reason", "crash test");
	else
		p = json_pack("{s:s}", "id", id);
	rc = call(cl, method, p, &res, &err);
	json_decref(p);
	if (rc == 0) {
		pthread_mutex_lock(&mu);
		job_get(id, true)->acks |= ack;
		acked_ops++;
		pthread_mutex_unlock(&mu);
	} else if (rc == 1 && err_code(err) != -32012) {
		char *s = json_dumps(err, 0);

		pthread_mutex_lock(&mu);
		violation("%s %s: unexpected error %s", method, id, s);
		pthread_mutex_unlock(&mu);
		free(s);
	}
	json_decref(res);
	json_decref(err);
}

static void client_step(struct client *cl)
{
	int r = rnd_in(&cl->rs, 0, 99);
	char key[48];

	if (cl->npending) {
		/* The oldest unanswered key first. */
		int kind = cl->pending_keys[0].kind;
		json_t *params = cl->pending_keys[0].params;

		snprintf(key, sizeof key, "%s", cl->pending_keys[0].key);
		memmove(&cl->pending_keys[0], &cl->pending_keys[1],
			(size_t)(cl->npending - 1) * sizeof cl->pending_keys[0]);
		cl->npending--;
		op_submit(cl, kind, key, params);
		json_decref(params);
		return;
	}
	if (r < 45) {
		static const int weights[] = {K_ECHO, K_ECHO, K_ECHO, K_CKPT,
					      K_CKPT, K_SUSPEND, K_SUSPEND,
					      K_APPROVE, K_APPROVE, K_FLAKY,
					      K_COUNT_TO, K_PURE, K_PURE};
		int kind = weights[rnd(&cl->rs) % (sizeof weights /
						   sizeof weights[0])];

		if (rnd(&cl->rs) % 2) {
			snprintf(key, sizeof key, "s%llu-c%d-k%d", seed, cl->n,
				 cl->nkeys++);
			op_submit(cl, kind, key, NULL);
		} else {
			op_submit(cl, kind, NULL, NULL);
		}
	} else if (r < 58) {
		op_transition(cl, "jobs/approve", K_APPROVE, ACK_APPROVE);
	} else if (r < 64) {
		op_transition(cl, "jobs/decline", K_APPROVE, ACK_DECLINE);
	} else if (r < 80) {
		op_transition(cl, "jobs/resume", K_SUSPEND, ACK_RESUME);
	} else if (r < 86) {
		op_transition(cl, "jobs/cancel", -1, ACK_CANCEL);
	} else if (r < 92 && cl->nkeys) {
		/* An answered key again: it must answer the same job. The
		 * params differ, which a key does not care about. */
		snprintf(key, sizeof key, "s%llu-c%d-k%d", seed, cl->n,
			 rnd_in(&cl->rs, 0, cl->nkeys - 1));
		op_submit(cl, key_kind(key), key, NULL);
	} else {
		json_t *res, *err;

		call(cl, "server/info", NULL, &res, &err);
		json_decref(res);
		json_decref(err);
	}
}

static void *client_main(void *arg)
{
	struct client *cl = arg;

	while (!atomic_load(&stop_clients)) {
		pthread_rwlock_rdlock(&op_lock);
		if (!cl->c)
			cl->c = berth_client_connect(h.socket);
		if (cl->c)
			client_step(cl);
		pthread_rwlock_unlock(&op_lock);
		sleep_ms(cl->c ? rnd_in(&cl->rs, 0, 15) : 20);
	}
	for (int i = 0; i < cl->npending; i++)
		json_decref(cl->pending_keys[i].params);
	cl->npending = 0;
	if (cl->c)
		berth_client_close(cl->c);
	cl->c = NULL;
	return NULL;
}

/* ---- the checks -------------------------------------------------------- */

/* check_db reads the quiescent database of a killed daemon (see the top). */
static void check_db(void)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	bool ok = false;
	size_t seen = 0, acked = 0;

	if (sqlite3_open_v2(h.db, &db, SQLITE_OPEN_READWRITE, NULL) !=
	    SQLITE_OK) {
		violation("cannot open %s: %s", h.db, sqlite3_errmsg(db));
		sqlite3_close(db);
		return;
	}
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) ==
	    SQLITE_OK) {
		while (sqlite3_step(st) == SQLITE_ROW) {
			const char *r = (const char *)sqlite3_column_text(st, 0);

			if (r && strcmp(r, "ok") == 0)
				ok = true;
			else
				violation("integrity_check: %s", r ? r : "?");
		}
		sqlite3_finalize(st);
	}
	if (!ok)
		violation("integrity_check did not answer ok");
	if (sqlite3_prepare_v2(db,
			       "SELECT id, status, decision, resume_data IS NOT "
			       "NULL, json_extract(checkpoint, '$.i'), "
			       "finished_at FROM jobs",
			       -1, &st, NULL) != SQLITE_OK) {
		violation("reading jobs: %s", sqlite3_errmsg(db));
		sqlite3_close(db);
		return;
	}
	pthread_mutex_lock(&mu);
	for (unsigned i = 0; i < TABLE_SIZE; i++)
		if (table[i])
			table[i]->final_checked = false; /* reused: "row seen" */
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *id = (const char *)sqlite3_column_text(st, 0);
		int s = sqlite3_column_int(st, 1);
		int decision = sqlite3_column_int(st, 2);
		bool has_resume = sqlite3_column_int(st, 3);
		struct job *j = job_get(id, true);

		if (!j)
			continue;
		j->final_checked = true;
		seen++;
		if (sqlite3_column_type(st, 4) != SQLITE_NULL && !TERMINAL(s))
			j->kill_ckpt = (long)sqlite3_column_int64(st, 4);
		if ((j->acks & ACK_CANCEL) && s != ST_CANCELLED)
			violation("%s: cancel was answered, the db says %s",
				  id, st_names[s]);
		if ((j->acks & ACK_DECLINE) && s != ST_DECLINED)
			violation("%s: decline was answered, the db says %s",
				  id, st_names[s]);
		if ((j->acks & ACK_APPROVE) && (s == ST_AWAITING || decision != 1))
			violation("%s: approve was answered, the db says %s "
				  "(decision %d)", id, st_names[s], decision);
		if ((j->acks & ACK_RESUME) && !has_resume)
			violation("%s: resume was answered, the db has no "
				  "resume data (%s)", id, st_names[s]);
		if (j->db_terminal_status >= 0) {
			if (s != j->db_terminal_status ||
			    sqlite3_column_int64(st, 5) !=
				    j->db_terminal_finished)
				violation("%s: terminal %s changed to %s", id,
					  st_names[j->db_terminal_status],
					  st_names[s]);
		} else if (TERMINAL(s)) {
			j->db_terminal_status = s;
			j->db_terminal_finished = sqlite3_column_int64(st, 5);
		}
	}
	sqlite3_finalize(st);
	for (unsigned i = 0; i < TABLE_SIZE; i++) {
		struct job *j = table[i];

		if (!j || !j->acked)
			continue;
		acked++;
		if (!j->final_checked)
			violation("%s: its submission was answered, the db has "
				  "no row", j->id);
	}
	pthread_mutex_unlock(&mu);
	sqlite3_close(db);
	(void)seen;
	(void)acked;
}

/* check_event checks one event against its job's history (mu). */
static void check_event(const json_t *e)
{
	json_int_t seq = json_integer_value(json_object_get(e, "seq"));
	const char *id = json_string_value(json_object_get(e, "jobId"));
	int type = event_of(json_string_value(json_object_get(e, "type")));
	int s = status_of(json_string_value(json_object_get(e, "status")));
	struct job *j;
	bool partial;

	events_checked++;
	if (seq_started && seq != next_seq + 1)
		violation("event seq %lld follows %lld", (long long)seq,
			  (long long)next_seq);
	seq_started = true;
	next_seq = seq;
	if (!id || type < 0 || s < 0) {
		char *d = json_dumps(e, 0);

		violation("a malformed event: %s", d);
		free(d);
		return;
	}
	j = job_get(id, true);
	if (!j)
		return;
	/* An approval below its tool's quorum is an "approved" event that
	 * leaves the job awaiting approval (docs/API.md): legal from
	 * awaiting approval only, and no decision. */
	partial = type == EV_APPROVED && s == ST_AWAITING;
	if (partial ? j->ev_status != ST_AWAITING
		    : ev_status[type] >= 0 ? s != ev_status[type]
					   : (s != ST_PENDING && s != ST_AWAITING))
		violation("%s: event %lld %s with status %s", id,
			  (long long)seq, ev_names[type], st_names[s]);
	if (j->ev_status < 0) {
		if (type != EV_CREATED)
			violation("%s: its first event %lld is %s", id,
				  (long long)seq, ev_names[type]);
	} else if (TERMINAL(j->ev_status)) {
		violation("%s: event %lld %s after terminal %s", id,
			  (long long)seq, ev_names[type],
			  st_names[j->ev_status]);
	} else if (type == EV_CREATED ||
		   !(legal_from[s] & M(j->ev_status))) {
		violation("%s: event %lld %s: %s -> %s is not a transition",
			  id, (long long)seq, ev_names[type],
			  st_names[j->ev_status], st_names[s]);
	}
	if (partial)
		j->partial++;
	else
		j->nev[type]++;
	j->ev_status = s;
	j->ev_seen |= M(s);
}

/* check_events reads the event log from the last check to its end. */
static void check_events(struct berth_client *c)
{
	for (;;) {
		json_t *p = json_pack("{s:I, s:i}", "since", (json_int_t)next_seq,
				      "limit", 1000);
		json_t *res = NULL, *err = NULL, *evs;
		size_t i, n;
		int rc = berth_client_call(c, "events/poll", p, 30000, &res, &err);

		json_decref(p);
		if (rc != 0) {
			violation("events/poll failed (%d)", rc);
			json_decref(err);
			return;
		}
		evs = json_object_get(res, "events");
		n = json_array_size(evs);
		pthread_mutex_lock(&mu);
		for (i = 0; i < n; i++)
			check_event(json_array_get(evs, i));
		pthread_mutex_unlock(&mu);
		json_decref(res);
		if (n < 1000)
			return;
	}
}

/* terminal_text returns what must never change about a terminal job. */
static char *terminal_text(const json_t *job)
{
	json_t *t = json_pack("{s:O?, s:O?, s:O?, s:O?}", "status",
			      json_object_get(job, "status"), "output",
			      json_object_get(job, "output"), "error",
			      json_object_get(job, "error"), "finishedAt",
			      json_object_get(job, "finishedAt"));
	char *s = json_dumps(t, JSON_SORT_KEYS | JSON_COMPACT);

	json_decref(t);
	return s;
}

/* check_job checks one job's Job object against its history (mu). */
static void check_job(struct job *j, const json_t *job)
{
	int s = status_of(json_string_value(json_object_get(job, "status")));

	gets_checked++;
	if (s < 0) {
		violation("%s: no status", j->id);
		return;
	}
	if (!(j->ev_seen & M(s)))
		violation("%s: status %s, never reached by its events", j->id,
			  st_names[s]);
	/* The listing was taken before the events were read, so the job may
	 * have moved on since; but a terminal listing must be its last. */
	if (TERMINAL(s) && s != j->ev_status)
		violation("%s: listed %s, but its last event says %s", j->id,
			  st_names[s],
			  j->ev_status >= 0 ? st_names[j->ev_status] : "none");
	if (j->nev[EV_CREATED] != 1)
		violation("%s: %d created events", j->id, j->nev[EV_CREATED]);
	if ((j->acks & ACK_CANCEL) && j->nev[EV_CANCELLED] != 1)
		violation("%s: cancel answered, %d cancelled events", j->id,
			  j->nev[EV_CANCELLED]);
	if ((j->acks & ACK_DECLINE) && j->nev[EV_DECLINED] != 1)
		violation("%s: decline answered, %d declined events", j->id,
			  j->nev[EV_DECLINED]);
	if ((j->acks & ACK_APPROVE) && j->nev[EV_APPROVED] != 1)
		violation("%s: approve answered, %d approved events", j->id,
			  j->nev[EV_APPROVED]);
	if ((j->acks & ACK_RESUME) && j->nev[EV_RESUMED] != 1)
		violation("%s: resume answered, %d resumed events", j->id,
			  j->nev[EV_RESUMED]);
	if (j->nev[EV_APPROVED] + j->nev[EV_DECLINED] > 1)
		violation("%s: decided twice", j->id);
	if (TERMINAL(s)) {
		char *t = terminal_text(job);

		if (!j->terminal)
			j->terminal = t;
		else {
			if (strcmp(t, j->terminal) != 0)
				violation("%s: terminal job changed: %s -> %s",
					  j->id, j->terminal, t);
			free(t);
		}
	}
}

/* fetch_all lists every job (new reference to an array), or NULL. */
static json_t *fetch_all(struct berth_client *c)
{
	json_t *all = json_array();
	json_t *cursor = NULL;

	for (;;) {
		json_t *p = json_pack("{s:i}", "limit", 1000);
		json_t *res = NULL, *err = NULL, *next;
		int rc;

		if (cursor)
			json_object_set(p, "cursor", cursor);
		rc = berth_client_call(c, "jobs/list", p, 30000, &res, &err);
		json_decref(p);
		json_decref(cursor);
		cursor = NULL;
		if (rc != 0) {
			violation("jobs/list failed (%d)", rc);
			json_decref(err);
			json_decref(all);
			return NULL;
		}
		json_array_extend(all, json_object_get(res, "jobs"));
		next = json_object_get(res, "nextCursor");
		if (next)
			cursor = json_incref(next);
		json_decref(res);
		if (!cursor)
			return all;
	}
}

/* check_api checks through the socket (see the top). Jobs are listed
 * first and events read after, so a job's events always cover the status
 * its listing showed. */
static void check_api(void)
{
	struct berth_client *c = harness_connect(&h);
	json_t *all, *v;
	size_t i;

	if (!c) {
		violation("cannot connect after the restart");
		return;
	}
	all = fetch_all(c);
	check_events(c);
	if (!all) {
		berth_client_close(c);
		return;
	}
	pthread_mutex_lock(&mu);
	/* No (tool, key) with two jobs. */
	{
		json_t *seen = json_object();

		json_array_foreach(all, i, v) {
			const char *k = json_string_value(
				json_object_get(v, "idempotencyKey"));
			char tk[256];

			if (!k)
				continue;
			snprintf(tk, sizeof tk, "%s\n%s",
				 json_string_value(json_object_get(v, "tool")), k);
			if (json_object_get(seen, tk))
				violation("key %s has two jobs", k);
			json_object_set_new(seen, tk, json_true());
		}
		json_decref(seen);
	}
	for (unsigned t = 0; t < TABLE_SIZE; t++)
		if (table[t])
			table[t]->final_checked = false; /* "listed" */
	json_array_foreach(all, i, v) {
		struct job *j = job_get(
			json_string_value(json_object_get(v, "id")), true);

		if (!j)
			continue;
		j->final_checked = true;
		check_job(j, v);
	}
	for (unsigned t = 0; t < TABLE_SIZE; t++)
		if (table[t] && table[t]->acked && !table[t]->final_checked)
			violation("%s: answered, but jobs/list lacks it",
				  table[t]->id);
	pthread_mutex_unlock(&mu);
	json_decref(all);
	berth_client_close(c);
}

/* settle approves and resumes whatever waits and returns once every job is
 * terminal (true), or false once limit_ms passed with no job ending: a long
 * run leaves a backlog that --workers 4 takes minutes to drain, and only a
 * queue that stopped moving is a fault. */
static bool settle(int limit_ms)
{
	struct berth_client *c = harness_connect(&h);
	int64_t end = now_ms() + limit_ms;
	size_t fewest = SIZE_MAX;
	bool done = false;

	if (!c)
		return false;
	while (!done && now_ms() < end) {
		json_t *all = fetch_all(c), *v;
		size_t i, left = 0;

		if (!all)
			break;
		done = true;
		json_array_foreach(all, i, v) {
			int s = status_of(json_string_value(
				json_object_get(v, "status")));
			const char *id = json_string_value(json_object_get(v, "id"));
			json_t *res = NULL, *err = NULL, *p = NULL;

			if (TERMINAL(s))
				continue;
			done = false;
			left++;
			if (s == ST_AWAITING)
				berth_client_call(c, "jobs/approve",
						  p = json_pack("{s:s}", "id", id),
						  10000, &res, &err);
			else if (s == ST_SUSPENDED)
				berth_client_call(
					c, "jobs/resume",
					p = json_pack("{s:s, s:{}}", "id", id,
						      "resumeData"),
					10000, &res, &err);
			json_decref(p);
			json_decref(res);
			json_decref(err);
		}
		json_decref(all);
		if (left < fewest) {
			fewest = left;
			end = now_ms() + limit_ms;
		}
		if (!done)
			sleep_ms(200);
	}
	berth_client_close(c);
	return done;
}

/* check_final: every job terminal; checkpointing jobs counted fully and
 * resumed from no earlier than their checkpoint at the last kill. */
static void check_final(void)
{
	struct berth_client *c = harness_connect(&h);
	json_t *all;
	size_t i;
	json_t *v;

	if (!c) {
		violation("cannot connect for the final check");
		return;
	}
	all = fetch_all(c);
	check_events(c);
	berth_client_close(c);
	if (!all)
		return;
	pthread_mutex_lock(&mu);
	json_array_foreach(all, i, v) {
		const char *id = json_string_value(json_object_get(v, "id"));
		const char *tool = json_string_value(json_object_get(v, "tool"));
		int s = status_of(json_string_value(json_object_get(v, "status")));
		struct job *j = job_get(id, true);
		const json_t *out = json_object_get(v, "output");

		if (!j)
			continue;
		check_job(j, v);
		if (!TERMINAL(s))
			violation("%s (%s): still %s after the workload", id,
				  tool, st_names[s]);
		if (s == ST_FAILED || s == ST_TIMED_OUT) {
			char *e = json_dumps(json_object_get(v, "error"), 0);

			violation("%s (%s): %s: %s", id, tool, st_names[s],
				  e ? e : "");
			free(e);
		}
		if (s == ST_COMPLETED && tool &&
		    (strcmp(tool, "crash-ckpt") == 0 ||
		     strcmp(tool, "count-to") == 0)) {
			json_int_t from = json_integer_value(
				json_object_get(out, "resumedFrom"));
			json_int_t counted = json_integer_value(
				json_object_get(out, "counted"));
			json_int_t to = json_integer_value(json_object_get(
				json_object_get(v, "input"), "to"));

			if (counted != to)
				violation("%s: counted %lld of %lld", id,
					  (long long)counted, (long long)to);
			if (from < j->kill_ckpt)
				violation("%s: resumed from %lld, but had "
					  "checkpoint %ld when last killed",
					  id, (long long)from, j->kill_ckpt);
			if (from > 0)
				resumed_from_ckpt++;
		}
	}
	pthread_mutex_unlock(&mu);
	json_decref(all);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"seed", required_argument, NULL, 's'},
		{"kills", required_argument, NULL, 'k'},
		{"clients", required_argument, NULL, 'c'},
		{"min-ms", required_argument, NULL, 'm'},
		{"max-ms", required_argument, NULL, 'M'},
		{NULL, 0, NULL, 0},
	};
	static const char *const args[] = {"--workers", "4", "--quiet", NULL};
	struct client *clients;
	pthread_rwlockattr_t attr;
	uint64_t ks;
	int o, status;
	int64_t t0 = now_ms();

	seed = (unsigned long long)time(NULL);
	if (getenv("CRASH_SEED"))
		seed = strtoull(getenv("CRASH_SEED"), NULL, 10);
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 's': seed = strtoull(optarg, NULL, 10); break;
		case 'k': nkills = atoi(optarg); break;
		case 'c': nclients = atoi(optarg); break;
		case 'm': min_ms = atoi(optarg); break;
		case 'M': max_ms = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: crash [--seed N] [--kills N] "
				"[--clients N] [--min-ms N] [--max-ms N]\n");
			return 2;
		}
	}
	if (nclients < 1 || nclients > 64 || nkills < 0 || min_ms < 0 ||
	    max_ms < min_ms) {
		fprintf(stderr, "crash: bad arguments\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	printf("crash: seed %llu, %d kills, %d clients\n", seed, nkills,
	       nclients);
	fflush(stdout);
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(
		&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&op_lock, &attr);
	if (harness_start(&h, args) != 0)
		return 1;
	clients = calloc((size_t)nclients, sizeof *clients);
	for (int i = 0; i < nclients; i++) {
		clients[i].n = i;
		clients[i].rs = seed * 1000003ULL + (uint64_t)i;
		pthread_create(&clients[i].thread, NULL, client_main,
			       &clients[i]);
	}
	ks = seed;
	for (int k = 0; k < nkills; k++) {
		sleep_ms(rnd_in(&ks, min_ms, max_ms));
		if (harness_kill9(&h) != 0) {
			violation("berthd was not running at kill %d", k + 1);
			if (harness_restart(&h) != 0)
				break;
			continue;
		}
		int64_t t = now_ms();

		kills++;
		pthread_rwlock_wrlock(&op_lock);
		t_lock += now_ms() - t;
		t = now_ms();
		check_db();
		t_db += now_ms() - t;
		t = now_ms();
		if (harness_restart(&h) != 0) {
			violation("berthd did not restart after kill %d", k + 1);
			pthread_rwlock_unlock(&op_lock);
			break;
		}
		t_restart += now_ms() - t;
		t = now_ms();
		check_api();
		t_api += now_ms() - t;
		pthread_rwlock_unlock(&op_lock);
	}
	atomic_store(&stop_clients, true);
	for (int i = 0; i < nclients; i++)
		pthread_join(clients[i].thread, NULL);
	free(clients);
	if (!settle(60000))
		violation("jobs still not terminal, none having ended for 60 s "
			  "after the workload");
	check_final();
	status = harness_stop(&h);
	if (status != 0)
		violation("berthd exited with %d after SIGTERM", status);
	check_db();
	printf("crash: seed %llu: %ld kills, %zu jobs, %ld answered operations, "
	       "%ld unknown outcomes, %ld events and %ld job states checked, "
	       "%ld key repeats, %ld resumed from a checkpoint, %.1f s, "
	       "%ld violations\n",
	       seed, kills, njobs, acked_ops, unknown_outcomes, events_checked,
	       gets_checked, key_repeats, resumed_from_ckpt,
	       (double)(now_ms() - t0) / 1000.0, violations);
	printf("crash: time in clients' last calls %.1f s, database checks %.1f s, "
	       "restarts %.1f s, socket checks %.1f s\n", (double)t_lock / 1000,
	       (double)t_db / 1000, (double)t_restart / 1000,
	       (double)t_api / 1000);
	if (violations == 0)
		harness_cleanup(&h);
	else
		fprintf(stderr, "crash: the database is kept in %s\n", h.dir);
	for (unsigned i = 0; i < TABLE_SIZE; i++) {
		if (table[i]) {
			free(table[i]->terminal);
			free(table[i]);
		}
	}
	pthread_rwlock_destroy(&op_lock);
	return violations ? 1 : 0;
}

/*
 * store_int.h: what the parts of the store share and nobody else sees: the
 * backend operations table, the writer's view of a request, a batch (one
 * transaction) and the store itself. Internal names carry "store__".
 */
#ifndef BERTH_STORE_INT_H
#define BERTH_STORE_INT_H

#include <pthread.h>
#include <string.h>

#include "store/store.h"

/* The JSON fields of a request, serialized on the loop thread by
 * store_submit so that the writer thread only binds text. */
enum store__text {
	STORE__T_INPUT,
	STORE__T_REQUEST_CONTEXT,
	STORE__T_METADATA,
	STORE__T_OUTPUT,
	STORE__T_MODEL_OUTPUT,
	STORE__T_ERROR,
	STORE__T_SUSPEND,
	STORE__T_RESUME,
	STORE__T_CHECKPOINT,
	STORE__T_PROGRESS,
	STORE__T_EVENT,
	STORE__T_APPROVAL_EVENT, /* CREATE: approval_requested's own data */
	STORE__T_APPROVALS,      /* the job's approvals */
	STORE__T_CLIENT,         /* the events' MCP client */
	STORE__T_VIEWS,
	STORE__T_DEFINITION,     /* TOOL_DEFINE */
	STORE__T_COUNT
};

/* A JSON value of a result job that the writer read as text: deliver
 * parses it into *field on the loop thread before done runs, so that the
 * writer, the store's one serial stage, does not spend its time in the
 * JSON parser. */
struct store__raw {
	json_t **field; /* in a job of the request's results (job, jobs) */
	char *text;     /* malloc'd, NUL-terminated */
};

/*
 * struct store__wreq is a request as the writer holds it. The loop thread
 * fills it in store_submit; the writer thread owns it from the queue until
 * it hands the batch back; the loop thread frees it after done has run.
 */
struct store__wreq {
	struct store_req *req;
	struct store__wreq *next;
	int rc;              /* the request's own outcome */
	bool durable;        /* set by the writer once its batch is settled */
	char *text[STORE__T_COUNT];
	char **line_data;    /* STORE_OP_LOG: one text (or NULL) a line */
	/* STORE_OP_CREATE: the values the store stamps, chosen at submit. */
	int64_t created_at;
	int64_t run_at;
	int64_t expires_at;
	struct store_job *job; /* the new job, as done will see it */
	/* STORE_OP_TRANSITION of a job whose held creation (store_release)
	 * comes earlier in the queue: that creation, and in job the job as
	 * the transition leaves it, made at job->updated_at. A backend may
	 * then write the job's row once, in its final state, and set
	 * absorbed; done sees job. */
	struct store__wreq *absorb_into;
	bool absorbed;
	int64_t arg;           /* EXPIRE: now; STORE__OP_MAX_PAGES: pages */
	struct store__raw *raw; /* values of the results still to parse */
	size_t nraw, cap_raw;
};

/* store__wreq_raw records that *field, in a result job of w, is the JSON
 * text (len bytes) to parse on the loop thread; *field stays NULL until
 * then. Returns 0 or -ENOMEM. Writer thread. */
int store__wreq_raw(struct store__wreq *w, json_t **field, const char *text,
		    size_t len);

/* A request only the store's tests make: caps the database's size in
 * pages (PRAGMA max_page_count), the way a full disk would. */
enum { STORE__OP_MAX_PAGES = 1000 };

/* store__max_page_count runs STORE__OP_MAX_PAGES on the writer's
 * connection and waits for it. Returns 0 or a negative code. */
int store__max_page_count(struct store *st, int64_t pages);

/* store__scheduler_order compares two jobs by the order claims take
 * them (store.h): highest priority first, then earliest run_at, then
 * smallest id; negative when a comes first. For qsort's comparators. */
static inline int store__scheduler_order(int64_t a_priority, int64_t a_run_at,
					 const char *a_id, int64_t b_priority,
					 int64_t b_run_at, const char *b_id)
{
	if (a_priority != b_priority)
		return a_priority > b_priority ? -1 : 1;
	if (a_run_at != b_run_at)
		return a_run_at < b_run_at ? -1 : 1;
	return strcmp(a_id, b_id);
}

/* One transaction's worth of requests, with the events it appended. The
 * events' data and tool strings are borrowed from the requests and their
 * results, which live until done has run; a rolled-back batch drops its
 * events with the results. */
struct store__batch {
	struct store__wreq *head;
	size_t n;
	struct store_event *events;
	size_t nevents, cap;
	struct store__batch *next;
};

/* The audit of an event as a backend appends it: who (NULL: berthd), how
 * (NULL: berthd) and the MCP client (NULL: none), all borrowed. */
struct store__who {
	const char *by;
	const char *via;
	json_t *client;
};

/* store__batch_event appends an event to b; tool, data and who's strings
 * are borrowed (see above), and a NULL by or via is berthd's. Returns 0
 * or -ENOMEM. */
int store__batch_event(struct store__batch *b, int64_t seq, const char *job_id,
		       const char *tool, int type, int status, int64_t at,
		       json_t *data, const struct store__who *who);

/*
 * struct store__backend is the table a backend fills. Every function gets
 * the backend's own state (be).
 *
 * Writer thread: begin, apply (and settle) and commit/rollback make one
 * transaction.
 * apply performs one request: it returns 0 when the request was dealt with
 * (its outcome, 0 or a logical error such as STORE_ECONFLICT, is in w->rc,
 * and a failed request wrote nothing) or a negative storage error, which
 * aborts the whole transaction. It puts results in w->req and events in b.
 *
 * Loop thread: the reads, on a connection of their own.
 */
struct store__backend {
	const char *name;
	int (*open)(const struct store_config *cfg, void **be, char **errmsg);
	void (*close)(void *be);

	int (*begin)(void *be);
	int (*apply)(void *be, struct store__wreq *w, struct store__batch *b);
	/* settle, when not NULL, runs after the last apply and before
	 * commit: a backend that sends requests ahead of their results
	 * (PostgreSQL's pipeline) reads them here, so that every request
	 * of the batch has its outcome and results (a claim its jobs) before
	 * the commit makes them visible. A negative code aborts the
	 * transaction, as apply's does. */
	int (*settle)(void *be);
	int (*commit)(void *be);
	void (*rollback)(void *be);

	int (*get)(void *be, const char *id, struct store_job **out);
	/* list reads as store_list does, before before_id (NULL: from the
	 * newest). With f->id_prefix it reads the range of ids from the
	 * prefix to prefix_end (store__prefix_end; "" for none) and keeps
	 * the ids that begin with the prefix. */
	int (*list)(void *be, const struct store_filter *f, int limit,
		    const char *before_id, struct store_job ***jobs, size_t *n);
	int (*running)(void *be, struct store_job ***jobs, size_t *n);
	int (*events)(void *be, int64_t after, const char *job_id, int limit,
		      struct store_event **out, size_t *n);
	/* events_typed reads as store_events_typed does; it is called with
	 * *next at q->after and *more false. */
	int (*events_typed)(void *be, const struct store_event_query *q,
			    struct store_event **out, size_t *n,
			    int64_t *next, bool *more);
	int64_t (*last_seq)(void *be);
	int (*count_by_status)(void *be, int64_t counts[STORE_NSTATUS]);
	int (*logs)(void *be, const char *job_id, int64_t after, int limit,
		    struct store_log_line **out, size_t *n);
	int (*tool_paused)(void *be, const char *tool);
	int (*next_run_at)(void *be, int64_t *at);
	int (*next_expiry)(void *be, int64_t *at);
	int (*procs)(void *be, struct store_proc **out, size_t *n);
	int (*definitions)(void *be, struct store_definition **out, size_t *n);

	/* Writer thread, once, before the first batch: the integrity check
	 * open left to it (SQLite, a large database; store_config's
	 * check_inline_max). Returns 0, or a negative code with *errmsg
	 * (malloc'd). NULL: nothing to check. */
	int (*check)(void *be, char **errmsg);

	/*
	 * A database several nodes share (PostgreSQL) sets shared and the
	 * three hooks below; SQLite leaves them NULL. Loop thread.
	 *
	 * Other nodes commit events too, so the store delivers events to its
	 * listeners by seq from the database (store.c, catch_up) whenever a
	 * local batch's first seq is not the next one, when notified, and on
	 * each tick. watch_fd returns the socket to poll for notifications
	 * (or -1 while there is none); notified consumes what arrived and
	 * returns 1 when other events may have committed, 0 when not, or a
	 * negative code (the connection is lost; tick reconnects). tick runs
	 * every tick_ms: it renews this node's leases and recovers the jobs
	 * of expired leases by policy (NULL: before store_recover, or after
	 * store_requeue_running: no recovery), which answers 1 for a tool
	 * whose job may run again, 0 for one that must not, and -1 for a
	 * tool this node does not know: that job is left to a node that
	 * knows it (store_know_tools).
	 */
	bool shared;
	int (*watch_fd)(void *be);
	int (*notified)(void *be);
	int (*tick)(void *be, int (*policy)(void *arg, const char *tool),
		    void *arg);
	int64_t (*tick_ms)(void *be);
};

extern const struct store__backend store__sqlite;
#ifdef BERTH_HAVE_PQ
extern const struct store__backend store__pg;
#endif

/* store__span_top returns the last seq of a read by type's span
 * (store_events_typed): scan seqs from first, the first seq after its
 * start, but none past last, the last seq committed (which first cannot
 * be past: it was read with it). */
static inline int64_t store__span_top(int64_t first, int64_t last, int scan)
{
	int64_t top = first <= INT64_MAX - scan ? first + scan - 1 : INT64_MAX;
	if (last < first)
		last = first;
	return top < last ? top : last;
}

/* store__is_pg_url returns true for a postgres:// or postgresql:// URL. */
static inline bool store__is_pg_url(const char *s)
{
	return s != NULL && (strncmp(s, "postgres://", 11) == 0 ||
			     strncmp(s, "postgresql://", 13) == 0);
}

/* store__json_text returns a malloc'd text of v, exactly what
 * json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) returns, only faster for
 * the common payloads; NULL when out of memory or v cannot be serialized
 * (a NaN). */
char *store__json_text(json_t *v);

/* The columns of a job in both backends' schemas, in the order their
 * row readers read them and their inserts bind them (enum store__col);
 * STORE__JOB_COLS_AFTER_STATUS are those after the first three (id, tool,
 * status), from their comma. */
#define STORE__JOB_COLS "id, tool, status" STORE__JOB_COLS_AFTER_STATUS
#define STORE__JOB_COLS_AFTER_STATUS                                          \
	", input, request_context, metadata, run_id, "                        \
	"tool_call_id, idempotency_key, priority, run_at, attempt, "          \
	"max_retries, timeout_ms, expires_at, ttl_ms, output, model_output, " \
	"error, suspend_payload, resume_data, checkpoint, approval_required, " \
	"decision, reason, decided_at, progress, retry_of, created_at, "      \
	"updated_at, started_at, finished_at, submitted_by, submitted_via, "  \
	"decided_by, decided_via, approvals, quorum, views"

enum store__col {
	C_ID,
	C_TOOL,
	C_STATUS,
	C_INPUT,
	C_REQUEST_CONTEXT,
	C_METADATA,
	C_RUN_ID,
	C_TOOL_CALL_ID,
	C_IDEMPOTENCY_KEY,
	C_PRIORITY,
	C_RUN_AT,
	C_ATTEMPT,
	C_MAX_RETRIES,
	C_TIMEOUT_MS,
	C_EXPIRES_AT,
	C_TTL_MS,
	C_OUTPUT,
	C_MODEL_OUTPUT,
	C_ERROR,
	C_SUSPEND,
	C_RESUME,
	C_CHECKPOINT,
	C_APPROVAL_REQUIRED,
	C_DECISION,
	C_REASON,
	C_DECIDED_AT,
	C_PROGRESS,
	C_RETRY_OF,
	C_CREATED_AT,
	C_UPDATED_AT,
	C_STARTED_AT,
	C_FINISHED_AT,
	C_SUBMITTED_BY,
	C_SUBMITTED_VIA,
	C_DECIDED_BY,
	C_DECIDED_VIA,
	C_APPROVALS,
	C_QUORUM,
	C_VIEWS,
	C_NCOLS
};

/* store__set_msg replaces *errmsg (freed) with a malloc'd sentence for a
 * person, or NULL when out of memory. */
void store__set_msg(char **errmsg, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* store__job_copy returns a deep copy of src (strings duplicated, json_t
 * values shared with a new reference), or NULL when out of memory. */
struct store_job *store__job_copy(const struct store_job *src);

/* store__job_apply makes j what the transition tr, made at now, leaves
 * of it (the same columns the backends' transition writes; json_t values
 * shared). Returns 0 or -ENOMEM, with j unchanged. */
int store__job_apply(struct store_job *j, const struct store_transition *tr,
		     int64_t now);

/* store__final_texts fills t with the texts of the job's row as w, a
 * creation, and then, a transition absorbed into it (or NULL), leave it:
 * w's, each replaced by then's where then sets that column. The texts are
 * borrowed from w and then. */
void store__final_texts(const struct store__wreq *w,
			const struct store__wreq *then,
			const char *t[STORE__T_COUNT]);

/* store__prefix_end writes into end (at least as long as prefix, plus one)
 * the least string that sorts after every id beginning with prefix: the
 * prefix without its trailing '-', its last hex digit raised by one ('9'
 * to 'a'), a carry past 'f'. Byte order and any collation that orders the
 * hex digits as bytes do agree on it, whatever they do with '-', so the
 * range [prefix, end) holds every match on either backend; the exact test
 * of the prefix is made on each row of it. "" when nothing sorts after
 * (a prefix of 'f's): the range has no end. */
void store__prefix_end(const char *prefix, char *end);

/* store__uuid7_floor writes into out the first 13 characters of a UUIDv7
 * made at ms ("xxxxxxxx-xxxx", its 48 bits of milliseconds) and a NUL:
 * every id store_uuid7 made before that millisecond sorts below it, every
 * later one at or above it. */
void store__uuid7_floor(int64_t ms, char out[14]);

#endif

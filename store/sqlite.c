/*
 * sqlite.c: the SQLite backend of the store.
 *
 * Two connections: the writer's, used only by the writer thread (after
 * open), and the reader's, used only by the loop thread. Both run in WAL
 * mode, so a read never waits behind a commit. Every statement is prepared
 * once per connection (SQLITE_PREPARE_PERSISTENT) and kept in a table
 * indexed by enum stmt_id; no SQL is ever built from a caller's string.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "log/log.h"
#include "migrations/migrations.h"
#include "store/jload.h"
#include "store/lock.h"
#include "store/migrate.h"
#include "store/store_int.h"
#include "store/walbuf.h"


enum stmt_id {
	S_BEGIN,
	S_COMMIT,
	S_ROLLBACK,
	S_JOB_BY_KEY,
	S_JOB_INSERT,
	S_JOB_GET,
	S_TRANSITION,
	S_CLAIM_TOOLS,
	S_CLAIM_PRIORITY,
	S_CLAIM_SCAN,
	S_CLAIM_ONE,
	S_CLAIM_NEXT,
	S_CHECKPOINT,
	S_PROGRESS,
	S_JOB_EXISTS,
	S_LOG_LAST,
	S_LOG_INSERT,
	S_LOG_TRIM,
	S_EXPIRE_SCAN,
	S_EXPIRE_ONE,
	S_TOOL_PAUSE,
	S_PRUNE_FLOOR,
	S_PRUNE_EVENTS,
	S_PRUNE_LOGS,
	S_PRUNE,
	S_LIST_ALL,
	S_LIST_STATUS,
	S_LIST_TOOL,
	S_LIST_RUN,
	S_LIST_PREFIX,
	S_RUNNING,
	S_EVENTS,
	S_EVENTS_JOB,
	S_EVENTS_SPAN,
	S_EVENTS_SPAN_JOB,
	S_EVENTS_TYPED,
	S_EVENTS_TYPED_JOB,
	S_LAST_SEQ,
	S_SEQ_FLOOR,
	S_COUNT,
	S_LOGS,
	S_TOOL_PAUSED,
	S_NEXT_RUN_AT,
	S_NEXT_EXPIRY,
	S_PROC_PUT,
	S_PROC_DEL,
	S_PROCS,
	S_DEF_PUT,
	S_DEF_DEL,
	S_DEFS,
	S_NSTMT
};

/* The residual filters of a listing: ?1 status mask (0: any), ?2 tool,
 * ?3 run id, ?4 the id to list before, ?5 the limit. Each S_LIST_* leads
 * with the one condition its index serves. */
#define LIST_REST                                                              \
	" id < ?4 AND (?1 = 0 OR ((1 << status) & ?1) != 0)"                   \
	" AND (?2 IS NULL OR tool = ?2) AND (?3 IS NULL OR run_id = ?3)"        \
	" ORDER BY id DESC LIMIT ?5"

/* The last seq ever given out, of a statement on event_seq_floor: the
 * largest in events, or the floor a prune left when it deleted that one
 * (migration 0007). */
#define LAST_SEQ "max(n, coalesce((SELECT max(seq) FROM events), 0))"

/* The jobs a prune deletes: terminal, finished before ?1. ?2 is the least
 * id made at ?1 (store__uuid7_floor): a job that finished before the
 * cutoff was made before it, so only the primary key below ?2 is walked
 * (migration 0005); the '+' keeps the planner off jobs_status, whose range
 * would be every terminal job. */
#define PRUNABLE " id < ?2 AND +status >= 4 AND +finished_at < ?1"

/* OR FAIL: a statement that changes one row, or whose failure fails the
 * whole transaction (the event inserts, the one-job updates: their only
 * errors are storage errors, and run_batch then rolls everything back),
 * needs no statement journal, which SQLite otherwise opens for each
 * statement that may abort within a transaction, and fills with a copy of
 * each page the statement changes. The job insert keeps ABORT: its constraint failure
 * is a request's own (-EEXIST) and must undo its rows only. */
static const char *const sql_text[S_NSTMT] = {
	[S_BEGIN] = "BEGIN IMMEDIATE",
	[S_COMMIT] = "COMMIT",
	[S_ROLLBACK] = "ROLLBACK",
	[S_JOB_BY_KEY] = "SELECT " STORE__JOB_COLS " FROM jobs"
			 " WHERE tool = ?1 AND idempotency_key = ?2",
	[S_JOB_INSERT] = "INSERT INTO jobs (" STORE__JOB_COLS ") VALUES (?1, ?2, ?3,"
			 " ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15,"
			 " ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25,"
			 " ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33, ?34, ?35,"
			 " ?36, ?37, ?38, ?39)",
	[S_JOB_GET] = "SELECT " STORE__JOB_COLS " FROM jobs WHERE id = ?1",
	/* ?1 id, ?2 from mask, ?3 to, ?4 now, ?5 set, ?6 run_at,
	 * ?7 attempt, ?8 output, ?9 model_output, ?10 error, ?11 suspend
	 * payload, ?12 resume data, ?13 checkpoint, ?14 decision, ?15 reason,
	 * ?16 expires_at, ?17 progress, ?18 by, ?19 via, ?20 approvals,
	 * ?21 quorum, ?22 the approvals the job must hold, ?23 views. The
	 * bits of ?5 are STORE_SET_*. A job entering suspended or
	 * awaiting_approval without an explicit expiry gets now + ttl_ms when
	 * it has a ttl. A new list of approvals is written only over the
	 * list it was made from (store.h, STORE_SET_APPROVALS). */
	[S_TRANSITION] =
		"UPDATE OR FAIL jobs SET status = ?3, updated_at = ?4,"
		" run_at = CASE WHEN ?5 & 1 THEN ?6 ELSE run_at END,"
		" attempt = CASE WHEN ?5 & 2 THEN ?7 ELSE attempt END,"
		" output = CASE WHEN ?5 & 4 THEN ?8 ELSE output END,"
		" model_output = CASE WHEN ?5 & 4 THEN ?9 ELSE model_output END,"
		" error = CASE WHEN ?5 & 8 THEN ?10 ELSE error END,"
		" suspend_payload = CASE WHEN ?5 & 16 THEN ?11"
		"   ELSE suspend_payload END,"
		" resume_data = CASE WHEN ?5 & 32 THEN ?12 ELSE resume_data END,"
		" checkpoint = CASE WHEN ?5 & 64 THEN ?13 ELSE checkpoint END,"
		" decision = CASE WHEN ?5 & 128 THEN ?14 ELSE decision END,"
		" reason = CASE WHEN ?5 & 128 THEN ?15 ELSE reason END,"
		" decided_at = CASE WHEN ?5 & 128 THEN ?4 ELSE decided_at END,"
		" decided_by = CASE WHEN ?5 & 128 THEN ?18 ELSE decided_by END,"
		" decided_via = CASE WHEN ?5 & 128 THEN ?19 ELSE decided_via END,"
		" approvals = CASE WHEN ?5 & 4096 THEN ?20 ELSE approvals END,"
		" quorum = CASE WHEN ?5 & 4096 THEN ?21 ELSE quorum END,"
		" started_at = CASE WHEN ?5 & 256 THEN ?4 ELSE started_at END,"
		" finished_at = CASE WHEN ?5 & 512 OR ?3 >= 4 THEN ?4"
		"   ELSE finished_at END,"
		" expires_at = CASE WHEN ?5 & 1024 THEN ?16"
		"   WHEN ?3 IN (1, 3) AND ttl_ms > 0 THEN ?4 + ttl_ms"
		"   ELSE expires_at END,"
		" progress = CASE WHEN ?5 & 2048 THEN ?17 ELSE progress END,"
		" views = CASE WHEN ?5 & 8192 THEN ?23 ELSE views END"
		" WHERE id = ?1 AND ((1 << status) & ?2) != 0"
		" AND (?5 & 4096 = 0"
		"   OR coalesce(json_array_length(approvals), 0) = ?22)"
		" RETURNING " STORE__JOB_COLS,
	/* INDEXED BY: without statistics the planner prefers jobs_status
	 * and sorts every pending job; these partial indexes are ordered
	 * the way the scheduler reads. A claim reads the pending jobs tool
	 * by tool (do_claim): the next tool after ?1 that has any, its
	 * priorities from the highest down, and of each the first ?4
	 * runnable jobs: a seek each, past neither other tools' jobs nor
	 * this one's delayed ones. */
	[S_CLAIM_TOOLS] = "SELECT tool FROM jobs INDEXED BY jobs_pending_tool"
			  " WHERE status = 0 AND tool > ?1 ORDER BY tool LIMIT 1",
	[S_CLAIM_PRIORITY] = "SELECT priority FROM jobs"
			     " INDEXED BY jobs_pending_tool"
			     " WHERE status = 0 AND tool = ?1 AND priority < ?2"
			     " ORDER BY priority DESC LIMIT 1",
	[S_CLAIM_SCAN] = "SELECT id, run_at FROM jobs"
			 " INDEXED BY jobs_pending_tool"
			 " WHERE status = 0 AND tool = ?1 AND priority = ?2"
			 " AND run_at <= ?3 AND NOT EXISTS (SELECT 1 FROM tools"
			 " WHERE name = ?1 AND paused)"
			 " ORDER BY run_at, id LIMIT ?4",
	[S_CLAIM_ONE] = "UPDATE OR FAIL jobs SET status = 2, started_at = ?2,"
			" updated_at = ?2 WHERE id = ?1 AND status = 0"
			" RETURNING " STORE__JOB_COLS,
	/* The claim's next run_at: future pending jobs by run_at; the
	 * claim skips the tools it excluded. */
	[S_CLAIM_NEXT] = "SELECT run_at, tool FROM jobs INDEXED BY jobs_pending_run_at"
			 " WHERE status = 0 AND run_at > ?1 AND NOT EXISTS"
			 " (SELECT 1 FROM tools WHERE name = jobs.tool AND paused)"
			 " ORDER BY run_at",
	[S_CHECKPOINT] = "UPDATE jobs SET checkpoint = ?2, updated_at = ?3"
			 " WHERE id = ?1 AND status = 2",
	[S_PROGRESS] = "UPDATE jobs SET progress = ?2, updated_at = ?3"
		       " WHERE id = ?1 AND status = 2",
	[S_JOB_EXISTS] = "SELECT 1 FROM jobs WHERE id = ?1",
	[S_LOG_LAST] = "SELECT max(n) FROM job_logs WHERE job_id = ?1",
	[S_LOG_INSERT] = "INSERT INTO job_logs (job_id, n, at, level, message,"
			 " data) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	[S_LOG_TRIM] = "DELETE FROM job_logs WHERE job_id = ?1 AND n <= ?2",
	[S_EXPIRE_SCAN] = "SELECT id FROM jobs INDEXED BY jobs_expiry"
			  " WHERE status IN (1, 3)"
			  " AND expires_at IS NOT NULL AND expires_at <= ?1"
			  " ORDER BY expires_at",
	[S_EXPIRE_ONE] = "UPDATE OR FAIL jobs SET status = 9, finished_at = ?2,"
			 " updated_at = ?2 WHERE id = ?1 AND status IN (1, 3)"
			 " RETURNING " STORE__JOB_COLS,
	[S_TOOL_PAUSE] = "INSERT INTO tools (name, paused) VALUES (?1, ?2)"
			 " ON CONFLICT (name) DO UPDATE SET paused = excluded.paused",
	/* The seqs about to be pruned stay given out (migration 0007). */
	[S_PRUNE_FLOOR] = "UPDATE event_seq_floor SET n = " LAST_SEQ,
	/* A pruned job's events and log lines go first, then the job. */
	[S_PRUNE_EVENTS] = "DELETE FROM events WHERE job_id IN (SELECT id FROM jobs"
			   " WHERE" PRUNABLE ")",
	[S_PRUNE_LOGS] = "DELETE FROM job_logs WHERE job_id IN (SELECT id FROM jobs"
			 " WHERE" PRUNABLE ")",
	[S_PRUNE] = "DELETE FROM jobs WHERE" PRUNABLE,
	[S_LIST_ALL] = "SELECT " STORE__JOB_COLS " FROM jobs WHERE" LIST_REST,
	/* jobs_status holds no completed job (migration 0006): the
	 * "status <> 4" lets the planner use it, and sq_list asks for
	 * completed jobs through S_LIST_ALL. */
	[S_LIST_STATUS] = "SELECT " STORE__JOB_COLS " FROM jobs WHERE status = ?6"
			  " AND status <> 4 AND" LIST_REST,
	[S_LIST_TOOL] = "SELECT " STORE__JOB_COLS " FROM jobs WHERE tool = ?2 AND"
			LIST_REST, /* by id: jobs has no index by tool */
	[S_LIST_RUN] = "SELECT " STORE__JOB_COLS " FROM jobs WHERE run_id = ?3 AND"
		       LIST_REST,
	/* The primary key's range from ?6, the prefix, to ?7, its end, and
	 * the exact test on each row of it. */
	[S_LIST_PREFIX] = "SELECT " STORE__JOB_COLS " FROM jobs WHERE id >= ?6"
			  " AND id < ?7 AND substr(id, 1, length(?6)) = ?6 AND"
			  LIST_REST,
	[S_RUNNING] = "SELECT " STORE__JOB_COLS " FROM jobs WHERE status = 2"
		      " AND status <> 4 ORDER BY id", /* jobs_status, as above */
	[S_EVENTS] = "SELECT seq, job_id, tool, type, status, at, data, actor,"
		     " via, client FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2",
	[S_EVENTS_JOB] = "SELECT seq, job_id, tool, type, status, at, data,"
			 " actor, via, client"
			 " FROM events WHERE job_id = ?3 AND seq > ?1"
			 " ORDER BY seq LIMIT ?2",
	/* A read by type (sq_events_typed): the first seq after ?1 (of job
	 * ?5) and the last one committed, then the events of types ?3 after
	 * ?1 up to ?4, at most ?2 of them. */
	[S_EVENTS_SPAN] = "SELECT (SELECT min(seq) FROM events WHERE seq > ?1),"
			  " (SELECT " LAST_SEQ " FROM event_seq_floor)",
	[S_EVENTS_SPAN_JOB] = "SELECT (SELECT min(seq) FROM events"
			      " WHERE job_id = ?5 AND seq > ?1),"
			      " (SELECT " LAST_SEQ " FROM event_seq_floor)",
	[S_EVENTS_TYPED] = "SELECT seq, job_id, tool, type, status, at, data,"
			   " actor, via, client FROM events"
			   " WHERE seq > ?1 AND seq <= ?4"
			   " AND ((1 << type) & ?3) != 0 ORDER BY seq LIMIT ?2",
	[S_EVENTS_TYPED_JOB] = "SELECT seq, job_id, tool, type, status, at,"
			       " data, actor, via, client FROM events"
			       " WHERE job_id = ?5 AND seq > ?1 AND seq <= ?4"
			       " AND ((1 << type) & ?3) != 0"
			       " ORDER BY seq LIMIT ?2",
	[S_LAST_SEQ] = "SELECT " LAST_SEQ " FROM event_seq_floor",
	/* The floor, and the largest seq in events (see next_seq). */
	[S_SEQ_FLOOR] = "SELECT n, coalesce((SELECT max(seq) FROM events), 0)"
			" FROM event_seq_floor",
	/* The jobs of each status but completed, from jobs_status, and all
	 * jobs (a count of the primary key's pages, not of its rows), in one
	 * statement: one snapshot, so completed = all - the others. */
	[S_COUNT] = "SELECT status, count(*) FROM jobs WHERE status <> 4"
		    " GROUP BY status UNION ALL SELECT -1, count(*) FROM jobs",
	[S_LOGS] = "SELECT n, at, level, message, data FROM job_logs"
		   " WHERE job_id = ?1 AND n > ?2 ORDER BY n LIMIT ?3",
	[S_TOOL_PAUSED] = "SELECT paused FROM tools WHERE name = ?1",
	[S_NEXT_RUN_AT] = "SELECT run_at FROM jobs INDEXED BY jobs_pending_run_at"
			  " WHERE status = 0 AND NOT EXISTS"
			  " (SELECT 1 FROM tools WHERE name = jobs.tool AND paused)"
			  " ORDER BY run_at LIMIT 1",
	[S_NEXT_EXPIRY] = "SELECT expires_at FROM jobs INDEXED BY jobs_expiry"
			  " WHERE status IN (1, 3)"
			  " AND expires_at IS NOT NULL ORDER BY expires_at LIMIT 1",
	/* One daemon per database: its node is ''. */
	[S_PROC_PUT] = "INSERT INTO procs (node, pid, job_id, start_min, start_max,"
		       " boot_id) VALUES ('', ?1, ?2, ?3, ?4, ?5)"
		       " ON CONFLICT (node, pid) DO UPDATE SET job_id = excluded.job_id,"
		       " start_min = excluded.start_min, start_max = excluded.start_max,"
		       " boot_id = excluded.boot_id",
	[S_PROC_DEL] = "DELETE FROM procs WHERE node = '' AND pid = ?1"
		       " AND start_min = ?2",
	[S_PROCS] = "SELECT job_id, pid, start_min, start_max, boot_id FROM procs"
		    " WHERE node = '' ORDER BY pid",
	[S_DEF_PUT] = "INSERT INTO worker_tools (name, definition, updated_at)"
		      " VALUES (?1, ?2, ?3) ON CONFLICT (name) DO UPDATE SET"
		      " definition = excluded.definition,"
		      " updated_at = excluded.updated_at",
	[S_DEF_DEL] = "DELETE FROM worker_tools WHERE name = ?1",
	[S_DEFS] = "SELECT name, definition FROM worker_tools ORDER BY name",
};

/* Multi-row event inserts: statements of 1, 2, 4, ... EV_ROWS_MAX rows. */
enum { EV_SIZES = 6, EV_ROWS_MAX = 1 << (EV_SIZES - 1) };
/* And of jobs: 1, 2, ... JOB_ROWS_MAX rows of C_NCOLS parameters. */
enum { JOB_SIZES = 5, JOB_ROWS_MAX = 1 << (JOB_SIZES - 1) };

/* An event appended to the batch but not yet inserted: its index in the
 * batch's events, and the texts of its data and its MCP client (borrowed
 * from the request). */
struct pending_event {
	size_t ev;
	const char *text;
	const char *client;
};

struct conn {
	sqlite3 *db;
	sqlite3_stmt *stmt[S_NSTMT];
	/* The writer's connection only: the events of the transaction not
	 * yet inserted (see flush_events), and their batch. */
	sqlite3_stmt *ev_stmt[EV_SIZES];
	struct pending_event *pend;
	size_t npend, cap_pend;
	struct store__batch *batch;
	/* The seq the next event must follow when SQLite's own choice (the
	 * largest seq in events, plus one) would give out a pruned one
	 * again; 0 when it would not, -1 when not known (see next_seq). */
	int64_t seq_floor;
	/* The creations not yet inserted (see flush_jobs), and the
	 * transition each absorbed (or NULL). */
	sqlite3_stmt *job_stmt[JOB_SIZES];
	struct store__wreq *jobs[JOB_ROWS_MAX];
	struct store__wreq *then[JOB_ROWS_MAX];
	size_t njobs;
};

struct sq {
	struct conn w; /* the writer thread's */
	struct conn r; /* the loop thread's, read only */
	struct store__lock lock; /* the one-daemon lock (lock.h) */
	/* The integrity check left to the writer thread (sq_check): the
	 * database was too large to check at open. */
	bool check_pending;
	char *path;
};

/* The list before-bound when there is no cursor: a BLOB sorts after every
 * TEXT, so "id < X'FF'" holds for any id and still makes a range. */
static const unsigned char list_top[1] = {0xff};

static int err(int rc)
{
	return store__sqlite_error(rc);
}

/* get returns the prepared statement id of c, preparing it on first use,
 * or NULL (an error of the connection). */
static sqlite3_stmt *get(struct conn *c, enum stmt_id id)
{
	if (c->stmt[id] == NULL &&
	    sqlite3_prepare_v3(c->db, sql_text[id], -1, SQLITE_PREPARE_PERSISTENT,
			       &c->stmt[id], NULL) != SQLITE_OK)
		return NULL;
	return c->stmt[id];
}

/* prepare_error returns the code for a failed get. */
static int prepare_error(struct conn *c)
{
	int rc = err(sqlite3_errcode(c->db));
	return rc != 0 ? rc : -EIO;
}

/* done resets s for its next use and drops its bindings. */
static void done(sqlite3_stmt *s)
{
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
}

/* rewind resets s for its next use, for a statement whose every
 * parameter is bound again each time (clearing them would be wasted work
 * on the hottest statements). */
static void rewind_stmt(sqlite3_stmt *s)
{
	sqlite3_reset(s);
}

/* run steps s to its end; returns 0 or a storage error. */
static int run(sqlite3_stmt *s)
{
	int rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		;
	done(s);
	return rc == SQLITE_DONE ? 0 : err(rc);
}

static void bind_str(sqlite3_stmt *s, int i, const char *v)
{
	if (v != NULL)
		sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(s, i);
}

/* bind_time binds t, or NULL for 0 (absent). */
static void bind_time(sqlite3_stmt *s, int i, int64_t t)
{
	if (t != 0)
		sqlite3_bind_int64(s, i, t);
	else
		sqlite3_bind_null(s, i);
}

/* ---- rows -------------------------------------------------------------- */

static char *col_str(sqlite3_stmt *s, int i, bool *oom)
{
	const unsigned char *t = sqlite3_column_text(s, i);
	if (t == NULL)
		return NULL;
	char *d = strndup((const char *)t, (size_t)sqlite3_column_bytes(s, i));
	if (d == NULL)
		*oom = true;
	return d;
}

/* col_json_w returns the JSON value of column i, or NULL. With w (the
 * writer's results) the text is left for the loop thread to parse
 * (store__wreq_raw) and NULL is returned; *oom is set when that fails. */
static json_t *col_json_w(sqlite3_stmt *s, int i, struct store__wreq *w,
			  json_t **field, bool *oom)
{
	const char *t = (const char *)sqlite3_column_text(s, i);
	if (t == NULL)
		return NULL;
	size_t len = (size_t)sqlite3_column_bytes(s, i);
	if (w != NULL) {
		if (store__wreq_raw(w, field, t, len) != 0)
			*oom = true;
		return NULL;
	}
	return store_json_load(t, len, JSON_DECODE_ANY, NULL);
}

static json_t *col_json(sqlite3_stmt *s, int i)
{
	bool oom = false;
	return col_json_w(s, i, NULL, NULL, &oom);
}

/* row_job_w returns a new job from the STORE__JOB_COLS of the current row of s,
 * or NULL when out of memory. With w, the job is one of w's results and
 * its JSON values are parsed later, on the loop thread (store__wreq_raw);
 * on failure the texts already recorded for it are dropped. */
static struct store_job *row_job_w(sqlite3_stmt *s, struct store__wreq *w)
{
	size_t nraw = w != NULL ? w->nraw : 0;
	struct store_job *j = calloc(1, sizeof(*j));
	if (j == NULL)
		return NULL;
	bool oom = false;
	const unsigned char *id = sqlite3_column_text(s, C_ID);
	snprintf(j->id, sizeof(j->id), "%s", id ? (const char *)id : "");
	j->tool = col_str(s, C_TOOL, &oom);
	j->status = sqlite3_column_int(s, C_STATUS);
	j->input = col_json_w(s, C_INPUT, w, &j->input, &oom);
	j->request_context = col_json_w(s, C_REQUEST_CONTEXT, w, &j->request_context, &oom);
	j->metadata = col_json_w(s, C_METADATA, w, &j->metadata, &oom);
	j->run_id = col_str(s, C_RUN_ID, &oom);
	j->tool_call_id = col_str(s, C_TOOL_CALL_ID, &oom);
	j->idempotency_key = col_str(s, C_IDEMPOTENCY_KEY, &oom);
	j->priority = sqlite3_column_int(s, C_PRIORITY);
	j->run_at = sqlite3_column_int64(s, C_RUN_AT);
	j->attempt = sqlite3_column_int(s, C_ATTEMPT);
	j->max_retries = sqlite3_column_int(s, C_MAX_RETRIES);
	j->timeout_ms = sqlite3_column_int64(s, C_TIMEOUT_MS);
	j->expires_at = sqlite3_column_int64(s, C_EXPIRES_AT);
	j->ttl_ms = sqlite3_column_int64(s, C_TTL_MS);
	j->output = col_json_w(s, C_OUTPUT, w, &j->output, &oom);
	j->model_output = col_json_w(s, C_MODEL_OUTPUT, w, &j->model_output, &oom);
	j->error = col_json_w(s, C_ERROR, w, &j->error, &oom);
	j->suspend_payload = col_json_w(s, C_SUSPEND, w, &j->suspend_payload, &oom);
	j->resume_data = col_json_w(s, C_RESUME, w, &j->resume_data, &oom);
	j->checkpoint = col_json_w(s, C_CHECKPOINT, w, &j->checkpoint, &oom);
	j->approval_required = sqlite3_column_int(s, C_APPROVAL_REQUIRED) != 0;
	j->decision = sqlite3_column_int(s, C_DECISION);
	j->reason = col_str(s, C_REASON, &oom);
	j->decided_at = sqlite3_column_int64(s, C_DECIDED_AT);
	j->progress = col_json_w(s, C_PROGRESS, w, &j->progress, &oom);
	j->retry_of = col_str(s, C_RETRY_OF, &oom);
	j->created_at = sqlite3_column_int64(s, C_CREATED_AT);
	j->updated_at = sqlite3_column_int64(s, C_UPDATED_AT);
	j->started_at = sqlite3_column_int64(s, C_STARTED_AT);
	j->finished_at = sqlite3_column_int64(s, C_FINISHED_AT);
	j->submitted_by = col_str(s, C_SUBMITTED_BY, &oom);
	j->submitted_via = col_str(s, C_SUBMITTED_VIA, &oom);
	j->decided_by = col_str(s, C_DECIDED_BY, &oom);
	j->decided_via = col_str(s, C_DECIDED_VIA, &oom);
	j->approvals = col_json_w(s, C_APPROVALS, w, &j->approvals, &oom);
	j->quorum = sqlite3_column_int(s, C_QUORUM);
	j->views = col_json_w(s, C_VIEWS, w, &j->views, &oom);
	if (oom || j->tool == NULL) {
		if (w != NULL) {
			while (w->nraw > nraw)
				free(w->raw[--w->nraw].text);
		}
		store_job_free(j);
		return NULL;
	}
	return j;
}

static struct store_job *row_job(sqlite3_stmt *s)
{
	return row_job_w(s, NULL);
}

/* job_by_id reads the job id on c into *out (NULL when there is none).
 * Returns 0 or a storage error. */
static int job_by_id(struct conn *c, const char *id, struct store_job **out)
{
	sqlite3_stmt *s = get(c, S_JOB_GET);
	if (s == NULL)
		return prepare_error(c);
	bind_str(s, 1, id);
	int rc = sqlite3_step(s);
	*out = NULL;
	if (rc == SQLITE_ROW) {
		*out = row_job(s);
		done(s);
		return *out != NULL ? 0 : -ENOMEM;
	}
	done(s);
	return rc == SQLITE_DONE ? 0 : err(rc);
}

/* ---- the writer's operations ------------------------------------------ */

/* multi_row prepares into *slot, on first use, the INSERT head followed by
 * rows copies of row (which ends in a comma, dropped from the last), and
 * returns it, or NULL. The text is built from constants only. */
static sqlite3_stmt *multi_row(struct conn *c, sqlite3_stmt **slot,
			       const char *head, const char *row, size_t rows)
{
	if (*slot != NULL)
		return *slot;
	size_t hlen = strlen(head), rlen = strlen(row);
	char *sql = malloc(hlen + rows * rlen + 1);
	if (sql == NULL)
		return NULL;
	memcpy(sql, head, hlen);
	for (size_t i = 0; i < rows; i++)
		memcpy(sql + hlen + i * rlen, row, rlen);
	sql[hlen + rows * rlen - 1] = '\0'; /* the last comma */
	if (sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, slot,
			       NULL) != SQLITE_OK)
		*slot = NULL;
	free(sql);
	return *slot;
}

/* rows_k returns the k (below sizes) of the largest 1 << k rows that fit
 * in left, left > 0: the next multi-row statement to run. */
static int rows_k(size_t left, int sizes)
{
	int k = sizes - 1;
	while ((size_t)1 << k > left)
		k--;
	return k;
}

/* ev_stmt returns the insert of 1 << k event rows, or NULL. */
static sqlite3_stmt *ev_stmt(struct conn *c, int k)
{
	return multi_row(c, &c->ev_stmt[k],
			 "INSERT OR FAIL INTO events (job_id, tool, type,"
			 " status, at, data, actor, via, client, seq) VALUES ",
			 "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?),", (size_t)1 << k);
}

/*
 * next_seq learns c->seq_floor where it is not known (-1): after opening,
 * a prune or a rollback. Without AUTOINCREMENT (migration 0007) SQLite
 * gives a new event the largest seq in events plus one, which is a seq
 * given out before when a prune deleted the newest events: then the floor
 * the prune left is larger, and the next event takes the seq after it.
 * Returns 0 or a storage error.
 */
static int next_seq(struct conn *c)
{
	if (c->seq_floor >= 0)
		return 0;
	sqlite3_stmt *s = get(c, S_SEQ_FLOOR);
	if (s == NULL)
		return prepare_error(c);
	int rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		int64_t floor = sqlite3_column_int64(s, 0);
		int64_t top = sqlite3_column_int64(s, 1);
		c->seq_floor = floor > top ? floor : 0;
	}
	done(s);
	return rc == SQLITE_ROW ? 0 : err(rc == SQLITE_DONE ? SQLITE_CORRUPT : rc);
}

/*
 * flush_events inserts the pending events of the transaction, in the
 * order they were appended, as few multi-row INSERTs, and gives each its
 * seq. One statement of n rows costs far less than n statements: each
 * statement opens and closes a statement journal. SQLite picks the seqs
 * (a given seq costs a search of the table a row), but for the first
 * event after a prune of the newest ones (next_seq). The rows of one
 * INSERT take consecutive seqs (the writer holds the database's write
 * lock), so the last rowid names them all. It runs before
 * anything that could read or delete events (every request but creations,
 * transitions and claims) and before the commit. Returns 0 or a storage
 * error, which fails the whole transaction.
 */
static int flush_events(struct conn *c)
{
	size_t i = 0;
	int rc = c->npend > 0 ? next_seq(c) : 0;
	if (rc != 0)
		return rc;
	while (i < c->npend) {
		int k = rows_k(c->npend - i, EV_SIZES);
		sqlite3_stmt *s = ev_stmt(c, k);
		if (s == NULL)
			return prepare_error(c);
		size_t rows = (size_t)1 << k;
		for (size_t r = 0; r < rows; r++) {
			const struct store_event *ev = &c->batch->events[c->pend[i + r].ev];
			int p = (int)r * 10;
			sqlite3_bind_text(s, p + 1, ev->job_id, -1, SQLITE_STATIC);
			sqlite3_bind_text(s, p + 2, ev->tool, -1, SQLITE_STATIC);
			sqlite3_bind_int(s, p + 3, ev->type);
			sqlite3_bind_int(s, p + 4, ev->status);
			sqlite3_bind_int64(s, p + 5, ev->at);
			bind_str(s, p + 6, c->pend[i + r].text);
			bind_str(s, p + 7, ev->by);
			bind_str(s, p + 8, ev->via);
			bind_str(s, p + 9, c->pend[i + r].client);
			if (c->seq_floor > 0) {
				sqlite3_bind_int64(s, p + 10, c->seq_floor + 1);
				c->seq_floor = 0;
			} else {
				sqlite3_bind_null(s, p + 10);
			}
		}
		rc = sqlite3_step(s);
		rewind_stmt(s);
		if (rc != SQLITE_DONE)
			return err(rc);
		int64_t seq = sqlite3_last_insert_rowid(c->db) - (int64_t)rows;
		for (size_t r = 0; r < rows; r++)
			c->batch->events[c->pend[i + r].ev].seq = ++seq;
		i += rows;
	}
	c->npend = 0;
	return 0;
}

/* add_event appends an event to the batch, by who (NULL: berthd) with
 * its client's text; its row is inserted by flush_events, before the
 * commit. */
static int add_event(struct conn *c, struct store__batch *b, const char *job_id,
		     const char *tool, int type, int status, int64_t at,
		     const char *text, json_t *data, const struct store__who *who,
		     const char *client)
{
	if (c->npend == c->cap_pend) {
		size_t cap = c->cap_pend ? c->cap_pend * 2 : 256;
		void *v = realloc(c->pend, cap * sizeof(*c->pend));
		if (v == NULL)
			return -ENOMEM;
		c->pend = v;
		c->cap_pend = cap;
	}
	int rc = store__batch_event(b, 0, job_id, tool, type, status, at, data,
				    who);
	if (rc != 0)
		return rc;
	c->batch = b;
	c->pend[c->npend++] = (struct pending_event){b->nevents - 1, text,
						      client};
	if (c->npend == 4 * EV_ROWS_MAX)
		return flush_events(c);
	return 0;
}

/* conflict settles a request whose compare-and-set matched no row: the
 * job is missing (STORE_ENOTFOUND) or in another status (STORE_ECONFLICT,
 * with the job as it is in req->job). */
static int conflict(struct conn *c, struct store__wreq *w, const char *id)
{
	struct store_job *j;
	int rc = job_by_id(c, id, &j);
	if (rc != 0)
		return rc;
	w->req->job = j;
	w->rc = j != NULL ? STORE_ECONFLICT : STORE_ENOTFOUND;
	return 0;
}

/* bind_job binds the STORE__JOB_COLS of w's new job to the parameters of s from
 * p (1-based) on: as the transition then leaves it, when it absorbed one. */
static void bind_job(sqlite3_stmt *s, int p, const struct store__wreq *w,
		     const struct store__wreq *then)
{
	const struct store_job *j = then != NULL ? then->job : w->job;
	bool start = then == NULL && w->req->u.create.start;
	const char *t[STORE__T_COUNT];
	store__final_texts(w, then, t);
	bind_str(s, p + C_ID, j->id);
	bind_str(s, p + C_TOOL, j->tool);
	sqlite3_bind_int(s, p + C_STATUS, start ? STORE_RUNNING : j->status);
	bind_str(s, p + C_INPUT, t[STORE__T_INPUT]);
	bind_str(s, p + C_REQUEST_CONTEXT, t[STORE__T_REQUEST_CONTEXT]);
	bind_str(s, p + C_METADATA, t[STORE__T_METADATA]);
	bind_str(s, p + C_RUN_ID, j->run_id);
	bind_str(s, p + C_TOOL_CALL_ID, j->tool_call_id);
	bind_str(s, p + C_IDEMPOTENCY_KEY, j->idempotency_key);
	sqlite3_bind_int(s, p + C_PRIORITY, j->priority);
	sqlite3_bind_int64(s, p + C_RUN_AT, j->run_at);
	sqlite3_bind_int(s, p + C_ATTEMPT, j->attempt);
	sqlite3_bind_int(s, p + C_MAX_RETRIES, j->max_retries);
	bind_time(s, p + C_TIMEOUT_MS, j->timeout_ms);
	bind_time(s, p + C_EXPIRES_AT, j->expires_at);
	bind_time(s, p + C_TTL_MS, j->ttl_ms);
	bind_str(s, p + C_OUTPUT, t[STORE__T_OUTPUT]);
	bind_str(s, p + C_MODEL_OUTPUT, t[STORE__T_MODEL_OUTPUT]);
	bind_str(s, p + C_ERROR, t[STORE__T_ERROR]);
	bind_str(s, p + C_SUSPEND, t[STORE__T_SUSPEND]);
	bind_str(s, p + C_RESUME, t[STORE__T_RESUME]);
	bind_str(s, p + C_CHECKPOINT, t[STORE__T_CHECKPOINT]);
	sqlite3_bind_int(s, p + C_APPROVAL_REQUIRED, j->approval_required);
	sqlite3_bind_int(s, p + C_DECISION, j->decision);
	bind_str(s, p + C_REASON, j->reason);
	bind_time(s, p + C_DECIDED_AT, j->decided_at);
	bind_str(s, p + C_PROGRESS, t[STORE__T_PROGRESS]);
	bind_str(s, p + C_RETRY_OF, j->retry_of);
	sqlite3_bind_int64(s, p + C_CREATED_AT, j->created_at);
	sqlite3_bind_int64(s, p + C_UPDATED_AT, j->updated_at);
	bind_time(s, p + C_STARTED_AT, start ? j->created_at : j->started_at);
	bind_time(s, p + C_FINISHED_AT, j->finished_at);
	bind_str(s, p + C_SUBMITTED_BY, j->submitted_by);
	bind_str(s, p + C_SUBMITTED_VIA, j->submitted_via);
	bind_str(s, p + C_DECIDED_BY, j->decided_by);
	bind_str(s, p + C_DECIDED_VIA, j->decided_via);
	bind_str(s, p + C_APPROVALS, then != NULL &&
				     (then->req->u.transition.set &
				      STORE_SET_APPROVALS)
					     ? then->text[STORE__T_APPROVALS]
					     : t[STORE__T_APPROVALS]);
	if (j->quorum > 0)
		sqlite3_bind_int(s, p + C_QUORUM, j->quorum);
	else
		sqlite3_bind_null(s, p + C_QUORUM);
	bind_str(s, p + C_VIEWS, t[STORE__T_VIEWS]);
}

/* created appends the events of w's creation, now inserted. */
static int created(struct conn *c, struct store__wreq *w, struct store__batch *b)
{
	const struct store_req *req = w->req;
	const struct store_job *j = req->u.create.job;
	char **t = w->text;
	int rc;

	json_t *data = req->u.create.event_data;
	/* The creation's events are its submitter's, or its creator's (a
	 * retry); a start at submission is berthd's. */
	struct store__who who = {
		req->u.create.by ? req->u.create.by : j->submitted_by,
		req->u.create.by ? req->u.create.via : j->submitted_via,
		req->u.create.client};
	rc = add_event(c, b, j->id, j->tool, STORE_EV_CREATED, j->status,
		       w->created_at, t[STORE__T_EVENT], data, &who,
		       t[STORE__T_CLIENT]);
	if (rc == 0 && j->status == STORE_AWAITING_APPROVAL) {
		/* approval_requested shows what the approver decides on: the
		 * approval view when the caller gave one, else the same data
		 * as "created". */
		json_t *adata = req->u.create.approval_event_data;
		const char *atext = t[STORE__T_APPROVAL_EVENT];
		if (adata == NULL && !req->u.create.approval_event_empty) {
			adata = data;
			atext = t[STORE__T_EVENT];
		}
		rc = add_event(c, b, j->id, j->tool, STORE_EV_APPROVAL_REQUESTED,
			       j->status, w->created_at, atext, adata, &who,
			       t[STORE__T_CLIENT]);
	}
	if (rc == 0 && req->u.create.start)
		rc = add_event(c, b, j->id, j->tool, STORE_EV_STARTED,
			       STORE_RUNNING, w->created_at, NULL, NULL, NULL,
			       NULL);
	w->rc = 0;
	return rc;
}

/* settle_then settles the transition then that a creation absorbed, now
 * inserted in then's final state: its event follows the creation's. */
static int settle_then(struct conn *c, struct store__wreq *then,
		       struct store__batch *b)
{
	const struct store_transition *tr = &then->req->u.transition;
	struct store__who who = {tr->by, tr->via, tr->client};
	then->absorbed = true;
	then->rc = 0;
	return add_event(c, b, then->job->id, then->job->tool, tr->event, tr->to,
			 then->job->updated_at, then->text[STORE__T_EVENT],
			 tr->event_data, &who, then->text[STORE__T_CLIENT]);
}

static int do_transition(struct conn *c, struct store__wreq *w,
			 struct store__batch *b);

/* insert_job inserts w's job alone (as then leaves it, if not NULL). A
 * constraint failure (an id given twice) undoes the one statement and
 * nothing else: a logical failure. */
static int insert_job(struct conn *c, struct store__wreq *w,
		      struct store__wreq *then, struct store__batch *b)
{
	sqlite3_stmt *s = get(c, S_JOB_INSERT);
	if (s == NULL)
		return prepare_error(c);
	bind_job(s, 1, w, then);
	int rc = sqlite3_step(s);
	rewind_stmt(s);
	if (rc != SQLITE_DONE) {
		if ((rc & 0xff) == SQLITE_CONSTRAINT) {
			/* The transition meets the job that holds the
			 * id, as it would after the creation's failure. */
			w->rc = -EEXIST;
			return then != NULL ? do_transition(c, then, b) : 0;
		}
		return err(rc);
	}
	rc = created(c, w, b);
	if (rc == 0 && then != NULL)
		rc = settle_then(c, then, b);
	return rc;
}

/* job_stmt returns the insert of 1 << k job rows, or NULL. */
static sqlite3_stmt *job_stmt(struct conn *c, int k)
{
	return multi_row(c, &c->job_stmt[k],
			 "INSERT INTO jobs (" STORE__JOB_COLS ") VALUES ",
			 "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
			 " ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
			 " ?, ?, ?, ?, ?, ?, ?),",
			 (size_t)1 << k);
}

/*
 * flush_jobs inserts the creations held back by do_create, in order, as
 * few multi-row INSERTs, then appends their events in the same order. Like
 * the events' inserts (flush_events), one statement of n rows costs much
 * less than n statements: SQLite opens a cursor on the table and on every
 * index, and a statement journal, per statement. A statement that fails on
 * a constraint undoes all its rows and nothing else; its rows are then
 * inserted one by one, so only the row at fault fails (-EEXIST). It runs
 * before any other request (which may read the new jobs, or add events
 * that must follow theirs) and before the commit. Returns 0 or a storage
 * error, which fails the whole transaction.
 */
static int flush_jobs(struct conn *c)
{
	size_t i = 0;
	int rc = 0;
	while (rc == 0 && i < c->njobs) {
		int k = rows_k(c->njobs - i, JOB_SIZES);
		size_t rows = (size_t)1 << k;
		sqlite3_stmt *s = job_stmt(c, k);
		if (s == NULL)
			return prepare_error(c);
		for (size_t r = 0; r < rows; r++)
			bind_job(s, 1 + (int)r * C_NCOLS, c->jobs[i + r],
				 c->then[i + r]);
		rc = sqlite3_step(s);
		rewind_stmt(s);
		if (rc == SQLITE_DONE) {
			rc = 0;
			for (size_t r = 0; rc == 0 && r < rows; r++) {
				rc = created(c, c->jobs[i + r], c->batch);
				if (rc == 0 && c->then[i + r] != NULL)
					rc = settle_then(c, c->then[i + r],
							 c->batch);
			}
		} else if ((rc & 0xff) == SQLITE_CONSTRAINT) {
			rc = 0;
			for (size_t r = 0; rc == 0 && r < rows; r++)
				rc = insert_job(c, c->jobs[i + r],
						c->then[i + r], c->batch);
		} else {
			rc = err(rc);
		}
		i += rows;
	}
	c->njobs = 0;
	return rc;
}

/* do_create holds a creation back for flush_jobs, unless it has an
 * idempotency key: that is looked up first, and must see the creations
 * before it. */
static int do_create(struct conn *c, struct store__wreq *w,
		     struct store__batch *b)
{
	struct store_req *req = w->req;
	const struct store_job *j = req->u.create.job;
	sqlite3_stmt *s;
	int rc;

	if (j->idempotency_key == NULL) {
		/* Full: the ones held go in first, so that this one stays
		 * held for a transition that may follow (absorb). */
		if (c->njobs == JOB_ROWS_MAX && (rc = flush_jobs(c)) != 0)
			return rc;
		c->batch = b;
		c->then[c->njobs] = NULL;
		c->jobs[c->njobs++] = w;
		return 0;
	}
	if ((rc = flush_jobs(c)) != 0)
		return rc;
	if ((s = get(c, S_JOB_BY_KEY)) == NULL)
		return prepare_error(c);
	bind_str(s, 1, j->tool);
	bind_str(s, 2, j->idempotency_key);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		req->job = row_job(s);
		done(s);
		if (req->job == NULL)
			return -ENOMEM;
		req->existed = true;
		w->rc = 0;
		return 0;
	}
	done(s);
	if (rc != SQLITE_DONE)
		return err(rc);
	return insert_job(c, w, NULL, b);
}

/* absorb gives a transition prepared at store_release (absorb_into) to
 * its creation while that is still held in c->jobs, to be written with
 * it as one row; returns false when the creation went in already. */
static bool absorb(struct conn *c, struct store__wreq *w)
{
	for (size_t i = c->njobs; i-- > 0;) {
		if (c->jobs[i] != w->absorb_into)
			continue;
		if (c->then[i] != NULL)
			return false;
		c->then[i] = w;
		return true;
	}
	return false;
}

static int do_transition(struct conn *c, struct store__wreq *w,
			 struct store__batch *b)
{
	const struct store_transition *tr = &w->req->u.transition;
	char **t = w->text;
	int64_t now = store_now();
	sqlite3_stmt *s = get(c, S_TRANSITION);
	if (s == NULL)
		return prepare_error(c);
	bind_str(s, 1, tr->job_id);
	sqlite3_bind_int64(s, 2, tr->from_mask);
	sqlite3_bind_int(s, 3, tr->to);
	sqlite3_bind_int64(s, 4, now);
	sqlite3_bind_int64(s, 5, tr->set);
	sqlite3_bind_int64(s, 6, tr->run_at != 0 ? tr->run_at : now);
	sqlite3_bind_int(s, 7, tr->attempt);
	bind_str(s, 8, t[STORE__T_OUTPUT]);
	bind_str(s, 9, t[STORE__T_MODEL_OUTPUT]);
	bind_str(s, 10, t[STORE__T_ERROR]);
	bind_str(s, 11, t[STORE__T_SUSPEND]);
	bind_str(s, 12, t[STORE__T_RESUME]);
	bind_str(s, 13, t[STORE__T_CHECKPOINT]);
	sqlite3_bind_int(s, 14, tr->decision);
	bind_str(s, 15, tr->reason);
	bind_time(s, 16, tr->expires_at);
	bind_str(s, 17, t[STORE__T_PROGRESS]);
	bind_str(s, 18, tr->by ? tr->by : STORE_BERTHD);
	bind_str(s, 19, tr->via ? tr->via : STORE_BERTHD);
	bind_str(s, 20, t[STORE__T_APPROVALS]);
	sqlite3_bind_int(s, 21, tr->quorum);
	sqlite3_bind_int(s, 22, tr->approvals_had);
	bind_str(s, 23, t[STORE__T_VIEWS]);

	/* The change is made on the first step; the one row it returns
	 * is the job as it is now. */
	int rc = sqlite3_step(s);
	if (rc == SQLITE_DONE) {
		done(s);
		return conflict(c, w, tr->job_id);
	}
	if (rc != SQLITE_ROW) {
		done(s);
		return err(rc);
	}
	struct store_job *j = row_job_w(s, w);
	done(s);
	if (j == NULL)
		return -ENOMEM;
	w->req->job = j;
	w->rc = 0;
	struct store__who who = {tr->by, tr->via, tr->client};
	return add_event(c, b, j->id, j->tool, tr->event, tr->to, now,
			 t[STORE__T_EVENT], tr->event_data, &who,
			 t[STORE__T_CLIENT]);
}

/* take_row moves the job of the first row of s, an UPDATE ... RETURNING of
 * one job, into *out (NULL when no row matched) and appends its event. */
static int take_row(struct conn *c, sqlite3_stmt *s, struct store__wreq *w,
		    struct store__batch *b, int type, int64_t now,
		    struct store_job **out)
{
	int rc = sqlite3_step(s);
	*out = NULL;
	if (rc == SQLITE_ROW) {
		*out = row_job_w(s, w);
		done(s);
		if (*out == NULL)
			return -ENOMEM;
		return add_event(c, b, (*out)->id, (*out)->tool, type,
				 (*out)->status, now, NULL, NULL, NULL, NULL);
	}
	done(s);
	return rc == SQLITE_DONE ? 0 : err(rc);
}

/* An id list collected by a scan before its rows are changed: SQLite does
 * not promise what a scan sees of rows changed under it. */
struct ids {
	char (*v)[40];
	size_t n, cap;
};

static int ids_push(struct ids *ids, const unsigned char *id)
{
	if (ids->n == ids->cap) {
		size_t cap = ids->cap ? ids->cap * 2 : 16;
		void *v = realloc(ids->v, cap * sizeof(*ids->v));
		if (v == NULL)
			return -ENOMEM;
		ids->v = v;
		ids->cap = cap;
	}
	snprintf(ids->v[ids->n++], 40, "%s", id ? (const char *)id : "");
	return 0;
}

/* change_each runs the one-job update stmt for every id, collecting the
 * jobs changed into req->jobs with an event of type each. */
static int change_each(struct conn *c, struct store__wreq *w,
		       struct store__batch *b, const struct ids *ids,
		       enum stmt_id stmt, int type)
{
	struct store_req *req = w->req;
	int64_t now = store_now();
	w->rc = 0;
	if (ids->n == 0)
		return 0;
	req->jobs = calloc(ids->n, sizeof(*req->jobs));
	if (req->jobs == NULL)
		return -ENOMEM;
	sqlite3_stmt *s = get(c, stmt);
	if (s == NULL)
		return prepare_error(c);
	for (size_t i = 0; i < ids->n; i++) {
		bind_str(s, 1, ids->v[i]);
		sqlite3_bind_int64(s, 2, now);
		struct store_job *j;
		int rc = take_row(c, s, w, b, type, now, &j);
		if (rc != 0)
			return rc;
		if (j != NULL)
			req->jobs[req->njobs++] = j;
	}
	return 0;
}

/* next_run_at sets req->next_run_at (store.h) once the claim has picked
 * its jobs: left[k] is what is left of caps[k]. The scan walks future
 * pending jobs by run_at and stops at the first whose tool is not
 * excluded, so it reads past only the excluded tools' earlier jobs.
 * Returns 0 or a negative code. */
static int next_run_at(struct conn *c, struct store_req *req, int64_t now,
		       const int *left, int pool_left)
{
	size_t ncaps = req->u.claim.ncaps;
	sqlite3_stmt *s = get(c, S_CLAIM_NEXT);
	int rc;

	req->next_run_at = 0;
	if (s == NULL)
		return prepare_error(c);
	sqlite3_bind_int64(s, 1, now);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *tool = (const char *)sqlite3_column_text(s, 1);
		size_t k = 0;
		while (k < ncaps && strcmp(req->u.claim.caps[k].tool, tool) != 0)
			k++;
		if (k < ncaps && (left[k] <= 0 ||
				  (req->u.claim.caps[k].pool && pool_left <= 0)))
			continue;
		req->next_run_at = sqlite3_column_int64(s, 0);
		break;
	}
	done(s);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : err(rc);
}

/* A job a claim may take: one of the first of its tool's runnable jobs. */
struct candidate {
	char id[40];
	int64_t priority, run_at;
	int cap; /* its tool's index in caps, or -1 */
};

struct candidates {
	struct candidate *v;
	size_t n, cap;
};

/* scheduler_order sorts candidates as claims take jobs
 * (store__scheduler_order). */
static int scheduler_order(const void *pa, const void *pb)
{
	const struct candidate *a = pa, *b = pb;

	return store__scheduler_order(a->priority, a->run_at, a->id,
				      b->priority, b->run_at, b->id);
}

/* steps adds to *n (req->u.claim.steps) the virtual machine steps s took
 * since they were last counted: the counter is the statement's and
 * outlives its resets, so reading it restarts it. */
static void steps(sqlite3_stmt *s, int64_t *n)
{
	*n += sqlite3_stmt_status(s, SQLITE_STMTSTATUS_VM_STEP, 1);
}

/* tool_bound returns how many jobs of tool the claim could take at most,
 * given what is left at its start (0: none), and sets *cap to the tool's
 * index in caps (-1: it has none). */
static int tool_bound(const struct store_req *req, const char *tool,
		      const int *left, int slots, int room, int pool_left,
		      int *cap)
{
	size_t ncaps = req->u.claim.ncaps, k = 0;
	int bound = room, g = 0;

	while (k < ncaps && strcmp(req->u.claim.caps[k].tool, tool) != 0)
		k++;
	*cap = k < ncaps ? (int)k : -1;
	if (k < ncaps) {
		const struct store_cap *cp = &req->u.claim.caps[k];

		if (left[k] < bound)
			bound = left[k];
		if (cp->pool && pool_left < bound)
			bound = pool_left;
		g = cp->group;
		if (g < 0 || (size_t)g > req->u.claim.ngroups)
			return 0;
	}
	if (g > 0 && left[ncaps + (size_t)g - 1] < bound)
		bound = left[ncaps + (size_t)g - 1];
	else if (g == 0 && slots < bound)
		bound = slots;
	return bound > 0 ? bound : 0;
}

/* push appends a candidate to cands; returns 0 or -ENOMEM. */
static int push(struct candidates *cands, const unsigned char *id,
		int64_t priority, int64_t run_at, int cap)
{
	struct candidate *d;

	if (cands->n == cands->cap) {
		size_t n = cands->cap ? 2 * cands->cap : 16;
		void *v = realloc(cands->v, n * sizeof(*d));

		if (v == NULL)
			return -ENOMEM;
		cands->v = v;
		cands->cap = n;
	}
	d = &cands->v[cands->n++];
	snprintf(d->id, sizeof(d->id), "%s", id ? (const char *)id : "");
	d->priority = priority;
	d->run_at = run_at;
	d->cap = cap;
	return 0;
}

/* read_tool appends to cands the first bound runnable jobs of tool in
 * the scheduler's order, a priority at a time from the highest. Returns
 * 0 or a negative code. */
static int read_tool(struct conn *c, struct store_req *req, const char *tool,
		     int cap, int bound, int64_t now, struct candidates *cands)
{
	sqlite3_stmt *ps = get(c, S_CLAIM_PRIORITY), *js = get(c, S_CLAIM_SCAN);
	/* Above every priority: a job's is an int. */
	int64_t priority = INT64_MAX;
	int rc;

	if (ps == NULL || js == NULL)
		return prepare_error(c);
	while (bound > 0) {
		sqlite3_bind_text(ps, 1, tool, -1, SQLITE_STATIC);
		sqlite3_bind_int64(ps, 2, priority);
		rc = sqlite3_step(ps);
		if (rc == SQLITE_ROW)
			priority = sqlite3_column_int64(ps, 0);
		steps(ps, &req->u.claim.steps);
		done(ps);
		if (rc != SQLITE_ROW)
			return rc == SQLITE_DONE ? 0 : err(rc);
		sqlite3_bind_text(js, 1, tool, -1, SQLITE_STATIC);
		sqlite3_bind_int64(js, 2, priority);
		sqlite3_bind_int64(js, 3, now);
		sqlite3_bind_int(js, 4, bound);
		for (;;) {
			int step = sqlite3_step(js);

			if (step != SQLITE_ROW) {
				rc = step == SQLITE_DONE ? 0 : err(step);
				break;
			}
			rc = push(cands, sqlite3_column_text(js, 0), priority,
				  sqlite3_column_int64(js, 1), cap);
			if (rc != 0)
				break;
			bound--;
		}
		steps(js, &req->u.claim.steps);
		done(js);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* gather appends to cands the first runnable jobs of every tool with
 * pending jobs, as many as the claim could take of each (tool_bound),
 * stepping from tool to tool in jobs_pending_tool. Returns 0 or a
 * negative code. */
static int gather(struct conn *c, struct store_req *req, int64_t now,
		  const int *left, int slots, int room, int pool_left,
		  struct candidates *cands)
{
	sqlite3_stmt *ts = get(c, S_CLAIM_TOOLS);
	char *tool = NULL;
	int rc;

	if (ts == NULL)
		return prepare_error(c);
	for (;;) {
		char *next = NULL;
		int bound, cap;

		sqlite3_bind_text(ts, 1, tool ? tool : "", -1, SQLITE_STATIC);
		rc = sqlite3_step(ts);
		if (rc == SQLITE_ROW &&
		    !(next = strdup((const char *)sqlite3_column_text(ts, 0))))
			rc = -ENOMEM;
		steps(ts, &req->u.claim.steps);
		done(ts);
		free(tool);
		tool = next;
		if (rc != SQLITE_ROW)
			return rc == SQLITE_DONE ? 0 : rc < 0 ? rc : err(rc);
		bound = tool_bound(req, tool, left, slots, room, pool_left,
				   &cap);
		if (bound > 0 &&
		    (rc = read_tool(c, req, tool, cap, bound, now, cands)) != 0) {
			free(tool);
			return rc;
		}
	}
}

/*
 * do_claim takes the jobs of a claim. The scheduler's order runs across
 * tools (priority, run_at, id), but what stops a tool's jobs from being
 * taken (its cap, the pool, its group's room) only tightens as the claim
 * goes on: once one of its jobs is passed over, every later one is too,
 * so the jobs a claim takes of a tool are the first of that tool's, and
 * no more of them than the claim could take of it at its start. Reading
 * that many of each tool (gather) and taking from them in the
 * scheduler's order gives the jobs one walk of every pending job would,
 * and costs what the claim takes, not the backlog: a hundred thousand
 * jobs of a tool at its cap, or whose worker is away, are not read by
 * each claim that passes them over.
 */
static int do_claim(struct conn *c, struct store__wreq *w,
		    struct store__batch *b)
{
	struct store_req *req = w->req;
	size_t ncaps = req->u.claim.ncaps, ngroups = req->u.claim.ngroups;
	int64_t now = req->u.claim.now != 0 ? req->u.claim.now : store_now();
	/* slots: what is left of limit, the pool's own room; pool_left:
	 * of the threads its caps marked pool take besides (store.h). */
	int slots = req->u.claim.limit > 0 ? req->u.claim.limit : 0;
	int room = slots;
	int pool_left = req->u.claim.pool_remaining;
	struct candidates cands = {0};
	struct ids ids = {0};
	int rc = 0;

	w->rc = 0;
	req->u.claim.steps = 0;
	for (size_t g = 0; g < ngroups; g++)
		room += req->u.claim.groups[g] > 0 ? req->u.claim.groups[g] : 0;
	if (room <= 0)
		return 0;
	/* left[k] is what is left of caps[k], then, from ncaps on, of each
	 * group. */
	int *left = calloc(ncaps + ngroups + 1, sizeof(*left));
	if (left == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < ncaps; i++)
		left[i] = req->u.claim.caps[i].remaining;
	for (size_t g = 0; g < ngroups; g++)
		left[ncaps + g] = req->u.claim.groups[g];

	rc = gather(c, req, now, left, slots, room, pool_left, &cands);
	if (rc == 0 && cands.n > 1)
		qsort(cands.v, cands.n, sizeof(*cands.v), scheduler_order);
	for (size_t i = 0; rc == 0 && room > 0 && i < cands.n; i++) {
		int k = cands.v[i].cap, g, *group;

		if (k >= 0 && (left[k] <= 0 ||
			       (req->u.claim.caps[k].pool && pool_left <= 0)))
			continue;
		g = k >= 0 ? req->u.claim.caps[k].group : 0;
		group = g > 0 ? &left[ncaps + (size_t)g - 1] : &slots;
		if (*group <= 0)
			continue;
		if (k >= 0) {
			left[k]--;
			if (req->u.claim.caps[k].pool)
				pool_left--;
		}
		(*group)--;
		room--;
		rc = ids_push(&ids, (const unsigned char *)cands.v[i].id);
	}
	free(cands.v);
	if (rc == 0)
		rc = next_run_at(c, w->req, now, left, pool_left);
	free(left);
	if (rc != 0) {
		free(ids.v);
		return rc;
	}
	rc = change_each(c, w, b, &ids, S_CLAIM_ONE, STORE_EV_STARTED);
	free(ids.v);
	return rc;
}

static int do_expire(struct conn *c, struct store__wreq *w,
		     struct store__batch *b)
{
	struct ids ids = {0};
	int rc = 0;
	sqlite3_stmt *s = get(c, S_EXPIRE_SCAN);
	if (s == NULL)
		return prepare_error(c);
	sqlite3_bind_int64(s, 1, w->arg);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		if ((rc = ids_push(&ids, sqlite3_column_text(s, 0))) != 0)
			break;
	done(s);
	if (rc != SQLITE_DONE) {
		free(ids.v);
		return rc < 0 ? rc : err(rc);
	}
	rc = change_each(c, w, b, &ids, S_EXPIRE_ONE, STORE_EV_EXPIRED);
	free(ids.v);
	return rc;
}

/* set_running writes one JSON column of a running job (checkpoint or
 * progress); no event. */
static int set_running(struct conn *c, struct store__wreq *w, enum stmt_id stmt,
		       const char *id, const char *text)
{
	sqlite3_stmt *s = get(c, stmt);
	if (s == NULL)
		return prepare_error(c);
	bind_str(s, 1, id);
	bind_str(s, 2, text);
	sqlite3_bind_int64(s, 3, store_now());
	int rc = run(s);
	if (rc != 0)
		return rc;
	if (sqlite3_changes(c->db) == 0)
		return conflict(c, w, id);
	w->rc = 0;
	return 0;
}

static int do_log(struct conn *c, struct store__wreq *w)
{
	const struct store_req *req = w->req;
	const char *id = req->u.log.job_id;
	sqlite3_stmt *s;
	int rc;

	/* Checked before writing, so that a missing job writes nothing. */
	if ((s = get(c, S_JOB_EXISTS)) == NULL)
		return prepare_error(c);
	bind_str(s, 1, id);
	rc = sqlite3_step(s);
	done(s);
	if (rc == SQLITE_DONE) {
		w->rc = STORE_ENOTFOUND;
		return 0;
	}
	if (rc != SQLITE_ROW)
		return err(rc);

	if ((s = get(c, S_LOG_LAST)) == NULL)
		return prepare_error(c);
	bind_str(s, 1, id);
	rc = sqlite3_step(s);
	int64_t n = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
	done(s);
	if (rc != SQLITE_ROW)
		return err(rc);

	if ((s = get(c, S_LOG_INSERT)) == NULL)
		return prepare_error(c);
	int64_t now = store_now();
	for (size_t i = 0; i < req->u.log.nlines; i++) {
		const struct store_log_line *l = &req->u.log.lines[i];
		bind_str(s, 1, id);
		sqlite3_bind_int64(s, 2, ++n);
		sqlite3_bind_int64(s, 3, l->at != 0 ? l->at : now);
		bind_str(s, 4, l->level != NULL ? l->level : "info");
		bind_str(s, 5, l->message != NULL ? l->message : "");
		bind_str(s, 6, w->line_data != NULL ? w->line_data[i] : NULL);
		if ((rc = run(s)) != 0)
			return rc;
	}

	if (req->u.log.max_lines > 0 && n > req->u.log.max_lines) {
		if ((s = get(c, S_LOG_TRIM)) == NULL)
			return prepare_error(c);
		bind_str(s, 1, id);
		sqlite3_bind_int64(s, 2, n - req->u.log.max_lines);
		if ((rc = run(s)) != 0)
			return rc;
	}
	w->rc = 0;
	return 0;
}

static int do_pause(struct conn *c, struct store__wreq *w)
{
	sqlite3_stmt *s = get(c, S_TOOL_PAUSE);
	if (s == NULL)
		return prepare_error(c);
	bind_str(s, 1, w->req->u.pause.tool);
	sqlite3_bind_int(s, 2, w->req->u.pause.paused);
	w->rc = 0;
	return run(s);
}

static int do_prune(struct conn *c, struct store__wreq *w)
{
	static const enum stmt_id steps[] = {S_PRUNE_FLOOR, S_PRUNE_EVENTS,
					     S_PRUNE_LOGS, S_PRUNE};
	char floor[14];
	int rc = 0;
	store__uuid7_floor(w->req->u.prune.before, floor);
	for (size_t i = 0; rc == 0 && i < sizeof(steps) / sizeof(steps[0]); i++) {
		sqlite3_stmt *s = get(c, steps[i]);
		if (s == NULL)
			return prepare_error(c);
		if (steps[i] != S_PRUNE_FLOOR) {
			sqlite3_bind_int64(s, 1, w->req->u.prune.before);
			sqlite3_bind_text(s, 2, floor, -1, SQLITE_TRANSIENT);
		}
		rc = run(s);
	}
	c->seq_floor = -1; /* the newest events may be gone */
	/* The last statement's changes: the jobs deleted. */
	w->req->count = rc == 0 ? sqlite3_changes64(c->db) : 0;
	w->rc = 0;
	return rc;
}

static int do_proc(struct conn *c, struct store__wreq *w)
{
	const struct store_proc *p = &w->req->u.proc.proc;
	sqlite3_stmt *s = get(c, w->req->u.proc.remove ? S_PROC_DEL : S_PROC_PUT);
	if (s == NULL)
		return prepare_error(c);
	sqlite3_bind_int64(s, 1, p->pid);
	if (w->req->u.proc.remove) {
		sqlite3_bind_int64(s, 2, p->start_min);
	} else {
		bind_str(s, 2, p->job_id);
		sqlite3_bind_int64(s, 3, p->start_min);
		sqlite3_bind_int64(s, 4, p->start_max);
		bind_str(s, 5, p->boot_id);
	}
	w->rc = 0;
	return run(s);
}

static int do_define(struct conn *c, struct store__wreq *w)
{
	const struct store_req *req = w->req;
	sqlite3_stmt *s = get(c, req->u.define.remove ? S_DEF_DEL : S_DEF_PUT);
	if (s == NULL)
		return prepare_error(c);
	bind_str(s, 1, req->u.define.name);
	if (!req->u.define.remove) {
		bind_str(s, 2, w->text[STORE__T_DEFINITION]);
		sqlite3_bind_int64(s, 3, store_now());
	}
	w->rc = 0;
	return run(s);
}

/* do_max_pages is a test hook: it caps the database's size, the way a
 * full disk would. The count is an integer, never a caller's string. */
static int do_max_pages(struct conn *c, struct store__wreq *w)
{
	char sql[64];
	snprintf(sql, sizeof(sql), "PRAGMA max_page_count = %lld",
		 (long long)w->arg);
	w->rc = 0;
	return err(sqlite3_exec(c->db, sql, NULL, NULL, NULL));
}

static int sq_apply(void *be, struct store__wreq *w, struct store__batch *b)
{
	struct conn *c = &((struct sq *)be)->w;
	struct store_req *req = w->req;

	/* A run's end that follows its job's creation is written with it. */
	if (req->op == STORE_OP_TRANSITION && w->absorb_into != NULL &&
	    absorb(c, w))
		return 0;
	/* Held-back creations go in before any other request, which may
	 * read them (and whose events must follow theirs). Creations,
	 * transitions and claims only append events; anything else may read
	 * or delete them, so the pending ones go in first. A process record
	 * and a tool's definition touch neither jobs nor events. */
	bool apart = req->op == STORE_OP_PROC || req->op == STORE_OP_TOOL_DEFINE;
	if (req->op != STORE_OP_CREATE && !apart && c->njobs > 0) {
		int rc = flush_jobs(c);
		if (rc != 0)
			return rc;
	}
	if (req->op != STORE_OP_CREATE && req->op != STORE_OP_TRANSITION &&
	    req->op != STORE_OP_CLAIM && !apart && c->npend > 0) {
		int rc = flush_events(c);
		if (rc != 0)
			return rc;
	}
	switch (req->op) {
	case STORE_OP_CREATE:
		return do_create(c, w, b);
	case STORE_OP_TRANSITION:
		return do_transition(c, w, b);
	case STORE_OP_CLAIM:
		return do_claim(c, w, b);
	case STORE_OP_CHECKPOINT:
		return set_running(c, w, S_CHECKPOINT, req->u.checkpoint.job_id,
				   w->text[STORE__T_CHECKPOINT]);
	case STORE_OP_PROGRESS:
		return set_running(c, w, S_PROGRESS, req->u.progress.job_id,
				   w->text[STORE__T_PROGRESS]);
	case STORE_OP_LOG:
		return do_log(c, w);
	case STORE_OP_EXPIRE:
		return do_expire(c, w, b);
	case STORE_OP_TOOL_PAUSE:
		return do_pause(c, w);
	case STORE_OP_PRUNE:
		return do_prune(c, w);
	case STORE_OP_PROC:
		return do_proc(c, w);
	case STORE_OP_TOOL_DEFINE:
		return do_define(c, w);
	case STORE__OP_MAX_PAGES:
		return do_max_pages(c, w);
	default:
		w->rc = -EINVAL;
		return 0;
	}
}

static int tx(struct sq *q, enum stmt_id id)
{
	sqlite3_stmt *s = get(&q->w, id);
	return s != NULL ? run(s) : prepare_error(&q->w);
}

static int sq_begin(void *be)
{
	((struct sq *)be)->w.npend = 0;
	((struct sq *)be)->w.njobs = 0;
	return tx(be, S_BEGIN);
}

static int sq_commit(void *be)
{
	struct sq *q = be;
	int rc = flush_jobs(&q->w);
	if (rc == 0)
		rc = flush_events(&q->w);
	return rc != 0 ? rc : tx(q, S_COMMIT);
}

static void sq_rollback(void *be)
{
	struct sq *q = be;
	q->w.npend = 0;
	q->w.njobs = 0;
	q->w.seq_floor = -1; /* a prune, or a use of the floor, undone */
	/* SQLite may have rolled back already (after SQLITE_FULL, IOERR,
	 * NOMEM); a ROLLBACK outside a transaction would be an error. */
	if (!sqlite3_get_autocommit(q->w.db))
		tx(q, S_ROLLBACK);
}

/* ---- reads (loop thread) ----------------------------------------------- */

static int sq_get(void *be, const char *id, struct store_job **out)
{
	int rc = job_by_id(&((struct sq *)be)->r, id, out);
	if (rc == 0 && *out == NULL)
		rc = STORE_ENOTFOUND;
	return rc;
}

/* read_jobs collects the jobs of the rows of s, at most max of them. */
static int read_jobs(sqlite3_stmt *s, size_t max, struct store_job ***jobs,
		     size_t *n)
{
	struct store_job **v = NULL;
	size_t cnt = 0, cap = 0;
	int rc;
	while (cnt < max && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (cnt == cap) {
			cap = cap ? cap * 2 : 16;
			void *nv = realloc(v, cap * sizeof(*v));
			if (nv == NULL) {
				rc = SQLITE_NOMEM;
				break;
			}
			v = nv;
		}
		if ((v[cnt] = row_job(s)) == NULL) {
			rc = SQLITE_NOMEM;
			break;
		}
		cnt++;
	}
	if (cnt == max)
		rc = SQLITE_DONE;
	done(s);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
		for (size_t i = 0; i < cnt; i++)
			store_job_free(v[i]);
		free(v);
		return err(rc);
	}
	*jobs = v;
	*n = cnt;
	return 0;
}

static int sq_list(void *be, const struct store_filter *f, int limit,
		   const char *before_id, struct store_job ***jobs, size_t *n)
{
	struct conn *c = &((struct sq *)be)->r;
	unsigned mask = f != NULL ? f->status_mask : 0;
	const char *tool = f != NULL ? f->tool : NULL;
	const char *run_id = f != NULL ? f->run_id : NULL;
	enum stmt_id id = S_LIST_ALL;

	const char *prefix = f != NULL ? f->id_prefix : NULL;
	char end[64];

	/* Lead with the index that narrows the most: a prefix of ids, a
	 * run, one status; the other filters are checked on the rows it
	 * yields. Completed jobs have no index by status: most jobs are,
	 * so the primary key, newest first, fills a page soonest. */
	if (prefix != NULL && strlen(prefix) < sizeof(end))
		id = S_LIST_PREFIX;
	else if (prefix != NULL)
		return 0; /* longer than any id: no job matches */
	else if (run_id != NULL)
		id = S_LIST_RUN;
	else if (mask != 0 && (mask & (mask - 1)) == 0 &&
		 mask != STORE_MASK(STORE_COMPLETED))
		id = S_LIST_STATUS;
	else if (tool != NULL)
		id = S_LIST_TOOL;
	sqlite3_stmt *s = get(c, id);
	if (s == NULL)
		return prepare_error(c);
	sqlite3_bind_int64(s, 1, mask);
	bind_str(s, 2, tool);
	bind_str(s, 3, run_id);
	if (before_id != NULL)
		sqlite3_bind_text(s, 4, before_id, -1, SQLITE_STATIC);
	else
		sqlite3_bind_blob(s, 4, list_top, sizeof(list_top), SQLITE_STATIC);
	sqlite3_bind_int(s, 5, limit);
	if (id == S_LIST_STATUS)
		sqlite3_bind_int(s, 6, __builtin_ctz(mask));
	if (id == S_LIST_PREFIX) {
		store__prefix_end(prefix, end);
		sqlite3_bind_text(s, 6, prefix, -1, SQLITE_STATIC);
		if (end[0])
			sqlite3_bind_text(s, 7, end, -1, SQLITE_STATIC);
		else
			sqlite3_bind_blob(s, 7, list_top, sizeof(list_top),
					  SQLITE_STATIC);
	}
	return read_jobs(s, (size_t)limit, jobs, n);
}

static int sq_running(void *be, struct store_job ***jobs, size_t *n)
{
	struct conn *c = &((struct sq *)be)->r;
	sqlite3_stmt *s = get(c, S_RUNNING);
	if (s == NULL)
		return prepare_error(c);
	return read_jobs(s, SIZE_MAX, jobs, n);
}

/* read_events steps s, a read of events' columns (seq, job_id, tool, type,
 * status, at, data, actor, via, client), into a new array of at most
 * limit events, and resets s. */
static int read_events(sqlite3_stmt *s, int limit, struct store_event **out,
		       size_t *n)
{
	struct store_event *v = limit > 0 ? calloc((size_t)limit, sizeof(*v)) : NULL;
	size_t cnt = 0;
	int rc = SQLITE_DONE;
	if (limit > 0 && v == NULL)
		rc = SQLITE_NOMEM;
	while (rc != SQLITE_NOMEM && cnt < (size_t)limit &&
	       (rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct store_event *ev = &v[cnt++];
		bool oom = false;
		const unsigned char *jid = sqlite3_column_text(s, 1);
		ev->seq = sqlite3_column_int64(s, 0);
		snprintf(ev->job_id, sizeof(ev->job_id), "%s",
			 jid ? (const char *)jid : "");
		ev->tool = col_str(s, 2, &oom);
		ev->type = sqlite3_column_int(s, 3);
		ev->status = sqlite3_column_int(s, 4);
		ev->at = sqlite3_column_int64(s, 5);
		ev->data = col_json(s, 6);
		ev->by = col_str(s, 7, &oom);
		ev->via = col_str(s, 8, &oom);
		ev->client = col_json(s, 9);
		if (oom)
			rc = SQLITE_NOMEM;
	}
	if (cnt == (size_t)limit && rc == SQLITE_ROW)
		rc = SQLITE_DONE;
	done(s);
	if (rc != SQLITE_DONE) {
		for (size_t i = 0; i < cnt; i++)
			store_event_finish(&v[i]);
		free(v);
		return err(rc);
	}
	*out = v;
	*n = cnt;
	return 0;
}

static int sq_events(void *be, int64_t after, const char *job_id, int limit,
		     struct store_event **out, size_t *n)
{
	struct conn *c = &((struct sq *)be)->r;
	sqlite3_stmt *s = get(c, job_id != NULL ? S_EVENTS_JOB : S_EVENTS);
	if (s == NULL)
		return prepare_error(c);
	sqlite3_bind_int64(s, 1, after);
	sqlite3_bind_int(s, 2, limit);
	if (job_id != NULL)
		bind_str(s, 3, job_id);
	return read_events(s, limit, out, n);
}

/*
 * sq_events_typed reads by type in two statements: the first seq after
 * q->after (an index probe) and the last one committed, which give the
 * span to look through, the q->scan seqs from that first one on (never
 * past the last committed: a seq after it may yet come); then the events
 * of the types in that span, which holds no more than q->scan rows. So
 * the read is bounded however rare the types are, stops as soon as its
 * page is full, and needs no index by type (one more index would cost
 * every append, the hottest write there is). Every seq of the span was
 * committed before the second statement began, so it finds each of them
 * that was not pruned since.
 */
static int sq_events_typed(void *be, const struct store_event_query *q,
			   struct store_event **out, size_t *n, int64_t *next,
			   bool *more)
{
	struct conn *c = &((struct sq *)be)->r;
	bool job = q->job_id != NULL;
	sqlite3_stmt *s = get(c, job ? S_EVENTS_SPAN_JOB : S_EVENTS_SPAN);
	if (s == NULL)
		return prepare_error(c);
	sqlite3_bind_int64(s, 1, q->after);
	if (job)
		bind_str(s, 5, q->job_id);
	int rc = sqlite3_step(s);
	bool none = rc != SQLITE_ROW || sqlite3_column_type(s, 0) == SQLITE_NULL;
	int64_t first = none ? 0 : sqlite3_column_int64(s, 0);
	int64_t last = none ? 0 : sqlite3_column_int64(s, 1);
	done(s);
	if (rc != SQLITE_ROW)
		return err(rc);
	if (none)
		return 0; /* no event after q->after */
	int64_t top = store__span_top(first, last, q->scan);

	s = get(c, job ? S_EVENTS_TYPED_JOB : S_EVENTS_TYPED);
	if (s == NULL)
		return prepare_error(c);
	sqlite3_bind_int64(s, 1, q->after);
	sqlite3_bind_int(s, 2, q->limit);
	sqlite3_bind_int64(s, 3, q->types);
	sqlite3_bind_int64(s, 4, top);
	if (job)
		bind_str(s, 5, q->job_id);
	if ((rc = read_events(s, q->limit, out, n)) != 0)
		return rc;
	bool full = *n == (size_t)q->limit;
	*next = full ? (*out)[*n - 1].seq : top;
	*more = full || top < last;
	return 0;
}

/* one_int64 runs s, a query of one value, into *v (dflt when no row or
 * NULL). */
static int one_int64(sqlite3_stmt *s, int64_t dflt, int64_t *v)
{
	int rc = sqlite3_step(s);
	*v = dflt;
	if (rc == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL)
		*v = sqlite3_column_int64(s, 0);
	done(s);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : err(rc);
}

static int64_t sq_last_seq(void *be)
{
	struct conn *c = &((struct sq *)be)->r;
	sqlite3_stmt *s = get(c, S_LAST_SEQ);
	int64_t v = 0;
	if (s == NULL)
		return prepare_error(c);
	int rc = one_int64(s, 0, &v);
	return rc != 0 ? rc : v;
}

static int sq_count_by_status(void *be, int64_t counts[STORE_NSTATUS])
{
	struct conn *c = &((struct sq *)be)->r;
	sqlite3_stmt *s = get(c, S_COUNT);
	if (s == NULL)
		return prepare_error(c);
	memset(counts, 0, sizeof(int64_t) * STORE_NSTATUS);
	int64_t all = 0, others = 0;
	int rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int st = sqlite3_column_int(s, 0);
		int64_t v = sqlite3_column_int64(s, 1);
		if (st == -1) {
			all = v;
		} else if (st >= 0 && st < STORE_NSTATUS) {
			counts[st] = v;
			others += v;
		}
	}
	done(s);
	counts[STORE_COMPLETED] = all - others;
	return rc == SQLITE_DONE ? 0 : err(rc);
}

static int sq_logs(void *be, const char *job_id, int64_t after, int limit,
		   struct store_log_line **out, size_t *n)
{
	struct conn *c = &((struct sq *)be)->r;
	sqlite3_stmt *s = get(c, S_LOGS);
	if (s == NULL)
		return prepare_error(c);
	bind_str(s, 1, job_id);
	sqlite3_bind_int64(s, 2, after);
	sqlite3_bind_int(s, 3, limit);

	struct store_log_line *v = limit > 0 ? calloc((size_t)limit, sizeof(*v)) : NULL;
	size_t cnt = 0;
	int rc = SQLITE_DONE;
	if (limit > 0 && v == NULL)
		rc = SQLITE_NOMEM;
	while (rc != SQLITE_NOMEM && cnt < (size_t)limit &&
	       (rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct store_log_line *l = &v[cnt++];
		bool oom = false;
		l->n = sqlite3_column_int64(s, 0);
		l->at = sqlite3_column_int64(s, 1);
		l->level = col_str(s, 2, &oom);
		l->message = col_str(s, 3, &oom);
		l->data = col_json(s, 4);
		if (oom)
			rc = SQLITE_NOMEM;
	}
	if (cnt == (size_t)limit && rc == SQLITE_ROW)
		rc = SQLITE_DONE;
	done(s);
	if (rc != SQLITE_DONE) {
		for (size_t i = 0; i < cnt; i++)
			store_log_line_finish(&v[i]);
		free(v);
		return err(rc);
	}
	*out = v;
	*n = cnt;
	return 0;
}

static int sq_tool_paused(void *be, const char *tool)
{
	struct conn *c = &((struct sq *)be)->r;
	sqlite3_stmt *s = get(c, S_TOOL_PAUSED);
	if (s == NULL)
		return prepare_error(c);
	bind_str(s, 1, tool);
	int64_t v;
	int rc = one_int64(s, 0, &v);
	return rc != 0 ? rc : v != 0;
}

static int sq_next_run_at(void *be, int64_t *at)
{
	struct conn *c = &((struct sq *)be)->r;
	sqlite3_stmt *s = get(c, S_NEXT_RUN_AT);
	return s != NULL ? one_int64(s, 0, at) : prepare_error(c);
}

static int sq_next_expiry(void *be, int64_t *at)
{
	struct conn *c = &((struct sq *)be)->r;
	sqlite3_stmt *s = get(c, S_NEXT_EXPIRY);
	return s != NULL ? one_int64(s, 0, at) : prepare_error(c);
}

static int sq_definitions(void *be, struct store_definition **out,
			  size_t *n)
{
	struct conn *c = &((struct sq *)be)->r;
	sqlite3_stmt *s = get(c, S_DEFS);
	struct store_definition *v = NULL;
	size_t cap = 0, k = 0;
	int rc;

	if (s == NULL)
		return prepare_error(c);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct store_definition *d;
		bool oom = false;

		if (k == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			struct store_definition *x = realloc(v, ncap * sizeof(*v));
			if (x == NULL) {
				rc = SQLITE_NOMEM;
				break;
			}
			v = x;
			cap = ncap;
		}
		d = &v[k];
		/* A definition that does not parse is handed on as NULL:
		 * the worker names it in the log and leaves it out. */
		d->name = col_str(s, 0, &oom);
		d->definition = col_json(s, 1);
		if (d->name == NULL) {
			json_decref(d->definition);
			rc = SQLITE_NOMEM;
			break;
		}
		k++;
	}
	done(s);
	if (rc != SQLITE_DONE) {
		for (size_t i = 0; i < k; i++)
			store_definition_finish(&v[i]);
		free(v);
		return err(rc);
	}
	*out = v;
	*n = k;
	return 0;
}

static int sq_procs(void *be, struct store_proc **out, size_t *n)
{
	struct conn *c = &((struct sq *)be)->r;
	sqlite3_stmt *s = get(c, S_PROCS);
	struct store_proc *v = NULL;
	size_t cap = 0;
	int rc;

	if (s == NULL)
		return prepare_error(c);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (*n == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			struct store_proc *x = realloc(v, ncap * sizeof(*v));
			if (x == NULL) {
				done(s);
				free(v);
				*n = 0;
				return -ENOMEM;
			}
			v = x;
			cap = ncap;
		}
		struct store_proc *p = &v[(*n)++];
		memset(p, 0, sizeof(*p));
		snprintf(p->job_id, sizeof(p->job_id), "%s",
			 (const char *)sqlite3_column_text(s, 0));
		p->pid = sqlite3_column_int64(s, 1);
		p->start_min = sqlite3_column_int64(s, 2);
		p->start_max = sqlite3_column_int64(s, 3);
		snprintf(p->boot_id, sizeof(p->boot_id), "%s",
			 (const char *)sqlite3_column_text(s, 4));
	}
	done(s);
	if (rc != SQLITE_DONE) {
		free(v);
		*n = 0;
		return err(rc);
	}
	*out = v;
	return 0;
}

/* ---- open and close ---------------------------------------------------- */

static void conn_close(struct conn *c)
{
	for (int i = 0; i < S_NSTMT; i++)
		sqlite3_finalize(c->stmt[i]);
	for (int i = 0; i < EV_SIZES; i++)
		sqlite3_finalize(c->ev_stmt[i]);
	for (int i = 0; i < JOB_SIZES; i++)
		sqlite3_finalize(c->job_stmt[i]);
	free(c->pend);
	sqlite3_close(c->db);
	c->db = NULL;
}

static void sq_close(void *be)
{
	struct sq *q = be;
	if (q == NULL)
		return;
	conn_close(&q->r);
	conn_close(&q->w);
	/* After SQLite's descriptors: see lock.h. */
	store__lock_release(&q->lock);
	free(q->path);
	free(q);
}

/* pragma runs a PRAGMA of ours (never a caller's string); when want is not
 * NULL the first value it returns must equal it. */
static int pragma(sqlite3 *db, const char *sql, const char *want)
{
	sqlite3_stmt *s;
	int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
	if (rc != SQLITE_OK)
		return err(rc);
	rc = sqlite3_step(s);
	const unsigned char *got = rc == SQLITE_ROW ? sqlite3_column_text(s, 0) : NULL;
	if (want != NULL && (got == NULL || strcmp((const char *)got, want) != 0))
		rc = SQLITE_CANTOPEN;
	else if (rc == SQLITE_ROW)
		rc = SQLITE_DONE;
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : err(rc);
}

/* configure turns off SQLite's memory statistics, which take a global
 * mutex on every allocation. It must precede SQLite's initialisation, so it
 * fails harmlessly (SQLITE_MISUSE) when someone used SQLite first. */
static void configure(void)
{
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

/* quick_check runs PRAGMA quick_check on db: every page of every b-tree
 * is read and its structure checked (not the agreement of indexes with
 * their tables, which integrity_check adds at several times the cost).
 * It stops at the first problem. Returns 0, or -EIO with *errmsg. */
static int quick_check(sqlite3 *db, const char *path, char **errmsg)
{
	sqlite3_stmt *s;
	const char *what = NULL;
	int rc = sqlite3_prepare_v2(db, "PRAGMA quick_check(1)", -1, &s, NULL);

	if (rc == SQLITE_OK) {
		rc = sqlite3_step(s);
		if (rc == SQLITE_ROW) {
			what = (const char *)sqlite3_column_text(s, 0);
			if (what != NULL && strcmp(what, "ok") == 0) {
				sqlite3_finalize(s);
				return 0;
			}
		}
	}
	if (what == NULL)
		what = sqlite3_errmsg(db);
	/* Its report starts with a line naming the schema. */
	if (strncmp(what, "*** in database main ***\n", 25) == 0)
		what += 25;
	store__set_msg(errmsg,
		       "the database %s fails its integrity check (PRAGMA "
		       "quick_check: %s); berthd does not run on a damaged "
		       "database: restore it from a backup, or save what is "
		       "readable with `sqlite3 %s .recover`",
		       path, what ? what : "no answer", path);
	sqlite3_finalize(s);
	return (rc & 0xff) == SQLITE_NOMEM ? -ENOMEM : -EIO;
}

/* sq_check runs the integrity check sq_open left for the writer thread,
 * before its first batch: nothing has been written to the database yet. */
static int sq_check(void *be, char **errmsg)
{
	struct sq *q = be;
	int64_t t0 = store_now();
	int rc;

	if (!q->check_pending)
		return 0;
	q->check_pending = false;
	rc = quick_check(q->w.db, q->path, errmsg);
	if (rc == 0)
		log_info("database %s: integrity check passed in %lld ms (writes "
			 "waited for it)",
			 q->path, (long long)(store_now() - t0));
	return rc;
}

/* dir_writable tells whether SQLite may create the -wal and -shm files
 * of path: they exist, or its folder is writable. Sets *errmsg when not. */
static bool dir_writable(const char *path, char **errmsg)
{
	char *wal = NULL, *shm = NULL, *dir = NULL;
	bool ok = true;

	if (asprintf(&wal, "%s-wal", path) < 0 || asprintf(&shm, "%s-shm", path) < 0 ||
	    (dir = strdup(path)) == NULL) {
		free(wal);
		free(shm);
		return true; /* out of memory: SQLite says what it finds */
	}
	if (access(wal, F_OK) != 0 || access(shm, F_OK) != 0) {
		char *slash = strrchr(dir, '/');
		const char *d = dir;

		if (slash == dir)
			slash[1] = '\0';
		else if (slash != NULL)
			*slash = '\0';
		else
			d = ".";
		if (faccessat(AT_FDCWD, d, W_OK | X_OK, AT_EACCESS) != 0) {
			int e = errno;

			store__set_msg(errmsg,
				       "cannot create files in %s, the folder of "
				       "the database %s: %s; SQLite keeps %s and "
				       "%s beside the database",
				       d, path, strerror(e), wal, shm);
			ok = false;
		}
	}
	free(wal);
	free(shm);
	free(dir);
	return ok;
}

static int sq_open(const struct store_config *cfg, void **be, char **errmsg)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, configure);

	const char *path = cfg->path;
	int busy = cfg->busy_timeout_ms > 0 ? cfg->busy_timeout_ms : 5000;
	int64_t inline_max = cfg->check_inline_max != 0 ? cfg->check_inline_max
							: STORE_CHECK_INLINE_MAX;
	struct sq *q = calloc(1, sizeof(*q));
	struct stat st = {0};
	int version = 0;
	if (q == NULL || (q->path = strdup(path)) == NULL) {
		free(q);
		return -ENOMEM;
	}
	q->w.seq_floor = -1;

	/* The lock comes first: no second daemon may even migrate. It also
	 * creates a new database file, mode 0600, and fails for a database
	 * berthd cannot write. */
	int rc = dir_writable(path, errmsg) ? 0 : -EACCES;
	if (rc == 0)
		rc = store__lock_acquire(path, true, &q->lock, errmsg);
	if (rc < 0) {
		free(q->path);
		free(q);
		return rc;
	}
	if (fstat(q->lock.db_fd, &st) == 0 && (st.st_mode & 077) != 0)
		log_warn("the database %s can be read by other users (mode %04o): "
			 "`chmod 600 %s` keeps its jobs private (berthd creates "
			 "its databases 0600)",
			 path, (unsigned)(st.st_mode & 07777), path);

	/* NOMUTEX: each connection is used by one thread at a time (the
	 * writer's by the writer thread once open returns). With durability
	 * full the writer's connection gathers each commit's WAL writes into
	 * one (store/walbuf.h: safe because it syncs every commit). */
	rc = sqlite3_open_v2(path, &q->w.db,
				 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
					 SQLITE_OPEN_NOMUTEX,
				 cfg->durability == STORE_DURABILITY_FULL
					 ? store__walbuf_vfs()
					 : NULL);
	if (rc != SQLITE_OK) {
		store__set_msg(errmsg, "cannot open the database %s: %s", path,
			q->w.db ? sqlite3_errmsg(q->w.db) : sqlite3_errstr(rc));
		rc = err(rc);
		goto fail;
	}
	/* SQLite opens a file it may not write read-only, silently. */
	if (sqlite3_db_readonly(q->w.db, "main") == 1) {
		store__set_msg(errmsg, "cannot write the database %s: SQLite "
			       "opened it read-only; berthd needs to write its "
			       "database", path);
		rc = -EROFS;
		goto fail;
	}
	sqlite3_busy_timeout(q->w.db, busy);

	/*
	 * The integrity check comes before anything is written. It reads the
	 * whole file (PRAGMA quick_check: 2.5 s for the 650 MB of 1,000,000
	 * suspended jobs, docs/RELIABILITY.md), so only a database up to
	 * inline_max bytes, or one about to be migrated, is checked here,
	 * before start-up goes on; a larger one is checked by the writer
	 * thread before its first write (sq_check), while reads are served,
	 * and writes wait for it.
	 */
	if ((rc = store__user_version(q->w.db, &version)) != SQLITE_OK) {
		store__set_msg(errmsg, "cannot read the database %s: %s", path,
			       sqlite3_errmsg(q->w.db));
		rc = err(rc);
		goto fail;
	}
	if (inline_max > 0 &&
	    (st.st_size <= inline_max || version < (int)migrations_sqlite_count)) {
		int64_t t0 = store_now();
		if ((rc = quick_check(q->w.db, path, errmsg)) != 0)
			goto fail;
		log_info("database %s: integrity check passed in %lld ms", path,
			 (long long)(store_now() - t0));
	} else {
		q->check_pending = true;
	}

	/* The durability is the connection's from its first commit on, the
	 * migrations' included: the WAL writes of a commit at FULL are only
	 * gathered (store/walbuf.h) because it syncs. It writes nothing. */
	const char *sync = cfg->durability == STORE_DURABILITY_NORMAL
				   ? "PRAGMA synchronous = NORMAL"
				   : "PRAGMA synchronous = FULL";
	if ((rc = pragma(q->w.db, sync, NULL)) != 0) {
		store__set_msg(errmsg, "cannot set up the database %s: %s", path,
			sqlite3_errmsg(q->w.db));
		goto fail;
	}

	/* The version check comes before anything that writes (such as
	 * switching to WAL), so that a newer database is left untouched. */
	rc = store__berths(q->w.db, path, errmsg);
	if (rc == 0)
		rc = store__migrate(q->w.db, path, migrations_sqlite,
				    migrations_sqlite_count, errmsg);
	if (rc != 0)
		goto fail;

	if ((rc = pragma(q->w.db, "PRAGMA journal_mode = WAL", "wal")) != 0 ||
	    (rc = pragma(q->w.db, "PRAGMA foreign_keys = ON", NULL)) != 0 ||
	    (rc = pragma(q->w.db, "PRAGMA cache_size = -32768", NULL)) != 0 ||
	    (rc = pragma(q->w.db, "PRAGMA temp_store = MEMORY", NULL)) != 0) {
		store__set_msg(errmsg, "cannot set up the database %s: %s", path,
			sqlite3_errmsg(q->w.db));
		goto fail;
	}

	rc = sqlite3_open_v2(path, &q->r.db,
			     SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		store__set_msg(errmsg, "cannot open the database %s for reading: %s",
			path, q->r.db ? sqlite3_errmsg(q->r.db) : sqlite3_errstr(rc));
		rc = err(rc);
		goto fail;
	}
	sqlite3_busy_timeout(q->r.db, busy);
	if ((rc = pragma(q->r.db, "PRAGMA cache_size = -16384", NULL)) != 0) {
		store__set_msg(errmsg, "cannot set up the database %s: %s", path,
			sqlite3_errmsg(q->r.db));
		goto fail;
	}
	*be = q;
	return 0;

fail:
	sq_close(q);
	return rc != 0 ? rc : -EIO;
}

const struct store__backend store__sqlite = {
	.name = "sqlite",
	.open = sq_open,
	.close = sq_close,
	.begin = sq_begin,
	.apply = sq_apply,
	.commit = sq_commit,
	.rollback = sq_rollback,
	.get = sq_get,
	.list = sq_list,
	.running = sq_running,
	.events = sq_events,
	.events_typed = sq_events_typed,
	.last_seq = sq_last_seq,
	.count_by_status = sq_count_by_status,
	.logs = sq_logs,
	.tool_paused = sq_tool_paused,
	.next_run_at = sq_next_run_at,
	.next_expiry = sq_next_expiry,
	.procs = sq_procs,
	.definitions = sq_definitions,
	.check = sq_check,
};

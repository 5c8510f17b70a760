/*
 * pg.c: the PostgreSQL backend of the store, for several berthd nodes
 * sharing one database (docs/POSTGRES.md).
 *
 * Three connections: the writer's (writer thread: one transaction per
 * batch, group commit as with SQLite, its statements pipelined: "the
 * writer's pipeline" below), the reader's (loop thread: reads, lease
 * renewal and the reaper) and the listener's (loop thread: LISTEN
 * berth_events, and the session lock that keeps two live nodes from using
 * one name). Statements are prepared once per connection, on first use;
 * parameters travel as text, never spliced into SQL.
 *
 * Three things differ from SQLite, and each is settled here:
 *
 * - Event seq. A transaction appends its events at the end, just before
 *   COMMIT: each statement that inserts them raises the one row of
 *   event_seq by the number of its rows, which locks the row until the
 *   commit, and numbers its rows from the counter it raised. The next
 *   transaction to take seqs waits for that lock, so it reads the
 *   committed counter and commits after it: seqs become visible in
 *   increasing order, and a reader that has seen seq N has seen every seq
 *   below N. A rollback undoes its counter raise too, so no seq is ever
 *   skipped.
 *
 * - Leases. A claim writes lease_owner (this node) and lease_until. The
 *   loop thread's tick renews this node's leases and recovers the running
 *   jobs of other nodes whose leases expired, by the policy of
 *   store_recover. The work a node finishes checks that it still holds
 *   the lease (a transition from exactly "running"), so a node that was
 *   presumed dead cannot complete a job another node took over.
 *
 * - Cluster-wide limits. A claim that carries a tool's cluster limit (or
 *   a global one) takes a transaction-scoped advisory lock per limited
 *   tool, in one sorted order and before any row lock of its batch, then
 *   counts that tool's running jobs: every node's claims of a tool are
 *   serialized and each sees the others' committed claims.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "log/log.h"
#include "migrations/migrations.h"
#include "store/jload.h"
#include "store/pg.h"
#include "store/store_int.h"


enum stmt_id {
	S_JOB_BY_KEY,
	S_JOB_INSERT,
	S_JOB_GET,
	S_TRANSITION,
	S_LOCKS,
	S_RUNNING_TOOLS,
	S_RUNNING_ALL,
	S_CLAIM_SCAN,
	S_CLAIM_TAKE,
	S_CLAIM_NEXT,
	S_CLAIM_ALL,
	S_CHECKPOINT,
	S_PROGRESS,
	S_JOB_EXISTS,
	S_LOG_LAST,
	S_LOG_INSERT,
	S_LOG_TRIM,
	S_EXPIRE,
	S_TOOL_PAUSE,
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
	S_EVENTS_TYPED,
	S_EVENTS_TYPED_JOB,
	S_LAST_SEQ,
	S_COUNT,
	S_LOGS,
	S_TOOL_PAUSED,
	S_NEXT_RUN_AT,
	S_NEXT_EXPIRY,
	S_SEQ_TAKE,
	S_RENEW,
	S_REAP_SCAN,
	S_REAP_LOCK,
	S_REAP_RETRY,
	S_REAP_FAIL,
	S_PROC_PUT,
	S_PROC_DEL,
	S_PROCS,
	S_DEF_PUT,
	S_DEF_DEL,
	S_DEFS,
	S_NSTMT
};

/* The residual filters of a listing: $1 status mask (0: any), $2 tool,
 * $3 run id, $4 the id to list before (NULL: the newest), $5 the limit. */
#define PRUNABLE " id < $2::text AND status >= 4 AND finished_at < $1::bigint"

#define LIST_REST                                                              \
	" ($1::int = 0 OR ((1 << status) & $1::int) <> 0)"                     \
	" AND ($2::text IS NULL OR tool = $2::text)"                           \
	" AND ($3::text IS NULL OR run_id = $3::text)"                         \
	" AND ($4::text IS NULL OR id < $4::text)"                             \
	" ORDER BY id DESC LIMIT $5::int"

/* The read by type of the events WHERE (of one job, or ""): the first seq
 * after $1 (an index probe) and the last committed, which bound the span
 * of $4 seqs it looks through (store__span_top), and the events of types
 * $3 in that span, at most $2, each row with first and last; when none
 * is of those types, one row of first and last alone. One statement, so
 * that both parts read one snapshot. */
#define EVENTS_TYPED(where)                                                    \
	"SELECT e.seq, e.job_id, e.tool, e.type, e.status, e.at, e.data,"       \
	" e.actor, e.via, e.client, b.first, b.last FROM (SELECT (SELECT"       \
	" min(seq) FROM events WHERE " where "seq > $1::bigint) AS first,"      \
	" (SELECT n FROM event_seq WHERE one = 1) AS last) b LEFT JOIN LATERAL" \
	" (SELECT seq, job_id, tool, type, status, at, data, actor, via,"       \
	" client FROM events WHERE " where "seq > $1::bigint"                    \
	" AND seq <= LEAST(b.first + $4::int - 1, b.last)"                     \
	" AND ((1 << type) & $3::int) <> 0 ORDER BY seq LIMIT $2::int) e"       \
	" ON true ORDER BY e.seq"

static const char *const sql_text[S_NSTMT] = {
	[S_JOB_BY_KEY] = "SELECT " STORE__JOB_COLS " FROM jobs"
			 " WHERE tool = $1 AND idempotency_key = $2",
	/* ON CONFLICT DO NOTHING: in PostgreSQL a failed statement aborts
	 * the whole transaction, and with it the batch; a duplicate key of
	 * another node's concurrent create must only settle this request. */
	[S_JOB_INSERT] = "INSERT INTO jobs (" STORE__JOB_COLS ") VALUES ($1, $2, $3,"
			 " $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,"
			 " $16, $17, $18, $19, $20, $21, $22, $23, $24, $25,"
			 " $26, $27, $28, $29, $30, $31, $32, $33, $34, $35,"
			 " $36, $37, $38, $39)"
			 " ON CONFLICT DO NOTHING RETURNING id",
	[S_JOB_GET] = "SELECT " STORE__JOB_COLS " FROM jobs WHERE id = $1",
	/* $1 id, $2 from mask, $3 to, $4 now, $5 set, $6 run_at, $7 attempt,
	 * $8 output, $9 model_output, $10 error, $11 suspend payload, $12
	 * resume data, $13 checkpoint, $14 decision, $15 reason, $16
	 * expires_at, $17 progress, $18 this node, $19 the lease, $20 by,
	 * $21 via, $22 approvals, $23 quorum, $24 the approvals the job
	 * must hold, $25 views, $26 the run's attempt (0: any). As in
	 * sqlite.c, plus the lease: a job entering running is this node's,
	 * a job leaving it is nobody's; a transition from exactly running
	 * (the end of a run) needs this node to hold the lease, and a run's
	 * end the attempt it ran: this node's lease is no proof that the
	 * run is the one the job is at, as after an outage longer than the
	 * lease the node may have claimed the recovered job again while its
	 * last run's end waited to be stored (the audit saw that end
	 * committed as the new attempt's result). */
	[S_TRANSITION] =
		"UPDATE jobs SET status = $3::int, updated_at = $4::bigint,"
		" run_at = CASE WHEN $5::int & 1 <> 0 THEN $6::bigint ELSE run_at END,"
		" attempt = CASE WHEN $5::int & 2 <> 0 THEN $7::int ELSE attempt END,"
		" output = CASE WHEN $5::int & 4 <> 0 THEN $8::text ELSE output END,"
		" model_output = CASE WHEN $5::int & 4 <> 0 THEN $9::text"
		"   ELSE model_output END,"
		" error = CASE WHEN $5::int & 8 <> 0 THEN $10::text ELSE error END,"
		" suspend_payload = CASE WHEN $5::int & 16 <> 0 THEN $11::text"
		"   ELSE suspend_payload END,"
		" resume_data = CASE WHEN $5::int & 32 <> 0 THEN $12::text"
		"   ELSE resume_data END,"
		" checkpoint = CASE WHEN $5::int & 64 <> 0 THEN $13::text"
		"   ELSE checkpoint END,"
		" decision = CASE WHEN $5::int & 128 <> 0 THEN $14::int ELSE decision END,"
		" reason = CASE WHEN $5::int & 128 <> 0 THEN $15::text ELSE reason END,"
		" decided_at = CASE WHEN $5::int & 128 <> 0 THEN $4::bigint"
		"   ELSE decided_at END,"
		" decided_by = CASE WHEN $5::int & 128 <> 0 THEN $20::text"
		"   ELSE decided_by END,"
		" decided_via = CASE WHEN $5::int & 128 <> 0 THEN $21::text"
		"   ELSE decided_via END,"
		" approvals = CASE WHEN $5::int & 4096 <> 0 THEN $22::text"
		"   ELSE approvals END,"
		" quorum = CASE WHEN $5::int & 4096 <> 0 THEN $23::int"
		"   ELSE quorum END,"
		" started_at = CASE WHEN $5::int & 256 <> 0 THEN $4::bigint"
		"   ELSE started_at END,"
		" finished_at = CASE WHEN $5::int & 512 <> 0 OR $3::int >= 4"
		"   THEN $4::bigint ELSE finished_at END,"
		" expires_at = CASE WHEN $5::int & 1024 <> 0 THEN $16::bigint"
		"   WHEN $3::int IN (1, 3) AND ttl_ms > 0 THEN $4::bigint + ttl_ms"
		"   ELSE expires_at END,"
		" progress = CASE WHEN $5::int & 2048 <> 0 THEN $17::text"
		"   ELSE progress END,"
		" views = CASE WHEN $5::int & 8192 <> 0 THEN $25::text"
		"   ELSE views END,"
		" lease_owner = CASE WHEN $3::int = 2 THEN $18::text END,"
		" lease_until = CASE WHEN $3::int = 2 THEN $4::bigint + $19::bigint END"
		" WHERE id = $1 AND ((1 << status) & $2::int) <> 0"
		" AND (status <> 2 OR $2::int <> 4 OR lease_owner IS NULL"
		"   OR lease_owner = $18::text)"
		" AND (status <> 2 OR $26::int = 0 OR attempt = $26::int)"
		" AND ($5::int & 4096 = 0"
		"   OR coalesce(json_array_length(approvals::json), 0) = $24::int)"
		" RETURNING " STORE__JOB_COLS,
	/* The keys come sorted: every node takes them in one order. */
	[S_LOCKS] = "SELECT count(pg_advisory_xact_lock(k)) FROM"
		    " (SELECT k FROM unnest($1::bigint[]) AS k ORDER BY k) AS s",
	[S_RUNNING_TOOLS] = "SELECT tool, count(*) FROM jobs WHERE status = 2"
			    " AND tool = ANY($1::text[]) GROUP BY tool",
	[S_RUNNING_ALL] = "SELECT count(*) FROM jobs WHERE status = 2",
	/* SKIP LOCKED: rows another node's claim holds are left to it. */
	/* $4 false: only the tools of $5 (the claim's limit is spent, and
	 * only groups have room, store.h). */
	[S_CLAIM_SCAN] = "SELECT id, tool FROM jobs WHERE status = 0"
			 " AND run_at <= $1::bigint AND NOT (tool = ANY($2::text[]))"
			 " AND ($4::boolean OR tool = ANY($5::text[]))"
			 " AND NOT EXISTS (SELECT 1 FROM tools"
			 "   WHERE name = jobs.tool AND paused <> 0)"
			 " ORDER BY priority DESC, run_at, id LIMIT $3::int"
			 " FOR UPDATE SKIP LOCKED",
	[S_CLAIM_TAKE] = "UPDATE jobs SET status = 2, started_at = $2::bigint,"
			 " updated_at = $2::bigint, lease_owner = $3::text,"
			 " lease_until = $2::bigint + $4::bigint"
			 " WHERE id = ANY($1::text[]) AND status = 0"
			 " RETURNING " STORE__JOB_COLS,
	/* The claim's next run_at (store.h): future pending jobs of the
	 * tools the claim did not exclude. */
	[S_CLAIM_NEXT] = "SELECT run_at FROM jobs WHERE status = 0"
			 " AND run_at > $1::bigint AND NOT (tool = ANY($2::text[]))"
			 " AND NOT EXISTS (SELECT 1 FROM tools"
			 "   WHERE name = jobs.tool AND paused <> 0)"
			 " ORDER BY run_at LIMIT 1",
	/* A claim in one statement, for one that counts no tool's jobs
	 * (its caps only exclude tools): the runnable jobs picked, locked
	 * (SKIP LOCKED: another node's claim keeps its own) and taken. The
	 * pick is a CTE, which runs once: as a subquery of the UPDATE's
	 * WHERE, the planner may run it again per row, and each run skips
	 * the rows the last one locked (a claim of 1 took 2). UPDATE
	 * returns its rows in no order: read_pend sorts them. */
	[S_CLAIM_ALL] = "WITH c (cid) AS (SELECT id FROM jobs WHERE status = 0"
			"   AND run_at <= $1::bigint AND NOT (tool = ANY($2::text[]))"
			"   AND NOT EXISTS (SELECT 1 FROM tools"
			"     WHERE name = jobs.tool AND paused <> 0)"
			"   ORDER BY priority DESC, run_at, id LIMIT $3::int"
			"   FOR UPDATE SKIP LOCKED)"
			" UPDATE jobs SET status = 2, started_at = $1::bigint,"
			" updated_at = $1::bigint, lease_owner = $4::text,"
			" lease_until = $1::bigint + $5::bigint"
			" FROM c WHERE jobs.id = c.cid AND status = 0"
			" RETURNING " STORE__JOB_COLS,
	[S_CHECKPOINT] = "UPDATE jobs SET checkpoint = $2, updated_at = $3::bigint"
			 " WHERE id = $1 AND status = 2"
			 " AND (lease_owner IS NULL OR lease_owner = $4::text)",
	[S_PROGRESS] = "UPDATE jobs SET progress = $2, updated_at = $3::bigint"
		       " WHERE id = $1 AND status = 2"
		       " AND (lease_owner IS NULL OR lease_owner = $4::text)",
	[S_JOB_EXISTS] = "SELECT 1 FROM jobs WHERE id = $1",
	[S_LOG_LAST] = "SELECT max(n) FROM job_logs WHERE job_id = $1",
	[S_LOG_INSERT] = "INSERT INTO job_logs (job_id, n, at, level, message,"
			 " data) VALUES ($1, $2::bigint, $3::bigint, $4, $5, $6)",
	[S_LOG_TRIM] = "DELETE FROM job_logs WHERE job_id = $1 AND n <= $2::bigint",
	[S_EXPIRE] = "UPDATE jobs SET status = 9, finished_at = $1::bigint,"
		     " updated_at = $1::bigint, lease_owner = NULL, lease_until = NULL"
		     " WHERE id IN (SELECT id FROM jobs WHERE status IN (1, 3)"
		     "   AND expires_at IS NOT NULL AND expires_at <= $1::bigint"
		     "   ORDER BY expires_at FOR UPDATE SKIP LOCKED)"
		     " AND status IN (1, 3) RETURNING " STORE__JOB_COLS,
	[S_TOOL_PAUSE] = "INSERT INTO tools (name, paused) VALUES ($1, $2::int)"
			 " ON CONFLICT (name) DO UPDATE SET paused = excluded.paused",
	/* The jobs a prune deletes: terminal, finished before $1. $2 is the
	 * least id made at $1 (store__uuid7_floor): a job that finished
	 * before the cutoff was created before it, so the primary key up to
	 * $2 holds them all (migration 0005). */
	[S_PRUNE_EVENTS] = "DELETE FROM events WHERE job_id IN (SELECT id FROM jobs"
			   " WHERE" PRUNABLE ")",
	[S_PRUNE_LOGS] = "DELETE FROM job_logs WHERE job_id IN (SELECT id FROM jobs"
			 " WHERE" PRUNABLE ")",
	[S_PRUNE] = "DELETE FROM jobs WHERE" PRUNABLE,
	[S_LIST_ALL] = "SELECT " STORE__JOB_COLS " FROM jobs WHERE" LIST_REST,
	/* jobs_status holds no completed job (migration 0005): the
	 * "status <> 4" lets the planner use it, and pg_list asks for
	 * completed jobs through S_LIST_ALL. */
	[S_LIST_STATUS] = "SELECT " STORE__JOB_COLS " FROM jobs WHERE status = $6::int"
			  " AND status <> 4 AND" LIST_REST,
	[S_LIST_TOOL] = "SELECT " STORE__JOB_COLS " FROM jobs WHERE tool = $2::text AND"
			LIST_REST,
	[S_LIST_RUN] = "SELECT " STORE__JOB_COLS " FROM jobs WHERE run_id = $3::text AND"
		       LIST_REST,
	/* The primary key's range from $6, the prefix, to $7, its end (NULL:
	 * none), and the exact test on each row of it. */
	[S_LIST_PREFIX] = "SELECT " STORE__JOB_COLS " FROM jobs WHERE id >= $6::text"
			  " AND ($7::text IS NULL OR id < $7::text)"
			  " AND left(id, length($6::text)) = $6::text AND"
			  LIST_REST,
	[S_RUNNING] = "SELECT " STORE__JOB_COLS " FROM jobs WHERE status = 2"
		      " AND lease_owner = $1 ORDER BY id",
	[S_EVENTS] = "SELECT seq, job_id, tool, type, status, at, data, actor,"
		     " via, client"
		     " FROM events WHERE seq > $1::bigint ORDER BY seq LIMIT $2::int",
	[S_EVENTS_JOB] = "SELECT seq, job_id, tool, type, status, at, data,"
			 " actor, via, client"
			 " FROM events WHERE job_id = $3 AND seq > $1::bigint"
			 " ORDER BY seq LIMIT $2::int",
	/* A read by type (pg_events_typed, EVENTS_TYPED above). */
	[S_EVENTS_TYPED] = EVENTS_TYPED(""),
	[S_EVENTS_TYPED_JOB] = EVENTS_TYPED("job_id = $5 AND "),
	[S_LAST_SEQ] = "SELECT n FROM event_seq WHERE one = 1",
	/* One read of the table (PostgreSQL counts rows, not pages, so a
	 * count of all jobs would be a second one). */
	[S_COUNT] = "SELECT status, count(*) FROM jobs GROUP BY status",
	[S_LOGS] = "SELECT n, at, level, message, data FROM job_logs"
		   " WHERE job_id = $1 AND n > $2::bigint ORDER BY n LIMIT $3::int",
	[S_TOOL_PAUSED] = "SELECT paused FROM tools WHERE name = $1",
	[S_NEXT_RUN_AT] = "SELECT run_at FROM jobs WHERE status = 0 AND NOT EXISTS"
			  " (SELECT 1 FROM tools WHERE name = jobs.tool AND paused <> 0)"
			  " ORDER BY run_at LIMIT 1",
	[S_NEXT_EXPIRY] = "SELECT expires_at FROM jobs WHERE status IN (1, 3)"
			  " AND expires_at IS NOT NULL ORDER BY expires_at LIMIT 1",
	[S_SEQ_TAKE] = "UPDATE event_seq SET n = n + $1::bigint WHERE one = 1"
		       " RETURNING n",
	[S_RENEW] = "UPDATE jobs SET lease_until = $2::bigint"
		    " WHERE status = 2 AND lease_owner = $1",
	/* The tools of the jobs of expired leases, read without a lock: a
	 * node locks only the jobs of the tools it knows (S_REAP_LOCK), so
	 * that a node without a job's tool never holds it from one that has
	 * it, and jobs it must leave never fill its LIMIT. */
	[S_REAP_SCAN] = "SELECT DISTINCT tool FROM jobs WHERE status = 2"
			" AND lease_owner IS DISTINCT FROM $1::text"
			" AND (lease_until IS NULL OR lease_until < $2::bigint)",
	/* The jobs of those tools of $3 this node knows, locked. */
	[S_REAP_LOCK] = "SELECT id, tool, attempt, max_retries, lease_owner"
			" FROM jobs WHERE tool = ANY($3::text[]) AND status = 2"
			" AND lease_owner IS DISTINCT FROM $1::text"
			" AND (lease_until IS NULL OR lease_until < $2::bigint)"
			" ORDER BY id LIMIT 256 FOR UPDATE SKIP LOCKED",
	[S_REAP_RETRY] = "UPDATE jobs SET status = 0, run_at = $2::bigint,"
			 " attempt = attempt + 1, updated_at = $2::bigint,"
			 " lease_owner = NULL, lease_until = NULL"
			 " WHERE id = $1 AND status = 2",
	[S_REAP_FAIL] = "UPDATE jobs SET status = 5, error = $3,"
			" updated_at = $2::bigint, finished_at = $2::bigint,"
			" lease_owner = NULL, lease_until = NULL"
			" WHERE id = $1 AND status = 2",
	/* $1 this node: a node's process records are its own. */
	[S_PROC_PUT] = "INSERT INTO procs (node, pid, job_id, start_min, start_max,"
		       " boot_id) VALUES ($1, $2::bigint, $3, $4::bigint, $5::bigint, $6)"
		       " ON CONFLICT (node, pid) DO UPDATE SET job_id = excluded.job_id,"
		       " start_min = excluded.start_min, start_max = excluded.start_max,"
		       " boot_id = excluded.boot_id",
	[S_PROC_DEL] = "DELETE FROM procs WHERE node = $1 AND pid = $2::bigint"
		       " AND start_min = $3::bigint",
	[S_PROCS] = "SELECT job_id, pid, start_min, start_max, boot_id FROM procs"
		    " WHERE node = $1 ORDER BY pid",
	[S_DEF_PUT] = "INSERT INTO worker_tools (name, definition, updated_at)"
		      " VALUES ($1, $2, $3::bigint) ON CONFLICT (name) DO UPDATE"
		      " SET definition = excluded.definition,"
		      " updated_at = excluded.updated_at",
	[S_DEF_DEL] = "DELETE FROM worker_tools WHERE name = $1",
	[S_DEFS] = "SELECT name, definition FROM worker_tools ORDER BY name",
};

/* The writer's multi-row statements (see jobs_sql and events_sql): one
 * prepared statement per size, 1, 2, 4, ... rows, after the S_* ones. */
enum { JOB_SIZES = 5, JOB_ROWS_MAX = 1 << (JOB_SIZES - 1) };
enum { EV_SIZES = 7, EV_ROWS_MAX = 1 << (EV_SIZES - 1) };
enum {
	P_JOBS = S_NSTMT,         /* + k: the insert of 1 << k jobs */
	P_EVENTS = P_JOBS + JOB_SIZES, /* + k: of 1 << k events */
	P_EVENTS_QUIET = P_EVENTS + EV_SIZES, /* + k: the same, notifying
					       * no node (peers_seen) */
	P_JOBS_SURE = P_EVENTS_QUIET + EV_SIZES, /* + k: the insert of 1 << k
						  * jobs that fails rather
						  * than skip one (commit_at_once) */
	P_NSTMT = P_JOBS_SURE + JOB_SIZES
};

struct conn {
	PGconn *pg;
	bool prepared[P_NSTMT];
	/* The writer's connection runs in pipeline mode, nonblocking (see
	 * "the writer's pipeline"); the loop thread's two do not. broken:
	 * the stream of results was lost track of; the connection is reset
	 * before its next use. */
	bool pipeline;
	bool broken;
};

/* A statement the writer sent whose result is still to be read, and what
 * reading it settles (read_pend). */
enum pend_kind {
	PK_PREPARE,  /* a statement's preparation: stmt */
	PK_CHECK,    /* BEGIN: only its success counts */
	PK_COMMIT,   /* COMMIT: its tag says whether it committed */
	PK_CREATES,  /* held creations sent as one INSERT: sent[first..+n) */
	PK_CREATES_SURE, /* the same, their events already the batch's
			  * (commit_at_once) */
	PK_CREATE_PENDING, /* a creation that was to start, written as
			    * submitted: sent[first] */
	PK_CREATE_KEY, /* a creation with an idempotency key: w */
	PK_KEY_FIND, /* the job that holds w's key */
	PK_TRANSITION, /* w's compare-and-set */
	PK_JOB_GET,  /* the job as it is, for w's conflict */
	PK_CHANGED,  /* a checkpoint or progress of w: the rows it changed */
	PK_PROC,     /* a process record */
	PK_DEFINE,   /* a worker process's tool definition */
	PK_EVENTS,   /* events first..+n of the batch: their last seq */
	PK_CLAIM,    /* a claim taken in one statement: w */
	PK_CLAIM_NEXT, /* that claim's next run_at */
	PK_KEEP,     /* a statement whose result exec_piped returns */
	PK_SYNC,     /* the end of a round trip */
};

struct pend {
	int kind;        /* enum pend_kind */
	int stmt;        /* PK_PREPARE: the statement prepared */
	struct store__wreq *w;
	size_t first, n;
};

/* A creation sent to the database, with the end of the run it absorbed
 * (NULL: none), until its INSERT's result is read. */
struct sent {
	struct store__wreq *w;
	struct store__wreq *then;
};

struct pg {
	struct conn w; /* the writer thread's */
	struct conn r; /* the loop thread's: reads, leases, the reaper */
	struct conn l; /* the loop thread's: LISTEN and the node lock */
	char *url;
	char *node;
	int64_t lease_ms;
	int durability;
	int64_t last_renew;
	/* The backend of the writer's connection: its own notifications
	 * are of batches this node delivers itself (pg_notified). Written
	 * by the writer thread, read by the loop thread. */
	_Atomic int writer_pid;
	/* When the listener last heard another node (store_now(); 0:
	 * never): the writer notifies the nodes only while there are
	 * others to hear it (peers_seen). Written by the loop thread, read
	 * by the writer thread. */
	_Atomic int64_t peer_seen;

	/* The writer's current transaction. texts[i] is the data text and
	 * clients[i] the MCP client's of batch->events[i] (borrowed from
	 * its request). */
	struct store__batch *batch;
	const char **texts;
	const char **clients;
	size_t cap_texts;
	bool locked; /* the claims' advisory locks are taken */
	/* The statements in flight, in the order sent (pend[pend_head..
	 * npend)); the creations held back for one multi-row INSERT (held,
	 * with the run's end each absorbed); the creations sent. */
	struct pend *pend;
	size_t npend, pend_head, cap_pend;
	struct store__wreq *held[JOB_ROWS_MAX];
	struct store__wreq *held_then[JOB_ROWS_MAX];
	size_t nheld;
	struct sent *sent;
	size_t nsent, cap_sent;
	/* The batch so far is creations held back, nothing sent but its
	 * BEGIN (commit_at_once may write it in one round trip); careful:
	 * the last try of the batch could not, so this one does not try. */
	bool only_held;
	bool careful;
	/* The kind of the first statement of the round trip that failed
	 * (drain). */
	int failed_kind;
	/* The SQL of the multi-row statements, built once. */
	char *multi_sql[P_NSTMT - P_JOBS];
	struct mparams *mp;
	/* Where drain leaves the result of PK_KEEP (exec_piped). */
	PGresult **kept;
};

/* ---- helpers ----------------------------------------------------------- */

/* Parameters as text. Integers are formatted into buf. */
enum { MAX_PARAMS = 40 };
struct params {
	const char *v[MAX_PARAMS];
	char buf[MAX_PARAMS][24];
	int n;
};

static void p_str(struct params *p, const char *s)
{
	p->v[p->n++] = s;
}

static void p_int(struct params *p, int64_t x)
{
	snprintf(p->buf[p->n], sizeof(p->buf[0]), "%lld", (long long)x);
	p->v[p->n] = p->buf[p->n];
	p->n++;
}

/* p_time passes t, or NULL for 0 (absent). */
static void p_time(struct params *p, int64_t t)
{
	if (t != 0)
		p_int(p, t);
	else
		p_str(p, NULL);
}

/* The parameters of a multi-row statement (the writer's, one set kept in
 * struct pg): as struct params, only more. */
enum { MULTI_PARAMS = JOB_ROWS_MAX * (C_NCOLS + 3) };
/* The largest events' statement: its rows and the count of events. */
_Static_assert(EV_ROWS_MAX * 9 + 1 <= MULTI_PARAMS,
	       "the events' parameters fit in struct mparams");
struct mparams {
	const char *v[MULTI_PARAMS];
	char buf[MULTI_PARAMS][24];
	int n;
};

static void mp_str(struct mparams *p, const char *s)
{
	p->v[p->n++] = s;
}

static void mp_int(struct mparams *p, int64_t x)
{
	snprintf(p->buf[p->n], sizeof(p->buf[0]), "%lld", (long long)x);
	p->v[p->n] = p->buf[p->n];
	p->n++;
}

static void mp_time(struct mparams *p, int64_t t)
{
	if (t != 0)
		mp_int(p, t);
	else
		mp_str(p, NULL);
}

int store__pg_error(const PGresult *res, PGconn *pg)
{
	const char *state = res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	if (state == NULL)
		return pg != NULL && PQstatus(pg) != CONNECTION_OK ? -EIO : -EIO;
	if (strcmp(state, "40P01") == 0 || strcmp(state, "40001") == 0)
		return -EDEADLK; /* the store runs the batch again */
	if (strcmp(state, "53100") == 0)
		return -ENOSPC;
	if (strcmp(state, "53200") == 0)
		return -ENOMEM;
	if (strcmp(state, "53300") == 0 || strcmp(state, "55P03") == 0 ||
	    strcmp(state, "57014") == 0)
		return -EBUSY;
	if (strcmp(state, "25006") == 0)
		return -EROFS;
	if (strncmp(state, "28", 2) == 0 || strcmp(state, "42501") == 0)
		return -EACCES;
	if (strncmp(state, "22", 2) == 0 || strncmp(state, "23", 2) == 0)
		return -EINVAL;
	return -EIO;
}

/* ok returns 0 when res holds the status wanted, else the error (res is
 * cleared then). */
static int ok(PGconn *pg, PGresult *res, ExecStatusType want)
{
	if (res != NULL && PQresultStatus(res) == want)
		return 0;
	int rc = store__pg_error(res, pg);
	PQclear(res);
	return rc;
}

static PGresult *exec_piped(struct conn *c, int id, const char *sql,
			    int n, const char *const *v);

/* exec runs statement id on c with the parameters, preparing it on first
 * use. Returns the result (check with ok), or NULL. */
static PGresult *exec(struct conn *c, enum stmt_id id, const struct params *p)
{
	char name[16];
	if (c->pipeline)
		return exec_piped(c, id, sql_text[id], p != NULL ? p->n : 0,
				  p != NULL ? p->v : NULL);
	snprintf(name, sizeof(name), "b%d", (int)id);
	if (!c->prepared[id]) {
		PGresult *r = PQprepare(c->pg, name, sql_text[id], 0, NULL);
		bool good = r != NULL && PQresultStatus(r) == PGRES_COMMAND_OK;
		if (!good)
			return r; /* the error, checked by the caller */
		PQclear(r);
		c->prepared[id] = true;
	}
	return PQexecPrepared(c->pg, name, p != NULL ? p->n : 0,
			      p != NULL ? p->v : NULL, NULL, NULL, 0);
}

/* cmd runs id and returns 0 or an error, the result dropped; *changed (if
 * not NULL) receives the rows it changed. */
static int cmd(struct conn *c, enum stmt_id id, const struct params *p,
	       int64_t *changed)
{
	PGresult *r = exec(c, id, p);
	int rc = ok(c->pg, r, PGRES_COMMAND_OK);
	if (rc == 0 && PQresultStatus(r) != PGRES_COMMAND_OK)
		rc = -EIO;
	if (rc != 0)
		return rc;
	if (changed != NULL)
		*changed = strtoll(PQcmdTuples(r), NULL, 10);
	PQclear(r);
	return 0;
}

/* simple runs SQL of ours with no parameters. */
static int simple(PGconn *pg, const char *sql)
{
	PGresult *r = PQexec(pg, sql);
	ExecStatusType st = r != NULL ? PQresultStatus(r) : PGRES_FATAL_ERROR;
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
		PQclear(r);
		return 0;
	}
	int rc = store__pg_error(r, pg);
	PQclear(r);
	return rc;
}

static int64_t get_int(const PGresult *r, int row, int col)
{
	if (PQgetisnull(r, row, col))
		return 0;
	return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

static char *get_str(const PGresult *r, int row, int col, bool *oom)
{
	if (PQgetisnull(r, row, col))
		return NULL;
	char *d = strdup(PQgetvalue(r, row, col));
	if (d == NULL)
		*oom = true;
	return d;
}

static json_t *get_json(const PGresult *r, int row, int col)
{
	if (PQgetisnull(r, row, col))
		return NULL;
	return store_json_load(PQgetvalue(r, row, col),
			       (size_t)PQgetlength(r, row, col), JSON_DECODE_ANY,
			       NULL);
}

/* row_job returns a new job from the STORE__JOB_COLS of row, or NULL when out of
 * memory. */
static struct store_job *row_job(const PGresult *r, int row)
{
	struct store_job *j = calloc(1, sizeof(*j));
	if (j == NULL)
		return NULL;
	bool oom = false;
	snprintf(j->id, sizeof(j->id), "%s", PQgetvalue(r, row, C_ID));
	j->tool = get_str(r, row, C_TOOL, &oom);
	j->status = (int)get_int(r, row, C_STATUS);
	j->input = get_json(r, row, C_INPUT);
	j->request_context = get_json(r, row, C_REQUEST_CONTEXT);
	j->metadata = get_json(r, row, C_METADATA);
	j->run_id = get_str(r, row, C_RUN_ID, &oom);
	j->tool_call_id = get_str(r, row, C_TOOL_CALL_ID, &oom);
	j->idempotency_key = get_str(r, row, C_IDEMPOTENCY_KEY, &oom);
	j->priority = (int)get_int(r, row, C_PRIORITY);
	j->run_at = get_int(r, row, C_RUN_AT);
	j->attempt = (int)get_int(r, row, C_ATTEMPT);
	j->max_retries = (int)get_int(r, row, C_MAX_RETRIES);
	j->timeout_ms = get_int(r, row, C_TIMEOUT_MS);
	j->expires_at = get_int(r, row, C_EXPIRES_AT);
	j->ttl_ms = get_int(r, row, C_TTL_MS);
	j->output = get_json(r, row, C_OUTPUT);
	j->model_output = get_json(r, row, C_MODEL_OUTPUT);
	j->error = get_json(r, row, C_ERROR);
	j->suspend_payload = get_json(r, row, C_SUSPEND);
	j->resume_data = get_json(r, row, C_RESUME);
	j->checkpoint = get_json(r, row, C_CHECKPOINT);
	j->approval_required = get_int(r, row, C_APPROVAL_REQUIRED) != 0;
	j->decision = (int)get_int(r, row, C_DECISION);
	j->reason = get_str(r, row, C_REASON, &oom);
	j->decided_at = get_int(r, row, C_DECIDED_AT);
	j->progress = get_json(r, row, C_PROGRESS);
	j->retry_of = get_str(r, row, C_RETRY_OF, &oom);
	j->created_at = get_int(r, row, C_CREATED_AT);
	j->updated_at = get_int(r, row, C_UPDATED_AT);
	j->started_at = get_int(r, row, C_STARTED_AT);
	j->finished_at = get_int(r, row, C_FINISHED_AT);
	j->submitted_by = get_str(r, row, C_SUBMITTED_BY, &oom);
	j->submitted_via = get_str(r, row, C_SUBMITTED_VIA, &oom);
	j->decided_by = get_str(r, row, C_DECIDED_BY, &oom);
	j->decided_via = get_str(r, row, C_DECIDED_VIA, &oom);
	j->approvals = get_json(r, row, C_APPROVALS);
	j->quorum = (int)get_int(r, row, C_QUORUM);
	j->views = get_json(r, row, C_VIEWS);
	if (oom || j->tool == NULL) {
		store_job_free(j);
		return NULL;
	}
	return j;
}

/* job_by_id reads job id on c into *out (NULL when there is none). */
static int job_by_id(struct conn *c, const char *id, struct store_job **out)
{
	struct params p = {0};
	p_str(&p, id);
	PGresult *r = exec(c, S_JOB_GET, &p);
	int rc = ok(c->pg, r, PGRES_TUPLES_OK);
	*out = NULL;
	if (rc != 0)
		return rc;
	if (PQntuples(r) > 0 && (*out = row_job(r, 0)) == NULL)
		rc = -ENOMEM;
	PQclear(r);
	return rc;
}

/* text_array returns a malloc'd array literal ({"a","b"}) of the n
 * strings, quoted and escaped, or NULL when out of memory. */
static char *text_array(const char *const *v, size_t n)
{
	size_t len = 3;
	for (size_t i = 0; i < n; i++)
		len += 2 * strlen(v[i]) + 3;
	char *s = malloc(len), *o = s;
	if (s == NULL)
		return NULL;
	*o++ = '{';
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			*o++ = ',';
		*o++ = '"';
		for (const char *c = v[i]; *c != '\0'; c++) {
			if (*c == '"' || *c == '\\')
				*o++ = '\\';
			*o++ = *c;
		}
		*o++ = '"';
	}
	*o++ = '}';
	*o = '\0';
	return s;
}

/* lock_key returns the advisory lock key of name: FNV-1a, 64 bits. */
static int64_t lock_key(const char *kind, const char *name)
{
	uint64_t h = 14695981039346656037ull;
	for (const char *s = kind; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	h = (h ^ 0xff) * 1099511628211ull;
	for (const char *s = name; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return (int64_t)h;
}

/* ---- COPY text ---------------------------------------------------------- */

void store__buf_add(struct store__buf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->n + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (p == NULL) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

void store__copy_field(struct store__buf *b, const char *v, char sep)
{
	if (v == NULL) {
		store__buf_add(b, "\\N", 2);
	} else {
		const char *run = v;
		for (const char *c = v; *c != '\0'; c++) {
			const char *esc = NULL;
			switch (*c) {
			case '\\': esc = "\\\\"; break;
			case '\t': esc = "\\t"; break;
			case '\n': esc = "\\n"; break;
			case '\r': esc = "\\r"; break;
			default: break;
			}
			if (esc != NULL) {
				store__buf_add(b, run, (size_t)(c - run));
				store__buf_add(b, esc, 2);
				run = c + 1;
			}
		}
		store__buf_add(b, run, strlen(run));
	}
	store__buf_add(b, &sep, 1);
}

static void copy_int(struct store__buf *b, int64_t x, char sep)
{
	char s[24];
	snprintf(s, sizeof(s), "%lld", (long long)x);
	store__copy_field(b, s, sep);
}

int store__pg_copy_in(PGconn *pg, const char *sql, const struct store__buf *b)
{
	if (b->oom)
		return -ENOMEM;
	PGresult *r = PQexec(pg, sql);
	if (r == NULL || PQresultStatus(r) != PGRES_COPY_IN)
		return ok(pg, r, PGRES_COPY_IN) != 0 ? store__pg_error(NULL, pg) : -EIO;
	PQclear(r);
	int rc = 0;
	if (b->n > 0 && PQputCopyData(pg, b->p, (int)b->n) != 1)
		rc = -EIO;
	if (PQputCopyEnd(pg, rc != 0 ? "failed" : NULL) != 1 && rc == 0)
		rc = -EIO;
	while ((r = PQgetResult(pg)) != NULL) {
		if (PQresultStatus(r) != PGRES_COMMAND_OK && rc == 0)
			rc = store__pg_error(r, pg);
		PQclear(r);
	}
	return rc;
}

/*
 * flush_events gives the events from..n of b their seqs and writes them,
 * on a connection outside the pipeline (the reaper's): the counter row is
 * raised by their number (and stays locked to the commit), then they are
 * copied in. texts[i] is the data of event i. Returns 0 and sets *last
 * to the last seq, or an error.
 */
static int flush_events(struct conn *c, struct store__batch *b, size_t from,
			const char *const *texts, int64_t *last)
{
	size_t k = b->nevents - from;
	struct params p = {0};
	p_int(&p, (int64_t)k);
	PGresult *r = exec(c, S_SEQ_TAKE, &p);
	int rc = ok(c->pg, r, PGRES_TUPLES_OK);
	if (rc != 0)
		return rc;
	if (PQntuples(r) != 1) {
		PQclear(r);
		return -EIO;
	}
	*last = get_int(r, 0, 0);
	PQclear(r);

	struct store__buf out = {0};
	int64_t seq = *last - (int64_t)k;
	for (size_t i = from; i < b->nevents; i++) {
		struct store_event *ev = &b->events[i];
		ev->seq = ++seq;
		copy_int(&out, ev->seq, '\t');
		store__copy_field(&out, ev->job_id, '\t');
		store__copy_field(&out, ev->tool, '\t');
		copy_int(&out, ev->type, '\t');
		copy_int(&out, ev->status, '\t');
		copy_int(&out, ev->at, '\t');
		store__copy_field(&out, texts[i - from], '\t');
		store__copy_field(&out, ev->by, '\t');
		store__copy_field(&out, ev->via, '\t');
		/* Only an MCP client's events carry one: a small object,
		 * serialized here rather than kept beside every text. */
		char *client = ev->client != NULL ? store__json_text(ev->client)
						  : NULL;
		if (ev->client != NULL && client == NULL)
			out.oom = true;
		store__copy_field(&out, client, '\n');
		free(client);
	}
	rc = store__pg_copy_in(c->pg, "COPY events (seq, job_id, tool, type, status, at,"
			    " data, actor, via, client) FROM STDIN", &out);
	free(out.p);
	return rc;
}

/* commit_notify commits the transaction on pg, notifying the nodes of the
 * last seq when there were events (last > 0). The notification is
 * delivered with the commit, never before it. */
static int commit_notify(PGconn *pg, int64_t last)
{
	char sql[96];
	if (last > 0)
		snprintf(sql, sizeof(sql), "NOTIFY berth_events, '%lld'; COMMIT",
			 (long long)last);
	else
		snprintf(sql, sizeof(sql), "COMMIT");
	PGresult *r = PQexec(pg, sql);
	int rc = 0;
	/* A COMMIT of a failed transaction answers ROLLBACK, not an
	 * error: look at the command tag. */
	if (r == NULL || PQresultStatus(r) != PGRES_COMMAND_OK)
		rc = store__pg_error(r, pg);
	else if (strcmp(PQcmdStatus(r), "COMMIT") != 0)
		rc = -EIO;
	PQclear(r);
	return rc;
}

/* ---- connections -------------------------------------------------------- */

/* conn_check reconnects c when its connection was lost. */
static int conn_check(struct conn *c)
{
	if (PQstatus(c->pg) == CONNECTION_OK)
		return 0;
	PQreset(c->pg);
	memset(c->prepared, 0, sizeof(c->prepared));
	return PQstatus(c->pg) == CONNECTION_OK ? 0 : -EIO;
}

/* pg_message returns the first line of pg's last error. */
static const char *pg_message(PGconn *pg, char out[256])
{
	snprintf(out, 256, "%s", pg != NULL ? PQerrorMessage(pg) : "out of memory");
	out[strcspn(out, "\n")] = '\0';
	return out;
}

/* on_notice takes the server's notices ("relation ... already exists,
 * skipping", from the migrations' IF NOT EXISTS) into the debug log: libpq
 * would print them on stderr, outside the log's format. */
static void on_notice(void *arg, const char *message)
{
	(void)arg;
	log_debug("PostgreSQL: %.*s", (int)strcspn(message, "\n"), message);
}

/* Bounds on a server that vanished from the network, which the URL may
 * set otherwise (docs/POSTGRES.md): reads and reconnections run on the
 * loop thread, and libpq waits without end by default. A connection
 * attempt gives up after 10 s; data the server does not acknowledge
 * within 20 s, or an idle wait for an answer whose server stops
 * answering keepalives (10 s, then 3 probes 5 s apart), ends the
 * connection, which is then lost as at a restart of the server. */
static const char *const pg_keys[] = {
	"connect_timeout", "keepalives", "keepalives_idle",
	"keepalives_interval", "keepalives_count", "tcp_user_timeout",
	"dbname", NULL};

int store__pg_connect(const char *url, PGconn **out, char **errmsg)
{
	char why[256];
	/* The URL last: its own settings take the place of these. */
	const char *const values[] = {"10", "1", "10", "5", "3", "20000", url,
				      NULL};
	PGconn *pg = PQconnectdbParams(pg_keys, values, 1);
	*out = NULL;
	if (pg == NULL || PQstatus(pg) != CONNECTION_OK) {
		/* The URL may hold a password: name the server, not the URL. */
		store__set_msg(errmsg, "cannot connect to PostgreSQL: %s",
			pg_message(pg, why));
		PQfinish(pg);
		return -EIO;
	}
	PQsetNoticeProcessor(pg, on_notice, NULL);
	/* Times and texts are ours; the session must not reinterpret them. */
	if (simple(pg, "SET client_encoding = 'UTF8'") != 0 ||
	    simple(pg, "SET application_name = 'berthd'") != 0) {
		store__set_msg(errmsg, "cannot set up the PostgreSQL session: %s",
			pg_message(pg, why));
		PQfinish(pg);
		return -EIO;
	}
	*out = pg;
	return 0;
}

/* The key of the migration lock: nodes that start together migrate one at
 * a time. */
#define MIGRATE_KEY "7289543210123456789"

int store__pg_migrate(PGconn *pg, char **errmsg)
{
	const struct migration *m = migrations_postgres;
	size_t n = migrations_postgres_count;
	char why[256];
	int rc = simple(pg, "SELECT pg_advisory_lock(" MIGRATE_KEY ")");
	if (rc != 0) {
		store__set_msg(errmsg, "cannot lock the PostgreSQL database for migration: %s",
			pg_message(pg, why));
		return rc;
	}

	/* The version is read without writing anything, so that a newer
	 * schema is left untouched. */
	int version = 0;
	PGresult *r = PQexec(pg, "SELECT CASE WHEN to_regclass('berth_schema')"
				 " IS NULL THEN -1 END");
	rc = ok(pg, r, PGRES_TUPLES_OK);
	if (rc == 0) {
		bool absent = !PQgetisnull(r, 0, 0);
		PQclear(r);
		if (!absent) {
			r = PQexec(pg, "SELECT coalesce(max(version), 0) FROM berth_schema");
			if ((rc = ok(pg, r, PGRES_TUPLES_OK)) == 0) {
				version = (int)get_int(r, 0, 0);
				PQclear(r);
			}
		}
	}
	if (rc != 0) {
		store__set_msg(errmsg, "cannot read the PostgreSQL database's schema version: %s",
			pg_message(pg, why));
		goto out;
	}
	if (version < 0 || (size_t)version > n) {
		store__set_msg(errmsg,
			"the PostgreSQL database was written by a newer berth (schema version %d, this binary knows %zu); it was left untouched",
			version, n);
		rc = -EPROTO;
		goto out;
	}
	for (size_t i = (size_t)version; i < n; i++) {
		char bump[160];
		snprintf(bump, sizeof(bump),
			 "CREATE TABLE IF NOT EXISTS berth_schema (version INTEGER NOT NULL);"
			 " DELETE FROM berth_schema;"
			 " INSERT INTO berth_schema (version) VALUES (%d)",
			 m[i].version);
		if ((rc = simple(pg, "BEGIN")) == 0 && (rc = simple(pg, m[i].sql)) == 0 &&
		    (rc = simple(pg, bump)) == 0 && (rc = commit_notify(pg, 0)) == 0)
			continue;
		pg_message(pg, why);
		simple(pg, "ROLLBACK");
		store__set_msg(errmsg,
			"migration %04d_%s of the PostgreSQL database failed and was rolled back: %s",
			m[i].version, m[i].name, why);
		goto out;
	}
out:
	simple(pg, "SELECT pg_advisory_unlock(" MIGRATE_KEY ")");
	return rc;
}

/* ---- the writer's pipeline --------------------------------------------- */

/*
 * The writer's connection runs in libpq's pipeline mode: the statements of
 * a batch go out one after another without waiting for each answer, and
 * their results are read, in the order sent, at a sync point. A batch of
 * creations and ends of runs so costs two round trips whatever its size:
 * one for its statements, whose results decide its events, and one for
 * the events, the notification and the COMMIT. Requests that must see a
 * result before they go on (claims, logs, expiry, pauses, pruning) first
 * read what is in flight, then run their statements one round trip each
 * (exec_piped), as before.
 *
 * The connection is nonblocking: a batch may send megabytes (inputs,
 * outputs) while the server answers with rows, and a blocking write could
 * wait forever on a server that waits for its answers to be read. pump
 * reads what arrives while it waits to send.
 */

/* wait_io waits until pg's socket is readable (or, with out, writable)
 * and reads what arrived. Returns 0 or -EIO. */
static int wait_io(PGconn *pg, bool out)
{
	struct pollfd p = {PQsocket(pg), (short)(POLLIN | (out ? POLLOUT : 0)), 0};

	if (p.fd < 0)
		return -EIO;
	while (poll(&p, 1, -1) < 0)
		if (errno != EINTR)
			return -EIO;
	if ((p.revents & (POLLIN | POLLERR | POLLHUP)) && !PQconsumeInput(pg))
		return -EIO;
	return 0;
}

/* pump sends everything libpq holds for the server. */
static int pump(PGconn *pg)
{
	int f;
	while ((f = PQflush(pg)) == 1)
		if (wait_io(pg, true) != 0)
			return -EIO;
	return f == 0 ? 0 : -EIO;
}

/* next_result returns the next result of the pipeline, waiting for it;
 * NULL ends the results of one statement (or the connection was lost,
 * when *lost is set). */
static PGresult *next_result(PGconn *pg, bool *lost)
{
	while (PQisBusy(pg)) {
		if (pump(pg) != 0 || wait_io(pg, false) != 0) {
			*lost = true;
			return NULL;
		}
	}
	return PQgetResult(pg);
}

/* statement_result reads the results of one statement: the first (which
 * it returns, NULL when the connection was lost) and the NULL that ends
 * them. */
static PGresult *statement_result(PGconn *pg, bool *lost)
{
	PGresult *r = next_result(pg, lost), *x;
	if (r == NULL) {
		*lost = true;
		return NULL;
	}
	while ((x = next_result(pg, lost)) != NULL)
		PQclear(x);
	return r;
}

/* read_sync reads the end of a round trip. */
static int read_sync(PGconn *pg, bool *lost)
{
	PGresult *r = next_result(pg, lost);
	int rc = r != NULL && PQresultStatus(r) == PGRES_PIPELINE_SYNC ? 0 : -EIO;
	if (r == NULL)
		*lost = true;
	PQclear(r);
	return rc;
}

static void stmt_name(char name[16], int id)
{
	snprintf(name, 16, "b%d", id);
}

/* push records a statement sent; returns its index or -ENOMEM. */
static int push(struct pg *q, int kind, struct store__wreq *w, size_t first,
		size_t n)
{
	if (q->npend == q->cap_pend) {
		size_t cap = q->cap_pend ? q->cap_pend * 2 : 64;
		void *v = realloc(q->pend, cap * sizeof(*q->pend));
		if (v == NULL)
			return -ENOMEM;
		q->pend = v;
		q->cap_pend = cap;
	}
	q->pend[q->npend] = (struct pend){kind, 0, w, first, n};
	return (int)q->npend++;
}

/* send_stmt sends statement id (sql) with its parameters into the
 * pipeline, its preparation first when it is not prepared yet, and
 * records it as kind. Returns 0, -ENOMEM or -EIO (a connection that can
 * take nothing more). */
static int send_stmt(struct pg *q, int id, const char *sql, int n,
		     const char *const *v, int kind, struct store__wreq *w,
		     size_t first, size_t count)
{
	struct conn *c = &q->w;
	char name[16];
	int k;

	stmt_name(name, id);
	if (!c->prepared[id]) {
		if ((k = push(q, PK_PREPARE, NULL, 0, 0)) < 0)
			return k;
		q->pend[k].stmt = id;
		if (!PQsendPrepare(c->pg, name, sql, 0, NULL)) {
			q->npend--;
			return -EIO;
		}
		c->prepared[id] = true;
	}
	if ((k = push(q, kind, w, first, count)) < 0)
		return k;
	if (!PQsendQueryPrepared(c->pg, name, n, v, NULL, NULL, 0)) {
		q->npend--;
		return -EIO;
	}
	return 0;
}

/* send_params sends statement id of sql_text with p. */
static int send_params(struct pg *q, enum stmt_id id, const struct params *p,
		       int kind, struct store__wreq *w)
{
	return send_stmt(q, id, sql_text[id], p->n, p->v, kind, w, 0, 0);
}

/* send_simple sends SQL of ours that takes no parameter (BEGIN, COMMIT,
 * ROLLBACK), unprepared. */
static int send_simple(struct pg *q, const char *sql, int kind)
{
	int k = push(q, kind, NULL, 0, 0);
	if (k < 0)
		return k;
	if (!PQsendQueryParams(q->w.pg, sql, 0, NULL, NULL, NULL, NULL, 0)) {
		q->npend--;
		return -EIO;
	}
	return 0;
}

static int read_pend(struct pg *q, size_t i, PGresult *r);

/*
 * drain ends the round trip: it sends a sync point and reads the result
 * of every statement in flight, in order, settling each (read_pend),
 * until nothing is in flight; a result may send a statement that follows
 * it up (a conflict's job, a key's owner), which the next round trip
 * reads. After the first error the rest is read and dropped: the server
 * skips what follows a failed statement up to the sync point, and the
 * transaction can only roll back. Returns 0 or that error; -EIO when the
 * connection was lost (rollback resets it).
 */
static int drain(struct pg *q)
{
	PGconn *pg = q->w.pg;
	bool lost = false;
	int rc = 0;

	while (q->pend_head < q->npend) {
		size_t end = q->npend;
		if (push(q, PK_SYNC, NULL, 0, 0) < 0) {
			rc = -ENOMEM;
			lost = true; /* the stream cannot be followed */
			break;
		}
		if (!PQpipelineSync(pg) || pump(pg) != 0) {
			lost = true;
			break;
		}
		while (q->pend_head <= end) {
			size_t i = q->pend_head++;
			if (q->pend[i].kind == PK_SYNC) {
				if (read_sync(pg, &lost) != 0 && rc == 0)
					rc = -EIO;
				if (lost)
					break;
				continue;
			}
			PGresult *r = statement_result(pg, &lost);
			if (lost)
				break;
			ExecStatusType st = PQresultStatus(r);
			/* A preparation that failed, or that the server
			 * skipped after an error, is made again next time. */
			if (st != PGRES_COMMAND_OK && q->pend[i].kind == PK_PREPARE)
				q->w.prepared[q->pend[i].stmt] = false;
			if (rc == 0 && st == PGRES_FATAL_ERROR) {
				rc = store__pg_error(r, pg);
				q->failed_kind = q->pend[i].kind;
				/* exec_piped reports the first error, its
				 * own or what failed before it. */
				if (q->kept != NULL && *q->kept == NULL) {
					*q->kept = r;
					continue;
				}
			}
			if (q->pend[i].kind == PK_KEEP && q->kept != NULL) {
				if (*q->kept == NULL)
					*q->kept = r;
				else
					PQclear(r);
				continue;
			}
			if (rc == 0 && st != PGRES_FATAL_ERROR &&
			    st != PGRES_PIPELINE_ABORTED) {
				int x = read_pend(q, i, r);
				if (x != 0)
					rc = x;
			}
			PQclear(r);
		}
		if (lost)
			break;
	}
	if (lost) {
		/* What is still in flight is lost with the stream; rollback
		 * resets the connection. */
		for (size_t i = q->pend_head; i < q->npend; i++)
			if (q->pend[i].kind == PK_PREPARE)
				q->w.prepared[q->pend[i].stmt] = false;
		if (rc == 0)
			rc = -EIO;
		q->w.broken = true;
	}
	q->npend = q->pend_head = 0;
	return rc;
}

/* exec_piped runs a statement on the writer's pipelined connection and
 * returns its result (the caller checks it with ok): sent behind what is
 * in flight (the batch's BEGIN, its first statements), which the same
 * round trip settles. NULL when it could not be sent or read. */
static PGresult *exec_piped(struct conn *c, int id, const char *sql,
			    int n, const char *const *v)
{
	struct pg *q = (struct pg *)(void *)((char *)c - offsetof(struct pg, w));
	PGresult *r = NULL;

	q->kept = &r;
	int rc = send_stmt(q, id, sql, n, v, PK_KEEP, NULL, 0, 0);
	if (rc == 0)
		rc = drain(q);
	q->kept = NULL;
	if (rc != 0 && r != NULL && PQresultStatus(r) != PGRES_FATAL_ERROR) {
		/* Read, but the round trip failed after it (its sync): the
		 * caller must not go on as if it had. */
		PQclear(r);
		r = NULL;
	}
	return r;
}

/* ---- the writer's operations ------------------------------------------- */

/* add_event records an event of the current transaction, by who (NULL:
 * berthd) with its data's text and its MCP client's; it is written, with
 * its seq, just before the commit (send_events). */
static int add_event(struct pg *q, const char *job_id, const char *tool,
		     int type, int status, int64_t at, const char *text,
		     json_t *data, const struct store__who *who,
		     const char *client)
{
	struct store__batch *b = q->batch;
	if (b->nevents >= q->cap_texts) {
		size_t cap = q->cap_texts ? q->cap_texts * 2 : 64;
		while (cap <= b->nevents)
			cap *= 2;
		void *v = realloc(q->texts, cap * sizeof(*q->texts));
		if (v == NULL)
			return -ENOMEM;
		q->texts = v;
		v = realloc(q->clients, cap * sizeof(*q->clients));
		if (v == NULL)
			return -ENOMEM;
		q->clients = v;
		q->cap_texts = cap;
	}
	q->texts[b->nevents] = text;
	q->clients[b->nevents] = client;
	return store__batch_event(b, 0, job_id, tool, type, status, at, data,
				  who);
}

/* send_job_get sends, for w's conflict, the read of job id as it is now
 * (PK_JOB_GET). */
static int send_job_get(struct pg *q, struct store__wreq *w, const char *id)
{
	struct params p = {0};
	p_str(&p, id);
	return send_params(q, S_JOB_GET, &p, PK_JOB_GET, w);
}

/* The type of each parameter of a row of jobs_sql, in its order: the
 * columns of STORE__JOB_COLS, the lease, and whether the row starts its
 * job. */
static const char *const job_types[C_NCOLS + 3] = {
	[C_ID] = "text", [C_TOOL] = "text", [C_STATUS] = "int",
	[C_INPUT] = "text", [C_REQUEST_CONTEXT] = "text",
	[C_METADATA] = "text", [C_RUN_ID] = "text",
	[C_TOOL_CALL_ID] = "text", [C_IDEMPOTENCY_KEY] = "text",
	[C_PRIORITY] = "int", [C_RUN_AT] = "bigint", [C_ATTEMPT] = "int",
	[C_MAX_RETRIES] = "int", [C_TIMEOUT_MS] = "bigint",
	[C_EXPIRES_AT] = "bigint", [C_TTL_MS] = "bigint",
	[C_OUTPUT] = "text", [C_MODEL_OUTPUT] = "text", [C_ERROR] = "text",
	[C_SUSPEND] = "text", [C_RESUME] = "text", [C_CHECKPOINT] = "text",
	[C_APPROVAL_REQUIRED] = "int", [C_DECISION] = "int",
	[C_REASON] = "text", [C_DECIDED_AT] = "bigint",
	[C_PROGRESS] = "text", [C_RETRY_OF] = "text",
	[C_CREATED_AT] = "bigint", [C_UPDATED_AT] = "bigint",
	[C_STARTED_AT] = "bigint", [C_FINISHED_AT] = "bigint",
	[C_SUBMITTED_BY] = "text", [C_SUBMITTED_VIA] = "text",
	[C_DECIDED_BY] = "text", [C_DECIDED_VIA] = "text",
	[C_APPROVALS] = "text", [C_QUORUM] = "int", [C_VIEWS] = "text",
	[C_NCOLS] = "text", [C_NCOLS + 1] = "bigint", [C_NCOLS + 2] = "boolean",
};

/* The rows of the jobs' insert, padding left out (multi_sql), and the
 * test of a row that would start its job while its tool is paused. */
#define JOB_ROWS                                                              \
	") AS v (" STORE__JOB_COLS ", lease_owner, lease_until, st)"          \
	" WHERE v.id IS NOT NULL"
#define STARTS_PAUSED                                                         \
	"st AND EXISTS (SELECT 1 FROM tools WHERE name = v.tool AND"          \
	" paused <> 0)"

/* multi_sql returns the SQL of multi-row statement id (P_JOBS + k,
 * P_EVENTS + k, P_EVENTS_QUIET + k or P_JOBS_SURE + k), built once from
 * constants, or NULL when out of memory. */
static const char *multi_sql(struct pg *q, int id)
{
	char **slot = &q->multi_sql[id - P_JOBS];
	struct store__buf b = {0};
	bool sure = id >= P_JOBS_SURE;
	bool jobs = id < P_EVENTS || sure;
	bool quiet = !sure && id >= P_EVENTS_QUIET;
	int rows = 1 << (sure   ? id - P_JOBS_SURE
			 : jobs ? id - P_JOBS
				: (id - P_EVENTS) % EV_SIZES);
	int cols = jobs ? C_NCOLS + 3 : 9, n = 0;
	char t[64];

	if (*slot != NULL)
		return *slot;
	if (jobs) {
		/*
		 * A row that starts its job (created running, or in the
		 * state the run's end left it) is only written while its
		 * tool is not paused: on a shared database another node may
		 * have paused it since this node looked. The writer then
		 * writes the job as submitted instead (PK_CREATE_PENDING).
		 * ON CONFLICT DO NOTHING: a failed statement would abort
		 * the whole transaction, and with it the batch; an id given
		 * twice must only settle its own request.
		 */
		const char *head = "INSERT INTO jobs (" STORE__JOB_COLS
				   ", lease_owner, lease_until) SELECT "
				   STORE__JOB_COLS ", lease_owner, lease_until"
				   " FROM (VALUES ";
		/*
		 * The sure insert writes every row or fails: the batch's
		 * events and COMMIT follow it in the same round trip, and
		 * must not commit a creation it skipped. An id taken fails
		 * it (no ON CONFLICT), and so does a row that would start
		 * its job while its tool is paused: its status is NULL,
		 * which the column refuses. The batch is then tried again
		 * with the insert above (commit_at_once).
		 */
		const char *sure_head =
			"INSERT INTO jobs (" STORE__JOB_COLS
			", lease_owner, lease_until) SELECT id, tool, CASE WHEN "
			STARTS_PAUSED " THEN NULL ELSE status END"
			STORE__JOB_COLS_AFTER_STATUS
			", lease_owner, lease_until FROM (VALUES ";
		if (sure)
			head = sure_head;
		store__buf_add(&b, head, strlen(head));
	} else {
		/* The rows take the next seqs from the counter, which
		 * stays locked to the commit (the file's comment), and the
		 * nodes hear of them with the commit. The last parameter
		 * is the number of events: the rows after them are padding
		 * (send_events), all NULL, and take no seq. */
		int len = snprintf(t, sizeof(t), "$%d::bigint", rows * cols + 1);
		const char *h1 = "WITH s AS (UPDATE event_seq SET n = n + ";
		const char *h2 = " WHERE one = 1 RETURNING n), i AS (INSERT INTO"
				 " events (seq, job_id, tool, type, status, at,"
				 " data, actor, via, client) SELECT s.n - ";
		const char *h3 = " + v.o, v.j, v.t, v.y, v.st, v.a, v.d, v.b,"
				 " v.w, v.c FROM s, (VALUES ";
		store__buf_add(&b, h1, strlen(h1));
		store__buf_add(&b, t, (size_t)len);
		store__buf_add(&b, h2, strlen(h2));
		store__buf_add(&b, t, (size_t)len);
		store__buf_add(&b, h3, strlen(h3));
	}
	for (int r = 0; r < rows; r++) {
		store__buf_add(&b, r > 0 ? ", (" : "(", r > 0 ? 3 : 1);
		if (!jobs) {
			int len = snprintf(t, sizeof(t), "%d, ", r + 1);
			store__buf_add(&b, t, (size_t)len);
		}
		for (int c = 0; c < cols; c++) {
			static const char *const ev_types[9] = {
				"text", "text", "int", "int", "bigint",
				"text", "text", "text", "text",
			};
			int len = snprintf(t, sizeof(t), "%s$%d::%s",
					   c > 0 ? ", " : "", ++n,
					   jobs ? job_types[c] : ev_types[c]);
			store__buf_add(&b, t, (size_t)len);
		}
		store__buf_add(&b, ")", 1);
	}
	if (jobs) {
		const char *tail = JOB_ROWS " AND NOT (" STARTS_PAUSED ")"
				   " ON CONFLICT DO NOTHING RETURNING id";
		if (sure)
			tail = JOB_ROWS " RETURNING id";
		store__buf_add(&b, tail, strlen(tail));
	} else {
		const char *tail = quiet ? ") AS v (o, j, t, y, st, a, d, b,"
					   " w, c) WHERE v.j IS NOT NULL)"
					   " SELECT n FROM s"
				 : ") AS v (o, j, t, y, st, a, d, b, w, c)"
				   " WHERE v.j IS NOT NULL)"
				   " SELECT n, pg_notify('berth_events', n::text)"
				   " FROM s";
		store__buf_add(&b, tail, strlen(tail));
	}
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	*slot = b.p;
	return *slot;
}
/*
 * rows_k returns the k (below sizes) of the multi-row statement of 1 << k
 * rows to send next, with left > 0 rows to go: the smallest that holds
 * them all, or the largest. The rows it has beyond left are padding, all
 * NULL, which the statement skips (multi_sql). A statement costs the
 * server far more than a row of NULLs (its bind, the locks of its plan,
 * its executor's start with the check constraints and index predicates it
 * prepares anew, and an events' statement its notification), so 5 rows go
 * as one statement of 8, not as one of 4 and one of 1: about 1.2
 * statements a no-op job instead of 1.8, and a third less of the server's
 * CPU (docs/POSTGRES.md, "What a job costs").
 */
static int rows_k(size_t left, int sizes)
{
	int k = 0;
	while (k < sizes - 1 && (size_t)1 << k < left)
		k++;
	return k;
}

/* mp_pad adds the NULL parameters of rows of cols columns: padding. */
static void mp_pad(struct mparams *p, size_t rows, int cols)
{
	for (size_t r = 0; r < rows; r++)
		for (int c = 0; c < cols; c++)
			mp_str(p, NULL);
}

/* job_params adds the parameters of a row of the jobs' insert for w's
 * creation: the job as submitted; as a claim at its submission leaves it
 * (start: running under this node's lease); or as the run's end then
 * leaves it (the pair store_release prepared). */
static void job_params(struct pg *q, struct mparams *p,
		       const struct store__wreq *w,
		       const struct store__wreq *then, bool start)
{
	const struct store_job *j = then != NULL ? then->job : w->job;
	bool running = start && then == NULL;
	const char *t[STORE__T_COUNT];

	store__final_texts(w, then, t);
	mp_str(p, j->id);
	mp_str(p, j->tool);
	mp_int(p, running ? STORE_RUNNING : j->status);
	mp_str(p, t[STORE__T_INPUT]);
	mp_str(p, t[STORE__T_REQUEST_CONTEXT]);
	mp_str(p, t[STORE__T_METADATA]);
	mp_str(p, j->run_id);
	mp_str(p, j->tool_call_id);
	mp_str(p, j->idempotency_key);
	mp_int(p, j->priority);
	mp_int(p, j->run_at);
	mp_int(p, j->attempt > 0 ? j->attempt : 1);
	mp_int(p, j->max_retries);
	mp_time(p, j->timeout_ms);
	mp_time(p, j->expires_at);
	mp_time(p, j->ttl_ms);
	mp_str(p, t[STORE__T_OUTPUT]);
	mp_str(p, t[STORE__T_MODEL_OUTPUT]);
	mp_str(p, t[STORE__T_ERROR]);
	mp_str(p, t[STORE__T_SUSPEND]);
	mp_str(p, t[STORE__T_RESUME]);
	mp_str(p, t[STORE__T_CHECKPOINT]);
	mp_int(p, j->approval_required);
	mp_int(p, j->decision);
	mp_str(p, j->reason);
	mp_time(p, j->decided_at);
	mp_str(p, t[STORE__T_PROGRESS]);
	mp_str(p, j->retry_of);
	mp_int(p, j->created_at);
	mp_int(p, j->updated_at);
	mp_time(p, running ? j->created_at : j->started_at);
	mp_time(p, j->finished_at);
	mp_str(p, j->submitted_by);
	mp_str(p, j->submitted_via);
	mp_str(p, j->decided_by);
	mp_str(p, j->decided_via);
	mp_str(p, t[STORE__T_APPROVALS]);
	if (j->quorum > 0)
		mp_int(p, j->quorum);
	else
		mp_str(p, NULL);
	mp_str(p, t[STORE__T_VIEWS]);
	mp_str(p, running ? q->node : NULL);
	mp_time(p, running ? j->created_at + q->lease_ms : 0);
	mp_str(p, start || then != NULL ? "t" : "f");
}

/* add_sent records a creation sent (and the run's end it absorbed);
 * returns its index or -ENOMEM. */
static int add_sent(struct pg *q, struct store__wreq *w, struct store__wreq *then)
{
	if (q->nsent == q->cap_sent) {
		size_t cap = q->cap_sent ? q->cap_sent * 2 : 64;
		void *v = realloc(q->sent, cap * sizeof(*q->sent));
		if (v == NULL)
			return -ENOMEM;
		q->sent = v;
		q->cap_sent = cap;
	}
	q->sent[q->nsent] = (struct sent){w, then};
	return (int)q->nsent++;
}

/* send_creates sends the creations held back by pg_apply, in order, as
 * few multi-row INSERTs (PK_CREATES; sure: the inserts that write every
 * row or fail, PK_CREATES_SURE). One statement of n rows costs the server
 * much less than n statements. */
static int send_creates(struct pg *q, bool sure)
{
	int base = sure ? P_JOBS_SURE : P_JOBS;
	size_t i = 0;
	while (i < q->nheld) {
		int k = rows_k(q->nheld - i, JOB_SIZES);
		size_t size = (size_t)1 << k, first = q->nsent;
		size_t rows = size < q->nheld - i ? size : q->nheld - i;
		const char *sql = multi_sql(q, base + k);
		if (sql == NULL)
			return -ENOMEM;
		q->mp->n = 0;
		for (size_t r = 0; r < rows; r++) {
			struct store__wreq *w = q->held[i + r];
			if (add_sent(q, w, q->held_then[i + r]) < 0)
				return -ENOMEM;
			job_params(q, q->mp, w, q->held_then[i + r],
				   w->req->u.create.start);
		}
		mp_pad(q->mp, size - rows, C_NCOLS + 3);
		int rc = send_stmt(q, base + k, sql, q->mp->n, q->mp->v,
				   sure ? PK_CREATES_SURE : PK_CREATES, NULL,
				   first, rows);
		if (rc != 0)
			return rc;
		i += rows;
	}
	q->nheld = 0;
	return 0;
}

/* send_create_one sends the creation sent[i] alone, as submitted: a
 * creation with an idempotency key (PK_CREATE_KEY), or one that was to
 * start and was not written (PK_CREATE_PENDING). */
static int send_create_one(struct pg *q, size_t i, int kind)
{
	const char *sql = multi_sql(q, P_JOBS);
	if (sql == NULL)
		return -ENOMEM;
	q->mp->n = 0;
	job_params(q, q->mp, q->sent[i].w, NULL, false);
	return send_stmt(q, P_JOBS, sql, q->mp->n, q->mp->v, kind,
			 q->sent[i].w, i, 1);
}

/* created appends the events of w's creation, now written: created,
 * approval_requested when it awaits approval, started when it was
 * claimed at its submission. */
static int created(struct pg *q, struct store__wreq *w, bool start)
{
	const struct store_req *req = w->req;
	const struct store_job *j = req->u.create.job;
	char **t = w->text;
	json_t *data = req->u.create.event_data;
	/* The creation's events are its submitter's, or its creator's (a
	 * retry); a start at submission is berthd's. */
	struct store__who who = {
		req->u.create.by ? req->u.create.by : j->submitted_by,
		req->u.create.by ? req->u.create.via : j->submitted_via,
		req->u.create.client};
	int rc = add_event(q, j->id, j->tool, STORE_EV_CREATED, j->status,
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
		rc = add_event(q, j->id, j->tool, STORE_EV_APPROVAL_REQUESTED,
			       j->status, w->created_at, atext, adata, &who,
			       t[STORE__T_CLIENT]);
	}
	if (rc == 0 && start)
		rc = add_event(q, j->id, j->tool, STORE_EV_STARTED,
			       STORE_RUNNING, w->created_at, NULL, NULL, NULL,
			       NULL);
	w->rc = 0;
	return rc;
}

/* settle_then settles the run's end then that a creation absorbed, now
 * written in then's final state: its event follows the creation's. */
static int settle_then(struct pg *q, struct store__wreq *then)
{
	const struct store_transition *tr = &then->req->u.transition;
	struct store__who who = {tr->by, tr->via, tr->client};
	then->absorbed = true;
	then->rc = 0;
	return add_event(q, then->job->id, then->job->tool, tr->event, tr->to,
			 then->job->updated_at, then->text[STORE__T_EVENT],
			 tr->event_data, &who, then->text[STORE__T_CLIENT]);
}

/* written settles a creation its insert wrote, and the run's end then
 * (or NULL) it absorbed. */
static int written(struct pg *q, struct store__wreq *w,
		   struct store__wreq *then)
{
	int rc = created(q, w, w->req->u.create.start);
	return rc == 0 && then != NULL ? settle_then(q, then) : rc;
}

/* send_transition sends w's compare-and-set (PK_TRANSITION). */
static int send_transition(struct pg *q, struct store__wreq *w)
{
	const struct store_transition *tr = &w->req->u.transition;
	char **t = w->text;
	int64_t now = store_now();
	struct params p = {0};
	p_str(&p, tr->job_id);
	p_int(&p, tr->from_mask);
	p_int(&p, tr->to);
	p_int(&p, now);
	p_int(&p, tr->set);
	p_int(&p, tr->run_at != 0 ? tr->run_at : now);
	p_int(&p, tr->attempt);
	p_str(&p, t[STORE__T_OUTPUT]);
	p_str(&p, t[STORE__T_MODEL_OUTPUT]);
	p_str(&p, t[STORE__T_ERROR]);
	p_str(&p, t[STORE__T_SUSPEND]);
	p_str(&p, t[STORE__T_RESUME]);
	p_str(&p, t[STORE__T_CHECKPOINT]);
	p_int(&p, tr->decision);
	p_str(&p, tr->reason);
	p_time(&p, tr->expires_at);
	p_str(&p, t[STORE__T_PROGRESS]);
	p_str(&p, q->node);
	p_int(&p, q->lease_ms);
	p_str(&p, tr->by ? tr->by : STORE_BERTHD);
	p_str(&p, tr->via ? tr->via : STORE_BERTHD);
	p_str(&p, t[STORE__T_APPROVALS]);
	p_int(&p, tr->quorum);
	p_int(&p, tr->approvals_had);
	p_str(&p, t[STORE__T_VIEWS]);
	p_int(&p, tr->run_attempt);
	return send_params(q, S_TRANSITION, &p, PK_TRANSITION, w);
}

/* claim_order sorts claimed jobs as the scheduler reads them
 * (store__scheduler_order). */
static int claim_order(const void *a, const void *b)
{
	const struct store_job *x = *(const struct store_job *const *)a;
	const struct store_job *y = *(const struct store_job *const *)b;
	return store__scheduler_order(x->priority, x->run_at, x->id,
				      y->priority, y->run_at, y->id);
}

/* has_row tells whether the jobs' insert r wrote the job id. */
static bool has_row(const PGresult *r, const char *id)
{
	for (int row = 0; row < PQntuples(r); row++)
		if (strcmp(PQgetvalue(r, row, 0), id) == 0)
			return true;
	return false;
}

/*
 * read_pend settles statement q->pend[i] from its result r (which the
 * caller clears): results into its request, events into the batch (in
 * the order the statements were sent, so in the order of the requests),
 * and follow-up statements into the pipeline. Returns 0 or an error,
 * which fails the transaction.
 */
static int read_pend(struct pg *q, size_t i, PGresult *r)
{
	struct pend pe = q->pend[i]; /* a follow-up may move the array */
	struct store__wreq *w = pe.w;
	int rc = 0;

	switch (pe.kind) {
	case PK_CREATES:
		for (size_t k = 0; rc == 0 && k < pe.n; k++) {
			struct sent *sn = &q->sent[pe.first + k];
			struct store__wreq *cw = sn->w;
			if (has_row(r, cw->req->u.create.job->id)) {
				rc = written(q, cw, sn->then);
			} else if (cw->req->u.create.start) {
				/* Its tool was paused on another node, or
				 * the id is taken: written as submitted. */
				rc = send_create_one(q, pe.first + k,
						     PK_CREATE_PENDING);
			} else {
				cw->rc = -EEXIST;
			}
		}
		return rc;
	case PK_CREATES_SURE:
		/* Every row, or the statement failed (multi_sql). */
		return PQntuples(r) == (int)pe.n ? 0 : -EIO;
	case PK_CREATE_PENDING: {
		struct sent sn = q->sent[pe.first];
		if (PQntuples(r) > 0)
			rc = created(q, sn.w, false);
		else
			sn.w->rc = -EEXIST;
		/* The run's end meets the job as it is: a conflict. */
		if (rc == 0 && sn.then != NULL)
			rc = send_transition(q, sn.then);
		return rc;
	}
	case PK_CREATE_KEY:
		if (PQntuples(r) > 0)
			return created(q, w, false);
		/* Its key names a job already (perhaps another node's,
		 * committed while this insert waited for it), or its id is
		 * taken. */
		{
			const struct store_job *j = w->req->u.create.job;
			struct params p = {0};
			p_str(&p, j->tool);
			p_str(&p, j->idempotency_key);
			return send_params(q, S_JOB_BY_KEY, &p, PK_KEY_FIND, w);
		}
	case PK_KEY_FIND:
		if (PQntuples(r) == 0) {
			w->rc = -EEXIST;
			return 0;
		}
		if ((w->req->job = row_job(r, 0)) == NULL)
			return -ENOMEM;
		w->req->existed = true;
		w->rc = 0;
		return 0;
	case PK_TRANSITION: {
		const struct store_transition *tr = &w->req->u.transition;
		if (PQntuples(r) == 0)
			return send_job_get(q, w, tr->job_id);
		struct store_job *j = row_job(r, 0);
		if (j == NULL)
			return -ENOMEM;
		w->req->job = j;
		w->rc = 0;
		struct store__who who = {tr->by, tr->via, tr->client};
		return add_event(q, j->id, j->tool, tr->event, tr->to,
				 j->updated_at, w->text[STORE__T_EVENT],
				 tr->event_data, &who, w->text[STORE__T_CLIENT]);
	}
	case PK_JOB_GET:
		if (PQntuples(r) == 0) {
			w->rc = STORE_ENOTFOUND;
			return 0;
		}
		if ((w->req->job = row_job(r, 0)) == NULL)
			return -ENOMEM;
		w->rc = STORE_ECONFLICT;
		return 0;
	case PK_CHANGED:
		if (strtoll(PQcmdTuples(r), NULL, 10) > 0) {
			w->rc = 0;
			return 0;
		}
		return send_job_get(q, w, w->req->op == STORE_OP_CHECKPOINT
						  ? w->req->u.checkpoint.job_id
						  : w->req->u.progress.job_id);
	case PK_PROC:
	case PK_DEFINE:
		w->rc = 0;
		return 0;
	case PK_CLAIM: {
		struct store_req *req = w->req;
		int rows = PQntuples(r);
		if (rows == 0)
			return 0;
		if ((req->jobs = calloc((size_t)rows, sizeof(*req->jobs))) == NULL)
			return -ENOMEM;
		for (int row = 0; row < rows; row++) {
			if ((req->jobs[row] = row_job(r, row)) == NULL)
				return -ENOMEM;
			req->njobs++;
		}
		qsort(req->jobs, req->njobs, sizeof(*req->jobs), claim_order);
		for (size_t k = 0; rc == 0 && k < req->njobs; k++) {
			const struct store_job *j = req->jobs[k];
			rc = add_event(q, j->id, j->tool, STORE_EV_STARTED,
				       j->status, j->started_at, NULL, NULL,
				       NULL, NULL);
		}
		return rc;
	}
	case PK_CLAIM_NEXT:
		w->req->next_run_at = PQntuples(r) > 0 ? get_int(r, 0, 0) : 0;
		return 0;
	case PK_EVENTS: {
		if (PQntuples(r) != 1)
			return -EIO;
		int64_t seq = get_int(r, 0, 0) - (int64_t)pe.n;
		for (size_t k = 0; k < pe.n; k++)
			q->batch->events[pe.first + k].seq = ++seq;
		return 0;
	}
	case PK_COMMIT:
		/* A COMMIT of a failed transaction answers ROLLBACK, not
		 * an error: look at the command tag. */
		return strcmp(PQcmdStatus(r), "COMMIT") == 0 ? 0 : -EIO;
	default: /* PK_PREPARE, PK_CHECK */
		return 0;
	}
}

/* How long a node counts as there after the listener last heard it. Each
 * node says hello on every tick (at most 1 s apart, pg_tick), so a node
 * that stopped saying it stopped. */
#define PEER_FRESH_MS 5000

/*
 * peers_seen is true while another node may be listening. A notification
 * costs the server a queue entry, a signal to every listening backend,
 * and those backends' reads, and with one node its only listener is the
 * node's own, which skips it: on one node that was 7 % of the server's
 * CPU (docs/POSTGRES.md). So the writer notifies only while the listener
 * has heard another node within PEER_FRESH_MS; a node that starts says
 * hello at once (listen_setup), and a node that hears one after a quiet
 * spell answers it (pg_notified), so both notify from then on. What a
 * node commits before it hears a newcomer reaches the newcomer at the
 * newcomer's next tick or the node's next notification, whichever comes
 * first (catch_up reads every event after the last one delivered).
 */
static bool peers_seen(struct pg *q)
{
	int64_t seen = atomic_load(&q->peer_seen);
	return seen > 0 && store_now() - seen < PEER_FRESH_MS;
}

/* send_events sends the events of the transaction, in the order they
 * were appended, as few multi-row INSERTs, each taking its seqs from the
 * counter and notifying the nodes while there are others (PK_EVENTS). */
static int send_events(struct pg *q)
{
	const struct store__batch *b = q->batch;
	int base = peers_seen(q) ? P_EVENTS : P_EVENTS_QUIET;
	size_t i = 0;
	while (i < b->nevents) {
		int k = rows_k(b->nevents - i, EV_SIZES);
		size_t size = (size_t)1 << k;
		size_t rows = size < b->nevents - i ? size : b->nevents - i;
		const char *sql = multi_sql(q, base + k);
		if (sql == NULL)
			return -ENOMEM;
		q->mp->n = 0;
		for (size_t r = 0; r < rows; r++) {
			const struct store_event *ev = &b->events[i + r];
			mp_str(q->mp, ev->job_id);
			mp_str(q->mp, ev->tool);
			mp_int(q->mp, ev->type);
			mp_int(q->mp, ev->status);
			mp_int(q->mp, ev->at);
			mp_str(q->mp, q->texts[i + r]);
			mp_str(q->mp, ev->by);
			mp_str(q->mp, ev->via);
			mp_str(q->mp, q->clients[i + r]);
		}
		mp_pad(q->mp, size - rows, 9);
		mp_int(q->mp, (int64_t)rows);
		int rc = send_stmt(q, base + k, sql, q->mp->n, q->mp->v,
				   PK_EVENTS, NULL, i, rows);
		if (rc != 0)
			return rc;
		i += rows;
	}
	return 0;
}

/* absorb gives a run's end prepared at store_release (absorb_into) to its
 * creation while that is still held, to be written with it as one row;
 * returns false when the creation went out already. */
static bool absorb(struct pg *q, struct store__wreq *w)
{
	for (size_t i = q->nheld; i-- > 0;) {
		if (q->held[i] != w->absorb_into)
			continue;
		if (q->held_then[i] != NULL)
			return false;
		q->held_then[i] = w;
		return true;
	}
	return false;
}

static int cmp_key(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * take_locks takes, at the start of a transaction whose batch holds
 * claims with cluster-wide limits, the advisory locks of those limits:
 * one per limited tool and one for the global limit, sorted. Taking them
 * before any row lock of the batch, in one order on every node, keeps two
 * nodes' batches from deadlocking on them.
 */
static int take_locks(struct pg *q, struct store__batch *b)
{
	size_t n = 0, cap = 0;
	int64_t *keys = NULL;
	int rc = 0;
	for (struct store__wreq *w = b->head; w != NULL; w = w->next) {
		const struct store_req *req = w->req;
		if (req->op != STORE_OP_CLAIM)
			continue;
		size_t need = n + req->u.claim.ncaps + 1;
		if (need > cap) {
			cap = need * 2;
			void *v = realloc(keys, cap * sizeof(*keys));
			if (v == NULL) {
				free(keys);
				return -ENOMEM;
			}
			keys = v;
		}
		if (req->u.claim.global_limit > 0)
			keys[n++] = lock_key("global", "");
		for (size_t i = 0; i < req->u.claim.ncaps; i++)
			if (req->u.claim.caps[i].limit > 0)
				keys[n++] = lock_key("tool", req->u.claim.caps[i].tool);
	}
	if (n > 0) {
		qsort(keys, n, sizeof(*keys), cmp_key);
		struct store__buf lit = {0};
		store__buf_add(&lit, "{", 1);
		for (size_t i = 0; i < n; i++) {
			if (i > 0 && keys[i] == keys[i - 1])
				continue;
			char s[32];
			int len = snprintf(s, sizeof(s), "%s%lld", lit.n > 1 ? "," : "",
					   (long long)keys[i]);
			store__buf_add(&lit, s, (size_t)len);
		}
		store__buf_add(&lit, "}", 1);
		if (lit.oom) {
			rc = -ENOMEM;
		} else if ((rc = drain(q)) == 0) {
			struct params p = {0};
			p_str(&p, lit.p);
			PGresult *r = exec(&q->w, S_LOCKS, &p);
			if ((rc = ok(q->w.pg, r, PGRES_TUPLES_OK)) == 0)
				PQclear(r);
		}
		free(lit.p);
	}
	free(keys);
	q->locked = true;
	return rc;
}

/* allowance fills left[i] with how many jobs of caps[i] may be claimed and
 * *global with how many jobs in all (INT32_MAX for no limit), from the
 * remaining counts and the running jobs counted in the database. */
static int allowance(struct conn *c, const struct store_req *req, int *left,
		     int *global)
{
	const struct store_cap *caps = req->u.claim.caps;
	size_t ncaps = req->u.claim.ncaps;
	const char **limited = calloc(ncaps + 1, sizeof(*limited));
	size_t nl = 0;
	int rc = 0;
	if (limited == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < ncaps; i++) {
		left[i] = caps[i].remaining;
		if (caps[i].limit > 0) {
			if (left[i] > caps[i].limit)
				left[i] = caps[i].limit;
			limited[nl++] = caps[i].tool;
		}
	}
	if (nl > 0) {
		char *lit = text_array(limited, nl);
		struct params p = {0};
		PGresult *r = NULL;
		if (lit == NULL) {
			rc = -ENOMEM;
		} else {
			p_str(&p, lit);
			r = exec(c, S_RUNNING_TOOLS, &p);
			rc = ok(c->pg, r, PGRES_TUPLES_OK);
		}
		for (int row = 0; rc == 0 && row < PQntuples(r); row++) {
			const char *tool = PQgetvalue(r, row, 0);
			int64_t running = get_int(r, row, 1);
			for (size_t i = 0; i < ncaps; i++) {
				if (caps[i].limit > 0 && strcmp(caps[i].tool, tool) == 0) {
					int64_t room = caps[i].limit - running;
					if (room < left[i])
						left[i] = room > 0 ? (int)room : 0;
				}
			}
		}
		if (rc == 0)
			PQclear(r);
		free(lit);
	}
	free(limited);
	*global = INT32_MAX;
	if (rc == 0 && req->u.claim.global_limit > 0) {
		PGresult *r = exec(c, S_RUNNING_ALL, NULL);
		if ((rc = ok(c->pg, r, PGRES_TUPLES_OK)) == 0) {
			int64_t room = req->u.claim.global_limit - get_int(r, 0, 0);
			*global = room > 0 ? (int)room : 0;
			PQclear(r);
		}
	}
	return rc;
}

/* A growing list of strings (borrowed or owned, as the user says). */
struct strs {
	const char **v;
	size_t n, cap;
};

static int strs_push(struct strs *s, const char *v)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		void *nv = realloc(s->v, cap * sizeof(*s->v));
		if (nv == NULL)
			return -ENOMEM;
		s->v = nv;
		s->cap = cap;
	}
	s->v[s->n++] = v;
	return 0;
}

static void strs_free_all(struct strs *s)
{
	for (size_t i = 0; i < s->n; i++)
		free((char *)s->v[i]);
	free(s->v);
	s->v = NULL;
	s->n = s->cap = 0;
}

/* take moves the picked jobs to running with this node's lease and
 * appends them to req->jobs, in the order picked, with their events. */
static int take(struct pg *q, struct store_req *req, struct strs *picked,
		int64_t now)
{
	struct conn *c = &q->w;
	char *ids = text_array(picked->v, picked->n);
	if (ids == NULL)
		return -ENOMEM;
	struct params p = {0};
	p_str(&p, ids);
	p_int(&p, now);
	p_str(&p, q->node);
	p_int(&p, q->lease_ms);
	PGresult *r = exec(c, S_CLAIM_TAKE, &p);
	free(ids);
	int rc = ok(c->pg, r, PGRES_TUPLES_OK);
	if (rc != 0)
		return rc;
	int rows = PQntuples(r);
	void *v = realloc(req->jobs, (req->njobs + (size_t)rows + 1) * sizeof(*req->jobs));
	if (v == NULL) {
		PQclear(r);
		return -ENOMEM;
	}
	req->jobs = v;
	/* In the order they were picked (UPDATE returns rows in any order). */
	for (size_t i = 0; rc == 0 && i < picked->n; i++) {
		for (int row = 0; row < rows; row++) {
			if (strcmp(PQgetvalue(r, row, C_ID), picked->v[i]) != 0)
				continue;
			struct store_job *j = row_job(r, row);
			if (j == NULL) {
				rc = -ENOMEM;
				break;
			}
			req->jobs[req->njobs++] = j;
			rc = add_event(q, j->id, j->tool, STORE_EV_STARTED,
				       j->status, now, NULL, NULL, NULL, NULL);
			break;
		}
	}
	PQclear(r);
	return rc;
}

/* next_run_at sets req->next_run_at (store.h) once the claim has picked
 * its jobs: left[i] is what is left of caps[i], after the cluster's
 * running jobs were counted. Returns 0 or a negative code. */
static int next_run_at(struct conn *c, struct store_req *req, int64_t now,
		       const int *left, int pool_left)
{
	struct strs out = {0};
	int rc = 0;

	req->next_run_at = 0;
	for (size_t i = 0; i < req->u.claim.ncaps; i++)
		if ((left[i] <= 0 || (req->u.claim.caps[i].pool && pool_left <= 0)) &&
		    (rc = strs_push(&out, req->u.claim.caps[i].tool)) != 0)
			break;
	char *lit = rc == 0 ? text_array(out.v, out.n) : NULL;
	free(out.v);
	if (lit == NULL)
		return -ENOMEM;
	struct params p = {0};
	p_int(&p, now);
	p_str(&p, lit);
	PGresult *r = exec(c, S_CLAIM_NEXT, &p);
	free(lit);
	if ((rc = ok(c->pg, r, PGRES_TUPLES_OK)) != 0)
		return rc;
	if (PQntuples(r) > 0)
		req->next_run_at = get_int(r, 0, 0);
	PQclear(r);
	return 0;
}

/* piped_claim tells whether w's claim can be one statement in the
 * pipeline: it counts no jobs (no cluster-wide limit, and every cap only
 * excludes its tool). */
static bool piped_claim(const struct store_req *req)
{
	if (req->u.claim.global_limit > 0)
		return false;
	for (size_t i = 0; i < req->u.claim.ncaps; i++) {
		const struct store_cap *cap = &req->u.claim.caps[i];
		bool group_spent = cap->group < 0 ||
				   (size_t)cap->group > req->u.claim.ngroups ||
				   (cap->group > 0 &&
				    req->u.claim.groups[cap->group - 1] <= 0);
		if (cap->limit > 0 ||
		    (cap->remaining > 0 && !group_spent &&
		     !(cap->pool && req->u.claim.pool_remaining <= 0)))
			return false;
	}
	return true;
}

/* send_claim sends a claim that piped_claim allows as one statement
 * (PK_CLAIM) with the query of its next run_at (PK_CLAIM_NEXT): no round
 * trip of its own. */
static int send_claim(struct pg *q, struct store__wreq *w)
{
	const struct store_req *req = w->req;
	int64_t now = req->u.claim.now != 0 ? req->u.claim.now : store_now();
	const char **excluded = calloc(req->u.claim.ncaps + 1, sizeof(*excluded));
	char *lit = NULL;
	int rc;

	if (excluded == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < req->u.claim.ncaps; i++)
		excluded[i] = req->u.claim.caps[i].tool;
	lit = text_array(excluded, req->u.claim.ncaps);
	free(excluded);
	if (lit == NULL)
		return -ENOMEM;
	w->rc = 0;
	struct params p = {0};
	p_int(&p, now);
	p_str(&p, lit);
	p_int(&p, req->u.claim.limit);
	p_str(&p, q->node);
	p_int(&p, q->lease_ms);
	rc = req->u.claim.limit > 0 ? send_params(q, S_CLAIM_ALL, &p, PK_CLAIM, w)
				    : 0;
	if (rc == 0) {
		struct params np = {0};
		p_int(&np, now);
		p_str(&np, lit);
		rc = send_params(q, S_CLAIM_NEXT, &np, PK_CLAIM_NEXT, w);
	}
	free(lit);
	return rc;
}

/*
 * do_claim picks the jobs to claim with FOR UPDATE SKIP LOCKED, in the
 * order of priority, run_at and id, skipping tools whose allowance is
 * spent and the jobs of a spent group (store.h), and moves them to
 * running with this node's lease. Rows skipped for a spent tool or group
 * may hide runnable jobs of other tools further down, so the scan is
 * repeated without the spent tools (and, once the claim's limit is spent,
 * with only the tools of groups that have room): at most once more per
 * limited tool or group. Jobs taken are running by then, so no scan sees
 * them twice.
 */
static int do_claim(struct pg *q, struct store__wreq *w)
{
	struct conn *c = &q->w;
	struct store_req *req = w->req;
	size_t ncaps = req->u.claim.ncaps, ngroups = req->u.claim.ngroups;
	int64_t now = req->u.claim.now != 0 ? req->u.claim.now : store_now();
	struct strs picked = {0}, out = {0}, only = {0};
	int *left = NULL, global = 0, rc = 0, slots, room;
	int pool_left = req->u.claim.pool_remaining;

	w->rc = 0;
	/* slots: what is left of limit, the room of the caps of no group;
	 * room: of the whole claim; pool_left: of the threads the caps
	 * marked pool take besides (store.h). */
	slots = req->u.claim.limit > 0 ? req->u.claim.limit : 0;
	room = slots;
	for (size_t g = 0; g < ngroups; g++)
		room += req->u.claim.groups[g] > 0 ? req->u.claim.groups[g] : 0;
	if (room <= 0)
		return 0;
	/* left[i] is what is left of caps[i], then, from ncaps on, of each
	 * group. */
	if ((left = calloc(ncaps + ngroups + 1, sizeof(*left))) == NULL)
		return -ENOMEM;
	if ((rc = allowance(c, req, left, &global)) != 0)
		goto done;
	for (size_t g = 0; g < ngroups; g++)
		left[ncaps + g] = req->u.claim.groups[g];
	/* The cluster-wide bound counts every running job, a worker
	 * process's too: it caps the claim's pool slots and the whole claim
	 * alike. */
	if (global < slots)
		slots = global;
	if (global < room)
		room = global;

	while (room > 0) {
		int want = room;
		out.n = only.n = 0;
		for (size_t i = 0; i < ncaps; i++) {
			const struct store_cap *cap = &req->u.claim.caps[i];
			int g = cap->group;
			bool spent = left[i] <= 0 || (cap->pool && pool_left <= 0) ||
				     g < 0 || (size_t)g > ngroups ||
				     (g > 0 && left[ncaps + (size_t)g - 1] <= 0);
			if (spent)
				rc = strs_push(&out, cap->tool);
			else if (g > 0)
				rc = strs_push(&only, cap->tool);
			if (rc != 0)
				goto done;
		}
		char *lit = text_array(out.v, out.n);
		char *olit = text_array(only.v, only.n);
		if (lit == NULL || olit == NULL) {
			free(lit);
			free(olit);
			rc = -ENOMEM;
			goto done;
		}
		/* $1 now, $2 the spent tools, $3 the most rows, $4 whether
		 * the claim's limit has room, $5 the tools of groups. */
		struct params p = {0};
		p_int(&p, now);
		p_str(&p, lit);
		p_int(&p, want);
		p_str(&p, slots > 0 ? "true" : "false");
		p_str(&p, olit);
		PGresult *r = exec(c, S_CLAIM_SCAN, &p);
		free(lit);
		free(olit);
		if ((rc = ok(c->pg, r, PGRES_TUPLES_OK)) != 0)
			goto done;
		int rows = PQntuples(r);
		bool skipped = false;
		for (int row = 0; row < rows && room > 0; row++) {
			const char *tool = PQgetvalue(r, row, 1);
			size_t k = 0;
			int g, *group;
			while (k < ncaps && strcmp(req->u.claim.caps[k].tool, tool) != 0)
				k++;
			g = k < ncaps ? req->u.claim.caps[k].group : 0;
			group = g > 0 && (size_t)g <= ngroups
					? &left[ncaps + (size_t)g - 1]
					: &slots;
			if ((k < ncaps && (left[k] <= 0 ||
					   (req->u.claim.caps[k].pool &&
					    pool_left <= 0))) ||
			    *group <= 0) {
				skipped = true;
				continue;
			}
			if (k < ncaps) {
				left[k]--;
				if (req->u.claim.caps[k].pool)
					pool_left--;
			}
			(*group)--;
			room--;
			char *id = strdup(PQgetvalue(r, row, 0));
			if (id == NULL || strs_push(&picked, id) != 0) {
				free(id);
				PQclear(r);
				rc = -ENOMEM;
				goto done;
			}
		}
		PQclear(r);
		if (picked.n > 0 && (rc = take(q, req, &picked, now)) != 0)
			goto done;
		strs_free_all(&picked);
		if (rows < want || !skipped)
			break;
	}
	rc = next_run_at(c, req, now, left, pool_left);
done:
	strs_free_all(&picked);
	free(out.v);
	free(only.v);
	free(left);
	return rc;
}

static int do_expire(struct pg *q, struct store__wreq *w)
{
	struct conn *c = &q->w;
	struct store_req *req = w->req;
	struct params p = {0};
	p_int(&p, w->arg);
	PGresult *r = exec(c, S_EXPIRE, &p);
	int rc = ok(c->pg, r, PGRES_TUPLES_OK);
	w->rc = 0;
	if (rc != 0)
		return rc;
	int rows = PQntuples(r);
	if (rows > 0 && (req->jobs = calloc((size_t)rows, sizeof(*req->jobs))) == NULL)
		rc = -ENOMEM;
	for (int row = 0; rc == 0 && row < rows; row++) {
		struct store_job *j = row_job(r, row);
		if (j == NULL) {
			rc = -ENOMEM;
			break;
		}
		req->jobs[req->njobs++] = j;
		rc = add_event(q, j->id, j->tool, STORE_EV_EXPIRED, j->status,
			       w->arg, NULL, NULL, NULL, NULL);
	}
	PQclear(r);
	return rc;
}

/* send_running sends the write of one JSON column of a running job
 * (checkpoint or progress; no event), PK_CHANGED. */
static int send_running(struct pg *q, struct store__wreq *w, enum stmt_id stmt,
			const char *id, const char *text)
{
	struct params p = {0};
	p_str(&p, id);
	p_str(&p, text);
	p_int(&p, store_now());
	p_str(&p, q->node);
	return send_params(q, stmt, &p, PK_CHANGED, w);
}

static int do_log(struct pg *q, struct store__wreq *w)
{
	struct conn *c = &q->w;
	const struct store_req *req = w->req;
	const char *id = req->u.log.job_id;
	struct params p = {0};
	p_str(&p, id);
	PGresult *r = exec(c, S_JOB_EXISTS, &p);
	int rc = ok(c->pg, r, PGRES_TUPLES_OK);
	if (rc != 0)
		return rc;
	int rows = PQntuples(r);
	PQclear(r);
	if (rows == 0) {
		w->rc = STORE_ENOTFOUND;
		return 0;
	}
	r = exec(c, S_LOG_LAST, &p);
	if ((rc = ok(c->pg, r, PGRES_TUPLES_OK)) != 0)
		return rc;
	int64_t n = get_int(r, 0, 0);
	PQclear(r);

	int64_t now = store_now();
	for (size_t i = 0; i < req->u.log.nlines; i++) {
		const struct store_log_line *l = &req->u.log.lines[i];
		struct params lp = {0};
		p_str(&lp, id);
		p_int(&lp, ++n);
		p_int(&lp, l->at != 0 ? l->at : now);
		p_str(&lp, l->level != NULL ? l->level : "info");
		p_str(&lp, l->message != NULL ? l->message : "");
		p_str(&lp, w->line_data != NULL ? w->line_data[i] : NULL);
		if ((rc = cmd(c, S_LOG_INSERT, &lp, NULL)) != 0)
			return rc;
	}
	if (req->u.log.max_lines > 0 && n > req->u.log.max_lines) {
		struct params tp = {0};
		p_str(&tp, id);
		p_int(&tp, n - req->u.log.max_lines);
		if ((rc = cmd(c, S_LOG_TRIM, &tp, NULL)) != 0)
			return rc;
	}
	w->rc = 0;
	return 0;
}

static int do_pause(struct pg *q, struct store__wreq *w)
{
	struct params p = {0};
	p_str(&p, w->req->u.pause.tool);
	p_int(&p, w->req->u.pause.paused);
	w->rc = 0;
	return cmd(&q->w, S_TOOL_PAUSE, &p, NULL);
}

static int do_prune(struct pg *q, struct store__wreq *w)
{
	static const enum stmt_id steps[] = {S_PRUNE_EVENTS, S_PRUNE_LOGS, S_PRUNE};
	int64_t changed = 0;
	char floor[14];
	int rc = 0;
	store__uuid7_floor(w->req->u.prune.before, floor);
	for (size_t i = 0; rc == 0 && i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct params p = {0};
		p_int(&p, w->req->u.prune.before);
		p_str(&p, floor);
		rc = cmd(&q->w, steps[i], &p, &changed);
	}
	w->req->count = rc == 0 ? changed : 0;
	w->rc = 0;
	return rc;
}

static int send_proc(struct pg *q, struct store__wreq *w)
{
	const struct store_proc *pr = &w->req->u.proc.proc;
	struct params p = {0};
	p_str(&p, q->node);
	p_int(&p, pr->pid);
	if (w->req->u.proc.remove) {
		p_int(&p, pr->start_min);
	} else {
		p_str(&p, pr->job_id);
		p_int(&p, pr->start_min);
		p_int(&p, pr->start_max);
		p_str(&p, pr->boot_id);
	}
	return send_params(q, w->req->u.proc.remove ? S_PROC_DEL : S_PROC_PUT,
			   &p, PK_PROC, w);
}

/* send_define sends the storing or removal of a worker process's tool
 * definition (PK_DEFINE). */
static int send_define(struct pg *q, struct store__wreq *w)
{
	const struct store_req *req = w->req;
	struct params p = {0};
	p_str(&p, req->u.define.name);
	if (!req->u.define.remove) {
		p_str(&p, w->text[STORE__T_DEFINITION]);
		p_int(&p, store_now());
	}
	return send_params(q, req->u.define.remove ? S_DEF_DEL : S_DEF_PUT,
			   &p, PK_DEFINE, w);
}

/*
 * pg_apply sends a request's statements into the pipeline, or holds a
 * creation back to send several as one INSERT. A request whose work
 * depends on what it reads (a claim, a log, expiry, a pause, pruning)
 * first reads what is in flight, then runs. The outcome of a request sent
 * is settled when its result is read (read_pend), at the latest by
 * pg_commit.
 */
static int pg_apply(void *be, struct store__wreq *w, struct store__batch *b)
{
	struct pg *q = be;
	struct store_req *req = w->req;
	int rc;

	q->batch = b;
	if (!q->locked && (rc = take_locks(q, b)) != 0)
		return rc;
	/* A run's end that follows its job's creation is written with it. */
	if (req->op == STORE_OP_TRANSITION && w->absorb_into != NULL &&
	    absorb(q, w))
		return 0;
	if (req->op == STORE_OP_CREATE && req->u.create.job->idempotency_key == NULL) {
		/* Full: the ones held go out first, so that this one stays
		 * held for a run's end that may follow (absorb). */
		if (q->nheld == JOB_ROWS_MAX) {
			q->only_held = false;
			if ((rc = send_creates(q, false)) != 0)
				return rc;
		}
		q->held_then[q->nheld] = NULL;
		q->held[q->nheld++] = w;
		return 0;
	}
	q->only_held = false;
	/* Held creations go out before any other request, which may read
	 * them, and whose events must follow theirs. A process record and
	 * a tool's definition touch neither jobs nor events. */
	if (req->op != STORE_OP_PROC && req->op != STORE_OP_TOOL_DEFINE &&
	    q->nheld > 0 &&
	    (rc = send_creates(q, false)) != 0)
		return rc;
	switch (req->op) {
	case STORE_OP_CREATE:
		if ((rc = add_sent(q, w, NULL)) < 0)
			return rc;
		return send_create_one(q, (size_t)rc, PK_CREATE_KEY);
	case STORE_OP_TRANSITION:
		return send_transition(q, w);
	case STORE_OP_CHECKPOINT:
		return send_running(q, w, S_CHECKPOINT, req->u.checkpoint.job_id,
				    w->text[STORE__T_CHECKPOINT]);
	case STORE_OP_PROGRESS:
		return send_running(q, w, S_PROGRESS, req->u.progress.job_id,
				    w->text[STORE__T_PROGRESS]);
	case STORE_OP_PROC:
		return send_proc(q, w);
	case STORE_OP_TOOL_DEFINE:
		return send_define(q, w);
	case STORE_OP_CLAIM:
		if (piped_claim(req))
			return send_claim(q, w);
		break;
	default:
		break;
	}
	if ((rc = drain(q)) != 0)
		return rc;
	switch (req->op) {
	case STORE_OP_CLAIM:
		return do_claim(q, w);
	case STORE_OP_LOG:
		return do_log(q, w);
	case STORE_OP_EXPIRE:
		return do_expire(q, w);
	case STORE_OP_TOOL_PAUSE:
		return do_pause(q, w);
	case STORE_OP_PRUNE:
		return do_prune(q, w);
	default: /* STORE__OP_MAX_PAGES is SQLite's */
		w->rc = -ENOTSUP;
		return 0;
	}
}

/* session sets up a session of ours: times and texts are ours and must
 * not be reinterpreted, and with durability normal a commit does not
 * wait for the server's disk. */
static int session(PGconn *pg, int durability)
{
	int rc = 0;
	if ((rc = simple(pg, "SET client_encoding = 'UTF8'")) != 0 ||
	    (rc = simple(pg, "SET application_name = 'berthd'")) != 0)
		return rc;
	/* full: the commit is flushed to the server's disk before the reply
	 * (synchronous_commit = on); normal: a server crash may lose the
	 * last commits, as SQLite's synchronous=NORMAL may on power loss. */
	if (durability == STORE_DURABILITY_NORMAL)
		rc = simple(pg, "SET synchronous_commit = off");
	return rc;
}

/* writer_ready makes the writer's connection usable: reset when it was
 * lost (or its results lost track of), its session set up again, in
 * pipeline mode and nonblocking. */
static int writer_ready(struct pg *q)
{
	struct conn *c = &q->w;

	if (c->broken || PQstatus(c->pg) != CONNECTION_OK) {
		if (PQpipelineStatus(c->pg) != PQ_PIPELINE_OFF)
			PQexitPipelineMode(c->pg);
		PQsetnonblocking(c->pg, 0);
		PQreset(c->pg);
		memset(c->prepared, 0, sizeof(c->prepared));
		c->broken = false;
		if (PQstatus(c->pg) != CONNECTION_OK ||
		    session(c->pg, q->durability) != 0) {
			c->broken = true;
			return -EIO;
		}
	}
	if (PQpipelineStatus(c->pg) == PQ_PIPELINE_OFF) {
		if (PQsetnonblocking(c->pg, 1) != 0 ||
		    !PQenterPipelineMode(c->pg)) {
			c->broken = true;
			return -EIO;
		}
		atomic_store(&q->writer_pid, PQbackendPID(c->pg));
	}
	c->pipeline = true;
	return 0;
}

static int pg_begin(void *be)
{
	struct pg *q = be;
	q->batch = NULL;
	q->locked = false;
	q->only_held = !q->careful;
	q->careful = false;
	q->failed_kind = -1;
	q->nheld = 0;
	q->nsent = 0;
	q->npend = q->pend_head = 0;
	int rc = writer_ready(q);
	return rc != 0 ? rc : send_simple(q, "BEGIN", PK_CHECK);
}

/* at_once tells whether the batch is creations alone, which pg_commit
 * writes in one round trip (commit_at_once). */
static bool at_once(const struct pg *q)
{
	return q->only_held && q->nheld > 0 && q->batch != NULL;
}

/* pg_settle sends what is held and reads every result: the first round
 * trip of a batch, which settles its requests and their events. */
static int pg_settle(void *be)
{
	struct pg *q = be;
	if (at_once(q))
		return 0; /* pg_commit writes it all */
	int rc = q->nheld > 0 ? send_creates(q, false) : 0;
	return rc != 0 ? rc : drain(q);
}

/*
 * commit_at_once writes a batch of creations held back (and the ends of
 * runs they absorbed) in one round trip: their events are known before
 * the insert's result, as long as it writes every row, so the sure insert
 * (multi_sql), the events with their seqs and the COMMIT go out together.
 * When the insert fails (an id taken, a tool paused by another node since
 * this node looked, or anything else), nothing after it ran: the batch
 * answers -EDEADLK, which makes the store roll it back and run it again,
 * and that try settles each creation on its own as below (careful).
 */
static int commit_at_once(struct pg *q)
{
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < q->nheld; i++)
		rc = written(q, q->held[i], q->held_then[i]);
	if (rc == 0)
		rc = send_creates(q, true);
	if (rc == 0)
		rc = send_events(q);
	if (rc == 0)
		rc = send_simple(q, "COMMIT", PK_COMMIT);
	if (rc == 0)
		rc = drain(q);
	if (rc != 0 && q->failed_kind == PK_CREATES_SURE) {
		q->careful = true;
		rc = -EDEADLK;
	}
	return rc;
}

/* pg_commit sends the events with their seqs and the COMMIT: the second
 * round trip, which waits for the server's flush under synchronous_commit
 * = on; a batch of creations alone it writes in one (commit_at_once). */
static int pg_commit(void *be)
{
	struct pg *q = be;
	if (at_once(q))
		return commit_at_once(q);
	int rc = pg_settle(q);
	if (rc == 0 && q->batch != NULL && q->batch->nevents > 0)
		rc = send_events(q);
	if (rc == 0)
		rc = send_simple(q, "COMMIT", PK_COMMIT);
	if (rc == 0)
		rc = drain(q);
	return rc;
}

static void pg_rollback(void *be)
{
	struct pg *q = be;
	q->nheld = 0;
	q->nsent = 0;
	q->batch = NULL;
	/* What was sent is read first (BEGIN may not have been synced
	 * yet); a connection whose results were lost is reset by the next
	 * begin, which ends its transaction on the server. */
	if (!q->w.broken)
		drain(q);
	if (!q->w.broken && PQtransactionStatus(q->w.pg) != PQTRANS_IDLE &&
	    send_simple(q, "ROLLBACK", PK_CHECK) == 0)
		drain(q);
	q->npend = q->pend_head = 0;
}

/* ---- reads (loop thread) ------------------------------------------------ */

/* query runs a read on the reader's connection, reconnecting first when
 * it was lost. */
static PGresult *query(struct pg *q, enum stmt_id id, const struct params *p,
		       int *rc)
{
	if ((*rc = conn_check(&q->r)) != 0)
		return NULL;
	PGresult *r = exec(&q->r, id, p);
	if ((*rc = ok(q->r.pg, r, PGRES_TUPLES_OK)) != 0)
		return NULL;
	return r;
}

static int pg_get(void *be, const char *id, struct store_job **out)
{
	struct pg *q = be;
	int rc = conn_check(&q->r);
	if (rc == 0)
		rc = job_by_id(&q->r, id, out);
	if (rc == 0 && *out == NULL)
		rc = STORE_ENOTFOUND;
	return rc;
}

static int read_jobs(PGresult *r, struct store_job ***jobs, size_t *n)
{
	int rows = PQntuples(r);
	struct store_job **v = calloc((size_t)rows + 1, sizeof(*v));
	if (v == NULL) {
		PQclear(r);
		return -ENOMEM;
	}
	for (int i = 0; i < rows; i++) {
		if ((v[i] = row_job(r, i)) == NULL) {
			for (int k = 0; k < i; k++)
				store_job_free(v[k]);
			free(v);
			PQclear(r);
			return -ENOMEM;
		}
	}
	PQclear(r);
	*jobs = v;
	*n = (size_t)rows;
	return 0;
}

static int pg_list(void *be, const struct store_filter *f, int limit,
		   const char *before_id, struct store_job ***jobs, size_t *n)
{
	unsigned mask = f != NULL ? f->status_mask : 0;
	const char *tool = f != NULL ? f->tool : NULL;
	const char *run_id = f != NULL ? f->run_id : NULL;
	const char *prefix = f != NULL ? f->id_prefix : NULL;
	char end[64];
	enum stmt_id id = S_LIST_ALL;
	if (prefix != NULL && strlen(prefix) >= sizeof(end)) {
		*jobs = NULL; /* longer than any id: no job matches */
		*n = 0;
		return 0;
	}
	/* Lead with the index that narrows the most: a prefix of ids, a
	 * run, one status but completed (migration 0005); the other filters
	 * are checked on the rows it yields. */
	if (prefix != NULL)
		id = S_LIST_PREFIX;
	else if (run_id != NULL)
		id = S_LIST_RUN;
	else if (mask != 0 && (mask & (mask - 1)) == 0 &&
		 mask != STORE_MASK(STORE_COMPLETED))
		id = S_LIST_STATUS;
	else if (tool != NULL)
		id = S_LIST_TOOL;
	struct params p = {0};
	p_int(&p, mask);
	p_str(&p, tool);
	p_str(&p, run_id);
	p_str(&p, before_id);
	p_int(&p, limit);
	if (id == S_LIST_STATUS)
		p_int(&p, __builtin_ctz(mask));
	if (id == S_LIST_PREFIX) {
		store__prefix_end(prefix, end);
		p_str(&p, prefix);
		p_str(&p, end[0] ? end : NULL);
	}
	int rc;
	PGresult *r = query(be, id, &p, &rc);
	return r != NULL ? read_jobs(r, jobs, n) : rc;
}

static int pg_running(void *be, struct store_job ***jobs, size_t *n)
{
	struct pg *q = be;
	struct params p = {0};
	p_str(&p, q->node);
	int rc;
	PGresult *r = query(q, S_RUNNING, &p, &rc);
	return r != NULL ? read_jobs(r, jobs, n) : rc;
}

/* read_event reads row i of r, whose columns from 0 on are an event's
 * (seq, job_id, tool, type, status, at, data, actor, via, client), into
 * ev; *oom is set when out of memory. */
static void read_event(const PGresult *r, int i, struct store_event *ev,
		       bool *oom)
{
	ev->seq = get_int(r, i, 0);
	snprintf(ev->job_id, sizeof(ev->job_id), "%s", PQgetvalue(r, i, 1));
	ev->tool = get_str(r, i, 2, oom);
	ev->type = (int)get_int(r, i, 3);
	ev->status = (int)get_int(r, i, 4);
	ev->at = get_int(r, i, 5);
	ev->data = get_json(r, i, 6);
	ev->by = get_str(r, i, 7, oom);
	ev->via = get_str(r, i, 8, oom);
	ev->client = get_json(r, i, 9);
}

/* read_events reads the events of r's rows (those whose seq is not NULL)
 * into a new array and clears r. */
static int read_events(PGresult *r, struct store_event **out, size_t *n)
{
	int rows = PQntuples(r);
	size_t cnt = 0;
	struct store_event *v = calloc((size_t)rows + 1, sizeof(*v));
	bool oom = v == NULL;
	for (int i = 0; !oom && i < rows; i++)
		if (!PQgetisnull(r, i, 0))
			read_event(r, i, &v[cnt++], &oom);
	PQclear(r);
	if (oom) {
		for (size_t i = 0; v != NULL && i < cnt; i++)
			store_event_finish(&v[i]);
		free(v);
		return -ENOMEM;
	}
	*out = v;
	*n = cnt;
	return 0;
}

static int pg_events(void *be, int64_t after, const char *job_id, int limit,
		     struct store_event **out, size_t *n)
{
	struct params p = {0};
	p_int(&p, after);
	p_int(&p, limit);
	if (job_id != NULL)
		p_str(&p, job_id);
	int rc;
	PGresult *r = query(be, job_id != NULL ? S_EVENTS_JOB : S_EVENTS, &p, &rc);
	if (r == NULL)
		return rc;
	return read_events(r, out, n);
}

static int pg_events_typed(void *be, const struct store_event_query *q,
			   struct store_event **out, size_t *n, int64_t *next,
			   bool *more)
{
	struct params p = {0};
	p_int(&p, q->after);
	p_int(&p, q->limit);
	p_int(&p, q->types);
	p_int(&p, q->scan);
	if (q->job_id != NULL)
		p_str(&p, q->job_id);
	int rc;
	PGresult *r = query(be, q->job_id != NULL ? S_EVENTS_TYPED_JOB
						  : S_EVENTS_TYPED, &p, &rc);
	if (r == NULL)
		return rc;
	if (PQntuples(r) == 0 || PQgetisnull(r, 0, 10)) {
		PQclear(r); /* no event after q->after */
		return 0;
	}
	int64_t last = get_int(r, 0, 11);
	int64_t top = store__span_top(get_int(r, 0, 10), last, q->scan);
	if ((rc = read_events(r, out, n)) != 0)
		return rc;
	bool full = *n == (size_t)q->limit;
	*next = full ? (*out)[*n - 1].seq : top;
	*more = full || top < last;
	return 0;
}

/* one_int64 runs a query of one value into *v (0 when no row or NULL). */
static int one_int64(struct pg *q, enum stmt_id id, const struct params *p,
		     int64_t *v)
{
	int rc;
	PGresult *r = query(q, id, p, &rc);
	*v = 0;
	if (r == NULL)
		return rc;
	if (PQntuples(r) > 0)
		*v = get_int(r, 0, 0);
	PQclear(r);
	return 0;
}

static int64_t pg_last_seq(void *be)
{
	int64_t v;
	int rc = one_int64(be, S_LAST_SEQ, NULL, &v);
	return rc != 0 ? rc : v;
}

static int pg_count_by_status(void *be, int64_t counts[STORE_NSTATUS])
{
	int rc;
	PGresult *r = query(be, S_COUNT, NULL, &rc);
	if (r == NULL)
		return rc;
	memset(counts, 0, sizeof(int64_t) * STORE_NSTATUS);
	for (int i = 0; i < PQntuples(r); i++) {
		int64_t s = get_int(r, i, 0);
		if (s >= 0 && s < STORE_NSTATUS)
			counts[s] = get_int(r, i, 1);
	}
	PQclear(r);
	return 0;
}

static int pg_logs(void *be, const char *job_id, int64_t after, int limit,
		   struct store_log_line **out, size_t *n)
{
	struct params p = {0};
	p_str(&p, job_id);
	p_int(&p, after);
	p_int(&p, limit);
	int rc;
	PGresult *r = query(be, S_LOGS, &p, &rc);
	if (r == NULL)
		return rc;
	int rows = PQntuples(r);
	struct store_log_line *v = calloc((size_t)rows + 1, sizeof(*v));
	bool oom = v == NULL;
	for (int i = 0; !oom && i < rows; i++) {
		struct store_log_line *l = &v[i];
		l->n = get_int(r, i, 0);
		l->at = get_int(r, i, 1);
		l->level = get_str(r, i, 2, &oom);
		l->message = get_str(r, i, 3, &oom);
		l->data = get_json(r, i, 4);
	}
	PQclear(r);
	if (oom) {
		for (int i = 0; v != NULL && i < rows; i++)
			store_log_line_finish(&v[i]);
		free(v);
		return -ENOMEM;
	}
	*out = v;
	*n = (size_t)rows;
	return 0;
}

static int pg_procs(void *be, struct store_proc **out, size_t *n)
{
	struct pg *q = be;
	struct params p = {0};
	p_str(&p, q->node);
	int rc;
	PGresult *r = query(q, S_PROCS, &p, &rc);
	if (r == NULL)
		return rc;
	int rows = PQntuples(r);
	struct store_proc *v = calloc((size_t)rows + 1, sizeof(*v));
	if (v == NULL) {
		PQclear(r);
		return -ENOMEM;
	}
	for (int i = 0; i < rows; i++) {
		snprintf(v[i].job_id, sizeof(v[i].job_id), "%s", PQgetvalue(r, i, 0));
		v[i].pid = get_int(r, i, 1);
		v[i].start_min = get_int(r, i, 2);
		v[i].start_max = get_int(r, i, 3);
		snprintf(v[i].boot_id, sizeof(v[i].boot_id), "%s", PQgetvalue(r, i, 4));
	}
	PQclear(r);
	*out = v;
	*n = (size_t)rows;
	return 0;
}

static int pg_definitions(void *be, struct store_definition **out,
			  size_t *n)
{
	struct pg *q = be;
	int rc;
	PGresult *r = query(q, S_DEFS, NULL, &rc);
	if (r == NULL)
		return rc;
	int rows = PQntuples(r);
	struct store_definition *v = calloc((size_t)rows + 1, sizeof(*v));
	if (v == NULL) {
		PQclear(r);
		return -ENOMEM;
	}
	for (int i = 0; i < rows; i++) {
		bool oom = false;
		/* A definition that does not parse is handed on as NULL (as
		 * in sqlite.c). */
		v[i].name = get_str(r, i, 0, &oom);
		v[i].definition = get_json(r, i, 1);
		if (v[i].name == NULL) {
			for (int k = 0; k <= i; k++)
				store_definition_finish(&v[k]);
			free(v);
			PQclear(r);
			return -ENOMEM;
		}
	}
	PQclear(r);
	*out = v;
	*n = (size_t)rows;
	return 0;
}

static int pg_tool_paused(void *be, const char *tool)
{
	struct params p = {0};
	p_str(&p, tool);
	int64_t v;
	int rc = one_int64(be, S_TOOL_PAUSED, &p, &v);
	return rc != 0 ? rc : v != 0;
}

static int pg_next_run_at(void *be, int64_t *at)
{
	return one_int64(be, S_NEXT_RUN_AT, NULL, at);
}

static int pg_next_expiry(void *be, int64_t *at)
{
	return one_int64(be, S_NEXT_EXPIRY, NULL, at);
}

/* ---- the cluster: notifications, leases, the reaper -------------------- */

/* How long a starting node waits for its name's lock: a node of the name
 * that just closed (a restart) holds it until its server process has
 * ended, which the server does after the connection is gone. */
#define NODE_LOCK_WAIT_MS 5000

/* A node's hello to the others (peers_seen): a notification whose
 * payload is no seq. */
#define HELLO "NOTIFY berth_events, 'hello'"

/* listen_setup takes the node's lock, waiting up to wait_ms for it,
 * listens, and says hello, on q->l. */
static int listen_setup(struct pg *q, int64_t wait_ms, char **errmsg)
{
	struct params p = {0};
	int64_t until = store_now() + wait_ms;
	bool got = false;
	int rc;

	p_int(&p, lock_key("node", q->node));
	for (;;) {
		PGresult *r = PQexecParams(q->l.pg,
					   "SELECT pg_try_advisory_lock($1::bigint)",
					   1, NULL, p.v, NULL, NULL, 0);
		if ((rc = ok(q->l.pg, r, PGRES_TUPLES_OK)) != 0) {
			store__set_msg(errmsg, "cannot lock the node name on "
					       "PostgreSQL");
			return rc;
		}
		got = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
		PQclear(r);
		if (got || store_now() >= until)
			break;
		nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
	}
	if (!got) {
		store__set_msg(errmsg,
			"a berthd node named \"%s\" is already running on this PostgreSQL database; give each node its own name (--node or $BERTH_NODE)",
			q->node);
		return -EBUSY;
	}
	if ((rc = simple(q->l.pg, "LISTEN berth_events")) != 0 ||
	    (rc = simple(q->l.pg, HELLO)) != 0) {
		store__set_msg(errmsg, "cannot LISTEN on PostgreSQL");
		return rc;
	}
	return 0;
}

static int pg_watch_fd(void *be)
{
	struct pg *q = be;
	return PQstatus(q->l.pg) == CONNECTION_OK ? PQsocket(q->l.pg) : -1;
}

/*
 * hear reads the notifications libpq holds for the listener. Returns 1
 * when there are events to read (catch_up), else 0; *answer is set when
 * another node was heard after a quiet spell (peers_seen): it may have
 * started before this one listened, and is to hear this one's hello now
 * rather than at this node's next tick.
 */
static int hear(struct pg *q, bool *answer)
{
	/* This node's writer's own notifications are of batches the store
	 * delivers itself: reading the events again would be a round trip
	 * on the loop thread per commit for nothing. The reaper's (on the
	 * reader's connection) are of events it delivers through them. Any
	 * other backend's are another node's: its hello or its events. */
	int own = atomic_load(&q->writer_pid);
	int self = PQbackendPID(q->l.pg), reader = PQbackendPID(q->r.pg);
	int any = 0;
	PGnotify *n;
	while ((n = PQnotifies(q->l.pg)) != NULL) {
		bool hello = strcmp(n->extra, "hello") == 0;
		if (n->be_pid != own && n->be_pid != self && !hello)
			any = 1;
		if (n->be_pid != own && n->be_pid != self && n->be_pid != reader) {
			*answer = *answer || !peers_seen(q);
			atomic_store(&q->peer_seen, store_now());
		}
		PQfreemem(n);
	}
	return any;
}

static int pg_notified(void *be)
{
	struct pg *q = be;
	bool answer = false;
	if (!PQconsumeInput(q->l.pg))
		return -EIO;
	int any = hear(q, &answer);
	if (answer) {
		if (simple(q->l.pg, HELLO) != 0)
			return -EIO;
		/* What came with the hello's reply is in libpq now: its
		 * socket will not say so again. */
		any |= hear(q, &answer);
	}
	return any;
}

/* reap_known returns a malloc'd array literal of the tools of the scan r
 * this node knows (policy >= 0), or NULL with *none set when there are
 * none (or NULL when out of memory). */
static char *reap_known(PGresult *r, int (*policy)(void *arg, const char *tool),
			void *arg, bool *none)
{
	int rows = PQntuples(r);
	const char **tools = calloc((size_t)rows + 1, sizeof(*tools));
	size_t n = 0;
	*none = false;
	if (tools == NULL)
		return NULL;
	for (int i = 0; i < rows; i++)
		if (policy(arg, PQgetvalue(r, i, 0)) >= 0)
			tools[n++] = PQgetvalue(r, i, 0);
	char *lit = n > 0 ? text_array(tools, n) : NULL;
	*none = n == 0;
	free(tools);
	return lit;
}

/* reap recovers, in one transaction on the reader's connection, the
 * running jobs of other nodes whose leases expired: by the policy of
 * store_recover (may_rerun and the retries left). A job of a tool this
 * node does not know (policy -1) is left alone: whether it may run again
 * is its tool's to say, and a node without the tool failed jobs that
 * would have been retried (the audit: a worker tool registered on the
 * node that died). A node that has the tool recovers it, the dead node's
 * restart among them. Returns the number of jobs recovered or an error. */
static int reap(struct pg *q, int (*policy)(void *arg, const char *tool),
		void *arg)
{
	struct conn *c = &q->r;
	int64_t now = store_now();
	struct store__batch b = {0};
	const char **texts = NULL;
	char **owned = NULL;
	int rows = 0, done = 0;
	struct params p = {0};
	p_str(&p, q->node);
	p_int(&p, now);
	/* Outside a transaction: most ticks find nothing, and pay one
	 * statement for it. */
	PGresult *r = exec(c, S_REAP_SCAN, &p);
	int rc = ok(c->pg, r, PGRES_TUPLES_OK);
	if (rc != 0)
		return rc;
	bool none = PQntuples(r) == 0;
	char *tools = none ? NULL : reap_known(r, policy, arg, &none);
	PQclear(r);
	r = NULL;
	if (none)
		return 0;
	if (tools == NULL)
		return -ENOMEM;
	if ((rc = simple(c->pg, "BEGIN")) != 0) {
		free(tools);
		return rc;
	}
	p_str(&p, tools);
	r = exec(c, S_REAP_LOCK, &p);
	free(tools);
	if ((rc = ok(c->pg, r, PGRES_TUPLES_OK)) != 0) {
		r = NULL;
		goto out;
	}
	rows = PQntuples(r);
	texts = calloc((size_t)rows * 1 + 1, sizeof(*texts));
	owned = calloc((size_t)rows + 1, sizeof(*owned));
	if (texts == NULL || owned == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < rows; i++) {
		const char *id = PQgetvalue(r, i, 0);
		const char *tool = PQgetvalue(r, i, 1);
		int attempt = (int)get_int(r, i, 2);
		int max_retries = (int)get_int(r, i, 3);
		const char *owner = PQgetisnull(r, i, 4) ? "none" : PQgetvalue(r, i, 4);
		int may = policy(arg, tool);
		if (may < 0)
			continue;
		bool rerun = may > 0 &&
			     attempt < store_interrupted_tries(max_retries);
		struct params up = {0};
		p_str(&up, id);
		p_int(&up, now);
		int64_t changed = 0;
		if (rerun) {
			rc = cmd(c, S_REAP_RETRY, &up, &changed);
			texts[b.nevents] = "{\"reason\":\"interrupted\"}";
		} else {
			json_t *e = json_pack("{s:s+,s:s}", "message",
					      "interrupted: its berthd node stopped renewing its lease, node ",
					      owner, "code", "interrupted");
			owned[i] = e != NULL ? json_dumps(e, JSON_COMPACT) : NULL;
			json_decref(e);
			if (owned[i] == NULL) {
				rc = -ENOMEM;
				goto out;
			}
			p_str(&up, owned[i]);
			rc = cmd(c, S_REAP_FAIL, &up, &changed);
			texts[b.nevents] = owned[i];
		}
		if (rc != 0)
			goto out;
		if (changed == 0)
			continue;
		rc = store__batch_event(&b, 0, id, tool,
					rerun ? STORE_EV_RETRYING : STORE_EV_FAILED,
					rerun ? STORE_PENDING : STORE_FAILED, now, NULL,
					NULL);
		if (rc != 0)
			goto out;
		done++;
	}
	if (b.nevents > 0) {
		int64_t last = 0;
		if ((rc = flush_events(c, &b, 0, texts, &last)) != 0)
			goto out;
		rc = commit_notify(c->pg, last);
	} else {
		rc = commit_notify(c->pg, 0);
	}
out:
	if (rc != 0 && PQtransactionStatus(c->pg) != PQTRANS_IDLE)
		simple(c->pg, "ROLLBACK");
	PQclear(r); /* the events' tools were borrowed from it */
	free(b.events);
	for (int i = 0; owned != NULL && i < rows; i++)
		free(owned[i]);
	free(owned);
	free(texts);
	return rc != 0 ? rc : done;
}

static int64_t pg_tick_ms(void *be)
{
	struct pg *q = be;
	int64_t t = q->lease_ms / 4;
	return t < 50 ? 50 : t > 1000 ? 1000 : t;
}

static int pg_tick(void *be, int (*policy)(void *arg, const char *tool),
		   void *arg)
{
	struct pg *q = be;
	int64_t now = store_now();
	int rc = conn_check(&q->r);
	if (rc != 0)
		return rc;
	/* A lost LISTEN connection: reconnect, lock the name and listen
	 * again; the store catches up on the events it missed. */
	if (PQstatus(q->l.pg) != CONNECTION_OK) {
		char *msg = NULL;
		PQreset(q->l.pg);
		if (PQstatus(q->l.pg) == CONNECTION_OK)
			listen_setup(q, 0, &msg);
		free(msg);
	} else if (simple(q->l.pg, HELLO) == 0) {
		/* The hello that keeps this node heard (peers_seen); what
		 * came in with its reply is read here, and its events by
		 * the catch-up that follows every tick. */
		bool answer = false;
		hear(q, &answer);
	}
	/* The renewal comes at the last tick before a third of the lease
	 * has passed, not the first one after it: at a lease of 1.5 s (a
	 * tick every 375 ms) that is every tick, where waiting for a full
	 * third renewed only every 750 ms, and a loop late by that much on
	 * a busy machine lost its jobs to another node. */
	if (now - q->last_renew + pg_tick_ms(q) >= q->lease_ms / 3) {
		struct params p = {0};
		p_str(&p, q->node);
		p_int(&p, now + q->lease_ms);
		if ((rc = cmd(&q->r, S_RENEW, &p, NULL)) != 0)
			return rc;
		q->last_renew = now;
	}
	if (policy == NULL)
		return 0;
	return reap(q, policy, arg);
}

/* ---- open and close ----------------------------------------------------- */

static void pg_close(void *be)
{
	struct pg *q = be;
	if (q == NULL)
		return;
	PQfinish(q->w.pg);
	PQfinish(q->r.pg);
	PQfinish(q->l.pg);
	free(q->texts);
	free(q->clients);
	free(q->pend);
	free(q->sent);
	for (size_t i = 0; i < sizeof(q->multi_sql) / sizeof(q->multi_sql[0]); i++)
		free(q->multi_sql[i]);
	free(q->mp);
	free(q->url);
	free(q->node);
	free(q);
}

/* node_name returns the malloc'd name of this node. */
static char *node_name(const struct store_config *cfg)
{
	const char *s = cfg->node;
	if (s == NULL || s[0] == '\0')
		s = getenv("BERTH_NODE");
	if (s != NULL && s[0] != '\0')
		return strdup(s);
	char host[256];
	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "berthd");
	host[sizeof(host) - 1] = '\0';
	return strdup(host);
}

static int pg_open(const struct store_config *cfg, void **be, char **errmsg)
{
	struct pg *q = calloc(1, sizeof(*q));
	if (q == NULL)
		return -ENOMEM;
	q->url = strdup(cfg->path);
	q->node = node_name(cfg);
	q->durability = cfg->durability;
	q->lease_ms = cfg->lease_ms;
	if (q->lease_ms <= 0) {
		const char *e = getenv("BERTH_LEASE_MS");
		q->lease_ms = e != NULL ? strtoll(e, NULL, 10) : 0;
	}
	if (q->lease_ms <= 0)
		q->lease_ms = 15000;
	q->mp = malloc(sizeof(*q->mp));
	if (q->url == NULL || q->node == NULL || q->mp == NULL) {
		pg_close(q);
		return -ENOMEM;
	}

	int rc;
	if ((rc = store__pg_connect(q->url, &q->l.pg, errmsg)) != 0 ||
	    (rc = listen_setup(q, NODE_LOCK_WAIT_MS, errmsg)) != 0 ||
	    (rc = store__pg_connect(q->url, &q->w.pg, errmsg)) != 0 ||
	    (rc = store__pg_migrate(q->w.pg, errmsg)) != 0 ||
	    (rc = store__pg_connect(q->url, &q->r.pg, errmsg)) != 0)
		goto fail;
	/* full: the commit is flushed to the server's disk before the reply
	 * (synchronous_commit = on); normal: a server crash may lose the
	 * last commits, as SQLite's synchronous=NORMAL may on power loss. */
	if (cfg->durability == STORE_DURABILITY_NORMAL &&
	    (rc = simple(q->w.pg, "SET synchronous_commit = off")) != 0) {
		store__set_msg(errmsg, "cannot set synchronous_commit on PostgreSQL");
		goto fail;
	}
	if ((rc = writer_ready(q)) != 0) {
		store__set_msg(errmsg, "cannot put the PostgreSQL connection in pipeline mode");
		goto fail;
	}
	*be = q;
	return 0;
fail:
	pg_close(q);
	return rc != 0 ? rc : -EIO;
}

const struct store__backend store__pg = {
	.name = "postgres",
	.open = pg_open,
	.close = pg_close,
	.begin = pg_begin,
	.apply = pg_apply,
	.settle = pg_settle,
	.commit = pg_commit,
	.rollback = pg_rollback,
	.get = pg_get,
	.list = pg_list,
	.running = pg_running,
	.events = pg_events,
	.events_typed = pg_events_typed,
	.last_seq = pg_last_seq,
	.count_by_status = pg_count_by_status,
	.logs = pg_logs,
	.tool_paused = pg_tool_paused,
	.next_run_at = pg_next_run_at,
	.next_expiry = pg_next_expiry,
	.procs = pg_procs,
	.definitions = pg_definitions,
	.shared = true,
	.watch_fd = pg_watch_fd,
	.notified = pg_notified,
	.tick = pg_tick,
	.tick_ms = pg_tick_ms,
};

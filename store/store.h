/*
 * store.h: berth's durable state (jobs, the event log, job logs, tool state).
 *
 * The store knows no tools and no wire protocol. It is an interface with
 * backends (SQLite embedded, PostgreSQL later): store.c dispatches through a
 * table of backend operations, sqlite.c is the first backend.
 *
 * Threads. The store is created and used from one libuv loop thread (the
 * "loop thread"). Reads (store_get, store_list, ...) run synchronously on the
 * loop thread through a read-only connection of their own; in WAL mode they
 * never wait behind a commit. Mutations are requests handed to one writer
 * thread with store_submit(): requests gathered while a commit is under way
 * are applied together in the next transaction (group commit). A request's
 * done callback runs on the loop thread exactly once, only after the
 * transaction that holds its change is durable (or failed and rolled back).
 * Commits and their fsyncs never run on the loop thread.
 *
 * Errors are 0 or a negative errno-style code:
 *   -ENOENT          no such job (STORE_ENOTFOUND)
 *   STORE_ECONFLICT  the job's status did not allow the transition; nothing
 *                    was changed and req->job holds the job as it is
 *   -ENOSPC, -EIO, -EBUSY (database locked), -ENOMEM, -EROFS
 *                    storage failure; the whole transaction was rolled back,
 *                    so nothing of it was written
 *   -EINVAL          a malformed request (a bug in the caller)
 *
 * Times are int64 milliseconds since the Unix epoch (UTC); 0 means "absent".
 */
#ifndef BERTH_STORE_H
#define BERTH_STORE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#define STORE_ENOTFOUND (-ENOENT)
#define STORE_ECONFLICT (-ESTALE)

/* Job statuses, as PROTOCOL.md names them. The values are stable: they are
 * also bit positions in a status mask (STORE_MASK). */
enum store_status {
	STORE_PENDING = 0,
	STORE_AWAITING_APPROVAL,
	STORE_RUNNING,
	STORE_SUSPENDED,
	STORE_COMPLETED,
	STORE_FAILED,
	STORE_TIMED_OUT,
	STORE_DECLINED,
	STORE_CANCELLED,
	STORE_EXPIRED,
	STORE_NSTATUS
};

#define STORE_MASK(s) (1u << (s))
#define STORE_MASK_TERMINAL                                                    \
	(STORE_MASK(STORE_COMPLETED) | STORE_MASK(STORE_FAILED) |              \
	 STORE_MASK(STORE_TIMED_OUT) | STORE_MASK(STORE_DECLINED) |            \
	 STORE_MASK(STORE_CANCELLED) | STORE_MASK(STORE_EXPIRED))

/* Event types, as PROTOCOL.md names them. */
enum store_event_type {
	STORE_EV_CREATED = 0,
	STORE_EV_APPROVAL_REQUESTED,
	STORE_EV_APPROVED,
	STORE_EV_DECLINED,
	STORE_EV_STARTED,
	STORE_EV_SUSPENDED,
	STORE_EV_RESUMED,
	STORE_EV_RETRYING,
	STORE_EV_COMPLETED,
	STORE_EV_FAILED,
	STORE_EV_TIMED_OUT,
	STORE_EV_CANCELLED,
	STORE_EV_EXPIRED,
	STORE_NEVENT
};

/* store_status_name returns the protocol name of status s ("pending", ...),
 * or NULL when s is out of range. store_status_parse returns the status
 * named by name, or -1. The same pair exists for event types. */
const char *store_status_name(int s);
int store_status_parse(const char *name);
bool store_status_terminal(int s);

/* store_interrupted_tries returns how many tries a job of a tool whose
 * onInterrupt is "retry" may have when runs are cut short by a crash, a
 * kill of berthd or a worker process that went away: its maxRetries + 1,
 * and at least 2, so that a job whose tool allows no retry of its own
 * errors (maxRetries 0, the default) still runs again after one
 * interruption. A job whose every try is interrupted (a tool that kills
 * berthd) is failed once they are used up. */
int store_interrupted_tries(int max_retries);

/* store_error_text names a store's negative error code rc the way
 * SQLite's own messages do ("database is locked" for -EBUSY, where
 * strerror says "Device or resource busy"), for -32014's message and
 * data.sqlite; strerror's words for the others. */
const char *store_error_text(int rc);
const char *store_event_name(int type);
int store_event_parse(const char *name);

enum store_decision {
	STORE_DECISION_NONE = 0,
	STORE_DECISION_APPROVED,
	STORE_DECISION_DECLINED,
};

/*
 * struct store_job is one job, every field of PROTOCOL.md's Job.
 * Strings and json_t values are owned by the job: store_job_free releases
 * them. NULL (or 0 for times) means absent.
 *
 * attempt is the 1-based number of the current try: 1 at creation, raised by
 * one by each retry and by each recovery of an interrupted run. A failed try
 * is retried while attempt <= max_retries.
 */
struct store_job {
	char id[40]; /* UUIDv7, 36 characters and a NUL */
	char *tool;
	int status; /* enum store_status */
	json_t *input;
	json_t *request_context;
	json_t *metadata;
	char *run_id;
	char *tool_call_id;
	char *idempotency_key;
	int priority; /* higher runs first */
	int64_t run_at;
	int attempt;
	int max_retries;
	int64_t timeout_ms;
	int64_t expires_at; /* ttl of a suspended or awaiting_approval job */
	int64_t ttl_ms;     /* the ttlMs the job was submitted with, 0 none */
	json_t *output;
	json_t *model_output;
	json_t *error; /* {"message", "code"?, "data"?} */
	json_t *suspend_payload;
	json_t *resume_data;
	json_t *checkpoint;
	bool approval_required;
	int decision; /* enum store_decision */
	char *reason; /* the approve note or the decline reason */
	int64_t decided_at;
	json_t *progress; /* {"progress", "total"?, "message"?} */
	char *retry_of;
	int64_t created_at;
	int64_t updated_at;
	int64_t started_at;
	int64_t finished_at;
	/* The audit (docs/API.md): who submitted the job and how, who
	 * decided it (the approval that met its quorum, or the decline) and
	 * how, each approval so far ([{by, via, at, note?, client?}]) and how
	 * many distinct approvals it needs (0: 1). A job stored before berth
	 * recorded them has NULLs, shown as "unknown". */
	char *submitted_by;
	char *submitted_via;
	char *decided_by;
	char *decided_via;
	json_t *approvals;
	int quorum;
	/* The views a worker process computed for the job's payloads
	 * (docs/WORKERS.md): {"display": {STAGE: VIEW}, "transcript": {...},
	 * "pending": [STAGE, ...], ...}, kept by the worker (worker/view.c)
	 * and never part of the Job object; NULL for other tools' jobs. */
	json_t *views;
};

/* store_job_free frees j and everything it owns; NULL is ignored. */
void store_job_free(struct store_job *j);
/* store_job_copy returns a deep copy of j (NULL when out of memory). */
struct store_job *store_job_copy(const struct store_job *j);

/* store_job_to_json returns a new reference to the Job object of
 * PROTOCOL.md (the raw view: payloads as stored), with absent values
 * omitted and times as ISO 8601 UTC strings with milliseconds; NULL only
 * when out of memory. */
json_t *store_job_to_json(const struct store_job *j);
/* store_job_text returns store_json_text(store_job_to_json(j)), malloc'd,
 * without building the tree; NULL when out of memory. */
char *store_job_text(const struct store_job *j);

/* The name and the way of berthd's own transitions (a claim, a run's
 * end, a retry, a timeout, an expiry, a recovery) in the audit. */
#define STORE_BERTHD "berthd"

/* An event of the log. data (and by, via and client) are owned by the
 * event. */
struct store_event {
	int64_t seq;
	char job_id[40];
	char *tool;
	int type;   /* enum store_event_type */
	int status; /* the job's status after the transition */
	int64_t at;
	json_t *data; /* display-transformed payload, or NULL */
	/* Who caused it and how (docs/API.md): a principal's name and
	 * "socket", "tcp", "http", "mcp" or "worker", or STORE_BERTHD for
	 * both; by NULL is an event stored before berth recorded it
	 * ("unknown"). client: an MCP client's {name, version}, or NULL. */
	char *by;
	char *via;
	json_t *client;
};

/* store_event_finish frees what ev owns (not ev itself). */
void store_event_finish(struct store_event *ev);

/* store_event_to_json returns a new reference to the Event object of
 * PROTOCOL.md. */
json_t *store_event_to_json(const struct store_event *ev);
/* store_event_text returns store_json_text(store_event_to_json(ev)),
 * malloc'd, without building the tree; NULL when out of memory. */
char *store_event_text(const struct store_event *ev);

/* store_json_text returns a malloc'd text of v (borrowed), exactly what
 * json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) returns, several times
 * faster for the common values (the writer's serializer); NULL when out of
 * memory or v cannot be serialized. The caller frees it. */
char *store_json_text(json_t *v);

/* A line of a job's log (jobs/logs). */
struct store_log_line {
	int64_t n; /* 1-based per job, grows by one per line */
	int64_t at;
	char *level;
	char *message;
	json_t *data; /* or NULL */
};
void store_log_line_finish(struct store_log_line *l);

/* store_format_time writes t as "YYYY-MM-DDTHH:MM:SS.mmmZ" into buf (at
 * least 32 bytes) and returns buf. store_parse_time parses that form (and
 * offsets such as +02:00, and no fraction); returns 0 or -EINVAL. */
char *store_format_time(int64_t t, char buf[32]);
int store_parse_time(const char *s, int64_t *t);

/* store_now returns the wall-clock time in milliseconds since the epoch. */
int64_t store_now(void);

/* store_uuid7 writes a new UUIDv7 as 36 characters and a NUL into out:
 * the time in milliseconds and 4096ths of one (RFC 9562, method 3), so
 * that the ids this process makes increase strictly, and 62 random bits
 * from the kernel's CSPRNG. Any thread. */
void store_uuid7(char out[40]);

/* ---- opening ---------------------------------------------------------- */

enum store_durability {
	STORE_DURABILITY_FULL = 0, /* synchronous=FULL: survives power loss */
	STORE_DURABILITY_NORMAL,   /* synchronous=NORMAL: survives a crash */
};

struct store_config {
	const char *path; /* a SQLite file path (or postgres:// URL later) */
	int durability;   /* enum store_durability */
	/* Most requests applied in one transaction; 0 means the default
	 * (1024). 1 turns group commit off (one transaction per request), for
	 * the benchmark's comparison. */
	int max_batch;
	int busy_timeout_ms; /* 0: default 5000 */
	/* PostgreSQL only (docs/POSTGRES.md). node names this berthd among
	 * the nodes sharing the database: it owns the leases of the jobs it
	 * runs, and a restart under the same name recovers them at once.
	 * NULL: $BERTH_NODE, else the host name. Two live nodes of one name
	 * are refused. lease_ms is how long a node vouches for its running
	 * jobs without renewing; 0: $BERTH_LEASE_MS, else 15000. */
	const char *node;
	int64_t lease_ms;
	/* SQLite only. The integrity check at open (PRAGMA quick_check,
	 * which reads the whole file) runs before store_open returns for a
	 * database of up to check_inline_max bytes (0:
	 * STORE_CHECK_INLINE_MAX; -1: never, for tests), or one about to be
	 * migrated. A larger database is checked by the writer thread
	 * before it writes anything, while reads are served and requests
	 * wait. When that check fails, the failure is logged, every request
	 * fails with -EIO (nothing is written), and on_fatal(fatal_arg,
	 * message) is called once on the loop thread, from a callback of the
	 * loop (never from inside a store function): the caller stops. */
	int64_t check_inline_max;
	void (*on_fatal)(void *arg, const char *message);
	void *fatal_arg;
};

/* A database up to this size is checked at open before store_open
 * returns: about 0.1 s of PRAGMA quick_check (docs/RELIABILITY.md). */
#define STORE_CHECK_INLINE_MAX (32 * 1024 * 1024)

struct store;

/*
 * store_open opens (creating if needed) and migrates the database, takes
 * the one-daemon lock (a flock on the database file, whatever path names
 * it, and a lock file beside its resolved path holding the holder's pid:
 * store/lock.h) and starts the writer thread. A SQLite database is created
 * mode 0600 (its -wal and -shm files take the same mode), must be
 * writable, and must pass an integrity check (check_inline_max above).
 * Returns 0 and sets *out, or a negative code and sets *errmsg to a
 * malloc'd sentence for a person (for example "the database ./berth.db is
 * in use by berthd pid 4242", "the database was written by a newer berth
 * (schema version 7, this binary knows 3)", "cannot write the database
 * ...", "the database ... fails its integrity check ...").
 */
int store_open(uv_loop_t *loop, const struct store_config *cfg,
	       struct store **out, char **errmsg);

/*
 * store_close stops taking requests, lets the writer finish and commit what
 * it holds (their callbacks run), joins it, closes the databases and the
 * lock, then calls done(arg) on the loop thread. The store is freed after
 * done returns. Requests submitted after store_close fail with -ESHUTDOWN.
 */
void store_close(struct store *st, void (*done)(void *arg), void *arg);

/* store_durability_name returns "full" or "normal"; store_path returns
 * the path or URL it was opened with (borrowed). */
const char *store_durability_name(const struct store *st);
const char *store_path(const struct store *st);

/* store_hold makes the requests submitted from now on wait on the loop
 * thread until the matching store_release, which hands them to the writer
 * at once, so that they commit together when they fit in one batch (a
 * job's creation and its completion, for one commit per job). Holds nest.
 * While a hold is on, the caller must not wait for the writer
 * (store_requeue_running); store_close releases what is held. */
void store_hold(struct store *st);
void store_release(struct store *st);

/* store_shared returns true for a database several nodes share
 * (PostgreSQL), where a claim must look at every node's jobs. */
bool store_shared(const struct store *st);

/* store_claimed_undelivered returns how many jobs committed claims moved
 * to running whose claim's done has not run yet. A read of the database
 * shows them running before their caller has started them: the worker
 * counts them as busy (server/info) from the commit on, not only once
 * their runs began. Loop thread. */
int store_claimed_undelivered(const struct store *st);

/* ---- event listeners -------------------------------------------------- */

/*
 * store_add_listener registers fn to be called on the loop thread for every
 * event, in seq order, once the transaction that appended it is durable,
 * before the done callbacks of that transaction's requests run. ev is
 * borrowed for the call. Returns 0 or -ENOMEM. Listeners are called in the
 * order they were added.
 */
typedef void (*store_listener_fn)(void *arg, const struct store_event *ev);
int store_add_listener(struct store *st, store_listener_fn fn, void *arg);
void store_remove_listener(struct store *st, store_listener_fn fn, void *arg);

/* ---- mutations -------------------------------------------------------- */

enum store_op {
	STORE_OP_CREATE = 1,
	STORE_OP_TRANSITION,
	STORE_OP_CLAIM,
	STORE_OP_CHECKPOINT,
	STORE_OP_PROGRESS,
	STORE_OP_LOG,
	STORE_OP_EXPIRE,
	STORE_OP_TOOL_PAUSE,
	STORE_OP_PRUNE,
	STORE_OP_PROC,
	STORE_OP_TOOL_DEFINE,
};

/*
 * struct store_proc is a process group an external tool's run started, as
 * the worker records it (worker/proc.c) so that a berthd restarted after a
 * crash can kill what its predecessor left running (worker/orphans.c).
 * The store keeps each node's records apart (PostgreSQL): a pid names a
 * process on one machine only.
 */
struct store_proc {
	char job_id[40];
	int64_t pid;       /* the group's leader, whose pid is the group id */
	int64_t start_min; /* its start time lies between these, in clock */
	int64_t start_max; /* ticks after boot (/proc/PID/stat's) */
	char boot_id[40];  /* the boot it started in */
};

/* Which fields a transition writes (struct store_transition.set). */
enum {
	STORE_SET_RUN_AT = 1u << 0,
	STORE_SET_ATTEMPT = 1u << 1,
	STORE_SET_OUTPUT = 1u << 2,       /* output and model_output */
	STORE_SET_ERROR = 1u << 3,
	STORE_SET_SUSPEND = 1u << 4,      /* suspend_payload */
	STORE_SET_RESUME = 1u << 5,       /* resume_data */
	STORE_SET_CHECKPOINT = 1u << 6,
	STORE_SET_DECISION = 1u << 7,     /* decision, reason, decided_at=now */
	STORE_SET_STARTED = 1u << 8,      /* started_at = now */
	STORE_SET_FINISHED = 1u << 9,     /* finished_at = now */
	STORE_SET_EXPIRES_AT = 1u << 10,
	STORE_SET_PROGRESS = 1u << 11,
	STORE_SET_APPROVALS = 1u << 12,   /* approvals and quorum, below */
	STORE_SET_VIEWS = 1u << 13,       /* views (store_job.views) */
};

/* A transition: a compare-and-set on the job's status, committed with
 * one event. json_t and string fields are borrowed until the done callback
 * has run. A field is written only when its bit is in set; a NULL json_t
 * with its bit set clears the column. Transitions to a terminal status set
 * finished_at whether or not STORE_SET_FINISHED is given. STORE_SET_RUN_AT
 * with run_at 0 means now. A transition into suspended or
 * awaiting_approval without STORE_SET_EXPIRES_AT sets expires_at to now +
 * the job's ttl_ms when it has one (as a creation awaiting approval gets
 * created_at + ttl_ms when it gives no expires_at). */
struct store_transition {
	char job_id[40];
	unsigned from_mask; /* statuses the job may be in; STORE_MASK(...) */
	int to;             /* enum store_status */
	int event;          /* enum store_event_type, appended with the change */
	json_t *event_data; /* the event's data (display view), or NULL */
	unsigned set;       /* STORE_SET_* */
	int64_t run_at;
	int attempt;
	json_t *output;
	json_t *model_output;
	json_t *error;
	json_t *suspend_payload;
	json_t *resume_data;
	json_t *checkpoint;
	int decision;
	const char *reason;
	int64_t expires_at;
	json_t *progress;
	json_t *views;
	/* Who makes the transition and how: its event's by, via and client
	 * (borrowed), and with STORE_SET_DECISION the job's decided_by and
	 * decided_via. by NULL: berthd itself (STORE_BERTHD). */
	const char *by;
	const char *via;
	json_t *client;
	/* STORE_SET_APPROVALS: the job's approvals become approvals (an
	 * array, borrowed) and its quorum quorum, only if it holds exactly
	 * approvals_had approvals now; else nothing changes and the result
	 * is STORE_ECONFLICT with the job as it is. Two approvals decided
	 * on the same list can so never both count on it. */
	json_t *approvals;
	int approvals_had;
	int quorum;
	/* The attempt of the run a transition from running ends (0: any).
	 * On a shared store (PostgreSQL) a job running at another attempt
	 * is a conflict: the end of an earlier run of the job, held back
	 * while the database was out of reach, after another node recovered
	 * the job and this node claimed it again. A node of its own
	 * (SQLite) never finds its job at another attempt while a run of it
	 * lasts, and does not check it. */
	int run_attempt;
};

/* A claim: moves up to limit runnable jobs (status pending, run_at <= now,
 * tool not paused) to running, highest priority first, then earliest
 * run_at, then smallest id, setting started_at and appending a "started"
 * event for each, in one transaction. caps bounds how many jobs of a tool
 * may be claimed (tools not in caps are bounded by limit alone); a cap of
 * 0 skips the tool. The claim also reports the next run_at that concerns
 * its caller (req->next_run_at).
 *
 * Groups: a cap whose group is k > 0 takes no part of limit; its tool's
 * jobs count against groups[k - 1] instead (and its own remaining), so
 * that one claim fills two kinds of room that do not share (the worker's
 * slots, which limit sizes, and each set of worker processes with room,
 * docs/WORKERS.md) without either kind starving the other. A claim ends
 * when limit and every group are spent or no job is left to take; limit
 * may be 0 when only groups have room.
 *
 * For a database several nodes share (PostgreSQL), limit is the tool's
 * concurrency for the whole cluster: when it is > 0 the claim counts the
 * tool's running jobs in the database, under a lock that serializes the
 * claims of that tool on every node, and claims at most limit minus that
 * count (and at most remaining). 0 means no cluster-wide limit. SQLite,
 * with one node, uses remaining only.
 *
 * pool: the tool's jobs also take slots of a pool the claim's caps share
 * (the worker's threads for C tools, worker/sched.c): at most
 * pool_remaining jobs of all the tools so marked are claimed. A pool
 * spent excludes them as a cap of 0 would. The pool narrows the room a
 * cap draws on (limit's or its group's) and is no room of its own: a job
 * of a pooled cap takes one of each. (berthd marks only caps of limit's:
 * a worker process's job takes none of its threads.) */
struct store_cap {
	const char *tool;
	int remaining;
	int limit;
	bool pool;
	int group; /* 0: limit's; k > 0: groups[k - 1] */
};

/*
 * struct store_req is one mutation. The caller allocates it (embedding it
 * in its own struct is the intended use), fills op and the matching part,
 * sets done, and hands it to store_submit. The store owns nothing in it:
 * after done has run, the caller frees what it put in and what the store
 * put out (job, jobs, with store_job_free).
 */
struct store_req {
	int op; /* enum store_op */
	void (*done)(struct store_req *req, int rc);
	void *data; /* the caller's */

	union {
		/* STORE_OP_CREATE. job holds the new job: the caller fills
		 * every field it has (tool, status PENDING or
		 * AWAITING_APPROVAL, input, ...); an empty id gets a fresh
		 * UUIDv7; created_at/updated_at are stamped by the store. The
		 * "created" event (with event_data) is appended, and when
		 * the status is AWAITING_APPROVAL an "approval_requested"
		 * event too, with approval_event_data (the approval view),
		 * or event_data when approval_event_data is NULL. When
		 * (tool, idempotency_key) already names a job, nothing is
		 * written, existed is set and out holds that job.
		 *
		 * start claims the new job in the same transaction, as a
		 * claim would: it is written running (started_at now; on a
		 * shared store, under this node's lease), and a "started"
		 * event follows "created"; job (out) still shows the job as
		 * submitted, pending. For a caller that runs the job itself
		 * (the worker's submit_and_run), of a tool with no
		 * concurrency limit: the start counts no other node's jobs.
		 * Only for a PENDING job without an idempotency key. On a
		 * shared store, a tool paused (by any node) when the
		 * creation commits is not started: the job is written as
		 * submitted, and the transition that ends the run meets it
		 * pending (STORE_ECONFLICT). */
		struct {
			struct store_job *job;       /* borrowed */
			json_t *event_data;          /* borrowed */
			json_t *approval_event_data; /* borrowed, or NULL */
			/* approval_requested carries no data (its view is
			 * still to come, docs/WORKERS.md) rather than
			 * event_data. */
			bool approval_event_empty;
			bool start;
			/* The events of a creation are the submitter's
			 * (job->submitted_by and submitted_via; started:
			 * berthd's), with this MCP client (borrowed), or
			 * NULL; by and via (borrowed) name who created it
			 * when that is not the submitter (a retry: who
			 * retried), NULL otherwise. */
			json_t *client;
			const char *by, *via;
		} create;

		struct store_transition transition;

		struct {
			int limit;
			int64_t now;
			const struct store_cap *caps;
			size_t ncaps;
			/* Most jobs running at once in the whole cluster
			 * (PostgreSQL; 0: none). Counted in the database
			 * under a lock, like a cap's limit. It bounds the
			 * jobs of limit and of the groups together. */
			int global_limit;
			/* The room of each group (above); caps name them
			 * 1-based. */
			const int *groups;
			size_t ngroups;
			/* What is left of the pool of the caps marked
			 * pool (struct store_cap). */
			int pool_remaining;
			/* Out (SQLite): the virtual machine steps of the
			 * claim's reads, which follow the jobs it read, for
			 * the tests that a claim's cost follows what it
			 * takes and not the backlog. */
			int64_t steps;
		} claim;

		/* STORE_OP_CHECKPOINT: sets the checkpoint of a job that is
		 * running (else STORE_ECONFLICT). No event. */
		struct {
			char job_id[40];
			json_t *value;
		} checkpoint;

		/* STORE_OP_PROGRESS: sets progress of a running job. No
		 * event. */
		struct {
			char job_id[40];
			json_t *progress;
		} progress;

		/* STORE_OP_LOG: appends lines to a job's log; drops the
		 * oldest beyond max_lines per job (0: keep all). */
		struct {
			char job_id[40];
			const struct store_log_line *lines; /* n is assigned */
			size_t nlines;
			int64_t max_lines;
		} log;

		/* STORE_OP_EXPIRE: every suspended or awaiting_approval job
		 * whose expires_at <= now becomes expired, with its event. */
		struct {
			int64_t now;
		} expire;

		/* STORE_OP_TOOL_PAUSE: the durable paused flag of a tool. */
		struct {
			const char *tool;
			bool paused;
		} pause;

		/* STORE_OP_PRUNE: deletes terminal jobs finished before
		 * `before`, with their events and logs. Never a non-terminal
		 * job's events. seq values are never reused. */
		struct {
			int64_t before;
		} prune;

		/* STORE_OP_PROC: records proc for this node, replacing its
		 * record of the same pid; with remove, deletes this node's
		 * record of the same pid and start_min (none is no error). No
		 * event, and no job is read: the job may be gone. */
		struct {
			struct store_proc proc;
			bool remove;
		} proc;

		/* STORE_OP_TOOL_DEFINE: stores the definition (an object)
		 * of a tool that worker processes serve (docs/WORKERS.md),
		 * replacing the one of the same name; with remove, deletes
		 * it (none is no error). No event. */
		struct {
			const char *name;
			json_t *definition;
			bool remove;
		} define;
	} u;

	/* Results, valid in done. */
	struct store_job *job;    /* CREATE, TRANSITION (also on conflict) */
	bool existed;             /* CREATE: the idempotency key was known */
	struct store_job **jobs;  /* CLAIM, EXPIRE: the jobs changed */
	size_t njobs;
	/* CLAIM: the earliest run_at later than the claim's now of a pending
	 * job whose tool the claim did not exclude (a cap left at 0 by the
	 * end of the claim, or a cluster limit full; a paused tool), read in
	 * the claim's transaction; 0 when there is none. A due job the claim
	 * left waits for the pool (whose freed slot claims again) or is
	 * another node's (SKIP LOCKED), so no timer is needed for it; an
	 * excluded tool's jobs are claimed when its slot is freed. This is
	 * what the scheduler arms its run timer from. */
	int64_t next_run_at;
	int64_t count;            /* PRUNE: jobs deleted */

	/* Private to the store. */
	struct store_req *next_;
};

/*
 * store_submit queues req for the writer. Returns 0, after which done will
 * be called exactly once on the loop thread; or a negative code
 * (-ESHUTDOWN, -EINVAL), in which case done is never called.
 */
int store_submit(struct store *st, struct store_req *req);

/* store_req_finish frees the results the store put in req (job, jobs). */
void store_req_finish(struct store_req *req);

/* ---- reads (loop thread, never behind a commit) ----------------------- */

/* store_get sets *out to a new job. Returns 0, -ENOENT or a storage
 * error. */
int store_get(struct store *st, const char *id, struct store_job **out);

struct store_filter {
	unsigned status_mask; /* 0: any */
	const char *tool;     /* NULL: any */
	const char *run_id;   /* NULL: any */
	/* NULL: any; else only the jobs whose id begins with it (lower-case
	 * hex digits and '-': what an id is made of; anything else matches
	 * no job). Read as a range of the primary key. */
	const char *id_prefix;
};

/*
 * store_list returns jobs matching f, newest first (by id, which is
 * time-ordered), at most limit of them, starting after the opaque cursor
 * (NULL: from the newest). *next is a malloc'd cursor when more may
 * follow, else NULL. Returns 0, -EINVAL for a cursor it did not make, or a
 * storage error. The caller frees each job and the array.
 */
int store_list(struct store *st, const struct store_filter *f, int limit,
	       const char *cursor, struct store_job ***jobs, size_t *n,
	       char **next);

/* store_list_cursor returns a malloc'd cursor of store_list that goes on
 * after the job id (a page cut short by its caller), or NULL when out of
 * memory. */
char *store_list_cursor(const char *id);

/* store_events reads up to limit events with seq > after, oldest first,
 * of one job when job_id is not NULL. The caller frees each event with
 * store_event_finish and the array with free. */
int store_events(struct store *st, int64_t after, const char *job_id,
		 int limit, struct store_event **out, size_t *n);

/* A read of the events of some types (store_events_typed). */
struct store_event_query {
	int64_t after;      /* the events with seq > after */
	const char *job_id; /* of this job only, or NULL for every job */
	unsigned types;     /* STORE_MASK of the event types wanted; not 0 */
	int limit;          /* at most this many returned (>= 1) */
	int scan;           /* at most this many seqs looked through (>= 1) */
};

/* STORE_EVENTS_SCAN is the span of events/poll's reads by type: looking
 * through it costs less than reading a page of 1000 events (docs/API.md,
 * whose figures are of this read). */
enum { STORE_EVENTS_SCAN = 10000 };

/*
 * store_events_typed reads as store_events does, but returns only the
 * events whose type is in q->types, oldest first, and looks through a
 * span of at most q->scan seqs: from the first event after q->after (of
 * the job) on, and never past the last seq committed. So types that match
 * little cannot make one read walk the whole log, and a pruned stretch
 * before the span costs nothing. *next receives the seq the read covered:
 * the last event returned when it returned q->limit, else the end of the
 * span (q->after when no event follows it). Reading on from *next, a
 * caller misses no event of those types and looks at none twice. *more is
 * false when the span reached the last seq committed without filling the
 * page: no event of those types is past *next yet. The caller frees each
 * event with store_event_finish and the array with free. The reads
 * without types (store_events) are untouched by it.
 */
int store_events_typed(struct store *st, const struct store_event_query *q,
		       struct store_event **out, size_t *n, int64_t *next,
		       bool *more);

/* store_last_seq returns the highest seq ever committed (0 when none), as
 * the read connection sees it. */
int64_t store_last_seq(struct store *st);

/* store_count_by_status fills counts[STORE_NSTATUS]. */
int store_count_by_status(struct store *st, int64_t counts[STORE_NSTATUS]);

/* store_logs reads up to limit log lines of a job with n > after. */
int store_logs(struct store *st, const char *job_id, int64_t after, int limit,
	       struct store_log_line **out, size_t *n);

/* store_procs reads this node's process records (STORE_OP_PROC) into a new
 * array *out of *n, which the caller frees. Returns 0 or a storage
 * error. */
int store_procs(struct store *st, struct store_proc **out, size_t *n);

/* A stored definition of a tool that worker processes serve. */
struct store_definition {
	char *name;
	json_t *definition;
};

/* store_definitions reads every stored definition (STORE_OP_TOOL_DEFINE)
 * into a new array *out of *n, by name; the caller frees each with
 * store_definition_finish and the array with free. Returns 0 or a
 * storage error. */
int store_definitions(struct store *st, struct store_definition **out,
		      size_t *n);
void store_definition_finish(struct store_definition *d);

/* store_tool_paused returns 1 when the tool is paused, 0 when not, or a
 * negative code. */
int store_tool_paused(struct store *st, const char *tool);

/* store_next_run_at sets *at to the smallest run_at of a pending job of a
 * tool that is not paused (0 when none). store_next_expiry sets *at to the
 * smallest expires_at of a suspended or awaiting_approval job (0 when
 * none). */
int store_next_run_at(struct store *st, int64_t *at);
int store_next_expiry(struct store *st, int64_t *at);

/* ---- start-up --------------------------------------------------------- */

/*
 * store_recover is called once at start-up, before serving, on the loop
 * thread (it commits synchronously). Every job found running is put back
 * to pending with attempt raised by one and a "retrying" event whose data
 * is {"reason": "interrupted"}, unless may_rerun(arg, tool) returns false
 * or attempt > max_retries, in which case it becomes failed with error
 * {"message": "interrupted by a restart of berthd ...", "code":
 * "interrupted"} and a "failed" event. Returns the number of jobs recovered
 * (>= 0) or a negative code.
 *
 * On PostgreSQL "every job found running" means every job whose lease this
 * node holds; the store also keeps may_rerun and arg to recover, by the
 * same policy, the jobs of other nodes whose leases expired (a node that
 * died), until store_requeue_running or store_close. arg must stay valid
 * until then.
 */
int store_recover(struct store *st, bool (*may_rerun)(void *arg, const char *tool),
		  void *arg);

/*
 * store_know_tools tells a shared store (PostgreSQL) which tools this node
 * knows, for its recovery of other nodes' expired leases: a job whose tool
 * known(arg, tool) does not know is left running, with its lease expired,
 * for a node that knows the tool's interrupt policy (the dead node's
 * restart, or any node that has the tool) to recover it. may_rerun alone
 * cannot tell "must not run again" from "not a tool of this node", and a
 * node without the tool failed jobs that its policy would have retried.
 * known NULL (the default): every tool is known, and may_rerun decides for
 * all. Call before store_recover, on the loop thread; arg must stay valid
 * as store_recover's does. A store of one node (SQLite) ignores it: its own
 * restart recovers its jobs by may_rerun.
 */
void store_know_tools(struct store *st, bool (*known)(void *arg, const char *tool),
		      void *arg);

/*
 * store_requeue_running puts every running job back to pending without
 * raising attempt (a clean shutdown, which uses up no retry), with a
 * "retrying" event whose data is {"reason": "shutdown"}. Synchronous, for
 * the end of a clean shutdown after running work was stopped. Returns the
 * number of jobs or a negative code.
 */
int store_requeue_running(struct store *st);

/* ---- moving a database ------------------------------------------------ */

/*
 * store_copy copies the SQLite database at from into the PostgreSQL
 * database named by the URL to (migrated first; it must hold no job and
 * no event): jobs, their payloads and decisions, events with their seq,
 * job logs and tool state, in one transaction. Running jobs stay running
 * with no lease, so the first node to start with their tools recovers
 * them by the interrupt policy (store_know_tools). The SQLite database is locked as a daemon would lock it, so it
 * must not be in use. Returns 0, or a negative code and sets *errmsg to a
 * malloc'd sentence.
 */
int store_copy(const char *from, const char *to, char **errmsg);

#endif

/*
 * internal.h: what the worker's files share and nothing outside worker/
 * (and its unit tests) may use. Internal names carry a double prefix
 * (worker__), as libuv's do.
 *
 * Threads. Everything here runs on the loop thread except the fields a
 * comment marks "pool": those are touched by the thread pool thread that
 * runs a C tool's execute, under hub->mu or through atomics.
 */
#ifndef BERTH_WORKER_INTERNAL_H
#define BERTH_WORKER_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "berth/berth.h"
#include "schema/schema.h"
#include "store/store.h"
#include "worker/worker.h"

#define WORKER__NSCHEMA 5

/* Defaults of struct worker_config and struct berth_background. */
#define WORKER__WORKERS 4
#define WORKER__TIMEOUT_MS 300000
#define WORKER__KILL_GRACE_MS 5000
/* How long an external tool's process may take to start (run.c,
 * worker__run_arm_start). A start takes a millisecond or so, and a backlog
 * of them on a loaded machine up to seconds (docs/BENCHMARKS.md); an exec
 * that has not returned after a minute waits for something that may never
 * come (a hung filesystem), and its job must not wait with it. */
#define WORKER__START_TIMEOUT_MS 60000
/* An external tool's process has exited, and its stdout or stderr is still
 * open, held by a process it left behind: after this long, its group is
 * SIGKILLed and the pipes are no longer read (proc.c). */
#define WORKER__REAP_GRACE_MS 1000
/* The size of the buffer external tools' pipes are read into (proc.c). */
#define WORKER__PROC_BUF 65536
/* The spawner's threads (spawn.c): two starts can be under way at once, so
 * that one child slow to reach its exec (a full run queue) does not hold
 * up the next. */
#define WORKER__SPAWN_THREADS 2
#define WORKER__SHUTDOWN_GRACE_MS 10000
#define WORKER__MAX_OUTPUT (64 * 1024 * 1024)
#define WORKER__MAX_LOG (1024 * 1024)
#define WORKER__MAX_LOG_LINES 10000
#define WORKER__RETENTION_MS (7 * 24 * 3600 * 1000LL)
#define WORKER__BACKOFF_MS 1000
#define WORKER__BACKOFF_MAX_MS 300000
/* Worker processes (remote.c): the heartbeat, and how long berthd waits
 * for the answer to an "input" or "transform" request before it goes on
 * without it (docs/WORKERS.md). */
#define WORKER__HEARTBEAT_MS 10000
#define WORKER__ASK_MS 5000

/* The member of a job's metadata that says the job came through MCP:
 * {"_meta": the tools/call's _meta, "clientInfo": the client's, from
 * initialize}, each when there is one (berth.h, berth_ctx_mcp_meta;
 * docs/MCP.md). Only berthd sets it. */
#define WORKER__MCP_META "mcp"

/* An external tool's command, from its manifest. */
struct worker__cmd {
	char **argv; /* NULL-ended; argv[0] made absolute if it was relative */
	char **env;  /* "NAME=value", NULL-ended: added to a scrubbed env */
	char *cwd;
	char *path;  /* the manifest, for messages */
};

/*
 * struct worker__policy is a tool's approvalPolicy (policy.c), as parsed
 * and checked at load.
 *   self_approval   -1: not said (worker_config.self_approval), 0, 1
 *   approvers       principal names and "role:NAME", or none: anyone
 *                   who may call jobs/approve
 *   approver_roles  the roles those "role:NAME" name, BERTH_ROLE_*
 *   quorum          distinct approvals a job needs, >= 1
 *   declared        the policy as written, or NULL: none was
 */
struct worker__policy {
	int self_approval;
	char **approvers;
	size_t napprovers;
	unsigned approver_roles;
	int quorum;
	json_t *declared;
};

/*
 * struct worker_tool is a registered tool. Both kinds keep their own parsed
 * copies of every JSON field; a C tool also keeps its borrowed declaration
 * for the functions (c), an external tool its command (cmd).
 */
struct worker_tool {
	char *id;
	char *title;
	char *description;
	json_t *schema_doc[WORKER__NSCHEMA]; /* by enum worker_schema_kind */
	struct schema *schema[WORKER__NSCHEMA];
	bool strict;
	bool require_approval;
	struct berth_background bg;
	json_t *annotations;
	json_t *meta;
	json_t *input_examples;
	json_t *provider_options;
	/* A definition's declarative transform ({"display": {STAGE: SPEC},
	 * "transcript": ...}, view.c), checked at load; NULL for none and
	 * for a C tool, whose functions transform. */
	json_t *transform;
	struct worker__policy policy;

	const struct berth_tool *c; /* NULL for an external tool */
	struct worker__cmd *cmd;    /* NULL for a C tool */
	json_t *source; /* an external tool's manifest as read: a reload
			   tells a changed manifest from the same one by it */

	/* A tool served by worker processes (remote.c; neither c nor cmd
	 * set): its definition as registered and stored (NULL for C and
	 * external tools), which of its function fields it has, and, per
	 * view target (by enum worker_view - 1), whether its transform
	 * declares the target and the stages whose views its functions
	 * compute (1u << BERTH_PAYLOAD_*). */
	json_t *definition;
	size_t definition_size; /* its compact JSON's bytes */
	unsigned fns; /* WORKER__FN_* */
	bool view_declared[2];
	unsigned view_stages[2];
	/* The connections serving it that take runs (not draining), and
	 * their concurrency summed, for tools/list. */
	int serving;
	int capacity;

	/* References: the registry's, one per run started under this
	 * definition, one per operation that uses it after its request
	 * returned (a submission's reply, a pause). A reload that changes
	 * or removes the tool drops the registry's; the runs of the old
	 * definition finish under it. Loop thread only. */
	int refs;
	/* Runs holding a slot, of every definition of this id (a reload
	 * counts them again for the new one, and a run gives its slot back
	 * to whichever definition holds the id then), so that a changed
	 * tool's concurrency counts the runs of the old one. */
	int running;
	/* Submissions judged under this definition whose job is not yet
	 * committed (an input question may hold one): tools/forget waits
	 * for them, as it waits for the jobs they make. */
	int submitting;
	/* The durable paused flag as this node last knew it, for starting
	 * jobs at submission (single node only): unknown until read. A
	 * pause counts from its request, an unpause from its commit. */
	enum { WORKER__PAUSE_UNKNOWN, WORKER__PAUSE_NO, WORKER__PAUSE_YES } pause;
};

/* The function fields of a worker process's tool (its definition's
 * "functions" and requireApproval "function"). */
enum {
	WORKER__FN_APPROVAL = 1u << 0,
	WORKER__FN_TO_MODEL_OUTPUT = 1u << 1,
	WORKER__FN_ON_INPUT = 1u << 2,
	WORKER__FN_ON_OUTPUT = 1u << 3,
};

/*
 * The hub carries messages from pool threads to the loop thread (progress,
 * log lines, checkpoints) through one uv_async. It is reference counted
 * with an atomic so that a C tool that never returns can keep it after the
 * worker is gone; once closed, pool threads drop what they would send.
 */
enum { WORKER__MSG_PROGRESS = 1, WORKER__MSG_LOG, WORKER__MSG_CHECKPOINT };

struct worker__wait {
	bool done;
	int rc;
};

struct worker__msg {
	struct worker__msg *next;
	int kind;
	struct worker__run *run; /* holds a reference */
	json_t *value;           /* log data, checkpoint value */
	char *level;
	char *message;
	int64_t at;
	struct worker__wait *wait; /* a checkpoint's waiting pool thread */
};

struct worker__hub {
	uv_mutex_t mu;
	uv_cond_t cond;
	atomic_int refs;
	bool closed;         /* mu */
	uv_async_t *async;   /* mu; the worker's */
	struct worker__msg *head, *tail; /* mu */
};

enum worker__run_state {
	WORKER__RUN_ACTIVE = 0, /* executing; its outcome is awaited */
	WORKER__RUN_FINISHING,  /* its final transition is being committed */
	WORKER__RUN_DONE,       /* the job is no longer this run's */
};

enum worker__abort {
	WORKER__ABORT_NONE = 0,
	WORKER__ABORT_CANCEL,
	WORKER__ABORT_TIMEOUT,
	WORKER__ABORT_SHUTDOWN,
	WORKER__ABORT_FINISHED, /* done; a process still alive is reaped */
};

/* The shortest queue of claimed runs that wait for a thread (sched.c's
 * in_hand): a thread that frees takes the next without a claim's commit
 * in between. The queue must hold what the threads run while a claim is
 * on its way (Little's law: runs a second times a claim's time): with
 * short runs, 2,000 a second and claims of 10-30 ms under load, 20-60.
 * With the default --threads 2, suspend cycles of a C tool ran at
 * 188-209/s with none and 1,169-1,939/s with 16 (2,000/s with --threads
 * 64) at load 2.5; at load 5-8 a queue of 16 still left a backlog of
 * seconds (392-948 cycles/s, done p50 1.0-2.7 s) that 64 drains (486-1,578
 * cycles/s, done p50 22-290 ms; docs/BENCHMARKS.md). */
#define WORKER__THREAD_QUEUE 64

struct berth_ctx {
	struct worker__run *run;
};

struct worker__proc;
struct worker__rcall;
struct worker__ask;

/*
 * struct worker__run is one try of a claimed job. Its references: one for
 * the scheduler (from the claim until the job is done and the executor has
 * ended, dropped in the timer's close callback), one for the executor
 * while it runs, one per queued hub message and store request.
 */
struct worker__run {
	atomic_int refs;
	struct worker *w;        /* NULL once detached at shutdown */
	struct worker_tool *tool; /* NULL: no such tool */
	struct store_job *job;   /* as claimed; never changed while running */
	int state;               /* enum worker__run_state */
	int abort_reason;        /* enum worker__abort */
	/* A timeout's error, while the process or worker process it told to
	 * stop is still there: the try ends with it once that is gone. */
	json_t *timed_out;
	atomic_bool aborted;     /* pool: berth_ctx_aborted */
	bool slot_held;
	bool thread_slot;        /* the slot is also one of cfg.threads */
	bool queued;             /* waits for a thread (exec.c) */
	bool exec_unrun;         /* ended without execute (exec.c) */
	struct worker__run *queued_next;
	bool exec_started;
	bool exec_done;
	bool listed;
	uv_timer_t timer;        /* the timeout, then transition retries */
	struct worker__op *final; /* the final transition, while finishing */
	bool final_waiting;      /* final waits for its retry timer, not
				  * in the store */
	struct worker__run *prev, *next;
	struct worker__run *id_next; /* worker.by_id's bucket */

	/* What execute gets, prepared on the loop thread by
	 * worker__run_start: the input, request context and resume data
	 * with their schemas' defaults filled in (the job keeps what the
	 * client sent). New references; they may be the job's own values
	 * when nothing was filled. */
	json_t *p_input, *p_rc, *p_resume;

	/* C tools. The x_ values are deep copies the pool thread reads (a
	 * nonblocking tool's, references to the prepared values and the
	 * job's own). */
	uv_work_t work;
	bool exec_inline;                /* nonblocking: on the loop */
	struct worker__run *inline_next; /* worker.inline_head's list */
	struct berth_ctx ctx;
	const struct berth_tool *c;
	struct worker__hub *hub;
	json_t *x_input, *x_rc, *x_resume, *x_suspend, *x_checkpoint;
	json_t *x_metadata;
	struct berth_outcome outcome;
	json_t *progress_latest; /* pool + loop, under hub->mu */
	bool progress_queued;    /* hub->mu */

	/* The built-in sleep waits on this timer of the loop, not on a
	 * thread (exec.c): from wait_from for wait_ms; waiting until its
	 * outcome is handed over. */
	uv_timer_t wait;
	bool waiting;
	int64_t wait_from, wait_ms;

	/* External tools. */
	struct worker__proc *proc;

	/* Worker processes (remote.c). remote is the connection the run
	 * was pushed to, until its run there ends (answered, given up at
	 * the kill grace, or the connection gone); rcall its "run" request
	 * while it waits for the answer; grace the kill grace after an
	 * abort. fresh holds the views of the outcome (VIEWS, filtered to
	 * what the tool declares) and code the code of an error outcome,
	 * until the final transition stores them. */
	struct worker_remote *remote;
	struct worker__rcall *rcall;
	/* While an answer of the worker process is taken (remote.c): the
	 * principal its transition is recorded as, via "worker" (borrowed
	 * from the remote); NULL otherwise, and a transition is berthd's
	 * (a timeout, onInterrupt, a put back). */
	const char *by_remote;
	struct worker__run *rprev, *rnext; /* the remote's runs */
	uv_timer_t grace;
	bool grace_open;
	json_t *fresh;
	char *code;
	/* The stages whose views the run asked for (pending.views), whether
	 * it asked for onInputAvailable, whether the worker answered with a
	 * well-formed outcome, and whether that outcome is the worker's own
	 * error (whose views it carries), not one berthd made. */
	unsigned asked;
	bool asked_hook;
	bool answered;
	bool worker_error;
	/* Started in its creation's transaction (ops.c): it is pushed to a
	 * worker process, or its process started, once that commits
	 * (worker__run_push). */
	bool held;
	/* The run holds one of the slots (--workers): C and external
	 * tools; a worker process's run does not (its connection's room is
	 * its own). */
	bool slot;

	/* The log this run wrote (worker__run_log): message and data
	 * bytes, and lines. Once full, one line says so and the rest is
	 * dropped. */
	int64_t log_bytes, log_lines;
	bool log_capped;

	/* Progress writes: at most one in flight, the newest kept. */
	bool progress_writing;
	json_t *progress_next;
};

/*
 * struct worker__op is one operation: a store request and everything it
 * needs until its callback has run. inflight counts them, so that shutdown
 * waits for every store callback before it lets the worker go.
 */
struct worker__op {
	struct store_req req;
	struct worker *w;
	worker_cb cb;
	void *arg;
	void (*then)(struct worker__op *op, int rc);
	struct worker__run *run;   /* holds a reference */
	struct worker__wait *wait; /* a C tool's checkpoint */
	struct worker_tool *tool;  /* holds a reference */
	bool submitting;           /* counted in tool->submitting */
	json_t *own[6];            /* references dropped at the end */
	char *sown[2];
	struct store_job *job;     /* a job the op owns */
	struct store_job *job2;    /* another (a job read for a conflict) */
	struct store_cap *caps;
	int *groups;     /* a claim's groups (in the caps' block) */
	uint64_t wakes;  /* a claim: worker.wakes when it was sent */
	struct store_log_line *lines;
	size_t nlines;
	/* A submission whose run started before its creation committed
	 * (submit_and_run), which creates it started (create.start). */
	bool run_now;
	/* Who asks (worker_actor), copied: the audit of the transition, and
	 * an approval's judge, which ops.c may consult again (a decision
	 * judged anew when another approval landed first). name NULL:
	 * berthd. */
	char *by_name;
	char *by_via;
	json_t *by_client;
	unsigned by_roles;
	/* A creation of another's request (a retry): its events name by,
	 * not the job's submitter. */
	bool creator;
	bool approve;  /* a decision: approve, else decline */
	int tries;     /* of a decision, judged again */
	/* A reply deferred to the next loop iteration. */
	struct worker__op *next;
	int err;
	char *message;
	json_t *data;
};

struct worker__listener {
	worker_progress_fn fn;
	void *arg;
};

/*
 * struct worker_remote is a worker process's connection that registered
 * tools (remote.c). The api holds it from worker_remote_register until
 * worker_remote_detach; its heartbeat timer holds it until closed; it is
 * freed when neither does. Loop thread only.
 */
struct worker_remote {
	struct worker *w; /* NULL once detached, or the worker closed */
	const struct worker_remote_ops *ops;
	void *conn;
	char id[48];
	char *name;
	char *by; /* the principal its connection acts as, or NULL */
	json_t *sdk;
	struct worker_tool **tools; /* sorted by id; a reference each */
	size_t ntools;
	int concurrency;
	int inflight; /* runs pushed whose run here has not ended */
	bool draining;
	bool api_held; /* the api's reference, until detach */
	bool timer_open;
	/* No job of its tools was left to claim for it when a claim last
	 * looked (sched.c); cleared when jobs may have become runnable. */
	bool dry;
	int group; /* its group in the claim in flight (1-based), or 0 */
	int pings; /* heartbeats sent and unanswered */
	uint64_t ping_at; /* when the last was sent (uv_now) */
	uv_timer_t heartbeat;
	struct worker__run *runs;
	struct worker_remote *prev, *next;
};

struct worker {
	uv_loop_t *loop;
	struct store *st;
	struct worker_config cfg;

	struct worker_tool **tools; /* sorted by id */
	size_t ntools, captools;
	char **dirs;                /* the --tools folders, for reloads */
	size_t ndirs;
	/* Tools whose jobs wait, left out of claims: removed by a reload,
	 * or unknown when a claim brought one of their jobs (gone after a
	 * restart; on a shared database, another node's). Registering a
	 * tool of the name takes it out and wakes its jobs. */
	char **missing;
	size_t nmissing, capmissing;

	struct worker__run *runs; /* every run still holding a reference */
	struct worker__run **by_id; /* the same runs, hashed by job id */
	size_t nby_id;              /* buckets: a power of two */
	int busy;                 /* runs holding a slot */
	/* Of those, runs of C tools that take a thread (CPU work), claimed
	 * apart from the rest up to cfg.threads and a queue as long
	 * (WORKER__THREAD_QUEUE at least; sched.c); at most cfg.threads of
	 * them execute at once (threads_running), the others wait in claim
	 * order for a thread (exec.c). */
	int threads_busy;
	int threads_running;
	struct worker__run *queued_head, *queued_tail;

	/* Scheduling (sched.c). */
	bool started;
	/* Runnable jobs may be pending (a job went pending, was retried,
	 * resumed or approved, a tool was unpaused) and no claim has since
	 * come back short of its limit. While it is set every new job waits
	 * for a claim; while it is clear a nonblocking tool's new job can
	 * run at its submission (worker__sched_may_start). */
	bool backlog;
	uint64_t started_at_submit, started_by_claim, claims; /* worker_stats */
	uint64_t claims_empty;
	/* Another node's jobs whose "created" event showed them submitted,
	 * heard in the delivery that is still being handed out: the idle
	 * handle claims for them unless their "started" event came in the
	 * same delivery (on_store_event). peer_created_over: more than fit
	 * here, so the claim is asked whatever follows. */
	char peer_created[32][40];
	int npeer_created;
	bool peer_created_over;
	bool claim_inflight;
	bool claim_again;
	/* The claim in flight left a connection with room out (its tools
	 * overlap a group's): another claim follows it. */
	bool claim_skipped;
	int64_t last_claim_now;  /* the "now" of the last claim */
	int64_t next_run_at;     /* the last claim's req.next_run_at */
	uv_timer_t run_timer;    /* next_run_at and the wakeups */
	uv_timer_t expiry_timer; /* store_next_expiry */
	uv_timer_t prune_timer;
	int64_t *wakeups;        /* future run_at values seen, sorted */
	size_t nwakeups, capwakeups;

	struct worker__hub *hub;
	uv_async_t async;

	/* Replies deferred to the next loop iteration (an operation never
	 * calls back before it returned). */
	uv_idle_t idle;
	struct worker__op *deferred, *deferred_tail;
	/* Runs of nonblocking C tools waiting for the idle handle. */
	struct worker__run *inline_head, *inline_tail;

	struct worker__listener *listeners; /* fn NULL: removed */
	size_t nlisteners;
	bool notifying;      /* worker__progress is calling listeners */
	bool listeners_dirty; /* a listener was removed meanwhile */

	int inflight; /* operations not yet freed */

	/* Worker processes (remote.c): their connections, a count of the
	 * events that may have made jobs runnable, by which a claim tells
	 * whether it may leave a connection dry (sched.c), and the jobs
	 * started at their submission whose creation has not committed yet
	 * (ops.c), which are the connections' to take. */
	struct worker_remote *remotes;
	uint64_t wakes;
	int remote_starting;

	/* External tools (proc.c): the one buffer their pipes are read
	 * into, and the stack their children start on (spawn.c); both made
	 * at the first run, freed by worker_destroy. */
	char *proc_buf;
	struct worker__spawner *spawner; /* made at the first process */

	/* Shutdown. */
	bool stopping;
	bool aborting;
	bool now;     /* worker_shutdown_now: no grace for anything left */
	/* Questions to worker processes ("input", "transform") whose
	 * operations wait for the answer (remote.c). */
	struct worker__ask *asks;
	bool closing;
	int open_handles;
	uv_timer_t grace_timer;
	void (*shutdown_done)(void *arg);
	void *shutdown_arg;
};

/* ---- tool.c ----------------------------------------------------------- */

/* worker__tool_new returns an empty tool with id (copied), or NULL. */
struct worker_tool *worker__tool_new(const char *id);
/* worker__tool_free frees a tool nobody references (one that was never
 * registered); a registered one goes with its last worker__tool_unref. */
void worker__tool_free(struct worker_tool *t);
void worker__tool_ref(struct worker_tool *t);
void worker__tool_unref(struct worker_tool *t);
/* worker__tool_check checks what a registration checks beyond a unique
 * id: a valid id, no negative number, input examples that pass the
 * inputSchema. Returns 0 or -EINVAL with *errmsg. */
int worker__tool_check(const struct worker_tool *t, char **errmsg);
/* worker__tools_insert puts t into the sorted array *tools; -EEXIST when
 * its id is there, -ENOMEM. */
int worker__tools_insert(struct worker_tool ***tools, size_t *n,
			 size_t *cap, struct worker_tool *t);
/* worker__tool_set_schema compiles doc (stolen) as t's schema of kind.
 * Returns 0 or -EINVAL with *errmsg naming the tool and field. */
int worker__tool_set_schema(struct worker_tool *t, int kind, json_t *doc,
			    char **errmsg);
/* worker__tool_register checks what is left to check (a valid and unique
 * id, the input examples) and adds t, which the worker then owns (its
 * reference); on an error the caller still owns t. */
int worker__tool_register(struct worker *w, struct worker_tool *t,
			  char **errmsg);
/* worker__valid_tool_name returns true for [A-Za-z0-9_.-]{1,128}. */
bool worker__valid_tool_name(const char *id);
/* worker__schema_name returns the field name of a schema kind. */
const char *worker__schema_name(int kind);
/* worker__validate validates inst against t's schema of kind, as it is.
 * Returns 0 (also when t has no such schema) or -EINVAL with *errors
 * (new). */
int worker__validate(const struct worker_tool *t, int kind,
		     const json_t *inst, json_t **errors);
/* worker__with_defaults returns a new reference to inst (borrowed) with
 * the defaults of t's schema of kind filled in (schema_apply_defaults):
 * inst itself when there is nothing to fill, NULL when inst is NULL or
 * memory ran out. */
json_t *worker__with_defaults(const struct worker_tool *t, int kind,
			      const json_t *inst);
/* worker__check fills the defaults of t's schema of kind into inst, then
 * validates what that gives, as a Zod parse does (a property that is
 * required and has a default passes when absent). Returns 0 with
 * *filled (when filled is not NULL) a new reference to the filled value,
 * or -EINVAL with *errors (new) and *filled NULL. */
int worker__check(const struct worker_tool *t, int kind, const json_t *inst,
		  json_t **filled, json_t **errors);
/* worker__check_annotations checks MCP annotations (borrowed) of tool id:
 * title a string, the hints MCP defines booleans. Returns 0, or -EINVAL
 * with *errmsg naming the member; a member MCP does not define is kept
 * and logged as a warning (log_warn). */
int worker__check_annotations(const char *id, const json_t *ann,
			      char **errmsg);
/* worker__errmsg returns a malloc'd printf-formatted string (or NULL). */
char *worker__errmsg(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* ---- policy.c --------------------------------------------------------- */

void worker__policy_init(struct worker__policy *p);
void worker__policy_finish(struct worker__policy *p);
/* worker__policy_parse reads an approvalPolicy (borrowed) into p, which
 * it finishes first. Returns 0, or -EINVAL with *errmsg "WHERE: FIELD
 * WHY", -ENOMEM. */
int worker__policy_parse(struct worker__policy *p, const json_t *v,
			 const char *where, char **errmsg);
/* worker__policy_self is true when the submitter of a job may decide it
 * under p. */
bool worker__policy_self(const struct worker__policy *p,
			 const struct worker *w);
/* worker__policy_approver is true when by is one of p's approvers (any
 * caller, when p names none). */
bool worker__policy_approver(const struct worker__policy *p,
			     const struct worker_actor *by);
/* worker__policy_to_json returns p as tools/list shows it: selfApproval
 * and quorum as they take effect, and approvers when there are. */
json_t *worker__policy_to_json(const struct worker__policy *p,
			       const struct worker *w);

/* ---- manifest.c ------------------------------------------------------- */

/* worker__tool_from_json parses a createTool definition, a JSON object
 * (borrowed) with the fields of docs/TOOLS.md, into a new tool with no
 * way to run it yet (neither c nor cmd set): what a manifest holds besides
 * its command, and what a worker process registers (issue 15). where
 * names the definition in messages (a manifest's path). extra, NULL-ended
 * or NULL, names fields the caller reads itself; any other field that is
 * not createTool's is refused, so that a misspelt "requireAproval" does
 * not silently drop an approval gate. Returns 0, or -EINVAL or -ENOMEM
 * with *errmsg "WHERE: FIELD WHY". */
int worker__tool_from_json(const json_t *def, const char *where,
			   const char *const *extra, struct worker_tool **out,
			   char **errmsg);
/* worker__manifest_load parses one manifest file into a new tool. */
int worker__manifest_load(const char *path, struct worker_tool **out,
			  char **errmsg);

/* ---- view.c ----------------------------------------------------------- */

/* worker__view returns a new reference to payload as the view shows it
 * (raw: payload itself), or NULL when payload is NULL. */
json_t *worker__view(const struct worker_tool *t, int view,
		     enum berth_payload which, const json_t *payload);
/* worker__views_take returns the views of an answer of a worker process
 * (borrowed VIEWS: {"display": {STAGE: V}, "transcript": {...}}) that t
 * declares, as a new object of the same shape, or NULL when there are
 * none. */
json_t *worker__views_take(const struct worker_tool *t, const json_t *views);
/* worker__views_merge returns new stored views (store_job.views): those
 * of stored (borrowed, may be NULL) with the views of fresh (borrowed, of
 * worker__views_take, may be NULL) put over them. The stages of t that
 * transform in `stages` (1u << BERTH_PAYLOAD_*) and have no view in fresh
 * are pending from then on; the others of `stages` are no longer. An
 * error's views are kept with the error's message (errorOf), so that an
 * error berthd makes later (a timeout, a cancel) is not shown through
 * them. hook true marks onInputAvailable as still to run, false as run.
 * Returns NULL when nothing is stored (no view, nothing pending). */
json_t *worker__views_merge(const struct worker_tool *t, const json_t *stored,
			    const json_t *fresh, unsigned stages,
			    const json_t *error, int hook);
/* worker__stored_view returns a new reference to the view of payload at
 * stage which of a worker process's tool t, from the stored views of its
 * job: the stored view, the placeholder of a stage the target does not
 * transform, or payload itself for a target not declared; NULL when the
 * view is pending (not there yet: it is left out). */
json_t *worker__stored_view(const struct worker_tool *t, const json_t *views,
			    int view, enum berth_payload which,
			    const json_t *payload);
/* worker__views_pending returns the stages (1u << BERTH_PAYLOAD_*)
 * marked pending in stored views, and *hook whether onInputAvailable is
 * still to run. */
unsigned worker__views_pending(const json_t *views, bool *hook);
/* worker__stage_name returns the name of a stage ("input"), and
 * worker__stage_parse the stage of a name, or -1. */
const char *worker__stage_name(int which);
int worker__stage_parse(const char *name);

/* worker__transform_check checks a definition's "transform" (borrowed).
 * Returns 0, or -EINVAL with *why (malloc'd) "transform.TARGET.STAGE ..."
 * saying what is wrong. */
int worker__transform_check(const json_t *transform, char **why);

/* ---- outcome.c -------------------------------------------------------- */

void worker__outcome_finish(struct berth_outcome *o);

/* ---- backoff.c -------------------------------------------------------- */

/* worker__backoff_ms returns the delay before the retry that follows try
 * number attempt: base * 2^(attempt-1) capped at max, of which the upper
 * half is scaled by r in [0, 1) ("equal jitter"). */
int64_t worker__backoff_ms(int attempt, int64_t base, int64_t max, double r);
/* worker__random returns a number in [0, 1). */
double worker__random(void);

/* ---- worker.c --------------------------------------------------------- */

struct worker__op *worker__op_new(struct worker *w, worker_cb cb, void *arg);
/* worker__op_submit hands op's request to the store; then(op, rc) runs
 * when it is done. On an error then never runs and op is still the
 * caller's. */
int worker__op_submit(struct worker__op *op,
		      void (*then)(struct worker__op *op, int rc));
void worker__op_free(struct worker__op *op);
/* worker__op_reply calls op's callback now and frees op. */
void worker__op_reply(struct worker__op *op, int err, const char *message,
		      json_t *data, const struct store_job *job, bool existed);
/* worker__op_defer calls op's callback on the next loop iteration with
 * err, message (copied) and data (stolen), then frees op. */
void worker__op_defer(struct worker__op *op, int err, const char *message,
		      json_t *data);
/* worker__op_defer_no_tool defers op's answer that no tool is named name
 * (WORKER_ENOTFOUND, with {"id": name}). */
void worker__op_defer_no_tool(struct worker__op *op, const char *name);
/* worker__op_reply_store replies with the error class of a store code. */
void worker__op_reply_store(struct worker__op *op, int rc);
/* worker__job_log appends one line to a job's log (copies everything). */
void worker__job_log(struct worker *w, const char *job_id, const char *level,
		     const json_t *data, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* worker__progress tells the progress listeners. */
void worker__progress(struct worker *w, const struct store_job *job,
		      const json_t *progress);
/* worker__check_shutdown finishes a shutdown once nothing is left. */
void worker__check_shutdown(struct worker *w);
int64_t worker__kill_grace(const struct worker *w);
struct worker_tool *worker__tool_find(const struct worker *w,
				      const char *name);

/* Hub (worker.c). */
struct worker__hub *worker__hub_ref(struct worker__hub *h);
void worker__hub_unref(struct worker__hub *h);
/* worker__hub_post queues m (the hub takes it) and wakes the loop; false
 * when the hub is closed (m is not taken). Pool threads only. */
bool worker__hub_post(struct worker__hub *h, struct worker__msg *m);
void worker__hub_complete(struct worker__hub *h, struct worker__wait *wt,
			  int rc);
/* worker__hub_drain handles every queued message now (loop thread). */
void worker__hub_drain(struct worker *w);

/* ---- sched.c ---------------------------------------------------------- */

/* worker__tool_missing leaves the jobs of tool name out of claims from
 * now on; worker__tool_present takes them back (and wakes the
 * scheduler) once a tool of that name is registered. */
void worker__tool_missing(struct worker *w, const char *name);
void worker__tool_present(struct worker *w, const char *name);
bool worker__tool_is_missing(const struct worker *w, const char *name);

/* worker__tool_uses_thread tells whether t's runs execute on the thread
 * pool, one thread each: a C tool that is not nonblocking and does not
 * only wait (the built-in sleep). Their slots are also cfg.threads'. */
bool worker__tool_uses_thread(const struct worker_tool *t);

/* worker__sched_kick claims work when a slot is free and no claim is in
 * flight (or asks for another claim after the one in flight). */
void worker__sched_kick(struct worker *w);
/* worker__sched_freed is told of a slot freed by a run of t (NULL: a tool
 * no longer registered; thread: the run held a thread) and claims when a
 * job may wait for that slot (sched.c has the rule). */
void worker__sched_freed(struct worker *w, const struct worker_tool *t,
			 bool thread);
/* worker__sched_may_start tells whether the new job j of tool t may run at
 * its submission (submit_and_run) instead of waiting for a claim: the tool
 * is nonblocking (berth.h) without on_input_available, has no concurrency
 * limit and is not paused; a slot is free and nothing runnable is pending
 * ahead of it (backlog clear, no delayed job due); the job is due, needs
 * no approval and has no idempotency key. Other tools' jobs start after
 * their submission is answered, by a claim. */
bool worker__sched_may_start(struct worker *w, struct worker_tool *t,
			     const struct store_job *j, int64_t now);
/* worker__sched_may_start_proc tells whether the new job j of t, an
 * external tool, may be started by its creation (ops.c, start_held)
 * instead of a claim: as worker__sched_may_start, on a store of this node
 * alone. Its process starts once that creation is durable. */
bool worker__sched_may_start_proc(struct worker *w, struct worker_tool *t,
				  const struct store_job *j, int64_t now);
/* worker__tool_unpaused tells whether t is known not to be paused, asking
 * the store once and caching the answer in t->pause. False when it is
 * paused or the store cannot say. */
bool worker__tool_unpaused(struct worker *w, struct worker_tool *t);
/* worker__sched_wakeup is told of a job that waits for a claim: it sets
 * the backlog, and remembers a future run_at so the run timer fires for it
 * even while earlier jobs wait for a slot (a due one is claimed now). */
void worker__sched_wakeup(struct worker *w, int64_t at);
void worker__sched_rearm(struct worker *w);
void worker__expiry_rearm(struct worker *w);

/* ---- run.c ------------------------------------------------------------ */

/* worker__run_start starts a claimed job (taking it). */
void worker__run_start(struct worker *w, struct store_job *job);
/* worker__run_start_held starts a job that its creation starts (ops.c: a
 * worker process's tool, or an external tool), without its executor:
 * worker__run_push pushes it to the worker process, or starts its
 * process, once the creation committed. */
void worker__run_start_held(struct worker *w, struct store_job *job);
/* worker__run_start_failed fails r's job, still running, for a tool that
 * could not be started (why is borrowed), as run_start does when its
 * executor refuses at once: the error "start_failed", not retried. */
void worker__run_start_failed(struct worker__run *r, const char *why);
void worker__run_push(struct worker__run *r);
struct worker__run *worker__run_find(struct worker *w, const char *job_id);
void worker__run_ref(struct worker__run *r);
void worker__run_unref(struct worker__run *r);
/* worker__run_outcome handles what execute or the process produced (its
 * contents are taken); discarded unless the run is still active. */
void worker__run_outcome(struct worker__run *r, struct berth_outcome *o);
/* worker__run_abort sets the abort flag and stops the executor. */
void worker__run_abort(struct worker__run *r, int reason);
/* worker__run_interrupted ends r, whose worker process went away (its
 * connection closed: why), by its tool's onInterrupt policy, in one
 * commit: pending with its attempt raised while a retry is left and the
 * tool allows it, else failed with code "interrupted". */
void worker__run_interrupted(struct worker__run *r, const char *why);
/* worker__run_put_back puts a claimed job that did not start back to
 * pending with its attempt unchanged, with a "retrying" event whose data
 * is {"reason": reason}. */
void worker__run_put_back(struct worker__run *r, const char *reason);
/* worker__run_cancelled: a cancel of r's job was committed (on any node),
 * another node took the job over, or the creation of a job run at its
 * submission failed: r is stopped and its result dropped. */
void worker__run_cancelled(struct worker__run *r);
/* worker__run_give_up ends a run whose C tool does not return. */
void worker__run_give_up(struct worker__run *r);
/* worker__run_end_timed_out ends r's try with the timeout that waited
 * for its process or worker process to be gone (r->timed_out), and
 * returns true; false when there is none. */
bool worker__run_end_timed_out(struct worker__run *r);
/* worker__interrupt_retry fills op's transition for r's interrupted job
 * to run again (pending, its attempt raised), as the recovery after a
 * crash would, and returns true; false when r's tool must not run again
 * after an interruption or no retry is left (the caller fails the job). */
bool worker__interrupt_retry(const struct worker__run *r,
			     struct worker__op *op);
/* worker__run_arm_timeout starts r's timeout when its tool starts: a C
 * tool's execution (at once, or when a thread takes a run that waited for
 * one, exec.c), an external tool's process once it exec'd (proc.c), a
 * worker process's run once it was sent (remote.c). Nothing for a run
 * that is no longer active or was told to abort. */
void worker__run_arm_timeout(struct worker__run *r);
/* worker__run_arm_start bounds the wait for r's process to start (its
 * start timeout, worker_config.start_timeout_ms), until
 * worker__run_arm_timeout replaces it: past it, the try fails with
 * "start_timeout". */
void worker__run_arm_start(struct worker__run *r);
/* worker__run_exec_ended: the executor (thread or process) is gone. */
void worker__run_exec_ended(struct worker__run *r);
/* Messages of a running tool, on the loop thread. */
void worker__run_progress(struct worker__run *r, json_t *progress);
/* worker__run_log appends a line to the job's log for r: a structured log
 * line of the tool, a line of its stderr, or a note of berth's. Each run
 * may write max_log_bytes bytes (message and data, as JSON) and
 * max_log_lines lines (worker_config); the line that would pass either
 * is dropped, and so is every one after it, in place of which one "warn"
 * line says that the rest was dropped (the last of the max_log_lines). */
void worker__run_log(struct worker__run *r, const char *level,
		     const char *message, const json_t *data);
/* worker__run_log_full fills r's log at once: the marker line is written
 * (once) and every line after it dropped. */
void worker__run_log_full(struct worker__run *r);
void worker__run_checkpoint(struct worker__run *r, json_t *value,
			    struct worker__wait *wait);

/* ---- exec.c / proc.c -------------------------------------------------- */

/* What one stdout line of an external tool carries (struct worker__line's
 * has). A line may carry several: progress, a log line and a checkpoint
 * before its final outcome. */
enum {
	WORKER__LINE_PROGRESS = 1u << 0,
	WORKER__LINE_BAD_PROGRESS = 1u << 1, /* "progress" without a number */
	WORKER__LINE_LOG = 1u << 2,
	WORKER__LINE_CHECKPOINT = 1u << 3,
	WORKER__LINE_FINAL = 1u << 4, /* output, suspend or error: final */
};

/* struct worker__line is one stdout line, parsed. The strings are
 * borrowed from obj, which the line owns; json_t values are new
 * references, each taken by whoever sets its field to NULL. */
struct worker__line {
	unsigned has;              /* WORKER__LINE_* */
	json_t *progress;          /* PROGRESS: {"progress", ...} */
	const char *log_level;     /* LOG: "info" unless the line says */
	const char *log_message;   /* LOG: "" unless the line says */
	json_t *log_data;          /* LOG: the other fields, or NULL */
	json_t *checkpoint;        /* CHECKPOINT */
	struct berth_outcome final; /* FINAL: kind BERTH_OUTPUT, BERTH_SUSPEND
				     * or BERTH_ERROR (message set) */
	json_t *obj;               /* the line */
	char why[240];             /* -EINVAL: what is wrong with the line */
};

/* worker__finals counts the members of o that end a run (output,
 * suspend, error): a final line, or a worker's answer to run, holds
 * exactly one. */
int worker__finals(const json_t *o);

/* worker__parse_line parses one line s of len bytes (without its
 * newline; a trailing CR is dropped) of the process protocol (proc.c's
 * header) into *out, which the caller releases with worker__line_finish
 * whatever the result. Touches no process or run. Returns 0 (an empty
 * line has nothing: has is 0), or -EINVAL with out->why saying what is
 * wrong (not a JSON object berth takes; more than one of output,
 * suspend and error; a retryable that is not a boolean), which fails
 * the job. */
int worker__parse_line(const char *s, size_t len, struct worker__line *out);
void worker__line_finish(struct worker__line *l);

int worker__exec_start(struct worker__run *r);
/* worker__exec_abort ends a run waiting on its timer (the built-in sleep)
 * or for a thread on the next loop turn, with the error an abort gives;
 * nothing for runs that execute, whose execute looks at the abort flag
 * itself. */
void worker__exec_abort(struct worker__run *r);
/* worker__exec_stop_queued aborts, as a shutdown does, every run that
 * waits for a thread: a stopping worker starts no execution. */
void worker__exec_stop_queued(struct worker *w);
/* worker__exec_inline runs the queued executions of nonblocking tools, on
 * the loop thread: from the worker's idle handle, or from submit_and_run
 * once the run it started has been queued. */
void worker__exec_inline(struct worker *w);
/* worker__idle_kick makes the idle handle run deferred replies and inline
 * executions in the next loop iteration (the loop does not wait for I/O
 * before it). */
void worker__idle_kick(struct worker *w);
/* worker__proc_start starts r's process (proc.c): its pipes now, the
 * process itself on the spawner's threads. Returns 0, the run then being
 * the process's (a start that fails later fails the run), or a negative
 * errno with *errmsg (malloc'd, or NULL) when nothing was started. */
int worker__proc_start(struct worker__run *r, char **errmsg);
/* worker__proc_exec_begun tells whether p's start is under way on a thread
 * of the spawner (its exec not returned yet), rather than waiting for
 * one. */
bool worker__proc_exec_begun(const struct worker__proc *p);

/* ---- remote.c --------------------------------------------------------- */

/* worker__remote_load registers the stored definitions of worker
 * processes' tools (start-up, before the recovery, which reads their
 * onInterrupt). A definition whose id a C or external tool took since is
 * left out and named in the log. Returns 0 or a negative code. */
int worker__remote_load(struct worker *w);
/* worker__remote_start pushes r, a claimed job of a worker process's
 * tool, to the connection serving it with the most free runs. Returns 0,
 * or -EAGAIN when none is connected (the caller puts the job back). */
int worker__remote_start(struct worker__run *r);
/* worker__remote_abort tells r's worker process to abort it (reason
 * enum worker__abort) and gives it the kill grace to answer; a shutdown
 * that cannot wait (worker_shutdown_now) ends it at once. */
void worker__remote_abort(struct worker__run *r, int reason);
/* worker__remote_asks_end stops every operation waiting for a worker
 * process's answer to a question: each goes on without it, as after the
 * question's time-out. For a shutdown whose grace is over. */
void worker__remote_asks_end(struct worker *w);

/* worker__remote_shutdown stops heartbeats and detaches every
 * connection from w (the end of a shutdown). */
void worker__remote_shutdown(struct worker *w);
/* worker__remote_wake clears the dry mark of the connections serving
 * tool (NULL: every connection): jobs of it may be runnable. */
void worker__remote_wake(struct worker *w, const char *tool);
/* worker__remote_free_runs returns the runs r may still take. */
int worker__remote_free_runs(const struct worker_remote *r);
/* worker__remote_may_start tells whether a new job j of t, a worker
 * process's tool, may be started in its creation's transaction and
 * pushed once that commits, instead of waiting for a claim: a connection
 * serving t has a run free beyond the jobs started that way so far, and
 * found no job of its tools left at its last claim (nothing waits ahead);
 * the job is due, needs no approval, has no idempotency key, its tool no
 * concurrency limit and no pause; the store is not shared. */
bool worker__remote_may_start(struct worker *w, struct worker_tool *t,
			      const struct store_job *j, int64_t now);
/* worker__remote_input asks a worker process serving t for the functions
 * of a new job j (requireApproval, the input and approval views,
 * onInputAvailable) before its creation commits, then calls
 * done(op, answer) with the answer (borrowed) or NULL when no worker
 * process serving t is connected or none answered in time. */
void worker__remote_input(struct worker__op *op, struct worker_tool *t,
			  const struct store_job *j, const json_t *input,
			  const json_t *rc,
			  void (*done)(struct worker__op *op, json_t *answer));
/* worker__remote_transform asks for the views of stage (BERTH_PAYLOAD_*)
 * of job j's payload, as worker__remote_input does. */
void worker__remote_transform(struct worker__op *op, struct worker_tool *t,
			      const struct store_job *j, int stage,
			      const json_t *payload,
			      void (*done)(struct worker__op *op,
					   json_t *answer));
/* worker__remote_logs appends the "logs" of an answer (borrowed) to job
 * id's log. */
void worker__remote_logs(struct worker *w, const char *job_id,
			 const json_t *answer);

/* ---- orphans.c -------------------------------------------------------- */

/* worker__boot_id returns this boot's id (/proc/sys/kernel/random/boot_id,
 * read once; "" when unreadable). */
const char *worker__boot_id(void);
/* worker__boot_ticks returns the boot clock in the clock ticks of
 * /proc/PID/stat's start times. */
int64_t worker__boot_ticks(void);
/* worker__proc_stat reads pid's process group, start time (clock ticks
 * after boot) and state letter from /proc/PID/stat. Returns 0 or -errno
 * (-ENOENT: no such process). */
int worker__proc_stat(pid_t pid, int64_t *pgid, int64_t *start, char *state);
/* worker__orphans_record records (or, with remove, forgets) the process
 * group led by pid, which started between the boot clock's start_min and
 * start_max (worker__boot_ticks), for job_id (STORE_OP_PROC), so that the
 * next berthd can kill it should this one die (orphans.c). */
void worker__orphans_record(struct worker *w, const char *job_id, pid_t pid,
			    int64_t start_min, int64_t start_max, bool remove);
/* worker__keeper_note tells the keeper of the process group led by group,
 * started, or reaped (keeper.c). */
void worker__keeper_note(pid_t group, bool reaped);
/* worker__keeper_watch watches the keeper on loop, to replace it should
 * it end before berthd; worker__keeper_unwatch closes the watch, and
 * returns true when cb is to be called once it is closed (with data as
 * the handle's data). */
int worker__keeper_watch(uv_loop_t *loop);
bool worker__keeper_unwatch(uv_close_cb cb, void *data);
/* worker__orphans_kill SIGKILLs the recorded process groups of this node
 * that are still alive and still the ones recorded, waits for them to go,
 * and forgets every record. Start-up only (it blocks, briefly). Returns
 * the number of groups killed, or a negative code. */
int worker__orphans_kill(struct worker *w);

/* ---- spawn.c ---------------------------------------------------------- */

/* What worker__spawn_start starts; everything is borrowed for the call. */
struct worker__spawn {
	char *const *argv; /* argv[0]: a path, or a name looked up in PATH */
	char *const *env;  /* the whole environment (PATH from it) */
	const char *cwd;   /* or NULL */
	int stdio[3];      /* the child's 0, 1, 2: descriptors above 2 */
	/* The stack the child runs on until its exec (worker__spawn_stack_new),
	 * used by one start at a time; NULL: one is mapped for the call. */
	void *stack;
};

/* worker__spawn_stack_new maps a stack for worker__spawn_start to reuse
 * (mapping and unmapping one each time costs a TLB shootdown on every
 * thread), or NULL; worker__spawn_stack_free unmaps it (NULL is
 * ignored). */
void *worker__spawn_stack_new(void);
void worker__spawn_stack_free(void *stack);

/* The step of the child that failed (worker__spawn_start's *step). */
enum worker__spawn_step {
	WORKER__SPAWN_SIGNALS = 1,
	WORKER__SPAWN_SESSION,
	WORKER__SPAWN_PDEATHSIG,
	WORKER__SPAWN_STDIO,
	WORKER__SPAWN_DESCRIPTORS,
	WORKER__SPAWN_CWD,
	WORKER__SPAWN_EXEC,
};

/*
 * worker__spawn_start starts s's program (spawn.c's header): in a session
 * and process group of its own, SIGKILLed when the calling thread ends
 * (call it from a thread that lives as long as the child should: berthd
 * calls it from the spawner's), with every signal at its default and
 * none blocked, and nothing open above 2. Returns 0 with *pid and *pidfd
 * (close-on-exec, readable once the process has exited; the caller closes
 * it, and reaps the process with worker__spawn_reap). Otherwise a negative
 * errno and nothing is left running: from clone, -ENOSYS on a kernel
 * without pidfds (before 5.3), or what the child met before its exec
 * (-ENOENT for a missing program), with the step that failed in *step
 * (when not NULL; 0 when the child never ran).
 */
int worker__spawn_start(const struct worker__spawn *s, pid_t *pid, int *pidfd,
			int *step);
/*
 * The spawner: threads that make worker__spawn_start's calls for the loop
 * (spawn.c). The clone returns only once the child has exec'd, which on a
 * busy machine is a millisecond or more of the calling thread's time, and
 * the loop must go on serving meanwhile. Its threads live until the
 * spawner is closed, as PR_SET_PDEATHSIG needs: a child is SIGKILLed when
 * the thread that started it ends.
 */
struct worker__spawner;

/* A start for the spawner. The caller fills s's argv, env and cwd (its
 * own, to outlive the request), done and data; the spawner makes the
 * pipes (worker__spawn_pipes) just before the start, fills the rest and
 * calls done on the loop thread. Until then the request is the
 * spawner's. */
struct worker__spawn_req {
	struct worker__spawn s; /* s.stdio and s.stack: the spawner's */
	void (*done)(struct worker__spawn_req *req);
	void *data;
	/* Set by the loop, read by the spawner's thread: the start is no
	 * longer wanted; one not begun is not made (rc -ECANCELED). */
	atomic_bool cancel;
	/* Set by the spawner's thread, read by the loop: a thread took the
	 * request, and its start is under way. */
	atomic_bool begun;
	/* The outcome: worker__spawn_start's return (or the pipes'), pid,
	 * pidfd and step, the boot clock around the start
	 * (worker__boot_ticks), and the parent's ends of the pipes
	 * (worker__spawn_pipes), which done takes: all -1 unless rc is 0. */
	int rc;
	int parent[3];
	pid_t pid;
	int pidfd;
	int step;
	int64_t start_min, start_max;
	struct worker__spawn_req *next;
};

/* worker__spawner_create starts a spawner of n threads on loop. Returns it
 * or NULL. */
struct worker__spawner *worker__spawner_create(uv_loop_t *loop, int n);
/* worker__spawner_submit queues req (the spawner's until req->done). */
void worker__spawner_submit(struct worker__spawner *sp,
			    struct worker__spawn_req *req);
/* worker__spawner_close ends the spawner: its threads finish the start
 * they are making and end (SIGKILLing, by PR_SET_PDEATHSIG, every child
 * they started that still runs: close it once every process was reaped),
 * requests not begun are done with -ECANCELED, every done callback is
 * called, and closed(arg) once its handle is closed and its memory freed. */
void worker__spawner_close(struct worker__spawner *sp,
			   void (*closed)(void *arg), void *arg);

/* worker__spawn_step_name returns a phrase for a step ("changing to its
 * folder"). */
const char *worker__spawn_step_name(int step);
/* worker__spawn_pipes makes the three pipes of a child: parent[0] writes
 * to its stdin, parent[1] and parent[2] read its stdout and stderr;
 * child[] are their other ends, for worker__spawn's stdio, to be closed
 * once it started. All are close-on-exec and above 2. Returns 0 or
 * -errno, with nothing left open. */
int worker__spawn_pipes(int parent[3], int child[3]);
/* worker__spawn_close closes the descriptors of fds that are open (>= 0)
 * and sets them to -1. */
void worker__spawn_close(int fds[3]);
/* worker__spawn_exited tells whether pid has exited: 1 with its exit
 * status or the signal that killed it, 0 while it runs, or -errno. It is
 * not reaped: a zombie keeps its pid, and so its process group id, from
 * being used again, so that the group can still be killed safely. A
 * process someone else reaped (ECHILD) counts as exited, status 0. */
int worker__spawn_exited(pid_t pid, int64_t *status, int *sig);
/* worker__spawn_reap reaps pid, waiting for it to exit. */
void worker__spawn_reap(pid_t pid);
/* worker__proc_kill sends SIGTERM to the group now (or after a grace when
 * reap is true) and SIGKILL after the kill grace. */
void worker__proc_kill(struct worker__proc *p, bool reap);
/* worker__proc_kill_now sends SIGKILL to the group now (a shutdown that
 * cannot wait: worker_shutdown_now). */
void worker__proc_kill_now(struct worker__proc *p);

#endif

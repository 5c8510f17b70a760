/*
 * worker.h: the tool registry, the scheduler and the pool that runs tools
 * as durable jobs (DESIGN.md, "Job lifecycle").
 *
 * The worker knows no wire protocol: the api turns requests into the calls
 * below and their results into replies. Everything here runs on the loop
 * thread. Operations that change a job are asynchronous: their callback
 * runs exactly once on the loop thread, after the change is durable in the
 * store, or with an error when nothing was changed. When an operation
 * returns an error itself, its callback is never called (as in libuv).
 */
#ifndef BERTH_WORKER_H
#define BERTH_WORKER_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "berth/berth.h"
#include "store/store.h"

/* Error classes of a result; the api maps each to one JSON-RPC code. */
enum worker_errc {
	WORKER_OK = 0,
	WORKER_EINVAL,    /* bad params or a payload failing a schema */
	WORKER_ENOTFOUND, /* no such job or tool */
	WORKER_ECONFLICT, /* the job's status does not allow this */
	WORKER_EOVERLOAD, /* a queue limit */
	WORKER_ESTORAGE,  /* the store failed; nothing was changed */
	WORKER_EINTERNAL,
	WORKER_EFORBIDDEN, /* the approval policy does not let the actor
			      decide: data {"reason", "principal", "jobId"} */
};

/*
 * struct worker_result is what an operation's callback receives; all of it
 * is borrowed for the duration of the callback.
 *   err      WORKER_OK or an error class
 *   message  a sentence for a person when err != WORKER_OK
 *   data     the error's data, or NULL: for WORKER_EINVAL from a schema
 *            {"errors": [{instancePath, keyword, schemaPath, message}]};
 *            for WORKER_ECONFLICT {"status"}; for WORKER_ENOTFOUND {"id"};
 *            for WORKER_ESTORAGE {"sqlite": "..."}
 *   job      the job after the change (or as it is, on a conflict), or
 *            NULL
 *   existed  jobs/submit: the idempotency key named an existing job
 */
struct worker_result {
	int err;
	const char *message;
	json_t *data;
	const struct store_job *job;
	bool existed;
};

typedef void (*worker_cb)(void *arg, const struct worker_result *res);

/*
 * struct worker_actor is who asks for an operation: the audit of the
 * transition it makes (the event's "by" and "via", a job's submitter and
 * decider) and the judge of a tool's approval policy. Everything is
 * borrowed for the call; the worker copies what it keeps. An operation
 * given no actor (NULL) is berthd's own.
 *   name    the principal's name
 *   via     how the request came: "socket", "tcp", "http", "mcp",
 *           "worker"
 *   client  an MCP client's {name, version}, or NULL
 *   roles   the principal's roles, BERTH_ROLE_* (common/role.h), for
 *           approvers named "role:NAME"
 */
struct worker_actor {
	const char *name;
	const char *via;
	const json_t *client;
	unsigned roles;
};

struct worker_config {
	int workers;                 /* jobs running at once; 0: 4 */
	/* Of those, runs of C tools executing on the thread pool at once
	 * (CPU work: not nonblocking, not the built-in sleep), so that jobs
	 * that only wait keep the other slots; 0: no bound but workers.
	 * The pool has threads + 4 threads (worker_create). */
	int threads;
	/* On a shared database (PostgreSQL): jobs of every node running at
	 * once past which this node claims none, counted in the database at
	 * each claim; 0: no such bound. Its jobs then never start at their
	 * submission, which no claim would count. */
	int cluster_workers;
	int64_t default_timeout_ms;  /* 0: 300000 */
	int64_t kill_grace_ms;       /* SIGTERM to SIGKILL; 0: 5000 */
	/* How long an external tool's process may take to start, from when
	 * its run asks for it to its exec, before the try fails with
	 * "start_timeout" (a job's timeout counts from the start); 0:
	 * 60000. */
	int64_t start_timeout_ms;
	int64_t shutdown_grace_ms;   /* how long running jobs may go on at
				      * shutdown; 0: 10000; < 0: none */
	int64_t max_output_bytes;    /* external tool stdout; 0: 64 MiB */
	int64_t max_log_bytes;       /* log per run (structured lines and
				      * stderr); 0: 1 MiB */
	int64_t max_log_lines;       /* log lines per run, and kept per job
				      * (the newest); 0: 10000 */
	int64_t retention_ms;        /* prune terminal jobs; 0: 7 days */
	int64_t heartbeat_ms;        /* worker processes are pinged after
				      * this long silent, and dropped after
				      * two unanswered pings; 0: 10000 */
	/* Whether the principal that submitted a job may approve or
	 * decline it when its tool's approvalPolicy does not say:
	 * berthd sets it false with --principals (separation of duties),
	 * and leaves it true without, where every caller is one trust
	 * domain (docs/API.md). */
	bool self_approval;
};

struct worker;
struct worker_tool;

/* worker_create returns a new worker over store (borrowed; it must outlive
 * the worker) or NULL when out of memory. */
struct worker *worker_create(uv_loop_t *loop, struct store *st,
			     const struct worker_config *cfg);

/* worker_add_tool registers a C tool (borrowed: it must outlive the
 * worker). Returns 0, or -EINVAL with *errmsg (malloc'd) naming the tool
 * and the field that is wrong (a duplicate id, a name MCP does not allow,
 * a schema that does not compile, an input example that fails it). */
int worker_add_tool(struct worker *w, const struct berth_tool *tool,
		    char **errmsg);

/* worker_load_dir registers every *.json manifest directly in dir as an
 * external tool, and keeps dir for worker_reload. Returns the number
 * loaded, or -EINVAL with *errmsg naming the file and the field. */
int worker_load_dir(struct worker *w, const char *dir, char **errmsg);

/*
 * worker_reload reads the folders of worker_load_dir again (berthd's
 * SIGHUP) and logs a line per tool added, changed or removed and per
 * manifest that failed, then one line of totals. C tools stay as they
 * are. A manifest that fails to load, or a folder that cannot be read,
 * keeps the definitions it gave. A changed tool's running jobs finish
 * under the definition they started with; its new one counts them
 * against its concurrency, keeps its pause state, and serves every
 * submission from now on (one under way keeps the definition it was
 * checked against). A removed tool's jobs stay in the database, are left
 * out of claims, and run when a tool of that name comes back; a job shows
 * it ("toolMissing" in worker_job_to_json). Returns 0, or -ENOMEM when
 * nothing was changed.
 */
int worker_reload(struct worker *w);

/* worker_keeper_start forks the keeper, which SIGKILLs the process groups
 * of the external tools still running when berthd ends, however it ends
 * (keeper.c). Called once, before any thread is started or file opened.
 * Returns 0 or -errno (berthd runs without one: what a crash leaves is
 * then the next start's to kill, orphans.c). */
int worker_keeper_start(void);

/* worker_start runs the start-up recovery and starts scheduling. Returns 0
 * or a negative code with *errmsg. */
int worker_start(struct worker *w, char **errmsg);

/* worker_shutdown stops claiming work, aborts running jobs (their
 * processes get SIGTERM, then SIGKILL after the grace period), puts them
 * back to pending without using up a retry, and calls done(arg) when no
 * job is running any more. The store stays open. */
void worker_shutdown(struct worker *w, void (*done)(void *arg), void *arg);

/* worker_shutdown_now hurries a shutdown under way (a second SIGTERM): it
 * stops every running job now, without the grace periods (their process
 * groups get SIGKILL; a C tool is left to return on its own, its result
 * dropped), and puts each back as a crash would have left it to the next
 * start: pending with its attempt raised, or failed when no retry is left
 * or its tool must not run again after an interruption (onInterrupt
 * "fail"). Returns the number of jobs it stopped; shutdown's done follows
 * once the store has answered what is in flight. Nothing before
 * worker_shutdown, and nothing a second time. */
int worker_shutdown_now(struct worker *w);

/* worker_destroy frees the worker; only after worker_shutdown's done. */
void worker_destroy(struct worker *w);

/* ---- tools ------------------------------------------------------------ */

size_t worker_tool_count(const struct worker *w);
/* worker_tool_at returns the i-th tool in id order (borrowed). */
const struct worker_tool *worker_tool_at(const struct worker *w, size_t i);
/* worker_tool_find returns the tool named name (borrowed) or NULL. */
const struct worker_tool *worker_tool_find(const struct worker *w,
					   const char *name);
const char *worker_tool_name(const struct worker_tool *t);

/* worker_tool_to_json returns a new reference to the Tool object of
 * PROTOCOL.md (MCP fields and berth's own, paused included). */
json_t *worker_tool_to_json(struct worker *w, const struct worker_tool *t);

enum worker_schema_kind {
	WORKER_SCHEMA_INPUT = 0,
	WORKER_SCHEMA_OUTPUT,
	WORKER_SCHEMA_SUSPEND,
	WORKER_SCHEMA_RESUME,
	WORKER_SCHEMA_REQUEST_CONTEXT,
};

/* worker_tool_schema returns the tool's schema document of that kind
 * (borrowed), or NULL when it has none. */
const json_t *worker_tool_schema(const struct worker_tool *t, int kind);

/* ---- views ------------------------------------------------------------ */

enum worker_view {
	WORKER_VIEW_RAW = 0,
	WORKER_VIEW_DISPLAY,
	WORKER_VIEW_TRANSCRIPT,
};

/* worker_job_to_json returns a new reference to the Job object of j in the
 * view asked for: payloads as stored (raw), or passed through the tool's
 * display or transcript transform. For a worker process's tool the views
 * are those stored with the job (it never calls into a worker): a payload
 * whose view is still to come is left out, and its stage listed in
 * "viewsPending". */
json_t *worker_job_to_json(struct worker *w, const struct store_job *j,
			   int view);

/* worker_payload_view returns a new reference to one payload (borrowed) of
 * job j as the view shows it; NULL only for a NULL payload. A tool that is
 * not registered shows its payloads as stored; a worker process's tool
 * shows its stored views, and the placeholder of a view still to come
 * (worker_job_to_json leaves such a payload out). */
json_t *worker_payload_view(struct worker *w, const struct store_job *j,
			    int view, enum berth_payload which,
			    const json_t *payload);

/* worker_tool_has_view is true when t declares a transform for that view,
 * so that what the view shows may differ from what the tool's schemas
 * describe. */
bool worker_tool_has_view(const struct worker_tool *t, int view);

/* ---- operations ------------------------------------------------------- */

/* Params of jobs/submit. json_t values and strings are borrowed until the
 * callback has run. Zero/NULL means "not given". */
struct worker_submit {
	const char *tool;
	json_t *input;
	json_t *request_context;
	json_t *metadata;
	const char *run_id;
	const char *tool_call_id;
	const char *idempotency_key;
	bool has_priority;
	int priority;
	int64_t run_at;      /* absolute ms; 0: now */
	int64_t timeout_ms;  /* 0: the tool's, else the daemon default */
	bool has_max_retries;
	int max_retries;
	int64_t ttl_ms;      /* 0: none */
	const char *retry_of;
	/* Where an MCP job comes from, {"_meta", "clientInfo"} (the MCP
	 * server sets it; NULL otherwise). The job keeps it as
	 * metadata.mcp, which a submission without it may not set, so that
	 * execute can trust it (berth.h, berth_ctx_mcp_meta). */
	json_t *mcp;
	/* Who submits (the job's submittedBy), NULL: berthd. */
	const struct worker_actor *by;
	/* Whose request it is when not by's (the job's submittedBy and
	 * submittedVia; by is still who the submitted event names): a
	 * retry is its original's request made again. NULL: by's. */
	const char *submitted_by, *submitted_via;
};

/* worker_submit validates the tool, the input and the request context
 * before anything is stored: an unknown tool is WORKER_ENOTFOUND, input
 * or a request context failing its schema (once the schema's defaults are
 * filled in) WORKER_EINVAL with the schema errors, and no job exists. The
 * job keeps the input and request context as given; it is pending, or
 * awaiting_approval when the tool requires approval. */
int worker_submit(struct worker *w, const struct worker_submit *p,
		  worker_cb cb, void *arg);

/* Each operation below takes by, who asks (NULL: berthd), recorded with
 * the transition's event. */

/* worker_resume validates resume_data (borrowed) against the tool's
 * resume schema (WORKER_EINVAL, the job stays suspended) and queues the
 * suspended job to run again from the top with it. */
int worker_resume(struct worker *w, const char *id, json_t *resume_data,
		  const struct worker_actor *by, worker_cb cb, void *arg);

/*
 * worker_approve and worker_decline answer a job awaiting approval; a
 * declined job never runs. note and reason may be NULL. The job's tool's
 * approvalPolicy judges by first (docs/API.md): its submitter may decide
 * only with selfApproval (WORKER_EFORBIDDEN, reason "self_approval"), and
 * only one of its approvers may (reason "not_an_approver"). An approval
 * below the quorum is recorded and the job goes on waiting (an
 * "approved" event whose status is still awaiting_approval); the same
 * approver again, before the quorum is met or after (a quorum above 1),
 * is WORKER_ECONFLICT with {"status", "reason": "already_approved"}, and
 * changes nothing. A decline ends the job.
 */
int worker_approve(struct worker *w, const char *id, const char *note,
		   const struct worker_actor *by, worker_cb cb, void *arg);
int worker_decline(struct worker *w, const char *id, const char *reason,
		   const struct worker_actor *by, worker_cb cb, void *arg);

/* worker_cancel cancels any non-terminal job; a running one gets its
 * abort flag, its process is killed, and its late result is discarded. */
int worker_cancel(struct worker *w, const char *id, const char *reason,
		  const struct worker_actor *by, worker_cb cb, void *arg);

/* worker_retry creates a new job with the same tool, input and request
 * context as a failed, timed_out or expired job, retry_of set to id. It
 * is the same request made again: its submitter stays the original's
 * (so that who asked for it may still not approve it, approvalPolicy),
 * and by, who retried, is named in its submitted event. */
int worker_retry(struct worker *w, const char *id,
		 const struct worker_actor *by, worker_cb cb, void *arg);

/* worker_pause sets or clears a tool's durable paused flag (no job
 * changes, so there is no event to record anyone with). The result has
 * no job. */
int worker_pause(struct worker *w, const char *tool, bool paused,
		 worker_cb cb, void *arg);

/* ---- worker processes (remote.c, docs/WORKERS.md) ---------------------- */

/*
 * A worker process serves tools over a connection the api owns: it
 * registers their definitions, berthd pushes it runs, and it answers
 * them with outcomes. The worker knows no wire protocol: it reaches the
 * connection through these callbacks, each given the conn of
 * worker_remote_register (borrowed).
 *
 *   call    sends a request ("run", "input", "transform", "ping") with
 *           params (stolen) and calls done(arg, result, error) exactly
 *           once: when it is answered (result or error set, borrowed for
 *           the call) or when the connection closed first (both NULL).
 *           Returns 0, or a negative code, and then done is never
 *           called.
 *   notify  sends a notification ("abort") with params (stolen).
 *   close   closes the connection (a worker process that missed two
 *           heartbeats); worker_remote_detach follows.
 *   heard   returns the loop time (uv_now) at which the connection last
 *           received anything.
 */
typedef void (*worker_call_fn)(void *arg, json_t *result, json_t *error);
struct worker_remote_ops {
	int (*call)(void *conn, const char *method, json_t *params,
		    worker_call_fn done, void *arg);
	void (*notify)(void *conn, const char *method, json_t *params);
	void (*close)(void *conn, const char *why);
	uint64_t (*heard)(void *conn);
};

struct worker_remote;

/*
 * worker_remote_register registers the tools of the params of
 * worker/register (borrowed: {"tools", "concurrency"?, "name"?, "sdk"?},
 * their shape checked by the caller) for a worker process on conn, by the
 * rules of docs/WORKERS.md: every definition is checked as a manifest is
 * (WORKER_EINVAL, data.errors with instancePaths into params); an id of a
 * C or external tool is WORKER_ECONFLICT {"status": "builtin"}; a
 * definition that differs from the one another connected worker process
 * serves under its id is WORKER_ECONFLICT {"status": "conflict",
 * "differences"}, the message naming the fields; either way none of its
 * tools is registered. Workers with the same definition share its jobs;
 * one that differs from the stored definition while no worker process
 * serves it replaces it. The definitions are stored, and the callback
 * runs once they are durable; its res->data is then the result,
 * {"worker", "tools", "heartbeatMs"} (borrowed). *out is set to the
 * registration when it was accepted (before its commit): the caller hands
 * it to worker_remote_detach when the connection closes, whatever the
 * callback said. by is the principal the connection acts as (borrowed;
 * NULL: berthd): the transitions its answers make are recorded as its,
 * via "worker" (docs/API.md, the audit). Returns 0, or -ENOMEM,
 * -ESHUTDOWN (the callback is then never called).
 */
int worker_remote_register(struct worker *w,
			   const struct worker_remote_ops *ops, void *conn,
			   const json_t *params,
			   const struct worker_actor *by,
			   struct worker_remote **out, worker_cb cb,
			   void *arg);

/* worker_remote_detach: rem's connection closed (why: a phrase for the
 * log). Every job it was running is ended at once by its tool's
 * onInterrupt policy (worker__run_interrupted), its requests in flight
 * are answered as unanswered, and rem is freed once nothing holds it. */
void worker_remote_detach(struct worker_remote *rem, const char *why);

/* worker_remote_drain: worker/drain. No run is pushed to rem any more;
 * the runs it has go on. */
void worker_remote_drain(struct worker_remote *rem);

/* worker_remote_id returns rem's id ("W-..."), for the log. */
const char *worker_remote_id(const struct worker_remote *rem);

/* worker_remote_progress and worker_remote_log take worker/progress
 * ({progress, total?, message?}, borrowed) and worker/log lines (data
 * borrowed, may be NULL) of job_id's run on rem. Each returns 0, or
 * -ENOENT when no run of that job is rem's (nothing is done). */
int worker_remote_progress(struct worker_remote *rem, const char *job_id,
			   const json_t *progress);
int worker_remote_log(struct worker_remote *rem, const char *job_id,
		      const char *level, const char *message,
		      const json_t *data);

/* worker_remote_checkpoint stores value (borrowed) as the checkpoint of
 * job_id's run on rem; the callback runs once it is durable, or with
 * WORKER_ECONFLICT when the run is no longer rem's to save (cancelled,
 * timed out). Returns 0, or -ENOENT when rem never ran the job (the
 * callback is then never called), -ENOMEM, -ESHUTDOWN. */
int worker_remote_checkpoint(struct worker_remote *rem, const char *job_id,
			     const json_t *value, worker_cb cb, void *arg);

/* worker_forget removes the stored definition of the worker processes'
 * tool name (tools/forget): WORKER_ENOTFOUND when there is none (a C or
 * external tool included), WORKER_ECONFLICT {"status": "serving"} while a
 * worker process serves it and {"status": "jobs"} while a job of it may
 * still run. The callback runs once the removal is durable; the result
 * has no job. */
int worker_forget(struct worker *w, const char *name, worker_cb cb,
		  void *arg);

/* ---- observation ------------------------------------------------------ */

struct worker_stats {
	int size; /* pool size */
	int running; /* jobs this worker is running now (started, and not
			yet ended or given up) */
	int busy; /* slots taken: jobs running, and jobs a committed claim
		     took that have not started yet */
	/* Jobs started since the worker started: run at their submission
	 * (a nonblocking tool, a free slot and nothing waiting), and by
	 * claims. */
	uint64_t started_at_submit;
	uint64_t started_by_claim;
	uint64_t claims; /* claims asked of the store */
	uint64_t claims_empty; /* of those, claims that took no job */
};
void worker_stats(const struct worker *w, struct worker_stats *out);

/* worker_add_progress_listener registers fn for live progress of running
 * jobs (not in the event log): progress is {"progress", "total"?,
 * "message"?}, borrowed for the call. Returns 0 or -ENOMEM. */
typedef void (*worker_progress_fn)(void *arg, const char *job_id,
				   const char *tool, const json_t *progress);
int worker_add_progress_listener(struct worker *w, worker_progress_fn fn,
				 void *arg);

/* worker_remove_progress_listener unregisters the listener added with fn
 * and arg (the first such one; nothing when there is none), so that arg
 * may be freed after it returns. It may be called from a listener: one
 * removed during a delivery is not called again. */
void worker_remove_progress_listener(struct worker *w, worker_progress_fn fn,
				     void *arg);

#endif

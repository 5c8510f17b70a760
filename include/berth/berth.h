/*
 * berth.h: the tool API, the C form of Mastra's createTool().
 *
 * A program that wants tools written in C links libberth, declares each
 * tool as a struct berth_tool and hands them to berth_main(), which is the
 * whole of berthd: option parsing, the store, the worker pool and the
 * socket. berthd itself is berth_main() with the built-in tools. This is a
 * whole program (tests/install builds it from this comment, with
 * `cc -Wall -Wextra -Werror tool.c $(pkg-config --cflags --libs berth)`,
 * and runs it):
 *
 *	#include <berth/berth.h>
 *
 *	static struct berth_outcome weather(const json_t *input,
 *					    struct berth_ctx *ctx, void *data)
 *	{
 *		const char *loc = json_string_value(json_object_get(input,
 *								  "location"));
 *
 *		(void)ctx;
 *		(void)data;
 *		return berth_output(json_pack("{s:s, s:f, s:s}", "location", loc,
 *					      "temperatureCelsius", 21.0,
 *					      "conditions", "sunny"));
 *	}
 *
 *	static const struct berth_tool weather_tool = {
 *		.id = "weather-tool",
 *		.description = "Get the current weather for a location",
 *		.input_schema = "{\"type\":\"object\",\"properties\":"
 *				"{\"location\":{\"type\":\"string\"}},"
 *				"\"required\":[\"location\"]}",
 *		.execute = weather,
 *	};
 *
 *	int main(int argc, char **argv)
 *	{
 *		const struct berth_tool *tools[] = { &weather_tool };
 *		return berth_main(argc, argv, tools, 1);
 *	}
 *
 * Ownership follows jansson: "stolen" arguments become berth's even when
 * the call fails; "borrowed" ones stay the caller's.
 */
#ifndef BERTH_BERTH_H
#define BERTH_BERTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define BERTH_VERSION "0.1.0"

/* ---- what execute returns --------------------------------------------- */

enum berth_outcome_kind {
	BERTH_OUTPUT = 1, /* finished with an output */
	BERTH_SUSPEND,    /* suspended with a payload; resumed later */
	BERTH_ERROR,      /* failed; retried while retries are left if
			     retryable */
};

/* struct berth_outcome is what execute returns. Build it with the
 * functions below rather than by hand. */
struct berth_outcome {
	enum berth_outcome_kind kind;
	json_t *value;        /* output, suspend payload, or error data */
	json_t *model_output; /* BERTH_OUTPUT only, optional */
	char *message;        /* BERTH_ERROR: malloc'd sentence */
	bool retryable;       /* BERTH_ERROR */
};

/* berth_output returns an outcome holding output (stolen). */
struct berth_outcome berth_output(json_t *output);

/* berth_output_model returns an outcome holding output and the job's
 * modelOutput (both stolen); it overrides the tool's to_model_output. A
 * JSON null modelOutput is none. */
struct berth_outcome berth_output_model(json_t *output, json_t *model_output);

/* berth_suspend returns an outcome that suspends the job with payload
 * (stolen), which must satisfy the tool's suspend schema. */
struct berth_outcome berth_suspend(json_t *payload);

/* berth_error returns a failure outcome with a printf-style message and
 * optional data (stolen, may be NULL). */
struct berth_outcome berth_error(bool retryable, json_t *data, const char *fmt,
				 ...) __attribute__((format(printf, 3, 4)));

/* ---- the execution context -------------------------------------------- */

/*
 * struct berth_ctx is handed to execute. Every function below is safe to
 * call from the thread pool thread that runs execute; the context is valid
 * until execute returns. Returned json_t values are borrowed and must not
 * be changed.
 */
struct berth_ctx;

const char *berth_ctx_job_id(const struct berth_ctx *ctx);
const char *berth_ctx_tool(const struct berth_ctx *ctx);
/* berth_ctx_attempt returns the 1-based try number. */
int berth_ctx_attempt(const struct berth_ctx *ctx);
/* berth_ctx_tool_call_id and berth_ctx_run_id return the job's toolCallId
 * and runId (Mastra's context.agent.toolCallId and the run of the agent
 * that called), or NULL when the submission gave none. */
const char *berth_ctx_tool_call_id(const struct berth_ctx *ctx);
const char *berth_ctx_run_id(const struct berth_ctx *ctx);
/* These return NULL when the job has none. The request context and the
 * resume data come with the defaults of their schemas filled in, as the
 * input does (a Zod parse fills them in; the stored job keeps what the
 * client sent); a tool with a requestContextSchema gets {} and its
 * defaults when the submission gave no request context. */
const json_t *berth_ctx_request_context(const struct berth_ctx *ctx);
const json_t *berth_ctx_resume_data(const struct berth_ctx *ctx);
const json_t *berth_ctx_suspend_payload(const struct berth_ctx *ctx);
const json_t *berth_ctx_checkpoint(const struct berth_ctx *ctx);
/* berth_ctx_metadata returns the job's metadata, the object the
 * submission kept with the job. */
const json_t *berth_ctx_metadata(const struct berth_ctx *ctx);
/* berth_ctx_mcp_meta returns the _meta object of the MCP tools/call the
 * job came from (Mastra's context.mcp), or NULL when it did not come
 * through MCP or had none. berthd keeps it in the job's metadata.mcp
 * ({"_meta", "clientInfo"}), which no other submission may set, so its
 * presence says the job came through MCP. */
const json_t *berth_ctx_mcp_meta(const struct berth_ctx *ctx);

/* berth_ctx_aborted returns true once the job was cancelled or timed out,
 * or the daemon is shutting down. A well-behaved execute checks it in its
 * loops and returns soon after; what it returns then is discarded. */
bool berth_ctx_aborted(const struct berth_ctx *ctx);

/* berth_ctx_save_checkpoint stores value (borrowed) as the job's durable
 * checkpoint and returns once it is committed: 0, or a negative errno-style
 * code (the job was cancelled, storage failed; -ENOTSUP in a nonblocking
 * tool, which cannot wait). A later run of the job (a retry, a resume, a
 * run after a crash) sees it in berth_ctx_checkpoint. */
int berth_ctx_save_checkpoint(struct berth_ctx *ctx, const json_t *value);

/* berth_ctx_progress reports progress; total < 0 and message NULL mean
 * absent. Cheap: updates are coalesced. */
void berth_ctx_progress(struct berth_ctx *ctx, double progress, double total,
			const char *message);

/* berth_ctx_log writes a structured log line to the job's log; level is
 * "debug", "info", "warn" or "error"; data (borrowed) may be NULL. */
void berth_ctx_log(struct berth_ctx *ctx, const char *level,
		   const json_t *data, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* ---- the tool --------------------------------------------------------- */

/* Which payload a transform is asked to present: the stages of Mastra's
 * transform that berth has (its inputDelta has no source in a daemon: a
 * call's input streams from the agent's model). APPROVAL is the payload
 * of the approval_requested event, the input. */
enum berth_payload {
	BERTH_PAYLOAD_INPUT = 0,
	BERTH_PAYLOAD_OUTPUT,
	BERTH_PAYLOAD_ERROR,
	BERTH_PAYLOAD_SUSPEND,
	BERTH_PAYLOAD_RESUME,
	BERTH_PAYLOAD_APPROVAL,
};

/* What to do with a run that a restart of berthd interrupted. */
enum berth_interrupt {
	BERTH_INTERRUPT_RETRY = 0, /* run it again (counts as a try) */
	BERTH_INTERRUPT_FAIL,      /* fail it: the tool must not re-run */
};

/* Every setting is listed by tools/list as it takes effect; docs/TOOLS.md
 * says what each means and which of Mastra's names it stands for. */
struct berth_background {
	/* background.enabled = false, a foreground tool: MCP clients are
	 * told it runs as no task (taskSupport "forbidden") and wait for its
	 * result; its jobs are durable jobs like any other. */
	bool disabled;
	int64_t timeout_ms;    /* 0: the daemon's default (300 s) */
	int max_retries;       /* retries after the first try; 0: none */
	int concurrency;       /* at most this many running; 0: no limit */
	int64_t backoff_ms;    /* first retry delay; 0: 1000 */
	int64_t backoff_max_ms; /* 0: 300000 */
	enum berth_interrupt on_interrupt;
};

/* The call a hook is about. */
struct berth_call {
	const char *job_id;
	const char *tool;
	const char *tool_call_id; /* may be NULL */
	const char *run_id;       /* may be NULL */
	const json_t *request_context; /* may be NULL; as the client sent it */
	const json_t *metadata;        /* may be NULL */
};

typedef struct berth_outcome (*berth_execute_fn)(const json_t *input,
						 struct berth_ctx *ctx,
						 void *data);

/*
 * struct berth_tool declares a tool. Every field but id and execute is
 * optional. Schemas and the other JSON fields are JSON text; the registry
 * parses and checks them once, at registration, and keeps its own copies,
 * so the strings may be freed after registration. Functions other than
 * execute run on the loop thread and must be quick; a hook that returns
 * non-zero is logged and never fails the job.
 *
 * Values are checked against their schemas the way Zod parses them: the
 * schema's defaults are filled in first (docs/TOOLS.md says where from).
 * execute, require_approval_fn and on_input_available get the input so
 * filled; the job keeps what the client sent.
 */
struct berth_tool {
	const char *id; /* a valid MCP tool name: [A-Za-z0-9_.-]{1,128} */
	const char *title;
	const char *description;

	const char *input_schema;  /* an object schema, as MCP requires */
	const char *output_schema; /* of any type */
	const char *suspend_schema;
	const char *resume_schema;
	const char *request_context_schema;

	bool strict;
	bool require_approval;
	/* require_approval_fn, when set, decides from the input and
	 * overrides require_approval. */
	bool (*require_approval_fn)(const json_t *input, void *data);
	/* approval_policy: a JSON object, who may decide a job that waits
	 * for approval: {"selfApproval": bool (may its submitter decide
	 * it?), "approvers": [principal names and "role:NAME"], "quorum":
	 * distinct approvals needed} (docs/TOOLS.md). NULL: anyone with the
	 * approve role but the submitter (with --principals), one
	 * approval. */
	const char *approval_policy;

	struct berth_background background;

	/* JSON object: title (a string), readOnlyHint, destructiveHint,
	 * idempotentHint, openWorldHint (booleans); another member is
	 * logged as a warning and listed as it is. */
	const char *mcp_annotations;
	const char *mcp_meta;        /* JSON object, passed to MCP clients */
	const char *input_examples;  /* JSON array of {"input": {...}} */
	const char *provider_options; /* JSON object */

	berth_execute_fn execute;
	/* nonblocking: execute never blocks, returns within microseconds and
	 * has no effect outside its outcome (pure computation on its input).
	 * berthd then calls it on the loop thread instead of handing it to
	 * the thread pool and back; and a job submitted while a slot is free
	 * and nothing waits runs before its creation is committed, so that
	 * its creation, start and end commit together (a crash before that
	 * commit loses the job and its unanswered submission together; an
	 * execute that crashes the daemon then does so before its job is
	 * recorded, so no retry count stops it). A blocking call in such an
	 * execute stalls the whole daemon, and it cannot save a checkpoint. A tool with on_input_available is not
	 * run before its creation commits, so that the hook comes first. */
	bool nonblocking;

	/* to_model_output returns a new reference to the job's modelOutput
	 * for output, or NULL for none. */
	json_t *(*to_model_output)(const json_t *output, void *data);

	/* display and transcript return a new reference to the view of a
	 * payload at a stage (Mastra's transform.display and
	 * transform.transcript), or NULL to show it unchanged. */
	json_t *(*display)(enum berth_payload which, const json_t *payload,
			   void *data);
	json_t *(*transcript)(enum berth_payload which, const json_t *payload,
			      void *data);

	int (*on_input_available)(const json_t *input,
				  const struct berth_call *call, void *data);
	int (*on_output)(const json_t *output, const struct berth_call *call,
			 void *data);
	/* on_complete and on_failed get the finished Job object. */
	int (*on_complete)(const json_t *job, void *data);
	int (*on_failed)(const json_t *job, void *data);

	void *data; /* handed to every function above */
};

/*
 * berth_main runs a whole daemon: it parses argv as berthd does (see
 * `berthd --help`), registers tools (borrowed; they must outlive the
 * call), and serves until SIGTERM or SIGINT. Returns the process exit
 * status: 0 after a clean shutdown, 1 when start-up failed (with the
 * reason on stderr), 2 for a usage error.
 */
int berth_main(int argc, char **argv, const struct berth_tool *const *tools,
	       size_t ntools);

#endif

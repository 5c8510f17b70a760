/*
 * test_tool.c: a C tool gets what createTool's execute gets (docs/TOOLS.md):
 * its call's toolCallId, runId, metadata and MCP _meta; its input, request
 * context and resume data with their schemas' defaults filled in, while
 * the job keeps what was sent; a request context failing its schema is
 * refused at submission, before anyone is asked to approve, and checked
 * again before each run; MCP annotations are checked at registration; an
 * outputSchema may be of any type; and every background setting is
 * listed.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"

static atomic_int executed;

static const struct worker_config cfg = {.workers = 4, .kill_grace_ms = 200,
					 .shutdown_grace_ms = 200};

/* exec_echo answers with everything its context gives. */
static struct berth_outcome exec_echo(const json_t *input,
				      struct berth_ctx *ctx, void *data)
{
	const char *call = berth_ctx_tool_call_id(ctx);
	const char *run = berth_ctx_run_id(ctx);

	atomic_fetch_add(&executed, 1);
	return berth_output(json_pack(
		"{s:O, s:s*, s:s*, s:O*, s:O*, s:O*, s:O*}", "input", input,
		"toolCallId", call, "runId", run, "metadata",
		berth_ctx_metadata(ctx), "mcpMeta", berth_ctx_mcp_meta(ctx),
		"requestContext", berth_ctx_request_context(ctx), "resumeData",
		berth_ctx_resume_data(ctx)));
}

static const struct berth_tool echo = {
	.id = "echo",
	.input_schema = "{\"type\":\"object\",\"properties\":{"
			"\"location\":{\"type\":\"string\"},"
			"\"unit\":{\"enum\":[\"C\",\"F\"],\"default\":\"C\"},"
			"\"opts\":{\"type\":\"object\",\"default\":{},"
			"\"properties\":{\"days\":{\"type\":\"integer\","
			"\"default\":3}}}},"
			"\"required\":[\"location\",\"unit\"]}",
	.request_context_schema = "{\"type\":\"object\",\"properties\":{"
				  "\"mode\":{\"type\":\"string\","
				  "\"default\":\"fast\"}}}",
	.execute = exec_echo,
};

/* exec_ask suspends on its first run and echoes its resume data after. */
static struct berth_outcome exec_ask(const json_t *input,
				     struct berth_ctx *ctx, void *data)
{
	if (!berth_ctx_resume_data(ctx))
		return berth_suspend(json_pack("{s:s}", "question", "name?"));
	return exec_echo(input, ctx, data);
}

static const struct berth_tool ask = {
	.id = "ask",
	.resume_schema = "{\"type\":\"object\",\"properties\":{"
			 "\"answer\":{\"type\":\"string\"},"
			 "\"polite\":{\"type\":\"boolean\",\"default\":true}},"
			 "\"required\":[\"answer\",\"polite\"]}",
	.suspend_schema = "{\"type\":\"object\",\"properties\":{"
			  "\"question\":{\"type\":\"string\"},"
			  "\"choices\":{\"type\":\"array\",\"default\":[]}}}",
	.execute = exec_ask,
};

static bool approval_when_big(const json_t *input, void *data)
{
	return json_integer_value(json_object_get(input, "amount")) > 100;
}

static const struct berth_tool policy = {
	.id = "policy",
	.input_schema = "{\"type\":\"object\",\"properties\":{\"amount\":"
			"{\"type\":\"integer\",\"default\":500}}}",
	.require_approval_fn = approval_when_big,
	.execute = exec_echo,
};

static const struct berth_tool gated_ctx = {
	.id = "gated-ctx",
	.require_approval = true,
	.request_context_schema = "{\"type\":\"object\",\"properties\":"
				  "{\"userId\":{\"type\":\"string\"}},"
				  "\"required\":[\"userId\"]}",
	.execute = exec_echo,
};

/* exec_field answers with the input's "v", whatever its type. */
static struct berth_outcome exec_field(const json_t *input,
				       struct berth_ctx *ctx, void *data)
{
	json_t *v = json_object_get(input, "v");

	return berth_output(v ? json_incref(v) : json_null());
}

static const struct berth_tool scalar = {
	.id = "scalar",
	.output_schema = "{\"type\":\"string\"}",
	.execute = exec_field,
};

static const struct berth_tool out_default = {
	.id = "out-default",
	.output_schema = "{\"type\":\"object\",\"properties\":{"
			 "\"a\":{\"type\":\"integer\"},"
			 "\"b\":{\"type\":\"string\",\"default\":\"x\"}},"
			 "\"required\":[\"a\",\"b\"]}",
	.execute = exec_field,
};

static const struct berth_tool tuned = {
	.id = "tuned",
	.background = {.timeout_ms = 1500, .max_retries = 2,
		       .concurrency = 3, .backoff_ms = 250,
		       .backoff_max_ms = 9000,
		       .on_interrupt = BERTH_INTERRUPT_FAIL},
	.execute = exec_echo,
};

static const struct berth_tool foreground = {
	.id = "foreground",
	.background = {.disabled = true},
	.execute = exec_field,
};

static void add_tools(struct fx *f)
{
	const struct berth_tool *tools[] = {
		&echo, &ask, &policy, &gated_ctx, &scalar, &out_default,
		&tuned, &foreground,
	};

	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++) {
		char *err = NULL;

		if (worker_add_tool(f->w, tools[i], &err))
			fprintf(stderr, "%s\n", err);
		assert_null(err);
	}
}

static int setup(void **state)
{
	struct fx *f = fx_new(&cfg);

	add_tools(f);
	fx_start(f);
	atomic_store(&executed, 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx_free(*state);
	return 0;
}

/* ---- execute's context ------------------------------------------------ */

static void execute__gets_the_calls_ids_its_metadata_and_mcp_meta(
	void **state)
{
	struct fx *f = *state;
	struct worker_submit p = {.tool_call_id = "call-1", .run_id = "run-1"};
	struct store_job *j;
	json_t *out;
	char id[40];

	p.metadata = fx_json("{\"thread\":\"t-9\"}");
	p.mcp = fx_json("{\"_meta\":{\"progressToken\":7}}");
	fx_submit_ok(f, "echo", "{\"location\":\"Oslo\"}", &p, id);
	json_decref(p.metadata);
	json_decref(p.mcp);
	out = fx_completed_output(f, id);
	assert_string_equal(json_string_value(json_object_get(out,
							      "toolCallId")),
			    "call-1");
	assert_string_equal(json_string_value(json_object_get(out, "runId")),
			    "run-1");
	fx_assert_json(json_object_get(out, "mcpMeta"), "{\"progressToken\":7}");
	fx_assert_json(json_object_get(out, "metadata"),
		    "{\"thread\":\"t-9\",\"mcp\":{\"_meta\":"
		    "{\"progressToken\":7}}}");
	json_decref(out);
	/* The job keeps the _meta where a client reads it. */
	j = fx_get(f, id);
	fx_assert_json(json_object_get(j->metadata, "mcp"),
		    "{\"_meta\":{\"progressToken\":7}}");
	store_job_free(j);

	fx_submit_ok(f, "echo", "{\"location\":\"Oslo\"}", NULL, id);
	out = fx_completed_output(f, id);
	assert_null(json_object_get(out, "toolCallId"));
	assert_null(json_object_get(out, "runId"));
	assert_null(json_object_get(out, "metadata"));
	assert_null(json_object_get(out, "mcpMeta"));
	json_decref(out);
}

/* Only the MCP server says a job came through MCP: a submission cannot
 * put an mcp member of its own into the metadata. */
static void submit__with_an_mcp_meta_in_its_metadata__is_refused(
	void **state)
{
	struct fx *f = *state;
	struct worker_submit p = {0};
	struct fx_res res;

	p.metadata = fx_json("{\"mcp\":{\"_meta\":{\"forged\":true}}}");
	fx_submit(f, "echo", "{\"location\":\"Oslo\"}", &p, &res);
	json_decref(p.metadata);
	assert_int_equal(res.err, WORKER_EINVAL);
	assert_non_null(strstr(res.message, "metadata.mcp "));
	assert_string_equal(json_string_value(json_object_get(
				    json_array_get(json_object_get(res.data,
								   "errors"),
						   0),
				    "instancePath")),
			    "/metadata/mcp");
	fx_res_finish(&res);
}

/* ---- defaults ----------------------------------------------------------- */

static void execute__gets_the_input_with_defaults_the_job_keeps_it_as_sent(
	void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	json_t *out;
	char id[40];

	/* "unit" is required and has a default, as in Zod's output-mode
	 * JSON Schema: the submission passes without it. */
	fx_submit_ok(f, "echo", "{\"location\":\"Oslo\"}", NULL, id);
	out = fx_completed_output(f, id);
	fx_assert_json(json_object_get(out, "input"),
		    "{\"location\":\"Oslo\",\"unit\":\"C\","
		    "\"opts\":{\"days\":3}}");
	json_decref(out);
	j = fx_get(f, id);
	fx_assert_json(j->input, "{\"location\":\"Oslo\"}");
	store_job_free(j);
}

static void execute__gets_the_request_context_with_its_defaults(
	void **state)
{
	struct fx *f = *state;
	struct worker_submit p = {0};
	struct store_job *j;
	json_t *out;
	char id[40];

	fx_submit_ok(f, "echo", "{\"location\":\"Oslo\"}", NULL, id);
	out = fx_completed_output(f, id);
	fx_assert_json(json_object_get(out, "requestContext"),
		    "{\"mode\":\"fast\"}");
	json_decref(out);

	p.request_context = fx_json("{\"user\":\"u1\"}");
	fx_submit_ok(f, "echo", "{\"location\":\"Oslo\"}", &p, id);
	json_decref(p.request_context);
	out = fx_completed_output(f, id);
	fx_assert_json(json_object_get(out, "requestContext"),
		    "{\"user\":\"u1\",\"mode\":\"fast\"}");
	json_decref(out);
	j = fx_get(f, id);
	fx_assert_json(j->request_context, "{\"user\":\"u1\"}");
	store_job_free(j);
}

static void resume__data_reaches_execute_with_its_defaults(void **state)
{
	struct fx *f = *state;
	struct fx_res res = {0};
	struct store_job *j;
	json_t *d = fx_json("{\"answer\":\"Ada\"}"), *out;
	char id[40];

	fx_submit_ok(f, "ask", "{}", NULL, id);
	fx_wait_status(f, id, STORE_SUSPENDED, 10000);
	/* The suspend payload is kept as its schema parses it. */
	j = fx_get(f, id);
	fx_assert_json(j->suspend_payload,
		    "{\"question\":\"name?\",\"choices\":[]}");
	store_job_free(j);
	/* "polite" is required and has a default: the resume passes. */
	assert_int_equal(worker_resume(f->w, id, d, NULL, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	assert_int_equal(res.err, WORKER_OK);
	fx_res_finish(&res);
	out = fx_completed_output(f, id);
	fx_assert_json(json_object_get(out, "resumeData"),
		    "{\"answer\":\"Ada\",\"polite\":true}");
	json_decref(out);
	j = fx_get(f, id);
	fx_assert_json(j->resume_data, "{\"answer\":\"Ada\"}");
	store_job_free(j);
	json_decref(d);
}

static void approval_policy__decides_from_the_input_with_its_defaults(
	void **state)
{
	struct fx *f = *state;
	char id[40];

	fx_submit_ok(f, "policy", "{}", NULL, id);
	assert_int_equal(fx_status(f, id), STORE_AWAITING_APPROVAL);
	fx_submit_ok(f, "policy", "{\"amount\":5}", NULL, id);
	fx_wait_status(f, id, STORE_COMPLETED, 10000);
}

static void output__is_kept_with_its_schemas_defaults(void **state)
{
	struct fx *f = *state;
	json_t *out;
	char id[40];

	fx_submit_ok(f, "out-default", "{\"v\":{\"a\":1}}", NULL, id);
	out = fx_completed_output(f, id);
	fx_assert_json(out, "{\"a\":1,\"b\":\"x\"}");
	json_decref(out);
}

/* ---- the request context at submission ---------------------------------- */

static void request_context__failing_its_schema__is_refused_before_approval(
	void **state)
{
	struct fx *f = *state;
	struct worker_submit p = {0};
	int64_t counts[STORE_NSTATUS] = {0};
	struct fx_res res;
	char id[40];

	p.request_context = fx_json("{\"userId\":7}");
	fx_submit(f, "gated-ctx", "{}", &p, &res);
	json_decref(p.request_context);
	assert_int_equal(res.err, WORKER_EINVAL);
	assert_non_null(strstr(res.message, "requestContextSchema"));
	assert_string_equal(json_string_value(json_object_get(
				    json_array_get(json_object_get(res.data,
								   "errors"),
						   0),
				    "instancePath")),
			    "/userId");
	fx_res_finish(&res);
	/* Absent, it is {}: still missing userId. */
	fx_submit(f, "gated-ctx", "{}", NULL, &res);
	assert_int_equal(res.err, WORKER_EINVAL);
	fx_res_finish(&res);
	/* No job exists, so nobody was asked to approve one. */
	assert_int_equal(store_count_by_status(f->st, counts), 0);
	assert_int_equal(counts[STORE_AWAITING_APPROVAL], 0);

	p.request_context = fx_json("{\"userId\":\"u1\"}");
	fx_submit_ok(f, "gated-ctx", "{}", &p, id);
	json_decref(p.request_context);
	assert_int_equal(fx_status(f, id), STORE_AWAITING_APPROVAL);
}

/* A job waiting for approval when its tool is given a stricter
 * requestContextSchema (a restart on a changed tool) is checked again
 * before it runs, and fails without running. */
static void request_context__is_checked_again_before_each_run(void **state)
{
	static const struct berth_tool before = {
		.id = "gated-ctx",
		.require_approval = true,
		.execute = exec_echo,
	};
	struct fx *f = *state;
	struct fx_res res = {0};
	struct store_job *j;
	char *err = NULL;
	char id[40];

	fx_restart(f, &cfg);
	assert_int_equal(worker_add_tool(f->w, &before, &err), 0);
	fx_start(f);
	fx_submit_ok(f, "gated-ctx", "{}", NULL, id);
	assert_int_equal(fx_status(f, id), STORE_AWAITING_APPROVAL);
	fx_restart(f, &cfg);
	assert_int_equal(worker_add_tool(f->w, &gated_ctx, &err), 0);
	fx_start(f);
	atomic_store(&executed, 0);
	assert_int_equal(worker_approve(f->w, id, NULL, NULL, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	assert_int_equal(res.err, WORKER_OK);
	fx_res_finish(&res);
	fx_wait_status(f, id, STORE_FAILED, 10000);
	j = fx_get(f, id);
	assert_string_equal(json_string_value(json_object_get(j->error,
							      "code")),
			    "invalid_request_context");
	store_job_free(j);
	assert_int_equal(atomic_load(&executed), 0);
}

/* ---- schemas, annotations, background ------------------------------------ */

static void output_schema__of_any_type__is_accepted_and_checked(
	void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	json_t *out;
	char good[40], bad[40];

	fx_submit_ok(f, "scalar", "{\"v\":\"sunny\"}", NULL, good);
	fx_submit_ok(f, "scalar", "{\"v\":21}", NULL, bad);
	out = fx_completed_output(f, good);
	fx_assert_json(out, "\"sunny\"");
	json_decref(out);
	fx_wait_status(f, bad, STORE_FAILED, 10000);
	j = fx_get(f, bad);
	assert_string_equal(json_string_value(json_object_get(j->error,
							      "code")),
			    "invalid_output");
	store_job_free(j);
}

/* with_stderr_to runs fn with berthd's stderr (the log) going to the
 * file path, and returns what was written there (malloc'd). */
static char *with_stderr_to(const char *path, void (*fn)(void *), void *arg)
{
	int saved = dup(2), fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	char *text = calloc(1, 8192);
	ssize_t n;

	assert_true(saved >= 0 && fd >= 0 && text);
	assert_int_equal(dup2(fd, 2), 2);
	fn(arg);
	assert_int_equal(dup2(saved, 2), 2);
	close(saved);
	n = pread(fd, text, 8191, 0);
	assert_true(n >= 0);
	close(fd);
	return text;
}

struct reg {
	struct fx *f;
	const struct berth_tool *t;
	int rc;
	char *err;
};

static void do_register(void *arg)
{
	struct reg *g = arg;

	g->rc = worker_add_tool(g->f->w, g->t, &g->err);
}

static void annotations__are_type_checked_at_registration(void **state)
{
	struct fx *f = *state;
	struct berth_tool t = {.id = "annotated", .execute = exec_field};
	static const char *const bad[][2] = {
		{"{\"readOnlyHint\":\"yes\"}", "readOnlyHint must be true or false"},
		{"{\"destructiveHint\":0}", "destructiveHint must be true or false"},
		{"{\"title\":5}", "title must be a string"},
		{"{\"cachedHint\":\"often\"}", "cachedHint must be true or false"},
	};
	struct reg g = {f, &t, 0, NULL};
	char path[400], *log;
	const struct worker_tool *wt;
	json_t *o;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *err = NULL;

		t.mcp_annotations = bad[i][0];
		assert_int_equal(worker_add_tool(f->w, &t, &err), -EINVAL);
		if (!strstr(err, bad[i][1]))
			fprintf(stderr, "\"%s\" lacks \"%s\"\n", err, bad[i][1]);
		assert_non_null(strstr(err, bad[i][1]));
		assert_non_null(strstr(err, "tool annotated"));
		free(err);
	}
	assert_null(worker_tool_find(f->w, "annotated"));
	/* A member MCP does not define is a warning, and is listed. */
	t.mcp_annotations = "{\"title\":\"Notes\",\"readOnlyHint\":true,"
			    "\"color\":\"teal\"}";
	snprintf(path, sizeof(path), "%s/stderr.log", f->dir);
	log = with_stderr_to(path, do_register, &g);
	assert_int_equal(g.rc, 0);
	assert_non_null(strstr(log, "warn"));
	assert_non_null(strstr(log, "tool annotated: mcp.annotations.color "
				    "is not an annotation MCP defines"));
	free(log);
	wt = worker_tool_find(f->w, "annotated");
	assert_non_null(wt);
	o = worker_tool_to_json(f->w, wt);
	fx_assert_json(json_object_get(o, "annotations"),
		    "{\"title\":\"Notes\",\"readOnlyHint\":true,"
		    "\"destructiveHint\":true,\"idempotentHint\":false,"
		    "\"openWorldHint\":true,\"color\":\"teal\"}");
	json_decref(o);
}

static void tools_list__shows_every_background_setting(void **state)
{
	struct fx *f = *state;
	json_t *o;

	o = worker_tool_to_json(f->w, worker_tool_find(f->w, "tuned"));
	fx_assert_json(json_object_get(o, "background"),
		    "{\"enabled\":true,\"timeoutMs\":1500,\"maxRetries\":2,"
		    "\"concurrency\":3,\"backoffMs\":250,"
		    "\"backoffMaxMs\":9000,\"onInterrupt\":\"fail\"}");
	json_decref(o);
	/* Unset, each shows the value that takes effect. */
	o = worker_tool_to_json(f->w, worker_tool_find(f->w, "echo"));
	fx_assert_json(json_object_get(o, "background"),
		    "{\"enabled\":true,\"timeoutMs\":300000,\"maxRetries\":0,"
		    "\"concurrency\":0,\"backoffMs\":1000,"
		    "\"backoffMaxMs\":300000,\"onInterrupt\":\"retry\"}");
	json_decref(o);
}

/* background.enabled false is Mastra's foreground tool: its caller waits
 * for the result. MCP is told the tool takes no task; a job of it is
 * still a durable job, run like any other. */
static void background__disabled__is_listed_as_foreground_and_still_runs(
	void **state)
{
	struct fx *f = *state;
	json_t *o, *out;
	char id[40];

	o = worker_tool_to_json(f->w, worker_tool_find(f->w, "foreground"));
	assert_true(json_is_false(json_object_get(
		json_object_get(o, "background"), "enabled")));
	assert_string_equal(json_string_value(json_object_get(
				    json_object_get(o, "execution"),
				    "taskSupport")),
			    "forbidden");
	json_decref(o);
	fx_submit_ok(f, "foreground", "{\"v\":\"done\"}", NULL, id);
	out = fx_completed_output(f, id);
	fx_assert_json(out, "\"done\"");
	json_decref(out);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(execute__gets_the_calls_ids_its_metadata_and_mcp_meta),
		T(submit__with_an_mcp_meta_in_its_metadata__is_refused),
		T(execute__gets_the_input_with_defaults_the_job_keeps_it_as_sent),
		T(execute__gets_the_request_context_with_its_defaults),
		T(resume__data_reaches_execute_with_its_defaults),
		T(approval_policy__decides_from_the_input_with_its_defaults),
		T(output__is_kept_with_its_schemas_defaults),
		T(request_context__failing_its_schema__is_refused_before_approval),
		T(request_context__is_checked_again_before_each_run),
		T(output_schema__of_any_type__is_accepted_and_checked),
		T(annotations__are_type_checked_at_registration),
		T(tools_list__shows_every_background_setting),
		T(background__disabled__is_listed_as_foreground_and_still_runs),
	};

	return cmocka_run_group_tests_name("worker C tools (createTool)",
					   tests, NULL, NULL);
}

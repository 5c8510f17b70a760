/*
 * test_external.c: an external tool (a manifest and a command) gets what
 * createTool's execute gets, as a C tool does (test_tool.c): its stdin
 * line carries the call's toolCallId, runId, metadata and MCP _meta, and
 * its input, request context and resume data with their schemas' defaults
 * filled in; its outputSchema may be of any type; and a transform declared
 * in its manifest shapes the display and transcript views and the events,
 * at every stage, hiding what it was not told to show. The commands are
 * small sh -c scripts (jq is allowed).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fixture.h"

static const char *const manifests[][2] = {
	{"line.json",
	 "{\"id\":\"x-line\",\"inputSchema\":{\"type\":\"object\","
	 "\"properties\":{\"location\":{\"type\":\"string\"},"
	 "\"unit\":{\"enum\":[\"C\",\"F\"],\"default\":\"C\"}},"
	 "\"required\":[\"location\",\"unit\"]},"
	 "\"requestContextSchema\":{\"type\":\"object\",\"properties\":{"
	 "\"mode\":{\"type\":\"string\",\"default\":\"fast\"}}},"
	 "\"command\":[\"/bin/sh\",\"-c\",\"jq -c '{output: .}'\"]}"},
	{"resume.json",
	 "{\"id\":\"x-resume\",\"resumeSchema\":{\"type\":\"object\","
	 "\"properties\":{\"answer\":{\"type\":\"string\"},\"polite\":{"
	 "\"type\":\"boolean\",\"default\":true}},\"required\":[\"answer\"]},"
	 "\"command\":[\"/bin/sh\",\"-c\",\"jq -c 'if .resumeData then "
	 "{output: .} else {suspend: {question: \\\"name?\\\"}} end'\"]}"},
	{"scalar.json",
	 "{\"id\":\"x-scalar\",\"outputSchema\":{\"type\":\"string\"},"
	 "\"command\":[\"/bin/sh\",\"-c\",\"jq -c '{output: .input.v}'\"]}"},
	{"secret.json",
	 "{\"id\":\"x-secret\",\"requireApproval\":true,"
	 "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
	 "\"customerId\":{\"type\":\"string\"},\"internalPath\":{"
	 "\"type\":\"string\"}}},"
	 "\"transform\":{\"display\":{"
	 "\"input\":{\"pick\":[\"/customerId\"]},"
	 "\"approval\":{\"pick\":[\"/customerId\"]},"
	 "\"output\":{\"pick\":[\"/displayName\"]},"
	 "\"error\":{\"const\":{\"message\":\"Customer lookup failed\"}}},"
	 "\"transcript\":{\"output\":{\"omit\":[\"/apiKey\"]}}},"
	 "\"command\":[\"/bin/sh\",\"-c\",\"jq -c 'if .input.fail then "
	 "{error: {message: (\\\"no \\\" + .input.internalPath)}} else "
	 "{output: {displayName: \\\"Acme\\\", apiKey: \\\"secret-value\\\", "
	 "debugScore: 0.97}} end'\"]}"},
};

static int setup(void **state)
{
	struct worker_config cfg = {.workers = 4, .kill_grace_ms = 200,
				    .shutdown_grace_ms = 200};
	struct fx *f = fx_new(&cfg);
	char *err = NULL;
	char dir[300];
	int n;

	snprintf(dir, sizeof(dir), "%s/tools", f->dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	for (size_t i = 0; i < sizeof(manifests) / sizeof(manifests[0]); i++) {
		char name[64];

		snprintf(name, sizeof(name), "tools/%s", manifests[i][0]);
		fx_write(f, name, manifests[i][1]);
	}
	n = worker_load_dir(f->w, dir, &err);
	if (n < 0)
		fprintf(stderr, "%s\n", err);
	assert_int_equal(n, (int)(sizeof(manifests) / sizeof(manifests[0])));
	fx_start(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx_free(*state);
	return 0;
}

/* event_data returns the data of job id's first event of type (new
 * reference), failing when it has none. */
static json_t *event_data(struct fx *f, const char *id, int type)
{
	struct store_event *ev = NULL;
	json_t *found = NULL;
	size_t n = 0;

	assert_int_equal(store_events(f->st, 0, id, 10000, &ev, &n), 0);
	for (size_t i = 0; i < n; i++) {
		if (ev[i].type == type && !found)
			found = json_incref(ev[i].data);
		store_event_finish(&ev[i]);
	}
	free(ev);
	assert_non_null(found);
	return found;
}

static void line__carries_the_calls_context_and_defaults(void **state)
{
	struct fx *f = *state;
	struct worker_submit p = {.tool_call_id = "call-7", .run_id = "run-7"};
	struct store_job *j;
	json_t *line;
	char id[40];

	p.metadata = fx_json("{\"thread\":\"t-1\"}");
	p.mcp = fx_json("{\"_meta\":{\"progressToken\":\"pt\"},"
		     "\"clientInfo\":{\"name\":\"c\"}}");
	p.request_context = fx_json("{\"user\":\"u1\"}");
	fx_submit_ok(f, "x-line", "{\"location\":\"Oslo\"}", &p, id);
	json_decref(p.metadata);
	json_decref(p.mcp);
	json_decref(p.request_context);
	line = fx_completed_output(f, id);
	assert_string_equal(json_string_value(json_object_get(line, "jobId")),
			    id);
	assert_string_equal(json_string_value(json_object_get(line, "tool")),
			    "x-line");
	assert_int_equal(json_integer_value(json_object_get(line, "attempt")),
			 1);
	assert_string_equal(json_string_value(json_object_get(line,
							      "toolCallId")),
			    "call-7");
	assert_string_equal(json_string_value(json_object_get(line, "runId")),
			    "run-7");
	fx_assert_json(json_object_get(line, "input"),
		    "{\"location\":\"Oslo\",\"unit\":\"C\"}");
	fx_assert_json(json_object_get(line, "requestContext"),
		    "{\"user\":\"u1\",\"mode\":\"fast\"}");
	fx_assert_json(json_object_get(line, "metadata"),
		    "{\"thread\":\"t-1\",\"mcp\":{\"_meta\":{\"progressToken\":"
		    "\"pt\"},\"clientInfo\":{\"name\":\"c\"}}}");
	fx_assert_json(json_object_get(line, "mcp"),
		    "{\"_meta\":{\"progressToken\":\"pt\"},"
		    "\"clientInfo\":{\"name\":\"c\"}}");
	/* What the job does not have is left out, not null. */
	assert_null(json_object_get(line, "resumeData"));
	assert_null(json_object_get(line, "suspendPayload"));
	assert_null(json_object_get(line, "checkpoint"));
	json_decref(line);
	j = fx_get(f, id);
	fx_assert_json(j->input, "{\"location\":\"Oslo\"}");
	fx_assert_json(j->request_context, "{\"user\":\"u1\"}");
	store_job_free(j);

	/* Without them: the ids and the MCP _meta are left out, and the
	 * request context is {} with its defaults. */
	fx_submit_ok(f, "x-line", "{\"location\":\"Oslo\",\"unit\":\"F\"}",
		     NULL, id);
	line = fx_completed_output(f, id);
	assert_null(json_object_get(line, "toolCallId"));
	assert_null(json_object_get(line, "runId"));
	assert_null(json_object_get(line, "metadata"));
	assert_null(json_object_get(line, "mcp"));
	fx_assert_json(json_object_get(line, "input"),
		    "{\"location\":\"Oslo\",\"unit\":\"F\"}");
	fx_assert_json(json_object_get(line, "requestContext"),
		    "{\"mode\":\"fast\"}");
	json_decref(line);
}

static void resume__data_reaches_the_tool_with_its_defaults(void **state)
{
	struct fx *f = *state;
	struct fx_res res = {0};
	json_t *d = fx_json("{\"answer\":\"Ada\"}"), *line;
	char id[40];

	fx_submit_ok(f, "x-resume", "{}", NULL, id);
	fx_wait_status(f, id, STORE_SUSPENDED, 10000);
	assert_int_equal(worker_resume(f->w, id, d, NULL, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	assert_int_equal(res.err, WORKER_OK);
	fx_res_finish(&res);
	line = fx_completed_output(f, id);
	fx_assert_json(json_object_get(line, "resumeData"),
		    "{\"answer\":\"Ada\",\"polite\":true}");
	fx_assert_json(json_object_get(line, "suspendPayload"),
		    "{\"question\":\"name?\"}");
	json_decref(line);
	json_decref(d);
}

static void output_schema__of_any_type__is_accepted_and_checked(
	void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	json_t *out;
	char good[40], bad[40];

	fx_submit_ok(f, "x-scalar", "{\"v\":\"sunny\"}", NULL, good);
	fx_submit_ok(f, "x-scalar", "{\"v\":{\"not\":\"a string\"}}", NULL,
		     bad);
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

static void approve(struct fx *f, const char *id)
{
	struct fx_res res = {0};

	assert_int_equal(worker_approve(f->w, id, NULL, NULL, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	assert_int_equal(res.err, WORKER_OK);
	fx_res_finish(&res);
}

/* The reference page's lookup-customer tool, transforms and all: the
 * views and the events show what the transform says, and nothing of what
 * it does not name (the apiKey, the internal path). */
static void transform__declared__shapes_views_and_events_at_every_stage(
	void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	json_t *v, *o;
	char id[40], failing[40];

	fx_submit_ok(f, "x-secret",
		     "{\"customerId\":\"c1\",\"internalPath\":\"/srv/x\"}", NULL,
		     id);
	assert_int_equal(fx_status(f, id), STORE_AWAITING_APPROVAL);
	v = event_data(f, id, STORE_EV_APPROVAL_REQUESTED);
	fx_assert_json(v, "{\"customerId\":\"c1\"}");
	json_decref(v);
	v = event_data(f, id, STORE_EV_CREATED);
	fx_assert_json(v, "{\"customerId\":\"c1\"}");
	json_decref(v);
	approve(f, id);
	json_decref(fx_completed_output(f, id));
	v = event_data(f, id, STORE_EV_COMPLETED);
	fx_assert_json(v, "{\"displayName\":\"Acme\"}");
	json_decref(v);

	j = fx_get(f, id);
	o = worker_job_to_json(f->w, j, WORKER_VIEW_DISPLAY);
	fx_assert_json(json_object_get(o, "input"), "{\"customerId\":\"c1\"}");
	fx_assert_json(json_object_get(o, "output"), "{\"displayName\":\"Acme\"}");
	json_decref(o);
	o = worker_job_to_json(f->w, j, WORKER_VIEW_TRANSCRIPT);
	fx_assert_json(json_object_get(o, "output"),
		    "{\"displayName\":\"Acme\",\"debugScore\":0.97}");
	/* The transcript declares no input stage: it shows none. */
	fx_assert_json(json_object_get(o, "input"),
		    "{\"message\":\"Tool input payload unavailable\"}");
	json_decref(o);
	o = worker_job_to_json(f->w, j, WORKER_VIEW_RAW);
	assert_string_equal(json_string_value(json_object_get(
				    json_object_get(o, "output"), "apiKey")),
			    "secret-value");
	json_decref(o);
	store_job_free(j);

	fx_submit_ok(f, "x-secret",
		     "{\"customerId\":\"c2\",\"internalPath\":\"/srv/y\","
		     "\"fail\":true}",
		     NULL, failing);
	approve(f, failing);
	fx_wait_status(f, failing, STORE_FAILED, 10000);
	v = event_data(f, failing, STORE_EV_FAILED);
	fx_assert_json(v, "{\"message\":\"Customer lookup failed\"}");
	json_decref(v);
	j = fx_get(f, failing);
	o = worker_job_to_json(f->w, j, WORKER_VIEW_TRANSCRIPT);
	fx_assert_json(json_object_get(o, "error"),
		    "{\"message\":\"Tool error payload unavailable\"}");
	json_decref(o);
	store_job_free(j);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(line__carries_the_calls_context_and_defaults),
		T(resume__data_reaches_the_tool_with_its_defaults),
		T(output_schema__of_any_type__is_accepted_and_checked),
		T(transform__declared__shapes_views_and_events_at_every_stage),
	};

	return cmocka_run_group_tests_name("worker external tools (createTool)",
					   tests, NULL, NULL);
}

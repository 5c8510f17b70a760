/*
 * test_methods.c: every method of PROTOCOL.md against a real berthd, and
 * the error codes each can answer.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/api/support.h"

static struct harness h;
/* A second berthd some tests start; the group's teardown stops it when a
 * failed test could not. */
static struct harness other;

static int start(void **state)
{
	support_start(&h, NULL);
	return 0;
}

static int stop(void **state)
{
	int rc = harness_stop(&h);

	harness_cleanup(&h);
	harness_cleanup(&other);
	return rc == 0 ? 0 : -1;
}

/* ---- server ------------------------------------------------------------ */

static void server_info__has_every_field_and_all_ten_statuses(void **state)
{
	static const char *const statuses[] = {
		"pending", "awaiting_approval", "running", "suspended",
		"completed", "failed", "timed_out", "declined", "cancelled",
		"expired",
	};
	struct berth_client *c = support_connect(&h);
	json_t *info = call_ok(c, "server/info", NULL);
	json_t *jobs = json_object_get(info, "jobs");
	json_t *workers = json_object_get(info, "workers");

	assert_string_equal(jstr(info, "name"), "berth");
	assert_true(strlen(jstr(info, "version")) > 0);
	assert_true(strlen(jstr(info, "protocolVersion")) > 0);
	assert_string_equal(jstr(info, "durability"), "full");
	assert_string_equal(jstr(info, "database"), h.db);
	assert_true(json_is_integer(json_object_get(info, "uptimeMs")));
	assert_int_equal(json_object_size(jobs), 10);
	for (size_t i = 0; i < 10; i++)
		assert_true(json_is_integer(json_object_get(jobs, statuses[i])));
	assert_true(json_integer_value(json_object_get(workers, "size")) > 0);
	assert_true(json_is_integer(json_object_get(workers, "busy")));
	json_decref(info);
	berth_client_close(c);
}

static void ping__echoes_string_number_and_null_ids(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *r;

	r = exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"method\":\"ping\"}");
	assert_string_equal(jstr(r, "id"), "abc");
	assert_true(json_is_object(json_object_get(r, "result")));
	json_decref(r);
	r = exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"ping\"}");
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 42);
	json_decref(r);
	r = exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}");
	assert_true(json_real_value(json_object_get(r, "id")) == 1.5);
	json_decref(r);
	r = exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}");
	assert_true(json_is_null(json_object_get(r, "id")));
	assert_non_null(json_object_get(r, "result"));
	json_decref(r);
	berth_client_close(c);
}

static void server_auth__on_the_unix_socket__takes_no_token(void **state)
{
	struct berth_client *c = support_connect(&h);

	json_decref(call_ok(c, "server/auth", json_pack("{s:s}", "token", "x")));
	json_decref(call_err(c, "server/auth", json_object(), -32602));
	berth_client_close(c);
}

/* ---- tools ------------------------------------------------------------- */

static json_t *find_tool(struct berth_client *c, const char *name)
{
	json_t *res = call_ok(c, "tools/list", NULL), *t, *found = NULL;
	size_t i;

	json_array_foreach(json_object_get(res, "tools"), i, t)
		if (strcmp(jstr(t, "name"), name) == 0)
			found = json_incref(t);
	json_decref(res);
	return found;
}

static void tools_list__gives_mcp_tools_with_berth_fields(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *ask = find_tool(c, "api-ask"), *approve = find_tool(c, "api-approve");

	assert_non_null(ask);
	assert_true(json_is_object(json_object_get(ask, "inputSchema")));
	assert_true(json_is_object(json_object_get(ask, "resumeSchema")));
	assert_true(json_is_false(json_object_get(ask, "paused")));
	assert_non_null(approve);
	assert_true(json_is_true(json_object_get(approve, "requireApproval")));
	json_decref(ask);
	json_decref(approve);
	berth_client_close(c);
}

/* Every background setting is listed, as it takes effect; api-ctx names
 * its retry settings as Mastra's RetryConfig does. */
static void tools_list__shows_every_background_setting(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *t = find_tool(c, "api-ctx"), *bg;
	json_t *want = json_pack("{s:b, s:i, s:i, s:i, s:i, s:i, s:s}",
				 "enabled", 1, "timeoutMs", 20000,
				 "maxRetries", 2, "concurrency", 0,
				 "backoffMs", 250, "backoffMaxMs", 4000,
				 "onInterrupt", "fail");

	assert_non_null(t);
	bg = json_object_get(t, "background");
	if (!json_equal(bg, want)) {
		char *s = json_dumps(bg, JSON_COMPACT);

		print_error("background is %s\n", s ? s : "?");
		free(s);
	}
	assert_true(json_equal(bg, want));
	json_decref(want);
	json_decref(t);
	berth_client_close(c);
}

static void pause__holds_a_tools_jobs_until_unpause(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *job, *t, *res;

	json_decref(call_ok(c, "tools/pause", json_pack("{s:s}", "name", "noop")));
	t = find_tool(c, "noop");
	assert_true(json_is_true(json_object_get(t, "paused")));
	json_decref(t);
	job = submit(c, "noop", "{\"x\":1}");
	res = call_ok(c, "jobs/wait", json_pack("{s:s, s:i}", "id", jstr(job, "id"),
						"timeoutMs", 500));
	assert_string_equal(jstr(res, "status"), "pending");
	json_decref(res);
	json_decref(call_ok(c, "tools/unpause", json_pack("{s:s}", "name", "noop")));
	json_decref(wait_for(c, jstr(job, "id"), "completed"));
	json_decref(job);
	json_decref(call_err(c, "tools/pause", json_pack("{s:s}", "name", "nope"),
			     -32011));
	json_decref(call_err(c, "tools/pause", json_object(), -32602));
	berth_client_close(c);
}

/* ---- submit ------------------------------------------------------------ */

static void submit__returns_a_pending_job_with_a_uuid7_id(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *job = call_ok(c, "jobs/submit",
			      json_pack("{s:s, s:{s:i}, s:s, s:s, s:{s:s}}",
					"tool", "noop", "input", "n", 1,
					"runId", "run-1", "toolCallId", "call-1",
					"metadata", "who", "test"));
	const char *id = jstr(job, "id");

	assert_int_equal(strlen(id), 36);
	assert_int_equal(id[14], '7');
	assert_true(strchr("89ab", id[19]) != NULL);
	assert_string_equal(jstr(job, "tool"), "noop");
	assert_true(strcmp(jstr(job, "status"), "pending") == 0 ||
		    strcmp(jstr(job, "status"), "running") == 0 ||
		    strcmp(jstr(job, "status"), "completed") == 0);
	assert_string_equal(jstr(job, "runId"), "run-1");
	assert_string_equal(jstr(job, "toolCallId"), "call-1");
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(job, "input"), "n")), 1);
	assert_string_equal(jstr(json_object_get(job, "metadata"), "who"), "test");
	json_decref(job);
	berth_client_close(c);
}

static void submit__with_the_same_key__returns_the_first_job(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *a = call_ok(c, "jobs/submit",
			    json_pack("{s:s, s:{}, s:s}", "tool", "noop", "input",
				      "idempotencyKey", "key-1"));
	json_t *b = call_ok(c, "jobs/submit",
			    json_pack("{s:s, s:{}, s:s}", "tool", "noop", "input",
				      "idempotencyKey", "key-1"));

	assert_string_equal(jstr(a, "id"), jstr(b, "id"));
	json_decref(a);
	json_decref(b);
	berth_client_close(c);
}

static void submit__of_an_unknown_tool__is_not_found(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *err = call_err(c, "jobs/submit",
			       json_pack("{s:s, s:{}}", "tool", "no-such-tool",
					 "input"), -32011);

	assert_string_equal(jstr(json_object_get(err, "data"), "id"),
			    "no-such-tool");
	json_decref(err);
	berth_client_close(c);
}

static void submit__with_input_failing_the_schema__lists_the_errors(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *err = call_err(c, "jobs/submit",
			       json_pack("{s:s, s:{s:i}}", "tool", "api-ask",
					 "input", "question", 5), -32602);
	json_t *errors = json_object_get(json_object_get(err, "data"), "errors");
	json_t *first = json_array_get(errors, 0);

	assert_true(json_array_size(errors) >= 1);
	assert_true(json_is_string(json_object_get(first, "instancePath")));
	assert_true(json_is_string(json_object_get(first, "keyword")));
	assert_true(json_is_string(json_object_get(first, "message")));
	json_decref(err);
	berth_client_close(c);
}

/* A request context failing the tool's schema is refused like input that
 * fails its schema, before a job exists, so nobody is asked to approve a
 * job certain to fail; a valid one reaches the tool with its defaults. */
static void submit__with_a_request_context_failing_its_schema__is_refused(
	void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *err, *list, *job, *first;
	char id[64];

	err = call_err(c, "jobs/submit",
		       json_pack("{s:s, s:{}, s:{s:i}}", "tool", "api-ctx",
				 "input", "requestContext", "userId", 7),
		       -32602);
	assert_non_null(strstr(jstr(err, "message"), "requestContextSchema"));
	first = json_array_get(json_object_get(json_object_get(err, "data"),
					       "errors"),
			       0);
	assert_string_equal(jstr(first, "instancePath"), "/userId");
	assert_string_equal(jstr(first, "keyword"), "type");
	json_decref(err);
	json_decref(call_err(c, "jobs/submit",
			     json_pack("{s:s, s:{}}", "tool", "api-ctx", "input"),
			     -32602));
	list = call_ok(c, "jobs/list", json_pack("{s:s}", "tool", "api-ctx"));
	assert_int_equal(json_array_size(json_object_get(list, "jobs")), 0);
	json_decref(list);

	job = call_ok(c, "jobs/submit",
		      json_pack("{s:s, s:{}, s:{s:s}}", "tool", "api-ctx",
				"input", "requestContext", "userId", "u1"));
	assert_string_equal(jstr(job, "status"), "awaiting_approval");
	snprintf(id, sizeof id, "%s", jstr(job, "id"));
	json_decref(job);
	json_decref(call_ok(c, "jobs/approve", json_pack("{s:s}", "id", id)));
	job = wait_for(c, id, "completed");
	first = json_object_get(json_object_get(job, "output"),
				"requestContext");
	assert_string_equal(jstr(first, "userId"), "u1");
	assert_string_equal(jstr(first, "mode"), "fast");
	/* The job keeps the request context as it was sent. */
	assert_null(json_object_get(json_object_get(job, "requestContext"),
				    "mode"));
	json_decref(job);
	berth_client_close(c);
}

static void submit__with_bad_params__is_invalid_params(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *err;

	err = call_err(c, "jobs/submit",
		       json_pack("{s:s, s:{}, s:s, s:i}", "tool", "noop", "input",
				 "runAt", "2030-01-01T00:00:00Z", "delayMs", 10),
		       -32602);
	assert_true(json_array_size(json_object_get(
			    json_object_get(err, "data"), "errors")) >= 1);
	json_decref(err);
	json_decref(call_err(c, "jobs/submit",
			     json_pack("{s:s, s:{}, s:s}", "tool", "noop", "input",
				       "runAt", "tomorrow"), -32602));
	/* A time before 1970 is refused as the others are, with data.errors
	 * naming /runAt (it was a bare -32602 that named four params). */
	err = call_err(c, "jobs/submit",
		       json_pack("{s:s, s:{}, s:s}", "tool", "noop", "input",
				 "runAt", "1969-12-31T23:59:59.999Z"),
		       -32602);
	assert_string_equal(jstr(json_array_get(json_object_get(json_object_get(
				     err, "data"), "errors"), 0),
				 "instancePath"),
			    "/runAt");
	json_decref(err);
	json_decref(call_err(c, "jobs/submit",
			     json_pack("{s:s}", "tool", "noop"), -32602));
	json_decref(call_err(c, "jobs/submit",
			     json_pack("{s:i, s:{}}", "tool", 3, "input"), -32602));
	json_decref(call_err(c, "jobs/submit",
			     json_pack("{s:s, s:{}, s:i}", "tool", "noop", "input",
				       "delayMs", -1), -32602));
	json_decref(call_err(c, "jobs/submit",
			     json_pack("{s:s, s:{}, s:s}", "tool", "noop", "input",
				       "priority", "high"), -32602));
	berth_client_close(c);
}

static void submit__with_run_at_or_delay__waits_until_then(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *a = call_ok(c, "jobs/submit",
			    json_pack("{s:s, s:{}, s:s}", "tool", "noop", "input",
				      "runAt", "2099-01-01T00:00:00.000Z"));
	json_t *b = call_ok(c, "jobs/submit",
			    json_pack("{s:s, s:{}, s:i}", "tool", "noop", "input",
				      "delayMs", 600000));

	assert_string_equal(jstr(a, "status"), "pending");
	assert_string_equal(jstr(a, "runAt"), "2099-01-01T00:00:00.000Z");
	assert_string_equal(jstr(b, "status"), "pending");
	assert_true(strcmp(jstr(b, "runAt"), jstr(b, "createdAt")) > 0);
	json_decref(call_ok(c, "jobs/cancel", json_pack("{s:s}", "id", jstr(a, "id"))));
	json_decref(call_ok(c, "jobs/cancel", json_pack("{s:s}", "id", jstr(b, "id"))));
	json_decref(a);
	json_decref(b);
	berth_client_close(c);
}

/* ---- approval, suspend, cancel, retry ---------------------------------- */

static void approve__runs_the_job_and_twice_is_a_conflict(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *job = submit(c, "api-approve", "{\"action\":\"deploy\"}");
	const char *id = jstr(job, "id");
	json_t *r, *err;

	assert_string_equal(jstr(job, "status"), "awaiting_approval");
	r = call_ok(c, "jobs/approve", json_pack("{s:s, s:s}", "id", id, "note", "ok"));
	assert_string_equal(jstr(r, "status"), "pending");
	/* The approver's note is a note, not a decline's reason. */
	assert_string_equal(jstr(json_object_get(r, "approval"), "note"), "ok");
	assert_null(json_object_get(json_object_get(r, "approval"), "reason"));
	json_decref(r);
	json_decref(wait_for(c, id, "completed"));
	r = call_ok(c, "jobs/get", json_pack("{s:s}", "id", id));
	assert_string_equal(jstr(json_object_get(r, "approval"), "note"), "ok");
	assert_null(json_object_get(json_object_get(r, "approval"), "reason"));
	json_decref(r);
	err = call_err(c, "jobs/approve", json_pack("{s:s}", "id", id), -32012);
	assert_string_equal(jstr(json_object_get(err, "data"), "status"), "completed");
	json_decref(err);
	json_decref(call_err(c, "jobs/approve",
			     json_pack("{s:s}", "id", "01890000-0000-7000-8000-000000000000"),
			     -32011));
	json_decref(job);
	berth_client_close(c);
}

static void decline__never_runs_the_job_and_keeps_the_reason(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *job = submit(c, "api-approve", "{\"action\":\"delete\"}");
	const char *id = jstr(job, "id");
	json_t *r, *err;

	r = call_ok(c, "jobs/decline", json_pack("{s:s, s:s}", "id", id,
						 "reason", "too risky"));
	assert_string_equal(jstr(r, "status"), "declined");
	assert_string_equal(jstr(json_object_get(r, "approval"), "reason"), "too risky");
	assert_null(json_object_get(r, "startedAt"));
	json_decref(r);
	err = call_err(c, "jobs/decline", json_pack("{s:s}", "id", id), -32012);
	assert_string_equal(jstr(json_object_get(err, "data"), "status"), "declined");
	json_decref(err);
	json_decref(job);
	berth_client_close(c);
}

static void resume__validates_the_data_then_runs_again(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *job = submit(c, "api-ask", "{\"question\":\"colour?\"}");
	const char *id = jstr(job, "id");
	json_t *s, *err, *r, *done;

	s = wait_for(c, id, "suspended");
	assert_string_equal(jstr(json_object_get(s, "suspendPayload"), "question"),
			    "colour?");
	json_decref(s);
	err = call_err(c, "jobs/resume",
		       json_pack("{s:s, s:{s:i}}", "id", id, "resumeData",
				 "answer", 3), -32602);
	assert_true(json_array_size(json_object_get(
			    json_object_get(err, "data"), "errors")) >= 1);
	json_decref(err);
	json_decref(call_err(c, "jobs/resume", json_pack("{s:s}", "id", id), -32602));
	r = call_ok(c, "jobs/resume",
		    json_pack("{s:s, s:{s:s}}", "id", id, "resumeData", "answer",
			      "blue"));
	assert_string_equal(jstr(r, "status"), "pending");
	json_decref(r);
	done = wait_for(c, id, "completed");
	assert_string_equal(jstr(json_object_get(done, "output"), "answer"), "blue");
	json_decref(done);
	json_decref(call_err(c, "jobs/resume",
			     json_pack("{s:s, s:{s:s}}", "id", id, "resumeData",
				       "answer", "red"), -32012));
	json_decref(job);
	berth_client_close(c);
}

static void cancel__ends_a_waiting_job_drops_its_expiry_and_twice_is_a_conflict(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *job = submit(c, "api-approve", "{\"action\":\"x\"}");
	const char *id = jstr(job, "id");
	json_t *r;

	r = call_ok(c, "jobs/cancel", json_pack("{s:s, s:s}", "id", id,
						"reason", "changed my mind"));
	assert_string_equal(jstr(r, "status"), "cancelled");
	json_decref(r);
	json_decref(call_err(c, "jobs/cancel", json_pack("{s:s}", "id", id), -32012));
	json_decref(call_err(c, "jobs/cancel", json_pack("{s:s}", "id", "nope"),
			     -32011));
	json_decref(job);

	/* A job cancelled while it waited with a ttlMs waits for no one: its
	 * expiresAt goes, as after a decision (it stayed, a deadline that
	 * never comes). */
	job = call_ok(c, "jobs/submit",
		      json_pack("{s:s, s:{s:s}, s:i}", "tool", "api-approve",
				"input", "action", "y", "ttlMs", 600000));
	assert_non_null(json_object_get(job, "expiresAt"));
	r = call_ok(c, "jobs/cancel", json_pack("{s:s}", "id", jstr(job, "id")));
	assert_string_equal(jstr(r, "status"), "cancelled");
	assert_null(json_object_get(r, "expiresAt"));
	json_decref(r);
	r = call_ok(c, "jobs/get", json_pack("{s:s}", "id", jstr(job, "id")));
	assert_null(json_object_get(r, "expiresAt"));
	json_decref(r);
	json_decref(job);
	berth_client_close(c);
}

static void cancel__stops_a_running_job(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *job = submit(c, "sleep", "{\"ms\":60000}");
	const char *id = jstr(job, "id");

	json_decref(wait_for(c, id, "running"));
	json_decref(call_ok(c, "jobs/cancel", json_pack("{s:s}", "id", id)));
	json_decref(wait_for(c, id, "cancelled"));
	json_decref(job);
	berth_client_close(c);
}

static void retry__makes_a_new_job_of_a_failed_one(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *job = submit(c, "fail", "{\"message\":\"boom\"}");
	const char *id = jstr(job, "id");
	json_t *failed, *again;

	failed = wait_for(c, id, "failed");
	assert_string_equal(jstr(json_object_get(failed, "error"), "message"), "boom");
	json_decref(failed);
	again = call_ok(c, "jobs/retry", json_pack("{s:s}", "id", id));
	assert_string_not_equal(jstr(again, "id"), id);
	assert_string_equal(jstr(again, "retryOf"), id);
	assert_string_equal(jstr(again, "tool"), "fail");
	json_decref(again);
	json_decref(job);

	job = submit(c, "noop", "{}");
	json_decref(wait_for(c, jstr(job, "id"), "completed"));
	json_decref(call_err(c, "jobs/retry", json_pack("{s:s}", "id", jstr(job, "id")),
			     -32012));
	json_decref(job);
	berth_client_close(c);
}

/* ---- reads ------------------------------------------------------------- */

static void get__in_each_view__and_of_an_unknown_job(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *job = submit(c, "noop", "{\"v\":1}");
	const char *id = jstr(job, "id");
	static const char *const views[] = {"raw", "display", "transcript"};
	json_t *err;

	for (size_t i = 0; i < 3; i++) {
		json_t *g = call_ok(c, "jobs/get", json_pack("{s:s, s:s}", "id", id,
							     "view", views[i]));

		assert_string_equal(jstr(g, "id"), id);
		assert_non_null(json_object_get(g, "input"));
		json_decref(g);
	}
	json_decref(call_err(c, "jobs/get", json_pack("{s:s, s:s}", "id", id,
						      "view", "fancy"), -32602));
	/* An id is a UUID, read in either case (RFC 9562): jobs/get,
	 * jobs/wait and events/poll's jobId find the job by its id in upper
	 * case too (they answered -32011, or an empty page). */
	{
		char upper[64];
		json_t *g, *page;

		for (size_t i = 0; i <= strlen(id) && i < sizeof upper; i++)
			upper[i] = (char)toupper((unsigned char)id[i]);
		g = call_ok(c, "jobs/get", json_pack("{s:s}", "id", upper));
		assert_string_equal(jstr(g, "id"), id);
		json_decref(g);
		g = call_ok(c, "jobs/wait", json_pack("{s:s}", "id", upper));
		assert_string_equal(jstr(g, "id"), id);
		json_decref(g);
		page = call_ok(c, "events/poll", json_pack("{s:s}", "jobId",
							   upper));
		assert_true(json_array_size(json_object_get(page, "events")) > 0);
		json_decref(page);
	}
	err = call_err(c, "jobs/get", json_pack("{s:s}", "id", "nope"), -32011);
	assert_string_equal(jstr(json_object_get(err, "data"), "id"), "nope");
	json_decref(err);
	json_decref(call_err(c, "jobs/get", json_object(), -32602));
	json_decref(job);
	berth_client_close(c);
}

static void list__filters_and_pages_with_an_opaque_cursor(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *page, *jobs, *j;
	const char *cursor;
	size_t i, seen = 0;

	for (int k = 0; k < 5; k++)
		json_decref(call_ok(c, "jobs/submit",
				    json_pack("{s:s, s:{}, s:s}", "tool", "noop",
					      "input", "runId", "list-run")));
	page = call_ok(c, "jobs/list", json_pack("{s:s, s:i}", "runId", "list-run",
						 "limit", 3));
	jobs = json_object_get(page, "jobs");
	assert_int_equal(json_array_size(jobs), 3);
	cursor = jstr(page, "nextCursor");
	assert_true(strlen(cursor) > 0);
	seen += 3;
	j = call_ok(c, "jobs/list", json_pack("{s:s, s:i, s:s}", "runId", "list-run",
					      "limit", 3, "cursor", cursor));
	seen += json_array_size(json_object_get(j, "jobs"));
	assert_int_equal(seen, 5);
	json_decref(j);
	json_decref(page);

	page = call_ok(c, "jobs/list", json_pack("{s:[s,s], s:s}", "status",
						 "awaiting_approval", "declined",
						 "tool", "api-approve"));
	json_array_foreach(json_object_get(page, "jobs"), i, j) {
		assert_string_equal(jstr(j, "tool"), "api-approve");
		assert_true(strcmp(jstr(j, "status"), "awaiting_approval") == 0 ||
			    strcmp(jstr(j, "status"), "declined") == 0);
	}
	json_decref(page);
	json_decref(call_err(c, "jobs/list", json_pack("{s:s}", "status", "sleeping"),
			     -32602));
	json_decref(call_err(c, "jobs/list", json_pack("{s:s}", "cursor", "garbage!"),
			     -32602));
	json_decref(call_err(c, "jobs/list", json_pack("{s:i}", "limit", 0), -32602));
	berth_client_close(c);
}

/* assert_bad_cursor calls method with cursor and asserts -32602 naming
 * /cursor. */
static void assert_bad_cursor(struct berth_client *c, const char *method,
			      json_t *params, const char *cursor)
{
	json_t *err, *e;

	json_object_set_new(params, "cursor", json_string(cursor));
	err = call_err(c, method, params, -32602);
	e = json_array_get(json_object_get(json_object_get(err, "data"),
					   "errors"), 0);
	assert_string_equal(jstr(e, "instancePath"), "/cursor");
	assert_string_equal(jstr(err, "message"),
			    "invalid params: cursor is not one this server "
			    "gave out");
	json_decref(err);
}

static void list__refuses_a_forged_cut_or_foreign_cursor(void **state)
{
	struct berth_client *c = support_connect(&h), *o;
	json_t *page, *first, *job;
	char *cursor, *cut, forged[128];
	const char *id;
	size_t n;

	for (int k = 0; k < 3; k++)
		json_decref(call_ok(c, "jobs/submit",
				    json_pack("{s:s, s:{}, s:s}", "tool", "noop",
					      "input", "runId", "cursor-run")));
	page = call_ok(c, "jobs/list", json_pack("{s:s, s:i}", "runId",
						 "cursor-run", "limit", 1));
	cursor = strdup(jstr(page, "nextCursor"));
	first = json_array_get(json_object_get(page, "jobs"), 0);
	id = jstr(first, "id");
	/* The form a cursor had before it was signed ("c1" and the hex of
	 * an id) named any position a client liked; it is not one now. */
	n = (size_t)snprintf(forged, sizeof forged, "c1");
	for (const char *p = id; *p && n < sizeof forged - 3; p++)
		n += (size_t)snprintf(forged + n, sizeof forged - n, "%02x",
				      (unsigned char)*p);
	assert_bad_cursor(c, "jobs/list", json_pack("{s:s}", "runId",
						    "cursor-run"), forged);
	cut = strndup(cursor, strlen(cursor) - 1);
	assert_bad_cursor(c, "jobs/list", json_pack("{s:s}", "runId",
						    "cursor-run"), cut);
	free(cut);
	/* The same cursor marked as a tools/list one. */
	cut = strdup(cursor);
	cut[0] = 't';
	assert_bad_cursor(c, "tools/list", json_object(), cut);
	assert_bad_cursor(c, "tools/list", json_object(), cursor);
	free(cut);
	/* A cursor another berthd gave out, for a job of its own. */
	support_start(&other, NULL);
	o = support_connect(&other);
	job = call_ok(o, "jobs/submit", json_pack("{s:s, s:{}}", "tool", "noop",
						  "input"));
	json_decref(job);
	job = call_ok(o, "jobs/submit", json_pack("{s:s, s:{}}", "tool", "noop",
						  "input"));
	json_decref(job);
	json_decref(page);
	page = call_ok(o, "jobs/list", json_pack("{s:i}", "limit", 1));
	assert_true(strlen(jstr(page, "nextCursor")) > 0);
	assert_bad_cursor(c, "jobs/list", json_object(),
			  jstr(page, "nextCursor"));
	json_decref(page);
	berth_client_close(o);
	assert_int_equal(harness_stop(&other), 0);
	harness_cleanup(&other);
	/* The real one still works. */
	page = call_ok(c, "jobs/list", json_pack("{s:s, s:i, s:s}", "runId",
						 "cursor-run", "limit", 5,
						 "cursor", cursor));
	assert_int_equal(json_array_size(json_object_get(page, "jobs")), 2);
	assert_null(json_object_get(page, "nextCursor"));
	json_decref(page);
	free(cursor);
	berth_client_close(c);
}

static void list__by_id_prefix__finds_the_jobs_whose_id_begins_so(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *job = submit(c, "noop", "{}"), *page, *err;
	char id[40], prefix[40], upper[40];
	size_t i;

	snprintf(id, sizeof id, "%s", jstr(job, "id"));
	json_decref(job);
	json_decref(submit(c, "noop", "{}"));
	/* The whole id, its first 30 characters, in upper case too. */
	snprintf(prefix, sizeof prefix, "%.30s", id);
	for (i = 0; prefix[i]; i++)
		upper[i] = (char)(prefix[i] >= 'a' && prefix[i] <= 'f'
					  ? prefix[i] - 'a' + 'A'
					  : prefix[i]);
	upper[i] = '\0';
	const char *const finds[] = {id, prefix, upper};
	for (i = 0; i < 3; i++) {
		page = call_ok(c, "jobs/list", json_pack("{s:s}", "idPrefix",
							 finds[i]));
		assert_int_equal(json_array_size(json_object_get(page, "jobs")), 1);
		assert_string_equal(jstr(json_array_get(json_object_get(page,
									"jobs"),
							0), "id"), id);
		json_decref(page);
	}
	/* Every id begins with its first digit; pages work as without. */
	snprintf(prefix, sizeof prefix, "%.1s", id);
	page = call_ok(c, "jobs/list", json_pack("{s:s, s:i}", "idPrefix",
						 prefix, "limit", 1));
	assert_int_equal(json_array_size(json_object_get(page, "jobs")), 1);
	assert_true(strlen(jstr(page, "nextCursor")) > 0);
	json_decref(page);
	/* Nothing begins with f (UUIDv7 times of this century do not). */
	page = call_ok(c, "jobs/list", json_pack("{s:s}", "idPrefix", "ffff"));
	assert_int_equal(json_array_size(json_object_get(page, "jobs")), 0);
	json_decref(page);
	/* What cannot begin an id is refused, and says so. */
	const char *const bad[] = {"", "0193zz", "0193 ",
				   "0123456789abcdef0123456789abcdef01234"};
	for (i = 0; i < 4; i++) {
		err = call_err(c, "jobs/list", json_pack("{s:s}", "idPrefix",
							 bad[i]), -32602);
		assert_string_equal(jstr(json_array_get(json_object_get(
						 json_object_get(err, "data"),
						 "errors"), 0),
					 "instancePath"),
				    "/idPrefix");
		json_decref(err);
	}
	berth_client_close(c);
}

static void tools_list__pages_with_a_signed_cursor(void **state)
{
	char dir[] = "/tmp/berth-many-tools-XXXXXX", path[300], cmd[320];
	const char *args[] = {"--tools", dir, NULL};
	struct harness *many = &other;
	struct berth_client *c;
	json_t *page, *next;
	char *cursor, *cut, *last;
	FILE *fp;

	assert_non_null(mkdtemp(dir));
	for (int i = 0; i < 150; i++) {
		snprintf(path, sizeof path, "%s/t%03d.json", dir, i);
		fp = fopen(path, "w");
		assert_non_null(fp);
		fprintf(fp, "{\"id\": \"t%03d\", \"command\": [\"true\"]}\n",
			i);
		fclose(fp);
	}
	support_start(many, args);
	c = support_connect(many);
	page = call_ok(c, "tools/list", NULL);
	assert_int_equal(json_array_size(json_object_get(page, "tools")), 100);
	cursor = strdup(jstr(page, "nextCursor"));
	last = strdup(jstr(json_array_get(json_object_get(page, "tools"), 99),
			   "name"));
	json_decref(page);
	next = call_ok(c, "tools/list", json_pack("{s:s}", "cursor", cursor));
	/* The rest of the 150 manifests and the other tools, each once: the
	 * next page starts right after the last name of the first. */
	assert_true(json_array_size(json_object_get(next, "tools")) >= 50);
	assert_true(strcmp(jstr(json_array_get(json_object_get(next, "tools"),
					       0), "name"), last) > 0);
	free(last);
	assert_null(json_object_get(next, "nextCursor"));
	json_decref(next);
	/* A tool's name was the cursor before it was signed. */
	assert_bad_cursor(c, "tools/list", json_object(), "t050");
	assert_bad_cursor(c, "tools/list", json_object(), "noop");
	cut = strndup(cursor, strlen(cursor) / 2);
	assert_bad_cursor(c, "tools/list", json_object(), cut);
	free(cut);
	cut = strdup(cursor);
	cut[1] = cut[1] == '7' ? '6' : '7';
	assert_bad_cursor(c, "tools/list", json_object(), cut);
	assert_bad_cursor(c, "jobs/list", json_object(), cursor);
	free(cut);
	free(cursor);
	berth_client_close(c);
	assert_int_equal(harness_stop(many), 0);
	harness_cleanup(many);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static void a_missing_job__is_named_the_same_way_by_every_method(void **state)
{
	static const char *const methods[] = {
		"jobs/get", "jobs/wait", "jobs/logs", "jobs/approve",
		"jobs/decline", "jobs/cancel", "jobs/retry", "jobs/resume",
	};
	static const char id[] = "01890000-0000-7000-8000-00000000abcd";
	struct berth_client *c = support_connect(&h);

	for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
		json_t *params = json_pack("{s:s, s:i}", "id", id, "timeoutMs", 0);
		json_t *err;

		if (strcmp(methods[i], "jobs/resume") == 0)
			json_object_set_new(params, "resumeData", json_object());
		if (strcmp(methods[i], "jobs/logs") == 0)
			json_object_del(params, "timeoutMs");
		err = call_err(c, methods[i], params, -32011);
		if (strcmp(jstr(err, "message"),
			   "not found: no job 01890000-0000-7000-8000-00000000abcd"))
			print_error("%s: %s\n", methods[i], jstr(err, "message"));
		assert_string_equal(jstr(err, "message"),
				    "not found: no job "
				    "01890000-0000-7000-8000-00000000abcd");
		assert_string_equal(jstr(json_object_get(err, "data"), "id"), id);
		json_decref(err);
	}
	berth_client_close(c);
}

static void wait__returns_at_once_when_already_there(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *job = submit(c, "api-approve", "{\"action\":\"w\"}");
	int64_t t0 = support_now_ms();
	json_t *w = call_ok(c, "jobs/wait", json_pack("{s:s}", "id", jstr(job, "id")));

	assert_string_equal(jstr(w, "status"), "awaiting_approval");
	assert_true(support_now_ms() - t0 < 2000);
	json_decref(w);
	json_decref(call_err(c, "jobs/wait", json_pack("{s:s}", "id", "nope"), -32011));
	json_decref(call_err(c, "jobs/wait", json_pack("{s:s, s:[]}", "id",
						       jstr(job, "id"), "until"),
			     -32602));
	json_decref(call_ok(c, "jobs/cancel", json_pack("{s:s}", "id", jstr(job, "id"))));
	json_decref(job);
	berth_client_close(c);
}

static void wait__after_its_timeout__returns_the_job_as_it_is(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *job = call_ok(c, "jobs/submit",
			      json_pack("{s:s, s:{}, s:i}", "tool", "noop", "input",
					"delayMs", 600000));
	int64_t t0 = support_now_ms(), took;
	json_t *w = call_ok(c, "jobs/wait", json_pack("{s:s, s:i}", "id",
						      jstr(job, "id"), "timeoutMs", 300));

	took = support_now_ms() - t0;
	assert_string_equal(jstr(w, "status"), "pending");
	assert_true(took >= 290 && took < 5000);
	json_decref(w);
	json_decref(call_ok(c, "jobs/cancel", json_pack("{s:s}", "id", jstr(job, "id"))));
	json_decref(job);
	berth_client_close(c);
}

static void wait__wakes_on_the_transition_itself(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *job = submit(c, "sleep", "{\"ms\":400}");
	int64_t t0 = support_now_ms();
	json_t *w = call_ok(c, "jobs/wait", json_pack("{s:s, s:i}", "id",
						      jstr(job, "id"), "timeoutMs", 60000));

	assert_string_equal(jstr(w, "status"), "completed");
	assert_true(support_now_ms() - t0 < 10000);
	json_decref(w);
	json_decref(job);
	berth_client_close(c);
}

static void logs__has_structured_lines_and_stderr(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *job = submit(c, "api-log", "{}");
	const char *id = jstr(job, "id");
	json_t *res, *l;
	bool structured = false, stderr_seen = false;
	size_t i;

	json_decref(wait_for(c, id, "completed"));
	res = call_ok(c, "jobs/logs", json_pack("{s:s}", "id", id));
	json_array_foreach(json_object_get(res, "lines"), i, l) {
		assert_true(json_is_integer(json_object_get(l, "n")));
		assert_true(strlen(jstr(l, "at")) > 0);
		assert_true(strlen(jstr(l, "level")) > 0);
		if (strstr(jstr(l, "message"), "hello from the tool"))
			structured = true;
		if (strstr(jstr(l, "message"), "warming up"))
			stderr_seen = true;
	}
	assert_true(structured);
	assert_true(stderr_seen);
	assert_true(json_integer_value(json_object_get(res, "next")) >= 2);
	json_decref(res);
	res = call_ok(c, "jobs/logs", json_pack("{s:s, s:i}", "id", id, "after", 1000));
	assert_int_equal(json_array_size(json_object_get(res, "lines")), 0);
	json_decref(res);
	json_decref(call_err(c, "jobs/logs", json_pack("{s:s}", "id", "nope"), -32011));
	json_decref(job);
	berth_client_close(c);
}

/* ---- events ------------------------------------------------------------ */

static void poll__reads_after_since_and_waits_for_the_next(void **state)
{
	struct berth_client *c = support_connect(&h), *d = support_connect(&h);
	json_t *page = call_ok(c, "events/poll", json_pack("{s:i}", "limit", 1000));
	json_int_t next = json_integer_value(json_object_get(page, "next"));
	json_t *ev, *job;
	char line[256];
	char *reply;
	size_t i;
	json_int_t prev = 0;

	json_array_foreach(json_object_get(page, "events"), i, ev) {
		assert_true(json_integer_value(json_object_get(ev, "seq")) > prev);
		prev = json_integer_value(json_object_get(ev, "seq"));
		assert_true(strlen(jstr(ev, "jobId")) == 36);
		assert_true(strlen(jstr(ev, "type")) > 0);
		assert_true(strlen(jstr(ev, "status")) > 0);
		assert_true(strlen(jstr(ev, "at")) > 0);
	}
	json_decref(page);
	/* Catch up on everything, then wait for something new. */
	for (;;) {
		page = call_ok(c, "events/poll", json_pack("{s:I, s:i}", "since", next,
							   "limit", 1000));
		i = json_array_size(json_object_get(page, "events"));
		next = json_integer_value(json_object_get(page, "next"));
		json_decref(page);
		if (i == 0)
			break;
	}
	snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":"
		 "\"events/poll\",\"params\":{\"since\":%lld,\"waitMs\":30000}}",
		 (long long)next);
	assert_int_equal(berth_client_send_line(c, line, strlen(line)), 0);
	assert_null(berth_client_read_line(c, 300)); /* nothing yet */
	job = submit(d, "api-approve", "{\"action\":\"p\"}");
	reply = berth_client_read_line(c, 10000);
	assert_non_null(reply);
	page = json_loads(reply, 0, NULL);
	free(reply);
	ev = json_array_get(json_object_get(json_object_get(page, "result"), "events"), 0);
	assert_string_equal(jstr(ev, "jobId"), jstr(job, "id"));
	assert_int_equal(json_integer_value(json_object_get(ev, "seq")), next + 1);
	json_decref(page);
	/* With nothing new, waitMs runs out and the answer is empty. */
	page = call_ok(c, "events/poll", json_pack("{s:I, s:i, s:s}", "since",
						   next + 1000000, "waitMs", 200,
						   "jobId", jstr(job, "id")));
	assert_int_equal(json_array_size(json_object_get(page, "events")), 0);
	json_decref(page);
	json_decref(call_ok(d, "jobs/cancel", json_pack("{s:s}", "id", jstr(job, "id"))));
	json_decref(job);
	berth_client_close(c);
	berth_client_close(d);
}

static void subscribe__replays_then_goes_live_and_unsubscribe_ends_it(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *job = submit(c, "api-approve", "{\"action\":\"s\"}");
	const char *id = jstr(job, "id");
	json_t *sub, *note, *params;
	char subid[64];

	sub = call_ok(c, "events/subscribe", json_pack("{s:i, s:s}", "since", 0,
						       "jobId", id));
	snprintf(subid, sizeof subid, "%s", jstr(sub, "subscription"));
	assert_true(strlen(subid) > 0);
	json_decref(sub);
	/* Replayed: created and approval_requested. */
	note = berth_client_next_notification(c, 10000);
	assert_non_null(note);
	assert_string_equal(jstr(note, "method"), "events/event");
	params = json_object_get(note, "params");
	assert_string_equal(jstr(params, "type"), "created");
	assert_string_equal(jstr(params, "jobId"), id);
	assert_string_equal(jstr(params, "subscription"), subid);
	json_decref(note);
	note = berth_client_next_notification(c, 10000);
	assert_string_equal(jstr(json_object_get(note, "params"), "type"),
			    "approval_requested");
	json_decref(note);
	/* Live: approved. */
	json_decref(call_ok(c, "jobs/approve", json_pack("{s:s}", "id", id)));
	note = berth_client_next_notification(c, 10000);
	assert_non_null(note);
	assert_string_equal(jstr(json_object_get(note, "params"), "type"), "approved");
	json_decref(note);
	json_decref(call_ok(c, "events/unsubscribe",
			    json_pack("{s:s}", "subscription", subid)));
	json_decref(call_err(c, "events/unsubscribe",
			     json_pack("{s:s}", "subscription", subid), -32011));
	json_decref(wait_for(c, id, "completed"));
	/* Nothing more arrives after unsubscribe (other than what was
	 * already on its way before it). */
	for (;;) {
		note = berth_client_next_notification(c, 300);
		if (!note)
			break;
		assert_string_not_equal(jstr(json_object_get(note, "params"), "type"),
					"completed");
		json_decref(note);
	}
	json_decref(job);
	berth_client_close(c);
}

static void subscribe__with_progress__sends_live_progress(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *job, *note;
	bool progress = false;

	json_decref(call_ok(c, "events/subscribe", json_pack("{s:b}", "progress", 1)));
	job = submit(c, "sleep", "{\"ms\":1500}");
	while ((note = berth_client_next_notification(c, 10000))) {
		const char *m = jstr(note, "method");
		json_t *p = json_object_get(note, "params");

		if (strcmp(m, "events/progress") == 0 &&
		    strcmp(jstr(p, "jobId"), jstr(job, "id")) == 0) {
			assert_non_null(json_object_get(p, "progress"));
			progress = true;
		}
		if (strcmp(m, "events/event") == 0 &&
		    strcmp(jstr(p, "jobId"), jstr(job, "id")) == 0 &&
		    strcmp(jstr(p, "type"), "completed") == 0) {
			json_decref(note);
			break;
		}
		json_decref(note);
	}
	assert_true(progress);
	json_decref(job);
	berth_client_close(c);
}

/* ---- JSON-RPC ---------------------------------------------------------- */

static void a_request_without_jsonrpc_2_0__is_invalid(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *r = exchange(c, "{\"id\":5,\"method\":\"ping\"}");

	assert_int_equal(error_code(r), -32600);
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 5);
	json_decref(r);
	r = exchange(c, "{\"jsonrpc\":\"1.0\",\"id\":6,\"method\":\"ping\"}");
	assert_int_equal(error_code(r), -32600);
	json_decref(r);
	r = exchange(c, "42");
	assert_int_equal(error_code(r), -32600);
	assert_true(json_is_null(json_object_get(r, "id")));
	json_decref(r);
	berth_client_close(c);
}

static void params_that_are_not_an_object__are_invalid_params(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *r = exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\","
			     "\"params\":[1,2]}");

	assert_int_equal(error_code(r), -32602);
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 1);
	json_decref(r);
	berth_client_close(c);
}

static void an_unknown_method__is_not_found(void **state)
{
	struct berth_client *c = support_connect(&h);

	json_decref(call_err(c, "jobs/explode", NULL, -32601));
	berth_client_close(c);
}

static void a_malformed_line__gets_a_parse_error_and_the_next_line_works(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *r = exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":");

	assert_int_equal(error_code(r), -32700);
	assert_true(json_is_null(json_object_get(r, "id")));
	json_decref(r);
	r = exchange(c, "\xff\xfe not utf-8");
	assert_int_equal(error_code(r), -32700);
	json_decref(r);
	assert_pings(c, 2);
	berth_client_close(c);
}

/* JSON that berth does not take (a \u0000 in a string, an integer beyond
 * 64 bits, as JavaScript writes 2 ** 63) used to be -32700 with id null,
 * so a client waited for its request until its own timeout: it is now
 * -32600 with the request's id. */
static void json_berth_does_not_take__is_refused_with_the_requests_id(
	void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *r = exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":"
			     "\"jobs/submit\",\"params\":{\"tool\":\"noop\","
			     "\"input\":{\"a\":\"x\\u0000y\"}}}");

	assert_int_equal(error_code(r), -32600);
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 5);
	assert_non_null(strstr(json_string_value(json_object_get(
				       json_object_get(r, "error"), "message")),
			       "\\u0000"));
	json_decref(r);
	r = exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":"
		     "\"jobs/submit\",\"params\":{\"tool\":\"noop\",\"input\":"
		     "{\"n\":9223372036854775808}}}");
	assert_int_equal(error_code(r), -32600);
	assert_string_equal(json_string_value(json_object_get(r, "id")), "s");
	json_decref(r);
	/* The id comes back as the integer it was, though the line was read
	 * with every integer a real. */
	r = exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\","
		     "\"params\":{\"n\":-9223372036854775809}}");
	assert_int_equal(error_code(r), -32600);
	assert_true(json_is_integer(json_object_get(r, "id")));
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 6);
	json_decref(r);
	/* An id that is itself beyond 64 bits cannot be given back. */
	r = exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":12345678901234567890,"
		     "\"method\":\"ping\"}");
	assert_int_equal(error_code(r), -32600);
	assert_true(json_is_null(json_object_get(r, "id")));
	json_decref(r);
	/* A notification is not answered; a lone UTF-16 surrogate (what
	 * JavaScript's slice of "smile 😀" leaves) is refused with the
	 * request's id too, where it used to be -32700 with id null. */
	r = exchange(c, "{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"params\":"
		     "{\"a\":\"\\u0000\"}}\n{\"jsonrpc\":\"2.0\",\"id\":8,"
		     "\"method\":\"ping\",\"params\":{\"s\":\"\\ud83d\\ude00 "
		     "\\\\ud800 \\ud800\"}}");
	assert_int_equal(error_code(r), -32600);
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 8);
	assert_non_null(strstr(json_string_value(json_object_get(
				       json_object_get(r, "error"), "message")),
			       "lone UTF-16 surrogate"));
	assert_non_null(strstr(json_string_value(json_object_get(
				       json_object_get(r, "error"), "message")),
			       "column 77"));
	json_decref(r);
	/* A pair is a character, and an escaped backslash before "ud800"
	 * is no escape. */
	r = exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\","
		     "\"params\":{\"s\":\"\\ud83d\\ude00 \\\\ud800\"}}");
	assert_non_null(json_object_get(r, "result"));
	json_decref(r);
	assert_pings(c, 10);
	berth_client_close(c);
}

/* Request lines are parsed by store_json_load (store/jload.h), whose fast
 * path leaves every text it does not take to json_loadb: what berthd
 * reads, and the error it answers, are jansson's. */
static void request_lines__are_read_as_jansson_reads_them(void **state)
{
	static const char input[] =
		"{\"r\":1.5e3,\"u\":\"caf\\u00e9 \xf0\x9f\x98\x80\",\"big\":"
		"1234567890123456789,\"z\":-0,\"s\":\"a\\/b\\n\",\"dup\":1,"
		"\"dup\":2,\"deep\":[[[{\"a\":[]}]]],\"t\":true}";
	static const char garbage[] =
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} x";
	struct berth_client *c = support_connect(&h);
	json_t *want = json_loads(input, 0, NULL), *r, *job;
	char line[512], text[256];
	json_error_t jerr;

	/* A key given twice: jansson keeps the last value. */
	r = exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,"
		     "\"method\":\"ping\"}");
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 2);
	json_decref(r);
	/* Escapes, \u among them, and whitespace between every token. */
	r = exchange(c, " { \"jsonrpc\" : \"2.0\" , \"id\" : \"a\\/b\\t\" ,\t"
		     "\"method\" : \"p\\u0069ng\" }\r");
	assert_string_equal(json_string_value(json_object_get(r, "id")),
			    "a/b\t");
	assert_non_null(json_object_get(r, "result"));
	json_decref(r);

	/* An input of reals, non-ASCII, a 19-digit integer, "-0" and a
	 * duplicate comes back, and is read back from the store, as
	 * json_loadb reads it, its members in their order. */
	assert_non_null(want);
	snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":"
		 "\"jobs/submit\",\"params\":{\"tool\":\"noop\",\"input\":%s}}",
		 input);
	r = exchange(c, line);
	job = json_object_get(r, "result");
	assert_non_null(job);
	assert_true(json_equal(json_object_get(job, "input"), want));
	job = call_ok(c, "jobs/get", json_pack("{s:O}", "id",
					       json_object_get(job, "id")));
	assert_true(json_equal(json_object_get(job, "input"), want));
	char *a = json_dumps(json_object_get(job, "input"), JSON_COMPACT);
	char *b = json_dumps(want, JSON_COMPACT);
	assert_string_equal(a, b);
	free(a);
	free(b);
	json_decref(job);
	json_decref(r);
	json_decref(want);

	/* Trailing bytes: jansson's message, at jansson's column. */
	assert_null(json_loadb(garbage, sizeof(garbage) - 1, JSON_DECODE_ANY,
			       &jerr));
	snprintf(text, sizeof(text), "parse error: %s at column %d", jerr.text,
		 jerr.column);
	r = exchange(c, garbage);
	assert_int_equal(error_code(r), -32700);
	assert_string_equal(json_string_value(json_object_get(
				    json_object_get(r, "error"), "message")),
			    text);
	json_decref(r);
	berth_client_close(c);
}

static void half_lines__are_joined_into_one_request(void **state)
{
	struct berth_client *c = support_connect(&h);
	const char *parts[] = {"{\"jsonrpc\":", "\"2.0\",\"id\":7,", "\"method\":\"pi",
			       "ng\"}"};
	char *line;

	for (size_t i = 0; i < 4; i++) {
		/* Write each part without a newline, with a pause between. */
		assert_int_equal(write(berth_client_fd(c), parts[i], strlen(parts[i])),
				 (ssize_t)strlen(parts[i]));
		assert_null(berth_client_read_line(c, 50));
	}
	assert_int_equal(write(berth_client_fd(c), "\r\n", 2), 2);
	line = berth_client_read_line(c, 10000);
	assert_non_null(line);
	assert_non_null(strstr(line, "\"id\":7"));
	assert_non_null(strstr(line, "\"result\""));
	free(line);
	berth_client_close(c);
}

static void a_batch__is_answered_with_one_array(void **state)
{
	struct berth_client *c = support_connect(&h);
	json_t *r, *el;
	size_t i;
	bool saw[4] = {false};

	r = exchange(c, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},"
			"{\"jsonrpc\":\"2.0\",\"method\":\"ping\"},"
			"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"nope\"},"
			"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"jobs/submit\","
			"\"params\":{\"tool\":\"noop\",\"input\":{}}},"
			"5]");
	assert_true(json_is_array(r));
	assert_int_equal(json_array_size(r), 4);
	json_array_foreach(r, i, el) {
		json_t *id = json_object_get(el, "id");

		if (json_is_null(id)) {
			assert_int_equal(error_code(el), -32600);
			saw[0] = true;
		} else {
			saw[json_integer_value(id)] = true;
		}
		if (json_integer_value(id) == 2)
			assert_int_equal(error_code(el), -32601);
		if (json_integer_value(id) == 3)
			assert_string_equal(jstr(json_object_get(el, "result"),
						 "tool"), "noop");
	}
	assert_true(saw[0] && saw[1] && saw[2] && saw[3]);
	json_decref(r);

	r = exchange(c, "[]");
	assert_int_equal(error_code(r), -32600);
	json_decref(r);
	berth_client_close(c);
}

static void notifications__get_no_answer_alone_or_in_a_batch(void **state)
{
	struct berth_client *c = support_connect(&h);
	const char *lines = "{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}\n"
			    "{\"jsonrpc\":\"2.0\",\"method\":\"no/such\"}\n"
			    "[{\"jsonrpc\":\"2.0\",\"method\":\"ping\"},"
			    "{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}]\n";
	json_t *r;

	assert_int_equal(berth_client_send_line(c, lines, strlen(lines)), 0);
	r = exchange(c, "{\"jsonrpc\":\"2.0\",\"id\":\"last\",\"method\":\"ping\"}");
	/* The first line back answers the last request: nothing before. */
	assert_string_equal(jstr(r, "id"), "last");
	json_decref(r);
	berth_client_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(server_info__has_every_field_and_all_ten_statuses),
		cmocka_unit_test(ping__echoes_string_number_and_null_ids),
		cmocka_unit_test(server_auth__on_the_unix_socket__takes_no_token),
		cmocka_unit_test(tools_list__gives_mcp_tools_with_berth_fields),
		cmocka_unit_test(tools_list__shows_every_background_setting),
		cmocka_unit_test(pause__holds_a_tools_jobs_until_unpause),
		cmocka_unit_test(submit__returns_a_pending_job_with_a_uuid7_id),
		cmocka_unit_test(submit__with_the_same_key__returns_the_first_job),
		cmocka_unit_test(submit__of_an_unknown_tool__is_not_found),
		cmocka_unit_test(submit__with_input_failing_the_schema__lists_the_errors),
		cmocka_unit_test(submit__with_a_request_context_failing_its_schema__is_refused),
		cmocka_unit_test(submit__with_bad_params__is_invalid_params),
		cmocka_unit_test(submit__with_run_at_or_delay__waits_until_then),
		cmocka_unit_test(approve__runs_the_job_and_twice_is_a_conflict),
		cmocka_unit_test(decline__never_runs_the_job_and_keeps_the_reason),
		cmocka_unit_test(resume__validates_the_data_then_runs_again),
		cmocka_unit_test(cancel__ends_a_waiting_job_drops_its_expiry_and_twice_is_a_conflict),
		cmocka_unit_test(cancel__stops_a_running_job),
		cmocka_unit_test(retry__makes_a_new_job_of_a_failed_one),
		cmocka_unit_test(get__in_each_view__and_of_an_unknown_job),
		cmocka_unit_test(a_missing_job__is_named_the_same_way_by_every_method),
		cmocka_unit_test(list__filters_and_pages_with_an_opaque_cursor),
		cmocka_unit_test(list__refuses_a_forged_cut_or_foreign_cursor),
		cmocka_unit_test(tools_list__pages_with_a_signed_cursor),
		cmocka_unit_test(list__by_id_prefix__finds_the_jobs_whose_id_begins_so),
		cmocka_unit_test(wait__returns_at_once_when_already_there),
		cmocka_unit_test(wait__after_its_timeout__returns_the_job_as_it_is),
		cmocka_unit_test(wait__wakes_on_the_transition_itself),
		cmocka_unit_test(logs__has_structured_lines_and_stderr),
		cmocka_unit_test(poll__reads_after_since_and_waits_for_the_next),
		cmocka_unit_test(subscribe__replays_then_goes_live_and_unsubscribe_ends_it),
		cmocka_unit_test(subscribe__with_progress__sends_live_progress),
		cmocka_unit_test(a_request_without_jsonrpc_2_0__is_invalid),
		cmocka_unit_test(params_that_are_not_an_object__are_invalid_params),
		cmocka_unit_test(an_unknown_method__is_not_found),
		cmocka_unit_test(a_malformed_line__gets_a_parse_error_and_the_next_line_works),
		cmocka_unit_test(json_berth_does_not_take__is_refused_with_the_requests_id),
		cmocka_unit_test(request_lines__are_read_as_jansson_reads_them),
		cmocka_unit_test(half_lines__are_joined_into_one_request),
		cmocka_unit_test(a_batch__is_answered_with_one_array),
		cmocka_unit_test(notifications__get_no_answer_alone_or_in_a_batch),
	};

	if (getenv("BERTH_TEST_FILTER"))
		cmocka_set_test_filter(getenv("BERTH_TEST_FILTER"));
	return cmocka_run_group_tests(tests, start, stop);
}

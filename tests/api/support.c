/*
 * support.c: helpers of the api's integration tests (support.h).
 */
#include "tests/api/support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

void support_start(struct harness *h, const char *const *extra)
{
	const char *args[32];
	size_t n = 0;
	const char *tools = getenv("BERTH_API_TOOLS");

	if (tools) {
		args[n++] = "--tools";
		args[n++] = tools;
	}
	for (size_t i = 0; extra && extra[i] && n < 31; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	memset(h, 0, sizeof *h);
	assert_int_equal(harness_start(h, args), 0);
}

struct berth_client *support_connect(struct harness *h)
{
	struct berth_client *c = harness_connect(h);

	assert_non_null(c);
	return c;
}

json_t *call_ok(struct berth_client *c, const char *method, json_t *params)
{
	json_t *r = harness_call(c, method, params, NULL);

	assert_non_null(r);
	return r;
}

int error_code(const json_t *err)
{
	if (json_object_get(err, "error"))
		err = json_object_get(err, "error");
	return (int)json_integer_value(json_object_get(err, "code"));
}

json_t *call_err(struct berth_client *c, const char *method, json_t *params,
		 int code)
{
	json_t *err = NULL;
	json_t *r = harness_call(c, method, params, &err);

	if (r) {
		char *s = json_dumps(r, JSON_COMPACT);

		print_message("%s answered %s, not error %d\n", method, s, code);
		free(s);
		json_decref(r);
		fail();
	}
	assert_non_null(err);
	if (error_code(err) != code) {
		char *s = json_dumps(err, JSON_COMPACT);

		print_message("%s: expected error %d, got %s\n", method, code, s);
		free(s);
	}
	assert_int_equal(error_code(err), code);
	assert_true(json_is_string(json_object_get(err, "message")));
	return err;
}

json_t *exchange(struct berth_client *c, const char *line)
{
	char *reply;
	json_t *msg;

	assert_int_equal(berth_client_send_line(c, line, strlen(line)), 0);
	reply = berth_client_read_line(c, 30000);
	assert_non_null(reply);
	msg = json_loads(reply, JSON_DECODE_ANY, NULL);
	if (!msg)
		print_message("not JSON: %s\n", reply);
	free(reply);
	assert_non_null(msg);
	return msg;
}

void assert_pings(struct berth_client *c, int id)
{
	char line[64];
	json_t *r;

	snprintf(line, sizeof line,
		 "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"ping\"}", id);
	r = exchange(c, line);
	assert_int_equal(json_integer_value(json_object_get(r, "id")), id);
	assert_non_null(json_object_get(r, "result"));
	json_decref(r);
}

json_t *submit(struct berth_client *c, const char *tool, const char *input)
{
	json_t *in = json_loads(input, JSON_DECODE_ANY, NULL);

	assert_non_null(in);
	return call_ok(c, "jobs/submit",
		       json_pack("{s:s, s:o}", "tool", tool, "input", in));
}

json_t *wait_for(struct berth_client *c, const char *id, const char *status)
{
	json_t *job = call_ok(c, "jobs/wait",
			      json_pack("{s:s, s:[s], s:i}", "id", id, "until",
					status, "timeoutMs", 30000));

	if (strcmp(jstr(job, "status"), status) != 0)
		print_message("job %s is %s, not %s\n", id, jstr(job, "status"),
			      status);
	assert_string_equal(jstr(job, "status"), status);
	return job;
}

const char *jstr(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "";
}

long support_raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return -1;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	getrlimit(RLIMIT_NOFILE, &rl);
	return (long)rl.rlim_cur;
}

int64_t support_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * test_http.c: the HTTP gateway against a real berthd: every route, its
 * statuses and errors (the socket's codes and messages), the auth and
 * cross-site rules, the limits, the event stream across a reconnect with
 * Last-Event-ID and filtered by types, /metrics as Prometheus text, and
 * the OpenAPI document against the routes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/stat.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/harness/child.h"
#include "tests/http/client.h"

static struct gw gw; /* one berthd for the tests that share it */

static int setup(void **state)
{
	return gw_start(&gw, false, NULL);
}

static int teardown(void **state)
{
	gw_stop(&gw);
	return 0;
}

/* req performs a request, asserts its status, and returns its JSON body
 * (new reference; NULL when the body is not JSON). */
static json_t *req(int status, const char *method, const char *path,
		   const char *headers, const char *body)
{
	struct resp r;
	json_t *v;

	assert_int_equal(http_do(gw.port, method, path, headers, body, &r), 0);
	if (r.status != status)
		fprintf(stderr, "%s %s: %d %s\n", method, path, r.status, r.body);
	assert_int_equal(r.status, status);
	v = resp_json(&r);
	resp_free(&r);
	return v;
}

/* err_code returns the code of an {"error"} body and frees it. */
static int err_code(json_t *v)
{
	int code = (int)json_integer_value(
		json_object_get(json_object_get(v, "error"), "code"));

	json_decref(v);
	return code;
}

static const char *jstr(json_t *v, const char *key)
{
	return json_string_value(json_object_get(v, key));
}

/* submit returns the id of a new job (malloc'd). */
static char *submit(const char *tool, const char *input)
{
	char body[512];
	json_t *v;
	char *id;

	snprintf(body, sizeof body, "{\"tool\":\"%s\",\"input\":%s}", tool, input);
	v = req(201, "POST", "/api/jobs", BEARER JSON_CT, body);
	id = strdup(jstr(v, "id"));
	json_decref(v);
	return id;
}

static json_t *wait_until(const char *id, const char *until)
{
	char path[256];

	snprintf(path, sizeof path, "/api/jobs/%s/wait?timeoutMs=20000&until=%s",
		 id, until);
	return req(200, "GET", path, BEARER, NULL);
}

/* ---- REST --------------------------------------------------------------- */

static void rest__info_and_tools__answer_like_the_socket(void **state)
{
	json_t *v = req(200, "GET", "/api/info", BEARER, NULL);

	assert_string_equal(jstr(v, "name"), "berth");
	assert_non_null(json_object_get(json_object_get(v, "jobs"), "pending"));
	json_decref(v);
	v = req(200, "GET", "/api/tools", BEARER, NULL);
	assert_true(json_array_size(json_object_get(v, "tools")) >= 2);
	json_decref(v);
	/* A tool's name is no cursor: cursors are signed (docs/API.md). */
	v = req(400, "GET", "/api/tools?cursor=book-trip", BEARER, NULL);
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(v, "error"), "code")),
			 -32602);
	json_decref(v);
}

static void rest__approve_decline_resume_cancel__reach_their_status(void **state)
{
	char *a = submit("deploy", "{\"service\":\"web\"}");
	char *d = submit("deploy", "{\"service\":\"db\"}");
	char *s = submit("book-trip", "{\"destination\":\"Oslo\"}");
	char *c = submit("deploy", "{\"service\":\"cache\"}");
	char path[256], *loc;
	struct resp r;
	json_t *v;

	/* 201 names the new job. */
	assert_int_equal(http_do(gw.port, "POST", "/api/jobs", BEARER JSON_CT,
				 "{\"tool\":\"deploy\",\"input\":{\"service\":"
				 "\"x\"},\"idempotencyKey\":\"k1\"}", &r), 0);
	assert_int_equal(r.status, 201);
	loc = resp_header(&r, "Location");
	assert_non_null(loc);
	assert_non_null(strstr(loc, "/api/jobs/"));
	free(loc);
	resp_free(&r);

	snprintf(path, sizeof path, "/api/jobs/%s/approve", a);
	v = req(200, "POST", path, BEARER JSON_CT, "{\"note\":\"ok\"}");
	assert_string_equal(jstr(v, "status"), "pending");
	json_decref(v);
	/* A second approve is the socket's conflict. */
	assert_int_equal(err_code(req(409, "POST", path, BEARER JSON_CT, "")),
			 -32012);
	v = wait_until(a, "completed");
	assert_string_equal(jstr(v, "status"), "completed");
	json_decref(v);

	snprintf(path, sizeof path, "/api/jobs/%s/decline", d);
	v = req(200, "POST", path, BEARER JSON_CT, "{\"reason\":\"not today\"}");
	assert_string_equal(jstr(v, "status"), "declined");
	assert_string_equal(jstr(json_object_get(v, "approval"), "reason"),
			    "not today");
	json_decref(v);

	json_decref(wait_until(s, "suspended"));
	snprintf(path, sizeof path, "/api/jobs/%s/resume", s);
	/* Data that fails the resumeSchema: the socket's -32602 with its
	 * schema errors. */
	v = req(400, "POST", path, BEARER JSON_CT,
		"{\"resumeData\":{\"traveller\":\"\"}}");
	assert_int_equal((int)json_integer_value(json_object_get(
				 json_object_get(v, "error"), "code")), -32602);
	assert_non_null(json_object_get(json_object_get(json_object_get(v,
				"error"), "data"), "errors"));
	json_decref(v);
	v = req(200, "POST", path, BEARER JSON_CT,
		"{\"resumeData\":{\"traveller\":\"Ann\",\"seats\":2,"
		"\"cabin\":\"first\",\"address\":{\"city\":\"Oslo\"}}}");
	assert_string_equal(jstr(v, "status"), "pending");
	json_decref(v);
	v = wait_until(s, "completed");
	assert_string_equal(jstr(json_object_get(json_object_get(v, "output"),
				"details"), "traveller"), "Ann");
	json_decref(v);

	snprintf(path, sizeof path, "/api/jobs/%s/cancel", c);
	v = req(200, "POST", path, BEARER JSON_CT, "{\"reason\":\"no\"}");
	assert_string_equal(jstr(v, "status"), "cancelled");
	json_decref(v);
	snprintf(path, sizeof path, "/api/jobs/%s/retry", c);
	assert_int_equal(err_code(req(409, "POST", path, BEARER JSON_CT, "")),
			 -32012);

	/* get, its views, logs and the job's events. */
	snprintf(path, sizeof path, "/api/jobs/%s?view=display", s);
	v = req(200, "GET", path, BEARER, NULL);
	assert_string_equal(jstr(v, "id"), s);
	json_decref(v);
	snprintf(path, sizeof path, "/api/jobs/%s?view=sideways", s);
	assert_int_equal(err_code(req(400, "GET", path, BEARER, NULL)), -32602);
	snprintf(path, sizeof path, "/api/jobs/%s/logs", s);
	v = req(200, "GET", path, BEARER, NULL);
	assert_true(json_is_array(json_object_get(v, "lines")));
	json_decref(v);
	snprintf(path, sizeof path, "/api/jobs/%s/events", s);
	v = req(200, "GET", path, BEARER, NULL);
	assert_true(json_array_size(json_object_get(v, "events")) >= 4);
	assert_string_equal(jstr(json_array_get(json_object_get(v, "events"), 0),
				 "type"), "created");
	json_decref(v);

	/* list with the jobs/list filters as query parameters. */
	v = req(200, "GET", "/api/jobs?status=declined,cancelled&tool=deploy",
		BEARER, NULL);
	assert_int_equal(json_array_size(json_object_get(v, "jobs")), 2);
	json_decref(v);
	v = req(200, "GET", "/api/jobs?status=completed&status=declined&limit=1",
		BEARER, NULL);
	assert_int_equal(json_array_size(json_object_get(v, "jobs")), 1);
	assert_non_null(jstr(v, "nextCursor"));
	json_decref(v);
	free(a);
	free(d);
	free(s);
	free(c);
}

static void rest__errors__carry_the_socket_codes_and_fitting_statuses(void **state)
{
	struct resp r;
	char big[160];
	json_t *v;

	assert_int_equal(err_code(req(404, "GET", "/api/jobs/nope", BEARER,
				      NULL)), -32011);
	assert_int_equal(err_code(req(404, "GET", "/api/nothing", BEARER, NULL)),
			 -32601);
	assert_int_equal(err_code(req(404, "GET", "/nothing", NULL, NULL)),
			 -32601);
	assert_int_equal(err_code(req(405, "DELETE", "/api/jobs", BEARER, NULL)),
			 -32601);
	assert_int_equal(err_code(req(405, "GET", "/api/jobs/x/approve", BEARER,
				      NULL)), -32601);
	/* The socket's messages, word for word. */
	v = req(400, "POST", "/api/jobs", BEARER JSON_CT, "{\"tool\":");
	assert_int_equal((int)json_integer_value(json_object_get(
				 json_object_get(v, "error"), "code")), -32700);
	assert_non_null(strstr(jstr(json_object_get(v, "error"), "message"),
			       "parse error: "));
	json_decref(v);
	v = req(400, "GET", "/api/jobs?limit=0", BEARER, NULL);
	assert_string_equal(jstr(json_object_get(v, "error"), "message"),
			    "invalid params: limit must be from 1 to 1000");
	json_decref(v);
	assert_int_equal(err_code(req(404, "POST", "/api/jobs", BEARER JSON_CT,
				      "{\"tool\":\"nope\",\"input\":{}}")),
			 -32011);
	assert_int_equal(err_code(req(400, "POST", "/api/jobs", BEARER JSON_CT,
				      "[1]")), -32602);
	assert_int_equal(err_code(req(400, "POST", "/api/jobs", BEARER JSON_CT,
		"{\"tool\":\"deploy\",\"input\":[[[[[[[[[[[[[[[[[[[[[[[[[[[["
		"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]"
		"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}")), -32600);
	/* 413 before any of the body is read. */
	snprintf(big, sizeof big, "POST /api/jobs HTTP/1.1\r\nHost: x\r\n"
		 BEARER JSON_CT "Content-Length: 99999999999\r\n\r\n");
	{
		int fd = http_connect(gw.port);
		char buf[2048] = "";
		ssize_t n;

		assert_true(fd >= 0);
		assert_int_equal(write(fd, big, strlen(big)), (ssize_t)strlen(big));
		n = read(fd, buf, sizeof buf - 1);
		assert_true(n > 0);
		assert_non_null(strstr(buf, "HTTP/1.1 413 "));
		assert_non_null(strstr(buf, "\"limit\":16777216"));
		close(fd);
	}
	/* Malformed requests. */
	assert_int_equal(http_do(gw.port, "GET", "/api/jobs/%00", BEARER, NULL,
				 &r), 0);
	assert_int_equal(r.status, 400);
	resp_free(&r);
}

static long long last_seq(void);
static bool wait_closed(int fd, int timeout_ms, char *got, size_t size);

/* refused_naming asserts that GET path is 400 with the socket's -32602
 * whose first error names the member at pointer. */
static void refused_naming(const char *path, const char *pointer)
{
	json_t *v = req(400, "GET", path, BEARER, NULL);
	json_t *e = json_object_get(v, "error");

	assert_int_equal(json_integer_value(json_object_get(e, "code")), -32602);
	assert_string_equal(jstr(json_array_get(json_object_get(json_object_get(
				e, "data"), "errors"), 0), "instancePath"),
			    pointer);
	json_decref(v);
}

/* A job's events take ?types= as the stream does: events/poll's types,
 * read by type in the store (limit counts them), waitMs waiting for one
 * of them alone. */
static void rest__job_events_with_types__poll_only_those_types(void **state)
{
	char *id = submit("deploy", "{\"service\":\"poll-types\"}"), *late;
	char path[256], rq[512], buf[256];
	long long last;
	json_t *v, *page;
	int fd;

	snprintf(path, sizeof path, "/api/jobs/%s/approve", id);
	json_decref(req(200, "POST", path, BEARER JSON_CT, ""));
	json_decref(wait_until(id, "completed"));
	last = last_seq();

	/* created, approval_requested, approved, started, completed */
	snprintf(path, sizeof path, "/api/jobs/%s/events?types=approved,completed",
		 id);
	v = req(200, "GET", path, BEARER, NULL);
	assert_string_equal(harness_event_types(v, buf, sizeof buf),
			    "approved completed ");
	json_decref(v);
	snprintf(path, sizeof path,
		 "/api/jobs/%s/events?types=completed&types=created&limit=1", id);
	v = req(200, "GET", path, BEARER, NULL);
	assert_string_equal(harness_event_types(v, buf, sizeof buf), "created ");
	assert_int_equal(json_integer_value(json_object_get(v, "next")),
			 json_integer_value(json_object_get(json_array_get(
				 json_object_get(v, "events"), 0), "seq")));
	json_decref(v);
	/* None of the type: an empty page whose next is past the job's
	 * events. */
	snprintf(path, sizeof path, "/api/jobs/%s/events?types=expired", id);
	v = req(200, "GET", path, BEARER, NULL);
	assert_string_equal(harness_event_types(v, buf, sizeof buf), "");
	assert_true(json_integer_value(json_object_get(v, "next")) >= last);
	json_decref(v);

	/* waitMs waits for those types: the approval and the start of a
	 * second job pass by, its completion ends the wait. */
	late = submit("deploy", "{\"service\":\"poll-types-2\"}");
	fd = http_connect(gw.port);
	assert_true(fd >= 0);
	snprintf(rq, sizeof rq, "GET /api/jobs/%s/events?since=%lld&types=completed"
		 "&waitMs=120000 HTTP/1.1\r\nHost: x\r\n" BEARER
		 "Connection: close\r\n\r\n", late, last_seq());
	assert_int_equal(write(fd, rq, strlen(rq)), (ssize_t)strlen(rq));
	snprintf(path, sizeof path, "/api/jobs/%s/approve", late);
	json_decref(req(200, "POST", path, BEARER JSON_CT, ""));
	{
		char got[16384], *body;

		assert_true(wait_closed(fd, 30000, got, sizeof got));
		assert_non_null(strstr(got, "HTTP/1.1 200 "));
		body = strstr(got, "\r\n\r\n");
		assert_non_null(body);
		page = json_loads(body + 4, 0, NULL);
		assert_non_null(page);
	}
	close(fd);
	assert_string_equal(harness_event_types(page, buf, sizeof buf), "completed ");
	assert_string_equal(jstr(json_array_get(json_object_get(page, "events"), 0),
				 "jobId"), late);
	json_decref(page);

	/* Names as the stream takes them, and refused alike. */
	snprintf(path, sizeof path, "/api/jobs/%s/events?types=completed,,failed",
		 id);
	refused_naming(path, "/types");
	snprintf(path, sizeof path, "/api/jobs/%s/events?types=finished", id);
	refused_naming(path, "/types");
	free(late);
	free(id);
}

/* A list of statuses with an empty name (a status left out of the list,
 * or none at all) is refused 400 with the socket's -32602 naming the
 * parameter, as an unknown name is and as types is: answering for fewer
 * statuses than the client wrote, or for every one, would hide its
 * mistake. */
static void rest__status_lists_with_an_empty_name__are_refused_naming_them(void **state)
{
	static const char *const bad[] = {
		"status=completed,,failed", "status=", "status=completed,",
		"status=,completed", "status=completed&status=",
	};
	char *id = submit("noop", "{}");
	char path[256];
	json_t *v;

	json_decref(wait_until(id, "completed"));
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(path, sizeof path, "/api/jobs?%s", bad[i]);
		refused_naming(path, "/status");
	}
	snprintf(path, sizeof path, "/api/jobs/%s/wait?until=completed,,failed", id);
	refused_naming(path, "/until");
	snprintf(path, sizeof path, "/api/jobs/%s/wait?until=", id);
	refused_naming(path, "/until");
	/* Lists without one are as they were. */
	v = req(200, "GET", "/api/jobs?status=completed,failed&limit=1", BEARER,
		NULL);
	assert_int_equal(json_array_size(json_object_get(v, "jobs")), 1);
	json_decref(v);
	free(id);
}

/* A query member without "=" is a member with the empty value. Before, it
 * killed berthd (a write into a string constant), on every route that
 * reads a query, and on --http-open any web page could send one. */
static void rest__query_members_without_a_value__are_empty_values(void **state)
{
	static const char *const ok[] = {
		"/api/info?x", "/api/tools?x&y", "/api/jobs?&&", "/api/jobs?&",
		"/api/jobs?x&limit=1",
	};
	json_t *v;

	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		json_decref(req(200, "GET", ok[i], BEARER, NULL));
	/* limit with no value is limit "", which is not a number. */
	v = req(400, "GET", "/api/jobs?limit", BEARER, NULL);
	assert_int_equal(err_code(v), -32602);
	json_decref(req(200, "GET", "/api/info", BEARER, NULL));
}

/* An escaped unreserved character names the same resource as itself
 * (RFC 3986 6.2.2.2): "/api/%69nfo" is "/api/info" (before: 404). An
 * escaped "/" is not a separator, and an escaped NUL ends nothing. */
static void rest__escaped_unreserved_characters_in_a_path__are_the_characters(
	void **state)
{
	json_decref(req(200, "GET", "/api/%69nfo", BEARER, NULL));
	json_decref(req(200, "GET", "/%61pi/tool%73", BEARER, NULL));
	json_decref(req(404, "GET", "/api%2Finfo", BEARER, NULL));
	json_decref(req(404, "GET", "/api/info%00", BEARER, NULL));
}

/* ---- auth --------------------------------------------------------------- */

/* unauthenticated_refusals returns berth_refusals_total{reason=
 * "unauthenticated"} from /metrics. */
static long unauthenticated_refusals(void)
{
	static const char name[] = "berth_refusals_total{reason=\"unauthenticated\"} ";
	struct resp r;
	const char *at;
	long n;

	assert_int_equal(http_do(gw.port, "GET", "/metrics", BEARER, NULL, &r), 0);
	assert_int_equal(r.status, 200);
	at = strstr(r.body, name);
	assert_non_null(at);
	n = atol(at + strlen(name));
	resp_free(&r);
	return n;
}

/* Refused as the socket refuses a caller not known yet (docs/API.md):
 * -32010 with data.reason "unauthenticated", and counted in /metrics.
 * Before, the gateway's 401s had no data and were not counted. */
static void auth__without_credentials__is_refused(void **state)
{
	static const char *const paths[] = {"/api/info", "/metrics", "/api/events"};
	struct resp r;
	char *cookie;
	long before = unauthenticated_refusals();
	json_t *v;

	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
		v = req(401, "GET", paths[i], NULL, NULL);
		assert_string_equal(jstr(json_object_get(json_object_get(v, "error"),
							 "data"), "reason"),
				    "unauthenticated");
		assert_int_equal(err_code(v), -32010);
	}
	v = req(401, "GET", "/api/info", "Authorization: Bearer wrong\r\n", NULL);
	assert_string_equal(jstr(json_object_get(json_object_get(v, "error"), "data"),
				 "reason"),
			    "unauthenticated");
	assert_int_equal(err_code(v), -32010);
	assert_int_equal(unauthenticated_refusals() - before, 4);
	/* The page and the API description carry no data. */
	assert_int_equal(http_do(gw.port, "GET", "/", NULL, NULL, &r), 0);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.head, "Content-Security-Policy"));
	cookie = resp_header(&r, "Set-Cookie");
	assert_null(cookie);
	resp_free(&r);
	json_decref(req(200, "GET", "/api/openapi.json", NULL, NULL));
}

/* open_session posts token to /api/session and returns the session's id
 * (malloc'd), asserting 201 and that no cookie is set. */
static char *open_session(struct gw *g, const char *token)
{
	char hdr[256], *cookie, *sid;
	struct resp r;
	json_t *v;

	snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", token);
	assert_int_equal(http_do(g->port, "POST", "/api/session", hdr, NULL, &r),
			 0);
	if (r.status != 201)
		fprintf(stderr, "POST /api/session: %d %s\n", r.status, r.body);
	assert_int_equal(r.status, 201);
	cookie = resp_header(&r, "Set-Cookie");
	assert_null(cookie);
	v = resp_json(&r);
	assert_non_null(jstr(v, "expiresAt"));
	/* "berth-session-" and 256 random bits in hex: a shape berthd
	 * knows again after a restart. */
	assert_int_equal(strlen(jstr(v, "session")), 14 + 64);
	assert_int_equal(strncmp(jstr(v, "session"), "berth-session-", 14), 0);
	sid = strdup(jstr(v, "session"));
	json_decref(v);
	resp_free(&r);
	return sid;
}

/* The login URL carries its token in the fragment, which a browser sends
 * nowhere; the page trades it for a session (POST /api/session), once,
 * and the session is a Bearer token: no cookie, which every port of the
 * host would receive, is set or honoured. */
static void auth__login_url__opens_one_session_and_sets_no_cookie(void **state)
{
	char *sid, *sid2, hdr[256], hdr2[512], cookie[256];
	struct resp r;

	assert_int_equal(strncmp(gw.login, "/login#", 7), 0);
	sid = open_session(&gw, gw.login_token);
	snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", sid);
	json_decref(req(200, "GET", "/api/info", hdr, NULL));
	/* The same session id as a cookie, as another server on this host
	 * would have got it and replayed it: refused. */
	snprintf(cookie, sizeof cookie, "Cookie: berth_session=%s\r\n", sid);
	assert_int_equal(err_code(req(401, "GET", "/api/info", cookie, NULL)),
			 -32010);
	snprintf(hdr2, sizeof hdr2, "%s" JSON_CT, cookie);
	assert_int_equal(err_code(req(401, "POST", "/api/jobs", hdr2,
		"{\"tool\":\"deploy\",\"input\":{\"service\":\"x\"}}")), -32010);
	/* The login URL was spent; berthd logged the next one. */
	{
		char spent[256];

		snprintf(spent, sizeof spent, "Authorization: Bearer %s\r\n",
			 gw.login_token);
		assert_int_equal(err_code(req(401, "POST", "/api/session", spent,
					      NULL)), -32010);
	}
	assert_int_equal(gw_login_url(&gw), 0);
	assert_true(gw_log_has(&gw, "the login URL was used; log in at "));
	/* The token file's token opens a session too. */
	sid2 = open_session(&gw, "secret");
	/* A state-changing request with a session must not come from
	 * another site... */
	snprintf(hdr2, sizeof hdr2, "%s" JSON_CT "Origin: http://evil.example\r\n",
		 hdr);
	assert_int_equal(err_code(req(403, "POST", "/api/jobs", hdr2,
		"{\"tool\":\"deploy\",\"input\":{\"service\":\"x\"}}")), -32010);
	snprintf(hdr2, sizeof hdr2, "%s" JSON_CT "Sec-Fetch-Site: cross-site\r\n",
		 hdr);
	assert_int_equal(err_code(req(403, "POST", "/api/jobs", hdr2,
		"{\"tool\":\"deploy\",\"input\":{\"service\":\"x\"}}")), -32010);
	snprintf(hdr2, sizeof hdr2, "%s" JSON_CT "Origin: http://127.0.0.1:%d\r\n"
		 "Sec-Fetch-Site: same-origin\r\n", hdr, gw.port);
	json_decref(req(201, "POST", "/api/jobs", hdr2,
			"{\"tool\":\"deploy\",\"input\":{\"service\":\"x\"}}"));
	/* Logout ends the session, and only that one. */
	assert_int_equal(http_do(gw.port, "DELETE", "/api/session", hdr, NULL,
				 &r), 0);
	assert_int_equal(r.status, 204);
	resp_free(&r);
	assert_int_equal(err_code(req(401, "GET", "/api/info", hdr, NULL)),
			 -32010);
	snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", sid2);
	json_decref(req(200, "GET", "/api/info", hdr, NULL));
	/* A forged session is no session. */
	assert_int_equal(err_code(req(401, "GET", "/api/info",
		"Authorization: Bearer 00000000000000000000000000000000000000"
		"00000000000000000000000000\r\n", NULL)), -32010);
	free(sid);
	free(sid2);
	/* The newest login URL works. */
	free(open_session(&gw, gw.login_token));
	assert_int_equal(gw_login_url(&gw), 0);
}

/* The login page is a page: a used, expired or wrong login URL opened in
 * a browser shows HTML (login.js explains it), never a JSON error. */
static void auth__the_login_url__is_a_page_whatever_its_token(void **state)
{
	struct resp r;
	char *ct;

	assert_int_equal(http_do(gw.port, "GET", "/login?token=spent", NULL,
				 NULL, &r), 0);
	assert_int_equal(r.status, 200);
	ct = resp_header(&r, "Content-Type");
	assert_non_null(strstr(ct, "text/html"));
	assert_non_null(strstr(r.body, "/login.js"));
	assert_non_null(strstr(r.head, "Content-Security-Policy"));
	free(ct);
	resp_free(&r);
}

/* A login URL is good for a while ($BERTH_HTTP_LOGIN_MS here; 10 minutes
 * by default): once it has expired it opens nothing, and berthd logs a
 * fresh one for whoever opened it. */
static void auth__an_expired_login_url__opens_nothing_and_a_new_one_is_logged(void **state)
{
	struct gw g;
	char hdr[256], old[80];

	setenv("BERTH_HTTP_LOGIN_MS", "1500", 1);
	assert_int_equal(gw_start(&g, false, NULL), 0);
	unsetenv("BERTH_HTTP_LOGIN_MS");
	snprintf(old, sizeof old, "%s", g.login_token);
	usleep(2000 * 1000);
	snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", old);
	{
		struct resp r;
		json_t *v;

		assert_int_equal(http_do(g.port, "POST", "/api/session", hdr,
					 NULL, &r), 0);
		assert_int_equal(r.status, 401);
		v = resp_json(&r);
		assert_non_null(strstr(jstr(json_object_get(v, "error"),
					    "message"), "expired"));
		json_decref(v);
		resp_free(&r);
	}
	assert_true(gw_log_has(&g, "the login URL expired; log in at "));
	assert_int_equal(gw_login_url(&g), 0);
	assert_string_not_equal(g.login_token, old);
	free(open_session(&g, g.login_token));
	gw_stop(&g);
}

/* Wrong Bearer tokens are checked 10 at once and then 1 a second from one
 * peer, logged with its address and counted in /metrics; past that they
 * are answered 429 with Retry-After, unchecked. A session goes on
 * working meanwhile, and a connection is closed after 3 failures. */
static void auth__wrong_tokens__are_throttled_logged_and_counted(void **state)
{
	struct gw g;
	char hdr[128], *sid, sess[128], *after;
	int checked = 0, throttled = 0;
	struct resp r;

	assert_int_equal(gw_start(&g, false, NULL), 0);
	sid = open_session(&g, "secret");
	snprintf(sess, sizeof sess, "Authorization: Bearer %s\r\n", sid);
	for (int i = 0; i < 40; i++) {
		snprintf(hdr, sizeof hdr, "Authorization: Bearer guess-%d\r\n", i);
		assert_int_equal(http_do(g.port, "GET", "/api/info", hdr, NULL,
					 &r), 0);
		if (r.status == 401) {
			checked++;
		} else {
			assert_int_equal(r.status, 429);
			after = resp_header(&r, "Retry-After");
			assert_non_null(after);
			assert_true(atoi(after) >= 1);
			free(after);
			throttled++;
		}
		resp_free(&r);
	}
	print_message("40 wrong tokens: %d checked, %d refused unchecked\n",
		      checked, throttled);
	assert_true(checked >= 10 && checked <= 13);
	assert_true(throttled >= 27);
	assert_true(gw_log_has(&g, "refused login from 127.0.0.1:"));
	assert_true(gw_log_has(&g, "Bearer token on GET /api/info): wrong token"));
	/* The session is not locked out by the guesses beside it. */
	assert_int_equal(http_do(g.port, "GET", "/metrics", sess, NULL, &r), 0);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "berth_auth_failures_total{via=\"http\"} "));
	assert_true(atoi(strstr(r.body, "berth_auth_failures_total{via=\"http\"} ") +
			 strlen("berth_auth_failures_total{via=\"http\"} ")) ==
		    checked);
	assert_true(atoi(strstr(r.body, "berth_auth_throttled_total{via=\"http\"} ") +
			 strlen("berth_auth_throttled_total{via=\"http\"} ")) ==
		    throttled);
	resp_free(&r);
	/* Three failures on one kept-alive connection close it. */
	{
		int fd = http_connect(g.port);
		char rq[512], buf[8192];
		size_t len = 0;

		assert_true(fd >= 0);
		for (int i = 0; i < 4; i++) {
			snprintf(rq, sizeof rq, "GET /api/info HTTP/1.1\r\nHost: x\r\n"
				 "Authorization: Bearer again-%d\r\n\r\n", i);
			if (write(fd, rq, strlen(rq)) < 0)
				break;
		}
		for (;;) {
			struct pollfd p = {fd, POLLIN, 0};
			ssize_t n;

			assert_int_equal(poll(&p, 1, 30000), 1);
			n = read(fd, buf + len, sizeof buf - 1 - len);
			if (n <= 0)
				break;
			len += (size_t)n;
		}
		buf[len] = '\0';
		/* Three answers, the last with Connection: close. */
		assert_non_null(strstr(buf, "Connection: close"));
		close(fd);
	}
	free(sid);
	gw_stop(&g);
}

/* exit_status runs argv (NULL-ended) with its output thrown away and
 * returns its exit status, or -1 when a signal ended it. Not system(): a
 * berthd that should refuse and serves instead would outlive the test,
 * where harness_fork's child dies with it. */
static int exit_status(const char *const *argv)
{
	int status;
	pid_t pid = harness_fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void auth__http_open__only_on_loopback_and_checks_host(void **state)
{
	const char *const open_to_all[] = {
		getenv("BERTHD"), "--db", "/tmp/berth-http-never.db",
		"--socket", "/tmp/berth-http-never.sock",
		"--http", "0.0.0.0:0", "--http-open", NULL,
	};
	struct gw g;
	struct resp r;
	int rc;

	assert_non_null(open_to_all[0]);
	rc = exit_status(open_to_all);
	assert_true(rc > 0);
	unlink("/tmp/berth-http-never.db");

	assert_int_equal(gw_start(&g, true, NULL), 0);
	assert_int_equal(http_do(g.port, "GET", "/api/info", NULL, NULL, &r), 0);
	assert_int_equal(r.status, 200);
	resp_free(&r);
	{
		/* DNS rebinding: a page whose name resolves to 127.0.0.1. */
		int fd = http_connect(g.port);
		static const char rq[] = "GET /api/info HTTP/1.1\r\nHost: "
					 "evil.example:80\r\n\r\n";
		char buf[1024] = "";

		assert_true(fd >= 0);
		assert_int_equal(write(fd, rq, sizeof rq - 1), (ssize_t)sizeof rq - 1);
		assert_true(read(fd, buf, sizeof buf - 1) > 0);
		assert_non_null(strstr(buf, "HTTP/1.1 403 "));
		close(fd);
	}
	gw_stop(&g);
}

/* ---- the connection ----------------------------------------------------- */

static void conn__pipelined_requests__are_answered_in_order(void **state)
{
	int fd = http_connect(gw.port);
	char rq[512], buf[16384] = "";
	size_t len = 0;
	char *first, *second;

	snprintf(rq, sizeof rq,
		 "GET /api/jobs/nope HTTP/1.1\r\nHost: x\r\n" BEARER "\r\n"
		 "GET /api/info HTTP/1.1\r\nHost: x\r\n" BEARER
		 "Connection: close\r\n\r\n");
	assert_true(fd >= 0);
	assert_int_equal(write(fd, rq, strlen(rq)), (ssize_t)strlen(rq));
	for (;;) {
		ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);

		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	close(fd);
	first = strstr(buf, "HTTP/1.1 404 ");
	second = strstr(buf, "HTTP/1.1 200 ");
	assert_non_null(first);
	assert_non_null(second);
	assert_true(first < second);
}

/* ---- the event stream --------------------------------------------------- */

/* sse_read reads events from fd until it has want ids or 10 s pass, and
 * appends their ids to ids; returns how many it read. */
static int sse_read(int fd, long long *ids, int want)
{
	static char buf[4 << 20];
	size_t len = 0;
	int got = 0;

	while (got < want) {
		struct pollfd p = {fd, POLLIN, 0};
		ssize_t n;
		char *line;

		if (poll(&p, 1, 10000) <= 0)
			break;
		n = read(fd, buf + len, sizeof buf - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		got = strncmp(buf, "id: ", 4) == 0;
		if (got)
			ids[0] = atoll(buf + 4);
		for (line = buf; (line = strstr(line, "\nid: ")); line++)
			ids[got++] = atoll(line + 5);
	}
	return got;
}

static int sse_open(const char *extra)
{
	int fd = http_connect(gw.port);
	char rq[512];

	snprintf(rq, sizeof rq, "GET /api/events%s HTTP/1.1\r\nHost: x\r\n"
		 BEARER "%s\r\n", extra[0] == '?' ? extra : "",
		 extra[0] == '?' ? "" : extra);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, rq, strlen(rq)), (ssize_t)strlen(rq));
	return fd;
}

/* last_seq returns the seq of the newest event, from /metrics. */
static long long last_seq(void)
{
	struct resp r;
	const char *p;
	long long seq;

	assert_int_equal(http_do(gw.port, "GET", "/metrics", BEARER, NULL, &r), 0);
	p = strstr(r.body, "\nberth_event_seq ");
	assert_non_null(p);
	seq = atoll(p + strlen("\nberth_event_seq "));
	resp_free(&r);
	return seq;
}

static void sse__reconnect_with_last_event_id__misses_nothing(void **state)
{
	static long long ids[65536];
	long long since, now;
	char hdr[64];
	int fd, n, m;

	/* A first connection asks for the log from the start. */
	fd = sse_open("?since=0");
	for (int i = 0; i < 3; i++)
		free(submit("deploy", "{\"service\":\"a\"}"));
	n = sse_read(fd, ids, 6);
	assert_true(n >= 6);
	assert_int_equal(ids[0], 1);
	for (int i = 1; i < n; i++)
		assert_int_equal(ids[i], ids[i - 1] + 1);
	since = ids[n - 1];
	close(fd); /* the browser loses its connection here */

	/* What happens while it is away... */
	for (int i = 0; i < 5; i++)
		free(submit("deploy", "{\"service\":\"b\"}"));
	now = last_seq();
	assert_true(now >= since + 10);
	/* ...it gets on reconnecting with the id of the last event it had,
	 * every event once and in order. */
	snprintf(hdr, sizeof hdr, "Last-Event-ID: %lld\r\n", since);
	fd = sse_open(hdr);
	m = sse_read(fd, ids, (int)(now - since));
	assert_int_equal(m, (int)(now - since));
	for (int i = 0; i < m; i++)
		assert_int_equal(ids[i], since + 1 + i);
	/* And it stays live. */
	free(submit("deploy", "{\"service\":\"c\"}"));
	m = sse_read(fd, ids, 2);
	assert_int_equal(m, 2);
	assert_int_equal(ids[0], now + 1);
	assert_int_equal(ids[1], now + 2);
	close(fd);
}

/* struct sse reads one event stream, an Event at a time; buf keeps what
 * came after the last one returned. */
struct sse {
	int fd;
	const char *types; /* ",a,b,": the types it asked for */
	char buf[1 << 16];
	size_t len;
};

/* sse_next returns the next Event of s's stream (new reference), or NULL
 * when none came within 30 s. */
static json_t *sse_next(struct sse *s)
{
	for (;;) {
		struct pollfd p = {s->fd, POLLIN, 0};
		char *data = strstr(s->buf, "\ndata: "), *end;
		ssize_t n;

		if (data && (end = strchr(data + 1, '\n'))) {
			json_t *ev;

			*end = '\0';
			ev = json_loads(data + strlen("\ndata: "), 0, NULL);
			assert_non_null(ev);
			/* What follows begins with the '\n' before the next
			 * event's id: line. */
			s->len -= (size_t)(end - s->buf);
			memmove(s->buf, end, s->len + 1);
			s->buf[0] = '\n';
			return ev;
		}
		if (poll(&p, 1, 30000) <= 0)
			return NULL;
		n = read(s->fd, s->buf + s->len, sizeof s->buf - 1 - s->len);
		if (n <= 0)
			return NULL;
		s->len += (size_t)n;
		s->buf[s->len] = '\0';
	}
}

/* expect_event reads s up to the next Event of job, asserting that it is
 * of type and that every Event read on the way (another test's jobs') is
 * of a type s asked for. */
static void expect_event(struct sse *s, const char *type, const char *job)
{
	for (;;) {
		json_t *ev = sse_next(s);
		char t[64];

		assert_non_null(ev);
		snprintf(t, sizeof t, ",%s,", jstr(ev, "type"));
		if (!strstr(s->types, t))
			print_message("asked for %s, got %s of %s\n", s->types,
				      jstr(ev, "type"), jstr(ev, "jobId"));
		assert_non_null(strstr(s->types, t));
		if (strcmp(jstr(ev, "jobId"), job) == 0) {
			assert_string_equal(jstr(ev, "type"), type);
			json_decref(ev);
			return;
		}
		json_decref(ev);
	}
}

static void sse_close(struct sse *s)
{
	close(s->fd);
	free(s);
}

/* sse_start opens a stream with query, which asks for types (",a,b,"). */
static struct sse *sse_start(const char *query, const char *types)
{
	struct sse *s = calloc(1, sizeof *s);

	assert_non_null(s);
	s->fd = sse_open(query);
	s->types = types;
	return s;
}

/* sse_refused opens a stream with query, asserts that it is refused 400
 * (at once: a stream that started would not end), and returns the body. */
static json_t *sse_refused(const char *query)
{
	struct sse *s = sse_start(query, "");
	char *end, *cl;
	json_t *v;

	for (;;) {
		struct pollfd p = {s->fd, POLLIN, 0};
		ssize_t n;

		assert_int_equal(poll(&p, 1, 30000), 1);
		n = read(s->fd, s->buf + s->len, sizeof s->buf - 1 - s->len);
		assert_true(n > 0);
		s->len += (size_t)n;
		s->buf[s->len] = '\0';
		end = strstr(s->buf, "\r\n\r\n");
		if (!end)
			continue;
		if (strncmp(s->buf, "HTTP/1.1 400 ", 13) != 0)
			print_message("GET /api/events%s: %.40s\n", query, s->buf);
		assert_int_equal(strncmp(s->buf, "HTTP/1.1 400 ", 13), 0);
		cl = strcasestr(s->buf, "\r\nContent-Length:");
		assert_non_null(cl);
		if (s->len >= (size_t)(end + 4 - s->buf) +
				      strtoul(cl + 17, NULL, 10))
			break;
	}
	v = json_loads(end + 4, 0, NULL);
	assert_non_null(v);
	sse_close(s);
	return v;
}

/* ?types= is events/subscribe's types, comma-separated or repeated: the
 * stream sends only events of those types, in the replay and live. An
 * empty name (a type left out of the list, or none at all) is the
 * socket's -32602 naming /types, answered 400, as an unknown name is. */
static void sse__with_types__sends_only_those_types(void **state)
{
	static const char *const bad[] = {
		"types=completed,,failed", "types=", "types=completed,",
		"types=,completed", "types=completed&types=", "types=finished",
		"types=completed+failed",
	};
	long long since = last_seq();
	char q[128], path[128], *a, *b, *c, *d;
	struct sse *s;
	json_t *v;

	/* a logs created, started, completed; b created and
	 * approval_requested, then cancelled. */
	a = submit("noop", "{}");
	json_decref(wait_until(a, "completed"));
	b = submit("deploy", "{\"service\":\"types\"}");
	snprintf(path, sizeof path, "/api/jobs/%s/cancel", b);
	json_decref(req(200, "POST", path, BEARER JSON_CT, ""));

	/* Replayed, then live: c's created and started come before its
	 * completed, and would be read first were they sent. */
	snprintf(q, sizeof q, "?since=%lld&types=completed,cancelled", since);
	s = sse_start(q, ",completed,cancelled,");
	expect_event(s, "completed", a);
	expect_event(s, "cancelled", b);
	c = submit("noop", "{}");
	expect_event(s, "completed", c);
	sse_close(s);

	/* One name; and names repeated, each taken. */
	snprintf(q, sizeof q, "?since=%lld&types=cancelled", since);
	s = sse_start(q, ",cancelled,");
	expect_event(s, "cancelled", b);
	d = submit("deploy", "{\"service\":\"types\"}");
	snprintf(path, sizeof path, "/api/jobs/%s/cancel", d);
	json_decref(req(200, "POST", path, BEARER JSON_CT, ""));
	expect_event(s, "cancelled", d);
	sse_close(s);
	snprintf(q, sizeof q, "?since=%lld&types=approval_requested&types=started",
		 since);
	s = sse_start(q, ",approval_requested,started,");
	expect_event(s, "started", a);
	expect_event(s, "approval_requested", b);
	expect_event(s, "started", c);
	expect_event(s, "approval_requested", d);
	sse_close(s);

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		json_t *e;

		snprintf(q, sizeof q, "?%s", bad[i]);
		v = sse_refused(q);
		e = json_object_get(v, "error");
		assert_int_equal(json_integer_value(json_object_get(e, "code")),
				 -32602);
		assert_non_null(strstr(jstr(e, "message"),
				       "types must be an event type"));
		assert_string_equal(jstr(json_array_get(json_object_get(
				json_object_get(e, "data"), "errors"), 0),
				"instancePath"), "/types");
		json_decref(v);
	}
	free(a);
	free(b);
	free(c);
	free(d);
}

/* ---- metrics ------------------------------------------------------------ */

static bool metric_name_ok(const char *s, size_t n)
{
	if (!n || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':'))
			return false;
	return true;
}

/* sample returns the value of the sample name{labels} (exact text), or
 * -1. */
static double sample(const char *text, const char *series)
{
	char pat[256];
	const char *p;

	snprintf(pat, sizeof pat, "\n%s ", series);
	p = strstr(text, pat);
	return p ? strtod(p + strlen(pat), NULL) : -1;
}

static void metrics__parse_as_prometheus_text(void **state)
{
	struct resp r;
	char *ct, *text, *line, *save = NULL;
	char types[64][64];
	int ntypes = 0, samples = 0;

	assert_int_equal(http_do(gw.port, "GET", "/metrics", BEARER, NULL, &r), 0);
	assert_int_equal(r.status, 200);
	ct = resp_header(&r, "Content-Type");
	assert_non_null(strstr(ct, "text/plain; version=0.0.4"));
	free(ct);
	assert_true(r.len > 0 && r.body[r.len - 1] == '\n');
	text = strdup(r.body);
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		size_t n;
		char *val, *end;
		bool declared = false;

		if (strncmp(line, "# HELP ", 7) == 0)
			continue;
		if (strncmp(line, "# TYPE ", 7) == 0) {
			char *t = strchr(line + 7, ' ');

			assert_non_null(t);
			assert_true(strcmp(t + 1, "counter") == 0 ||
				    strcmp(t + 1, "gauge") == 0 ||
				    strcmp(t + 1, "histogram") == 0);
			assert_true(ntypes < 64);
			snprintf(types[ntypes++], 64, "%.*s",
				 (int)(t - line - 7), line + 7);
			continue;
		}
		assert_true(line[0] != '#');
		n = strcspn(line, "{ ");
		assert_true(metric_name_ok(line, n));
		for (int i = 0; i < ntypes; i++) {
			size_t tl = strlen(types[i]);

			if (strncmp(line, types[i], tl) == 0 &&
			    (tl == n || strncmp(line + tl, "_bucket", 7) == 0 ||
			     strncmp(line + tl, "_sum", 4) == 0 ||
			     strncmp(line + tl, "_count", 6) == 0))
				declared = true;
		}
		assert_true(declared);
		if (line[n] == '{') {
			/* name="value" pairs, values quoted and escaped */
			char *p = line + n + 1;

			while (*p != '}') {
				size_t ln = strcspn(p, "=");

				assert_true(metric_name_ok(p, ln));
				p += ln;
				assert_true(p[0] == '=' && p[1] == '"');
				for (p += 2; *p != '"'; p++) {
					assert_true(*p != '\0');
					if (*p == '\\')
						p++;
				}
				p++;
				if (*p == ',')
					p++;
			}
			val = p + 1;
		} else {
			val = line + n;
		}
		assert_true(*val == ' ');
		strtod(val + 1, &end);
		assert_true(end != val + 1 && *end == '\0');
		samples++;
	}
	free(text);
	assert_true(samples > 50);
	assert_true(sample(r.body, "berth_submissions_total{tool=\"deploy\"}") >= 3);
	assert_true(sample(r.body, "berth_completions_total{tool=\"deploy\"}") >= 1);
	assert_true(sample(r.body, "berth_approvals_total{tool=\"deploy\"}") >= 1);
	assert_true(sample(r.body, "berth_suspensions_total{tool=\"book-trip\"}") >= 1);
	assert_true(sample(r.body, "berth_queue_depth") >= 0);
	assert_true(sample(r.body, "berth_workers_busy") >= 0);
	assert_true(sample(r.body, "berth_jobs_started_total{path=\"submit\"}") >= 0);
	assert_true(sample(r.body, "berth_jobs_started_total{path=\"claim\"}") >= 0);
	assert_true(sample(r.body, "berth_jobs_started_total{path=\"submit\"}") +
		    sample(r.body, "berth_jobs_started_total{path=\"claim\"}") >= 1);
	/* the first claim at start, at least; none can find more than were
	 * asked */
	assert_true(sample(r.body, "berth_claims_total") >= 1);
	assert_true(sample(r.body, "berth_claims_empty_total") >= 0);
	assert_true(sample(r.body, "berth_claims_empty_total") <=
		    sample(r.body, "berth_claims_total"));
	assert_true(sample(r.body, "berth_job_completion_seconds_count") >= 1);
	assert_true(sample(r.body, "berth_commit_batch_events_bucket{le=\"+Inf\"}") >= 1);
	assert_true(sample(r.body, "berth_jobs{tool=\"deploy\",status=\"awaiting_approval\"}") >= 1);
	resp_free(&r);
}

/* ---- OpenAPI ------------------------------------------------------------ */

/* Every route the gateway serves, with the methods it takes; the document
 * must describe exactly these. */
static const struct {
	const char *path, *methods;
} routes[] = {
	{"/api/info", "get"},
	{"/api/tools", "get"},
	{"/api/jobs", "get post"},
	{"/api/jobs/{id}", "get"},
	{"/api/jobs/{id}/wait", "get"},
	{"/api/jobs/{id}/logs", "get"},
	{"/api/jobs/{id}/events", "get"},
	{"/api/jobs/{id}/resume", "post"},
	{"/api/jobs/{id}/approve", "post"},
	{"/api/jobs/{id}/decline", "post"},
	{"/api/jobs/{id}/cancel", "post"},
	{"/api/jobs/{id}/retry", "post"},
	{"/api/events", "get"},
	{"/api/openapi.json", "get"},
	{"/metrics", "get"},
	{"/login", "get"},
	{"/api/session", "post delete"},
};

static void openapi__describes_every_route_and_no_other(void **state)
{
	json_t *doc = req(200, "GET", "/api/openapi.json", NULL, NULL);
	json_t *paths = json_object_get(doc, "paths"), *item;
	const char *key;
	size_t nroutes = sizeof routes / sizeof routes[0];

	assert_string_equal(jstr(doc, "openapi"), "3.1.0");
	assert_int_equal(json_object_size(paths), nroutes);
	for (size_t i = 0; i < nroutes; i++) {
		item = json_object_get(paths, routes[i].path);
		assert_non_null(item);
		assert_int_equal(json_object_get(item, "get") != NULL,
				 strstr(routes[i].methods, "get") != NULL);
		assert_int_equal(json_object_get(item, "post") != NULL,
				 strstr(routes[i].methods, "post") != NULL);
		assert_int_equal(json_object_get(item, "delete") != NULL,
				 strstr(routes[i].methods, "delete") != NULL);
	}
	/* Each documented path answers (with anything but "no route"), and
	 * its error responses name the shared Error schema. */
	json_object_foreach(paths, key, item) {
		char path[256], *brace;
		struct resp r;

		if (strcmp(key, "/api/events") == 0)
			continue; /* endless; its own test reads it */
		snprintf(path, sizeof path, "%s", key);
		brace = strstr(path, "{id}");
		if (brace)
			memcpy(brace, "none", 4);
		assert_int_equal(http_do(gw.port, json_object_get(item, "get")
						 ? "GET" : "POST", path,
					 BEARER JSON_CT, NULL, &r), 0);
		if (!strstr(key, "wait"))
			assert_null(strstr(r.body, "no route"));
		resp_free(&r);
	}
	assert_non_null(json_object_get(json_object_get(json_object_get(doc,
				"components"), "schemas"), "Error"));
	json_decref(doc);
}

/* read_all reads fd until EOF (or 2 s without data) into buf. */
static size_t read_all(int fd, char *buf, size_t cap)
{
	size_t len = 0;
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	while (len < cap - 1 && poll(&pfd, 1, 2000) > 0) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);

		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	return len;
}

/* ---- connections: limits and deadlines ---------------------------------- */

/* pid_of_gw returns berthd's pid. */
static pid_t gw_pid(void)
{
	return gw.h.pid;
}

static int count_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	d = opendir(path);
	assert_non_null(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* settled_fds returns berthd's descriptors once their count has held for
 * half a second (at most 30 s): the connections of the tests before, which
 * their clients closed, may still be berthd's for a moment on a loaded
 * machine, and a count taken then is one too high for good. */
static int settled_fds(pid_t pid)
{
	int n = count_fds(pid), same = 0;

	for (int tries = 0; tries < 300 && same < 5; tries++) {
		int again;

		usleep(100000);
		again = count_fds(pid);
		same = again == n ? same + 1 : 0;
		n = again;
	}
	return n;
}

/* cpu_ms returns the CPU time berthd has used (user and system). */
static long cpu_ms(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof buf, f));
	fclose(f);
	p = strrchr(buf, ')');
	assert_non_null(p);
	/* state ppid pgrp session tty tpgid flags minflt cminflt majflt
	 * cmajflt utime stime */
	assert_int_equal(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u "
				"%*u %*u %lu %lu", &ut, &st), 2);
	return (long)((ut + st) * 1000 / (unsigned long)sysconf(_SC_CLK_TCK));
}

/* wait_closed waits up to timeout_ms for the peer of fd to close, reading
 * what comes; true when it did. */
static bool wait_closed(int fd, int timeout_ms, char *got, size_t size)
{
	size_t len = 0;
	int64_t t0 = 0;
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		int64_t now;
		ssize_t n;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
		if (now - t0 >= timeout_ms ||
		    poll(&p, 1, (int)(timeout_ms - (now - t0))) != 1)
			return false;
		n = read(fd, got + len, size - 1 - len);
		if (n <= 0 || len + (size_t)n + 1 >= size) {
			got[n > 0 ? len + (size_t)n : len] = '\0';
			return n <= 0;
		}
		len += (size_t)n;
	}
}

/* A request's head is judged before a byte of its body is read: a
 * stranger announcing 16 MiB is answered 401 and closed at once, not
 * after berthd has taken its 16 MiB. With the token, the same head is
 * read on. */
static void conn__a_body_is_not_read_before_the_auth_check(void **state)
{
	static const char head[] = "POST /api/jobs HTTP/1.1\r\nHost: x\r\n"
				   JSON_CT "Content-Length: 16000000\r\n\r\n";
	char rq[512], buf[4096];
	int fd = http_connect(gw.port);
	struct pollfd p;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, head, sizeof head - 1), (ssize_t)sizeof head - 1);
	assert_true(wait_closed(fd, 30000, buf, sizeof buf));
	assert_non_null(strstr(buf, "HTTP/1.1 401 "));
	assert_non_null(strstr(buf, "Connection: close"));
	close(fd);
	/* With the token, berthd waits for the body. */
	fd = http_connect(gw.port);
	snprintf(rq, sizeof rq, "POST /api/jobs HTTP/1.1\r\nHost: x\r\n" BEARER
		 JSON_CT "Content-Length: 16000000\r\n\r\n");
	assert_int_equal(write(fd, rq, strlen(rq)), (ssize_t)strlen(rq));
	p = (struct pollfd){fd, POLLIN, 0};
	assert_int_equal(poll(&p, 1, 1500), 0);
	close(fd);
}

/* A client that hangs up while its GET /api/jobs/{id}/events waits (with
 * waitMs, by type or not) ends the wait and its connection at once, as one
 * of /api/jobs/{id}/wait does, rather than holding both until waitMs is
 * up. */
static void conn__a_client_that_hangs_up__ends_its_event_wait(void **state)
{
	char *id = submit("noop", "{}");
	char rq[512];
	int fds[16], base, now = 0;
	pid_t pid = gw_pid();

	json_decref(wait_until(id, "completed"));
	base = settled_fds(pid);
	for (int i = 0; i < 16; i++) {
		fds[i] = http_connect(gw.port);
		assert_true(fds[i] >= 0);
		snprintf(rq, sizeof rq, "GET /api/jobs/%s/events?since=%lld%s"
			 "&waitMs=600000 HTTP/1.1\r\nHost: x\r\n" BEARER "\r\n",
			 id, last_seq(), i % 2 ? "&types=expired" : "");
		assert_int_equal(write(fds[i], rq, strlen(rq)), (ssize_t)strlen(rq));
	}
	/* All sixteen wait, each holding its connection... */
	for (int tries = 0; tries < 300; tries++) {
		if ((now = count_fds(pid)) >= base + 16)
			break;
		usleep(100000);
	}
	assert_true(now >= base + 16);
	for (int i = 0; i < 16; i++) {
		struct pollfd p = {fds[i], POLLIN, 0};

		assert_int_equal(poll(&p, 1, 0), 0); /* no answer yet */
		close(fds[i]);
	}
	/* ...until their clients hang up. */
	for (int tries = 0; tries < 300; tries++) {
		if ((now = count_fds(pid)) <= base)
			break;
		usleep(100000);
	}
	assert_true(now <= base);
	free(id);
}

/* Two Content-Length headers that disagree leave the body's end in doubt
 * (the way requests are smuggled past proxies): 400. Two that agree are
 * one. */
static void conn__two_content_lengths_that_disagree__get_400(void **state)
{
	static const char bad[] = "POST /api/jobs HTTP/1.1\r\nHost: x\r\n" BEARER
				  JSON_CT "Content-Length: 2\r\n"
				  "Content-Length: 40\r\n\r\n{}";
	static const char same[] = "GET /api/info HTTP/1.1\r\nHost: x\r\n" BEARER
				   "Content-Length: 0\r\nContent-Length: 0\r\n"
				   "Connection: close\r\n\r\n";
	char buf[4096];
	int fd = http_connect(gw.port);

	assert_int_equal(write(fd, bad, sizeof bad - 1), (ssize_t)sizeof bad - 1);
	assert_true(wait_closed(fd, 30000, buf, sizeof buf));
	assert_non_null(strstr(buf, "HTTP/1.1 400 "));
	assert_non_null(strstr(buf, "disagree"));
	close(fd);
	fd = http_connect(gw.port);
	assert_int_equal(write(fd, same, sizeof same - 1),
			 (ssize_t)sizeof same - 1);
	assert_true(wait_closed(fd, 30000, buf, sizeof buf));
	assert_non_null(strstr(buf, "HTTP/1.1 200 "));
	close(fd);
}

/* exchange sends rq on a new connection, which rq closes, and returns
 * what came back (in buf). */
static const char *exchange(const char *rq, char *buf, size_t size)
{
	int fd = http_connect(gw.port);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, rq, strlen(rq)), (ssize_t)strlen(rq));
	assert_true(wait_closed(fd, 30000, buf, size));
	close(fd);
	return buf;
}

/* RFC 9112 3.2: an HTTP/1.1 request without a Host, or any request with
 * two, is 400; HTTP/1.0 needs none. Before, both were served, and on
 * --http-open only the first Host was checked against loopback. */
static void conn__host_missing_or_twice__gets_400(void **state)
{
	char buf[4096];

	exchange("GET /api/info HTTP/1.1\r\n" BEARER "Connection: close\r\n\r\n",
		 buf, sizeof buf);
	assert_non_null(strstr(buf, "HTTP/1.1 400 "));
	assert_non_null(strstr(buf, "needs a Host"));
	exchange("GET /api/info HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n"
		 BEARER "Connection: close\r\n\r\n", buf, sizeof buf);
	assert_non_null(strstr(buf, "HTTP/1.1 400 "));
	assert_non_null(strstr(buf, "more than one Host"));
	exchange("GET /api/info HTTP/1.0\r\n" BEARER "\r\n", buf, sizeof buf);
	assert_non_null(strstr(buf, "HTTP/1.1 200 "));
}

/* RFC 9112 2.2: a line may end in a bare LF, the head's end too. Before,
 * such a head was parsed but its end never found: 408 after 10 s. */
static void conn__a_head_of_bare_lf_lines__is_answered(void **state)
{
	char buf[4096];
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	exchange("GET /api/info HTTP/1.1\nHost: x\nAuthorization: Bearer secret\n"
		 "Connection: close\n\n", buf, sizeof buf);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(strncmp(buf, "HTTP/1.1 200 ", 13) == 0);
	assert_true(t1.tv_sec - t0.tv_sec < 8);
}

/* RFC 9110 10.1.1: a client that sends "Expect: 100-continue" waits for
 * a 100 before its body (curl does past 1 MiB, for a second): it gets one
 * as soon as its head passed, and a refused head its final status
 * alone. Before, it got nothing and sent its body after its own wait. */
static void conn__expect_100_continue__is_answered_before_the_body(void **state)
{
	static const char head[] = "POST /api/jobs HTTP/1.1\r\nHost: x\r\n" BEARER
				   JSON_CT "Expect: 100-continue\r\n"
				   "Connection: close\r\n"
				   "Content-Length: 26\r\n\r\n";
	static const char body[] = "{\"tool\":\"noop\",\"input\":{}}";
	char buf[4096];
	int fd = http_connect(gw.port);
	struct pollfd p = {.events = POLLIN};
	ssize_t n;

	assert_int_equal(sizeof body - 1, 26);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, head, sizeof head - 1), (ssize_t)sizeof head - 1);
	p.fd = fd;
	assert_int_equal(poll(&p, 1, 10000), 1);
	n = read(fd, buf, sizeof buf - 1);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_string_equal(buf, "HTTP/1.1 100 Continue\r\n\r\n");
	assert_int_equal(write(fd, body, sizeof body - 1), (ssize_t)sizeof body - 1);
	assert_true(wait_closed(fd, 30000, buf, sizeof buf));
	assert_non_null(strstr(buf, "HTTP/1.1 201 "));
	close(fd);
	/* Refused on its head: the 401 alone, no 100. */
	exchange("POST /api/jobs HTTP/1.1\r\nHost: x\r\n" JSON_CT
		 "Expect: 100-continue\r\nContent-Length: 26\r\n\r\n",
		 buf, sizeof buf);
	assert_null(strstr(buf, " 100 "));
	assert_non_null(strstr(buf, "HTTP/1.1 401 "));
}

/* A head must be whole within 10 s of its first byte, however it
 * trickles in: a byte every half second does not keep a connection, even
 * one that sent a good request before. */
static void conn__a_head_must_arrive_within_its_deadline(void **state)
{
	static const char first[] = "GET /api/info HTTP/1.1\r\nHost: x\r\n"
				    BEARER "\r\n";
	static const char drip[] = "GET /api/info HTTP/1.1\r\nHost: x\r\n"
				   "X-Drip: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
	char buf[8192];
	int fd = http_connect(gw.port), sent = 0;
	bool closed = false;

	assert_int_equal(write(fd, first, sizeof first - 1),
			 (ssize_t)sizeof first - 1);
	{
		struct pollfd p = {fd, POLLIN, 0};

		assert_int_equal(poll(&p, 1, 30000), 1);
		assert_true(read(fd, buf, sizeof buf) > 0);
	}
	for (int i = 0; i < 120 && !closed; i++) {
		struct pollfd p = {fd, POLLIN, 0};

		if (sent < (int)sizeof drip - 1 &&
		    write(fd, drip + sent, 1) == 1)
			sent++;
		if (poll(&p, 1, 500) == 1)
			closed = wait_closed(fd, 5000, buf, sizeof buf);
	}
	assert_true(closed);
	/* It was told why. */
	assert_non_null(strstr(buf, "HTTP/1.1 408 "));
	/* At least 10 s of dripping: about 20 bytes at two a second. */
	print_message("the dripping head was cut off after %d bytes\n", sent);
	assert_true(sent >= 15);
	close(fd);
}

/* spin_us waits us microseconds without sleeping, so that each byte
 * written before it arrives at berthd in a read of its own. */
static void spin_us(long us)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 <
	       us);
}

/* The end of a head is searched for only in bytes not looked at before: a
 * 60 KiB head sent a byte at a time costs berthd its length, not its
 * length squared (about 1.9e9 steps: the old scan spent 3.7 s of CPU on
 * it in a sanitizer build). The bound is loose; a machine too busy to
 * deliver the bytes one by one only makes either scan cheaper. */
static void conn__a_head_sent_a_byte_at_a_time__costs_linear_cpu(void **state)
{
	enum { HEAD = 60 * 1024 };
	char *head = malloc(HEAD + 64), buf[4096];
	int fd = http_connect(gw.port), one = 1;
	long cpu0, cpu1;
	size_t n;

	n = (size_t)snprintf(head, 64, "GET /api/info HTTP/1.1\r\nHost: x\r\nX-Pad: ");
	memset(head + n, 'a', HEAD - n - 4);
	memcpy(head + HEAD - 4, "\r\n\r\n", 4);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	cpu0 = cpu_ms(gw_pid());
	/* A machine too busy to send it all within the head's 10 s gets
	 * 408 and the connection closed part of the way: the CPU spent on
	 * what was sent is what is measured. */
	for (size_t i = 0; i < HEAD; i++) {
		if (write(fd, head + i, 1) != 1) {
			assert_true(errno == EPIPE || errno == ECONNRESET);
			break;
		}
		spin_us(60);
	}
	buf[0] = '\0';
	assert_true(wait_closed(fd, 60000, buf, sizeof buf) || buf[0]);
	assert_true(!buf[0] || strstr(buf, "HTTP/1.1 401 ") ||
		    strstr(buf, "HTTP/1.1 408 "));
	cpu1 = cpu_ms(gw_pid());
	print_message("a %d-byte head a byte at a time: %ld ms of berthd's CPU\n",
		      HEAD, cpu1 - cpu0);
	assert_true(cpu1 - cpu0 < 1500);
	free(head);
	close(fd);
}

/* Strangers (connections that sent no valid credentials) have 256 of the
 * gateway's 1024 connections and 10 s: 1024 of them dripping a byte now
 * and then used to fill the gateway, and a request with the token got
 * 503. The oldest stranger now gives way, the token is served, and the
 * drippers are gone within their deadline. */
static void conn__dripping_strangers__never_lock_out_the_token(void **state)
{
	enum { DRIPPERS = 1024 };
	struct rlimit rl;
	int fds[DRIPPERS], open_now, base = count_fds(gw_pid());
	json_t *v;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < DRIPPERS + 64) {
		fprintf(stderr, "only %llu files may be open; skipped\n",
			(unsigned long long)rl.rlim_cur);
		skip();
	}
	for (int i = 0; i < DRIPPERS; i++) {
		fds[i] = http_connect(gw.port);
		assert_true(fds[i] >= 0);
		(void)!write(fds[i], "G", 1);
	}
	v = req(200, "GET", "/api/info", BEARER, NULL);
	json_decref(v);
	/* They drip on, a byte a second each; none outlives its 10 s. */
	for (int s = 0; s < 60; s++) {
		open_now = count_fds(gw_pid()) - base;
		if (open_now <= 8)
			break;
		for (int i = 0; i < DRIPPERS; i++)
			(void)!write(fds[i], "E", 1);
		usleep(1000 * 1000);
	}
	open_now = count_fds(gw_pid()) - base;
	print_message("%d dripping strangers: %d connections left\n", DRIPPERS,
		      open_now);
	assert_true(open_now <= 8);
	for (int i = 0; i < DRIPPERS; i++)
		close(fds[i]);
}

/* rss_kib returns pid's resident memory in KiB. */
static long rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "re")))
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* Strangers that pipeline requests for the OpenAPI document (no
 * credentials needed, 50 KiB a response) and read nothing: each is
 * answered until 16 KiB of its responses wait in berthd, not until the
 * 64 MiB that cuts off a reader, and the token is served meanwhile
 * (internal.h, pipelining). Before, 16 of them took a release berthd's
 * memory up by about 1 GB and held the token's requests for seconds.
 * The kernel's send buffer of each connection still takes a few MiB of
 * responses (tcp_wmem) before berthd holds one; under the sanitizers
 * what was written stays in berthd's RSS a while (ASan's quarantine of
 * freed memory), hence the generous bound. */
static void conn__strangers_pipelining_without_reading__hold_themselves(void **state)
{
	enum { STRANGERS = 16, PIPELINED = 400 };
	static const char rq[] = "GET /api/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n";
	size_t n = (sizeof rq - 1) * PIPELINED;
	char *all = malloc(n);
	int fds[STRANGERS], small = 4096;
	pid_t pid = gw_pid();
	long before, after;

	assert_non_null(all);
	for (int i = 0; i < PIPELINED; i++)
		memcpy(all + i * (sizeof rq - 1), rq, sizeof rq - 1);
	json_decref(req(200, "GET", "/api/info", BEARER, NULL));
	before = rss_kib(pid);
	for (int i = 0; i < STRANGERS; i++) {
		struct sockaddr_in sin = {.sin_family = AF_INET,
					  .sin_port = htons((uint16_t)gw.port)};

		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_true(fds[i] >= 0);
		/* Little room in the kernel, so that what is not read stays
		 * in berthd. */
		setsockopt(fds[i], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
		assert_int_equal(connect(fds[i], (struct sockaddr *)&sin, sizeof sin), 0);
		fcntl(fds[i], F_SETFL, O_NONBLOCK);
		/* As much of it as berthd takes. */
		(void)!write(fds[i], all, n);
	}
	usleep(1000 * 1000);
	json_decref(req(200, "GET", "/api/info", BEARER, NULL));
	after = rss_kib(pid);
	print_message("%d strangers pipelining %d requests, reading none: "
		      "berthd's RSS %ld -> %ld KiB\n", STRANGERS, PIPELINED,
		      before, after);
	/* Each stranger's 400 responses are 21 MiB, which the old code
	 * queued whole (16 x 21 MiB); now at most what the kernel took,
	 * and 16 KiB and the response that passed it. */
	assert_true(after - before < 128 * 1024);
	for (int i = 0; i < STRANGERS; i++)
		close(fds[i]);
	free(all);
}

/* A client that pipelines, and reads its responses as they come, gets
 * them all: the hold lets it go on as soon as it has read. */
static void conn__pipelining_past_the_hold__answers_every_request_to_a_reader(
	void **state)
{
	enum { PIPELINED = 300 };
	static const char rq[] = "GET /api/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n";
	size_t n = (sizeof rq - 1) * PIPELINED, got = 0;
	char *all = malloc(n), buf[65536];
	int fd = http_connect(gw.port), answers = 0;
	const char *p;

	assert_non_null(all);
	assert_true(fd >= 0);
	for (int i = 0; i < PIPELINED; i++)
		memcpy(all + i * (sizeof rq - 1), rq, sizeof rq - 1);
	assert_int_equal(write(fd, all, n), (ssize_t)n);
	free(all);
	/* Count the status lines (no body holds one) until all came; the
	 * 16 bytes kept from each read cannot hold a whole one, and may
	 * hold the start of the next. */
	while (answers < PIPELINED) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t r;

		assert_int_equal(poll(&pfd, 1, 5000), 1);
		r = read(fd, buf + got, sizeof buf - 1 - got);
		assert_true(r > 0);
		got += (size_t)r;
		buf[got] = '\0';
		for (p = buf; (p = strstr(p, "HTTP/1.1 200 OK\r\n")); p += 17)
			answers++;
		if (got > 16) {
			memmove(buf, buf + got - 16, 16);
			got = 16;
		}
	}
	assert_int_equal(answers, PIPELINED);
	close(fd);
}

/* The gateway holds at most 1024 connections (docs/HTTP.md): when
 * connections with credentials fill it, the one past them is answered
 * 503 with the socket's -32013 at once and closed, and once the others
 * are gone the gateway serves again. */
static void conn__past_the_connection_limit__is_refused_with_503(void **state)
{
	enum { LIMIT = 1024, MORE = 16 };
	static const char rq[] = "GET /api/info HTTP/1.1\r\nHost: x\r\n" BEARER
				 "\r\n";
	struct rlimit rl;
	int fds[LIMIT + MORE];
	int n = 0, refused = 0;
	char buf[4096];

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < LIMIT + MORE + 64) {
		fprintf(stderr, "connection limit: only %llu files may be open; "
			"skipped\n", (unsigned long long)rl.rlim_cur);
		skip();
	}
	/* Each makes a request with the token and keeps its connection. */
	for (; n < LIMIT; n++) {
		struct pollfd p;

		fds[n] = http_connect(gw.port);
		assert_true(fds[n] >= 0);
		assert_int_equal(write(fds[n], rq, sizeof rq - 1),
				 (ssize_t)sizeof rq - 1);
		p = (struct pollfd){fds[n], POLLIN, 0};
		assert_int_equal(poll(&p, 1, 30000), 1);
		assert_true(read(fds[n], buf, sizeof buf) > 0);
	}
	for (; n < LIMIT + MORE && !refused; n++) {
		fds[n] = http_connect(gw.port);
		assert_true(fds[n] >= 0);
		struct pollfd pfd = {.fd = fds[n], .events = POLLIN};
		if (poll(&pfd, 1, 1000) > 0) {
			read_all(fds[n], buf, sizeof buf);
			assert_non_null(strstr(buf, "HTTP/1.1 503 "));
			assert_non_null(strstr(buf, "\"code\":-32013"));
			refused = 1;
		}
	}
	assert_true(refused);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	/* The gateway sees the closes on its next turns. */
	for (int tries = 0;; tries++) {
		struct resp r;

		assert_int_equal(http_do(gw.port, "GET", "/api/info", BEARER,
					 NULL, &r),
				 0);
		int status = r.status;
		resp_free(&r);
		if (status == 200)
			break;
		assert_int_equal(status, 503);
		assert_true(tries < 200);
		usleep(10000);
	}
}

/* RFC 9110 9.1: HEAD is served wherever GET is, with GET's head
 * (Content-Length included) and no body; the connection goes on with the
 * next request. An event stream's HEAD is its head, then the close.
 * Before, every HEAD was 405. */
static void routes__head__is_get_without_its_body(void **state)
{
	static const char *const paths[] = {"/", "/api/openapi.json", "/api/info",
					    "/api/jobs?limit=1"};
	char rq[512], buf[65536];
	struct resp r;

	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
		char want[64], *len;

		assert_int_equal(http_do(gw.port, "GET", paths[i], BEARER, NULL, &r), 0);
		assert_int_equal(r.status, 200);
		snprintf(want, sizeof want, "%zu", r.len);
		resp_free(&r);
		/* HEAD, then a GET on the same connection: the GET's status
		 * line follows the HEAD's head at once. */
		snprintf(rq, sizeof rq,
			 "HEAD %s HTTP/1.1\r\nHost: x\r\n" BEARER "\r\n"
			 "GET /api/info HTTP/1.1\r\nHost: x\r\n" BEARER
			 "Connection: close\r\n\r\n", paths[i]);
		exchange(rq, buf, sizeof buf);
		assert_true(strncmp(buf, "HTTP/1.1 200 ", 13) == 0);
		len = strcasestr(buf, "Content-Length: ");
		assert_non_null(len);
		if (strncmp(len + 16, want, strlen(want)) != 0)
			fail_msg("HEAD %s: %.40s, GET's body is %s bytes", paths[i],
				 len, want);
		assert_true(strncmp(strstr(buf, "\r\n\r\n") + 4, "HTTP/1.1 200 ",
				    13) == 0);
	}
	exchange("HEAD /api/events HTTP/1.1\r\nHost: x\r\n" BEARER "\r\n",
		 buf, sizeof buf);
	assert_true(strncmp(buf, "HTTP/1.1 200 ", 13) == 0);
	assert_non_null(strstr(buf, "text/event-stream"));
	assert_string_equal(strstr(buf, "\r\n\r\n"), "\r\n\r\n");
}

/* Every route's 405 lists exactly the methods the route takes, as the
 * OpenAPI document does (HEAD and PUT are never taken). */
static void routes__a_wrong_method_gets_405_with_the_routes_allow(void **state)
{
	static const char *const all[] = {"GET", "POST", "DELETE", "PUT", NULL};
	json_t *doc = req(200, "GET", "/api/openapi.json", NULL, NULL);
	json_t *paths = json_object_get(doc, "paths"), *item;
	const char *key;
	int checked = 0;

	json_object_foreach(paths, key, item) {
		char path[256], allow[64] = "", *brace, *got;

		snprintf(path, sizeof path, "%s", key);
		brace = strstr(path, "{id}");
		if (brace)
			memcpy(brace, "none", 4);
		for (int i = 0; i < 3; i++) {
			char lower[8];

			for (int k = 0; all[i][k]; k++)
				lower[k] = (char)tolower((unsigned char)all[i][k]);
			lower[strlen(all[i])] = '\0';
			/* HEAD goes wherever GET does (RFC 9110 9.3.2). */
			if (json_object_get(item, lower))
				snprintf(allow + strlen(allow),
					 sizeof allow - strlen(allow), "%s%s%s",
					 allow[0] ? ", " : "", all[i],
					 i == 0 ? ", HEAD" : "");
		}
		for (int i = 0; all[i]; i++) {
			struct resp r;

			if (strstr(allow, all[i]))
				continue;
			assert_int_equal(http_do(gw.port, all[i], path, BEARER,
						 NULL, &r), 0);
			if (r.status != 405)
				fprintf(stderr, "%s %s: %d\n", all[i], path,
					r.status);
			assert_int_equal(r.status, 405);
			got = resp_header(&r, "Allow");
			assert_non_null(got);
			if (strcmp(got, allow) != 0)
				fprintf(stderr, "%s %s: Allow: %s, not %s\n",
					all[i], path, got, allow);
			assert_string_equal(got, allow);
			free(got);
			resp_free(&r);
			checked++;
		}
	}
	print_message("%d wrong methods answered 405 with their route's Allow\n",
		      checked);
	json_decref(doc);
}

/* ---- principals ---------------------------------------------------------- */

#define T_AGENT "agent-0123456789abcdef0123456789abcdef"
#define T_ALICE "alice-0123456789abcdef0123456789abcdef"

/* principals_write writes json as dir's principals.json, mode 0600, and
 * its path to file; dir is mkdtemp's template, made here. */
static void principals_write(char *dir, const char *json, char file[128])
{
	FILE *f;

	assert_non_null(mkdtemp(dir));
	snprintf(file, 128, "%s/principals.json", dir);
	f = fopen(file, "w");
	assert_non_null(f);
	fputs(json, f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(file, 0600), 0);
}

/* With --principals a Bearer token acts as its principal, with its roles:
 * the agent submits but may not approve (403, forbidden), alice
 * approves; a session acts as the principal that opened it, and the
 * login URL's as berthd's own user; /api/info says who is logged in, and
 * /metrics counts the decision and the refusal. */
static void auth__bearer_tokens_and_sessions__act_as_their_principals(void **state)
{
	static struct gw pg;
	char dir[] = "/tmp/berth-http-princ-XXXXXX", file[128];
	const char *extra[] = {"--principals", file, NULL};
	const char *agent = "Authorization: Bearer " T_AGENT "\r\n" JSON_CT;
	char alice[256], *sid, hdr[256], path[160], metric[256];
	struct gw saved = gw;
	struct resp r;
	json_t *v, *job;

	principals_write(dir,
			 "{\"principals\": ["
			 "{\"name\": \"agent\", \"token\": \"" T_AGENT "\","
			 " \"roles\": [\"submit\"]},"
			 "{\"name\": \"alice\", \"token\": \"" T_ALICE "\","
			 " \"roles\": [\"approve\"]}]}",
			 file);
	assert_int_equal(gw_start(&pg, false, extra), 0);
	/* req() talks to gw: point it at this berthd for the test. */
	gw = pg;
	snprintf(alice, sizeof alice, "Authorization: Bearer %s\r\n" JSON_CT,
		 T_ALICE);

	job = req(201, "POST", "/api/jobs", agent,
		  "{\"tool\":\"deploy\",\"input\":{\"service\":\"x\"}}");
	assert_string_equal(jstr(job, "submittedBy"), "agent");
	assert_string_equal(jstr(job, "submittedVia"), "http");
	snprintf(path, sizeof path, "/api/jobs/%s/approve", jstr(job, "id"));
	v = req(403, "POST", path, agent, "{}");
	assert_int_equal(err_code(json_incref(v)), -32010);
	assert_string_equal(jstr(json_object_get(json_object_get(v, "error"),
						 "data"), "reason"), "forbidden");
	json_decref(v);
	v = req(200, "POST", path, alice, "{\"note\":\"go\"}");
	assert_string_equal(jstr(json_object_get(json_object_get(v, "approval"),
						 "decidedBy"), "name"), "alice");
	assert_string_equal(jstr(json_object_get(json_object_get(v, "approval"),
						 "decidedBy"), "via"), "http");
	json_decref(v);
	json_decref(job);

	/* Who is logged in: a Bearer token, a session it opened. */
	v = req(200, "GET", "/api/info", alice, NULL);
	assert_string_equal(jstr(json_object_get(v, "principal"), "name"), "alice");
	json_decref(v);
	sid = open_session(&pg, T_ALICE);
	snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", sid);
	v = req(200, "GET", "/api/info", hdr, NULL);
	assert_string_equal(jstr(json_object_get(v, "principal"), "name"), "alice");
	assert_string_equal(jstr(json_object_get(v, "principal"), "via"), "http");
	json_decref(v);
	free(sid);
	/* The login URL's session is berthd's own user's: an admin. */
	sid = open_session(&pg, pg.login_token);
	snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", sid);
	v = req(200, "GET", "/api/info", hdr, NULL);
	assert_string_equal(json_string_value(json_array_get(json_object_get(
		json_object_get(v, "principal"), "roles"), 0)), "admin");
	json_decref(v);
	free(sid);

	assert_int_equal(http_do(pg.port, "GET", "/metrics", alice, NULL, &r), 0);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "berth_decisions_total{tool=\"deploy\","
				       "principal=\"alice\",decision=\"approved\"} 1"));
	snprintf(metric, sizeof metric, "berth_refusals_total{reason=\"forbidden\"} 1");
	assert_non_null(strstr(r.body, metric));
	resp_free(&r);
	gw = saved;
	gw_stop(&pg);
	unlink(file);
	rmdir(dir);
}

/* ---- the audit's findings ------------------------------------------------ */

/* raw_status sends text (a whole request, which asks for Connection:
 * close) on a new connection, reads the response into buf and returns its
 * status. */
static int raw_status(const char *text, char *buf, size_t cap)
{
	int fd = http_connect(gw.port);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	read_all(fd, buf, cap);
	close(fd);
	return strncmp(buf, "HTTP/1.1 ", 9) == 0 ? atoi(buf + 9) : -1;
}

/* Behind a TLS reverse proxy that keeps Host (Caddy's default), the
 * page's POSTs carry Origin https://HOST: the same site, whose default
 * port 443 a browser leaves out. Another host, another port or another
 * scheme is cross-site still. Before, every https:// Origin was refused
 * 403, so the page could not even log in behind TLS. */
static void auth__an_https_origin_naming_this_host__is_the_same_site(void **state)
{
	static const struct {
		const char *origin, *host;
		int status;
	} cases[] = {
		{"https://berth.example.com", "berth.example.com", 404},
		{"https://berth.example.com", "berth.example.com:443", 404},
		{"https://BERTH.example.com:8443", "berth.example.com:8443", 404},
		{"https://[::1]:8443", "[::1]:8443", 404},
		{"http://berth.example.com", "berth.example.com", 404},
		{"http://berth.example.com", "berth.example.com:80", 404},
		{"https://evil.example", "berth.example.com", 403},
		{"https://berth.example.com.evil.example", "berth.example.com", 403},
		{"https://berth.example.com:8443", "berth.example.com", 403},
		{"https://berth.example.com", "berth.example.com:8443", 403},
		{"https://berth.example.com", "berth.example.com:80", 403},
		{"http://berth.example.com", "berth.example.com:443", 403},
		{"https://berth.example.com:443", "berth.example.com:8443", 403},
		{"ftp://berth.example.com", "berth.example.com", 403},
		{"null", "berth.example.com", 403},
	};
	char rq[512], buf[4096];

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		/* A job that does not exist: 404 once the request passed the
		 * cross-site check, which leaves nothing behind. */
		snprintf(rq, sizeof rq, "POST /api/jobs/nope/cancel HTTP/1.1\r\n"
			 "Host: %s\r\nOrigin: %s\r\nSec-Fetch-Site: same-origin\r\n"
			 BEARER JSON_CT "Content-Length: 2\r\nConnection: close"
			 "\r\n\r\n{}", cases[i].host, cases[i].origin);
		if (raw_status(rq, buf, sizeof buf) != cases[i].status)
			fprintf(stderr, "Origin %s, Host %s: %.60s\n",
				cases[i].origin, cases[i].host, buf);
		assert_int_equal(atoi(buf + 9), cases[i].status);
	}
}

/* A query value, or a job's id in the path, that is not UTF-8 cannot be
 * a JSON string: it is refused 400 with the socket's -32602 naming it, as
 * a value of the wrong type is. Before, it was dropped without a word and
 * the answer was for no filter: every event of every job for
 * /api/events?jobId=%FF, every job for /api/jobs?tool=%FF. */
static void rest__a_query_value_or_job_id_not_in_utf8__is_refused_naming_it(
	void **state)
{
	static const struct {
		const char *path, *pointer;
	} cases[] = {
		{"/api/jobs?tool=%FF", "/tool"},
		{"/api/jobs?runId=a%C3", "/runId"},
		{"/api/jobs?cursor=%FF%FE", "/cursor"},
		{"/api/jobs?limit=5&status=completed,%FF", "/status"},
		{"/api/tools?cursor=%ED%A0%80", "/cursor"}, /* a surrogate */
		{"/api/jobs/%FF", "/id"},
		{"/api/jobs/%FF/wait?timeoutMs=1", "/id"},
		{"/api/jobs/%FF/events", "/id"},
		{"/api/jobs/x/logs?after=%C0%80", "/after"}, /* overlong NUL */
		{"/api/jobs/x?view=%FF", "/view"},
	};
	char *id = submit("deploy", "{\"service\":\"utf8\"}");
	char path[256];
	json_t *v;

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		refused_naming(cases[i].path, cases[i].pointer);
	/* A name that is not UTF-8 is refused too, though it could only be
	 * a name no method takes. */
	v = req(400, "GET", "/api/jobs?%FF=1", BEARER, NULL);
	assert_int_equal(err_code(v), -32602);
	/* The action routes, and the stream. */
	v = req(400, "POST", "/api/jobs/%FF/cancel", BEARER JSON_CT, "{}");
	assert_string_equal(jstr(json_array_get(json_object_get(json_object_get(
		json_object_get(v, "error"), "data"), "errors"), 0),
		"instancePath"), "/id");
	json_decref(v);
	v = sse_refused("?since=0&jobId=%FF");
	assert_string_equal(jstr(json_array_get(json_object_get(json_object_get(
		json_object_get(v, "error"), "data"), "errors"), 0),
		"instancePath"), "/jobId");
	json_decref(v);
	/* What is UTF-8 still goes through. */
	snprintf(path, sizeof path, "/api/jobs?runId=d%%C3%%A9ploy&limit=1");
	v = req(200, "GET", path, BEARER, NULL);
	assert_int_equal(json_array_size(json_object_get(v, "jobs")), 0);
	json_decref(v);
	snprintf(path, sizeof path, "/api/jobs/%s/cancel", id);
	json_decref(req(200, "POST", path, BEARER JSON_CT, "{}"));
	free(id);
}

/* open_long sends GET path with the Bearer token on a new connection and
 * returns it; for an event stream (stream), once its head arrived. */
static int open_long(int port, const char *path, const char *token,
		     bool stream)
{
	int fd = http_connect(port);
	char rq[512], buf[4096];
	size_t len = 0;

	assert_true(fd >= 0);
	snprintf(rq, sizeof rq, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: "
		 "Bearer %s\r\n\r\n", path, token);
	assert_int_equal(write(fd, rq, strlen(rq)), (ssize_t)strlen(rq));
	while (stream && !memmem(buf, len, "\r\n\r\n", 4)) {
		struct pollfd p = {fd, POLLIN, 0};
		ssize_t n;

		assert_int_equal(poll(&p, 1, 30000), 1);
		n = read(fd, buf + len, sizeof buf - len);
		assert_true(n > 0);
		len += (size_t)n;
	}
	if (stream)
		assert_int_equal(strncmp(buf, "HTTP/1.1 200 ", 13), 0);
	return fd;
}

/* open_waits opens, with token, an event stream and two waits on job (one
 * that never ends on its own): jobs/wait and a job's events with waitMs.
 * fds gets the three. */
static void open_waits(int port, const char *token, const char *job, int fds[3])
{
	char path[256];
	struct resp r;

	fds[0] = open_long(port, "/api/events", token, true);
	snprintf(path, sizeof path, "/api/jobs/%s/wait?timeoutMs=600000&until="
		 "completed", job);
	fds[1] = open_long(port, path, token, false);
	snprintf(path, sizeof path, "/api/jobs/%s/events?since=999999999&"
		 "waitMs=600000", job);
	fds[2] = open_long(port, path, token, false);
	/* The waits started: berthd has read them by the time it answers
	 * a request sent after them. */
	usleep(200 * 1000);
	assert_int_equal(http_do(port, "GET", "/api/info", BEARER, NULL, &r), 0);
	resp_free(&r);
	for (int i = 1; i < 3; i++) {
		struct pollfd p = {fds[i], POLLIN, 0};

		assert_int_equal(poll(&p, 1, 0), 0); /* no answer yet */
	}
}

/* assert_ended asserts that berthd closes each of the n connections
 * within timeout_ms, sending nothing more on the waits but perhaps
 * events on a stream. */
static void assert_ended(int *fds, int n, int timeout_ms)
{
	static char got[1 << 20];

	for (int i = 0; i < n; i++) {
		bool closed = wait_closed(fds[i], timeout_ms, got, sizeof got);

		if (!closed)
			fprintf(stderr, "connection %d still open\n", i);
		assert_true(closed);
		close(fds[i]);
	}
}

/* Logging out ends the session, and with it the event streams and waits
 * it opened (their connections are closed): before, a stream opened with
 * the session went on sending every job's events after the logout, for
 * as long as its connection lived. What a token opened goes on. */
static void auth__logout__ends_the_streams_and_waits_of_its_session(void **state)
{
	char *job = submit("deploy", "{\"service\":\"logout\"}");
	char *sid = open_session(&gw, "secret"), hdr[128];
	int fds[3], kept;
	struct sse s = {0};
	json_t *ev;

	open_waits(gw.port, sid, job, fds);
	kept = open_long(gw.port, "/api/events", "secret", true);
	snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", sid);
	json_decref(req(204, "DELETE", "/api/session", hdr, NULL));
	assert_ended(fds, 3, 5000);
	/* The token's stream is live still. */
	s.fd = kept;
	free(submit("deploy", "{\"service\":\"after-logout\"}"));
	ev = sse_next(&s);
	assert_non_null(ev);
	json_decref(ev);
	close(kept);
	free(sid);
	free(job);
}

/* A session that expires ($BERTH_HTTP_SESSION_MS here; 7 days by default)
 * ends the streams and waits it opened at that moment, as a logout
 * does. Before, they outlived it without end. */
static void auth__an_expired_session__ends_the_streams_and_waits_it_opened(
	void **state)
{
	struct gw g, saved = gw;
	char *job, *sid;
	int fds[3];
	struct timespec t0, t1;
	long ms;

	setenv("BERTH_HTTP_SESSION_MS", "3000", 1);
	assert_int_equal(gw_start(&g, false, NULL), 0);
	unsetenv("BERTH_HTTP_SESSION_MS");
	gw = g; /* for req() and submit() */
	job = submit("deploy", "{\"service\":\"expiry\"}");
	sid = open_session(&g, "secret");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	open_waits(g.port, sid, job, fds);
	assert_ended(fds, 3, 10000);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	/* At the expiry, not before it (nor at a ping, 15 s apart). */
	assert_true(ms >= 2500);
	{
		char hdr[128];

		snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", sid);
		assert_int_equal(err_code(req(401, "GET", "/api/info", hdr,
					      NULL)), -32010);
	}
	gw = saved;
	free(sid);
	free(job);
	gw_stop(&g);
}

/* A session that ended (logged out here) is told so, and is no guess: a
 * page left open, or a second tab, that sends it again and again does not
 * count toward the throttle that all of loopback shares. Before, it was
 * "wrong token", counted, and the eleventh within a second was 429 for
 * every client on loopback. */
static void auth__an_ended_session__is_told_so_and_not_throttled(void **state)
{
	struct gw g, saved = gw;
	char *sid, hdr[128];
	json_t *v;

	assert_int_equal(gw_start(&g, false, NULL), 0);
	gw = g; /* for req() */
	sid = open_session(&g, "secret");
	snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", sid);
	json_decref(req(204, "DELETE", "/api/session", hdr, NULL));
	for (int i = 0; i < 15; i++) {
		v = req(401, "GET", "/api/info", hdr, NULL);
		assert_non_null(strstr(json_string_value(json_object_get(
					       json_object_get(v, "error"),
					       "message")),
				       "this session ended"));
		json_decref(v);
	}
	/* A token berthd never gave is a wrong one, as before. */
	v = req(401, "GET", "/api/info",
		"Authorization: Bearer 0123456789abcdef0123456789abcdef"
		"0123456789abcdef0123456789abcdef\r\n", NULL);
	assert_non_null(strstr(json_string_value(json_object_get(
				       json_object_get(v, "error"), "message")),
			       "wrong token"));
	json_decref(v);
	gw = saved;
	free(sid);
	gw_stop(&g);
}

/* A 404 names the path as it was requested, as text fit for JSON: before,
 * a path with a byte that is not UTF-8 was answered 500 "out of memory"
 * (its message could not be made), and an unknown action of a job named
 * the path cut before it (/api/jobs/abc for /api/jobs/abc/bogus). */
static void routes__a_404__names_the_path_as_requested(void **state)
{
	json_t *v, *e;

	v = req(404, "GET", "/nope\xff", BEARER, NULL);
	e = json_object_get(v, "error");
	assert_int_equal(json_integer_value(json_object_get(e, "code")), -32601);
	assert_string_equal(jstr(e, "message"),
			    "not found: no route GET /nope\xef\xbf\xbd");
	json_decref(v);
	v = req(404, "GET", "/api/jobs/abc/bogus", BEARER, NULL);
	assert_string_equal(jstr(json_object_get(v, "error"), "message"),
			    "not found: no route GET /api/jobs/abc/bogus");
	json_decref(v);
	v = req(404, "POST", "/api/jobs/abc/bogus", BEARER JSON_CT, "{}");
	assert_string_equal(jstr(json_object_get(v, "error"), "message"),
			    "not found: no route POST /api/jobs/abc/bogus");
	json_decref(v);
}

#define T_WORKER "wk-0123456789abcdef0123456789abcdef0123"
#define T_READER "reader-0123456789abcdef0123456789abcdef"

/* principals_start starts pg with --principals (in a new folder, whose
 * name goes to dir): alice (approve, so read), wk (worker: no role the
 * gateway serves) and reader (read). */
static void principals_start(struct gw *pg, char dir[64])
{
	const char *extra[] = {"--principals", NULL, NULL};
	char file[128];

	snprintf(dir, 64, "/tmp/berth-http-princ-XXXXXX");
	principals_write(dir,
			 "{\"principals\": ["
			 "{\"name\": \"alice\", \"token\": \"" T_ALICE "\","
			 " \"roles\": [\"approve\"]},"
			 "{\"name\": \"wk\", \"token\": \"" T_WORKER "\","
			 " \"roles\": [\"worker\"]},"
			 "{\"name\": \"reader\", \"token\": \"" T_READER "\","
			 " \"roles\": [\"read\"]}]}",
			 file);
	extra[1] = file;
	assert_int_equal(gw_start(pg, false, extra), 0);
}

static void principals_stop(struct gw *pg, const char *dir)
{
	char file[128];

	gw_stop(pg);
	snprintf(file, sizeof file, "%s/principals.json", dir);
	unlink(file);
	rmdir(dir);
}

/* forbidden_refusals returns berth_refusals_total{reason="forbidden"} of
 * pg's /metrics, read as reader. */
static long forbidden_refusals(struct gw *pg)
{
	static const char name[] = "\nberth_refusals_total{reason=\"forbidden\"} ";
	struct resp r;
	const char *p;
	long n;

	assert_int_equal(http_do(pg->port, "GET", "/metrics", "Authorization: "
				 "Bearer " T_READER "\r\n", NULL, &r), 0);
	assert_int_equal(r.status, 200);
	p = strstr(r.body, name);
	assert_non_null(p);
	n = atol(p + strlen(name));
	resp_free(&r);
	return n;
}

/* /metrics refused to a principal without the role read is counted in
 * berth_refusals_total{reason="forbidden"}, as every other refusal is.
 * Before, those refusals were not counted. */
static void metrics__a_refusal_of_metrics__is_counted_as_forbidden(void **state)
{
	static struct gw pg;
	char dir[64];
	long before;
	struct resp r;

	principals_start(&pg, dir);
	before = forbidden_refusals(&pg);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(http_do(pg.port, "GET", "/metrics", "Authorization: "
					 "Bearer " T_WORKER "\r\n", NULL, &r), 0);
		assert_int_equal(r.status, 403);
		assert_non_null(strstr(r.body, "\"reason\":\"forbidden\""));
		resp_free(&r);
	}
	assert_int_equal(forbidden_refusals(&pg) - before, 3);
	principals_stop(&pg, dir);
}

/* session_status returns the status of GET /api/info with session sid. */
static int session_status(struct gw *pg, const char *sid)
{
	char hdr[128];
	struct resp r;
	int status;

	snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", sid);
	assert_int_equal(http_do(pg->port, "GET", "/api/info", hdr, NULL, &r), 0);
	status = r.status;
	resp_free(&r);
	return status;
}

/* A principal has at most 8 sessions: a ninth replaces its own oldest,
 * whose streams end, and never another principal's. Before, any
 * principal (one with no role the page can use included) could open 64
 * sessions and so log every person's page out. */
static void auth__a_principal_past_8_sessions__replaces_its_own_oldest(
	void **state)
{
	static struct gw pg;
	char dir[64], *alice[9], *wk[64];
	int stream;

	principals_start(&pg, dir);
	for (int i = 0; i < 8; i++)
		alice[i] = open_session(&pg, T_ALICE);
	stream = open_long(pg.port, "/api/events", alice[0], true);
	alice[8] = open_session(&pg, T_ALICE);
	/* Alice's oldest went, with its stream; the other eight are hers. */
	assert_ended(&stream, 1, 5000);
	assert_int_equal(session_status(&pg, alice[0]), 401);
	for (int i = 1; i < 9; i++)
		assert_int_equal(session_status(&pg, alice[i]), 200);
	/* A principal with no role the page uses opens 64 sessions: its own
	 * replace each other, alice keeps hers. */
	for (int i = 0; i < 64; i++)
		wk[i] = open_session(&pg, T_WORKER);
	for (int i = 1; i < 9; i++)
		assert_int_equal(session_status(&pg, alice[i]), 200);
	/* Its last 8 are open (403: they may not read); of the others,
	 * only two are tried, as a session that ended is a wrong token,
	 * which the throttle counts. */
	assert_int_equal(session_status(&pg, wk[0]), 401);
	assert_int_equal(session_status(&pg, wk[55]), 401);
	for (int i = 56; i < 64; i++)
		assert_int_equal(session_status(&pg, wk[i]), 403);
	for (int i = 0; i < 9; i++)
		free(alice[i]);
	for (int i = 0; i < 64; i++)
		free(wk[i]);
	principals_stop(&pg, dir);
}

/* A client that hangs up while its wait is pending ends the wait, even
 * when it pipelined more requests behind it than berthd reads ahead (64
 * KiB): berthd stops reading such a client, and looks at it once a second
 * for a peer that hung up instead. Before, the hang-up went unseen, and
 * the wait held its connection until its timeoutMs. */
static void conn__a_hang_up_behind_64_kib_of_pipelined_requests__ends_the_wait(
	void **state)
{
	char *id = submit("deploy", "{\"service\":\"pipelined\"}");
	static char more[80 * 1024];
	char rq[512], pad[1024];
	size_t len = 0;
	int fd, base, now = 0;
	pid_t pid = gw_pid();

	memset(pad, 'a', sizeof pad - 1);
	pad[sizeof pad - 1] = '\0';
	while (len + 1200 < sizeof more)
		len += (size_t)snprintf(more + len, sizeof more - len,
					"GET /api/info HTTP/1.1\r\nHost: x\r\n"
					BEARER "X-Pad: %s\r\n\r\n", pad);
	base = settled_fds(pid);
	fd = http_connect(gw.port);
	assert_true(fd >= 0);
	snprintf(rq, sizeof rq, "GET /api/jobs/%s/wait?timeoutMs=600000&until="
		 "completed HTTP/1.1\r\nHost: x\r\n" BEARER "\r\n", id);
	assert_int_equal(write(fd, rq, strlen(rq)), (ssize_t)strlen(rq));
	usleep(200 * 1000);
	assert_int_equal(write(fd, more, len), (ssize_t)len);
	usleep(300 * 1000);
	assert_true(count_fds(pid) >= base + 1);
	close(fd);
	for (int tries = 0; tries < 100; tries++) {
		if ((now = count_fds(pid)) <= base)
			break;
		usleep(100000);
	}
	assert_true(now <= base);
	snprintf(rq, sizeof rq, "/api/jobs/%s/cancel", id);
	json_decref(req(200, "POST", rq, BEARER JSON_CT, "{}"));
	free(id);
}

/* ---- the audit's findings (issue 10, third round) ----------------------- */

/* metric returns the value of series (its name and labels, then a space)
 * in the /metrics of port, read with the header line hdr. */
static long metric(int port, const char *hdr, const char *series)
{
	struct resp r;
	const char *p;
	long n;

	assert_int_equal(http_do(port, "GET", "/metrics", hdr, NULL, &r), 0);
	assert_int_equal(r.status, 200);
	p = strstr(r.body, series);
	assert_non_null(p);
	n = atol(p + strlen(series));
	resp_free(&r);
	return n;
}

/* Sessions live in berthd's memory and end when it stops. A page left
 * open sends its session to the new berthd: it is told that its session
 * ended, and is neither logged, counted as a failed login, nor throttled
 * (which would lock out the --token-file token on all of loopback).
 * Before, it was a "wrong token", and the tenth throttled loopback. */
static void auth__a_session_from_before_a_restart__is_told_so_and_not_throttled(
	void **state)
{
	struct gw g;
	char *sid, hdr[160];
	struct resp r;
	json_t *v;

	assert_int_equal(gw_start(&g, false, NULL), 0);
	sid = open_session(&g, "secret");
	snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", sid);
	assert_int_equal(gw_restart(&g), 0);
	for (int i = 0; i < 15; i++) {
		assert_int_equal(http_do(g.port, "GET", "/api/info", hdr, NULL, &r),
				 0);
		assert_int_equal(r.status, 401);
		v = resp_json(&r);
		assert_string_equal(jstr(json_object_get(v, "error"), "message"),
				    "unauthorized: this session ended or is "
				    "unknown (berthd may have restarted); log in "
				    "again");
		json_decref(v);
		resp_free(&r);
	}
	assert_false(gw_log_has(&g, "refused login"));
	assert_int_equal(metric(g.port, BEARER,
				"berth_auth_failures_total{via=\"http\"} "), 0);
	assert_int_equal(metric(g.port, BEARER,
				"berth_auth_throttled_total{via=\"http\"} "), 0);
	/* A token of a session's shape that berthd never gave is no guess
	 * either: 256 random bits are not found by guessing. */
	sid[strlen(sid) - 1] = sid[strlen(sid) - 1] == '0' ? '1' : '0';
	snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", sid);
	assert_int_equal(http_do(g.port, "GET", "/api/info", hdr, NULL, &r), 0);
	assert_int_equal(r.status, 401);
	assert_non_null(strstr(r.body, "this session ended or is unknown"));
	resp_free(&r);
	assert_int_equal(metric(g.port, BEARER,
				"berth_auth_failures_total{via=\"http\"} "), 0);
	free(sid);
	gw_stop(&g);
}

/* documented asserts that the OpenAPI document doc lists status among the
 * responses of method (lower case) on path (as the document writes it). */
static void documented(json_t *doc, const char *path, const char *method,
		       int status)
{
	char key[8];
	json_t *op = json_object_get(json_object_get(json_object_get(doc, "paths"),
						     path), method);

	assert_non_null(op);
	snprintf(key, sizeof key, "%d", status);
	if (!json_object_get(json_object_get(op, "responses"), key))
		fail_msg("openapi.json: %s %s answered %d, which its responses "
			 "do not list", method, path, status);
}

/* Every status a route answered in these requests is listed in its
 * responses: as a principal without the role read, without credentials,
 * with a job that does not exist, from another site. Before, /api/jobs/{id}/events did not list 404, and no
 * GET route listed 403. */
static void openapi__lists_every_status_the_routes_answer(void **state)
{
	static struct gw pg;
	static const char *const as[] = {
		"Authorization: Bearer " T_WORKER "\r\n",
		"Authorization: Bearer " T_READER "\r\n",
		"Authorization: Bearer " T_ALICE "\r\n" JSON_CT,
		"",
		"Authorization: Bearer " T_ALICE "\r\nOrigin: http://evil.example\r\n",
	};
	json_t *doc = req(200, "GET", "/api/openapi.json", NULL, NULL), *item;
	const char *key;
	char dir[64];

	principals_start(&pg, dir);
	json_object_foreach(json_object_get(doc, "paths"), key, item) {
		static const char *const methods[] = {"get", "post", "delete"};
		char path[256], *brace;

		snprintf(path, sizeof path, "%s", key);
		brace = strstr(path, "{id}");
		if (brace)
			memcpy(brace, "none", 4);
		if (strstr(key, "/wait") || strcmp(key, "/api/events") == 0)
			strcat(path, "?timeoutMs=0&since=999999999");
		for (size_t m = 0; m < 3; m++) {
			char upper[8];
			struct resp r;

			if (!json_object_get(item, methods[m]))
				continue;
			for (size_t i = 0; i <= strlen(methods[m]); i++)
				upper[i] = (char)toupper((unsigned char)methods[m][i]);
			for (size_t a = 0; a < sizeof as / sizeof as[0]; a++) {
				/* An event stream that opens never ends. */
				if (strcmp(key, "/api/events") == 0 &&
				    (a == 1 || a == 2 || a == 4))
					continue;
				assert_int_equal(http_do(pg.port, upper, path, as[a],
							 m ? "{}" : NULL, &r), 0);
				documented(doc, key, methods[m], r.status);
				resp_free(&r);
			}
		}
	}
	principals_stop(&pg, dir);
	json_decref(doc);
}

/* A cross-site request, and on --http-open a foreign Host or a POST that
 * is not JSON, is refused -32010 with data.reason "forbidden" and counted
 * in berth_refusals_total as every refusal is. Before, those 403s had no
 * data and were not counted. */
static void auth__cross_site_and_host_refusals__say_forbidden_and_are_counted(
	void **state)
{
	static const char *const series = "berth_refusals_total{reason=\"forbidden\"} ";
	struct gw g;
	long before = metric(gw.port, BEARER, series);
	json_t *v;

	v = req(403, "POST", "/api/jobs", BEARER JSON_CT
		"Origin: http://evil.example\r\n", "{}");
	assert_string_equal(jstr(json_object_get(json_object_get(v, "error"),
						 "data"), "reason"), "forbidden");
	assert_int_equal(err_code(v), -32010);
	v = req(403, "POST", "/api/jobs", BEARER JSON_CT
		"Sec-Fetch-Site: cross-site\r\n", "{}");
	assert_string_equal(jstr(json_object_get(json_object_get(v, "error"),
						 "data"), "reason"), "forbidden");
	json_decref(v);
	assert_int_equal(metric(gw.port, BEARER, series) - before, 2);

	assert_int_equal(gw_start(&g, true, NULL), 0);
	before = metric(g.port, NULL, series);
	{
		int fd = http_connect(g.port);
		static const char rq[] = "GET /api/info HTTP/1.1\r\nHost: "
					 "evil.example\r\nConnection: close\r\n\r\n";
		char buf[2048] = "";

		assert_true(fd >= 0);
		assert_int_equal(write(fd, rq, sizeof rq - 1), (ssize_t)sizeof rq - 1);
		read_all(fd, buf, sizeof buf);
		close(fd);
		assert_non_null(strstr(buf, "HTTP/1.1 403 "));
		assert_non_null(strstr(buf, "\"reason\":\"forbidden\""));
	}
	{
		struct resp r;

		assert_int_equal(http_do(g.port, "POST", "/api/jobs",
					 "Content-Type: text/plain\r\n", "{}", &r), 0);
		assert_int_equal(r.status, 403);
		assert_non_null(strstr(r.body, "\"reason\":\"forbidden\""));
		resp_free(&r);
	}
	assert_int_equal(metric(g.port, NULL, series) - before, 2);
	gw_stop(&g);
}

/* --http-open means nothing without --http: berthd refuses to start and
 * says so, as it does for its other option conflicts. Before, it started
 * and served the socket alone. */
static void options__http_open_without_http__is_refused_naming_http(void **state)
{
	char out[] = "/tmp/berth-http-open-out-XXXXXX";
	const char *const argv[] = {
		getenv("BERTHD"), "--db", "/tmp/berth-http-open-only.db",
		"--socket", "/tmp/berth-http-open-only.sock", "--http-open", NULL,
	};
	int fd = mkstemp(out), status = 0;
	bool exited = false;
	char text[4096] = "";
	pid_t pid;

	assert_true(fd >= 0);
	pid = harness_fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	/* The old berthd served: give it 10 s, then end it. */
	for (int i = 0; !exited && i < 1000; i++) {
		struct timespec ts = {0, 10000000};

		exited = waitpid(pid, &status, WNOHANG) == pid;
		if (!exited)
			nanosleep(&ts, NULL);
	}
	if (!exited) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		status = 0;
	}
	assert_int_equal(pread(fd, text, sizeof text - 1, 0) >= 0, 1);
	close(fd);
	unlink(out);
	unlink("/tmp/berth-http-open-only.db");
	unlink("/tmp/berth-http-open-only.sock");
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
	assert_non_null(strstr(text, "--http-open"));
	assert_non_null(strstr(text, "--http "));
}

/* RFC 9112 3.2.2: a server must accept the absolute form of a request
 * target (GET http://host/path). Its host stands for Host: on
 * --http-open a foreign one is refused, as a foreign Host is. Before,
 * it was answered 400. */
static void conn__an_absolute_form_target__is_served_and_its_host_checked(
	void **state)
{
	char rq[512], buf[8192];
	struct gw g;
	int fd;

	snprintf(rq, sizeof rq, "GET http://127.0.0.1:%d/api/info?x=1 HTTP/1.1\r\n"
		 "Host: 127.0.0.1:%d\r\n" BEARER "Connection: close\r\n\r\n",
		 gw.port, gw.port);
	assert_int_equal(raw_status(rq, buf, sizeof buf), 200);
	assert_non_null(strstr(buf, "\"version\""));
	snprintf(rq, sizeof rq, "GET HTTP://127.0.0.1:%d HTTP/1.1\r\n"
		 "Host: 127.0.0.1:%d\r\nConnection: close\r\n\r\n",
		 gw.port, gw.port);
	assert_int_equal(raw_status(rq, buf, sizeof buf), 200); /* the page */

	assert_int_equal(gw_start(&g, true, NULL), 0);
	fd = http_connect(g.port);
	assert_true(fd >= 0);
	snprintf(rq, sizeof rq, "GET http://evil.example/api/info HTTP/1.1\r\n"
		 "Host: 127.0.0.1:%d\r\nConnection: close\r\n\r\n", g.port);
	assert_int_equal(write(fd, rq, strlen(rq)), (ssize_t)strlen(rq));
	memset(buf, 0, sizeof buf);
	read_all(fd, buf, sizeof buf);
	close(fd);
	assert_non_null(strstr(buf, "HTTP/1.1 403 "));
	gw_stop(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rest__info_and_tools__answer_like_the_socket),
		cmocka_unit_test(rest__approve_decline_resume_cancel__reach_their_status),
		cmocka_unit_test(rest__errors__carry_the_socket_codes_and_fitting_statuses),
		cmocka_unit_test(rest__job_events_with_types__poll_only_those_types),
		cmocka_unit_test(rest__status_lists_with_an_empty_name__are_refused_naming_them),
		cmocka_unit_test(rest__query_members_without_a_value__are_empty_values),
		cmocka_unit_test(rest__escaped_unreserved_characters_in_a_path__are_the_characters),
		cmocka_unit_test(auth__without_credentials__is_refused),
		cmocka_unit_test(auth__login_url__opens_one_session_and_sets_no_cookie),
		cmocka_unit_test(auth__the_login_url__is_a_page_whatever_its_token),
		cmocka_unit_test(auth__an_expired_login_url__opens_nothing_and_a_new_one_is_logged),
		cmocka_unit_test(auth__wrong_tokens__are_throttled_logged_and_counted),
		cmocka_unit_test(auth__http_open__only_on_loopback_and_checks_host),
		cmocka_unit_test(conn__pipelined_requests__are_answered_in_order),
		cmocka_unit_test(conn__a_body_is_not_read_before_the_auth_check),
		cmocka_unit_test(conn__two_content_lengths_that_disagree__get_400),
		cmocka_unit_test(conn__host_missing_or_twice__gets_400),
		cmocka_unit_test(conn__a_head_of_bare_lf_lines__is_answered),
		cmocka_unit_test(conn__expect_100_continue__is_answered_before_the_body),
		cmocka_unit_test(conn__a_client_that_hangs_up__ends_its_event_wait),
		cmocka_unit_test(conn__a_head_must_arrive_within_its_deadline),
		cmocka_unit_test(conn__a_head_sent_a_byte_at_a_time__costs_linear_cpu),
		cmocka_unit_test(conn__dripping_strangers__never_lock_out_the_token),
		cmocka_unit_test(conn__strangers_pipelining_without_reading__hold_themselves),
		cmocka_unit_test(conn__pipelining_past_the_hold__answers_every_request_to_a_reader),
		cmocka_unit_test(conn__past_the_connection_limit__is_refused_with_503),
		cmocka_unit_test(routes__a_wrong_method_gets_405_with_the_routes_allow),
		cmocka_unit_test(routes__head__is_get_without_its_body),
		cmocka_unit_test(sse__reconnect_with_last_event_id__misses_nothing),
		cmocka_unit_test(sse__with_types__sends_only_those_types),
		cmocka_unit_test(metrics__parse_as_prometheus_text),
		cmocka_unit_test(openapi__describes_every_route_and_no_other),
		cmocka_unit_test(auth__bearer_tokens_and_sessions__act_as_their_principals),
		cmocka_unit_test(auth__an_https_origin_naming_this_host__is_the_same_site),
		cmocka_unit_test(rest__a_query_value_or_job_id_not_in_utf8__is_refused_naming_it),
		cmocka_unit_test(auth__logout__ends_the_streams_and_waits_of_its_session),
		cmocka_unit_test(auth__an_ended_session__is_told_so_and_not_throttled),
		cmocka_unit_test(auth__an_expired_session__ends_the_streams_and_waits_it_opened),
		cmocka_unit_test(routes__a_404__names_the_path_as_requested),
		cmocka_unit_test(metrics__a_refusal_of_metrics__is_counted_as_forbidden),
		cmocka_unit_test(auth__a_principal_past_8_sessions__replaces_its_own_oldest),
		cmocka_unit_test(conn__a_hang_up_behind_64_kib_of_pipelined_requests__ends_the_wait),
		cmocka_unit_test(auth__a_session_from_before_a_restart__is_told_so_and_not_throttled),
		cmocka_unit_test(openapi__lists_every_status_the_routes_answer),
		cmocka_unit_test(auth__cross_site_and_host_refusals__say_forbidden_and_are_counted),
		cmocka_unit_test(options__http_open_without_http__is_refused_naming_http),
		cmocka_unit_test(conn__an_absolute_form_target__is_served_and_its_host_checked),
	};

	struct rlimit rl;

	signal(SIGPIPE, SIG_IGN);
	if (getenv("BERTH_TEST_FILTER"))
		cmocka_set_test_filter(getenv("BERTH_TEST_FILTER"));
	/* Room for the connection-limit test, in this process and in the
	 * berthd it starts (which inherits the limit). */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096 &&
	    rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}

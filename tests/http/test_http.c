/*
 * test_http.c: the HTTP gateway against a real berthd: every route, its
 * statuses and errors (the socket's codes and messages), the auth and
 * cross-site rules, the limits, the event stream across a reconnect with
 * Last-Event-ID, /metrics as Prometheus text, and the OpenAPI document
 * against the routes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* ---- REST ------------------------------------------------------------- */

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

/* ---- auth ------------------------------------------------------------- */

static void auth__without_credentials__is_refused(void **state)
{
	struct resp r;

	assert_int_equal(err_code(req(401, "GET", "/api/info", NULL, NULL)),
			 -32010);
	assert_int_equal(err_code(req(401, "GET", "/api/info",
				      "Authorization: Bearer wrong\r\n", NULL)),
			 -32010);
	assert_int_equal(err_code(req(401, "GET", "/metrics", NULL, NULL)),
			 -32010);
	assert_int_equal(err_code(req(401, "GET", "/api/events", NULL, NULL)),
			 -32010);
	/* The page and the API description carry no data. */
	assert_int_equal(http_do(gw.port, "GET", "/", NULL, NULL, &r), 0);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.head, "Content-Security-Policy"));
	resp_free(&r);
	json_decref(req(200, "GET", "/api/openapi.json", NULL, NULL));
}

static void auth__login_url__is_one_time_and_sets_a_session(void **state)
{
	struct resp r;
	char *cookie, hdr[256], hdr2[512];

	assert_int_equal(http_do(gw.port, "GET", gw.login, NULL, NULL, &r), 0);
	assert_int_equal(r.status, 303);
	cookie = resp_header(&r, "Set-Cookie");
	assert_non_null(cookie);
	assert_non_null(strstr(cookie, "HttpOnly"));
	assert_non_null(strstr(cookie, "SameSite=Strict"));
	resp_free(&r);
	/* Spent. */
	assert_int_equal(err_code(req(401, "GET", gw.login, NULL, NULL)), -32010);
	/* The token file's token opens a session too. */
	assert_int_equal(http_do(gw.port, "GET", "/login?token=secret", NULL,
				 NULL, &r), 0);
	assert_int_equal(r.status, 303);
	resp_free(&r);

	snprintf(hdr, sizeof hdr, "Cookie: a=b; %.*s\r\n",
		 (int)strcspn(cookie, ";"), cookie);
	json_decref(req(200, "GET", "/api/info", hdr, NULL));
	/* A state-changing request with a cookie must be JSON... */
	assert_int_equal(err_code(req(403, "POST", "/api/jobs", hdr,
				      "{\"tool\":\"deploy\",\"input\":{}}")),
			 -32010);
	/* ...and not come from another site. */
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
	/* A forged session is no session. */
	assert_int_equal(err_code(req(401, "GET", "/api/info",
		"Cookie: berth_session=0000000000000000000000000000000000000000"
		"000000000000000000000000\r\n", NULL)), -32010);
	free(cookie);
	/* A new login URL was printed. */
	assert_int_equal(gw_login_url(&gw), 0);
	assert_int_equal(http_do(gw.port, "GET", gw.login, NULL, NULL, &r), 0);
	assert_int_equal(r.status, 303);
	resp_free(&r);
}

static void auth__http_open__only_on_loopback_and_checks_host(void **state)
{
	const char *berthd = getenv("BERTHD");
	char cmd[1024];
	struct gw g;
	struct resp r;
	int rc;

	snprintf(cmd, sizeof cmd, "%s --db /tmp/berth-http-never.db --socket "
		 "/tmp/berth-http-never.sock --http 0.0.0.0:0 --http-open "
		 ">/dev/null 2>&1", berthd);
	rc = system(cmd);
	assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) != 0);
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

/* ---- the connection --------------------------------------------------- */

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

/* ---- the event stream ------------------------------------------------- */

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

/* ---- metrics ---------------------------------------------------------- */

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
	assert_true(sample(r.body, "berth_job_completion_seconds_count") >= 1);
	assert_true(sample(r.body, "berth_commit_batch_events_bucket{le=\"+Inf\"}") >= 1);
	assert_true(sample(r.body, "berth_jobs{tool=\"deploy\",status=\"awaiting_approval\"}") >= 1);
	resp_free(&r);
}

/* ---- OpenAPI ---------------------------------------------------------- */

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

/* The gateway holds at most 1024 connections (docs/HTTP.md): the one past
 * them is answered 503 with the socket's -32013 at once and closed, and
 * once the others are gone the gateway serves again. */
static void conn__past_the_connection_limit__is_refused_with_503(void **state)
{
	enum { LIMIT = 1024, MORE = 16 };
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
	for (; n < LIMIT; n++) {
		fds[n] = http_connect(gw.port);
		assert_true(fds[n] >= 0);
	}
	/* Connections are accepted in order: once the gateway holds LIMIT,
	 * the next is refused (more, in case one of the first was). */
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rest__info_and_tools__answer_like_the_socket),
		cmocka_unit_test(rest__approve_decline_resume_cancel__reach_their_status),
		cmocka_unit_test(rest__errors__carry_the_socket_codes_and_fitting_statuses),
		cmocka_unit_test(auth__without_credentials__is_refused),
		cmocka_unit_test(auth__login_url__is_one_time_and_sets_a_session),
		cmocka_unit_test(auth__http_open__only_on_loopback_and_checks_host),
		cmocka_unit_test(conn__pipelined_requests__are_answered_in_order),
		cmocka_unit_test(conn__past_the_connection_limit__is_refused_with_503),
		cmocka_unit_test(sse__reconnect_with_last_event_id__misses_nothing),
		cmocka_unit_test(metrics__parse_as_prometheus_text),
		cmocka_unit_test(openapi__describes_every_route_and_no_other),
	};

	struct rlimit rl;

	/* Room for the connection-limit test, in this process and in the
	 * berthd it starts (which inherits the limit). */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 4096 &&
	    rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}

/*
 * routes.c: the REST routes, the event stream, the page and /metrics.
 *
 * Each REST route is one method of the table (api/methods.c), run on the
 * client's local api connection: the route only gathers params from the
 * path, the query and the body, and turns the JSON-RPC reply into an HTTP
 * response. The params check, the handler and the error (code, message,
 * data) are the socket's own; only the HTTP status is added here.
 *
 *   GET  /api/info                server/info
 *   GET  /api/tools               tools/list        ?cursor=
 *   POST /api/jobs                jobs/submit       body: its params; 201
 *   GET  /api/jobs                jobs/list         ?status=&tool=&runId=&limit=&cursor=
 *   GET  /api/jobs/{id}           jobs/get          ?view=
 *   GET  /api/jobs/{id}/wait      jobs/wait         ?timeoutMs=&until=
 *   GET  /api/jobs/{id}/logs      jobs/logs         ?after=&limit=
 *   GET  /api/jobs/{id}/events    events/poll       ?since=&limit=&waitMs=&types=
 *                                                   (jobId={id})
 *   POST /api/jobs/{id}/ACTION    jobs/ACTION       resume, approve, decline,
 *                                                   cancel, retry; body: params
 *   GET  /api/events              events/subscribe  as Server-Sent Events;
 *                                                   ?since=&jobId=&progress=&types=
 *
 * and the gateway's own: the page (/, /app.js, /style.css, /login,
 * /login.js), /api/openapi.json, /metrics, and /api/session (POST opens
 * a session, DELETE ends it). The table below is the one place that
 * says which methods a route takes (and so what a 405's Allow lists)
 * and whether it needs credentials.
 */
#include "http/internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "api/auth.h"
#include "api/frame.h"
#include "api/local.h"
#include "api/principal.h"
#include "common/utf8.h"
#include "store/jload.h"

/* Query members that are integers in their method's params; every other
 * member is a string, and status, until and types may be lists ("a,b" or
 * repeated). */
static const char *const int_params[] = {"limit", "timeoutMs", "since",
					 "after", "waitMs", NULL};

/* http_status_of returns the HTTP status of a JSON-RPC error: a caller
 * who is known but may not do this (data.reason forbidden,
 * self_approval, not_an_approver) is 403, one not known 401. */
static int http_status_of(int code, const json_t *data)
{
	const char *reason = json_string_value(json_object_get(data, "reason"));

	switch (code) {
	case -32010:
		return reason && strcmp(reason, "unauthenticated") != 0 ? 403
									: 401;
	case -32011: return 404;
	case -32601: return 404;
	case -32012: return 409;
	case -32013: return 503;
	case -32014: return 507;
	case -32603: return 500;
	default: return 400; /* -32700, -32600, -32602 */
	}
}

/* unhex decodes %XX and (in a query) '+' in place. Returns -1 for a
 * malformed escape or an escaped NUL. */
static int unescape(char *s, bool plus)
{
	char *o = s;

	for (; *s; s++) {
		if (*s == '%') {
			int hi, lo;

			if (!isxdigit((unsigned char)s[1]) ||
			    !isxdigit((unsigned char)s[2]))
				return -1;
			hi = isdigit((unsigned char)s[1]) ? s[1] - '0'
							  : (tolower(s[1]) - 'a' + 10);
			lo = isdigit((unsigned char)s[2]) ? s[2] - '0'
							  : (tolower(s[2]) - 'a' + 10);
			if (hi == 0 && lo == 0)
				return -1;
			*o++ = (char)(hi * 16 + lo);
			s += 2;
		} else if (plus && *s == '+') {
			*o++ = ' ';
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
	return 0;
}

/* normalize_path decodes, in place, the escapes of path that stand for
 * unreserved characters (letters, digits, "-", ".", "_", "~"), which name
 * the same resource escaped or not (RFC 3986 6.2.2.2): "/api/%69nfo" is
 * "/api/info". Other escapes ("%2F", a malformed one) are left for the
 * route to judge. */
static void normalize_path(char *path)
{
	char *o = path;

	for (char *s = path; *s; s++) {
		if (s[0] == '%' && isxdigit((unsigned char)s[1]) &&
		    isxdigit((unsigned char)s[2])) {
			char hex[3] = {s[1], s[2], '\0'};
			int ch = (int)strtol(hex, NULL, 16);

			if (ch && (isalnum(ch) || strchr("-._~", ch))) {
				*o++ = (char)ch;
				s += 2;
				continue;
			}
		}
		*o++ = *s;
	}
	*o = '\0';
}

static bool is_int_param(const char *name)
{
	for (int i = 0; int_params[i]; i++)
		if (strcmp(int_params[i], name) == 0)
			return true;
	return false;
}

/* add_list appends the comma-separated names of v to params[name]. An
 * empty name ("a,,b", "a,", or v "") is appended as "", for the method's
 * check to refuse, naming the member, as it refuses any other name it
 * does not know: a list a client builds whose name is empty is a mistake
 * in it (a name left out, or none at all), not a separator to pass over,
 * and dropping it would answer for fewer names than the client wrote
 * (or, for an empty list, for every name). */
static void add_list(json_t *params, const char *name, const char *v)
{
	json_t *arr = json_object_get(params, name);

	if (!json_is_array(arr)) {
		arr = json_array();
		json_object_set_new(params, name, arr);
	}
	for (;;) {
		size_t n = strcspn(v, ",");

		json_array_append_new(arr, json_stringn(v, n));
		v += n;
		if (*v != ',')
			break;
		v++;
	}
}

/* utf8_ok is true when s is UTF-8 throughout, as a JSON string must be:
 * jansson's json_string returns NULL for any other, and setting a member
 * to NULL drops it without a word. */
static bool utf8_ok(const char *s)
{
	size_t n = strlen(s);

	for (size_t i = 0, k; i < n; i += k)
		if (!(k = berth_utf8_seq((const unsigned char *)s + i, n - i)))
			return false;
	return true;
}

/* query_params returns a new object of the query string q (modified in
 * place), or NULL for a malformed one; or NULL with *bad the name of a
 * member whose name or value is not UTF-8 (in q). */
static json_t *query_params(char *q, const char **bad)
{
	json_t *params = json_object();

	while (params && q && *q) {
		char *amp = strchr(q, '&'), *eq, *v;

		if (amp)
			*amp = '\0';
		eq = strchr(q, '=');
		/* A member without "=" has the empty value: the end of
		 * its own name, which unescape may write. */
		v = eq ? eq + 1 : q + strlen(q);
		if (eq)
			*eq = '\0';
		if (unescape(q, true) < 0 || unescape(v, true) < 0) {
			json_decref(params);
			return NULL;
		}
		if (!utf8_ok(q) || !utf8_ok(v)) {
			/* Neither can be a JSON string: refused, naming it,
			 * rather than dropped and answered as if the filter
			 * it is were not there. */
			json_decref(params);
			*bad = q;
			return NULL;
		}
		if (!*q) {
			/* an empty member: ignored */
		} else if (strcmp(q, "status") == 0 || strcmp(q, "until") == 0 ||
			   strcmp(q, "types") == 0) {
			add_list(params, q, v);
		} else if (is_int_param(q) && *v &&
			   strspn(v + (*v == '-'), "0123456789") ==
				   strlen(v + (*v == '-')) && strlen(v) < 19) {
			json_object_set_new(params, q,
					    json_integer(strtoll(v, NULL, 10)));
		} else {
			json_object_set_new(params, q, json_string(v));
		}
		q = amp ? amp + 1 : NULL;
	}
	return params;
}

/* body_params returns the request body as a new object, {} for an empty
 * body, or NULL after answering the error the socket gives for the same
 * line. */
static json_t *body_params(struct http_conn *c)
{
	struct http *h = c->http;
	const char *body = c->buf + c->req.head_len;
	size_t len = c->req.body_len;
	json_error_t jerr;
	json_t *v;
	char text[256];

	if (len == 0)
		return json_object();
	if (api_json_depth(body, len, h->max_depth) > h->max_depth) {
		snprintf(text, sizeof text, "invalid request: JSON nested "
			 "deeper than the limit of %d", h->max_depth);
		http_respond_error(c, 400, -32600, text,
				   json_pack("{s:i}", "limit", h->max_depth));
		return NULL;
	}
	v = store_json_load(body, len, JSON_DECODE_ANY, &jerr);
	if (!v) {
		snprintf(text, sizeof text, "parse error: %s at column %d",
			 jerr.text, jerr.column);
		http_respond_error(c, 400, -32700, text, NULL);
		return NULL;
	}
	if (!json_is_object(v)) {
		json_decref(v);
		http_respond_error(c, 400, -32602, "invalid params: the body "
				   "must be a JSON object (the method's params)",
				   NULL);
		return NULL;
	}
	return v;
}

static size_t pending_bytes(void *arg)
{
	struct http_conn *c = arg;

	return c->state == HC_CLOSING
		       ? 0
		       : uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
}

/* call runs method with params (stolen) on c's local api connection; the
 * reply comes to http_api_message. */
static void call(struct http_conn *c, const char *method, json_t *params,
		 int ok_status)
{
	if (!params) {
		http_respond_error(c, 500, -32603, "out of memory", NULL);
		return;
	}
	if (!c->local) {
		c->local = api_local_open(c->http->api, "http",
					  http_api_message, pending_bytes, c);
		if (!c->local) {
			json_decref(params);
			http_respond_error(c, 503, -32013, "overloaded: berthd "
					   "is stopping", NULL);
			return;
		}
	}
	c->ok_status = ok_status;
	c->want_id = ++c->next_id;
	/* The request runs as the principal of its own credentials: a
	 * kept-alive connection may carry another's next. */
	api_local_as(c->local, c->principal);
	api_local_request(c->local, method, params, c->want_id);
}

/* sse_event writes an events/event notification's Event as one SSE
 * event whose id is its seq, so that EventSource reconnects with
 * Last-Event-ID and misses nothing. */
static void sse_event(struct http_conn *c, json_t *params, bool progress)
{
	json_t *ev = json_copy(params);
	char *text, *frame;
	int n;

	if (!ev) {
		http_conn_close(c);
		return;
	}
	json_object_del(ev, "subscription");
	text = json_dumps(ev, JSON_COMPACT);
	json_decref(ev);
	if (!text) {
		http_conn_close(c);
		return;
	}
	/* json_dumps escapes newlines inside strings, so the text is one
	 * line, as a data: field must be. */
	if (progress)
		n = asprintf(&frame, "event: progress\ndata: %s\n\n", text);
	else
		n = asprintf(&frame, "id: %lld\ndata: %s\n\n",
			     (long long)json_integer_value(
				     json_object_get(params, "seq")),
			     text);
	free(text);
	if (n < 0) {
		http_conn_close(c);
		return;
	}
	http_stream_send(c, frame, (size_t)n);
	free(frame);
}

int http_api_message(void *arg, const json_t *msg)
{
	struct http_conn *c = arg;
	const char *method = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id"), *err, *result;
	char location[200];

	if (c->state == HC_CLOSING)
		return -EPIPE;
	if (method) {
		json_t *params = json_object_get(msg, "params");

		if (c->state != HC_STREAMING)
			return 0;
		if (strcmp(method, "events/event") == 0)
			sse_event(c, params, false);
		else if (strcmp(method, "events/progress") == 0)
			sse_event(c, params, true);
		return c->state == HC_CLOSING ? -EPIPE : 0;
	}
	if (!json_is_integer(id) || json_integer_value(id) != c->want_id ||
	    c->state != HC_HANDLING)
		return 0;
	c->want_id = 0;
	err = json_object_get(msg, "error");
	if (err) {
		int code = (int)json_integer_value(json_object_get(err, "code"));
		int status = http_status_of(code, json_object_get(err, "data"));

		http_respond_json(c, status, json_pack("{s:O}", "error", err),
				  status == 401 ? "WWW-Authenticate: Bearer\r\n"
						: NULL);
		return 0;
	}
	result = json_object_get(msg, "result");
	if (c->sse) {
		http_stream_start(c);
		return 0;
	}
	if (c->ok_status == 201 &&
	    json_string_value(json_object_get(result, "id"))) {
		snprintf(location, sizeof location, "Location: /api/jobs/%.64s\r\n",
			 json_string_value(json_object_get(result, "id")));
		http_respond_json(c, 201, json_incref(result), location);
	} else {
		http_respond_json(c, c->ok_status, json_incref(result), NULL);
	}
	return 0;
}

/* job_action is the method of POST /api/jobs/{id}/ACTION. */
static const char *job_action(const char *action)
{
	static const char *const actions[][2] = {
		{"resume", "jobs/resume"}, {"approve", "jobs/approve"},
		{"decline", "jobs/decline"}, {"cancel", "jobs/cancel"},
		{"retry", "jobs/retry"}, {NULL, NULL},
	};

	for (int i = 0; actions[i][0]; i++)
		if (strcmp(actions[i][0], action) == 0)
			return actions[i][1];
	return NULL;
}

/* ---- the routes --------------------------------------------------------- */

enum {
	M_GET = 1u << 0,
	M_POST = 1u << 1,
	M_DELETE = 1u << 2,
};

typedef void (*route_fn)(struct http_conn *c);

/*
 * struct http_route is one row of the table:
 *   path     the path; "{id}" stands for one path segment, a job's id
 *   action   the segment after the id, or NULL
 *   methods  M_* it answers; any other gets 405 with their Allow
 *   open     true when it needs no credentials (the page and the API's
 *            description carry no data)
 *   handler  answers the request once its body is read
 */
struct http_route {
	const char *path;
	const char *action;
	unsigned methods;
	bool open;
	route_fn handler;
};

static void h_asset(struct http_conn *c);
static void h_metrics(struct http_conn *c);
static void h_info(struct http_conn *c);
static void h_tools(struct http_conn *c);
static void h_jobs(struct http_conn *c);
static void h_events(struct http_conn *c);
static void h_session(struct http_conn *c);
static void h_job(struct http_conn *c);

static const struct http_route asset_route = {NULL, NULL, M_GET, true,
					      h_asset};

static const struct http_route routes[] = {
	{"/metrics", NULL, M_GET, false, h_metrics},
	{"/api/info", NULL, M_GET, false, h_info},
	{"/api/tools", NULL, M_GET, false, h_tools},
	{"/api/jobs", NULL, M_GET | M_POST, false, h_jobs},
	{"/api/events", NULL, M_GET, false, h_events},
	{"/api/session", NULL, M_POST | M_DELETE, false, h_session},
	{"/api/jobs/{id}", NULL, M_GET, false, h_job},
	{"/api/jobs/{id}", "wait", M_GET, false, h_job},
	{"/api/jobs/{id}", "logs", M_GET, false, h_job},
	{"/api/jobs/{id}", "events", M_GET, false, h_job},
	{"/api/jobs/{id}", "resume", M_POST, false, h_job},
	{"/api/jobs/{id}", "approve", M_POST, false, h_job},
	{"/api/jobs/{id}", "decline", M_POST, false, h_job},
	{"/api/jobs/{id}", "cancel", M_POST, false, h_job},
	{"/api/jobs/{id}", "retry", M_POST, false, h_job},
};

/* allow_text writes the methods of mask as an Allow value; HEAD goes
 * wherever GET does (method_bit). */
static const char *allow_text(unsigned mask, char *buf, size_t size)
{
	static const char *const names[] = {"GET, HEAD", "POST", "DELETE"};
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < 3; i++)
		if (mask & (1u << i))
			n += (size_t)snprintf(buf + n, size - n, "%s%s",
					      n ? ", " : "", names[i]);
	return buf;
}

static unsigned method_bit(const char *m)
{
	/* HEAD is GET without the body (RFC 9110 9.3.2; conn.c). */
	if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0)
		return M_GET;
	if (strcmp(m, "POST") == 0)
		return M_POST;
	if (strcmp(m, "DELETE") == 0)
		return M_DELETE;
	return 0;
}

/* route_find finds the route of path (NUL-ended in c->buf) and fills c's
 * request with what the route needs (the asset, the job id, the action).
 * Returns NULL for no route, or &bad (path answered already: malformed). */
static const struct http_route bad_path;

static const struct http_route *route_find(struct http_conn *c, char *path)
{
	static const char jobs[] = "/api/jobs/";
	char *id, *slash;

	c->req.asset = -1;
	for (size_t i = 0; i < http_assets_count; i++) {
		if (strcmp(http_assets[i].path, path) == 0) {
			c->req.asset = (int)i;
			return &asset_route;
		}
	}
	if (strncmp(path, jobs, sizeof jobs - 1) != 0) {
		for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
			if (strcmp(routes[i].path, path) == 0)
				return &routes[i];
		return NULL;
	}
	id = path + sizeof jobs - 1;
	slash = strchr(id, '/');
	if (slash)
		*slash = '\0';
	if (unescape(id, false) < 0 || !*id ||
	    (slash && strchr(slash + 1, '/')))
		return &bad_path;
	c->req.job = (uint32_t)(id - c->buf);
	for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
		const char *action = routes[i].action;

		if (strcmp(routes[i].path, "/api/jobs/{id}") != 0 ||
		    (!action != !slash) || (slash && strcmp(action, slash + 1)))
			continue;
		c->req.action = action;
		return &routes[i];
	}
	return NULL;
}

static void method_not_allowed(struct http_conn *c, unsigned allow)
{
	char list[32], hdr[64], text[200];

	allow_text(allow, list, sizeof list);
	snprintf(hdr, sizeof hdr, "Allow: %s\r\n", list);
	snprintf(text, sizeof text, "method not found: %.16s is not allowed "
		 "here (%s)", http_str(c, c->req.method), list);
	http_respond_json(c, 405, json_pack("{s:{s:i, s:s}}", "error", "code",
					    -32601, "message", text), hdr);
}

/* not_found answers 404 naming path (at most its first 200 bytes), made
 * UTF-8 for the JSON of the message: a byte that is not UTF-8 there is
 * U+FFFD, and the answer a 404 still. */
static void not_found(struct http_conn *c, const char *path)
{
	char *shown = berth_utf8_repair(path, strnlen(path, 200));
	char text[700];

	snprintf(text, sizeof text, "not found: no route %.16s %s",
		 http_str(c, c->req.method), shown ? shown : "");
	free(shown);
	http_respond_error(c, 404, -32601, text, NULL);
}

/* not_utf8 answers a request with a param that is not UTF-8 (name: a
 * query member's, or "id" for the job's id in the path), which no JSON
 * string holds: 400 with the socket's -32602 naming the member, as the
 * socket's params check names a member of the wrong type. */
static void not_utf8(struct http_conn *c, const char *name, bool in_name)
{
	char *shown = berth_utf8_repair(name, strnlen(name, 100));
	char msg[400], text[500], ptr[320];

	if (!shown) {
		http_respond_error(c, 500, -32603, "out of memory", NULL);
		return;
	}
	snprintf(ptr, sizeof ptr, "/%s", shown);
	if (in_name)
		snprintf(msg, sizeof msg, "the name of the query parameter "
			 "%s is not UTF-8", shown);
	else
		snprintf(msg, sizeof msg, "%s is not UTF-8", shown);
	free(shown);
	snprintf(text, sizeof text, "invalid params: %s", msg);
	http_respond_error(c, 400, -32602, text,
			   json_pack("{s:[{s:s, s:s, s:s}]}", "errors",
				     "instancePath", ptr, "keyword", "type",
				     "message", msg));
}

/* refuse_auth answers a request whose credentials (auth) are not enough,
 * and returns -1. */
static int refuse_auth(struct http_conn *c, int auth)
{
	const char *msg;

	switch (auth) {
	case HTTP_AUTH_THROTTLED: {
		char text[160];

		snprintf(text, sizeof text, "unauthorized: too many failed "
			 "logins lately; try again in %lld ms",
			 (long long)c->retry_ms);
		c->auth_failures++;
		if (c->auth_failures >= HTTP_AUTH_TRIES)
			c->keep_alive = false;
		api_refused(c->http->api, API_REFUSED_UNAUTHENTICATED);
		http_respond_error(c, 429, -32010, text,
				   json_pack("{s:I, s:s}", "retryAfterMs",
					     (json_int_t)c->retry_ms, "reason",
					     "unauthenticated"));
		return -1;
	}
	case HTTP_AUTH_WRONG:
		msg = "unauthorized: wrong token";
		c->auth_failures++;
		break;
	case HTTP_AUTH_EXPIRED:
		msg = "unauthorized: this login link expired or was used "
		      "already; berthd logged a new one";
		break;
	case HTTP_AUTH_ENDED:
		msg = "unauthorized: this session ended (logged out, expired, "
		      "or replaced by a newer one); log in again";
		break;
	case HTTP_AUTH_UNKNOWN:
		msg = "unauthorized: this session ended or is unknown (berthd "
		      "may have restarted); log in again";
		break;
	case HTTP_AUTH_LOGIN:
		msg = "unauthorized: a login link's token only opens a "
		      "session (POST /api/session)";
		break;
	default:
		msg = "unauthorized: send Authorization: Bearer TOKEN (a "
		      "principal's token, the --token-file token, or a "
		      "session's), or open the login URL berthd logged";
		break;
	}
	if (c->auth_failures >= HTTP_AUTH_TRIES)
		c->keep_alive = false;
	/* The socket's refusal, word for word, and counted as it is. */
	api_refused(c->http->api, API_REFUSED_UNAUTHENTICATED);
	http_respond_error(c, 401, -32010, msg,
			   json_pack("{s:s}", "reason", "unauthenticated"));
	return -1;
}

/* refuse_forbidden answers 403 -32010 with message msg for a request
 * refused for where it comes from (another site, a foreign Host), with
 * data.reason "forbidden" and counted as every refusal is. */
static void refuse_forbidden(struct http_conn *c, const char *msg)
{
	api_refused(c->http->api, API_REFUSED_FORBIDDEN);
	http_respond_error(c, 403, -32010, msg,
			   json_pack("{s:s}", "reason", "forbidden"));
}

int http_route_head(struct http_conn *c)
{
	const char *m = http_str(c, c->req.method);
	char *path = c->buf + c->req.target, *query = strchr(path, '?');
	const struct http_route *r;
	unsigned bit = method_bit(m);
	const char *why;
	int auth = HTTP_AUTH_NONE;
	char asked[201];

	c->req.query = 0;
	c->req.job = 0;
	c->req.action = NULL;
	c->session = NULL;
	if (query) {
		*query++ = '\0';
		c->req.query = (uint32_t)(query - c->buf);
	}
	/* The path as requested, for a 404: route_find cuts and decodes
	 * it in place. */
	snprintf(asked, sizeof asked, "%s", path);
	if (!http_host_ok(c)) {
		refuse_forbidden(c, "forbidden: this Host is not the loopback "
				 "address an --http-open gateway serves");
		return -1;
	}
	normalize_path(path);
	r = route_find(c, path);
	if (r == &bad_path) {
		http_respond_error(c, 400, -32600, "invalid request: a "
				   "malformed path", NULL);
		return -1;
	}
	if (!r) {
		not_found(c, asked);
		return -1;
	}
	if (!r->open) {
		auth = http_auth_check(c);
		if (auth == HTTP_AUTH_LOGIN &&
		    !(r->handler == h_session && bit == M_POST))
			return refuse_auth(c, auth);
		if (auth != HTTP_AUTH_OPEN && auth != HTTP_AUTH_BEARER &&
		    auth != HTTP_AUTH_SESSION && auth != HTTP_AUTH_LOGIN)
			return refuse_auth(c, auth);
		http_conn_trust(c);
	}
	c->auth = auth;
	c->req.route = r;
	if (!(r->methods & bit)) {
		method_not_allowed(c, r->methods);
		return -1;
	}
	if (bit != M_GET && !http_csrf_ok(c, auth, &why)) {
		refuse_forbidden(c, why);
		return -1;
	}
	return 0;
}

void http_route(struct http_conn *c)
{
	c->req.route->handler(c);
}

/* query_of returns the request's query as a new object, or NULL after
 * answering 400. */
static json_t *query_of(struct http_conn *c)
{
	const char *bad = NULL;
	json_t *q = query_params(c->req.query ? c->buf + c->req.query : NULL,
				 &bad);

	if (!q && bad)
		not_utf8(c, bad, !utf8_ok(bad));
	else if (!q)
		http_respond_error(c, 400, -32600, "invalid request: a "
				   "malformed query string", NULL);
	return q;
}

static void h_asset(struct http_conn *c)
{
	static const char csp[] =
		"Content-Security-Policy: default-src 'self'; img-src 'self' "
		"data:; style-src 'self'; script-src 'self'; connect-src "
		"'self'; frame-ancestors 'none'; base-uri 'none'; form-action "
		"'self'\r\n";
	const struct http_asset *a = &http_assets[c->req.asset];

	http_respond(c, 200, a->content_type,
		     strncmp(a->content_type, "text/html", 9) == 0 ? csp : NULL,
		     a->data, a->len);
}

static void h_metrics(struct http_conn *c)
{
	size_t len;
	char *text;

	/* The metrics name tools and principals: reading them is reading. */
	if (!c->principal || !(c->principal->roles & BERTH_ROLE_READ)) {
		char msg[160];

		snprintf(msg, sizeof msg, "forbidden: %.64s may not read "
			 "/metrics, which needs the role read",
			 c->principal ? c->principal->name : "?");
		/* Counted as the socket counts its refusals. */
		api_refused(c->http->api, API_REFUSED_FORBIDDEN);
		http_respond_error(c, 403, -32010, msg,
				   json_pack("{s:s, s:s, s:s}", "reason",
					     "forbidden", "principal",
					     c->principal ? c->principal->name
							  : "?",
					     "role", "read"));
		return;
	}
	text = http_metrics_render(c->http->metrics, &len);
	if (!text) {
		http_respond_error(c, 500, -32603, "out of memory", NULL);
		return;
	}
	http_respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", NULL,
		     text, len);
	free(text);
}

static void h_info(struct http_conn *c)
{
	json_t *q = query_of(c);

	if (q)
		call(c, "server/info", q, 200);
}

static void h_tools(struct http_conn *c)
{
	json_t *q = query_of(c);

	if (q)
		call(c, "tools/list", q, 200);
}

static void h_jobs(struct http_conn *c)
{
	json_t *params;

	if (method_bit(http_str(c, c->req.method)) == M_GET) {
		if ((params = query_of(c)))
			call(c, "jobs/list", params, 200);
		return;
	}
	params = body_params(c);
	if (params)
		call(c, "jobs/submit", params, 201);
}

static void h_events(struct http_conn *c)
{
	const char *last = http_header_get(c, "Last-Event-ID");
	json_t *params = query_of(c), *progress;

	if (!params)
		return;
	progress = json_object_get(params, "progress");
	/* EventSource sends the id of the last event it had when it
	 * reconnects (the page's reader does the same); that overrides the
	 * since of the first URL. */
	if (last && *last && strspn(last, "0123456789") == strlen(last) &&
	    strlen(last) < 19)
		json_object_set_new(params, "since",
				    json_integer(strtoll(last, NULL, 10)));
	if (json_is_string(progress))
		json_object_set_new(params, "progress",
				    json_boolean(strcmp(json_string_value(
						 progress), "0") != 0 &&
						 strcmp(json_string_value(
						 progress), "false") != 0));
	c->sse = true;
	call(c, "events/subscribe", params, 200);
}

static void h_session(struct http_conn *c)
{
	char sid[HTTP_SESSION_LEN + 1], at[64];
	int64_t expires;
	time_t secs;
	struct tm tm;

	if (method_bit(http_str(c, c->req.method)) == M_DELETE) {
		const struct http_session *ended;

		if (http_session_close(c, &ended) < 0) {
			http_respond_error(c, 400, -32600, "invalid request: "
					   "this request carries no session "
					   "to end", NULL);
			return;
		}
		/* The logout is answered before the streams and waits of
		 * the session are closed, so that a page that logs out
		 * hears that first as a rule (both in this loop turn). */
		http_respond(c, 204, "text/plain", NULL, NULL, 0);
		http_conn_end_session(c->http, ended);
		return;
	}
	if (http_session_open(c, c->auth, sid, &expires) < 0) {
		http_respond_error(c, 500, -32603, "cannot read random bytes",
				   NULL);
		return;
	}
	secs = (time_t)(expires / 1000);
	gmtime_r(&secs, &tm);
	snprintf(at, sizeof at, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min, tm.tm_sec, (int)(expires % 1000));
	http_respond_json(c, 201, json_pack("{s:s, s:s}", "session", sid,
					    "expiresAt", at), NULL);
	memset(sid, 0, sizeof sid);
}

/* h_job answers /api/jobs/{id} and its actions. */
static void h_job(struct http_conn *c)
{
	const char *id = c->buf + c->req.job, *action = c->req.action;
	json_t *params;

	if (!utf8_ok(id)) {
		/* No job's id: refused as the socket refuses an id that
		 * is not one (400, naming it), not dropped, which would
		 * answer "id is required" to a client that sent one. */
		not_utf8(c, "id", false);
		return;
	}
	if (!action || strcmp(action, "wait") == 0 ||
	    strcmp(action, "logs") == 0 || strcmp(action, "events") == 0) {
		params = query_of(c);
		if (!params)
			return;
		if (action && strcmp(action, "events") == 0) {
			json_t *wait = json_object_get(params, "waitMs");

			json_object_set_new(params, "jobId", json_string(id));
			if (!json_object_get(params, "limit"))
				json_object_set_new(params, "limit",
						    json_integer(1000));
			/* A poll that may wait ends, as jobs/wait does, when
			 * its client hangs up: by type it may wait long
			 * past events of the other types. */
			if (json_integer_value(wait) > 0)
				c->long_poll = true;
			call(c, "events/poll", params, 200);
			return;
		}
		json_object_set_new(params, "id", json_string(id));
		if (!action) {
			call(c, "jobs/get", params, 200);
		} else if (strcmp(action, "wait") == 0) {
			c->long_poll = true;
			call(c, "jobs/wait", params, 200);
		} else {
			call(c, "jobs/logs", params, 200);
		}
		return;
	}
	params = body_params(c);
	if (!params)
		return;
	json_object_set_new(params, "id", json_string(id));
	call(c, job_action(action), params, 200);
}

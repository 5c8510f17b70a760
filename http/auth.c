/*
 * auth.c: who may use the gateway, and from where.
 *
 * - Without --http-open every /api route but the page's and /metrics
 *   needs "Authorization: Bearer TOKEN", where TOKEN is a principal's
 *   token (--principals, or --token-file's: checked by the api,
 *   api_auth_check, the same check as the socket's server/auth) or a
 *   session's. A request acts as that principal, with its roles; a
 *   session as the principal that opened it.
 * - A session comes from the login URL berthd logs: /login#T, whose
 *   token T is in the fragment, which a browser never sends anywhere.
 *   The login page posts it to /api/session as a Bearer token and keeps
 *   the session it gets in sessionStorage, which belongs to this origin
 *   (scheme, host and port) alone, and sends it as a Bearer token on
 *   every request and on the event stream. No cookie is set or read: a
 *   browser sends a host's cookies to every port of that host, so a
 *   cookie would reach any other server on 127.0.0.1. T is good once and
 *   for HTTP_LOGIN_MS; opening a used or expired one logs a new URL.
 *   Credentials are looked at on a request's head only, so a session's
 *   end (logout, its place taken, expiry) also closes the connections
 *   of the event streams and waits it opened (conn.c): they would go on
 *   serving whoever held it.
 * - Guessing: a token that is none of these is logged with the peer's
 *   address and counted (api_auth_failed), and the api's throttle
 *   (api_auth_gate) refuses further tokens from that peer unchecked for
 *   a while (429). A session is looked up before the throttle: its 256
 *   random bits cannot be guessed, and a person with the page open is not
 *   locked out by someone else's guesses.
 * - Sessions live in memory only, and end when berthd stops. A session
 *   id has a shape of its own ("berth-session-" and 64 hex digits), so
 *   that a page left open across a restart, whose session this berthd
 *   never gave, is told that its session ended rather than counted as a
 *   guess: a few open tabs would otherwise throttle all of loopback,
 *   --token-file's token with it. Guessing tokens of that shape finds no
 *   session (256 random bits); one that is a principal's token too is
 *   judged behind the throttle as every token is.
 * - --http-open drops authentication, and is refused unless the gateway
 *   listens on a loopback address. It then also checks Host, so that a
 *   web page that rebinds its own DNS name to 127.0.0.1 cannot talk to it.
 * - Cross-site requests: a state-changing request (POST, DELETE) is
 *   refused when its Origin (or Sec-Fetch-Site) says it comes from
 *   another site (an Origin is this site when its host and port are the
 *   Host's, over http or, through a TLS proxy, https), and, unless it
 *   carries a token (which a cross-site page cannot set without a CORS
 *   preflight the gateway never grants), it must be Content-Type
 *   application/json for the same reason. Pages may not be framed.
 */
#include "log/log.h"
#include "http/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "api/auth.h"

int http_random_hex(char *out, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char raw[64];

	if (n > sizeof raw)
		return -EINVAL;
	if (getrandom(raw, n, 0) != (ssize_t)n)
		return -EIO;
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[raw[i] >> 4];
		out[2 * i + 1] = hex[raw[i] & 15];
	}
	out[2 * n] = '\0';
	return 0;
}

/* equal_ct compares in time that depends only on known's length. */
static bool equal_ct(const char *given, size_t glen, const char *known,
		     size_t klen)
{
	unsigned char diff = glen != klen;

	for (size_t i = 0; i < klen; i++)
		diff |= (unsigned char)(known[i] ^ (i < glen ? given[i] : 0));
	return diff == 0;
}

/* new_login_token makes the login URL's token and its expiry. */
static int new_login_token(struct http *h)
{
	int rc = http_random_hex(h->login_token, 32);

	if (rc < 0)
		h->login_token[0] = '\0';
	h->login_expires = uv_now(h->loop) + (uint64_t)h->login_ms;
	return rc;
}

void http_login_url(struct http *h, const char *why)
{
	long long ms = (long long)h->login_ms;

	if (!h->login_token[0])
		return;
	if (ms % 60000 == 0)
		log_info("http: %slog in at %s/login#%s (once, within %lld "
			 "minutes)", why ? why : "", h->origin, h->login_token,
			 ms / 60000);
	else
		log_info("http: %slog in at %s/login#%s (once, within %lld "
			 "ms)", why ? why : "", h->origin, h->login_token, ms);
}

int http_auth_init(struct http *h, char **errmsg)
{
	const char *e = getenv("BERTH_HTTP_LOGIN_MS");

	h->login_ms = e ? strtoll(e, NULL, 10) : 0;
	if (h->login_ms <= 0)
		h->login_ms = HTTP_LOGIN_MS;
	e = getenv("BERTH_HTTP_SESSION_MS");
	h->session_ms = e ? strtoll(e, NULL, 10) : 0;
	if (h->session_ms <= 0)
		h->session_ms = HTTP_SESSION_MS;
	if (new_login_token(h) < 0) {
		*errmsg = strdup("cannot read random bytes for the login URL");
		return -EIO;
	}
	return 0;
}

void http_auth_finish(struct http *h)
{
	memset(h->login_token, 0, sizeof h->login_token);
	memset(h->spent_token, 0, sizeof h->spent_token);
	memset(h->sessions, 0, sizeof h->sessions);
}

/* find_session returns the live session whose id is token, or NULL, and
 * sets *ended (when not NULL) when token is a session's that ended:
 * logged out or replaced (a slot's last), or expired (a slot's still). A
 * page left open, or a second tab, sends such a one: it is no guess, and
 * must not count toward the throttle that all of loopback shares. Each
 * slot is compared in full, so the time taken tells nothing. */
static struct http_session *find_session(struct http *h, const char *token,
					 size_t len, bool *ended)
{
	struct http_session *found = NULL;
	uint64_t now = uv_now(h->loop);
	bool gone = false;

	for (int i = 0; i < HTTP_MAX_SESSIONS; i++) {
		struct http_session *s = &h->sessions[i];

		if (s->id[0] && equal_ct(token, len, s->id, HTTP_SESSION_LEN)) {
			if (s->expires > now)
				found = s;
			else
				gone = true;
		}
		if (s->ended[0] &&
		    equal_ct(token, len, s->ended, HTTP_SESSION_LEN))
			gone = true;
	}
	if (ended)
		*ended = gone;
	return found;
}

/* session_shaped is true when token (len bytes) has the shape of a
 * session's id, HTTP_SESSION_PREFIX and 64 lowercase hex digits. */
static bool session_shaped(const char *token, size_t len)
{
	size_t n = sizeof HTTP_SESSION_PREFIX - 1;

	if (len != HTTP_SESSION_LEN || memcmp(token, HTTP_SESSION_PREFIX, n) != 0)
		return false;
	for (size_t i = n; i < len; i++)
		if (!((token[i] >= '0' && token[i] <= '9') ||
		      (token[i] >= 'a' && token[i] <= 'f')))
			return false;
	return true;
}

int http_auth_check(struct http_conn *c)
{
	struct http *h = c->http;
	struct api *api = h->api;
	const char *auth = http_header_get(c, "Authorization");
	const char *t;
	size_t len;
	uint64_t now = uv_now(h->loop);
	char what[96];
	struct http_session *s;
	bool ended = false;

	c->principal = NULL;
	c->session = NULL;
	if (h->cfg.open) {
		c->principal = api_auth_anonymous(api);
		return c->principal ? HTTP_AUTH_OPEN : HTTP_AUTH_NONE;
	}
	if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
		return HTTP_AUTH_NONE;
	for (t = auth + 7; *t == ' '; t++)
		;
	len = strlen(t);
	if (len && (s = find_session(h, t, len, &ended))) {
		c->principal = s->principal;
		c->session = s;
		c->session_gen = s->gen;
		c->session_expires = s->expires;
		return HTTP_AUTH_SESSION;
	}
	if (ended)
		return HTTP_AUTH_ENDED;
	/* A session's shape, of no session here: one from before a restart.
	 * Unless it is a principal's token too (a person may have chosen
	 * one like it), which is judged as every token is, behind the
	 * throttle. */
	if (session_shaped(t, len) &&
	    api_auth_check(api, t, len, &c->principal) != 0) {
		c->principal = NULL;
		return HTTP_AUTH_UNKNOWN;
	}
	c->principal = NULL;
	if (api_auth_gate(api, (const struct sockaddr *)&c->peer,
			  API_AUTH_VIA_HTTP, &c->retry_ms) < 0)
		return HTTP_AUTH_THROTTLED;
	if (api_auth_check(api, t, len, &c->principal) == 0)
		return HTTP_AUTH_BEARER;
	if (h->login_token[0] &&
	    equal_ct(t, len, h->login_token, strlen(h->login_token))) {
		/* The login URL is in berthd's log: whoever reads it is
		 * berthd's own user. */
		c->principal = api_auth_owner(api);
		if (h->login_expires > now && c->principal)
			return HTTP_AUTH_LOGIN;
		/* It expired: a fresh URL for the person who opened this
		 * one (berthd's log is where they found it). */
		memcpy(h->spent_token, h->login_token, sizeof h->spent_token);
		if (new_login_token(h) == 0)
			http_login_url(h, "the login URL expired; ");
		return HTTP_AUTH_EXPIRED;
	}
	if (h->spent_token[0] &&
	    equal_ct(t, len, h->spent_token, strlen(h->spent_token)))
		return HTTP_AUTH_EXPIRED; /* someone's old link: no guess */
	snprintf(what, sizeof what, "Bearer token on %.16s %.60s",
		 http_str(c, c->req.method), http_str(c, c->req.target));
	api_auth_failed(api, (const struct sockaddr *)&c->peer,
			API_AUTH_VIA_HTTP, what);
	return HTTP_AUTH_WRONG;
}

int http_session_open(struct http_conn *c, int auth,
		      char sid[HTTP_SESSION_LEN + 1], int64_t *expires)
{
	struct http *h = c->http;
	struct http_session *slot = &h->sessions[0];
	uint64_t now = uv_now(h->loop);
	struct timespec ts;
	struct http_session *own = NULL;
	int owned = 0;

	memcpy(sid, HTTP_SESSION_PREFIX, sizeof HTTP_SESSION_PREFIX - 1);
	if (http_random_hex(sid + sizeof HTTP_SESSION_PREFIX - 1, 32) < 0)
		return -1;
	/* The principal's oldest when it has its share already (a
	 * principal's sessions never take another's place, internal.h);
	 * else a free or expired slot, else the one that expires first.
	 * Every session lasts as long, so the one that expires first is the
	 * one opened first: gen tells, where expires (in ms) may be the
	 * same for sessions opened in one millisecond. */
	for (int i = 0; i < HTTP_MAX_SESSIONS; i++) {
		struct http_session *s = &h->sessions[i];

		if (s->id[0] && s->expires > now &&
		    s->principal == c->principal) {
			owned++;
			if (!own || s->gen < own->gen)
				own = s;
		}
	}
	if (owned >= HTTP_PRINCIPAL_SESSIONS) {
		slot = own;
	} else {
		for (int i = 0; i < HTTP_MAX_SESSIONS; i++) {
			struct http_session *s = &h->sessions[i];

			if (!s->id[0] || s->expires <= now) {
				slot = s;
				break;
			}
			if (s->gen < slot->gen)
				slot = s;
		}
	}
	/* The session whose place this takes ends, with what it opened. */
	if (slot->id[0]) {
		http_conn_end_session(h, slot);
		memcpy(slot->ended, slot->id, sizeof slot->ended);
	}
	memcpy(slot->id, sid, sizeof slot->id);
	slot->expires = now + (uint64_t)h->session_ms;
	slot->gen = ++h->session_gen;
	slot->principal = c->principal;
	clock_gettime(CLOCK_REALTIME, &ts);
	*expires = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 +
		   h->session_ms;
	if (auth == HTTP_AUTH_LOGIN) {
		memcpy(h->spent_token, h->login_token, sizeof h->spent_token);
		if (new_login_token(h) == 0)
			http_login_url(h, "the login URL was used; ");
	}
	return 0;
}

int http_session_close(struct http_conn *c, const struct http_session **ended)
{
	const char *auth = http_header_get(c, "Authorization");
	struct http_session *s;
	const char *t;

	if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
		return -1;
	for (t = auth + 7; *t == ' '; t++)
		;
	s = find_session(c->http, t, strlen(t), NULL);
	if (!s)
		return -1;
	/* Free, with its gen kept: that tells the connections it opened. */
	memcpy(s->ended, s->id, sizeof s->ended);
	memset(s->id, 0, sizeof s->id);
	s->expires = 0;
	s->principal = NULL;
	*ended = s;
	return 0;
}

/* authority_eq compares two authorities (HOST[:PORT]) as the same
 * server of a scheme whose default port is port: "host" and "host:443"
 * are one for https, as "host" and "host:80" are for http. A browser
 * leaves the default port out of Origin; a client or proxy may write it
 * in Host. */
static bool authority_eq(const char *a, const char *b, const char *port)
{
	size_t la = strlen(a), lb = strlen(b), lp = strlen(port);

	if (la > lp && strcasecmp(a + la - lp, port) == 0)
		la -= lp;
	if (lb > lp && strcasecmp(b + lb - lp, port) == 0)
		lb -= lp;
	return la == lb && strncasecmp(a, b, la) == 0;
}

/* same_host is true when origin ("http://HOST[:PORT]", or https) names the
 * Host the request was sent to. An https:// Origin comes through a TLS
 * reverse proxy that keeps Host (docs/HTTP.md): the browser's origin is
 * the proxy's, whose host and port are the ones the request names. A
 * page of another scheme, host or port is another site. */
static bool same_host(const char *origin, const char *host)
{
	static const struct {
		const char *scheme, *port;
	} schemes[] = {{"http://", ":80"}, {"https://", ":443"}};

	if (!host)
		return false;
	for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
		size_t n = strlen(schemes[i].scheme);

		if (strncasecmp(origin, schemes[i].scheme, n) == 0)
			return authority_eq(origin + n, host, schemes[i].port);
	}
	return false;
}

bool http_csrf_ok(struct http_conn *c, int auth, const char **why)
{
	const char *origin = http_header_get(c, "Origin");
	const char *site = http_header_get(c, "Sec-Fetch-Site");
	const char *type = http_header_get(c, "Content-Type");

	if (origin && !same_host(origin, http_request_host(c))) {
		*why = "forbidden: a cross-site request (its Origin is not "
		       "this server)";
		return false;
	}
	if (site && strcasecmp(site, "same-origin") != 0 &&
	    strcasecmp(site, "none") != 0) {
		*why = "forbidden: a cross-site request (Sec-Fetch-Site)";
		return false;
	}
	if (auth == HTTP_AUTH_OPEN &&
	    !(type && strncasecmp(type, "application/json", 16) == 0)) {
		*why = "forbidden: a state-changing request must be "
		       "Content-Type: application/json";
		return false;
	}
	return true;
}

bool http_host_ok(struct http_conn *c)
{
	const char *host = http_request_host(c);
	const char *port = strrchr(c->http->origin, ':');
	static const char *const names[] = {"127.0.0.1", "localhost", "[::1]",
					    NULL};

	if (!c->http->cfg.open)
		return true;
	if (!host || !port)
		return false;
	if (same_host(c->http->origin, host))
		return true;
	for (int i = 0; names[i]; i++) {
		size_t n = strlen(names[i]);

		if (strncasecmp(host, names[i], n) == 0 &&
		    (host[n] == '\0' || strcmp(host + n, port) == 0))
			return true;
	}
	return false;
}

/*
 * auth.c: who may use the gateway, and from where.
 *
 * - Without --http-open every /api route and /metrics needs either the
 *   token of --token-file as "Authorization: Bearer TOKEN", or a session
 *   cookie. A session comes from the login URL berthd prints at start:
 *   GET /login?token=T with its one-time token (as Jupyter does) sets an
 *   HttpOnly, SameSite=Strict cookie. The --token-file token opens a
 *   session the same way. The one-time token is spent by its first use
 *   and a new URL is printed.
 * - --http-open drops authentication, and is refused unless the gateway
 *   listens on a loopback address. It then also checks Host, so that a
 *   web page that rebinds its own DNS name to 127.0.0.1 cannot talk to it.
 * - Cross-site requests: a state-changing request (POST) is refused when
 *   its Origin (or Sec-Fetch-Site) says it comes from another site, and,
 *   unless it carries a Bearer token, it must be Content-Type
 *   application/json: a cross-site page can send that only after a CORS
 *   preflight, which the gateway never grants. The session cookie is
 *   SameSite=Strict besides, and pages may not be framed.
 */
#include "log/log.h"
#include "http/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

#define MAX_TOKEN 4096

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

static int read_token(struct http *h, const char *path, char **errmsg)
{
	char buf[MAX_TOKEN + 1];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || (n = read(fd, buf, MAX_TOKEN)) < 0) {
		if (asprintf(errmsg, "cannot read the token file %s: %s", path,
			     strerror(errno)) < 0)
			*errmsg = NULL;
		if (fd >= 0)
			close(fd);
		return -EINVAL;
	}
	close(fd);
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	n = (ssize_t)strlen(buf);
	while (n > 0 && (buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		buf[--n] = '\0';
	if (n == 0) {
		if (asprintf(errmsg, "the token file %s is empty", path) < 0)
			*errmsg = NULL;
		return -EINVAL;
	}
	h->token = strdup(buf);
	h->token_len = (size_t)n;
	memset(buf, 0, sizeof buf);
	return h->token ? 0 : -ENOMEM;
}

int http_auth_init(struct http *h, char **errmsg)
{
	int rc;

	if (h->cfg.token_file) {
		rc = read_token(h, h->cfg.token_file, errmsg);
		if (rc < 0)
			return rc;
	}
	return http_random_hex(h->login_token, 32);
}

void http_auth_finish(struct http *h)
{
	if (h->token)
		memset(h->token, 0, h->token_len);
	free(h->token);
	h->token = NULL;
	memset(h->login_token, 0, sizeof h->login_token);
	memset(h->sessions, 0, sizeof h->sessions);
}

int http_login(struct http *h, const char *token, char sid[65])
{
	size_t len = token ? strlen(token) : 0;
	bool one_time = len && equal_ct(token, len, h->login_token,
					strlen(h->login_token));
	bool file = len && h->token && equal_ct(token, len, h->token,
						h->token_len);
	struct http_session *slot = &h->sessions[0];
	uint64_t now = uv_now(h->loop);

	if (!one_time && !file)
		return -1;
	if (http_random_hex(sid, 32) < 0)
		return -1;
	/* A free or expired slot, else the one that expires first. */
	for (int i = 0; i < HTTP_MAX_SESSIONS; i++) {
		struct http_session *s = &h->sessions[i];

		if (!s->id[0] || s->expires <= now) {
			slot = s;
			break;
		}
		if (s->expires < slot->expires)
			slot = s;
	}
	memcpy(slot->id, sid, 65);
	slot->expires = now + HTTP_SESSION_MS;
	if (one_time) {
		if (http_random_hex(h->login_token, 32) == 0)
			log_info("http: the login URL was used; "
				 "the next one is %s/login?token=%s",
				h->origin, h->login_token);
		else
			h->login_token[0] = '\0';
	}
	return 0;
}

/* cookie_session returns the value of the berth_session cookie, copied
 * into out, or NULL. */
static const char *cookie_session(const char *cookie, char out[65])
{
	static const char name[] = "berth_session=";

	while (cookie && *cookie) {
		size_t n;

		while (*cookie == ' ' || *cookie == ';')
			cookie++;
		n = strcspn(cookie, ";");
		if (n > sizeof name - 1 && n - (sizeof name - 1) < 65 &&
		    strncmp(cookie, name, sizeof name - 1) == 0) {
			memcpy(out, cookie + sizeof name - 1,
			       n - (sizeof name - 1));
			out[n - (sizeof name - 1)] = '\0';
			return out;
		}
		cookie += n;
	}
	return NULL;
}

int http_auth_check(struct http_conn *c)
{
	struct http *h = c->http;
	const char *auth = http_header_get(c, "Authorization");
	char sid[65];
	uint64_t now = uv_now(h->loop);

	if (h->cfg.open)
		return HTTP_AUTH_OPEN;
	if (auth && strncasecmp(auth, "Bearer ", 7) == 0 && h->token) {
		const char *t = auth + 7;

		while (*t == ' ')
			t++;
		if (equal_ct(t, strlen(t), h->token, h->token_len))
			return HTTP_AUTH_BEARER;
	}
	if (cookie_session(http_header_get(c, "Cookie"), sid)) {
		for (int i = 0; i < HTTP_MAX_SESSIONS; i++) {
			struct http_session *s = &h->sessions[i];

			if (s->id[0] && s->expires > now &&
			    equal_ct(sid, strlen(sid), s->id, 64))
				return HTTP_AUTH_COOKIE;
		}
	}
	return HTTP_AUTH_NONE;
}

/* same_host is true when origin ("http://HOST[:PORT]") names the Host the
 * request was sent to. */
static bool same_host(const char *origin, const char *host)
{
	static const char scheme[] = "http://";

	if (!host || strncasecmp(origin, scheme, sizeof scheme - 1) != 0)
		return false;
	return strcasecmp(origin + sizeof scheme - 1, host) == 0;
}

bool http_csrf_ok(struct http_conn *c, int auth, const char **why)
{
	const char *origin = http_header_get(c, "Origin");
	const char *site = http_header_get(c, "Sec-Fetch-Site");
	const char *type = http_header_get(c, "Content-Type");

	if (origin && !same_host(origin, http_header_get(c, "Host"))) {
		*why = "forbidden: a cross-site request (its Origin is not "
		       "this server)";
		return false;
	}
	if (site && strcasecmp(site, "same-origin") != 0 &&
	    strcasecmp(site, "none") != 0) {
		*why = "forbidden: a cross-site request (Sec-Fetch-Site)";
		return false;
	}
	if (auth != HTTP_AUTH_BEARER &&
	    !(type && strncasecmp(type, "application/json", 16) == 0)) {
		*why = "forbidden: a state-changing request must be "
		       "Content-Type: application/json";
		return false;
	}
	return true;
}

bool http_host_ok(struct http_conn *c)
{
	const char *host = http_header_get(c, "Host");
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

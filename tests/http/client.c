/*
 * client.c: the tests' HTTP client and gateway start-up (client.h).
 */
#include "tests/http/client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

/* read_log returns berthd's log (malloc'd). */
static char *read_log(struct gw *g)
{
	FILE *f = fopen(g->h.log, "r");
	char *s;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	s = calloc(1, (size_t)n + 1);
	if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
		free(s);
		s = NULL;
	}
	fclose(f);
	return s;
}

int gw_login_url(struct gw *g)
{
	char *log = read_log(g), *p, *last = NULL;

	for (p = log; p && (p = strstr(p, "/login#")); p++)
		last = p;
	if (last) {
		int n = (int)strcspn(last, " \n");

		snprintf(g->login, sizeof g->login, "%.*s", n, last);
		snprintf(g->login_token, sizeof g->login_token, "%.*s",
			 n - 7, last + 7);
	}
	free(log);
	return last ? 0 : -1;
}

bool gw_log_has(struct gw *g, const char *needle)
{
	char *log = read_log(g);
	bool found = log && strstr(log, needle);

	free(log);
	return found;
}

static bool has_principals(const char *const *extra)
{
	for (int i = 0; extra && extra[i]; i++)
		if (strcmp(extra[i], "--principals") == 0)
			return true;
	return false;
}

/* serving_port returns the port of the n-th "serving" line of berthd's
 * log (counting from 1; 0 for the last), or 0; *lines gets their count. */
static int serving_port(struct gw *g, int n, int *lines)
{
	static const char line[] = "serving http://127.0.0.1:";
	char *log = read_log(g), *p;
	int port = 0, i = 0;

	for (p = log; p && (p = strstr(p, line)); p++) {
		i++;
		if (n == 0 || i == n)
			port = atoi(p + strlen(line));
	}
	free(log);
	if (lines)
		*lines = i;
	return port;
}

int gw_restart(struct gw *g)
{
	int before, now = 0;

	serving_port(g, 0, &before);
	g->port = 0;
	if (harness_restart(&g->h) < 0)
		return -1;
	for (int i = 0; i < 500 && now <= before; i++) {
		serving_port(g, 0, &now);
		if (now <= before)
			sleep_ms(10);
	}
	if (now <= before)
		return -1;
	g->port = serving_port(g, before + 1, NULL);
	gw_login_url(g);
	return g->port ? 0 : -1;
}

int gw_start(struct gw *g, bool open, const char *const *extra)
{
	const char *args[24];
	int n = 0;
	FILE *f;

	memset(g, 0, sizeof *g);
	snprintf(g->tokdir, sizeof g->tokdir, "/tmp/berth-http-XXXXXX");
	if (!mkdtemp(g->tokdir))
		return -1;
	snprintf(g->tokfile, sizeof g->tokfile, "%s/token", g->tokdir);
	f = fopen(g->tokfile, "w");
	if (!f)
		return -1;
	fputs("secret\n", f);
	fclose(f);
	args[n++] = "--tools";
	args[n++] = getenv("BERTH_HTTP_TOOLS");
	args[n++] = "--http";
	args[n++] = "127.0.0.1:0";
	if (open) {
		args[n++] = "--http-open";
	} else if (!has_principals(extra)) {
		/* With --principals, the tokens are theirs. */
		args[n++] = "--token-file";
		args[n++] = g->tokfile;
	}
	for (int i = 0; extra && extra[i] && n < 23; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	if (harness_start(&g->h, args) < 0)
		return -1;
	/* The gateway prints its address before the loop runs; the socket
	 * may accept a little before the line reaches the log. */
	for (int i = 0; i < 500 && !g->port; i++) {
		char *log = read_log(g), *p;

		p = log ? strstr(log, "serving http://127.0.0.1:") : NULL;
		if (p)
			g->port = atoi(p + strlen("serving http://127.0.0.1:"));
		free(log);
		if (!g->port)
			sleep_ms(10);
	}
	if (!g->port)
		return -1;
	if (!open)
		gw_login_url(g);
	return 0;
}

void gw_stop(struct gw *g)
{
	harness_cleanup(&g->h);
	unlink(g->tokfile);
	rmdir(g->tokdir);
}

int http_connect(int port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sin, sizeof sin) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int write_all(int fd, const char *s, size_t len)
{
	while (len) {
		ssize_t n = write(fd, s, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		s += n;
		len -= (size_t)n;
	}
	return 0;
}

int http_do(int port, const char *method, const char *path,
	    const char *headers, const char *body, struct resp *r)
{
	int fd = http_connect(port);
	char *req = NULL, *buf = NULL, *end;
	size_t len = 0, cap = 0, want = (size_t)-1;
	int n;

	memset(r, 0, sizeof *r);
	if (fd < 0)
		return -1;
	n = asprintf(&req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s"
		     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
		     method, path, port, headers ? headers : "",
		     body ? strlen(body) : 0, body ? body : "");
	if (n < 0 || write_all(fd, req, (size_t)n) < 0) {
		free(req);
		close(fd);
		return -1;
	}
	free(req);
	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		ssize_t got;

		if (cap - len < 65536) {
			cap = cap ? cap * 2 : 131072;
			buf = realloc(buf, cap);
		}
		if (poll(&p, 1, 30000) <= 0)
			break;
		got = read(fd, buf + len, cap - len - 1);
		if (got <= 0)
			break;
		len += (size_t)got;
		buf[len] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (end && want == (size_t)-1) {
			char *cl = strcasestr(buf, "\r\nContent-Length:");

			if (cl && cl < end)
				want = (size_t)(end + 4 - buf) +
				       strtoul(cl + 17, NULL, 10);
		}
		if (len >= want)
			break;
	}
	close(fd);
	if (!buf || !(end = strstr(buf, "\r\n\r\n"))) {
		free(buf);
		return -1;
	}
	r->status = atoi(buf + 9);
	snprintf(r->head, sizeof r->head, "%.*s", (int)(end - buf), buf);
	r->len = len - (size_t)(end + 4 - buf);
	r->body = malloc(r->len + 1);
	memcpy(r->body, end + 4, r->len);
	r->body[r->len] = '\0';
	free(buf);
	return 0;
}

void resp_free(struct resp *r)
{
	free(r->body);
	r->body = NULL;
}

json_t *resp_json(const struct resp *r)
{
	return json_loadb(r->body, r->len, 0, NULL);
}

char *resp_header(const struct resp *r, const char *name)
{
	char pat[128];
	const char *p;

	snprintf(pat, sizeof pat, "\r\n%s:", name);
	p = strcasestr(r->head, pat);
	if (!p)
		return NULL;
	p += strlen(pat);
	while (*p == ' ')
		p++;
	return strndup(p, strcspn(p, "\r\n"));
}

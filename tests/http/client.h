/*
 * client.h: a small blocking HTTP/1.1 client for the gateway's tests, and
 * a berthd with --http on a free port (through tests/harness).
 */
#ifndef BERTH_TESTS_HTTP_CLIENT_H
#define BERTH_TESTS_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "tests/harness/harness.h"

struct gw {
	struct harness h;
	char tokdir[64];
	char tokfile[96];
	int port;
	char login[256]; /* the login URL's path and fragment: /login#TOKEN */
	char login_token[80]; /* its token */
};

/* gw_start starts berthd with the test tools, --http 127.0.0.1:0 and a
 * token file holding "secret" (unless open: then --http-open and no
 * token; or unless extra gives --principals, whose tokens stand in for
 * it). Returns 0 or -1. */
int gw_start(struct gw *g, bool open, const char *const *extra);
void gw_stop(struct gw *g);
/* gw_restart stops berthd and starts it again on the same database and
 * arguments, and reads its new port and login URL; returns 0 or -1. */
int gw_restart(struct gw *g);
/* gw_login_url reads the newest login URL berthd logged into g->login
 * and g->login_token; returns 0 or -1. */
int gw_login_url(struct gw *g);

struct resp {
	int status;
	char head[8192];
	char *body; /* malloc'd, NUL-ended */
	size_t len;
};

/* http_do sends method path with the header lines (each ending "\r\n")
 * and body, reads the whole response, and returns 0 or -1. */
int http_do(int port, const char *method, const char *path,
	    const char *headers, const char *body, struct resp *r);
void resp_free(struct resp *r);
/* resp_json parses the body (new reference, NULL when not JSON). */
json_t *resp_json(const struct resp *r);
/* resp_header returns a malloc'd copy of a header's value, or NULL. */
char *resp_header(const struct resp *r, const char *name);

/* gw_log_has is true when berthd's log holds needle. */
bool gw_log_has(struct gw *g, const char *needle);

/* http_connect returns a connected socket to 127.0.0.1:port, or -1. */
int http_connect(int port);

#define BEARER "Authorization: Bearer secret\r\n"
#define JSON_CT "Content-Type: application/json\r\n"

#endif

/*
 * client.h: a small blocking client of berthd's socket protocol, used by
 * the berth command, the tests and the benchmarks.
 *
 * One struct berth_client is one connection; it is not thread-safe (use
 * one per thread). Errors are 0 or a negative errno-style code.
 */
#ifndef BERTH_CLIENT_H
#define BERTH_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

struct berth_client;

/* berth_client_default_socket writes the default socket path (as berthd
 * picks it: $BERTH_SOCKET, else $XDG_RUNTIME_DIR/berth/berth.sock, else
 * ./berth.sock) into buf and returns buf. */
char *berth_client_default_socket(char *buf, size_t size);

/* berth_client_connect connects to a Unix socket path, or to "tcp:HOST:PORT".
 * Returns a new client or NULL with errno set. */
struct berth_client *berth_client_connect(const char *where);
void berth_client_close(struct berth_client *c);

/* berth_client_read_token reads a token file as berthd reads its
 * --token-file: the first line, without its newline and trailing blanks.
 * Returns a new string (free it; it is a secret, so clear it first), or
 * NULL with errno set (EINVAL for an empty token). */
char *berth_client_read_token(const char *path);

/* berth_client_auth sends server/auth with token, the first request on a
 * TCP connection (PROTOCOL.md). Returns 0; 1 when berthd refused it, with
 * *error (new reference) when error is not NULL; or a negative code for a
 * transport failure. */
int berth_client_auth(struct berth_client *c, const char *token,
		      json_t **error);

/* berth_client_fd returns the socket, for poll(). */
int berth_client_fd(const struct berth_client *c);

/*
 * berth_client_call sends {"jsonrpc":"2.0","id":N,"method","params"}
 * (params borrowed, may be NULL) and waits for its reply, up to timeout_ms
 * (<0: forever). Notifications that arrive meanwhile are queued for
 * berth_client_next_notification. Returns 0 with *result (new reference);
 * or 1 when the server answered an error, with *error (new reference to
 * the {"code","message","data"?} object); or a negative code for a
 * transport failure or time-out (-ETIMEDOUT).
 */
int berth_client_call(struct berth_client *c, const char *method,
		      json_t *params, int timeout_ms, json_t **result,
		      json_t **error);

/* berth_client_next_notification returns the next queued or arriving
 * notification (a new reference to the whole message), waiting up to
 * timeout_ms (<0: forever); NULL on time-out or when the connection
 * closed (errno tells which: ETIMEDOUT or ECONNRESET). */
json_t *berth_client_next_notification(struct berth_client *c, int timeout_ms);

/* berth_client_send_line writes a raw line (no newline needed) and
 * berth_client_read_line reads one raw line (malloc'd, without the
 * newline; NULL on time-out or close). For tests of the framing. */
int berth_client_send_line(struct berth_client *c, const char *line,
			   size_t len);
char *berth_client_read_line(struct berth_client *c, int timeout_ms);

#endif

/*
 * api.h: the socket server of PROTOCOL.md (JSON-RPC 2.0, one message per
 * line) over a Unix socket and optional loopback TCP, and the MCP methods
 * on the same connections.
 *
 * The api owns connections, framing, limits, the method table and its
 * params checks, long-poll waits and subscriptions. It turns requests into
 * worker and store calls and their results into replies; it holds no job
 * state of its own that is not also in the store.
 */
#ifndef BERTH_API_H
#define BERTH_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <uv.h>

#include "store/store.h"
#include "worker/worker.h"

struct api_principals;

struct api_config {
	const char *socket_path; /* NULL: $XDG_RUNTIME_DIR/berth/berth.sock,
				    else ./berth.sock */
	const char *listen;      /* "HOST:PORT" for TCP, or NULL */
	const char *token_file;  /* the token of TCP and HTTP clients
				    without principals (an admin) */
	/* --principals (api/principal.h), stolen by api_start whatever it
	 * returns; NULL: none declared (implicit principals only). */
	struct api_principals *principals;
	const uid_t *allow_uids; /* besides the daemon's own user and root;
				    the socket is then reachable to every
				    user and the peer check filters */
	size_t nallow_uids;
	size_t max_line;         /* 0: 16 MiB */
	int max_depth;           /* 0: 64 */
	int max_connections;     /* TCP connections; 0: 16384 */
	int max_unauth;          /* of them, before server/auth; 0: 256 */
	int64_t login_ms;        /* to authenticate on TCP; 0: 10000 */
	int max_inflight;        /* unanswered requests per connection; 0: 1024 */
	size_t max_outbuf;       /* unread replies per connection; 0: 64 MiB */
};

struct api;

/* api_start binds the sockets and starts serving. Returns 0 and sets *out,
 * or a negative code with *errmsg (malloc'd): a live socket in the way, a
 * bad --listen address, an unreadable token file. */
int api_start(uv_loop_t *loop, struct worker *w, struct store *st,
	      const struct api_config *cfg, struct api **out, char **errmsg);

/* api_parse_address reads "HOST:PORT", "[V6]:PORT" or ":PORT" (a missing
 * host, or "localhost", is the loopback address), and a bare "PORT" when
 * bare_port is true, into *ss. When loopback is not NULL it tells whether
 * the address is a loopback one. Returns 0 or -EINVAL. The socket's
 * --listen and the HTTP gateway's --http share it. */
int api_parse_address(const char *spec, bool bare_port,
		      struct sockaddr_storage *ss, bool *loopback);

/* api_login_ms returns the time a TCP or HTTP client has to
 * authenticate, and api_max_unauth how many may be trying at once (the
 * HTTP gateway applies the socket's figures to its own connections). */
int64_t api_login_ms(const struct api *a);
int api_max_unauth(const struct api *a);

/* api_socket_path returns the Unix socket path in use (borrowed). */
const char *api_socket_path(const struct api *a);

/* api_tcp_address writes the address the TCP socket listens on
 * ("127.0.0.1:7070", "[::1]:7070") into buf and returns it, or NULL
 * without one. */
const char *api_tcp_address(const struct api *a, char *buf, size_t size);

/* api_stop closes the listeners and every connection, unlinks the socket,
 * and calls done(arg) once all handles are closed; the api is freed after
 * done returns. */
void api_stop(struct api *a, void (*done)(void *arg), void *arg);

#endif

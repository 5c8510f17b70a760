/*
 * local.h: the method table without a socket. A local client (the HTTP
 * gateway, http/) opens a connection of its own that has no socket: it
 * hands requests in as JSON values and takes every reply and
 * notification through a callback, so that a request made this way runs
 * through exactly the checks, handlers and replies a socket request does
 * (conn.c's dispatch), with no second copy of any of them.
 */
#ifndef BERTH_API_LOCAL_H
#define BERTH_API_LOCAL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct api;
struct api_conn;
struct api_principal;

/*
 * api_local_sink_fn receives every message for the local client: the
 * JSON-RPC reply {"jsonrpc","id","result"|"error"} of each request, and
 * notifications (events/event of a subscription). msg is borrowed. It may
 * run inside api_local_request (a handler that answers at once) or later
 * from the loop. Returns 0, or a negative code when the client cannot
 * take it (the message is then lost, as on a broken socket).
 */
typedef int (*api_local_sink_fn)(void *arg, const json_t *msg);

/* api_local_pending_fn returns the bytes the client has yet to take; a
 * subscription's replay pauses above API_REPLAY_HIGH_WATER (conn.h). */
typedef size_t (*api_local_pending_fn)(void *arg);

/* api_local_open returns a new local connection, authenticated, whose
 * messages go to sink(arg, ...), or NULL when out of memory or when the
 * api is stopping. pending may be NULL (nothing is ever queued). via
 * (static) says how its requests came, for the audit ("http"). Its
 * requests are refused as unauthenticated until api_local_as names who
 * makes them. */
struct api_conn *api_local_open(struct api *a, const char *via,
				api_local_sink_fn sink,
				api_local_pending_fn pending, void *arg);

/* api_local_as makes the requests c runs from now on those of p
 * (borrowed: principals live as long as the api): the local client
 * checked its caller's credentials itself (an HTTP Bearer token or
 * session), and a client may be a different principal from one request
 * to the next. A request's principal is taken when it is dispatched. */
void api_local_as(struct api_conn *c, const struct api_principal *p);

/* api_local_request runs method with params (stolen; NULL for none) as a
 * request with the integer id. Its reply reaches the sink, now or later,
 * exactly once (unless c is closed first). */
void api_local_request(struct api_conn *c, const char *method, json_t *params,
		       int64_t id);

/* api_local_drained tells c that its client took what was pending, so
 * that paused subscription replays go on. */
void api_local_drained(struct api_conn *c);

/* api_local_close closes c: its waits and subscriptions end, replies still
 * owed are dropped, and the sink is never called again. The memory is
 * released once the loop has run the close. */
void api_local_close(struct api_conn *c);

/* api_local_limits returns the socket's limits on a message's size in
 * bytes and on its JSON nesting depth (api_config's max_line, max_depth),
 * which the HTTP gateway applies to a request body, and max_outbuf, the
 * bytes a client that does not read may cost. */
void api_local_limits(const struct api *a, size_t *max_line, int *max_depth,
		      size_t *max_outbuf);

#endif

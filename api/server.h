/*
 * server.h: the api's own state (struct api), shared by the files of api/.
 * Not a public header: api.h is.
 */
#ifndef BERTH_API_SERVER_H
#define BERTH_API_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "api/api.h"

struct api_conn;
struct api_wait;
struct api_sub;
struct api_auth;

/* The number of wait buckets, hashed by job id: enough that ten thousand
 * waiters on distinct jobs find theirs among a few dozen. */
#define API_WAIT_BUCKETS 256

/* Bytes read from a socket at a time. One buffer serves every connection:
 * a read is split into lines before the next read starts, and only a
 * partial line is copied into the connection's own frame, so an idle
 * connection holds no read buffer at all. */
#define API_READ_CHUNK (64 * 1024)

/* Connections accepted from one listener per loop turn (server.c's
 * accept_or_defer says why there is a bound). */
#define API_ACCEPT_BURST 64

struct api {
	uv_loop_t *loop;
	struct worker *worker;
	struct store *store;
	struct api_config cfg; /* with every default filled in */

	char *socket_path;     /* malloc'd */
	struct api_auth *auth; /* the token and its throttle (auth.c) */
	struct api_principals *principals; /* never NULL once started */
	uid_t *allow_uids;     /* malloc'd copy */
	size_t nallow_uids;

	uv_pipe_t unix_listener;
	uv_tcp_t tcp_listener;
	bool unix_bound, tcp_bound;
	bool unix_passed;      /* the service manager's socket (activation.h):
				  berthd neither binds nor removes it */
	int accepted[2];       /* by enum api_transport, in this loop turn */
	bool deferred[2];      /* a connection waits to be accepted */
	uv_idle_t accept_later; /* accepts it on the next turn */
	uv_check_t turn;       /* ends a turn's burst */

	struct api_conn *conns; /* every open connection */
	struct api_conn *dirty; /* connections with messages to write */
	uv_prepare_t flush;     /* writes them before the loop blocks */
	size_t nconns;
	size_t ntcp;            /* TCP connections, authenticated or not */
	uint64_t next_conn_id;

	/* TCP connections that have not authenticated, oldest first: the
	 * login deadline closes them from the head, and a newcomer past
	 * max_unauth closes the head. */
	struct api_conn *unauth_head, *unauth_tail;
	size_t nunauth;
	uv_timer_t login_timer;
	/* Connections whose peer may have gone while they are not read
	 * (paused, or a half-closed Unix peer with waits) are looked at
	 * with poll(2) once a second. */
	uv_timer_t hangup_timer;

	struct api_wait *job_waits[API_WAIT_BUCKETS];
	struct api_wait *event_waits;
	struct api_sub *subs;
	uint64_t next_sub_id;
	uv_idle_t replay_later; /* goes on with the replays that gave up
				   their turn (sub.c) */

	uint64_t started_ns;   /* uv_hrtime at api_start */
	char readbuf[API_READ_CHUNK];

	/* Open libuv handles (listeners, connections, timers). api_stop's
	 * done runs once it falls to zero. */
	int handles;
	bool stopping;
	void (*stop_done)(void *arg);
	void *stop_arg;
};

/* api_handle_closed is called by every close callback of a handle the api
 * opened; it finishes api_stop once none is left. */
void api_handle_closed(struct api *a);

#endif

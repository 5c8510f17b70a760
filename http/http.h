/*
 * http.h: the HTTP gateway (docs/HTTP.md): REST and Server-Sent Events over
 * the api's method table, Prometheus metrics, and the approval inbox page,
 * served with HTTP/1.1 on the daemon's own loop.
 *
 * The gateway holds no logic of the methods: every REST route becomes one
 * request on a local api connection (api/local.h), answered by the same
 * handler, params check and error as on the socket.
 */
#ifndef BERTH_HTTP_H
#define BERTH_HTTP_H

#include <stdbool.h>

#include <uv.h>

#include "store/store.h"
#include "worker/worker.h"

struct api;

struct http_config {
	const char *listen;     /* "HOST:PORT" (--http) */
	bool open;              /* --http-open: no authentication; refused
				   unless HOST is a loopback address */
	int max_connections;    /* 0: 1024 */
};

struct http;

/* http_start binds cfg->listen and starts serving. It logs the login URL
 * (with a one-time token). Bearer tokens are checked by the api
 * (api/auth.h: --token-file's token). Returns 0 and sets *out, or a
 * negative code with *errmsg (malloc'd): a bad address, a port in use,
 * --http-open on an address that is not loopback. */
int http_start(uv_loop_t *loop, struct api *api, struct worker *w,
	       struct store *st, const struct http_config *cfg,
	       struct http **out, char **errmsg);

/* http_stop closes the listener and every connection (their api requests
 * end without an answer) and calls done(arg) once every handle is closed;
 * the gateway is freed before done runs. Call it before api_stop. */
void http_stop(struct http *h, void (*done)(void *arg), void *arg);

#endif

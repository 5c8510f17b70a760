/*
 * server.c: http_start and http_stop (http.h): the listener, the address
 * rules of --http and --http-open, and the loop-turn hook that ends a
 * commit batch for the metrics.
 */
#include "http/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/activation.h"
#include "api/api.h"
#include "api/local.h"
#include "common/strf.h"
#include "log/log.h"

#define LISTEN_BACKLOG 511

/* Connections accepted per loop turn: as on the socket (api/server.c's
 * accept_or_defer), one left unaccepted pauses the listener until the
 * next turn, so that a flood of connections takes only a share of each
 * turn. */
#define HTTP_ACCEPT_BURST 64

static void on_accept_later(uv_idle_t *t);

static void accept_or_defer(struct http *h)
{
	if (h->accepted >= HTTP_ACCEPT_BURST) {
		h->deferred = true;
		uv_idle_start(&h->accept_later, on_accept_later);
		return;
	}
	h->accepted++;
	http_conn_accept(h);
}

static void on_accept_later(uv_idle_t *t)
{
	struct http *h = t->data;

	uv_idle_stop(t);
	h->accepted = 0;
	if (h->deferred) {
		h->deferred = false;
		accept_or_defer(h);
	}
}

static void on_connection(uv_stream_t *server, int status)
{
	struct http *h = server->data;

	if (status < 0) {
		log_warn("http: accept failed: %s",
			uv_strerror(status));
		return;
	}
	accept_or_defer(h);
}

static void on_check(uv_check_t *t)
{
	struct http *h = t->data;

	h->accepted = 0;
	if (h->metrics)
		http_metrics_end_batch(h->metrics);
}

void http_handle_closed(struct http *h)
{
	if (--h->handles == 0 && h->stopping) {
		void (*done)(void *) = h->stop_done;
		void *arg = h->stop_arg;

		free(h);
		if (done)
			done(arg);
	}
}

static void on_closed(uv_handle_t *hd)
{
	http_handle_closed(hd->data);
}

/* close_all starts closing every handle of h; the last close frees it. */
static void close_all(struct http *h)
{
	h->stopping = true;
	http_metrics_destroy(h->metrics);
	h->metrics = NULL;
	http_auth_finish(h);
	if (h->bound)
		uv_close((uv_handle_t *)&h->listener, on_closed);
	if (h->check_started) {
		uv_check_stop(&h->check);
		uv_close((uv_handle_t *)&h->check, on_closed);
		uv_close((uv_handle_t *)&h->accept_later, on_closed);
	}
	while (h->conns)
		http_conn_close(h->conns);
	if (h->handles == 0) {
		void (*done)(void *) = h->stop_done;
		void *arg = h->stop_arg;

		free(h);
		if (done)
			done(arg);
	}
}

int http_start(uv_loop_t *loop, struct api *api, struct worker *w,
	       struct store *st, const struct http_config *cfg,
	       struct http **out, char **errmsg)
{
	struct http *h;
	struct sockaddr_storage ss;
	bool loopback = false;
	char host[64];
	int rc, port;

	*out = NULL;
	*errmsg = NULL;
	if (!cfg->listen || api_parse_address(cfg->listen, false, &ss, &loopback) < 0) {
		*errmsg = berth_strf("--http takes HOST:PORT (a numeric address or "
				     "localhost), not '%s'",
				     cfg->listen ? cfg->listen : "");
		return -EINVAL;
	}
	if (cfg->open && !loopback) {
		*errmsg = berth_strf("--http-open drops authentication, so it is "
				     "allowed only on a loopback address, not %s",
				     cfg->listen);
		return -EINVAL;
	}
	h = calloc(1, sizeof *h);
	if (!h)
		return -ENOMEM;
	h->loop = loop;
	h->api = api;
	h->worker = w;
	h->store = st;
	h->cfg = *cfg;
	if (h->cfg.max_connections <= 0)
		h->cfg.max_connections = HTTP_DEFAULT_MAX_CONNECTIONS;
	api_local_limits(api, &h->max_body, &h->max_depth, &h->max_outbuf);
	rc = http_auth_init(h, errmsg);
	if (rc < 0) {
		http_auth_finish(h);
		free(h);
		return rc;
	}
	h->metrics = http_metrics_create(st, w, api);
	if (!h->metrics) {
		*errmsg = berth_strf("out of memory");
		http_auth_finish(h);
		free(h);
		return -ENOMEM;
	}

	rc = uv_tcp_init(loop, &h->listener);
	if (rc == 0) {
		h->listener.data = h;
		h->handles++;
		h->bound = true;
		rc = api_activation_tcp_bind(&h->listener, "http",
					     (struct sockaddr *)&ss);
	}
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&h->listener, LISTEN_BACKLOG,
			       on_connection);
	if (rc == 0) {
		struct sockaddr_storage bound;
		int len = sizeof bound;

		rc = uv_tcp_getsockname(&h->listener, (struct sockaddr *)&bound,
					&len);
		if (rc == 0 && bound.ss_family == AF_INET6) {
			host[0] = '[';
			uv_ip6_name((struct sockaddr_in6 *)&bound, host + 1,
				    sizeof host - 2);
			strcat(host, "]");
			port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
		} else {
			uv_ip4_name((struct sockaddr_in *)&bound, host,
				    sizeof host);
			port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
		}
		snprintf(h->origin, sizeof h->origin, "http://%s:%d", host,
			 port);
	}
	if (rc < 0) {
		*errmsg = berth_strf("cannot serve HTTP on %s: %s", cfg->listen,
				     uv_strerror(rc));
		h->stop_done = NULL;
		close_all(h);
		return rc;
	}
	/* The check handle runs once per loop turn, after I/O: the events
	 * the store's listener saw during the turn came from one commit
	 * (or a few that finished in the same turn). It does not keep the
	 * loop alive. */
	uv_check_init(loop, &h->check);
	h->check.data = h;
	uv_idle_init(loop, &h->accept_later);
	h->accept_later.data = h;
	h->handles += 2;
	h->check_started = true;
	uv_check_start(&h->check, on_check);
	uv_unref((uv_handle_t *)&h->check);

	if (cfg->open) {
		log_info("http: serving %s/ with no "
			 "authentication (--http-open)", h->origin);
	} else {
		char prefix[200];

		snprintf(prefix, sizeof prefix, "serving %s/; ", h->origin);
		http_login_url(h, prefix);
	}
	*out = h;
	return 0;
}

void http_stop(struct http *h, void (*done)(void *arg), void *arg)
{
	h->stop_done = done;
	h->stop_arg = arg;
	close_all(h);
}

/*
 * server.c: api_start and api_stop (api.h): the Unix socket and its
 * directory, the optional TCP listener and its token, and the store's
 * event listener that feeds waits and subscriptions.
 */
#include "api/server.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "api/activation.h"
#include "api/conn.h"
#include "api/sub.h"
#include "api/wait.h"
#include "log/log.h"

#define DEFAULT_MAX_LINE (16u * 1024 * 1024)
#define DEFAULT_MAX_DEPTH 64
#define DEFAULT_MAX_CONNECTIONS 16384
#define DEFAULT_MAX_INFLIGHT 1024
#define DEFAULT_MAX_OUTBUF (64u * 1024 * 1024)
#define LISTEN_BACKLOG 4096
#define MAX_TOKEN 4096

static char *errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *errorf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

static void api_free(struct api *a)
{
	free(a->socket_path);
	if (a->token)
		memset(a->token, 0, a->token_len);
	free(a->token);
	free(a->allow_uids);
	free(a);
}

void api_handle_closed(struct api *a)
{
	if (--a->handles > 0 || !a->stopping)
		return;
	void (*done)(void *) = a->stop_done;
	void *arg = a->stop_arg;

	api_free(a);
	if (done)
		done(arg);
}

static void on_listener_close(uv_handle_t *h)
{
	api_handle_closed(h->data);
}

/* ---- the Unix socket --------------------------------------------------- */

/* default_socket_path returns the malloc'd default path of PROTOCOL.md. */
static char *default_socket_path(void)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char *s;

	if (xdg && *xdg) {
		if (asprintf(&s, "%s/berth/berth.sock", xdg) < 0)
			return NULL;
		return s;
	}
	return strdup("./berth.sock");
}

/* make_dirs creates the directory that will hold path, and any missing
 * parent, mode 0700; an existing directory is left as it is. Returns 0
 * or a negative errno. */
static int make_dirs(const char *path)
{
	char *dir = strdup(path), *slash;
	int rc = 0;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (!slash || slash == dir) {
		free(dir);
		return 0;
	}
	*slash = '\0';
	for (char *p = dir + 1; rc == 0; p++) {
		char c = *p;

		if (c != '/' && c != '\0')
			continue;
		*p = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			rc = -errno;
		*p = c;
		if (c == '\0')
			break;
	}
	free(dir);
	return rc;
}

/* clear_stale removes a socket file a crashed daemon left at path, and
 * refuses one a live daemon listens on. Returns 0 or -1 with *errmsg. */
static int clear_stale(const char *path, char **errmsg)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) < 0)
		return 0;
	if (!S_ISSOCK(st.st_mode)) {
		*errmsg = errorf("%s exists and is not a socket; remove it or "
				 "choose another --socket", path);
		return -1;
	}
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		*errmsg = errorf("cannot make a socket: %s", strerror(errno));
		return -1;
	}
	rc = connect(fd, (struct sockaddr *)&sun, sizeof sun);
	close(fd);
	if (rc == 0) {
		*errmsg = errorf("another berthd is serving %s; stop it or "
				 "choose another --socket", path);
		return -1;
	}
	if (errno != ECONNREFUSED) {
		*errmsg = errorf("cannot tell whether %s is in use: %s", path,
				 strerror(errno));
		return -1;
	}
	/* Nobody listens: the file is what a crashed daemon left. */
	if (unlink(path) < 0 && errno != ENOENT) {
		*errmsg = errorf("cannot remove the stale socket %s: %s", path,
				 strerror(errno));
		return -1;
	}
	return 0;
}

static void on_unix_connection(uv_stream_t *server, int status)
{
	struct api *a = server->data;

	if (status < 0) {
		log_warn("accept on the socket failed: %s", uv_strerror(status));
		return;
	}
	api_conn_accept(a, server, API_TRANSPORT_UNIX);
}

static int start_unix(struct api *a, char **errmsg)
{
	mode_t old;
	int rc;

	if (a->unix_passed)
		goto init;
	if (strlen(a->socket_path) >= sizeof((struct sockaddr_un *)0)->sun_path) {
		*errmsg = errorf("the socket path %s is too long (at most %zu "
				 "bytes)", a->socket_path,
				 sizeof((struct sockaddr_un *)0)->sun_path - 1);
		return -ENAMETOOLONG;
	}
	rc = make_dirs(a->socket_path);
	if (rc < 0) {
		*errmsg = errorf("cannot create the directory of %s: %s",
				 a->socket_path, strerror(-rc));
		return rc;
	}
	if (clear_stale(a->socket_path, errmsg) < 0)
		return -EADDRINUSE;
init:
	rc = uv_pipe_init(a->loop, &a->unix_listener, 0);
	if (rc < 0) {
		*errmsg = errorf("cannot make the socket: %s", uv_strerror(rc));
		return rc;
	}
	a->unix_listener.data = a;
	a->handles++;
	a->unix_bound = true;
	/* berthd's own socket is created 0600 (the umask covers the moment
	 * between bind and chmod); a passed one has its unit's mode. The
	 * peer check in conn.c is the real guard. */
	if (a->unix_passed) {
		rc = api_activation_open_pipe(&a->unix_listener);
	} else {
		old = umask(0177);
		rc = uv_pipe_bind(&a->unix_listener, a->socket_path);
		umask(old);
		if (rc == 0 && chmod(a->socket_path, 0600) < 0)
			rc = -errno;
	}
	if (rc >= 0)
		rc = uv_listen((uv_stream_t *)&a->unix_listener, LISTEN_BACKLOG,
			       on_unix_connection);
	if (rc < 0) {
		*errmsg = errorf("cannot listen on %s: %s", a->socket_path,
				 uv_strerror(rc));
		return rc;
	}
	return 0;
}

/* ---- TCP --------------------------------------------------------------- */

/* read_token reads the token file: its first line, without the trailing
 * newline and blanks. Returns 0 or -1 with *errmsg. */
static int read_token(struct api *a, const char *path, char **errmsg)
{
	char buf[MAX_TOKEN + 1];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		*errmsg = errorf("cannot read the token file %s: %s", path,
				 strerror(errno));
		return -1;
	}
	n = read(fd, buf, MAX_TOKEN);
	close(fd);
	if (n < 0) {
		*errmsg = errorf("cannot read the token file %s: %s", path,
				 strerror(errno));
		return -1;
	}
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	n = (ssize_t)strlen(buf);
	while (n > 0 && (buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		buf[--n] = '\0';
	if (n == 0) {
		*errmsg = errorf("the token file %s is empty", path);
		return -1;
	}
	a->token = strdup(buf);
	a->token_len = (size_t)n;
	memset(buf, 0, sizeof buf);
	return a->token ? 0 : -1;
}

int api_parse_address(const char *spec, bool bare_port,
		      struct sockaddr_storage *ss, bool *loopback)
{
	char host[128] = "";
	const char *port;
	char *end;
	long p;

	if (spec[0] == '[') {
		const char *close = strchr(spec, ']');

		if (!close || close[1] != ':' ||
		    (size_t)(close - spec - 1) >= sizeof host)
			return -EINVAL;
		memcpy(host, spec + 1, (size_t)(close - spec - 1));
		port = close + 2;
	} else if ((port = strrchr(spec, ':'))) {
		if ((size_t)(port - spec) >= sizeof host)
			return -EINVAL;
		memcpy(host, spec, (size_t)(port - spec));
		port++;
	} else if (bare_port) {
		port = spec;
	} else {
		return -EINVAL;
	}
	errno = 0;
	p = strtol(port, &end, 10);
	if (errno || end == port || *end || p < 0 || p > 65535)
		return -EINVAL;
	if (!host[0] || strcmp(host, "localhost") == 0)
		snprintf(host, sizeof host, "127.0.0.1");
	memset(ss, 0, sizeof *ss);
	if (uv_ip4_addr(host, (int)p, (struct sockaddr_in *)ss) == 0) {
		if (loopback)
			*loopback = strncmp(host, "127.", 4) == 0;
		return 0;
	}
	if (uv_ip6_addr(host, (int)p, (struct sockaddr_in6 *)ss) == 0) {
		if (loopback)
			*loopback = strcmp(host, "::1") == 0;
		return 0;
	}
	return -EINVAL;
}

static void on_tcp_connection(uv_stream_t *server, int status)
{
	struct api *a = server->data;

	if (status < 0) {
		log_warn("accept on the socket failed: %s", uv_strerror(status));
		return;
	}
	api_conn_accept(a, server, API_TRANSPORT_TCP);
}

static int start_tcp(struct api *a, char **errmsg)
{
	struct sockaddr_storage ss;
	int rc;

	if (!a->cfg.token_file) {
		*errmsg = errorf("%s needs --token-file: TCP clients must "
				 "authenticate", api_activation_address("listen")
				 ? "the TCP socket passed as 'listen'" : "--listen");
		return -EINVAL;
	}
	if (read_token(a, a->cfg.token_file, errmsg) < 0)
		return -EINVAL;
	if (api_parse_address(a->cfg.listen, true, &ss, NULL) < 0) {
		*errmsg = errorf("--listen takes HOST:PORT (a numeric address), "
				 "not '%s'", a->cfg.listen);
		return -EINVAL;
	}
	rc = uv_tcp_init(a->loop, &a->tcp_listener);
	if (rc < 0) {
		*errmsg = errorf("cannot make a TCP socket: %s", uv_strerror(rc));
		return rc;
	}
	a->tcp_listener.data = a;
	a->handles++;
	a->tcp_bound = true;
	rc = api_activation_tcp_bind(&a->tcp_listener, "listen",
				     (struct sockaddr *)&ss);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&a->tcp_listener, LISTEN_BACKLOG,
			       on_tcp_connection);
	if (rc < 0) {
		*errmsg = errorf("cannot listen on %s: %s", a->cfg.listen,
				 uv_strerror(rc));
		return rc;
	}
	return 0;
}

/* ---- events ------------------------------------------------------------ */

static void on_event(void *arg, const struct store_event *ev)
{
	struct api *a = arg;

	api_wait_on_event(a, ev);
	api_sub_on_event(a, ev);
}

static void on_progress(void *arg, const char *job_id, const char *tool,
			const json_t *progress)
{
	struct api *a = arg;

	if (!a->stopping)
		api_sub_on_progress(a, job_id, progress);
}

/* ---- start and stop ---------------------------------------------------- */

/* close_all starts closing every handle of a; api_handle_closed frees it
 * when the last one is closed. */
static void close_all(struct api *a)
{
	a->stopping = true;
	if (a->unix_bound && !uv_is_closing((uv_handle_t *)&a->unix_listener))
		uv_close((uv_handle_t *)&a->unix_listener, on_listener_close);
	if (a->tcp_bound && !uv_is_closing((uv_handle_t *)&a->tcp_listener))
		uv_close((uv_handle_t *)&a->tcp_listener, on_listener_close);
	for (struct api_conn *c = a->conns; c; c = c->next)
		api_conn_close(c);
	/* Closed connections write nothing more; this drops their refs. */
	api_conn_flush_all(a);
	if (!uv_is_closing((uv_handle_t *)&a->flush))
		uv_close((uv_handle_t *)&a->flush, on_listener_close);
}


int api_start(uv_loop_t *loop, struct worker *w, struct store *st,
	      const struct api_config *cfg, struct api **out, char **errmsg)
{
	struct api *a = calloc(1, sizeof *a);
	bool listening;
	int rc;

	*out = NULL;
	*errmsg = NULL;
	if (!a)
		return -ENOMEM;
	a->loop = loop;
	a->worker = w;
	a->store = st;
	a->cfg = *cfg;
	if (!a->cfg.max_line)
		a->cfg.max_line = DEFAULT_MAX_LINE;
	if (a->cfg.max_depth <= 0)
		a->cfg.max_depth = DEFAULT_MAX_DEPTH;
	if (a->cfg.max_connections <= 0)
		a->cfg.max_connections = DEFAULT_MAX_CONNECTIONS;
	if (a->cfg.max_inflight <= 0)
		a->cfg.max_inflight = DEFAULT_MAX_INFLIGHT;
	if (!a->cfg.max_outbuf)
		a->cfg.max_outbuf = DEFAULT_MAX_OUTBUF;
	/* Sockets the service manager passed (activation.h) stand in for
	 * --socket and --listen. */
	a->unix_passed = api_activation_address("socket") != NULL;
	if (a->unix_passed && cfg->socket_path &&
	    strcmp(cfg->socket_path, api_activation_address("socket")) != 0)
		log_warn("serving the socket the service manager passed, %s, "
			 "not --socket %s", api_activation_address("socket"),
			 cfg->socket_path);
	if (api_activation_address("listen")) {
		if (cfg->listen &&
		    strcmp(cfg->listen, api_activation_address("listen")) != 0)
			log_warn("serving the TCP socket the service manager "
				 "passed, %s, not --listen %s",
				 api_activation_address("listen"), cfg->listen);
		a->cfg.listen = api_activation_address("listen");
	}
	a->socket_path = a->unix_passed ? strdup(api_activation_address("socket"))
		: cfg->socket_path ? strdup(cfg->socket_path)
				   : default_socket_path();
	a->cfg.socket_path = a->socket_path;
	if (cfg->nallow_uids) {
		a->allow_uids = calloc(cfg->nallow_uids, sizeof(uid_t));
		if (a->allow_uids) {
			memcpy(a->allow_uids, cfg->allow_uids,
			       cfg->nallow_uids * sizeof(uid_t));
			a->nallow_uids = cfg->nallow_uids;
		}
	}
	if (!a->socket_path || (cfg->nallow_uids && !a->allow_uids)) {
		api_free(a);
		return -ENOMEM;
	}
	a->started_ns = uv_hrtime();
	uv_prepare_init(loop, &a->flush);
	a->flush.data = a;
	a->handles++;

	rc = start_unix(a, errmsg);
	listening = rc == 0 && !a->unix_passed;
	if (rc == 0 && a->cfg.listen)
		rc = start_tcp(a, errmsg);
	if (rc == 0) {
		rc = store_add_listener(st, on_event, a);
		if (rc == 0)
			rc = worker_add_progress_listener(w, on_progress, a);
		if (rc < 0) {
			store_remove_listener(st, on_event, a);
			*errmsg = errorf("out of memory");
		}
	}
	if (rc < 0) {
		if (listening)
			unlink(a->socket_path);
		if (a->handles == 0) {
			api_free(a);
		} else {
			/* The handles made so far close on the loop and
			 * free the api then. */
			a->stop_done = NULL;
			close_all(a);
		}
		return rc;
	}
	*out = a;
	return 0;
}

const char *api_socket_path(const struct api *a)
{
	return a->socket_path;
}

void api_stop(struct api *a, void (*done)(void *arg), void *arg)
{
	/* The worker offers no way to remove a progress listener; on_progress
	 * ignores calls once stopping is set, and berthd stops the worker
	 * before the api, so none comes after the api is freed. */
	store_remove_listener(a->store, on_event, a);
	a->stop_done = done;
	a->stop_arg = arg;
	if (a->unix_bound && !a->unix_passed)
		unlink(a->socket_path);
	close_all(a);
}

/*
 * server.c: api_start and api_stop (api.h): the Unix socket and its
 * directory, the optional TCP listener and its token, and the store's
 * event listener that feeds waits and subscriptions.
 */
#include "api/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "api/activation.h"
#include "api/auth.h"
#include "api/conn.h"
#include "api/principal.h"
#include "api/sub.h"
#include "api/wait.h"
#include "common/strf.h"
#include "log/log.h"

#define DEFAULT_MAX_LINE (16u * 1024 * 1024)
#define DEFAULT_MAX_DEPTH 64
#define DEFAULT_MAX_CONNECTIONS 16384
#define DEFAULT_MAX_UNAUTH 256
#define DEFAULT_LOGIN_MS 10000
#define DEFAULT_MAX_INFLIGHT 1024
#define DEFAULT_MAX_OUTBUF (64u * 1024 * 1024)
#define LISTEN_BACKLOG 4096

static void api_free(struct api *a)
{
	free(a->socket_path);
	api_auth_finish(a);
	api_principals_free(a->principals);
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

/* ---- the Unix socket ---------------------------------------------------- */

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
 * parent, with mode; an existing directory is left as it is. Returns 0
 * or a negative errno. */
static int make_dirs(const char *path, mode_t mode)
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
		if (mkdir(dir, mode) == 0)
			(void)chmod(dir, mode); /* whatever the umask */
		else if (errno != EEXIST)
			rc = -errno;
		*p = c;
		if (c == '\0')
			break;
	}
	free(dir);
	return rc;
}

/* The longest a socket still served after the berthd that made it ended
 * is waited for (clear_stale). */
#define LEFT_SERVED_WAIT_MS 10000

/* listener_ended reports whether fd, connected to a Unix socket, reached
 * a listener whose maker has ended: the credentials of the peer of a
 * connection are those of the process that called listen(2). Such a
 * listener lives on in a copy of the dead berthd's descriptor held by a
 * process it started, between its clone and its exec, which unmaps the
 * dead berthd's memory before it closes its descriptors (store/lock.c
 * tells more): tens of ms after a kill -9. *pid is set to that maker. */
static bool listener_ended(int fd, long *pid)
{
	struct ucred cred;
	socklen_t len = sizeof cred;

	*pid = 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid <= 0)
		return false;
	*pid = cred.pid;
	return kill(cred.pid, 0) < 0 && errno == ESRCH;
}

/* clear_stale removes a socket file a crashed daemon left at path, and
 * refuses one a live daemon listens on; one still served by what an ended
 * berthd left is waited for (listener_ended). Returns 0 or -1 with
 * *errmsg. */
static int clear_stale(const char *path, char **errmsg)
{
	const struct timespec pause = {.tv_nsec = 2 * 1000 * 1000};
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct stat st;
	int fd, rc, e;
	bool ended;
	long pid;

	if (lstat(path, &st) < 0)
		return 0;
	if (!S_ISSOCK(st.st_mode)) {
		*errmsg = berth_strf("%s exists and is not a socket; remove it or "
				     "choose another --socket", path);
		return -1;
	}
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
	for (int waited = 0;; waited += 2) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			*errmsg = berth_strf("cannot make a socket: %s",
					     strerror(errno));
			return -1;
		}
		rc = connect(fd, (struct sockaddr *)&sun, sizeof sun);
		e = errno;
		ended = rc == 0 && listener_ended(fd, &pid);
		close(fd);
		if (!ended || waited >= LEFT_SERVED_WAIT_MS)
			break;
		nanosleep(&pause, NULL);
	}
	if (rc == 0 && ended) {
		*errmsg = berth_strf("%s is still served %d s after berthd pid %ld, "
				     "which made it, ended: a process it started "
				     "holds a copy of it", path,
				     LEFT_SERVED_WAIT_MS / 1000, pid);
		return -1;
	}
	if (rc == 0) {
		*errmsg = berth_strf("another berthd is serving %s; stop it or "
				     "choose another --socket", path);
		return -1;
	}
	if (e != ECONNREFUSED) {
		*errmsg = berth_strf("cannot tell whether %s is in use: %s", path,
				     strerror(e));
		return -1;
	}
	/* Nobody listens: the file is what a crashed daemon left. */
	if (unlink(path) < 0 && errno != ENOENT) {
		*errmsg = berth_strf("cannot remove the stale socket %s: %s", path,
				     strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- accepting, a burst per loop turn ----------------------------------- */

static void on_accept_later(uv_idle_t *h);

/* accept_or_defer accepts a new connection of listener unless API_ACCEPT
 * _BURST were accepted from it in this loop turn. A connection left
 * unaccepted makes libuv stop watching the listener (the kernel's backlog
 * holds the rest) until it is accepted, on the next turn: a client that
 * reconnects as fast as it is closed can then take only a share of a
 * turn, and the connections already open are served between bursts. */
static void accept_or_defer(struct api *a, uv_stream_t *listener,
			    int transport)
{
	int *count = &a->accepted[transport];

	if (*count >= API_ACCEPT_BURST) {
		a->deferred[transport] = true;
		uv_idle_start(&a->accept_later, on_accept_later);
		return;
	}
	(*count)++;
	api_conn_accept(a, listener, transport);
}

static void on_accept_later(uv_idle_t *h)
{
	struct api *a = h->data;

	uv_idle_stop(h);
	a->accepted[API_TRANSPORT_UNIX] = a->accepted[API_TRANSPORT_TCP] = 0;
	if (a->deferred[API_TRANSPORT_UNIX]) {
		a->deferred[API_TRANSPORT_UNIX] = false;
		accept_or_defer(a, (uv_stream_t *)&a->unix_listener,
				API_TRANSPORT_UNIX);
	}
	if (a->deferred[API_TRANSPORT_TCP]) {
		a->deferred[API_TRANSPORT_TCP] = false;
		accept_or_defer(a, (uv_stream_t *)&a->tcp_listener,
				API_TRANSPORT_TCP);
	}
}

/* on_turn ends a loop turn's accept burst (the check phase follows the
 * poll that delivered the connections). */
static void on_turn(uv_check_t *h)
{
	struct api *a = h->data;

	a->accepted[API_TRANSPORT_UNIX] = a->accepted[API_TRANSPORT_TCP] = 0;
}

static void on_unix_connection(uv_stream_t *server, int status)
{
	struct api *a = server->data;

	if (status < 0) {
		log_warn("accept on the socket failed: %s", uv_strerror(status));
		return;
	}
	accept_or_defer(a, server, API_TRANSPORT_UNIX);
}

/* user_in_group is true when uid (by its passwd entry) is a member of
 * gid. */
static bool user_in_group(uid_t uid, gid_t gid)
{
	struct passwd pw, *pwp = NULL;
	char buf[4096];
	gid_t groups[256];
	int n = 256;

	if (getpwuid_r(uid, &pw, buf, sizeof buf, &pwp) != 0 || !pwp)
		return false;
	if (pw.pw_gid == gid)
		return true;
	if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) < 0)
		return false;
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

/* can_search is true when uid may pass through a directory of st's
 * owner, group and mode (by the mode bits alone). */
static bool can_search(uid_t uid, const struct stat *st)
{
	if (st->st_uid == uid)
		return st->st_mode & S_IXUSR;
	if (user_in_group(uid, st->st_gid))
		return st->st_mode & S_IXGRP;
	return st->st_mode & S_IXOTH;
}

/* warn_unreachable warns when a directory on the way to the socket stops
 * uid (by its mode bits; an ACL may say more): berthd makes the socket
 * reachable, but it changes no directory it did not create, such as a
 * 0700 $XDG_RUNTIME_DIR. who names where uid comes from ("--allow-uid
 * 1001", "principal alice (uid 1001)"). */
static void warn_unreachable(const struct api *a, const char *real, uid_t uid,
			     const char *who)
{
	char *path = strdup(real);
	size_t len;

	if (!path)
		return;
	len = strlen(path);
	/* Each directory from the root down to the socket's: its path is
	 * path up to end. */
	for (size_t end = 1; uid != 0 && end <= len; end++) {
		struct stat st;
		char c = path[end];
		bool stops;

		if (end < len && c != '/')
			continue;
		path[end] = '\0';
		stops = stat(path, &st) == 0 && !can_search(uid, &st);
		if (stops)
			log_warn("%s: that user cannot reach %s, because %s is "
				 "mode %04o (owner %lu); let them search it "
				 "(chmod o+x), or choose a --socket in a "
				 "directory they can reach", who, a->socket_path,
				 path, (unsigned)(st.st_mode & 07777),
				 (unsigned long)st.st_uid);
		path[end] = c;
		if (stops)
			break;
	}
	free(path);
}

/* check_reachable warns about each user that --allow-uid or a principal
 * of --principals lets in and a directory on the way keeps out. */
static void check_reachable(const struct api *a)
{
	char *dir = strdup(a->socket_path), *slash, *real;
	char who[128];

	if (!dir)
		return;
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	real = realpath(slash ? (*dir ? dir : "/") : ".", NULL);
	free(dir);
	if (!real)
		return;
	for (size_t i = 0; i < a->nallow_uids; i++) {
		snprintf(who, sizeof who, "--allow-uid %lu",
			 (unsigned long)a->allow_uids[i]);
		warn_unreachable(a, real, a->allow_uids[i], who);
	}
	for (size_t i = 0; i < a->principals->n; i++) {
		const struct api_principal *p = &a->principals->v[i];

		if (!p->has_uid || p->uid == geteuid())
			continue;
		snprintf(who, sizeof who, "principal %s (uid %lu)", p->name,
			 (unsigned long)p->uid);
		warn_unreachable(a, real, p->uid, who);
	}
	free(real);
}

/* other_users is true when someone besides berthd's user and root may
 * use the socket: an --allow-uid user, or a principal's Unix user. */
static bool other_users(const struct api *a)
{
	if (a->nallow_uids > 0)
		return true;
	for (size_t i = 0; i < a->principals->n; i++)
		if (a->principals->v[i].has_uid &&
		    a->principals->v[i].uid != geteuid() &&
		    a->principals->v[i].uid != 0)
			return true;
	return false;
}

static int start_unix(struct api *a, char **errmsg)
{
	/* With --allow-uid (or a principal that is another Unix user) the
	 * socket is reachable to every user and the peer check in conn.c
	 * filters, as the option promises; without it, only berthd's user
	 * may even open it. */
	bool shared = other_users(a);
	mode_t mode = shared ? 0666 : 0600, old;
	int rc;

	if (a->unix_passed)
		goto init;
	if (strlen(a->socket_path) >= sizeof((struct sockaddr_un *)0)->sun_path) {
		*errmsg = berth_strf("the socket path %s is too long (at most %zu "
				     "bytes)", a->socket_path,
				     sizeof((struct sockaddr_un *)0)->sun_path - 1);
		return -ENAMETOOLONG;
	}
	rc = make_dirs(a->socket_path, shared ? 0711 : 0700);
	if (rc < 0) {
		*errmsg = berth_strf("cannot create the directory of %s: %s",
				     a->socket_path, strerror(-rc));
		return rc;
	}
	if (clear_stale(a->socket_path, errmsg) < 0)
		return -EADDRINUSE;
init:
	rc = uv_pipe_init(a->loop, &a->unix_listener, 0);
	if (rc < 0) {
		*errmsg = berth_strf("cannot make the socket: %s", uv_strerror(rc));
		return rc;
	}
	a->unix_listener.data = a;
	a->handles++;
	a->unix_bound = true;
	/* berthd's own socket is created with its mode (the umask covers
	 * the moment between bind and chmod); a passed one has its unit's
	 * mode. The peer check in conn.c is the real guard. */
	if (a->unix_passed) {
		rc = api_activation_open_pipe(&a->unix_listener);
	} else {
		old = umask(0777 & ~mode);
		rc = uv_pipe_bind(&a->unix_listener, a->socket_path);
		umask(old);
		if (rc == 0 && chmod(a->socket_path, mode) < 0)
			rc = -errno;
		if (rc == 0 && shared)
			check_reachable(a);
	}
	if (rc >= 0)
		rc = uv_listen((uv_stream_t *)&a->unix_listener, LISTEN_BACKLOG,
			       on_unix_connection);
	if (rc < 0) {
		*errmsg = berth_strf("cannot listen on %s: %s", a->socket_path,
				     uv_strerror(rc));
		return rc;
	}
	return 0;
}

/* ---- TCP ---------------------------------------------------------------- */

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
	accept_or_defer(a, server, API_TRANSPORT_TCP);
}

static int start_tcp(struct api *a, char **errmsg)
{
	struct sockaddr_storage ss;
	int rc;

	if (!a->cfg.token_file && !api_principals_has_token(a->principals)) {
		*errmsg = berth_strf("%s needs --token-file, or a principal with a "
				     "token in --principals: TCP clients must "
				     "authenticate", api_activation_address("listen")
				     ? "the TCP socket passed as 'listen'" : "--listen");
		return -EINVAL;
	}
	if (api_parse_address(a->cfg.listen, true, &ss, NULL) < 0) {
		*errmsg = berth_strf("--listen takes HOST:PORT (a numeric address), "
				     "not '%s'", a->cfg.listen);
		return -EINVAL;
	}
	rc = uv_tcp_init(a->loop, &a->tcp_listener);
	if (rc < 0) {
		*errmsg = berth_strf("cannot make a TCP socket: %s", uv_strerror(rc));
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
		*errmsg = berth_strf("cannot listen on %s: %s", a->cfg.listen,
				     uv_strerror(rc));
		return rc;
	}
	return 0;
}

/* ---- events ------------------------------------------------------------- */

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

/* ---- start and stop ----------------------------------------------------- */

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
	api_conn_stop(a);
	if (!uv_is_closing((uv_handle_t *)&a->accept_later))
		uv_close((uv_handle_t *)&a->accept_later, on_listener_close);
	if (!uv_is_closing((uv_handle_t *)&a->turn))
		uv_close((uv_handle_t *)&a->turn, on_listener_close);
	if (!uv_is_closing((uv_handle_t *)&a->replay_later))
		uv_close((uv_handle_t *)&a->replay_later, on_listener_close);
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
	if (!a) {
		api_principals_free(cfg->principals);
		return -ENOMEM;
	}
	a->principals = cfg->principals ? cfg->principals
					: api_principals_new();
	a->loop = loop;
	a->worker = w;
	a->store = st;
	a->cfg = *cfg;
	a->cfg.principals = NULL; /* a->principals owns them */
	if (!a->cfg.max_line)
		a->cfg.max_line = DEFAULT_MAX_LINE;
	if (a->cfg.max_depth <= 0)
		a->cfg.max_depth = DEFAULT_MAX_DEPTH;
	if (a->cfg.max_connections <= 0)
		a->cfg.max_connections = DEFAULT_MAX_CONNECTIONS;
	if (a->cfg.max_unauth <= 0)
		a->cfg.max_unauth = DEFAULT_MAX_UNAUTH;
	if (a->cfg.login_ms <= 0)
		a->cfg.login_ms = DEFAULT_LOGIN_MS;
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
	if (!a->principals || !a->socket_path ||
	    (cfg->nallow_uids && !a->allow_uids)) {
		api_free(a);
		return -ENOMEM;
	}
	if (a->principals->declared && cfg->token_file) {
		/* Which principal would that token be? The file of
		 * principals says who each token is; one outside it would be
		 * an admin nobody declared. */
		*errmsg = berth_strf("--token-file and --principals together: "
				     "declare that token as a principal in %s "
				     "instead", "the principals file");
		api_free(a);
		return -EINVAL;
	}
	a->started_ns = uv_hrtime();
	uv_prepare_init(loop, &a->flush);
	a->flush.data = a;
	a->handles++;
	uv_idle_init(loop, &a->accept_later);
	a->accept_later.data = a;
	uv_check_init(loop, &a->turn);
	a->turn.data = a;
	uv_idle_init(loop, &a->replay_later);
	a->replay_later.data = a;
	a->handles += 3;
	uv_check_start(&a->turn, on_turn);
	uv_unref((uv_handle_t *)&a->turn);
	api_conn_start(a);

	rc = api_auth_init(a, cfg->token_file, errmsg) < 0 ? -EINVAL : 0;
	if (rc == 0)
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
			*errmsg = berth_strf("out of memory");
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

int64_t api_login_ms(const struct api *a)
{
	return a->cfg.login_ms;
}

int api_max_unauth(const struct api *a)
{
	return a->cfg.max_unauth;
}

const char *api_socket_path(const struct api *a)
{
	return a->socket_path;
}

const char *api_tcp_address(const struct api *a, char *buf, size_t size)
{
	struct sockaddr_storage ss;
	int len = sizeof ss;
	char host[INET6_ADDRSTRLEN];
	const void *addr;
	unsigned port;

	if (!a->tcp_bound ||
	    uv_tcp_getsockname(&a->tcp_listener, (struct sockaddr *)&ss, &len) < 0)
		return NULL;
	if (ss.ss_family == AF_INET6) {
		addr = &((struct sockaddr_in6 *)&ss)->sin6_addr;
		port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	} else {
		addr = &((struct sockaddr_in *)&ss)->sin_addr;
		port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	}
	if (!inet_ntop(ss.ss_family, addr, host, sizeof host))
		return NULL;
	snprintf(buf, size, ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", host,
		 port);
	return buf;
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

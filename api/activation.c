/*
 * activation.c: the sockets a service manager passes and the readiness it
 * waits for (activation.h).
 */
#include "api/activation.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/strf.h"
#include "log/log.h"

/* The first passed descriptor (SD_LISTEN_FDS_START). */
#define FIRST_FD 3
/* berthd takes three sockets; a few more are refused one by one with
 * their names, a flood as a whole. */
#define MAX_PASSED 16

/* What berthd does with a passed socket, by the name it was passed under. */
static const struct role {
	const char *name;
	bool unix_socket; /* AF_UNIX, else TCP */
	const char *what; /* for messages */
} roles[] = {
	{"socket", true, "the Unix socket (--socket)"},
	{"listen", false, "the TCP socket (--listen)"},
	{"http", false, "the HTTP gateway (--http)"},
};

#define NROLES (sizeof roles / sizeof roles[0])

struct passed {
	int fd;                  /* the descriptor, or -1 once taken */
	const struct role *role;
	char name[256];          /* as LISTEN_FDNAMES gave it */
	char address[sizeof ((struct sockaddr_un *)0)->sun_path + 64];
	bool unix_socket;
};

static struct passed passed[MAX_PASSED];
static size_t npassed;

/* describe fills p's family and address from its descriptor and checks
 * that it is a listening stream socket. Returns 0 or -1 with *errmsg. */
static int describe(struct passed *p, char **errmsg)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	int type = 0, listening = 0;
	socklen_t olen = sizeof type;
	char host[INET6_ADDRSTRLEN];

	if (fcntl(p->fd, F_GETFD) < 0) {
		*errmsg = berth_strf("socket activation: descriptor %d ('%s') is "
				     "not open", p->fd, p->name);
		return -1;
	}
	if (getsockopt(p->fd, SOL_SOCKET, SO_TYPE, &type, &olen) < 0 ||
	    type != SOCK_STREAM || getsockname(p->fd, (struct sockaddr *)&ss,
					       &len) < 0) {
		*errmsg = berth_strf("socket activation: descriptor %d ('%s') is "
				     "not a stream socket (ListenStream=)", p->fd,
				     p->name);
		return -1;
	}
	olen = sizeof listening;
	if (getsockopt(p->fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &olen) < 0 ||
	    !listening) {
		*errmsg = berth_strf("socket activation: descriptor %d ('%s') is "
				     "not listening (Accept=no is what berthd "
				     "takes)", p->fd, p->name);
		return -1;
	}
	if (ss.ss_family == AF_UNIX) {
		const struct sockaddr_un *sun = (const struct sockaddr_un *)&ss;
		size_t n = len > offsetof(struct sockaddr_un, sun_path)
				   ? len - offsetof(struct sockaddr_un, sun_path) : 0;

		p->unix_socket = true;
		if (n > 0 && sun->sun_path[0] == '\0')
			/* An abstract name, shown as ss(8) shows it. */
			snprintf(p->address, sizeof p->address, "@%.*s",
				 (int)(n - 1), sun->sun_path + 1);
		else
			snprintf(p->address, sizeof p->address, "%.*s",
				 (int)strnlen(sun->sun_path, n), sun->sun_path);
	} else if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
		snprintf(p->address, sizeof p->address, "%s:%d", host,
			 ntohs(in->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
		snprintf(p->address, sizeof p->address, "[%s]:%d", host,
			 ntohs(in6->sin6_port));
	} else {
		*errmsg = berth_strf("socket activation: descriptor %d ('%s') is "
				     "neither a Unix nor a TCP socket", p->fd,
				     p->name);
		return -1;
	}
	return 0;
}

/* assign gives each passed socket its role: by name first, then an
 * unnamed Unix socket is the Unix socket when that is still free. Returns
 * 0 or -1 with *errmsg. */
static int assign(char **errmsg)
{
	const struct role *socket_role = &roles[0];

	for (size_t i = 0; i < npassed; i++) {
		struct passed *p = &passed[i];

		for (size_t r = 0; r < NROLES; r++)
			if (strcmp(p->name, roles[r].name) == 0)
				p->role = &roles[r];
		if (!p->role)
			continue;
		for (size_t k = 0; k < i; k++) {
			if (passed[k].role == p->role) {
				*errmsg = berth_strf("socket activation: descriptors "
						     "%d and %d are both named '%s'",
						     passed[k].fd, p->fd,
						     p->role->name);
				return -1;
			}
		}
		if (p->unix_socket != p->role->unix_socket) {
			*errmsg = berth_strf("socket activation: descriptor %d is "
					     "named '%s', which is %s, but it is %s "
					     "socket (%s)", p->fd, p->name,
					     p->role->what, p->unix_socket
					     ? "a Unix" : "a TCP", p->address);
			return -1;
		}
	}
	for (size_t i = 0; i < npassed; i++) {
		struct passed *p = &passed[i];
		bool taken = false;

		if (p->role)
			continue;
		for (size_t k = 0; k < npassed; k++)
			taken = taken || passed[k].role == socket_role;
		if (!p->unix_socket || taken) {
			*errmsg = berth_strf("socket activation: descriptor %d (%s) "
					     "is named '%s', which berthd does not "
					     "know: name it (FileDescriptorName=) "
					     "socket, listen or http", p->fd,
					     p->address, p->name);
			return -1;
		}
		p->role = socket_role;
	}
	return 0;
}

/* parse_count reads a whole decimal number in [0, INT_MAX], or -1. */
static long parse_count(const char *s)
{
	char *end;
	long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 0 || v > INT_MAX)
		return -1;
	return v;
}

int api_activation_init(char **errmsg)
{
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
	const char *names = getenv("LISTEN_FDNAMES");
	char *copy = NULL, *save = NULL, *tok;
	long n = 0;
	int rc = 0;

	*errmsg = NULL;
	npassed = 0;
	/* The variables are meant for the pid they name: a tool of berthd's,
	 * or a process berthd's parent started after it, must not take them
	 * for its own. */
	if (!pid || !fds || parse_count(pid) != (long)getpid())
		goto out;
	n = parse_count(fds);
	if (n < 0) {
		*errmsg = berth_strf("socket activation: LISTEN_FDS is not a "
				     "number: '%s'", fds);
		rc = -1;
		goto out;
	}
	if (n > MAX_PASSED) {
		*errmsg = berth_strf("socket activation: %ld sockets passed; berthd "
				     "takes at most 3 (socket, listen and http)", n);
		rc = -1;
		goto out;
	}
	if (names) {
		copy = strdup(names);
		if (!copy) {
			*errmsg = berth_strf("out of memory");
			rc = -1;
			goto out;
		}
	}
	/* strsep, not strtok: an empty name between two ':' is a name. */
	save = copy;
	for (long i = 0; i < n; i++) {
		struct passed *p = &passed[npassed++];

		memset(p, 0, sizeof *p);
		p->fd = FIRST_FD + (int)i;
		tok = save ? strsep(&save, ":") : NULL;
		snprintf(p->name, sizeof p->name, "%s", tok ? tok : "unknown");
		if (names && !tok) {
			*errmsg = berth_strf("socket activation: LISTEN_FDNAMES names "
					     "%ld sockets, LISTEN_FDS says %ld",
					     i, n);
			rc = -1;
			goto out;
		}
		if (describe(p, errmsg) < 0) {
			rc = -1;
			goto out;
		}
		/* No tool may inherit a listening socket: it would keep
		 * clients' connections waiting on a process that never
		 * answers them. */
		if (fcntl(p->fd, F_SETFD, FD_CLOEXEC) < 0) {
			*errmsg = berth_strf("socket activation: descriptor %d: %s",
					     p->fd, strerror(errno));
			rc = -1;
			goto out;
		}
	}
	if (n > 0 && names && save) {
		*errmsg = berth_strf("socket activation: LISTEN_FDNAMES names more "
				     "sockets than LISTEN_FDS (%ld) says", n);
		rc = -1;
		goto out;
	}
	rc = assign(errmsg);
	for (size_t i = 0; rc == 0 && i < npassed; i++)
		log_info("socket activation: %s on %s (descriptor %d)",
			 passed[i].role->what, passed[i].address, passed[i].fd);
out:
	free(copy);
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	if (rc < 0) {
		npassed = 0;
		if (!*errmsg)
			*errmsg = berth_strf("out of memory");
		return -1;
	}
	return (int)npassed;
}

static struct passed *find(const char *name)
{
	for (size_t i = 0; i < npassed; i++)
		if (strcmp(passed[i].role->name, name) == 0)
			return &passed[i];
	return NULL;
}

const char *api_activation_address(const char *name)
{
	struct passed *p = find(name);

	return p ? p->address : NULL;
}

int api_activation_open_pipe(uv_pipe_t *pipe)
{
	struct passed *p = find("socket");
	int rc;

	if (!p || p->fd < 0)
		return 0;
	rc = uv_pipe_open(pipe, p->fd);
	if (rc < 0)
		return rc;
	p->fd = -1;
	return 1;
}

int api_activation_tcp_bind(uv_tcp_t *tcp, const char *name,
			    const struct sockaddr *addr)
{
	struct passed *p = find(name);
	int rc;

	if (!p || p->fd < 0)
		return uv_tcp_bind(tcp, addr, 0);
	rc = uv_tcp_open(tcp, p->fd);
	if (rc == 0)
		p->fd = -1;
	return rc;
}

void api_activation_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	size_t len;
	int fd;

	if (!path || !*path)
		return;
	len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof sun.sun_path) {
		log_warn("NOTIFY_SOCKET=%s is not a socket berthd can send to; "
			 "not telling the service manager %s", path, state);
		return;
	}
	memcpy(sun.sun_path, path, len);
	if (sun.sun_path[0] == '@')
		sun.sun_path[0] = '\0';
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || sendto(fd, state, strlen(state), MSG_NOSIGNAL,
			     (struct sockaddr *)&sun,
			     (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
					 len)) < 0)
		log_warn("cannot tell the service manager %s (NOTIFY_SOCKET=%s): "
			 "%s", state, path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

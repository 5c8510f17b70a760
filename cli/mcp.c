/*
 * mcp.c: `berth mcp`, a line relay between an MCP client's stdio and
 * berthd's socket.
 *
 * berthd itself is the MCP server (api/mcp.c): the socket's framing, one
 * JSON-RPC message per line, is already that of MCP's stdio transport. So
 * this program only moves lines, in both directions, with poll(). It
 * forwards whole lines only: a daemon that dies in the middle of a reply
 * can never leave half a message on stdout, where the client would read
 * it as garbage. Diagnostics go to stderr, never to stdout.
 *
 * It ends as soon as either side closes. At the end of stdin (which is how
 * MCP clients stop a stdio server) it hands the daemon the lines it has
 * read and exits 0 at once, without waiting for replies nobody will read.
 * When berthd closes the socket (a restart, a crash) it writes out the
 * whole lines it has, says so on stderr and exits 0: the client sees its
 * server end, as with any stdio server, and starts a new one when it
 * wants; every job and task is still in berthd's database.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "berth/client.h"
#include "cli/mcp.h"

/*
 * The most bytes held for one direction. A line is held whole until its
 * newline arrives; berthd refuses request lines over 16 MiB by default, and
 * its replies (a page of jobs, a tool's output) stay well below this. A
 * reply line longer than this cannot be relayed whole, so it ends the relay
 * with a message rather than a cut line on stdout.
 */
#define RELAY_MAX (64u * 1024 * 1024)
#define RELAY_CHUNK (64u * 1024)

/*
 * struct relay_dir is one direction: bytes read from in and not yet written
 * to out. buf[0, ready) are whole lines (ready is one past the last newline
 * read so far) and may be written; buf[ready, len) is a partial line.
 */
struct relay_dir {
	int in, out;
	bool out_is_socket;
	const char *what; /* for messages: "stdin" or "berthd" */
	char *buf;
	size_t len, cap, ready;
	bool eof;
};

static const char usage_text[] =
	"Usage: berth mcp [--socket PATH] [--token-file FILE]\n"
	"Serve berth's tools to an MCP client over stdio: relay MCP messages\n"
	"between stdin/stdout and berthd's socket, line for line.\n"
	"\n"
	"  --socket PATH   berthd's socket (default $BERTH_SOCKET, else\n"
	"                  $XDG_RUNTIME_DIR/berth/berth.sock, else\n"
	"                  /run/user/UID/berth/berth.sock when it exists, else\n"
	"                  ./berth.sock), or tcp:HOST:PORT\n"
	"  --token-file FILE  the token for tcp:HOST:PORT (default $BERTH_TOKEN,\n"
	"                  the token itself)\n"
	"  -h, --help      show this help and exit\n"
	"\n"
	"Put it in an MCP client's configuration as the server command, for\n"
	"example {\"command\": \"berth\", \"args\": [\"mcp\"]}. It exits 0 when\n"
	"stdin ends or berthd closes the connection, 3 when it cannot reach\n"
	"berthd.\n";

/* say writes one diagnostic line to stderr (never stdout, which carries
 * only MCP messages). */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	fputs("berth mcp: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* dir_read reads what in has into d. Returns 0, or -1 after a message for
 * an error that ends the relay. Sets d->eof at the end of input. */
static int dir_read(struct relay_dir *d)
{
	ssize_t n;
	size_t old = d->len;
	char *nl;

	if (d->cap - d->len < RELAY_CHUNK && d->cap < RELAY_MAX) {
		size_t cap = d->cap ? d->cap * 2 : 2 * RELAY_CHUNK;
		char *p;

		if (cap > RELAY_MAX)
			cap = RELAY_MAX;
		p = realloc(d->buf, cap);
		if (!p) {
			say("out of memory reading %s", d->what);
			return -1;
		}
		d->buf = p;
		d->cap = cap;
	}
	do
		n = read(d->in, d->buf + d->len, d->cap - d->len);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		if (errno == ECONNRESET) {
			d->eof = true;
			return 0;
		}
		say("reading %s: %s", d->what, strerror(errno));
		return -1;
	}
	if (n == 0) {
		d->eof = true;
		return 0;
	}
	d->len += (size_t)n;
	nl = memrchr(d->buf + old, '\n', (size_t)n);
	if (nl)
		d->ready = (size_t)(nl - d->buf) + 1;
	return 0;
}

/* dir_write writes whole lines of d to out, as much as goes without
 * blocking long. Returns 0, 1 when out is gone (EPIPE), or -1 after a
 * message. */
static int dir_write(struct relay_dir *d)
{
	size_t want = d->ready;
	ssize_t n;

	if (!d->out_is_socket && want > RELAY_CHUNK)
		want = RELAY_CHUNK; /* stdout may block: keep each write small */
	do {
		if (d->out_is_socket)
			n = send(d->out, d->buf, want, MSG_NOSIGNAL | MSG_DONTWAIT);
		else
			n = write(d->out, d->buf, want);
	} while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		if (errno == EPIPE || errno == ECONNRESET)
			return 1;
		say("writing what came from %s: %s", d->what,
		    strerror(errno));
		return -1;
	}
	memmove(d->buf, d->buf + n, d->len - (size_t)n);
	d->len -= (size_t)n;
	d->ready -= (size_t)n;
	return 0;
}

/* dir_flush writes every whole line of d, waiting for out as long as it
 * takes; for the end of the relay. Returns 0, 1 (out gone) or -1. */
static int dir_flush(struct relay_dir *d, int timeout_ms)
{
	while (d->ready > 0) {
		struct pollfd p = {.fd = d->out, .events = POLLOUT};
		int rc = poll(&p, 1, timeout_ms);

		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0)
			return -1;
		rc = dir_write(d);
		if (rc)
			return rc;
	}
	return 0;
}

/* relay moves lines between the client (stdin/stdout) and the socket
 * until either side ends. Returns the exit status. */
static int relay(int sock)
{
	struct relay_dir up = {
		.in = STDIN_FILENO, .out = sock, .out_is_socket = true,
		.what = "stdin",
	};
	struct relay_dir down = {
		.in = sock, .out = STDOUT_FILENO, .what = "berthd",
	};
	int status = 0;

	for (;;) {
		struct pollfd p[4];
		int np = 0, iu = -1, id = -1, ou = -1, od = -1;
		int rc;

		if (!up.eof && up.len < RELAY_MAX) {
			iu = np;
			p[np++] = (struct pollfd){.fd = up.in, .events = POLLIN};
		}
		if (!down.eof && down.len < RELAY_MAX) {
			id = np;
			p[np++] = (struct pollfd){.fd = down.in, .events = POLLIN};
		}
		if (up.ready > 0) {
			ou = np;
			p[np++] = (struct pollfd){.fd = up.out, .events = POLLOUT};
		}
		if (down.ready > 0) {
			od = np;
			p[np++] = (struct pollfd){.fd = down.out, .events = POLLOUT};
		}
		rc = poll(p, (nfds_t)np, -1);
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			say("poll: %s", strerror(errno));
			status = 1;
			break;
		}
		if (iu >= 0 && p[iu].revents && dir_read(&up) < 0) {
			status = 1;
			break;
		}
		if (id >= 0 && p[id].revents && dir_read(&down) < 0) {
			status = 1;
			break;
		}
		if (ou >= 0 && p[ou].revents) {
			rc = dir_write(&up);
			if (rc == 1)
				down.eof = true; /* berthd is gone */
			else if (rc < 0) {
				status = 1;
				break;
			}
		}
		if (od >= 0 && p[od].revents) {
			rc = dir_write(&down);
			if (rc == 1)
				break; /* the client stopped reading: it is gone */
			if (rc < 0) {
				status = 1;
				break;
			}
		}

		/* A request line longer than we hold goes on in pieces: berthd
		 * answers it with its own "line too large" error. A reply line
		 * that long cannot go to stdout whole, so the relay stops. */
		if (up.len == RELAY_MAX && up.ready == 0)
			up.ready = up.len;
		if (down.len == RELAY_MAX && down.ready == 0) {
			say("a message from berthd is longer than %u bytes; "
			    "stopping", RELAY_MAX);
			status = 1;
			break;
		}

		if (up.eof) {
			/* The client is done: hand berthd what it sent, and go
			 * without waiting for replies. */
			if (up.len > up.ready)
				say("stdin ended inside a message; dropped it");
			up.len = up.ready;
			(void)dir_flush(&up, 1000);
			break;
		}
		if (down.eof) {
			if (down.len > down.ready)
				say("berthd closed the connection inside a "
				    "message; dropped it");
			down.len = down.ready;
			if (dir_flush(&down, -1) >= 0)
				say("berthd closed the connection");
			break;
		}
	}
	free(up.buf);
	free(down.buf);
	return status;
}

/*
 * default_socket writes the socket to use when none is given into buf.
 * MCP clients start their servers with a trimmed environment (the
 * TypeScript SDK passes on little more than HOME and PATH), so
 * XDG_RUNTIME_DIR, which berthd's default socket lives under, is often
 * missing here although berthd had it. Then the usual runtime directory,
 * /run/user/UID, is tried before the client library's last resort,
 * ./berth.sock.
 */
static char *default_socket(char *buf, size_t size)
{
	const char *env = getenv("BERTH_SOCKET");
	const char *xdg = getenv("XDG_RUNTIME_DIR");

	if ((!env || !*env) && (!xdg || !*xdg)) {
		snprintf(buf, size, "/run/user/%lu/berth/berth.sock",
			 (unsigned long)getuid());
		if (access(buf, F_OK) == 0)
			return buf;
	}
	return berth_client_default_socket(buf, size);
}

/* authenticate sends server/auth with the token of token_file (NULL:
 * $BERTH_TOKEN) on a TCP connection, before the relay starts: the MCP
 * client knows nothing of berth's tokens. Returns 0 or an exit status
 * after saying why. */
static int authenticate(struct berth_client *c, const char *where,
			const char *token_file)
{
	const char *env = getenv("BERTH_TOKEN");
	char *token = NULL;
	json_t *err = NULL;
	int rc;

	if (token_file)
		token = berth_client_read_token(token_file);
	else if (env && *env)
		token = strdup(env);
	if (!token) {
		if (token_file)
			say("cannot read the token file %s: %s", token_file,
			    errno == EINVAL ? "it is empty" : strerror(errno));
		else
			say("%s is a TCP listener: it takes a token (give "
			    "--token-file FILE, or the token in $BERTH_TOKEN)",
			    where);
		return 2;
	}
	rc = berth_client_auth(c, token, &err);
	explicit_bzero(token, strlen(token));
	free(token);
	if (rc == 1)
		say("berthd refused the token: %s",
		    json_string_value(json_object_get(err, "message")));
	else if (rc < 0)
		say("%s: the connection failed while authenticating: %s",
		    where, strerror(-rc));
	json_decref(err);
	return rc == 0 ? 0 : rc == 1 ? 1 : 3;
}

static const struct option long_options[] = {
	{"socket", required_argument, NULL, 's'},
	{"token-file", required_argument, NULL, 't'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

int cli_mcp_main(int argc, char **argv)
{
	char defpath[PATH_MAX];
	const char *where = NULL, *token_file = NULL;
	struct berth_client *c;
	int sock, flags, c_opt, status;

	optind = 1;
	opterr = 0;
	while ((c_opt = getopt_long(argc, argv, "+h", long_options, NULL)) != -1) {
		switch (c_opt) {
		case 's':
			where = optarg;
			break;
		case 't':
			token_file = optarg;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			if (optopt == 's' || optopt == 't')
				fprintf(stderr, "berth mcp: %s needs a %s\n",
					optopt == 's' ? "--socket"
						      : "--token-file",
					optopt == 's' ? "path" : "file");
			else
				fprintf(stderr, "berth mcp: unknown option "
					"'%s'\n", argv[optind - 1]);
			fputs("Try 'berth mcp --help'.\n", stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "berth mcp: unexpected argument '%s'\n"
			"Try 'berth mcp --help'.\n", argv[optind]);
		return 2;
	}
	if (!where)
		where = default_socket(defpath, sizeof defpath);

	/* A client that goes away while we write must not kill us with
	 * SIGPIPE: the write fails with EPIPE and the relay ends cleanly. */
	signal(SIGPIPE, SIG_IGN);

	c = berth_client_connect(where);
	if (!c) {
		fprintf(stderr, "berth mcp: cannot connect to %s: %s (is berthd "
			"running?)\n", where, strerror(errno));
		return 3;
	}
	if (strncmp(where, "tcp:", 4) == 0 &&
	    (status = authenticate(c, where, token_file)) != 0) {
		berth_client_close(c);
		return status;
	}
	sock = berth_client_fd(c);
	flags = fcntl(sock, F_GETFL);
	if (flags >= 0)
		(void)fcntl(sock, F_SETFL, flags | O_NONBLOCK);
	status = relay(sock);
	berth_client_close(c);
	return status;
}

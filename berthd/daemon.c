/*
 * daemon.c: berth_main, the whole daemon over libberth: options, the
 * store, the worker, the api, signals and an orderly shutdown.
 *
 * Start-up order follows the dependencies (store, worker, api) and
 * shutdown runs it backwards, so that no component ever outlives what it
 * uses: the worker stops running jobs and puts them back while the store
 * is still open, the api closes its connections, and the store commits
 * what it holds last.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <uv.h>

#include "api/api.h"
#ifdef BERTH_HAVE_HTTP
#include "http/http.h"
#endif
#include "berth/berth.h"
#include "log/log.h"
#include "store/store.h"
#include "worker/worker.h"

#define MAX_TOOL_DIRS 64
#define MAX_ALLOW_UIDS 64

struct daemon {
	uv_loop_t loop;
	uv_signal_t sigterm;
	uv_signal_t sigint;
	struct store *store;
	struct worker *worker;
	struct api *api;
	struct http *http; /* --http, or NULL */
	bool stopping;
	int status; /* exit status */
};

struct options {
	const char *db;
	const char *socket;
	const char *tool_dirs[MAX_TOOL_DIRS];
	size_t ntool_dirs;
	int workers;
	int durability;
	const char *listen;
	const char *token_file;
	const char *http;
	bool http_open;
	uid_t allow_uids[MAX_ALLOW_UIDS];
	size_t nallow_uids;
	int64_t default_timeout_ms;
	int64_t retention_ms;
	const char *node;
	int64_t lease_ms;
	const char *migrate_from;
	bool quiet;
	int log_level;
};

static const char usage_text[] =
	"Usage: berthd [OPTION]...\n"
	"Run agent tools as durable background jobs, served over a local socket.\n"
	"\n"
	"  --db PATH              the SQLite database (default ./berth.db)\n"
	"  --socket PATH          the Unix socket (default\n"
	"                         $XDG_RUNTIME_DIR/berth/berth.sock, else ./berth.sock)\n"
	"  --tools DIR            load every *.json tool manifest in DIR (repeatable)\n"
	"  --workers N            jobs that may run at once (default 4)\n"
	"  --durability MODE      full (default: survives power loss) or normal\n"
	"                         (survives a crash of berthd, not of the machine)\n"
	"  --listen HOST:PORT     also serve TCP (loopback unless HOST says otherwise);\n"
	"                         needs --token-file\n"
	"  --token-file FILE      the token TCP clients send with server/auth (and\n"
	"                         HTTP clients as Bearer); 32 random bytes, mode 0600\n"
	"  --allow-uid UID        let this user use the Unix socket too (repeatable);\n"
	"                         the socket is then mode 0666 and the peer check\n"
	"                         (SO_PEERCRED) alone decides who is served\n"
	"  --default-timeout MS   timeout of a job whose tool and submit name none\n"
	"                         (default 300000)\n"
	"  --retention MS         keep finished jobs and their events this long\n"
	"                         (default 604800000, 7 days)\n"
	"  --node NAME            this node's name among the berthd nodes sharing a\n"
	"                         PostgreSQL database (default $BERTH_NODE, else the\n"
	"                         host name)\n"
	"  --lease-ms MS          how long a node vouches for its running jobs\n"
	"                         without renewing (PostgreSQL; default 15000)\n"
	"  --migrate-from PATH    copy the SQLite database PATH into the PostgreSQL\n"
	"                         database of --db, then exit\n"
	"  --http HOST:PORT       also serve HTTP: REST, events, /metrics and the\n"
	"                         approval inbox page (docs/HTTP.md); it logs a\n"
	"                         login URL (good once, for 10 minutes);\n"
	"                         --token-file's token works as Bearer\n"
	"  --http-open            no authentication on --http (loopback only)\n"
	"  --log-level LEVEL      error, warn, info (default) or debug: what berthd\n"
	"                         logs on stderr, one line per event\n"
	"  --quiet                do not log the start-up line\n"
	"  -h, --help             show this help and exit\n"
	"  -V, --version          show the version and exit\n"
	"\n"
	"--db takes a SQLite file path, or a postgres:// or postgresql:// URL for a\n"
	"queue that several berthd nodes share (docs/POSTGRES.md).\n"
	"\n"
	"SIGTERM or SIGINT stops taking work, puts running jobs back to pending\n"
	"without using up a retry, and exits 0.\n";

enum {
	OPT_DB = 256,
	OPT_SOCKET,
	OPT_TOOLS,
	OPT_WORKERS,
	OPT_DURABILITY,
	OPT_LISTEN,
	OPT_TOKEN_FILE,
	OPT_ALLOW_UID,
	OPT_DEFAULT_TIMEOUT,
	OPT_RETENTION,
	OPT_NODE,
	OPT_LEASE_MS,
	OPT_MIGRATE_FROM,
	OPT_HTTP,
	OPT_HTTP_OPEN,
	OPT_QUIET,
	OPT_LOG_LEVEL,
};

static const struct option long_options[] = {
	{"db", required_argument, NULL, OPT_DB},
	{"socket", required_argument, NULL, OPT_SOCKET},
	{"tools", required_argument, NULL, OPT_TOOLS},
	{"workers", required_argument, NULL, OPT_WORKERS},
	{"durability", required_argument, NULL, OPT_DURABILITY},
	{"listen", required_argument, NULL, OPT_LISTEN},
	{"token-file", required_argument, NULL, OPT_TOKEN_FILE},
	{"allow-uid", required_argument, NULL, OPT_ALLOW_UID},
	{"default-timeout", required_argument, NULL, OPT_DEFAULT_TIMEOUT},
	{"retention", required_argument, NULL, OPT_RETENTION},
	{"node", required_argument, NULL, OPT_NODE},
	{"lease-ms", required_argument, NULL, OPT_LEASE_MS},
	{"migrate-from", required_argument, NULL, OPT_MIGRATE_FROM},
	{"http", required_argument, NULL, OPT_HTTP},
	{"http-open", no_argument, NULL, OPT_HTTP_OPEN},
	{"quiet", no_argument, NULL, OPT_QUIET},
	{"log-level", required_argument, NULL, OPT_LOG_LEVEL},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

/* parse_int64 parses a whole decimal number in [min, max] into *out;
 * returns 0 or -1. */
static int parse_int64(const char *s, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end != '\0' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* parse_options fills o from argv. Returns 0 to run, 1 when it printed the
 * help or version (exit 0), or 2 after a usage error was printed. */
static int parse_options(int argc, char **argv, struct options *o)
{
	int c;
	int64_t v;

	memset(o, 0, sizeof *o);
	o->db = "./berth.db";
	o->durability = STORE_DURABILITY_FULL;
	o->log_level = LOG_LEVEL_INFO;
	optind = 1;
	while ((c = getopt_long(argc, argv, "hV", long_options, NULL)) != -1) {
		switch (c) {
		case OPT_DB:
			o->db = optarg;
			break;
		case OPT_SOCKET:
			o->socket = optarg;
			break;
		case OPT_TOOLS:
			if (o->ntool_dirs == MAX_TOOL_DIRS) {
				fprintf(stderr, "berthd: at most %d --tools\n",
					MAX_TOOL_DIRS);
				return 2;
			}
			o->tool_dirs[o->ntool_dirs++] = optarg;
			break;
		case OPT_WORKERS:
			if (parse_int64(optarg, 1, 1000, &v)) {
				fprintf(stderr, "berthd: --workers takes a "
					"number from 1 to 1000, not '%s'\n",
					optarg);
				return 2;
			}
			o->workers = (int)v;
			break;
		case OPT_DURABILITY:
			if (strcmp(optarg, "full") == 0) {
				o->durability = STORE_DURABILITY_FULL;
			} else if (strcmp(optarg, "normal") == 0) {
				o->durability = STORE_DURABILITY_NORMAL;
			} else {
				fprintf(stderr, "berthd: --durability is full "
					"or normal, not '%s'\n", optarg);
				return 2;
			}
			break;
		case OPT_LISTEN:
			o->listen = optarg;
			break;
		case OPT_TOKEN_FILE:
			o->token_file = optarg;
			break;
		case OPT_ALLOW_UID:
			if (o->nallow_uids == MAX_ALLOW_UIDS ||
			    parse_int64(optarg, 0, UINT_MAX - 1, &v)) {
				fprintf(stderr, "berthd: --allow-uid takes a "
					"numeric user id (at most %d), not "
					"'%s'\n", MAX_ALLOW_UIDS, optarg);
				return 2;
			}
			o->allow_uids[o->nallow_uids++] = (uid_t)v;
			break;
		case OPT_DEFAULT_TIMEOUT:
			if (parse_int64(optarg, 1, INT64_MAX / 2, &v)) {
				fprintf(stderr, "berthd: --default-timeout takes "
					"milliseconds, not '%s'\n", optarg);
				return 2;
			}
			o->default_timeout_ms = v;
			break;
		case OPT_RETENTION:
			if (parse_int64(optarg, 1, INT64_MAX / 2, &v)) {
				fprintf(stderr, "berthd: --retention takes "
					"milliseconds, not '%s'\n", optarg);
				return 2;
			}
			o->retention_ms = v;
			break;
		case OPT_NODE:
			o->node = optarg;
			break;
		case OPT_LEASE_MS:
			if (parse_int64(optarg, 100, INT64_MAX / 2, &v)) {
				fprintf(stderr, "berthd: --lease-ms takes "
					"milliseconds (at least 100), not "
					"'%s'\n", optarg);
				return 2;
			}
			o->lease_ms = v;
			break;
		case OPT_MIGRATE_FROM:
			o->migrate_from = optarg;
			break;
		case OPT_HTTP:
			o->http = optarg;
			break;
		case OPT_HTTP_OPEN:
			o->http_open = true;
			break;
		case OPT_QUIET:
			o->quiet = true;
			break;
		case OPT_LOG_LEVEL:
			o->log_level = log_level_parse(optarg);
			if (o->log_level < 0) {
				fprintf(stderr, "berthd: --log-level is error, "
					"warn, info or debug, not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 1;
		case 'V':
			printf("berthd %s\n", BERTH_VERSION);
			return 1;
		default:
			fputs("Try 'berthd --help'.\n", stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "berthd: unexpected argument '%s'\n"
			"Try 'berthd --help'.\n", argv[optind]);
		return 2;
	}
	if (o->listen && !o->token_file) {
		fputs("berthd: --listen needs --token-file: TCP clients must "
		      "authenticate\n", stderr);
		return 2;
	}
	return 0;
}

/* raise_nofile lifts the soft limit on open files to the hard one, so that
 * many idle clients cost descriptors, not refusals. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void on_store_closed(void *arg)
{
	struct daemon *d = arg;

	d->store = NULL;
	uv_close((uv_handle_t *)&d->sigterm, NULL);
	uv_close((uv_handle_t *)&d->sigint, NULL);
}

static void on_api_stopped(void *arg)
{
	struct daemon *d = arg;

	d->api = NULL;
	worker_destroy(d->worker);
	d->worker = NULL;
	store_close(d->store, on_store_closed, d);
}

#ifdef BERTH_HAVE_HTTP
static void on_worker_stopped(void *arg);

static void on_http_stopped(void *arg)
{
	struct daemon *d = arg;

	d->http = NULL;
	on_worker_stopped(d);
}
#endif

static void on_worker_stopped(void *arg)
{
	struct daemon *d = arg;

#ifdef BERTH_HAVE_HTTP
	/* The gateway's requests run on the api: it goes first. */
	if (d->http) {
		http_stop(d->http, on_http_stopped, d);
		return;
	}
#endif
	if (d->api)
		api_stop(d->api, on_api_stopped, d);
	else
		on_api_stopped(d);
}

static void on_signal(uv_signal_t *h, int signum)
{
	struct daemon *d = h->data;

	if (d->stopping) {
		log_info("already stopping (%s again)", strsignal(signum));
		return;
	}
	d->stopping = true;
	log_info("%s: stopping", strsignal(signum));
	worker_shutdown(d->worker, on_worker_stopped, d);
}

/* start builds the daemon's components in dependency order. Returns 0, or
 * 1 after printing why start-up failed. */
static int start(struct daemon *d, const struct options *o,
		 const struct berth_tool *const *tools, size_t ntools)
{
	struct store_config scfg = {
		.path = o->db,
		.durability = o->durability,
		.node = o->node,
		.lease_ms = o->lease_ms,
	};
	struct worker_config wcfg = {
		.workers = o->workers,
		.default_timeout_ms = o->default_timeout_ms,
		.retention_ms = o->retention_ms,
	};
	struct api_config acfg = {
		.socket_path = o->socket,
		.listen = o->listen,
		.token_file = o->token_file,
		.allow_uids = o->allow_uids,
		.nallow_uids = o->nallow_uids,
	};
	char *err = NULL;
	int rc;

	rc = store_open(&d->loop, &scfg, &d->store, &err);
	if (rc < 0) {
		log_error("%s", err ? err : strerror(-rc));
		free(err);
		return 1;
	}
	d->worker = worker_create(&d->loop, d->store, &wcfg);
	if (!d->worker) {
		log_error("out of memory");
		return 1;
	}
	for (size_t i = 0; i < ntools; i++) {
		if (worker_add_tool(d->worker, tools[i], &err) < 0) {
			log_error("%s", err);
			free(err);
			return 1;
		}
	}
	for (size_t i = 0; i < o->ntool_dirs; i++) {
		if (worker_load_dir(d->worker, o->tool_dirs[i], &err) < 0) {
			log_error("%s", err);
			free(err);
			return 1;
		}
	}
	if (worker_start(d->worker, &err) < 0) {
		log_error("%s", err ? err : "cannot start");
		free(err);
		return 1;
	}
	rc = api_start(&d->loop, d->worker, d->store, &acfg, &d->api, &err);
	if (rc < 0) {
		log_error("%s", err ? err : strerror(-rc));
		free(err);
		return 1;
	}
#ifdef BERTH_HAVE_HTTP
	if (o->http) {
		struct http_config hcfg = {
			.listen = o->http,
			.open = o->http_open,
		};

		rc = http_start(&d->loop, d->api, d->worker, d->store, &hcfg,
				&d->http, &err);
		if (rc < 0) {
			log_error("%s", err ? err : strerror(-rc));
			free(err);
			return 1;
		}
	}
#endif
	if (!o->quiet)
		log_info("berthd %s: serving %s (database %s, durability %s, "
			 "%zu tools)", BERTH_VERSION, api_socket_path(d->api),
			 store_path(d->store), store_durability_name(d->store),
			 worker_tool_count(d->worker));
	return 0;
}

/* abandon tears down what start built when start-up failed part way. */
static void on_abandon_stopped(void *arg)
{
	struct daemon *d = arg;

	if (d->api) {
		/* A later step (--http) failed after the api started. */
		api_stop(d->api, on_api_stopped, d);
		return;
	}
	worker_destroy(d->worker);
	d->worker = NULL;
	store_close(d->store, on_store_closed, d);
}

static void abandon(struct daemon *d)
{
	if (d->worker)
		worker_shutdown(d->worker, on_abandon_stopped, d);
	else if (d->store)
		store_close(d->store, on_store_closed, d);
	else
		on_store_closed(d);
}

/* migrate copies the SQLite database of --migrate-from into the database of
 * --db and returns the exit status. */
static int migrate(const struct options *o)
{
	char *err = NULL;
	int rc = store_copy(o->migrate_from, o->db, &err);

	if (rc < 0) {
		log_error("%s", err ? err : strerror(-rc));
		free(err);
		return 1;
	}
	printf("berthd: copied %s into %s\n", o->migrate_from, o->db);
	return 0;
}

int berth_main(int argc, char **argv, const struct berth_tool *const *tools,
	       size_t ntools)
{
	struct daemon d;
	struct options o;
	char nthreads[16];
	int rc;

	rc = parse_options(argc, argv, &o);
	if (rc)
		return rc == 1 ? 0 : 2;
	log_set_level(o.log_level);
	if (o.migrate_from)
		return migrate(&o);

	/* The pool must be sized before libuv first uses it: one thread per
	 * worker slot, and a few more so that filesystem requests and
	 * checkpoint waits never queue behind long-running tools. */
	snprintf(nthreads, sizeof nthreads, "%d",
		 (o.workers ? o.workers : 4) + 4);
	setenv("UV_THREADPOOL_SIZE", nthreads, 1);
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();

	memset(&d, 0, sizeof d);
	uv_loop_init(&d.loop);
	uv_signal_init(&d.loop, &d.sigterm);
	uv_signal_init(&d.loop, &d.sigint);
	d.sigterm.data = &d;
	d.sigint.data = &d;

	if (start(&d, &o, tools, ntools)) {
		d.status = 1;
		d.stopping = true;
		abandon(&d);
	} else {
		uv_signal_start(&d.sigterm, on_signal, SIGTERM);
		uv_signal_start(&d.sigint, on_signal, SIGINT);
	}
	uv_run(&d.loop, UV_RUN_DEFAULT);
	if (uv_loop_close(&d.loop) != 0)
		log_warn("the loop closed with handles still open");
	return d.status;
}

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
#include <sched.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <uv.h>

#include "api/activation.h"
#include "api/api.h"
#include "api/principal.h"
#ifdef BERTH_HAVE_HTTP
#include "http/http.h"
#endif
#include "berth/berth.h"
#include "common/duration.h"
#include "log/log.h"
#include "store/store.h"
#include "worker/worker.h"

#define MAX_TOOL_DIRS 64
#define MAX_ALLOW_UIDS 64

/*
 * The slots (berthd --help, "Slots"). Jobs that only wait cost a process,
 * its memory and four descriptors (an external tool), or nothing but a
 * little memory (a sleep, a worker process's run), so their default is
 * large: a slot per WORKER_MEMORY of the machine's memory, at most
 * DEFAULT_WORKERS, and fewer when the open-file limit allows fewer. A
 * claim only takes jobs into free slots, so the slots should hold more
 * than the jobs in flight: with 8 connections x 32 sleeps in flight,
 * bench/compare measured 4,417 jobs/s with 256 slots and 8,096/s with
 * 1,000 (docs/BENCHMARKS.md). Runs that take a thread are CPU work: more
 * than the CPUs only share them. libuv's pool has at most 1024 threads,
 * four of them spares (worker_create).
 */
#define DEFAULT_WORKERS 1024
#define WORKER_MEMORY (16 << 20)
#define MAX_WORKERS 100000
#define MAX_THREADS 1020

/*
 * How long running jobs may go on finishing after SIGTERM, unless
 * --shutdown-grace says otherwise. It is why a stop with jobs running took
 * 10 s before the option existed: the worker waited this long for them
 * before stopping them. Enough for most tool calls to end and commit their
 * result rather than run again after the restart, and, with the 5 s that
 * a tool ignoring SIGTERM is given before SIGKILL, well inside systemd's
 * 90 s stop timeout.
 */
#define SHUTDOWN_GRACE_MS 10000

struct daemon {
	uv_loop_t loop;
	uv_signal_t sigterm;
	uv_signal_t sigint;
	uv_signal_t sighup;
	struct store *store;
	struct worker *worker;
	struct api *api;
	struct http *http; /* --http, or NULL */
	bool stopping;
	bool stopping_now;   /* a second SIGTERM or SIGINT came */
	bool worker_stopped; /* no job runs any more: the rest is quick */
	int64_t shutdown_grace_ms;
	int status; /* exit status */
};

struct options {
	const char *db;
	const char *socket;
	const char *tool_dirs[MAX_TOOL_DIRS];
	size_t ntool_dirs;
	int workers;
	int threads;
	int cluster_workers;
	int durability;
	const char *listen;
	const char *token_file;
	const char *principals;
	const char *http;
	bool http_open;
	uid_t allow_uids[MAX_ALLOW_UIDS];
	size_t nallow_uids;
	int64_t default_timeout_ms;
	int64_t retention_ms;
	const char *node;
	int64_t lease_ms;
	int64_t shutdown_grace_ms;
	int64_t kill_grace_ms;
	int64_t start_timeout_ms;
	int64_t heartbeat_ms;
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
	"  --tools DIR            load every *.json tool manifest in DIR (repeatable;\n"
	"                         SIGHUP reads them again)\n"
	"  --workers N            jobs that may run at once, of every kind but a\n"
	"                         worker process's (default one per 16 MiB of\n"
	"                         memory, at most 1024, fewer when the open-file\n"
	"                         limit is low)\n"
	"  --threads N            of those, runs of C tools whose execute takes a\n"
	"                         thread (CPU work) at once (default: the CPUs, at\n"
	"                         least 2)\n"

	"  --durability MODE      full (default: survives power loss) or normal\n"
	"                         (survives a crash of berthd, not of the machine)\n"
	"  --listen HOST:PORT     also serve TCP (loopback unless HOST says otherwise);\n"
	"                         needs --token-file or --principals\n"
	"  --token-file FILE      the token TCP clients send with server/auth (and\n"
	"                         HTTP clients as Bearer); 32 random bytes, mode 0600\n"
	"  --allow-uid UID        let this user use the Unix socket too (repeatable);\n"
	"                         the socket is then mode 0666 and the peer check\n"
	"                         (SO_PEERCRED) alone decides who is served\n"
	"  --principals FILE      who may do what: principals (a token or a Unix\n"
	"                         user each) and their roles, as JSON; mode 0600.\n"
	"                         The submitter of a job may then not approve it\n"
	"                         unless its tool's approvalPolicy says so\n"
	"  --default-timeout DURATION\n"
	"                         timeout of a job whose tool and submit name none\n"
	"                         (default 5m)\n"
	"  --start-timeout DURATION\n"
	"                         how long an external tool's process may take to\n"
	"                         start before its try fails (default 1m)\n"
	"  --retention DURATION   keep finished jobs and their events this long\n"
	"                         (default 7d)\n"
	"  --node NAME            this node's name among the berthd nodes sharing a\n"
	"                         PostgreSQL database (default $BERTH_NODE, else the\n"
	"                         host name)\n"
	"  --lease-ms DURATION    how long a node vouches for its running jobs\n"
	"                         without renewing (PostgreSQL; default\n"
	"                         $BERTH_LEASE_MS milliseconds, else 15s)\n"
	"  --shutdown-grace DURATION\n"
	"                         how long running jobs may go on finishing after\n"
	"                         SIGTERM or SIGINT (default 10s; 0: none)\n"
	"  --kill-grace DURATION  how long a tool told to stop (SIGTERM, or a worker\n"
	"                         process's abort) has before it is killed or its\n"
	"                         run given up (default 5s)\n"
	"  --heartbeat DURATION   ping a worker process silent this long, and drop it\n"
	"                         after two unanswered pings (default 10s;\n"
	"                         docs/WORKERS.md)\n"
	"  --migrate-from PATH    copy the SQLite database PATH into the PostgreSQL\n"
	"                         database of --db, then exit\n"
	"  --http HOST:PORT       also serve HTTP: REST, events, /metrics and the\n"
	"                         approval inbox page (docs/HTTP.md); it logs a\n"
	"                         login URL (good once, for 10 minutes);\n"
	"                         --token-file's token works as Bearer\n"
	"  --http-open            no authentication on --http, which it needs\n"
	"                         (loopback only)\n"
	"  --log-level LEVEL      error, warn, info (default) or debug: what berthd\n"
	"                         logs on stderr, one line per event\n"
	"  --quiet                do not log the start-up line\n"
	"  -h, --help             show this help and exit\n"
	"  -V, --version          show the version and exit\n";

/* The rest of --help: ISO C asks compilers for string literals of 4095
 * bytes only. */
static const char usage_more[] =
	"\n"
	"DURATION is milliseconds, or a number with a unit: 500ms, 30s, 5m, 1h, 7d.\n"
	"--db takes a SQLite file path, or a postgres:// or postgresql:// URL for a\n"
	"queue that several berthd nodes share (docs/POSTGRES.md). There,\n"
	"--cluster-workers N makes a node start jobs only while fewer than N run\n"
	"over all the nodes (default: no such bound; --workers is each node's own).\n"
	"\n"
	"Slots: a job that only waits (an external tool's process, the built-in\n"
	"sleep, a nonblocking C tool) takes one of --workers; a C tool that runs on\n"
	"a thread takes one of --threads as well, so that CPU work never holds the\n"
	"slots of the jobs that wait, nor they its threads. Claims take up to\n"
	"--threads more of these (at least 64, at most half the other slots), which\n"
	"wait, running, for a thread; their timeout starts when they do. A worker\n"
	"process's job takes neither: its connection's concurrency is its room\n"
	"(docs/WORKERS.md).\n"
	"\n"
	"Timeouts: a job's timeout (its tool's, its submission's, else\n"
	"--default-timeout) is the time its tool gets to run, from when it starts:\n"
	"an external tool's process once it has exec'd, a C tool's execute once it\n"
	"has a thread, a worker process's run once it was sent. An external tool's\n"
	"wait to start (behind other starts, or in an exec the kernel holds up) is\n"
	"bounded by --start-timeout instead.\n"
	"\n"
	"A service manager may pass the sockets instead (systemd's socket\n"
	"activation, LISTEN_FDS): those named socket, listen and http stand for\n"
	"the three options' own; see berthd(8).\n";

/* And the signals, apart for the same reason. */
static const char usage_signals[] =
	"\n"
	"SIGTERM or SIGINT stops taking work and lets running jobs finish for the\n"
	"--shutdown-grace; the jobs still running then are stopped (their tools get\n"
	"SIGTERM, and SIGKILL after the --kill-grace; a worker process is told to\n"
	"abort) and put back to pending without using up a\n"
	"retry, and berthd exits 0. A second SIGTERM or SIGINT stops at once: the\n"
	"tools get SIGKILL and their jobs are recovered at the next start as after\n"
	"a crash: back to pending with the attempt counted, or failed (interrupted)\n"
	"when its tries are used up (maxRetries + 1, at least 2) or the tool\n"
	"says onInterrupt \"fail\".\n"
	"\n"
	"SIGHUP reads the --tools folders again: new, changed and removed manifests\n"
	"take effect, and a manifest that does not load keeps its old definition\n"
	"(the log says why). Running jobs of a changed tool finish under the\n"
	"definition they started with; the jobs of a removed tool wait, and run if\n"
	"it comes back.\n";

enum {
	OPT_DB = 256,
	OPT_SOCKET,
	OPT_TOOLS,
	OPT_WORKERS,
	OPT_THREADS,
	OPT_CLUSTER_WORKERS,
	OPT_DURABILITY,
	OPT_LISTEN,
	OPT_TOKEN_FILE,
	OPT_PRINCIPALS,
	OPT_ALLOW_UID,
	OPT_DEFAULT_TIMEOUT,
	OPT_RETENTION,
	OPT_NODE,
	OPT_LEASE_MS,
	OPT_SHUTDOWN_GRACE,
	OPT_KILL_GRACE,
	OPT_START_TIMEOUT,
	OPT_HEARTBEAT,
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
	{"threads", required_argument, NULL, OPT_THREADS},
	{"cluster-workers", required_argument, NULL, OPT_CLUSTER_WORKERS},
	{"durability", required_argument, NULL, OPT_DURABILITY},
	{"listen", required_argument, NULL, OPT_LISTEN},
	{"token-file", required_argument, NULL, OPT_TOKEN_FILE},
	{"principals", required_argument, NULL, OPT_PRINCIPALS},
	{"allow-uid", required_argument, NULL, OPT_ALLOW_UID},
	{"default-timeout", required_argument, NULL, OPT_DEFAULT_TIMEOUT},
	{"retention", required_argument, NULL, OPT_RETENTION},
	{"node", required_argument, NULL, OPT_NODE},
	{"lease-ms", required_argument, NULL, OPT_LEASE_MS},
	{"shutdown-grace", required_argument, NULL, OPT_SHUTDOWN_GRACE},
	{"kill-grace", required_argument, NULL, OPT_KILL_GRACE},
	{"start-timeout", required_argument, NULL, OPT_START_TIMEOUT},
	{"heartbeat", required_argument, NULL, OPT_HEARTBEAT},
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

/* parse_duration reads the duration arg of option name into *out, at least
 * min milliseconds. Returns 0, or -1 after printing a usage error. */
static int parse_duration(const char *name, const char *arg, int64_t min,
			  int64_t *out)
{
	int64_t v;

	if (berth_parse_duration(arg, &v) == 0 && v >= min) {
		*out = v;
		return 0;
	}
	if (min > 0 && berth_parse_duration(arg, &v) == 0)
		/* Well-formed, and too short: say how short may be. */
		fprintf(stderr, "berthd: --%s takes a duration of at least %lld "
			"ms (milliseconds, or a number with a unit: 500ms, "
			"30s, 5m, 1h, 7d), not '%s'\n", name, (long long)min,
			arg);
	else
		fprintf(stderr, "berthd: --%s takes a duration (milliseconds, "
			"or a number with a unit: 500ms, 30s, 5m, 1h, 7d), "
			"not '%s'\n", name, arg);
	return -1;
}

/* is_pg_url: s names a PostgreSQL database, as --db takes it. */
static bool is_pg_url(const char *s)
{
	return strncmp(s, "postgres://", 11) == 0 ||
	       strncmp(s, "postgresql://", 13) == 0;
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
	o->shutdown_grace_ms = SHUTDOWN_GRACE_MS;
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
			if (parse_int64(optarg, 1, MAX_WORKERS, &v)) {
				fprintf(stderr, "berthd: --workers takes a "
					"number from 1 to %d, not '%s'\n",
					MAX_WORKERS, optarg);
				return 2;
			}
			o->workers = (int)v;
			break;
		case OPT_CLUSTER_WORKERS:
			if (parse_int64(optarg, 1, 1000000, &v)) {
				fprintf(stderr, "berthd: --cluster-workers takes "
					"a number from 1 to 1000000, not '%s'\n",
					optarg);
				return 2;
			}
			o->cluster_workers = (int)v;
			break;
		case OPT_THREADS:
			if (parse_int64(optarg, 1, MAX_THREADS, &v)) {
				fprintf(stderr, "berthd: --threads takes a "
					"number from 1 to %d, not '%s'\n",
					MAX_THREADS, optarg);
				return 2;
			}
			o->threads = (int)v;
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
		case OPT_PRINCIPALS:
			o->principals = optarg;
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
			if (parse_duration("default-timeout", optarg, 1,
					   &o->default_timeout_ms))
				return 2;
			break;
		case OPT_RETENTION:
			if (parse_duration("retention", optarg, 1,
					   &o->retention_ms))
				return 2;
			break;
		case OPT_NODE:
			o->node = optarg;
			break;
		case OPT_LEASE_MS:
			if (parse_duration("lease-ms", optarg, 100, &o->lease_ms))
				return 2;
			break;
		case OPT_SHUTDOWN_GRACE:
			if (parse_duration("shutdown-grace", optarg, 0,
					   &o->shutdown_grace_ms))
				return 2;
			break;
		case OPT_KILL_GRACE:
			if (parse_duration("kill-grace", optarg, 1,
					   &o->kill_grace_ms))
				return 2;
			break;
		case OPT_START_TIMEOUT:
			if (parse_duration("start-timeout", optarg, 1,
					   &o->start_timeout_ms))
				return 2;
			break;
		case OPT_HEARTBEAT:
			if (parse_duration("heartbeat", optarg, 10,
					   &o->heartbeat_ms))
				return 2;
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
			fputs(usage_more, stdout);
			fputs(usage_signals, stdout);
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
	if (o->listen && !o->token_file && !o->principals) {
		fputs("berthd: --listen needs --token-file (or --principals with "
		      "a token): TCP clients must authenticate\n", stderr);
		return 2;
	}
	if (o->principals && o->token_file) {
		fputs("berthd: --token-file and --principals together: declare "
		      "that token as a principal instead\n", stderr);
		return 2;
	}
	if (o->principals && o->http_open) {
		fputs("berthd: --http-open and --principals together: an open "
		      "gateway would let anyone act as an admin\n", stderr);
		return 2;
	}
	/* Checked here, in the options' words: store_copy only knows its two
	 * arguments. */
	if (o->migrate_from && is_pg_url(o->migrate_from)) {
		fprintf(stderr, "berthd: --migrate-from takes the path of the SQLite "
			"database to copy, not a URL ('%s')\n", o->migrate_from);
		return 2;
	}
	if (o->cluster_workers && !is_pg_url(o->db)) {
		fprintf(stderr, "berthd: --cluster-workers bounds the jobs of the "
			"nodes that share a PostgreSQL database: --db must be a "
			"postgres:// or postgresql:// URL, not '%s' (one SQLite "
			"node's bound is --workers)\n", o->db);
		return 2;
	}
	if (o->migrate_from && !is_pg_url(o->db)) {
		fprintf(stderr, "berthd: --migrate-from copies into PostgreSQL: --db "
			"must be a postgres:// or postgresql:// URL, not '%s'\n", o->db);
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

/* default_workers returns --workers' default: a slot per WORKER_MEMORY of
 * memory, at most DEFAULT_WORKERS, and no more than the open-file limit
 * leaves room for (an external tool's run holds four descriptors, and the
 * database, sockets and clients need some); at least 4. After
 * raise_nofile. */
static int default_workers(void)
{
	struct rlimit rl;
	int64_t n = DEFAULT_WORKERS;
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);

	if (pages > 0 && page > 0 && (int64_t)pages * page / WORKER_MEMORY < n)
		n = (int64_t)pages * page / WORKER_MEMORY;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    ((int64_t)rl.rlim_cur - 256) / 4 < n)
		n = ((int64_t)rl.rlim_cur - 256) / 4;
	return n < 4 ? 4 : (int)n;
}

/* default_threads returns --threads' default: the CPUs this process may
 * run on, at least 2 (one long C tool must not hold every thread). */
static int default_threads(void)
{
	cpu_set_t set;
	int n = 0;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n = CPU_COUNT(&set);
	if (n <= 0)
		n = (int)sysconf(_SC_NPROCESSORS_ONLN);
	return n < 2 ? 2 : n > MAX_THREADS ? MAX_THREADS : n;
}

static void on_store_closed(void *arg)
{
	struct daemon *d = arg;

	d->store = NULL;
	uv_close((uv_handle_t *)&d->sigterm, NULL);
	uv_close((uv_handle_t *)&d->sigint, NULL);
	uv_close((uv_handle_t *)&d->sighup, NULL);
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

	d->worker_stopped = true;
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

static const char *signal_name(int signum)
{
	switch (signum) {
	case SIGTERM:
		return "SIGTERM";
	case SIGINT:
		return "SIGINT";
	case SIGHUP:
		return "SIGHUP";
	default:
		return strsignal(signum);
	}
}

/* format_ms writes ms for a person ("10s", "1.5s", "250ms") into buf. */
static const char *format_ms(char buf[32], int64_t ms)
{
	if (ms >= 1000 && ms % 1000 == 0)
		snprintf(buf, 32, "%llds", (long long)(ms / 1000));
	else if (ms >= 1000)
		snprintf(buf, 32, "%.1fs", (double)ms / 1000);
	else
		snprintf(buf, 32, "%lldms", (long long)ms);
	return buf;
}

/*
 * on_signal stops berthd. The first SIGTERM or SIGINT lets running jobs
 * finish for the shutdown grace (worker_shutdown); a second one while they
 * are still running stops them at once (worker_shutdown_now). Once no job
 * runs, what is left (closing connections, the last commit) takes
 * milliseconds and is not cut short.
 */
static void on_signal(uv_signal_t *h, int signum)
{
	struct daemon *d = h->data;
	struct worker_stats ws;
	char grace[32];
	int n;

	if (d->stopping) {
		if (d->stopping_now || d->worker_stopped || !d->worker) {
			log_info("%s again: already stopping", signal_name(signum));
			return;
		}
		d->stopping_now = true;
		n = worker_shutdown_now(d->worker);
		log_info("%s again: stopping now; %d running job%s stopped, "
			 "recovered at the next start as after a crash",
			 signal_name(signum), n, n == 1 ? "" : "s");
		return;
	}
	d->stopping = true;
	worker_stats(d->worker, &ws);
	if (ws.running == 0)
		log_info("%s: stopping", signal_name(signum));
	else if (d->shutdown_grace_ms == 0)
		log_info("%s: stopping; %d running job%s stopped now and put "
			 "back to pending (--shutdown-grace 0)",
			 signal_name(signum), ws.running,
			 ws.running == 1 ? "" : "s");
	else
		log_info("%s: stopping; %d running job%s may finish within "
			 "%s (--shutdown-grace), then %s stopped and put back "
			 "to pending; a second SIGTERM or SIGINT stops at once",
			 signal_name(signum), ws.running,
			 ws.running == 1 ? "" : "s",
			 format_ms(grace, d->shutdown_grace_ms),
			 ws.running == 1 ? "it is" : "they are");
	worker_shutdown(d->worker, on_worker_stopped, d);
}

/* on_sighup reloads the --tools folders (worker_reload logs what
 * changed). */
static void on_sighup(uv_signal_t *h, int signum)
{
	struct daemon *d = h->data;

	if (d->stopping) {
		log_info("SIGHUP: berthd is stopping; nothing is reloaded");
		return;
	}
	log_info("SIGHUP: reading the --tools folders again");
	worker_reload(d->worker);
}

/* on_store_fatal: a database too large to check at open failed the
 * integrity check the store ran before its first write (store.h). Nothing
 * was written to it and every write was refused; berthd stops and exits
 * 1. The store logged what is wrong. */
static void on_store_fatal(void *arg, const char *message)
{
	struct daemon *d = arg;

	d->status = 1;
	if (d->stopping)
		return;
	d->stopping = true;
	log_error("stopping: the database fails its integrity check");
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
		.on_fatal = on_store_fatal,
		.fatal_arg = d,
	};
	struct worker_config wcfg = {
		.workers = o->workers,
		.threads = o->threads,
		.cluster_workers = o->cluster_workers,
		.default_timeout_ms = o->default_timeout_ms,
		.retention_ms = o->retention_ms,
		.kill_grace_ms = o->kill_grace_ms,
		.start_timeout_ms = o->start_timeout_ms,
		.heartbeat_ms = o->heartbeat_ms,
		/* The worker reads 0 as its default and a negative grace as
		 * none. */
		.shutdown_grace_ms = o->shutdown_grace_ms > 0
					     ? o->shutdown_grace_ms
					     : -1,
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

	d->shutdown_grace_ms = o->shutdown_grace_ms;
	/* Read first: a principals file that does not load stops berthd
	 * before it touches the database. */
	if (o->principals &&
	    (api_principals_load(o->principals, &acfg.principals, &err) < 0 ||
	     api_principals_check_users(acfg.principals, o->allow_uids,
					o->nallow_uids, &err) < 0)) {
		log_error("%s", err ? err : "cannot read --principals");
		free(err);
		api_principals_free(acfg.principals);
		return 1;
	}
	/* With principals, a request is not its own approval (docs/API.md);
	 * without, every caller is one trust domain, as before. */
	wcfg.self_approval = o->principals == NULL;
	/* Forked before any thread is started or the database opened
	 * (worker/keeper.c). */
	if ((rc = worker_keeper_start()) < 0)
		log_warn("cannot start the keeper (%s): should berthd die, what "
			 "its tools started runs on until its next start",
			 strerror(-rc));
	rc = store_open(&d->loop, &scfg, &d->store, &err);
	if (rc < 0) {
		log_error("%s", err ? err : strerror(-rc));
		free(err);
		goto fail;
	}
	d->worker = worker_create(&d->loop, d->store, &wcfg);
	if (!d->worker) {
		log_error("out of memory");
		goto fail;
	}
	for (size_t i = 0; i < ntools; i++) {
		if (worker_add_tool(d->worker, tools[i], &err) < 0) {
			log_error("%s", err);
			free(err);
			goto fail;
		}
	}
	for (size_t i = 0; i < o->ntool_dirs; i++) {
		if (worker_load_dir(d->worker, o->tool_dirs[i], &err) < 0) {
			log_error("%s", err);
			free(err);
			goto fail;
		}
	}
	if (worker_start(d->worker, &err) < 0) {
		log_error("%s", err ? err : "cannot start");
		free(err);
		goto fail;
	}
	rc = api_start(&d->loop, d->worker, d->store, &acfg, &d->api, &err);
	if (rc < 0) {
		log_error("%s", err ? err : strerror(-rc));
		free(err);
		return 1;
	}
#ifdef BERTH_HAVE_HTTP
	/* A socket passed as "http" (activation.h) is --http's. */
	if (o->http || api_activation_address("http")) {
		struct http_config hcfg = {
			.listen = api_activation_address("http")
				? api_activation_address("http") : o->http,
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
	if (!o->quiet) {
		/* Said whole, so that berth can be pointed at it from any
		 * folder (--socket, or BERTH_SOCKET). */
		const char *sock = api_socket_path(d->api);
		char cwd[PATH_MAX], tcp[80];
		const char *at = api_tcp_address(d->api, tcp, sizeof tcp);
		bool rel = sock[0] != '/' && getcwd(cwd, sizeof cwd);

		if (rel && strncmp(sock, "./", 2) == 0)
			sock += 2;
		log_info("berthd %s: serving %s%s%s%s%s (database %s, durability "
			 "%s, %zu tool%s)", BERTH_VERSION, rel ? cwd : "",
			 rel ? "/" : "", sock, at ? ", and TCP on " : "",
			 at ? at : "", store_path(d->store),
			 store_durability_name(d->store),
			 worker_tool_count(d->worker),
			 worker_tool_count(d->worker) == 1 ? "" : "s");
	}
	api_activation_notify("READY=1");
	return 0;
fail:
	/* api_start takes the principals; before it, they are ours. */
	api_principals_free(acfg.principals);
	return 1;
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
	char nthreads[16], *err;
	int rc;

	rc = parse_options(argc, argv, &o);
	if (rc)
		return rc == 1 ? 0 : 2;
	log_set_level(o.log_level);
	if (o.migrate_from)
		return migrate(&o);
	/* Before any tool is spawned: passed sockets are not for tools. */
	if (api_activation_init(&err) < 0) {
		log_error("%s", err);
		free(err);
		return 1;
	}
	/* Here, not with the other conflicts: a socket passed as "http"
	 * stands for --http. */
	if (o.http_open && !o.http && !api_activation_address("http")) {
		fputs("berthd: --http-open without --http HOST:PORT: there is no "
		      "HTTP gateway to open\n", stderr);
		return 2;
	}

	signal(SIGPIPE, SIG_IGN);
	raise_nofile();
	if (!o.workers)
		o.workers = default_workers();
	if (!o.threads)
		o.threads = default_threads();
	if (o.threads > o.workers)
		o.threads = o.workers;
	/* The pool must be sized before libuv first uses it: one thread per
	 * slot of --threads, and a few more so that filesystem requests and
	 * checkpoint waits never queue behind long-running tools. */
	snprintf(nthreads, sizeof nthreads, "%d", o.threads + 4);
	setenv("UV_THREADPOOL_SIZE", nthreads, 1);

	memset(&d, 0, sizeof d);
	uv_loop_init(&d.loop);
	uv_signal_init(&d.loop, &d.sigterm);
	uv_signal_init(&d.loop, &d.sigint);
	uv_signal_init(&d.loop, &d.sighup);
	d.sigterm.data = &d;
	d.sigint.data = &d;
	d.sighup.data = &d;

	/* The handlers are in place before anything is served: a client, or
	 * a service manager's reload, may signal as soon as the socket is
	 * there, and SIGHUP's default action would end berthd. A signal
	 * that arrives while start runs is handled once the loop runs. */
	uv_signal_start(&d.sigterm, on_signal, SIGTERM);
	uv_signal_start(&d.sigint, on_signal, SIGINT);
	uv_signal_start(&d.sighup, on_sighup, SIGHUP);
	if (start(&d, &o, tools, ntools)) {
		uv_signal_stop(&d.sigterm);
		uv_signal_stop(&d.sigint);
		uv_signal_stop(&d.sighup);
		d.status = 1;
		d.stopping = true;
		abandon(&d);
	}
	uv_run(&d.loop, UV_RUN_DEFAULT);
	if (uv_loop_close(&d.loop) != 0)
		log_warn("the loop closed with handles still open");
	return d.status;
}

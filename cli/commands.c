/*
 * commands.c: berth's subcommands (commands.h). Each one is a thin
 * wrapper over one method of PROTOCOL.md: it reads its arguments, calls
 * berthd, and prints the answer as a table (or JSON with --json).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "common/duration.h"

/* Statuses a job leaves by itself; `wait` waits for any other. */
static bool status_moving(const char *s)
{
	return strcmp(s, "pending") == 0 || strcmp(s, "running") == 0;
}

static bool status_terminal(const char *s)
{
	static const char *const terminal[] = {"completed", "failed",
					       "timed_out", "declined",
					       "cancelled", "expired", NULL};

	for (size_t i = 0; terminal[i]; i++)
		if (strcmp(s, terminal[i]) == 0)
			return true;
	return false;
}

int cli_parse_int(const char *s, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

json_t *cli_read_json(const char *cmd, const char *what, const char *arg)
{
	json_error_t jerr;
	json_t *v;

	if (strcmp(arg, "-") == 0)
		v = json_loadf(stdin, JSON_DECODE_ANY, &jerr);
	else
		v = json_loads(arg, JSON_DECODE_ANY, &jerr);
	if (!v)
		cli_usage_error(cmd, "%s%s is not JSON: %s (line %d, column %d)",
				what, strcmp(arg, "-") == 0 ? " (standard input)" : "",
				jerr.text, jerr.line, jerr.column);
	return v;
}

/* ---- option parsing ---------------------------------------------------- */

/* next_opt wraps getopt_long for a subcommand: it prints the command's
 * help for -h/--help (returning 'h'), and a usage error for an unknown
 * option or a missing value (returning '?'). Options come before or after
 * the positional arguments. */
static int next_opt(const char *cmd, int argc, char **argv, const char *shorts,
		    const struct option *longs)
{
	int c = getopt_long(argc, argv, shorts, longs, NULL);

	if (c == '?' || c == ':') {
		const char *arg = argv[optind - 1];

		if (c == ':')
			cli_usage_error(cmd, "option '%s' needs a value", arg);
		else
			cli_usage_error(cmd, "unknown option '%s'", arg);
		return '?';
	}
	return c;
}

static void opts_reset(void)
{
	optind = 0; /* glibc: start over, permuting again */
	opterr = 0;
}

static int help(const char *text)
{
	fputs(text, stdout);
	return CLI_OK;
}

/* positional checks the count of positional arguments left. */
static int positional(const char *cmd, int argc, int min, int max)
{
	int n = argc - optind;

	if (n < min)
		return cli_usage_error(cmd, "missing argument");
	if (n > max)
		return cli_usage_error(cmd, "too many arguments");
	return CLI_OK;
}

/* ---- job ids ----------------------------------------------------------- */

/* A job id: a UUID, 36 characters. */
#define ID_LEN 36

/*
 * resolve_id writes into id (ID_LEN + 1 bytes) the job that arg names:
 * arg itself when it is a whole id (or cannot begin one, for berthd to
 * answer), else the one job whose id begins with it, found by jobs/list's
 * idPrefix (docs/API.md), as git and docker take a unique prefix. Returns
 * CLI_OK, or an exit status after saying why: CLI_REFUSED with berthd's
 * phrase for a missing job when no id begins so, CLI_USAGE when several
 * do.
 */
static int resolve_id(struct cli *cli, const char *cmd, const char *arg,
		      char id[ID_LEN + 1])
{
	json_t *page, *jobs;
	size_t n, len = strlen(arg);
	char list[200] = "";
	int rc;

	bool hex = len > 0 && strspn(arg, "0123456789abcdefABCDEF-") == len;

	if (len > ID_LEN)
		return cli_usage_error(cmd, "'%s' is longer than a job id", arg);
	/* Ids are written in lower case; berthd reads a prefix in either. */
	for (size_t i = 0; i <= len; i++)
		id[i] = hex ? (char)tolower((unsigned char)arg[i]) : arg[i];
	if (!hex || len == ID_LEN)
		return CLI_OK;
	/* Five ids are enough to show that a prefix is ambiguous. */
	rc = cli_call(cli, "jobs/list", json_pack("{s:s, s:i}", "idPrefix", arg,
						  "limit", 5), -1, &page);
	if (rc)
		return rc;
	jobs = json_object_get(page, "jobs");
	n = json_array_size(jobs);
	if (n == 1)
		snprintf(id, ID_LEN + 1, "%s",
			 json_string_value(json_object_get(
				 json_array_get(jobs, 0), "id")));
	for (size_t i = 0; n > 1 && i < n && i < 4; i++) {
		strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
		strncat(list, json_string_value(json_object_get(
				      json_array_get(jobs, i), "id")),
			sizeof list - strlen(list) - 1);
	}
	json_decref(page);
	if (n == 1)
		return CLI_OK;
	if (n == 0) {
		json_t *err = json_pack("{s:i, s:s+, s:{s:s}}", "code", -32011,
					"message", "not found: no job ", arg,
					"data", "id", arg);

		/* Said as berthd says it of a whole id. */
		rc = cli_refusal(NULL, err);
		json_decref(err);
		return rc;
	}
	return cli_usage_error(cmd, "%s is ambiguous: it begins %s%zu job ids "
			       "(%s%s); give more of the id", arg,
			       n > 4 ? "at least " : "", n > 4 ? 5 : n, list,
			       n > 4 ? ", ..." : "");
}

/* ---- printing answers -------------------------------------------------- */

static int show_job(struct cli *cli, json_t *job)
{
	if (cli->json)
		cli_print_json(stdout, job, false);
	else
		cli_print_job(stdout, job);
	json_decref(job);
	return CLI_OK;
}

static int show_empty(struct cli *cli, json_t *result, const char *done)
{
	if (cli->json)
		cli_print_json(stdout, result, true);
	else
		puts(done);
	json_decref(result);
	return CLI_OK;
}

/* ---- waiting ----------------------------------------------------------- */

/* until_has is true when a job in status s is done waiting for: s is
 * in until (an array of names), or when until is NULL, s is not pending or
 * running. A terminal status always ends a wait. */
static bool until_has(const json_t *until, const char *s)
{
	size_t i;
	json_t *v;

	if (status_terminal(s))
		return true;
	if (!until)
		return !status_moving(s);
	json_array_foreach(until, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
			return true;
	return false;
}

/* now_ms returns a monotonic clock in milliseconds. */
static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * watch_job waits for job id with a progress bar on the terminal: it
 * subscribes to the job's events and live progress first, then reads the
 * job, so that no change can fall between the two. Returns an exit code
 * and the job as it is at the end in *out. The timeout is a deadline on
 * the clock: a job that reports progress more often than each read's
 * slice still has its wait end on time.
 */
static int watch_job(struct cli *cli, const char *id, const json_t *until,
		     int64_t timeout_ms, json_t **out)
{
	json_t *sub, *job, *progress = NULL;
	const char *status;
	int64_t deadline = timeout_ms >= 0 ? now_ms() + timeout_ms : -1;
	int rc;

	rc = cli_call(cli, "events/subscribe",
		      json_pack("{s:s, s:b}", "jobId", id, "progress", 1), -1,
		      &sub);
	if (rc)
		return rc;
	json_decref(sub);
	rc = cli_call(cli, "jobs/get", json_pack("{s:s}", "id", id), -1, &job);
	if (rc)
		return rc;
	status = json_string_value(json_object_get(job, "status"));
	progress = json_incref(json_object_get(job, "progress"));
	while (status && !until_has(until, status)) {
		int64_t slice = 250;
		json_t *note, *params;
		const char *method;

		cli_progress_bar(stdout, status, progress);
		if (deadline >= 0) {
			int64_t left = deadline - now_ms();

			if (left <= 0)
				break;
			if (left < slice)
				slice = left;
		}
		note = berth_client_next_notification(cli->client, (int)slice);
		if (!note) {
			if (errno != ETIMEDOUT) {
				cli_progress_done(stdout);
				json_decref(job);
				json_decref(progress);
				return cli_error(CLI_NOCONN, NULL, "berthd closed "
						 "the connection");
			}
			continue;
		}
		method = json_string_value(json_object_get(note, "method"));
		params = json_object_get(note, "params");
		if (method && strcmp(method, "events/progress") == 0) {
			json_decref(progress);
			progress = json_incref(params);
		} else if (method && strcmp(method, "events/event") == 0) {
			const char *s = json_string_value(
				json_object_get(params, "status"));

			if (s) {
				/* status points into job; keep a copy of
				 * the new one in the job itself. */
				json_object_set_new(job, "status", json_string(s));
				status = json_string_value(
					json_object_get(job, "status"));
			}
		}
		json_decref(note);
	}
	cli_progress_done(stdout);
	json_decref(progress);
	json_decref(job);
	return cli_call(cli, "jobs/get", json_pack("{s:s}", "id", id), -1, out);
}

/* until_names is true when until (an array, or NULL) names status s. */
static bool until_names(const json_t *until, const char *s)
{
	size_t i;
	json_t *v;

	json_array_foreach(until, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
			return true;
	return false;
}

/*
 * job_exit returns the exit status of a wait for job that ended it in
 * status s (cli.h): CLI_WAIT_TIMEOUT when the wait's timeout passed
 * before s was one it waited for, the status's own code when the job
 * ended other than completed (unless until names that status), else
 * CLI_OK.
 */
static int job_exit(const char *cmd, const char *s, const json_t *until)
{
	static const struct {
		const char *status;
		int code;
	} ends[] = {
		{"failed", CLI_JOB_FAILED},	  {"timed_out", CLI_JOB_TIMED_OUT},
		{"declined", CLI_JOB_DECLINED},	  {"cancelled", CLI_JOB_CANCELLED},
		{"expired", CLI_JOB_EXPIRED},
	};

	/* The job is printed as it is, on stdout; the word on it goes to
	 * stderr. */
	if (!until_has(until, s))
		return cli_error(CLI_WAIT_TIMEOUT, cmd, "--timeout passed first: "
				 "the job is %s", s);
	if (until_names(until, s))
		return CLI_OK;
	for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++)
		if (strcmp(s, ends[i].status) == 0)
			return ends[i].code;
	return CLI_OK;
}

/* wait_job waits for job id to reach until (NULL: the default) or for
 * timeout_ms (< 0: none), prints it, and returns job_exit's status. until
 * is borrowed. */
static int wait_job(struct cli *cli, const char *cmd, const char *id,
		    json_t *until, int64_t timeout_ms)
{
	json_t *params, *job;
	char status[32];
	int rc;

	if (cli->tty) {
		rc = watch_job(cli, id, until, timeout_ms, &job);
	} else {
		params = json_pack("{s:s}", "id", id);
		if (until)
			json_object_set(params, "until", until);
		if (timeout_ms >= 0)
			json_object_set_new(params, "timeoutMs",
					    json_integer(timeout_ms));
		rc = cli_call(cli, "jobs/wait", params, -1, &job);
	}
	if (rc)
		return rc;
	snprintf(status, sizeof status, "%s",
		 json_string_value(json_object_get(job, "status"))
			 ? json_string_value(json_object_get(job, "status"))
			 : "");
	show_job(cli, job);
	fflush(stdout);
	return job_exit(cmd, status, until);
}

/* The job statuses of PROTOCOL.md, which `wait --until` takes. */
static const char *const job_statuses[] = {
	"pending", "awaiting_approval", "running", "suspended", "completed",
	"failed", "timed_out", "declined", "cancelled", "expired", NULL,
};

#define JOB_STATUSES_TEXT                                                     \
	"pending, awaiting_approval, running, suspended, completed, failed, " \
	"timed_out, declined, cancelled, expired"

/* until_list turns --until's "a,b,c" into a new array of job statuses, or
 * returns NULL after a usage error that names what is not one. It is
 * checked here, before berth connects, so that a terminal (where berth
 * watches the job itself) and a pipe (where berthd's jobs/wait would
 * refuse it) refuse the same names with the same words. */
static json_t *until_list(const char *s)
{
	json_t *arr = json_array();

	for (const char *p = s;; p++) {
		size_t n = strcspn(p, ","), i;

		if (n == 0) {
			cli_usage_error("wait", "--until '%s' has an empty name; "
					"it takes job statuses, comma-separated "
					"(" JOB_STATUSES_TEXT ")", s);
			break;
		}
		for (i = 0; job_statuses[i]; i++)
			if (strlen(job_statuses[i]) == n &&
			    strncmp(job_statuses[i], p, n) == 0)
				break;
		if (!job_statuses[i]) {
			cli_usage_error("wait", "--until takes job statuses ("
					JOB_STATUSES_TEXT "), not '%.*s'",
					(int)n, p);
			break;
		}
		json_array_append_new(arr, json_string(job_statuses[i]));
		p += n;
		if (*p != ',')
			return arr;
	}
	json_decref(arr);
	return NULL;
}

/* status_list turns "a,b,c" into a new array of strings. */
static json_t *status_list(const char *s)
{
	json_t *arr = json_array();
	char *copy = strdup(s), *save = NULL;

	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
		json_array_append_new(arr, json_string(t));
	free(copy);
	return arr;
}

/* ---- the commands ------------------------------------------------------ */

static const struct option help_only[] = {
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

int cmd_info(struct cli *cli, int argc, char **argv)
{
	static const char text[] =
		"Usage: berth info\n"
		"Show berthd's version, database, durability, workers and the "
		"number of jobs\nin each status.\n";
	json_t *info;
	int c, rc;

	opts_reset();
	while ((c = next_opt("info", argc, argv, ":h", help_only)) != -1)
		if (c == 'h')
			return help(text);
		else
			return CLI_USAGE;
	if ((rc = positional("info", argc, 0, 0)))
		return rc;
	if ((rc = cli_call(cli, "server/info", NULL, -1, &info)))
		return rc;
	if (cli->json)
		cli_print_json(stdout, info, false);
	else
		cli_print_info(stdout, info);
	json_decref(info);
	return CLI_OK;
}

int cmd_tools(struct cli *cli, int argc, char **argv)
{
	static const char text[] =
		"Usage: berth tools [NAME]\n"
		"List the tools berthd runs: name, whether a job needs approval, "
		"whether the\ntool is paused, and its description. With NAME, "
		"show that tool: its\ndescription, the fields of its input (and "
		"of its resume data) with their\ntypes, defaults and required "
		"marks, and its approval and background\nsettings. --json prints "
		"the whole Tool objects.\n";
	json_t *all = json_array(), *page, *cursor = NULL, *tool = NULL, *t;
	const char *name;
	size_t i;
	int c, rc;

	opts_reset();
	while ((c = next_opt("tools", argc, argv, ":h", help_only)) != -1) {
		json_decref(all);
		return c == 'h' ? help(text) : CLI_USAGE;
	}
	if ((rc = positional("tools", argc, 0, 1))) {
		json_decref(all);
		return rc;
	}
	name = optind < argc ? argv[optind] : NULL;
	do {
		json_t *params = json_object();

		if (cursor)
			json_object_set(params, "cursor", cursor);
		json_decref(cursor);
		cursor = NULL;
		rc = cli_call(cli, "tools/list", params, -1, &page);
		if (rc) {
			json_decref(all);
			return rc;
		}
		json_array_extend(all, json_object_get(page, "tools"));
		cursor = json_incref(json_object_get(page, "nextCursor"));
		json_decref(page);
	} while (cursor);
	if (name) {
		/* tools/list is the one way to a Tool; one is picked here. */
		json_array_foreach(all, i, t) {
			const char *n = json_string_value(json_object_get(t, "name"));

			if (!tool && n && strcmp(name, n) == 0)
				tool = json_incref(t);
		}
		json_decref(all);
		if (!tool) {
			json_t *err = json_pack("{s:i, s:s+, s:{s:s}}", "code",
						-32011, "message",
						"not found: no tool ", name,
						"data", "id", name);

			rc = cli_refusal(NULL, err);
			json_decref(err);
			return rc;
		}
		if (cli->json)
			cli_print_json(stdout, tool, false);
		else
			cli_print_tool(stdout, tool);
		json_decref(tool);
		return CLI_OK;
	}
	if (cli->json) {
		json_t *out = json_pack("{s:o}", "tools", all);

		cli_print_json(stdout, out, false);
		json_decref(out);
	} else {
		cli_print_tools(stdout, all);
		json_decref(all);
	}
	return CLI_OK;
}

int cmd_submit(struct cli *cli, int argc, char **argv)
{
	static const char text[] =
		"Usage: berth submit TOOL [JSON|-] [OPTION]...\n"
		"Submit a job of TOOL with JSON as its input ('-' reads it from "
		"standard\ninput; default {}). Prints the new job.\n"
		"\n"
		"  --wait                 wait until the job stops running, "
		"then print it\n"
		"                         (with a progress bar on a terminal); "
		"exit as\n"
		"                         berth wait does (5 failed, 6 timed_out, "
		"...)\n"
		"  --idempotency-key KEY  the same key again, for the same tool, "
		"returns\n"
		"                         the first job\n"
		"  --priority N           higher runs first (default 0)\n"
		"  --delay DURATION       start no sooner than this from now\n"
		"  --run-at TIME          start no sooner than this ISO 8601 "
		"time\n"
		"  --timeout DURATION     fail a run that takes longer\n"
		"  --ttl DURATION         expire the job if it waits this long "
		"for approval\n"
		"                         or resume data\n"
		"  --max-retries N        retries after a failed try\n"
		"  --run-id ID            group the job with others of a run\n"
		"  --tool-call-id ID      the model's tool call id\n"
		"  --context JSON         the request context\n"
		"  --metadata JSON        metadata kept with the job\n"
		"\n"
		"DURATION is milliseconds, or a number with a unit: 500ms, 5s, "
		"2m, 1h, 1d.\n";
	enum { O_WAIT = 256, O_KEY, O_PRIO, O_DELAY, O_RUNAT, O_TIMEOUT, O_TTL,
	       O_RETRIES, O_RUNID, O_CALLID, O_CONTEXT, O_META };
	static const struct option opts[] = {
		{"wait", no_argument, NULL, O_WAIT},
		{"idempotency-key", required_argument, NULL, O_KEY},
		{"priority", required_argument, NULL, O_PRIO},
		{"delay", required_argument, NULL, O_DELAY},
		{"run-at", required_argument, NULL, O_RUNAT},
		{"timeout", required_argument, NULL, O_TIMEOUT},
		{"ttl", required_argument, NULL, O_TTL},
		{"max-retries", required_argument, NULL, O_RETRIES},
		{"run-id", required_argument, NULL, O_RUNID},
		{"tool-call-id", required_argument, NULL, O_CALLID},
		{"context", required_argument, NULL, O_CONTEXT},
		{"metadata", required_argument, NULL, O_META},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	json_t *params = json_object(), *input, *job, *v;
	bool wait = false;
	int64_t n;
	int c, rc;

	opts_reset();
	while ((c = next_opt("submit", argc, argv, ":h", opts)) != -1) {
		const char *bad = NULL;

		switch (c) {
		case 'h':
			json_decref(params);
			return help(text);
		case O_WAIT:
			wait = true;
			break;
		case O_KEY:
			json_object_set_new(params, "idempotencyKey",
					    json_string(optarg));
			break;
		case O_RUNID:
			json_object_set_new(params, "runId", json_string(optarg));
			break;
		case O_CALLID:
			json_object_set_new(params, "toolCallId",
					    json_string(optarg));
			break;
		case O_RUNAT:
			json_object_set_new(params, "runAt", json_string(optarg));
			break;
		case O_PRIO:
			if (cli_parse_int(optarg, INT32_MIN, INT32_MAX, &n))
				bad = "--priority takes a whole number";
			else
				json_object_set_new(params, "priority",
						    json_integer(n));
			break;
		case O_RETRIES:
			if (cli_parse_int(optarg, 0, 1000, &n))
				bad = "--max-retries takes a number from 0 to 1000";
			else
				json_object_set_new(params, "maxRetries",
						    json_integer(n));
			break;
		case O_DELAY:
		case O_TIMEOUT:
		case O_TTL:
			if (berth_parse_duration(optarg, &n)) {
				bad = "a duration is milliseconds or a number "
				      "with a unit (500ms, 5s, 2m, 1h, 1d)";
			} else {
				json_object_set_new(params,
						    c == O_DELAY ? "delayMs"
						    : c == O_TIMEOUT ? "timeoutMs"
								     : "ttlMs",
						    json_integer(n));
			}
			break;
		case O_CONTEXT:
		case O_META:
			v = cli_read_json("submit", c == O_CONTEXT ? "--context"
							      : "--metadata", optarg);
			if (!v) {
				json_decref(params);
				return CLI_USAGE;
			}
			json_object_set_new(params, c == O_CONTEXT ? "requestContext"
								   : "metadata", v);
			break;
		default:
			json_decref(params);
			return CLI_USAGE;
		}
		if (bad) {
			json_decref(params);
			return cli_usage_error("submit", "%s, not '%s'", bad, optarg);
		}
	}
	if ((rc = positional("submit", argc, 1, 2))) {
		json_decref(params);
		return rc;
	}
	input = optind + 1 < argc ? cli_read_json("submit", "the input", argv[optind + 1])
				  : json_object();
	if (!input) {
		json_decref(params);
		return CLI_USAGE;
	}
	json_object_set_new(params, "tool", json_string(argv[optind]));
	json_object_set_new(params, "input", input);
	if ((rc = cli_call(cli, "jobs/submit", params, -1, &job)))
		return rc;
	if (wait) {
		char id[64];

		snprintf(id, sizeof id, "%s",
			 json_string_value(json_object_get(job, "id")));
		json_decref(job);
		return wait_job(cli, "submit", id, NULL, -1);
	}
	return show_job(cli, job);
}

int cmd_get(struct cli *cli, int argc, char **argv)
{
	static const char text[] =
		"Usage: berth get ID [--view raw|display|transcript]\n"
		"Show a job. --view shows its payloads as the tool's display "
		"or transcript\ntransform presents them (default raw).\n";
	static const struct option opts[] = {
		{"view", required_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *view = NULL;
	json_t *params, *job;
	char id[ID_LEN + 1];
	int c, rc;

	opts_reset();
	while ((c = next_opt("get", argc, argv, ":h", opts)) != -1) {
		if (c == 'h')
			return help(text);
		if (c != 'v')
			return CLI_USAGE;
		view = optarg;
	}
	if ((rc = positional("get", argc, 1, 1)) ||
	    (rc = resolve_id(cli, "get", argv[optind], id)))
		return rc;
	params = json_pack("{s:s}", "id", id);
	if (view)
		json_object_set_new(params, "view", json_string(view));
	if ((rc = cli_call(cli, "jobs/get", params, -1, &job)))
		return rc;
	return show_job(cli, job);
}

/* put_word writes s to out as one word of a POSIX shell: as it is when
 * it holds nothing a shell reads, else in single quotes. */
static void put_word(FILE *out, const char *s)
{
	if (*s && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			 "0123456789_-./:,=@%+") == strlen(s)) {
		fputs(s, out);
		return;
	}
	fputc('\'', out);
	for (; *s; s++)
		if (*s == '\'')
			fputs("'\\''", out);
		else
			fputc(*s, out);
	fputc('\'', out);
}

/* print_more_hint prints, to stderr, the command that lists the page
 * after cursor next of the same listing: the cursor only holds a place, and
 * berthd applies the filters of the request that brings it, so the hint
 * gives them all again (opts, pairs of an option and its value as given;
 * NULL values are left out), and the socket when one was given. */
static void print_more_hint(const struct cli *cli, const char *const *opts,
			    size_t nopts, const char *next)
{
	fputs("more: berth", stderr);
	if (cli->socket_given) {
		fputs(" --socket ", stderr);
		put_word(stderr, cli->socket);
	}
	if (cli->token_file) {
		fputs(" --token-file ", stderr);
		put_word(stderr, cli->token_file);
	}
	fputs(" ls", stderr);
	for (size_t i = 0; i + 1 < nopts; i += 2) {
		if (!opts[i + 1])
			continue;
		fprintf(stderr, " %s ", opts[i]);
		put_word(stderr, opts[i + 1]);
	}
	fputs(" --cursor ", stderr);
	put_word(stderr, next);
	fputc('\n', stderr);
}

int cmd_ls(struct cli *cli, int argc, char **argv)
{
	static const char text[] =
		"Usage: berth ls [OPTION]...\n"
		"List jobs, newest first.\n"
		"\n"
		"  --status S[,S...]  only jobs in these statuses\n"
		"  --tool NAME        only jobs of this tool\n"
		"  --run-id ID        only jobs of this run\n"
		"  --limit N          at most N jobs per page (default 50)\n"
		"  --cursor C         the page after C (as a previous ls printed)\n"
		"  --all              every page\n"
		"\n"
		"When more jobs are left, the command that lists the next page, "
		"with the\nsame filters, is printed on standard error: more: "
		"berth ls ... --cursor C\n";
	static const struct option opts[] = {
		{"status", required_argument, NULL, 's'},
		{"tool", required_argument, NULL, 't'},
		{"run-id", required_argument, NULL, 'r'},
		{"limit", required_argument, NULL, 'l'},
		{"cursor", required_argument, NULL, 'c'},
		{"all", no_argument, NULL, 'a'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	json_t *filter = json_object(), *all = json_array(), *page;
	/* The filters as given, for the hint to the next page. */
	const char *given[] = {"--status", NULL, "--tool", NULL, "--run-id",
			       NULL, "--limit", NULL};
	const char *cursor = NULL;
	char *next = NULL;
	bool every = false;
	int64_t n;
	int c, rc = CLI_OK;

	opts_reset();
	while (rc == CLI_OK &&
	       (c = next_opt("ls", argc, argv, ":h", opts)) != -1) {
		switch (c) {
		case 'h':
			rc = help(text);
			goto out;
		case 's':
			json_object_set_new(filter, "status", status_list(optarg));
			given[1] = optarg;
			break;
		case 't':
			json_object_set_new(filter, "tool", json_string(optarg));
			given[3] = optarg;
			break;
		case 'r':
			json_object_set_new(filter, "runId", json_string(optarg));
			given[5] = optarg;
			break;
		case 'l':
			if (cli_parse_int(optarg, 1, 1000, &n))
				rc = cli_usage_error("ls", "--limit takes a "
						     "number from 1 to 1000");
			else
				json_object_set_new(filter, "limit",
						    json_integer(n));
			given[7] = optarg;
			break;
		case 'c':
			cursor = optarg;
			break;
		case 'a':
			every = true;
			break;
		default:
			rc = CLI_USAGE;
			break;
		}
	}
	if (rc || (rc = positional("ls", argc, 0, 0)))
		goto out;
	do {
		json_t *params = json_deep_copy(filter);
		const char *nc;

		if (next || cursor)
			json_object_set_new(params, "cursor",
					    json_string(next ? next : cursor));
		free(next);
		next = NULL;
		if ((rc = cli_call(cli, "jobs/list", params, -1, &page)))
			goto out;
		json_array_extend(all, json_object_get(page, "jobs"));
		nc = json_string_value(json_object_get(page, "nextCursor"));
		next = nc ? strdup(nc) : NULL;
		json_decref(page);
	} while (every && next);
	if (cli->json) {
		json_t *o = json_pack("{s:O}", "jobs", all);

		if (next)
			json_object_set_new(o, "nextCursor", json_string(next));
		cli_print_json(stdout, o, false);
		json_decref(o);
	} else {
		cli_print_jobs(stdout, all);
		if (next)
			print_more_hint(cli, given, sizeof given / sizeof given[0],
					next);
	}
out:
	free(next);
	json_decref(filter);
	json_decref(all);
	return rc;
}

int cmd_wait(struct cli *cli, int argc, char **argv)
{
	static const char text[] =
		"Usage: berth wait ID [--timeout DURATION] [--until S[,S...]]\n"
		"Wait until the job is in one of the statuses of --until "
		"(default: any but\npending and running), or until the timeout "
		"passes, then print it as it is.\nOn a terminal a progress bar "
		"shows while the job runs (the timeout is kept\nthere too). "
		"S is a job status: pending, awaiting_approval, running,\n"
		"suspended, completed, failed, timed_out, declined, cancelled, "
		"expired.\nID may be a unique prefix of the job's id.\n"
		"\n"
		"Exit status: 0 when the job completed, waits for approval or "
		"resume data, or\nreached a status --until names; 4 when the "
		"timeout passed first; 5 failed,\n6 timed_out, 7 declined, 8 "
		"cancelled, 9 expired.\n";
	static const struct option opts[] = {
		{"timeout", required_argument, NULL, 't'},
		{"until", required_argument, NULL, 'u'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	json_t *until = NULL;
	int64_t timeout = -1;
	char id[ID_LEN + 1];
	int c, rc;

	opts_reset();
	while ((c = next_opt("wait", argc, argv, ":h", opts)) != -1) {
		if (c == 'h') {
			json_decref(until);
			return help(text);
		} else if (c == 't' && berth_parse_duration(optarg, &timeout) == 0) {
			continue;
		} else if (c == 'u') {
			json_decref(until);
			if ((until = until_list(optarg)))
				continue;
			return CLI_USAGE;
		}
		json_decref(until);
		return c == 't' ? cli_usage_error("wait", "--timeout takes a "
						  "duration, not '%s'", optarg)
				: CLI_USAGE;
	}
	rc = positional("wait", argc, 1, 1);
	if (rc == CLI_OK)
		rc = resolve_id(cli, "wait", argv[optind], id);
	if (rc == CLI_OK)
		rc = wait_job(cli, "wait", id, until, timeout);
	json_decref(until);
	return rc;
}

/* job_action runs a command of the form `CMD ID [--TEXTOPT TEXT]` that
 * calls method with {id, PARAM: TEXT} and prints the job. */
static int job_action(struct cli *cli, int argc, char **argv,
		      const char *method, const char *text, const char *opt,
		      const char *param)
{
	const struct option opts[] = {
		{opt ? opt : "help", opt ? required_argument : no_argument,
		 NULL, opt ? 'x' : 'h'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *value = NULL;
	json_t *params, *job;
	char id[ID_LEN + 1];
	int c, rc;

	opts_reset();
	while ((c = next_opt(argv[0], argc, argv, ":h", opts)) != -1) {
		if (c == 'h')
			return help(text);
		if (c != 'x')
			return CLI_USAGE;
		value = optarg;
	}
	if ((rc = positional(argv[0], argc, 1, 1)) ||
	    (rc = resolve_id(cli, argv[0], argv[optind], id)))
		return rc;
	params = json_pack("{s:s}", "id", id);
	if (value)
		json_object_set_new(params, param, json_string(value));
	if ((rc = cli_call(cli, method, params, -1, &job)))
		return rc;
	return show_job(cli, job);
}

int cmd_approve(struct cli *cli, int argc, char **argv)
{
	return job_action(cli, argc, argv, "jobs/approve",
			  "Usage: berth approve ID [--note TEXT]\n"
			  "Approve a job that awaits approval; it then runs.\n",
			  "note", "note");
}

int cmd_decline(struct cli *cli, int argc, char **argv)
{
	return job_action(cli, argc, argv, "jobs/decline",
			  "Usage: berth decline ID [--reason TEXT]\n"
			  "Decline a job that awaits approval; it never runs, "
			  "and the reason is kept.\n",
			  "reason", "reason");
}

int cmd_cancel(struct cli *cli, int argc, char **argv)
{
	return job_action(cli, argc, argv, "jobs/cancel",
			  "Usage: berth cancel ID [--reason TEXT]\n"
			  "Cancel a job that has not finished; a running one "
			  "is stopped.\n",
			  "reason", "reason");
}

int cmd_retry(struct cli *cli, int argc, char **argv)
{
	return job_action(cli, argc, argv, "jobs/retry",
			  "Usage: berth retry ID\n"
			  "Submit a failed, timed-out or expired job again as "
			  "a new job with the\nsame tool, input and request "
			  "context. Prints the new job.\n",
			  NULL, NULL);
}

int cmd_resume(struct cli *cli, int argc, char **argv)
{
	static const char text[] =
		"Usage: berth resume ID [JSON|-]\n"
		"Resume a suspended job with JSON as its resume data ('-' reads "
		"it from\nstandard input; default {}). The tool runs again from "
		"the top with it.\n";
	json_t *data, *job;
	char id[ID_LEN + 1];
	int c, rc;

	opts_reset();
	while ((c = next_opt("resume", argc, argv, ":h", help_only)) != -1)
		return c == 'h' ? help(text) : CLI_USAGE;
	if ((rc = positional("resume", argc, 1, 2)))
		return rc;
	data = optind + 1 < argc ? cli_read_json("resume", "the resume data", argv[optind + 1])
				 : json_object();
	if (!data)
		return CLI_USAGE;
	if ((rc = resolve_id(cli, "resume", argv[optind], id))) {
		json_decref(data);
		return rc;
	}
	rc = cli_call(cli, "jobs/resume",
		      json_pack("{s:s, s:o}", "id", id, "resumeData", data), -1,
		      &job);
	if (rc)
		return rc;
	return show_job(cli, job);
}

static int tool_pause(struct cli *cli, int argc, char **argv, bool paused)
{
	static const char pause_text[] =
		"Usage: berth pause TOOL\n"
		"Stop starting jobs of TOOL; submissions are still accepted. "
		"Lasts across\nrestarts of berthd until `berth unpause TOOL`.\n";
	static const char unpause_text[] =
		"Usage: berth unpause TOOL\n"
		"Start jobs of a paused TOOL again.\n";
	json_t *result;
	int c, rc;

	opts_reset();
	while ((c = next_opt(argv[0], argc, argv, ":h", help_only)) != -1)
		return c == 'h' ? help(paused ? pause_text : unpause_text)
				: CLI_USAGE;
	if ((rc = positional(argv[0], argc, 1, 1)))
		return rc;
	rc = cli_call(cli, paused ? "tools/pause" : "tools/unpause",
		      json_pack("{s:s}", "name", argv[optind]), -1, &result);
	if (rc)
		return rc;
	return show_empty(cli, result, paused ? "paused" : "unpaused");
}

int cmd_pause(struct cli *cli, int argc, char **argv)
{
	return tool_pause(cli, argc, argv, true);
}

int cmd_unpause(struct cli *cli, int argc, char **argv)
{
	return tool_pause(cli, argc, argv, false);
}

int cmd_logs(struct cli *cli, int argc, char **argv)
{
	static const char text[] =
		"Usage: berth logs ID [--after N] [--limit N]\n"
		"Show a job's log: the tool's structured log lines and its "
		"captured stderr,\noldest first, after line N (default: all). "
		"--json prints one JSON line each.\n";
	static const struct option opts[] = {
		{"after", required_argument, NULL, 'a'},
		{"limit", required_argument, NULL, 'l'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int64_t after = 0, limit = -1, shown = 0;
	char id[ID_LEN + 1];
	int c, rc;

	opts_reset();
	while ((c = next_opt("logs", argc, argv, ":h", opts)) != -1) {
		if (c == 'h')
			return help(text);
		if (c == 'a' && cli_parse_int(optarg, 0, INT64_MAX, &after) == 0)
			continue;
		if (c == 'l' && cli_parse_int(optarg, 1, INT64_MAX, &limit) == 0)
			continue;
		return c == '?' ? CLI_USAGE
				: cli_usage_error("logs", c == 'a'
					? "--after takes a line's number, 0 "
					  "or more, not '%s'"
					: "--limit takes a number of lines, 1 "
					  "or more, not '%s'", optarg);
	}
	if ((rc = positional("logs", argc, 1, 1)) ||
	    (rc = resolve_id(cli, "logs", argv[optind], id)))
		return rc;
	for (;;) {
		int64_t page = limit < 0 || limit - shown > 1000 ? 1000
								 : limit - shown;
		json_t *res, *lines, *l;
		size_t i;

		rc = cli_call(cli, "jobs/logs",
			      json_pack("{s:s, s:I, s:I}", "id", id,
					"after", (json_int_t)after, "limit",
					(json_int_t)page), -1, &res);
		if (rc)
			return rc;
		lines = json_object_get(res, "lines");
		json_array_foreach(lines, i, l) {
			if (cli->json)
				cli_print_json(stdout, l, true);
			else
				cli_print_log_line(stdout, l);
		}
		shown += (int64_t)json_array_size(lines);
		after = json_integer_value(json_object_get(res, "next"));
		i = json_array_size(lines);
		json_decref(res);
		if (i == 0 || (limit >= 0 && shown >= limit))
			return CLI_OK;
		if (ferror(stdout))
			return cli_output_status();
	}
}

/* The event types of PROTOCOL.md, which `events --type` takes. */
static const char *const event_types[] = {
	"created", "approval_requested", "approved", "declined", "started",
	"suspended", "resumed", "retrying", "completed", "failed",
	"timed_out", "cancelled", "expired", NULL,
};

#define EVENT_TYPES_TEXT                                                      \
	"created, approval_requested, approved, declined, started, "          \
	"suspended, resumed, retrying, completed, failed, timed_out, "        \
	"cancelled, expired"

/* type_list appends the comma-separated event types of s to types.
 * Returns CLI_OK, or CLI_USAGE after saying which name is not one and
 * listing the thirteen, before berth connects: berthd would refuse it too
 * (-32602 naming /types), but without saying which name it was. */
static int type_list(json_t *types, const char *s)
{
	for (const char *p = s;; p++) {
		size_t n = strcspn(p, ","), i;

		if (n == 0)
			return cli_usage_error("events", "--type '%s' has an "
					       "empty name; it takes event types, "
					       "comma-separated (" EVENT_TYPES_TEXT
					       ")", s);
		for (i = 0; event_types[i]; i++)
			if (strlen(event_types[i]) == n &&
			    strncmp(event_types[i], p, n) == 0)
				break;
		if (!event_types[i])
			return cli_usage_error("events", "--type takes event "
					       "types (" EVENT_TYPES_TEXT "), not "
					       "'%.*s'", (int)n, p);
		json_array_append_new(types, json_string(event_types[i]));
		p += n;
		if (*p != ',')
			return CLI_OK;
	}
}

/* follow_events prints the events of berthd's events/subscribe with
 * params (stolen) as they come, until the connection ends. */
static int follow_events(struct cli *cli, json_t *params)
{
	json_t *res;
	int rc;

	if ((rc = cli_call(cli, "events/subscribe", params, -1, &res)))
		return rc;
	json_decref(res);
	for (;;) {
		json_t *note = berth_client_next_notification(cli->client, -1);
		json_t *ev;

		if (!note)
			return cli_error(CLI_NOCONN, NULL, "berthd closed the "
					 "connection");
		ev = json_object_get(note, "params");
		if (cli->json)
			cli_print_json(stdout, ev, true);
		else
			cli_print_event(stdout, ev);
		json_decref(note);
		/* Events that cannot be written end the following, which
		 * would otherwise go on for nothing. */
		if ((rc = cli_output_status()))
			return rc;
	}
}

/* print_events prints the events of the log after since (of job, when not
 * NULL, and of types, when it has any), page after page of events/poll,
 * to the end there is now. berthd reads them by type: a page holds only
 * those, and its next passes over the others, so a page may be empty
 * while the log goes on; the end is where next stops moving. */
static int print_events(struct cli *cli, int64_t since, const char *job,
			json_t *types)
{
	for (;;) {
		json_t *params = json_pack("{s:I, s:i}", "since",
					   (json_int_t)since, "limit", 1000);
		json_t *res, *ev;
		json_int_t next;
		size_t i;
		int rc;

		if (job)
			json_object_set_new(params, "jobId", json_string(job));
		if (json_array_size(types))
			json_object_set(params, "types", types);
		if ((rc = cli_call(cli, "events/poll", params, -1, &res)))
			return rc;
		json_array_foreach(json_object_get(res, "events"), i, ev) {
			if (cli->json)
				cli_print_json(stdout, ev, true);
			else
				cli_print_event(stdout, ev);
		}
		next = json_integer_value(json_object_get(res, "next"));
		json_decref(res);
		if (next <= since)
			return CLI_OK;
		if (ferror(stdout))
			return cli_output_status();
		since = next;
	}
}

int cmd_events(struct cli *cli, int argc, char **argv)
{
	static const char text[] =
		"Usage: berth events [--since SEQ] [--job ID] [--type T[,T...]] "
		"[--follow]\n"
		"Show the event log from after SEQ (default: the start), of one "
		"job with --job.\n--follow then keeps printing new events as "
		"they happen (without --since it\nprints only new ones). --json "
		"prints one JSON line per event.\n"
		"\n"
		"  --since SEQ        the events after this seq\n"
		"  --job ID           only this job's events (ID may be a unique "
		"prefix)\n"
		"  --type T[,T...]    only events of these types (the option may "
		"be repeated):\n"
		"                     created, approval_requested, approved, "
		"declined, started,\n"
		"                     suspended, resumed, retrying, completed, "
		"failed, timed_out,\n"
		"                     cancelled, expired\n"
		"  --follow           then print new events as they happen, until "
		"interrupted\n";
	static const struct option opts[] = {
		{"since", required_argument, NULL, 's'},
		{"job", required_argument, NULL, 'j'},
		{"type", required_argument, NULL, 't'},
		{"follow", no_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	json_t *types = json_array();
	const char *job = NULL;
	int64_t since = -1;
	bool follow = false;
	char id[ID_LEN + 1];
	int c, rc = CLI_OK;

	opts_reset();
	while (rc == CLI_OK &&
	       (c = next_opt("events", argc, argv, ":hf", opts)) != -1) {
		if (c == 'h') {
			json_decref(types);
			return help(text);
		} else if (c == 'f') {
			follow = true;
		} else if (c == 'j') {
			job = optarg;
		} else if (c == 't') {
			rc = type_list(types, optarg);
		} else if (c == 's' &&
			   cli_parse_int(optarg, 0, INT64_MAX, &since) == 0) {
			;
		} else {
			rc = c == '?' ? CLI_USAGE
				      : cli_usage_error("events", "--since takes "
							"an event seq, not '%s'",
							optarg);
		}
	}
	if (rc == CLI_OK)
		rc = positional("events", argc, 0, 0);
	if (rc == CLI_OK && job &&
	    (rc = resolve_id(cli, "events", job, id)) == CLI_OK) {
		json_t *found;

		/* The events of a job that does not exist are none, not an
		 * error: asked here, so that a mistyped or whole id of no
		 * job says so rather than print nothing, or follow forever. */
		rc = cli_call(cli, "jobs/get", json_pack("{s:s}", "id", id), -1,
			      &found);
		if (rc == CLI_OK)
			json_decref(found);
		job = id;
	}
	if (rc == CLI_OK && follow) {
		json_t *params = json_object();

		if (since >= 0)
			json_object_set_new(params, "since", json_integer(since));
		if (job)
			json_object_set_new(params, "jobId", json_string(job));
		if (json_array_size(types))
			json_object_set(params, "types", types);
		rc = follow_events(cli, params);
	} else if (rc == CLI_OK) {
		rc = print_events(cli, since < 0 ? 0 : since, job, types);
	}
	json_decref(types);
	return rc;
}

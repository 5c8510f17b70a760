/*
 * main.c: berth, the command-line client of berthd. It parses the global
 * options, picks the subcommand from one table, and maps outcomes to the
 * exit codes: 0 ok, 1 berthd said no, 2 usage, 3 cannot connect, 10 the
 * output could not be written.
 */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "berth/berth.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "common/jshort.h"
#ifdef BERTH_HAVE_VALIDATE
#include "cli/validate.h"
#endif
#ifdef BERTH_HAVE_MCP_RELAY
#include "cli/mcp.h"
#endif

static const char usage_text[] =
	"Usage: berth [--socket PATH] [--token-file FILE] [--json] COMMAND [ARGS]\n"
	"Talk to berthd, which runs agent tools as durable background jobs.\n"
	"\n"
	"Commands:\n"
	"%s"
	"\n"
	"Options (before or after the command):\n"
	"  --socket PATH      berthd's socket, or tcp:HOST:PORT (default\n"
	"                     $BERTH_SOCKET, else $XDG_RUNTIME_DIR/berth/berth.sock,\n"
	"                     else ./berth.sock)\n"
	"  --token-file FILE  the token for tcp:HOST:PORT (berthd's --token-file;\n"
	"                     default $BERTH_TOKEN, the token itself)\n"
	"  --json             print JSON for scripts instead of tables; an error is\n"
	"                     one JSON object on stderr: {\"error\": {\"message\",\n"
	"                     \"code\"?, \"data\"?}, \"exitStatus\"}\n"
	"  -h, --help         show help (berth COMMAND --help for a command)\n"
	"  -V, --version      show the version\n"
	"\n"
	"A job ID may be given by a unique prefix of it (berth get 01a2314c).\n"
	"\n"
	"Exit status: 0 ok; 1 berthd refused the request (its message is shown);\n"
	"2 usage error, also when berthd finds params invalid (a JSON input that\n"
	"fails the tool's schema) or an ID prefix is ambiguous; 3 cannot connect\n"
	"to berthd, or the connection broke. wait: 4 its --timeout passed first.\n"
	"wait and submit --wait, for a job that ended other than completed:\n"
	"5 failed, 6 timed_out, 7 declined, 8 cancelled, 9 expired (0 when\n"
	"--until names that status). 10 the output could not be written (a full\n"
	"disk, an I/O error); a reader that stops early, as head does, ends berth\n"
	"by SIGPIPE without a word.\n";

/* validate and mcp own all of their arguments: main hands them argv as
 * it came, from the subcommand's name on. */
#ifdef BERTH_HAVE_VALIDATE
/* cmd_validate hands berth validate a global --json ("berth --json
 * validate ..."), which take_global took. */
static int cmd_validate(struct cli *cli, int argc, char **argv)
{
	char **args = calloc((size_t)argc + 2, sizeof(*args));
	int n = 0, rc;

	if (!args)
		return cli_error(CLI_USAGE, "validate", "out of memory");
	args[n++] = argv[0];
	if (cli->json)
		args[n++] = (char *)"--json";
	for (int i = 1; i < argc; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	rc = cli_validate_main(n, args);
	free(args);
	return rc;
}
#endif
/* berth mcp writes its stdout itself (write(2), not stdio), and ends as
 * its docs say when the client goes away: main leaves it alone. */
static bool stdout_is_mcp;

#ifdef BERTH_HAVE_MCP_RELAY
/* cmd_mcp hands berth mcp the global --socket and --token-file given
 * before it ("berth --socket tcp:H:P mcp"), which take_global took. */
static int cmd_mcp(struct cli *cli, int argc, char **argv)
{
	char **args = calloc((size_t)argc + 5, sizeof(*args));
	int n = 0, rc;

	stdout_is_mcp = true;
	if (!args)
		return cli_error(CLI_NOCONN, "mcp", "out of memory");
	args[n++] = argv[0];
	if (cli->socket_given) {
		args[n++] = (char *)"--socket";
		args[n++] = (char *)cli->socket;
	}
	if (cli->token_file) {
		args[n++] = (char *)"--token-file";
		args[n++] = (char *)cli->token_file;
	}
	for (int i = 1; i < argc; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	rc = cli_mcp_main(n, args);
	free(args);
	return rc;
}
#endif

/* The subcommands; each parses its own arguments (argv[0] is its name). */
static const struct cli_command commands[] = {
	{"info", cmd_info, "show the daemon's version, database and job counts"},
	{"tools", cmd_tools, "list the tools berthd runs, or show one: tools [NAME]"},
	{"submit", cmd_submit, "submit a job: submit TOOL [JSON|-]"},
	{"get", cmd_get, "show a job: get ID"},
	{"ls", cmd_ls, "list jobs, newest first"},
	{"wait", cmd_wait, "wait until a job stops running: wait ID"},
	{"resume", cmd_resume, "resume a suspended job: resume ID [JSON|-]"},
	{"approve", cmd_approve, "approve a job awaiting approval: approve ID"},
	{"decline", cmd_decline, "decline a job awaiting approval: decline ID"},
	{"cancel", cmd_cancel, "cancel a job: cancel ID"},
	{"retry", cmd_retry, "submit a failed job again: retry ID"},
	{"logs", cmd_logs, "show a job's log: logs ID"},
	{"events", cmd_events, "show the event log, or follow it"},
	{"pause", cmd_pause, "stop starting jobs of a tool: pause TOOL"},
	{"unpause", cmd_unpause, "start jobs of a tool again: unpause TOOL"},
#ifdef BERTH_HAVE_VALIDATE
	{"validate", cmd_validate, "check a JSON document against a schema"},
#endif
#ifdef BERTH_HAVE_MCP_RELAY
	{"mcp", cmd_mcp, "be an MCP server on stdin and stdout (for MCP clients)"},
#endif
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void print_usage(FILE *out)
{
	char list[4096] = "";

	for (size_t i = 0; i < NCOMMANDS; i++) {
		char line[160];

		snprintf(line, sizeof line, "  %-9s %s\n", commands[i].name,
			 commands[i].summary);
		strncat(list, line, sizeof list - strlen(list) - 1);
	}
	fprintf(out, usage_text, list);
}

/* With --json, errors are JSON objects on stderr (cli_set_json_errors). */
static bool json_errors;

void cli_set_json_errors(bool on)
{
	json_errors = on;
}

/* print_json_error writes {"error": err + {"message"}, "exitStatus"} as
 * one line on stderr; err (stolen) may be NULL. */
static void print_json_error(json_t *err, const char *message, int status)
{
	json_t *o;
	char *text;

	if (!err)
		err = json_object();
	if (message)
		json_object_set_new(err, "message", json_string(message));
	o = json_pack("{s:o, s:i}", "error", err, "exitStatus", status);
	text = berth_json_short(o, JSON_COMPACT);
	if (text)
		fprintf(stderr, "%s\n", text);
	free(text);
	json_decref(o);
}

/* verror prints an error of status for cmd: "berth CMD: message" and, for
 * a usage error, a hint; or the JSON object. */
static int verror(int status, const char *cmd, const char *fmt, va_list ap)
{
	char msg[1024];

	vsnprintf(msg, sizeof msg, fmt, ap);
	if (json_errors) {
		print_json_error(NULL, msg, status);
		return status;
	}
	fprintf(stderr, "berth%s%s: %s\n", cmd ? " " : "", cmd ? cmd : "",
		msg);
	if (status == CLI_USAGE)
		fprintf(stderr, "Try 'berth %s%s--help'.\n", cmd ? cmd : "",
			cmd ? " " : "");
	return status;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = verror(CLI_USAGE, cmd, fmt, ap);
	va_end(ap);
	return rc;
}

int cli_error(int status, const char *cmd, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = verror(status, cmd, fmt, ap);
	va_end(ap);
	return rc;
}

int cli_output_status(void)
{
	int e;

	errno = 0;
	if (fflush(stdout) == 0 && !ferror(stdout))
		return CLI_OK;
	e = errno;
	if (e == EPIPE) {
		signal(SIGPIPE, SIG_DFL);
		raise(SIGPIPE);
	}
	if (e)
		return cli_error(CLI_WRITE, NULL, "cannot write the output: %s",
				 strerror(e));
	return cli_error(CLI_WRITE, NULL, "cannot write the output");
}

/* read_token returns the token for a TCP connection (malloc'd), or NULL
 * after printing why, with *status the exit status. */
static char *read_token(const struct cli *cli, int *status)
{
	const char *env = getenv("BERTH_TOKEN");
	char *token;

	*status = CLI_USAGE;
	if (cli->token_file) {
		token = berth_client_read_token(cli->token_file);
		if (!token)
			cli_usage_error(NULL, "cannot read the token file %s: "
					"%s", cli->token_file,
					errno == EINVAL ? "it is empty"
							: strerror(errno));
		return token;
	}
	if (env && *env) {
		token = strdup(env);
		if (!token)
			*status = cli_error(CLI_NOCONN, NULL, "out of memory");
		return token;
	}
	cli_usage_error(NULL, "%s is a TCP listener: it takes a token (give "
			"--token-file FILE, or the token in $BERTH_TOKEN)",
			cli->socket);
	return NULL;
}

/* tcp_port_ok is true when spec ("tcp:HOST:PORT", "tcp:[V6]:PORT") ends
 * in a port number. */
static bool tcp_port_ok(const char *spec)
{
	const char *port = strrchr(spec, ':');
	char *end;
	long p;

	if (!port || !isdigit((unsigned char)port[1]))
		return false;
	errno = 0;
	p = strtol(port + 1, &end, 10);
	return !*end && !errno && p >= 1 && p <= 65535;
}

int cli_connect(struct cli *cli)
{
	bool tcp = strncmp(cli->socket, "tcp:", 4) == 0;
	char *token = NULL;
	json_t *err = NULL;
	int rc;

	if (cli->client)
		return CLI_OK;
	if (tcp && !tcp_port_ok(cli->socket + 4))
		return cli_usage_error(NULL, "--socket %s: give tcp:HOST:PORT, "
				       "PORT a number from 1 to 65535",
				       cli->socket);
	/* The token first: without one, there is nothing to connect for. */
	if (tcp && !(token = read_token(cli, &rc)))
		return rc;
	cli->client = berth_client_connect(cli->socket);
	if (!cli->client && tcp && errno == EINVAL) {
		/* The form is right (above): the host is not found. */
		rc = cli_error(CLI_NOCONN, NULL, "cannot connect to %s: its "
			       "host is not found", cli->socket);
		free(token);
		return rc;
	}
	if (!cli->client) {
		int e = errno;

		rc = cli_error(CLI_NOCONN, NULL, "cannot connect to %s: %s (%s)",
			       cli->socket, strerror(e),
			       e == EACCES || e == EPERM
				       ? "berthd's socket is its own user's "
					 "unless it runs with --allow-uid for "
					 "yours"
				       : "is berthd running? see --socket");
		free(token);
		return rc;
	}
	if (!tcp)
		return CLI_OK;
	rc = berth_client_auth(cli->client, token, &err);
	explicit_bzero(token, strlen(token));
	free(token);
	if (rc == 0)
		return CLI_OK;
	berth_client_close(cli->client);
	cli->client = NULL;
	if (rc == 1) {
		rc = cli_refusal(NULL, err);
		json_decref(err);
		return rc;
	}
	return cli_error(CLI_NOCONN, NULL, "%s: the connection failed while "
			 "authenticating: %s", cli->socket, strerror(-rc));
}

/* already_said is true when the message of a refusal holds the one schema
 * error's message ("invalid params: limit must be ..."): it is printed
 * once. */
static bool already_said(const char *msg, const char *m)
{
	return msg && m && *m && strstr(msg, m) != NULL;
}

int cli_refusal(const char *cmd, const json_t *err)
{
	const json_t *errors = json_object_get(json_object_get(err, "data"),
					       "errors");
	const char *msg = json_string_value(json_object_get(err, "message"));
	int status = json_integer_value(json_object_get(err, "code")) ==
				     -32602
			     ? CLI_USAGE
			     : CLI_REFUSED;
	size_t i;
	json_t *e;

	if (json_errors) {
		print_json_error(json_deep_copy(err),
				 msg ? NULL : "the request was refused",
				 status);
		return status;
	}
	/* berthd's words hold what the request held (a member's name, a
	 * value): escaped, as berth prints a job's text. */
	fprintf(stderr, "berth%s%s: ", cmd ? " " : "", cmd ? cmd : "");
	cli_put(stderr, msg ? msg : "the request was refused");
	fputc('\n', stderr);
	/* Each schema error on a line of its own, the root of a document
	 * written "(root)" as berth validate writes it. */
	json_array_foreach(errors, i, e) {
		const char *path = json_string_value(
			json_object_get(e, "instancePath"));
		const char *m = json_string_value(json_object_get(e, "message"));

		if (json_array_size(errors) == 1 && already_said(msg, m))
			continue;
		fputs("  ", stderr);
		cli_put(stderr, path && *path ? path : "(root)");
		fputs(": ", stderr);
		cli_put(stderr, m);
		fputc('\n', stderr);
	}
	return status;
}

int cli_call(struct cli *cli, const char *method, json_t *params,
	     int timeout_ms, json_t **result)
{
	json_t *err = NULL;
	int rc = cli_connect(cli);

	*result = NULL;
	if (rc != CLI_OK) {
		json_decref(params);
		return rc;
	}
	rc = berth_client_call(cli->client, method, params, timeout_ms, result,
			       &err);
	json_decref(params);
	if (rc == 1) {
		rc = cli_refusal(NULL, err);
		json_decref(err);
		return rc;
	}
	if (rc < 0)
		return cli_error(CLI_NOCONN, NULL, "%s: %s", method,
				 rc == -ETIMEDOUT    ? "no answer in time"
				 : rc == -ECONNRESET ? "berthd closed the "
						       "connection"
						     : strerror(-rc));
	return CLI_OK;
}

/* take_global removes the global options from argv wherever they are
 * (the subcommand's own options stay), up to "--". Returns the new argc,
 * or -1 after a usage error. */
static int take_global(struct cli *cli, int argc, char **argv)
{
	int out = 1;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--") == 0) {
			while (i < argc)
				argv[out++] = argv[i++];
			break;
		}
		if (strcmp(a, "--json") == 0) {
			cli->json = true;
		} else if (strcmp(a, "--socket") == 0) {
			if (i + 1 >= argc) {
				cli_usage_error(NULL, "--socket needs a path");
				return -1;
			}
			cli->socket = argv[++i];
			cli->socket_given = true;
		} else if (strncmp(a, "--socket=", 9) == 0) {
			cli->socket = a + 9;
			cli->socket_given = true;
		} else if (strcmp(a, "--token-file") == 0) {
			if (i + 1 >= argc) {
				cli_usage_error(NULL, "--token-file needs a "
						"file");
				return -1;
			}
			cli->token_file = argv[++i];
		} else if (strncmp(a, "--token-file=", 13) == 0) {
			cli->token_file = a + 13;
		} else {
			argv[out++] = argv[i];
		}
	}
	argv[out] = NULL;
	return out;
}

/* run runs the command line; main checks its output after. */
static int run(int argc, char **argv)
{
	struct cli cli = {0};
	int rc;

	if (argc > 1 && (strcmp(argv[1], "validate") == 0 ||
			 strcmp(argv[1], "mcp") == 0)) {
		for (size_t i = 0; i < NCOMMANDS; i++)
			if (strcmp(commands[i].name, argv[1]) == 0)
				return commands[i].fn(&cli, argc - 1, argv + 1);
		return cli_usage_error(NULL, "%s is not built into this berth",
				       argv[1]);
	}
	/* --json anywhere before "--" makes even the first error JSON. */
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--json") == 0)
			cli_set_json_errors(true);
	argc = take_global(&cli, argc, argv);
	if (argc < 0)
		return CLI_USAGE;
	if (!cli.socket)
		cli.socket = berth_client_default_socket(cli.socket_buf,
							 sizeof cli.socket_buf);
	cli.tty = isatty(STDOUT_FILENO) && !cli.json;

	if (argc < 2) {
		if (cli.json)
			return cli_usage_error(NULL, "no command given");
		print_usage(stderr);
		return CLI_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		print_usage(stdout);
		return CLI_OK;
	}
	if (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0) {
		printf("berth %s\n", BERTH_VERSION);
		return CLI_OK;
	}
	if (strcmp(argv[1], "help") == 0) {
		if (argc < 3) {
			print_usage(stdout);
			return CLI_OK;
		}
		argv[1] = argv[2];
		argv[2] = (char *)"--help";
		argc = 3;
	}
	for (size_t i = 0; i < NCOMMANDS; i++) {
		if (strcmp(commands[i].name, argv[1]) != 0)
			continue;
		rc = commands[i].fn(&cli, argc - 1, argv + 1);
		berth_client_close(cli.client);
		return rc;
	}
	return cli_usage_error(NULL, argv[1][0] == '-' ? "unknown option '%s'"
						       : "unknown command '%s'", argv[1]);
}

int main(int argc, char **argv)
{
	int rc = run(argc, argv), out;

	/* Output that was not all written is an error (exit 10), whatever
	 * the command's own status: a script must not take a cut result
	 * for the whole one. A command that said so already is left. */
	if (rc == CLI_WRITE || stdout_is_mcp)
		return rc;
	out = cli_output_status();
	return out ? out : rc;
}

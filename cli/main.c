/*
 * main.c: berth, the command-line client of berthd. It parses the global
 * options, picks the subcommand from one table, and maps outcomes to the
 * exit codes: 0 ok, 1 berthd said no, 2 usage, 3 cannot connect.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "berth/berth.h"
#include "cli/cli.h"
#include "cli/commands.h"
#ifdef BERTH_HAVE_VALIDATE
#include "cli/validate.h"
#endif
#ifdef BERTH_HAVE_MCP_RELAY
#include "cli/mcp.h"
#endif

static const char usage_text[] =
	"Usage: berth [--socket PATH] [--json] COMMAND [ARGS]\n"
	"Talk to berthd, which runs agent tools as durable background jobs.\n"
	"\n"
	"Commands:\n"
	"%s"
	"\n"
	"Options (before or after the command):\n"
	"  --socket PATH   berthd's socket, or tcp:HOST:PORT (default\n"
	"                  $BERTH_SOCKET, else $XDG_RUNTIME_DIR/berth/berth.sock,\n"
	"                  else ./berth.sock)\n"
	"  --json          print JSON for scripts instead of tables\n"
	"  -h, --help      show help (berth COMMAND --help for a command)\n"
	"  -V, --version   show the version\n"
	"\n"
	"Exit status: 0 ok, 1 berthd refused the request (its message is shown),\n"
	"2 usage error, 3 cannot connect to berthd.\n";

/* validate and mcp own all of their arguments: main hands them argv as
 * it came, from the subcommand's name on. */
#ifdef BERTH_HAVE_VALIDATE
static int cmd_validate(struct cli *cli, int argc, char **argv)
{
	return cli_validate_main(argc, argv);
}
#endif
#ifdef BERTH_HAVE_MCP_RELAY
static int cmd_mcp(struct cli *cli, int argc, char **argv)
{
	return cli_mcp_main(argc, argv);
}
#endif

/* The subcommands; each parses its own arguments (argv[0] is its name). */
static const struct cli_command commands[] = {
	{"info", cmd_info, "show the daemon's version, database and job counts"},
	{"tools", cmd_tools, "list the tools berthd runs"},
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

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "berth%s%s: ", cmd ? " " : "", cmd ? cmd : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'berth %s%s--help'.\n", cmd ? cmd : "",
		cmd ? " " : "");
	return CLI_USAGE;
}

int cli_connect(struct cli *cli)
{
	if (cli->client)
		return CLI_OK;
	cli->client = berth_client_connect(cli->socket);
	if (!cli->client) {
		fprintf(stderr, "berth: cannot connect to %s: %s (is berthd "
			"running? see --socket)\n", cli->socket,
			strerror(errno));
		return CLI_NOCONN;
	}
	return CLI_OK;
}

/* print_refusal shows berthd's error: its message, and the failures of a
 * schema one per line. */
static void print_refusal(const json_t *err)
{
	const json_t *errors = json_object_get(json_object_get(err, "data"),
					       "errors");
	const char *msg = json_string_value(json_object_get(err, "message"));
	size_t i;
	json_t *e;

	fprintf(stderr, "berth: %s\n", msg ? msg : "the request was refused");
	json_array_foreach(errors, i, e) {
		const char *path = json_string_value(
			json_object_get(e, "instancePath"));
		const char *m = json_string_value(json_object_get(e, "message"));

		fprintf(stderr, "  %s: %s\n", path && *path ? path : "/",
			m ? m : "");
	}
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
		print_refusal(err);
		json_decref(err);
		return CLI_REFUSED;
	}
	if (rc < 0) {
		fprintf(stderr, "berth: %s: %s\n", method,
			rc == -ETIMEDOUT ? "no answer in time"
			: rc == -ECONNRESET ? "berthd closed the connection"
					    : strerror(-rc));
		return CLI_NOCONN;
	}
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
		} else if (strncmp(a, "--socket=", 9) == 0) {
			cli->socket = a + 9;
		} else {
			argv[out++] = argv[i];
		}
	}
	argv[out] = NULL;
	return out;
}

int main(int argc, char **argv)
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
	argc = take_global(&cli, argc, argv);
	if (argc < 0)
		return CLI_USAGE;
	if (!cli.socket)
		cli.socket = berth_client_default_socket(cli.socket_buf,
							 sizeof cli.socket_buf);
	cli.tty = isatty(STDOUT_FILENO) && !cli.json;

	if (argc < 2) {
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
		fflush(stdout);
		return rc;
	}
	return cli_usage_error(NULL, "unknown command '%s'", argv[1]);
}

/*
 * cli.h: what the berth command's files share: the invocation's state,
 * the calls to berthd, and the printers.
 */
#ifndef BERTH_CLI_CLI_H
#define BERTH_CLI_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "berth/client.h"

/* Exit codes of berth, as `berth --help` documents them. The job codes
 * are those of `wait` and `submit --wait`: the job ended other than
 * completed. */
enum {
	CLI_OK = 0,
	CLI_REFUSED = 1, /* berthd answered with an error */
	CLI_USAGE = 2,   /* the command line, or params berthd found invalid */
	CLI_NOCONN = 3,  /* cannot connect, or the connection failed */
	CLI_WAIT_TIMEOUT = 4, /* --timeout passed before the job got there */
	CLI_JOB_FAILED = 5,
	CLI_JOB_TIMED_OUT = 6,
	CLI_JOB_DECLINED = 7,
	CLI_JOB_CANCELLED = 8,
	CLI_JOB_EXPIRED = 9,
	CLI_WRITE = 10, /* the output could not be written */
};

struct cli {
	const char *socket;      /* --socket, $BERTH_SOCKET or the default */
	char socket_buf[512];
	bool socket_given;       /* --socket was on the command line */
	const char *token_file;  /* --token-file, or NULL: $BERTH_TOKEN */
	bool json;               /* --json: machine output */
	bool tty;                /* stdout is a terminal */
	struct berth_client *client; /* connected on first use */
};

/* cli_call calls method with params (stolen, may be NULL), waiting up to
 * timeout_ms (< 0: forever). Returns CLI_OK with *result (new reference),
 * or after printing why (cli_error's way): CLI_REFUSED, CLI_USAGE for
 * params berthd found invalid (-32602), CLI_NOCONN. */
int cli_call(struct cli *cli, const char *method, json_t *params,
	     int timeout_ms, json_t **result);

/* cli_connect connects if not yet connected, and on TCP authenticates with
 * the token of --token-file or $BERTH_TOKEN. Returns CLI_OK, or an exit
 * status after printing why. */
int cli_connect(struct cli *cli);

/* cli_set_json_errors makes every error from now on print as one JSON
 * object on stderr, {"error": {"message", "code"?, "data"?},
 * "exitStatus"} (--json), instead of a line for a person. */
void cli_set_json_errors(bool on);

/* cli_usage_error prints "berth CMD: message" and a hint to stderr and
 * returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* cli_error prints "berth CMD: message" (cmd may be NULL) to stderr and
 * returns status. */
int cli_error(int status, const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* cli_refusal prints berthd's error object err (borrowed) and returns its
 * exit status: CLI_USAGE for invalid params, else CLI_REFUSED. */
int cli_refusal(const char *cmd, const json_t *err);

/* cli_output_status flushes stdout and returns CLI_OK when all that was
 * printed to it was written, else CLI_WRITE after saying why ("cannot
 * write the output: No space left on device"). A reader that went away
 * (EPIPE, with SIGPIPE ignored) ends berth by SIGPIPE, with no word, as
 * when SIGPIPE is not ignored: `berth ls | head -1` is no error. */
int cli_output_status(void);

/* cli_parse_int reads a whole decimal number in [min, max]. */
int cli_parse_int(const char *s, int64_t min, int64_t max, int64_t *out);

/* cli_read_json parses arg as JSON, or stdin when arg is "-". Returns a
 * new reference or NULL after printing why, naming it what ("--context",
 * "the input"). */
json_t *cli_read_json(const char *cmd, const char *what, const char *arg);

/* ---- output.c ---------------------------------------------------------- */

/* cli_put writes s (NULL: "") to out with its control characters escaped
 * as JSON escapes them (\n, \u001b, ...): text a submitter, a tool or a
 * schema's author chose cannot move the cursor, change the terminal or
 * start a line that looks like one of berth's. */
void cli_put(FILE *out, const char *s);

/* cli_print_json prints v as indented JSON (or one compact line when
 * compact) to out, its reals as berth_json_short (common/jshort.h) writes
 * them. */
void cli_print_json(FILE *out, const json_t *v, bool compact);

/* cli_print_job prints a Job for a person: one field per line. */
void cli_print_job(FILE *out, const json_t *job);

/* cli_print_jobs prints Jobs as a table. */
void cli_print_jobs(FILE *out, const json_t *jobs);

/* cli_print_tools prints Tools as a table. */
void cli_print_tools(FILE *out, const json_t *tools);

/* cli_print_tool prints one Tool for a person: its description, the
 * fields of its input (and of its resume data) with their types,
 * defaults and required marks, and its approval and background
 * settings. */
void cli_print_tool(FILE *out, const json_t *tool);

/* cli_progress_text returns a job's progress for a person (malloc'd):
 * "100%" once it completed, "40% (2 of 5) message", "2 message", or ""
 * when it has none. */
char *cli_progress_text(const json_t *job);

/* cli_print_event prints one Event as a line of a table. */
void cli_print_event(FILE *out, const json_t *ev);

/* cli_print_info prints server/info's result. */
void cli_print_info(FILE *out, const json_t *info);

/* cli_print_log_line prints one line of jobs/logs. */
void cli_print_log_line(FILE *out, const json_t *line);

/* cli_progress_bar draws (or redraws, with "\r") a progress bar for a
 * job's progress object {progress, total?, message?} on out;
 * cli_progress_done ends the line it drew on. */
void cli_progress_bar(FILE *out, const char *status, const json_t *progress);
void cli_progress_done(FILE *out);

#endif

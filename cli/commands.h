/*
 * commands.h: berth's subcommands. Each takes its own argv (argv[0] is
 * the subcommand's name), prints its --help, and returns an exit code
 * (cli.h).
 */
#ifndef BERTH_CLI_COMMANDS_H
#define BERTH_CLI_COMMANDS_H

#include "cli/cli.h"

typedef int (*cli_command_fn)(struct cli *cli, int argc, char **argv);

struct cli_command {
	const char *name;
	cli_command_fn fn;
	const char *summary; /* one line for `berth --help` */
};

int cmd_info(struct cli *cli, int argc, char **argv);
int cmd_tools(struct cli *cli, int argc, char **argv);
int cmd_submit(struct cli *cli, int argc, char **argv);
int cmd_get(struct cli *cli, int argc, char **argv);
int cmd_ls(struct cli *cli, int argc, char **argv);
int cmd_wait(struct cli *cli, int argc, char **argv);
int cmd_resume(struct cli *cli, int argc, char **argv);
int cmd_approve(struct cli *cli, int argc, char **argv);
int cmd_decline(struct cli *cli, int argc, char **argv);
int cmd_cancel(struct cli *cli, int argc, char **argv);
int cmd_retry(struct cli *cli, int argc, char **argv);
int cmd_logs(struct cli *cli, int argc, char **argv);
int cmd_events(struct cli *cli, int argc, char **argv);
int cmd_pause(struct cli *cli, int argc, char **argv);
int cmd_unpause(struct cli *cli, int argc, char **argv);

#endif

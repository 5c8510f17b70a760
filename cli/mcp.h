/*
 * mcp.h: `berth mcp`, the stdio entry point of berth's MCP server.
 *
 * An MCP client starts `berth mcp` and speaks MCP's stdio transport (one
 * JSON-RPC message per line) on its stdin and stdout; berth mcp relays the
 * lines to and from berthd's socket, where the MCP methods live
 * (docs/MCP.md). Nothing but the daemon's messages is written to stdout;
 * diagnostics go to stderr.
 */
#ifndef BERTH_CLI_MCP_H
#define BERTH_CLI_MCP_H

/*
 * cli_mcp_main runs `berth mcp [--socket PATH] [--token-file FILE]`;
 * argv[0] is the subcommand name. On tcp:HOST:PORT it authenticates with
 * the token of FILE or $BERTH_TOKEN before it relays. It returns the exit status, as the other commands do: 0 when
 * either side closed (stdin at its end, or berthd went away), 1 when a
 * relay error ends it, 2 for a usage error, 3 when berthd's socket cannot
 * be reached.
 */
int cli_mcp_main(int argc, char **argv);

#endif

/*
 * mcp.h: berth as an MCP server (docs/MCP.md), on the same connections
 * and the same method table as berth's own protocol.
 *
 * MCP revision 2025-11-25 (also 2025-06-18 and 2025-03-26): initialize,
 * notifications/initialized, notifications/cancelled, tools/call (plain or
 * task-augmented), tasks/get, tasks/list, tasks/cancel and tasks/result;
 * Tasks are offered both as the core capability and as the extension
 * io.modelcontextprotocol/tasks. ping is berth's own method, whose answer
 * is already MCP's; so is tools/list, which asks api_mcp_tool_to_json for
 * each Tool. A job's id is its task id. Jobs that wait for approval or
 * resume data are answered through elicitation/create, which the server
 * sends to the client with api_conn_call (on a waiting request, and on the
 * session that created the task); task status changes are sent as
 * notifications/tasks/status.
 *
 * The per-connection state (negotiated version, client capabilities, the
 * requests that wait for a job) hangs off api_conn.ext and is freed with
 * the connection. The connections of one api share a hub: an index of the
 * jobs they watch, fed by a store listener of its own that lives as long
 * as some connection has spoken MCP.
 */
#ifndef BERTH_API_MCP_H
#define BERTH_API_MCP_H

#include "api/methods.h"

/* api_mcp_method_find returns the row of the MCP method named name, or
 * NULL when name is not one. */
const struct api_method *api_mcp_method_find(const char *name);

/*
 * api_mcp_tool_to_json returns a new reference to the Tool object of t as
 * c's client is shown it by tools/list: worker_tool_to_json's, and for a
 * connection that speaks MCP the outputSchema MCP's structuredContent
 * follows: wrapped as {"result": ...} when it does not describe an object,
 * and left out when the tool has a transcript transform (docs/MCP.md).
 */
json_t *api_mcp_tool_to_json(struct api_conn *c, const struct worker_tool *t);

#endif

/*
 * mcp_content.h: what an MCP client is shown of a tool's results
 * (docs/MCP.md, "Results"): the content blocks made from a modelOutput,
 * the structuredContent made from an output, and the outputSchema that
 * describes it.
 *
 * A tool written for the Vercel AI SDK or Mastra returns its model output
 * from toModelOutput as {"type": "text"|"json"|"content"|"error-text"|
 * "error-json"|"execution-denied", ...}; each becomes the MCP content
 * blocks that say the same thing (text, image, audio, resource,
 * resource_link, or a text that says what could not be shown).
 * MCP's structuredContent must be an object, so an output that is not one
 * is wrapped as {"result": output}, and an outputSchema that does not
 * describe an object is wrapped to match.
 *
 * These are pure functions of jansson values: they know no connection, no
 * store and no tool registry, and tests/mcp/test_content.c tests them on
 * their own. Every returned json_t is a new reference; arguments are
 * borrowed.
 */
#ifndef BERTH_API_MCP_CONTENT_H
#define BERTH_API_MCP_CONTENT_H

#include <stdbool.h>

#include <jansson.h>

/* The most bytes of a payload quoted in a text meant for a person. */
#define API_MCP_QUOTE_MAX 4000

/*
 * api_mcp_content returns the content array of a CallToolResult for the
 * model output mo of job job_id: a string is one text block; an AI SDK
 * result (above) becomes its blocks; anything else is one text block of
 * its JSON. *is_error is set when mo says the call failed (error-text,
 * error-json, execution-denied), and cleared otherwise. links false (a
 * client of 2025-03-26) turns what would be a resource_link into text.
 * Embedded resources are named berth://jobs/JOB/modelOutput/N. NULL only
 * when out of memory.
 */
json_t *api_mcp_content(const json_t *mo, const char *job_id, bool links,
			bool *is_error);

/* api_mcp_says_failed is true when the model output mo says the call
 * failed: {"type": "error-text" | "error-json" | "execution-denied"}. */
bool api_mcp_says_failed(const json_t *mo);

/* api_mcp_error_text returns the text of a model output that says the
 * call failed (malloc'd, cut to API_MCP_QUOTE_MAX bytes), or NULL when mo
 * says no such thing. */
char *api_mcp_error_text(const json_t *mo);

/* api_mcp_object_schema is true when schema describes objects only, as
 * MCP requires of an outputSchema: {"type": "object", ...}. */
bool api_mcp_object_schema(const json_t *schema);

/*
 * api_mcp_output_schema returns the outputSchema an MCP client is shown
 * for a tool's schema: a copy of it when it is an object schema, else
 * {"type": "object", "properties": {"result": schema}, "required":
 * ["result"]}, with "$schema", "$defs" and "definitions" moved to the new
 * root and the local references that pointed into the old root made to
 * point into "result" (a schema with its own "$id" resolves its
 * references itself and is left as it is). NULL only when out of memory.
 */
json_t *api_mcp_output_schema(const json_t *schema);

/*
 * api_mcp_listed_schema returns schema as MCP clients are shown it in
 * tools/list (a new reference): the same schema, but with each property
 * whose subschema is a boolean given its object form, {} for true and
 * {"not": {}} for false. JSON Schema allows either; the MCP TypeScript
 * SDK refuses a whole tools/list whose inputSchema or outputSchema has a
 * property that is not an object. NULL only when out of memory.
 */
json_t *api_mcp_listed_schema(json_t *schema);

/* api_mcp_structured returns the structuredContent for the output v (may
 * be NULL: JSON null): v itself when it is an object and wrap is false,
 * else {"result": v}. */
json_t *api_mcp_structured(const json_t *v, bool wrap);

/* api_mcp_dumps returns v as compact JSON text (malloc'd; "null" for NULL),
 * cut on a character boundary to at most max bytes with "…" when longer;
 * NULL when out of memory. */
char *api_mcp_dumps(const json_t *v, size_t max);

#endif

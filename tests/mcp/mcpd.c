/*
 * mcpd.c: a berthd with a C tool of its own for the MCP tests, built the
 * way include/berth/berth.h says a user builds one (berth_main with a
 * table). Transforms exist only for C tools, so the test that a secret a
 * transform hides never reaches an MCP client runs against this daemon.
 *
 * Its tool is Mastra's lookup-customer (the reference page's transform
 * example): the output holds an apiKey, and both the display and the
 * transcript transform show only {displayName} of an output,
 * {customerId} of an input, {question} of a suspend payload, and
 * "Customer lookup failed" for any error. The input's mode picks what the
 * run does:
 *
 *   ok       answers {displayName, apiKey, debugScore}
 *   model    the same, with a modelOutput (toModelOutput's content form)
 *   fail     fails with the apiKey in its message and data
 *   ask      suspends with {question, apiKey}; resumed, answers as ok
 *   approve  needs approval first (require_approval_fn), then as ok
 */
#include <string.h>

#include "berth/berth.h"

/* What must never reach an MCP client. */
#define SECRET "sk-live-7f3c9d2a-SECRET"

static const char *mode_of(const json_t *input)
{
	const char *m = json_string_value(json_object_get(input, "mode"));

	return m ? m : "ok";
}

static json_t *lookup(void)
{
	return json_pack("{s:s, s:s, s:f}", "displayName", "Acme", "apiKey",
			 SECRET, "debugScore", 0.97);
}

static struct berth_outcome secret_exec(const json_t *input,
					struct berth_ctx *ctx, void *data)
{
	const char *mode = mode_of(input);

	if (strcmp(mode, "fail") == 0)
		return berth_error(false, json_pack("{s:s}", "apiKey", SECRET),
				   "lookup refused key %s", SECRET);
	if (strcmp(mode, "ask") == 0 && !berth_ctx_resume_data(ctx))
		return berth_suspend(json_pack("{s:s, s:s}", "question",
					       "Which account?", "apiKey",
					       SECRET));
	if (strcmp(mode, "model") == 0)
		return berth_output_model(
			lookup(), json_pack("{s:s, s:[{s:s, s:s}]}", "type",
					    "content", "value", "type", "text",
					    "text", "Acme is a customer."));
	return berth_output(lookup());
}

static bool secret_approval(const json_t *input, void *data)
{
	return strcmp(mode_of(input), "approve") == 0;
}

/* secret_view is both the display and the transcript transform. */
static json_t *secret_view(enum berth_payload which, const json_t *payload,
			   void *data)
{
	switch (which) {
	case BERTH_PAYLOAD_INPUT:
		return json_pack("{s:O?}", "customerId",
				 json_object_get(payload, "customerId"));
	case BERTH_PAYLOAD_OUTPUT:
		return json_pack("{s:O?}", "displayName",
				 json_object_get(payload, "displayName"));
	case BERTH_PAYLOAD_ERROR:
		return json_pack("{s:s}", "message", "Customer lookup failed");
	case BERTH_PAYLOAD_SUSPEND:
		return json_pack("{s:O?}", "question",
				 json_object_get(payload, "question"));
	default:
		return NULL;
	}
}

static const struct berth_tool secret_tool = {
	.id = "mcp-secret",
	.description = "Look up a customer (Mastra's transform example).",
	.input_schema = "{\"type\":\"object\",\"properties\":{"
			"\"customerId\":{\"type\":\"string\"},"
			"\"internalPath\":{\"type\":\"string\"},"
			"\"mode\":{\"enum\":[\"ok\",\"model\",\"fail\",\"ask\","
			"\"approve\"]}},\"required\":[\"customerId\"]}",
	.output_schema = "{\"type\":\"object\",\"properties\":{"
			 "\"displayName\":{\"type\":\"string\"},"
			 "\"apiKey\":{\"type\":\"string\"},"
			 "\"debugScore\":{\"type\":\"number\"}},"
			 "\"required\":[\"displayName\",\"apiKey\","
			 "\"debugScore\"]}",
	.suspend_schema = "{\"type\":\"object\",\"required\":[\"question\"]}",
	.resume_schema = "{\"type\":\"object\",\"properties\":{"
			 "\"account\":{\"type\":\"string\"}},"
			 "\"required\":[\"account\"]}",
	.require_approval_fn = secret_approval,
	.execute = secret_exec,
	.display = secret_view,
	.transcript = secret_view,
};

int main(int argc, char **argv)
{
	const struct berth_tool *tools[] = {&secret_tool};

	return berth_main(argc, argv, tools, sizeof tools / sizeof tools[0]);
}

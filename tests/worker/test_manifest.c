/*
 * test_manifest.c: tools in any language are declared by manifests, and a
 * bad one is refused with the file and the field named; C tools are
 * checked as completely at registration.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fixture.h"
#include "worker/builtin.h"
#include "worker/internal.h" /* worker__tool_from_json */

static int setup(void **state)
{
	*state = fx_new(NULL);
	return 0;
}

static int teardown(void **state)
{
	fx_free(*state);
	return 0;
}

/* load writes manifest text as DIR/NAME/name and loads that folder. */
static int load(struct fx *f, const char *sub, const char *name,
		const char *text, char **err)
{
	char dir[300], file[400];

	snprintf(dir, sizeof(dir), "%s/%s", f->dir, sub);
	mkdir(dir, 0700);
	snprintf(file, sizeof(file), "%s/%s", sub, name);
	fx_write(f, file, text);
	*err = NULL;
	return worker_load_dir(f->w, dir, err);
}

/* refused asserts that text is refused with a message holding each of
 * the NULL-ended strings that follow. */
static void refused(struct fx *f, const char *sub, const char *text, ...)
{
	char *err;
	const char *want;
	va_list ap;

	assert_int_equal(load(f, sub, "tool.json", text, &err), -EINVAL);
	assert_non_null(err);
	assert_non_null(strstr(err, "tool.json"));
	va_start(ap, text);
	while ((want = va_arg(ap, const char *))) {
		if (!strstr(err, want))
			fprintf(stderr, "\"%s\" lacks \"%s\"\n", err, want);
		assert_non_null(strstr(err, want));
	}
	va_end(ap);
	free(err);
}

static void manifest__that_is_not_json__is_refused_naming_the_file(
	void **state)
{
	refused(*state, "a", "{\"id\": ", "not a JSON file", NULL);
}

static void manifest__with_an_unknown_field__is_refused_naming_it(
	void **state)
{
	refused(*state, "b",
		"{\"id\":\"t\",\"command\":[\"true\"],\"requireAproval\":true}",
		"requireAproval", "not a known field", NULL);
	refused(*state, "b2",
		"{\"id\":\"t\",\"command\":[\"true\"],"
		"\"background\":{\"timeout\":5}}",
		"background.timeout", NULL);
}

static void manifest__without_a_command__is_refused(void **state)
{
	refused(*state, "c", "{\"id\":\"t\"}", "command", "missing", NULL);
	refused(*state, "c2", "{\"id\":\"t\",\"command\":\"ls -l\"}",
		"command", "array", NULL);
	refused(*state, "c3", "{\"id\":\"t\",\"command\":[\"ls\", 3]}",
		"command[1]", NULL);
}

static void manifest__with_a_schema_that_does_not_compile__names_it(
	void **state)
{
	refused(*state, "d",
		"{\"id\":\"t\",\"command\":[\"true\"],"
		"\"outputSchema\":{\"type\":12}}",
		"outputSchema", NULL);
	refused(*state, "d2",
		"{\"id\":\"t\",\"command\":[\"true\"],\"resumeSchema\":[1]}",
		"resumeSchema", NULL);
}

/* MCP requires inputSchema to be an object schema; the refusal names the
 * file, the tool and the field. An outputSchema of any type is accepted,
 * as createTool accepts it. */
static void manifest__with_an_input_schema_not_of_type_object__is_refused(
	void **state)
{
	struct fx *f = *state;
	char *err = NULL;

	refused(f, "o1",
		"{\"id\":\"t\",\"command\":[\"true\"],"
		"\"inputSchema\":{\"type\":\"string\"}}",
		"tool t", "inputSchema", "\"type\": \"object\"", NULL);
	refused(f, "o3",
		"{\"id\":\"t\",\"command\":[\"true\"],\"inputSchema\":true}",
		"tool t", "inputSchema", NULL);
	assert_int_equal(load(f, "o2", "tool.json",
			      "{\"id\":\"t\",\"command\":[\"true\"],"
			      "\"outputSchema\":{\"type\":\"string\"}}",
			      &err),
			 1);
	assert_null(err);
}

static void manifest__with_an_example_failing_the_input_schema__names_it(
	void **state)
{
	refused(*state, "e",
		"{\"id\":\"t\",\"command\":[\"true\"],"
		"\"inputSchema\":{\"type\":\"object\",\"required\":[\"x\"]},"
		"\"inputExamples\":[{\"input\":{\"x\":1}},{\"input\":{}}]}",
		"inputExamples[1]", NULL);
}

static void manifest__with_an_invalid_or_duplicate_id__is_refused(
	void **state)
{
	struct fx *f = *state;
	char *err;

	refused(f, "f", "{\"id\":\"has space\",\"command\":[\"true\"]}",
		"has space", "MCP", NULL);
	refused(f, "f2", "{\"command\":[\"true\"]}", "id", NULL);
	assert_int_equal(load(f, "g", "one.json",
			      "{\"id\":\"same\",\"command\":[\"true\"]}", &err),
			 1);
	fx_write(f, "g/two.json", "{\"id\":\"same\",\"command\":[\"true\"]}");
	assert_int_equal(load(f, "h", "x.json",
			      "{\"id\":\"same\",\"command\":[\"true\"]}", &err),
			 -EINVAL);
	assert_non_null(strstr(err, "already registered"));
	free(err);
}

static void manifest__with_bad_background_values__is_refused(void **state)
{
	refused(*state, "i",
		"{\"id\":\"t\",\"command\":[\"true\"],"
		"\"background\":{\"onInterrupt\":\"maybe\"}}",
		"background.onInterrupt", NULL);
	refused(*state, "i2",
		"{\"id\":\"t\",\"command\":[\"true\"],"
		"\"background\":{\"maxRetries\":-1}}",
		"background.maxRetries", NULL);
}

static void manifest__that_is_good__is_listed_with_every_field(void **state)
{
	struct fx *f = *state;
	const struct worker_tool *t;
	char *err;
	json_t *o, *bg;

	assert_int_equal(
		load(f, "ok", "weather.json",
		     "{\"id\":\"weather-tool\",\"description\":\"Weather\","
		     "\"inputSchema\":{\"type\":\"object\"},"
		     "\"requireApproval\":true,\"strict\":true,"
		     "\"background\":{\"timeoutMs\":1000,\"maxRetries\":2,"
		     "\"concurrency\":3,\"onInterrupt\":\"fail\"},"
		     "\"mcp\":{\"annotations\":{\"title\":\"Weather Lookup\","
		     "\"readOnlyHint\":true},\"_meta\":{\"v\":\"1\"}},"
		     "\"inputExamples\":[{\"input\":{}}],"
		     "\"providerOptions\":{\"openai\":{}},"
		     "\"command\":[\"bin/weather\",\"--json\"]}",
		     &err),
		1);
	t = worker_tool_find(f->w, "weather-tool");
	assert_non_null(t);
	o = worker_tool_to_json(f->w, t);
	assert_string_equal(json_string_value(json_object_get(o, "name")),
			    "weather-tool");
	assert_string_equal(json_string_value(json_object_get(o, "title")),
			    "Weather Lookup");
	assert_true(json_is_true(json_object_get(o, "requireApproval")));
	assert_true(json_is_true(json_object_get(o, "strict")));
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(o, "background"),
				 "concurrency")),
			 3);
	assert_non_null(json_object_get(o, "_meta"));
	assert_non_null(json_object_get(o, "providerOptions"));
	assert_non_null(json_object_get(o, "inputExamples"));
	assert_true(json_is_false(json_object_get(o, "paused")));
	/* Every background setting, the unset ones as they take effect. */
	bg = json_object_get(o, "background");
	assert_int_equal(json_integer_value(json_object_get(bg, "backoffMs")),
			 1000);
	assert_int_equal(json_integer_value(json_object_get(bg,
							    "backoffMaxMs")),
			 300000);
	assert_string_equal(json_string_value(json_object_get(bg,
							      "onInterrupt")),
			    "fail");
	assert_true(json_is_true(json_object_get(bg, "enabled")));
	json_decref(o);
}

static void manifest__with_bad_annotations__is_refused_naming_the_member(
	void **state)
{
	refused(*state, "an1",
		"{\"id\":\"t\",\"command\":[\"true\"],\"mcp\":{"
		"\"annotations\":{\"readOnlyHint\":\"yes\"}}}",
		"tool t", "mcp.annotations.readOnlyHint must be true or false",
		NULL);
	refused(*state, "an2",
		"{\"id\":\"t\",\"command\":[\"true\"],\"mcp\":{"
		"\"annotations\":{\"title\":[\"Weather\"]}}}",
		"mcp.annotations.title must be a string", NULL);
	refused(*state, "an3",
		"{\"id\":\"t\",\"command\":[\"true\"],\"mcp\":{"
		"\"annotations\":{\"idempotentHint\":null}}}",
		"mcp.annotations.idempotentHint", NULL);
}

/* Mastra's names for retry settings (its RetryConfig, "retries") are read
 * into berth's; those berth has no place for are refused with what berth
 * has instead. */
static void manifest__with_mastras_background_names__maps_or_names_berths(
	void **state)
{
	struct fx *f = *state;
	char *err = NULL;
	json_t *o, *bg;

	assert_int_equal(
		load(f, "bg", "tool.json",
		     "{\"id\":\"mastra-bg\",\"command\":[\"true\"],"
		     "\"background\":{\"enabled\":true,\"retries\":{"
		     "\"maxRetries\":4,\"retryDelayMs\":200,"
		     "\"maxRetryDelayMs\":5000,\"backoffMultiplier\":2}}}",
		     &err),
		1);
	o = worker_tool_to_json(f->w, worker_tool_find(f->w, "mastra-bg"));
	bg = json_object_get(o, "background");
	assert_int_equal(json_integer_value(json_object_get(bg, "maxRetries")),
			 4);
	assert_int_equal(json_integer_value(json_object_get(bg, "backoffMs")),
			 200);
	assert_int_equal(json_integer_value(json_object_get(bg,
							    "backoffMaxMs")),
			 5000);
	json_decref(o);
	refused(f, "bg1",
		"{\"id\":\"t\",\"command\":[\"true\"],"
		"\"background\":{\"waitTimeoutMs\":1000}}",
		"background.waitTimeoutMs", "jobs/wait's timeoutMs",
		"background.timeoutMs", NULL);
	refused(f, "bg2",
		"{\"id\":\"t\",\"command\":[\"true\"],"
		"\"background\":{\"retries\":{\"backoffMultiplier\":3}}}",
		"background.retries.backoffMultiplier", "background.backoffMs",
		NULL);
	refused(f, "bg3",
		"{\"id\":\"t\",\"command\":[\"true\"],"
		"\"background\":{\"maxRetries\":1,\"retries\":{"
		"\"maxRetries\":2}}}",
		"background.retries.maxRetries", "background.maxRetries", NULL);
	refused(f, "bg4",
		"{\"id\":\"t\",\"command\":[\"true\"],"
		"\"background\":{\"messageHandling\":\"final-only\"}}",
		"background.messageHandling", "jobs/get", NULL);
	refused(f, "bg5",
		"{\"id\":\"t\",\"command\":[\"true\"],"
		"\"background\":{\"retries\":{\"retryableErrors\":1}}}",
		"background.retries.retryableErrors", "retryable", NULL);
	/* Names a port brings for berth's settings are refused naming
	 * berth's field (issue 16: retryDelay), and any other names them
	 * all: it said only "is not a known field". */
	refused(f, "bg6",
		"{\"id\":\"t\",\"command\":[\"true\"],"
		"\"background\":{\"retryDelay\":200}}",
		"background.retryDelay", "backoffMs", NULL);
	refused(f, "bg7",
		"{\"id\":\"t\",\"command\":[\"true\"],"
		"\"background\":{\"retryDelayMs\":200}}",
		"background.retryDelayMs", "background.retries", "backoffMs",
		NULL);
	refused(f, "bg8",
		"{\"id\":\"t\",\"command\":[\"true\"],"
		"\"background\":{\"timeout\":200}}",
		"background.timeout", "timeoutMs", NULL);
	refused(f, "bg9",
		"{\"id\":\"t\",\"command\":[\"true\"],"
		"\"background\":{\"maxRetry\":2}}",
		"background.maxRetry", "maxRetries", NULL);
	/* A request context is always an object: a schema that takes none
	 * made the tool one no submission could reach. */
	refused(f, "rc1",
		"{\"id\":\"t\",\"command\":[\"true\"],"
		"\"requestContextSchema\":{\"type\":\"string\"}}",
		"requestContextSchema must take an object", NULL);
	refused(f, "bg10",
		"{\"id\":\"t\",\"command\":[\"true\"],"
		"\"background\":{\"priority\":2}}",
		"background.priority", "backoffMaxMs, onInterrupt", NULL);
}

/* The function fields of createTool say where each went. */
static void manifest__with_createtool_function_fields__says_where_they_went(
	void **state)
{
	refused(*state, "fn1",
		"{\"id\":\"t\",\"command\":[\"true\"],"
		"\"toModelOutput\":{}}",
		"toModelOutput", "\"modelOutput\"", NULL);
	refused(*state, "fn2",
		"{\"id\":\"t\",\"command\":[\"true\"],"
		"\"onInputDelta\":{}}",
		"onInputDelta", "no source in berth", NULL);
}

static void manifest__with_a_transform__checks_targets_stages_and_specs(
	void **state)
{
	struct fx *f = *state;
	char *err = NULL;

	refused(f, "tr1",
		"{\"id\":\"t\",\"command\":[\"true\"],\"transform\":{"
		"\"display\":{\"inputDelta\":{\"omit\":[\"/x\"]}}}}",
		"transform.display.inputDelta", "agent's model", NULL);
	refused(f, "tr2",
		"{\"id\":\"t\",\"command\":[\"true\"],\"transform\":{"
		"\"display\":{\"start\":{\"omit\":[\"/x\"]}}}}",
		"transform.display.start", "not a stage", NULL);
	refused(f, "tr3",
		"{\"id\":\"t\",\"command\":[\"true\"],\"transform\":{"
		"\"ui\":{}}}",
		"transform.ui", "display, transcript", NULL);
	refused(f, "tr4",
		"{\"id\":\"t\",\"command\":[\"true\"],\"transform\":{"
		"\"transcript\":{\"output\":{\"pick\":[\"apiKey\"]}}}}",
		"transform.transcript.output.pick[0]", "JSON Pointer", NULL);
	refused(f, "tr5",
		"{\"id\":\"t\",\"command\":[\"true\"],\"transform\":{"
		"\"display\":{\"error\":{\"const\":1,\"omit\":[]}}}}",
		"transform.display.error", "\"const\"", NULL);
	refused(f, "tr6",
		"{\"id\":\"t\",\"command\":[\"true\"],\"transform\":{"
		"\"display\":{\"error\":{\"redact\":true}}}}",
		"transform.display.error.redact", NULL);
	assert_int_equal(
		load(f, "tr7", "tool.json",
		     "{\"id\":\"t7\",\"command\":[\"true\"],"
		     "\"transform\":{\"display\":{"
		     "\"input\":{\"pick\":[\"/customerId\"]},"
		     "\"approval\":{\"pick\":[\"/customerId\"]},"
		     "\"error\":{\"const\":{\"message\":\"failed\"}}},"
		     "\"transcript\":{\"output\":{\"omit\":"
		     "[\"/apiKey\",\"/a~1b\"]}}}}",
		     &err),
		1);
}

/* A definition is parsed from a JSON object, not only from a file: the
 * way a worker process registers its tools (issue 15). */
static void definition__from_a_json_object__is_parsed_like_a_manifest(
	void **state)
{
	struct worker_tool *t = NULL;
	char *err = NULL;
	json_t *def = json_loads(
		"{\"id\":\"from-worker\",\"description\":\"d\","
		"\"inputSchema\":{\"type\":\"object\",\"properties\":{"
		"\"n\":{\"type\":\"integer\",\"default\":1}}},"
		"\"requireApproval\":true,\"background\":{\"maxRetries\":2},"
		"\"mcp\":{\"annotations\":{\"readOnlyHint\":true}}}",
		0, NULL);

	assert_non_null(def);
	assert_int_equal(worker__tool_from_json(def, "worker w1", NULL, &t,
						&err),
			 0);
	assert_non_null(t);
	assert_string_equal(t->id, "from-worker");
	assert_true(t->require_approval);
	assert_int_equal(t->bg.max_retries, 2);
	assert_null(t->cmd);
	assert_null(t->c);
	worker__tool_free(t);
	/* A manifest's command is no field of a definition... */
	json_object_set_new(def, "command", json_pack("[s]", "true"));
	assert_int_equal(worker__tool_from_json(def, "worker w1", NULL, &t,
						&err),
			 -EINVAL);
	assert_string_equal(err, "worker w1: command is not a known field");
	free(err);
	json_decref(def);
	/* ... and a definition that is not an object is said to be one. */
	def = json_pack("[]");
	assert_int_equal(worker__tool_from_json(def, "worker w1", NULL, &t,
						&err),
			 -EINVAL);
	assert_non_null(strstr(err, "must be an object"));
	free(err);
	json_decref(def);
}

static struct berth_outcome noop_c(const json_t *in, struct berth_ctx *ctx,
				   void *data)
{
	return berth_output(json_object());
}

/* An approvalPolicy is read by the same code from a manifest, a JSON
 * definition (a worker process's) and a C tool, and checked at load:
 * each mistake is refused naming the field. */
static void approval_policy__is_checked_in_manifests_definitions_and_c_tools(
	void **state)
{
	struct fx *f = *state;
	struct worker_tool *t = NULL;
	char *err = NULL;
	json_t *def, *tj;
	const struct worker_tool *reg;

#define POLICY_TOOL(p)                                                         \
	"{\"id\":\"p\",\"requireApproval\":true,\"command\":[\"true\"],"       \
	"\"approvalPolicy\":" p "}"
	refused(f, "a", POLICY_TOOL("[]"), "approvalPolicy must be an object",
		NULL);
	refused(f, "b", POLICY_TOOL("{\"quorom\":2}"),
		"approvalPolicy.quorom is not a known field", NULL);
	refused(f, "c", POLICY_TOOL("{\"quorum\":0}"),
		"approvalPolicy.quorum must be an integer from 1 to 1000", NULL);
	refused(f, "d", POLICY_TOOL("{\"selfApproval\":\"yes\"}"),
		"approvalPolicy.selfApproval must be true or false", NULL);
	refused(f, "e", POLICY_TOOL("{\"approvers\":[\"role:boss\"]}"),
		"approvalPolicy.approvers[0] names no role", NULL);
	refused(f, "g", POLICY_TOOL("{\"approvers\":[\"a\",\"a\"]}"),
		"approvalPolicy.approvers[1] is named twice", NULL);
	refused(f, "h", POLICY_TOOL("{\"approvers\":[\"a\"],\"quorum\":2}"),
		"approvalPolicy.quorum is 2, more than the 1 approvers named",
		NULL);
	refused(f, "i", "{\"id\":\"p\",\"command\":[\"true\"],"
		"\"approvalPolicy\":{\"quorum\":2}}",
		"approvalPolicy is given, but the tool requires no approval",
		NULL);
	assert_int_equal(load(f, "j", "tool.json",
			      POLICY_TOOL("{\"approvers\":[\"alice\","
					  "\"role:approve\"],\"quorum\":2}"),
			      &err), 1);
	reg = worker_tool_find(f->w, "p");
	assert_non_null(reg);
	tj = worker_tool_to_json(f->w, reg);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(
		tj, "approvalPolicy"), "quorum")), 2);
	/* The worker's default (no --principals here: one trust domain) is
	 * listed as it takes effect. */
	assert_true(json_is_boolean(json_object_get(json_object_get(
		tj, "approvalPolicy"), "selfApproval")));
	json_decref(tj);
#undef POLICY_TOOL

	def = json_loads("{\"id\":\"w\",\"requireApproval\":true,"
			 "\"approvalPolicy\":{\"quorum\":\"two\"}}", 0, NULL);
	assert_int_equal(worker__tool_from_json(def, "worker w1", NULL, &t,
						&err), -EINVAL);
	assert_string_equal(err, "worker w1: approvalPolicy.quorum must be an "
			    "integer from 1 to 1000");
	free(err);
	json_object_set_new(def, "approvalPolicy",
			    json_pack("{s:i, s:b}", "quorum", 3, "selfApproval",
				      1));
	assert_int_equal(worker__tool_from_json(def, "worker w1", NULL, &t,
						&err), 0);
	assert_int_equal(t->policy.quorum, 3);
	assert_int_equal(t->policy.self_approval, 1);
	worker__tool_free(t);
	json_decref(def);

	{
		struct berth_tool c = {.id = "cp", .execute = noop_c,
				       .require_approval = true,
				       .approval_policy = "{\"quorum\": -1}"};

		assert_int_equal(worker_add_tool(f->w, &c, &err), -EINVAL);
		assert_non_null(strstr(err, "tool cp: approvalPolicy.quorum "
					    "must be an integer"));
		free(err);
		c.approval_policy = "{\"approvers\": [\"role:operate\"]}";
		assert_int_equal(worker_add_tool(f->w, &c, &err), 0);
	}
}

/* ---- C tools ---------------------------------------------------------- */

static struct berth_outcome noop(const json_t *in, struct berth_ctx *ctx,
				 void *data)
{
	return berth_output(json_object());
}

static void c_refused(struct fx *f, const struct berth_tool *t,
		      const char *want)
{
	char *err = NULL;

	assert_int_equal(worker_add_tool(f->w, t, &err), -EINVAL);
	assert_non_null(err);
	if (!strstr(err, want))
		fprintf(stderr, "\"%s\" lacks \"%s\"\n", err, want);
	assert_non_null(strstr(err, want));
	free(err);
}

static void c_tool__registration__checks_every_field(void **state)
{
	struct fx *f = *state;
	struct berth_tool t = {.id = "c1", .execute = noop};
	char *err = NULL;

	t.input_schema = "{\"type\": ";
	c_refused(f, &t, "inputSchema is not JSON");
	t.input_schema = "{\"minimum\":\"x\"}";
	c_refused(f, &t, "inputSchema does not compile");
	t.input_schema = "{\"type\":\"array\"}";
	c_refused(f, &t, "tool c1: inputSchema must be a JSON Schema with "
			 "\"type\": \"object\"");
	t.input_schema = "{\"type\":[\"object\",\"null\"]}";
	c_refused(f, &t, "inputSchema");
	t.input_schema = NULL;
	t.input_schema = "{\"type\":\"object\",\"required\":[\"a\"]}";
	t.input_examples = "[{\"input\":{\"b\":1}}]";
	c_refused(f, &t, "inputExamples[0]");
	t.input_examples = NULL;
	t.mcp_annotations = "[]";
	c_refused(f, &t, "mcp.annotations");
	t.mcp_annotations = NULL;
	t.suspend_schema = "7";
	c_refused(f, &t, "suspendSchema");
	t.suspend_schema = NULL;
	t.execute = NULL;
	c_refused(f, &t, "execute");
	t.execute = noop;
	t.id = "no/slash";
	c_refused(f, &t, "MCP");
	t.id = "c1";
	assert_int_equal(worker_add_tool(f->w, &t, &err), 0);
	c_refused(f, &t, "already registered");
}

static void builtin_tools__register_and_are_listed_in_id_order(void **state)
{
	struct fx *f = *state;
	size_t n;
	const struct berth_tool *const *tools = worker_builtin_tools(&n);
	char *err = NULL;

	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(worker_add_tool(f->w, tools[i], &err), 0);
	assert_int_equal(worker_tool_count(f->w), 3);
	assert_string_equal(worker_tool_name(worker_tool_at(f->w, 0)), "fail");
	assert_string_equal(worker_tool_name(worker_tool_at(f->w, 1)), "noop");
	assert_string_equal(worker_tool_name(worker_tool_at(f->w, 2)), "sleep");
	assert_non_null(worker_tool_schema(worker_tool_find(f->w, "sleep"),
					   WORKER_SCHEMA_INPUT));
	assert_null(worker_tool_schema(worker_tool_find(f->w, "noop"),
				       WORKER_SCHEMA_OUTPUT));
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(manifest__that_is_not_json__is_refused_naming_the_file),
		T(manifest__with_an_unknown_field__is_refused_naming_it),
		T(manifest__without_a_command__is_refused),
		T(manifest__with_a_schema_that_does_not_compile__names_it),
		T(manifest__with_an_input_schema_not_of_type_object__is_refused),
		T(manifest__with_an_example_failing_the_input_schema__names_it),
		T(manifest__with_an_invalid_or_duplicate_id__is_refused),
		T(manifest__with_bad_background_values__is_refused),
		T(manifest__that_is_good__is_listed_with_every_field),
		T(manifest__with_bad_annotations__is_refused_naming_the_member),
		T(manifest__with_mastras_background_names__maps_or_names_berths),
		T(manifest__with_createtool_function_fields__says_where_they_went),
		T(manifest__with_a_transform__checks_targets_stages_and_specs),
		T(definition__from_a_json_object__is_parsed_like_a_manifest),
		T(c_tool__registration__checks_every_field),
		T(approval_policy__is_checked_in_manifests_definitions_and_c_tools),
		T(builtin_tools__register_and_are_listed_in_id_order),
	};

	return cmocka_run_group_tests_name("worker manifests and tools", tests,
					   NULL, NULL);
}

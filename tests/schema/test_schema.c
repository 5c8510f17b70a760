/*
 * Unit tests of schema/: compile errors, validation errors and their
 * messages, the limits that keep a hostile schema or instance from hurting
 * the daemon, and the schemas that Zod, Valibot and ArkType emit for a
 * typical tool.  argv[1] is the fixtures directory.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "schema/schema.h"

static const char *fixtures_dir = "fixtures";

/* A fixture: one compiled schema and the errors of the last validation. */
struct fixture {
	struct schema *schema;
	json_t *errors;
};

static struct schema *compile_file(const char *name, bool format_assert)
{
	char path[1024];
	json_error_t jerr;
	json_t *doc;
	struct schema_options opt = { .format_assert = format_assert };
	struct schema *s;
	char *err = NULL;

	snprintf(path, sizeof(path), "%s/%s", fixtures_dir, name);
	doc = json_load_file(path, 0, &jerr);
	if (!doc)
		fail_msg("%s: %s", path, jerr.text);
	s = schema_compile(doc, &opt, NULL, &err);
	if (!s)
		fail_msg("%s: %s", name, err);
	json_decref(doc);
	return s;
}

static int setup_weather(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	f->schema = compile_file("weather-tool.json", false);
	*state = f;
	return 0;
}

static int setup_zod(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	f->schema = compile_file("zod-tool.json", true);
	*state = f;
	return 0;
}

static int setup_valibot(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	f->schema = compile_file("valibot-tool.json", false);
	*state = f;
	return 0;
}

static int setup_arktype(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	f->schema = compile_file("arktype-tool.json", false);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	json_decref(f->errors);
	schema_free(f->schema);
	free(f);
	return 0;
}

/* check validates text with both paths, asserts they agree and returns the
 * number of errors (0 when valid); the errors stay in f->errors. */
static size_t check(struct fixture *f, const char *text)
{
	json_error_t jerr;
	json_t *inst = json_loads(text, JSON_DECODE_ANY, &jerr);
	bool fast;
	int rc;

	if (!inst)
		fail_msg("bad test instance %s: %s", text, jerr.text);
	json_decref(f->errors);
	f->errors = NULL;
	fast = schema_valid(f->schema, inst);
	rc = schema_validate(f->schema, inst, &f->errors);
	json_decref(inst);
	assert_int_equal(fast, rc == 0);
	if (rc == 0) {
		assert_null(f->errors);
		return 0;
	}
	assert_int_equal(rc, -EINVAL);
	assert_non_null(f->errors);
	assert_true(json_array_size(f->errors) > 0);
	return json_array_size(f->errors);
}

static const char *field(const struct fixture *f, size_t i, const char *name)
{
	return json_string_value(json_object_get(json_array_get(f->errors, i), name));
}

/* has_error returns true when some error has this path, keyword and
 * message. */
static bool has_error(const struct fixture *f, const char *path, const char *keyword,
		      const char *message)
{
	for (size_t i = 0; i < json_array_size(f->errors); i++)
		if (strcmp(field(f, i, "instancePath"), path) == 0 &&
		    strcmp(field(f, i, "keyword"), keyword) == 0 &&
		    strcmp(field(f, i, "message"), message) == 0)
			return true;
	return false;
}

static void print_errors(const struct fixture *f)
{
	for (size_t i = 0; i < json_array_size(f->errors); i++)
		print_message("  %s: %s (%s) at %s\n", field(f, i, "instancePath"),
			      field(f, i, "message"), field(f, i, "keyword"),
			      field(f, i, "schemaPath"));
}

#define assert_error(f, path, kw, msg) do { \
	if (!has_error(f, path, kw, msg)) { \
		print_errors(f); \
		fail_msg("no error %s: %s (%s)", path, msg, kw); \
	} \
} while (0)

/* compile_error compiles text and returns its error message (malloc'd). */
static char *compile_error(const char *text, const struct schema_options *opt,
			   struct schema_registry *reg)
{
	char *err = NULL;
	struct schema *s = schema_compile_text(text, opt, reg, &err);

	if (s) {
		schema_free(s);
		fail_msg("schema compiled but should not have: %s", text);
	}
	assert_non_null(err);
	return err;
}

#define assert_compile_error(text, expected) do { \
	char *err_ = compile_error(text, NULL, NULL); \
	if (!strstr(err_, expected)) \
		fail_msg("error \"%s\" does not contain \"%s\"", err_, expected); \
	free(err_); \
} while (0)

/* ---- The weather tool: messages and locations ---- */

static void weather__valid_input__passes_both_paths(void **state)
{
	assert_int_equal(check(*state, "{\"location\":\"Seattle\"}"), 0);
}

static void weather__number_for_string__says_expected_and_actual_type(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(check(f, "{\"location\":42}"), 1);
	assert_string_equal(field(f, 0, "instancePath"), "/location");
	assert_string_equal(field(f, 0, "keyword"), "type");
	assert_string_equal(field(f, 0, "schemaPath"), "#/properties/location/type");
	assert_string_equal(field(f, 0, "message"), "must be string, got number");
}

static void weather__missing_location__names_the_required_property(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(check(f, "{}"), 1);
	assert_error(f, "", "required", "must have required property 'location'");
	assert_string_equal(field(f, 0, "schemaPath"), "#/required");
}

static void weather__extra_property__names_the_property(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(check(f, "{\"location\":\"x\",\"extra\":1}"), 1);
	assert_error(f, "", "additionalProperties", "must not have additional property 'extra'");
}

static void weather__several_problems__are_all_reported(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(check(f, "{\"location\":[],\"a\":1,\"b\":2}"), 3);
	assert_error(f, "/location", "type", "must be string, got array");
	assert_error(f, "", "additionalProperties", "must not have additional property 'a'");
	assert_error(f, "", "additionalProperties", "must not have additional property 'b'");
}

static void weather__non_object__is_rejected_at_the_root(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(check(f, "\"Seattle\""), 1);
	assert_error(f, "", "type", "must be object, got string");
}

static void validate__without_an_error_list__returns_einval_only(void **state)
{
	struct fixture *f = *state;
	json_t *inst = json_pack("{s:i}", "location", 1);

	assert_int_equal(schema_validate(f->schema, inst, NULL), -EINVAL);
	assert_int_equal(schema_validate(f->schema, json_object_get(inst, "nope"), NULL),
			 -EINVAL);
	json_decref(inst);
}

static void schema_doc__returns_a_copy_of_the_compiled_document(void **state)
{
	struct fixture *f = *state;
	const json_t *doc = schema_doc(f->schema);

	assert_true(json_is_object(doc));
	assert_string_equal(json_string_value(json_object_get(doc, "type")), "object");
}

/* ---- Messages of the other keywords ---- */

static void keywords__each_failure__reads_as_a_sentence(void **state)
{
	struct fixture f = { 0 };
	static const struct {
		const char *schema, *instance, *path, *keyword, *message;
	} cases[] = {
		{ "{\"pattern\":\"^[a-z]+$\"}", "\"ABC\"", "", "pattern",
		  "must match pattern \"^[a-z]+$\"" },
		{ "{\"enum\":[\"a\",\"b\"]}", "\"c\"", "", "enum",
		  "must be equal to one of the allowed values: \"a\", \"b\"" },
		{ "{\"const\":\"car\"}", "\"bus\"", "", "const",
		  "must be equal to the constant \"car\"" },
		{ "{\"minimum\":1}", "0", "", "minimum", "must be >= 1" },
		{ "{\"exclusiveMaximum\":2.5}", "2.5", "", "exclusiveMaximum", "must be < 2.5" },
		{ "{\"multipleOf\":3}", "7", "", "multipleOf", "must be a multiple of 3" },
		/* Within 1e-9 of a multiple was taken for one. */
		{ "{\"multipleOf\":0.1}", "0.30000000001", "", "multipleOf",
		  "must be a multiple of 0.1" },
		{ "{\"multipleOf\":0.1}", "1e-10", "", "multipleOf",
		  "must be a multiple of 0.1" },
		/* 1e17 is 100000000000000000, which 3 does not divide; as a
		 * double it passed. An integer beside a real limit is
		 * compared exactly (as doubles the two were equal). */
		{ "{\"multipleOf\":3}", "1e17", "", "multipleOf",
		  "must be a multiple of 3" },
		{ "{\"maximum\":9007199254740992.0}", "9007199254740993", "",
		  "maximum", "must be <= 9007199254740992" },
		{ "{\"minLength\":2}", "\"\\u00e9\"", "", "minLength",
		  "must have at least 2 characters" },
		{ "{\"maxItems\":1}", "[1,2]", "", "maxItems", "must not have more than 1 item" },
		{ "{\"maxItems\":2}", "[1,2,3]", "", "maxItems", "must not have more than 2 items" },
		{ "{\"minLength\":1}", "\"\"", "", "minLength", "must have at least 1 character" },
		{ "{\"minProperties\":1}", "{}", "", "minProperties",
		  "must have at least 1 property" },
		{ "{\"maxProperties\":2}", "{\"a\":1,\"b\":2,\"c\":3}", "", "maxProperties",
		  "must not have more than 2 properties" },
		{ "{\"contains\":{\"const\":1},\"minContains\":1}", "[2]", "", "minContains",
		  "must contain at least 1 item that matches the \"contains\" schema" },
		{ "{\"contains\":{\"const\":1},\"maxContains\":1}", "[1,1]", "", "maxContains",
		  "must contain at most 1 item that matches the \"contains\" schema" },
		{ "{\"uniqueItems\":true}", "[1,2,1.0]", "", "uniqueItems",
		  "must not have duplicate items (items 0 and 2 are equal)" },
		{ "{\"type\":[\"string\",\"null\"]}", "1", "", "type",
		  "must be string or null, got number" },
		{ "{\"type\":\"integer\"}", "1.5", "", "type", "must be integer, got number" },
		{ "{\"items\":{\"type\":\"string\"}}", "[\"a\",1]", "/1", "type",
		  "must be string, got number" },
		{ "{\"properties\":{\"a/b~c\":{\"type\":\"string\"}}}", "{\"a/b~c\":1}",
		  "/a~1b~0c", "type", "must be string, got number" },
		{ "{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]}", "1", "", "anyOf",
		  "must match at least one schema in anyOf" },
		{ "{\"oneOf\":[{\"type\":\"number\"},{\"type\":\"integer\"}]}", "1", "", "oneOf",
		  "must match exactly one schema in oneOf, but matches 0 and 1" },
		{ "{\"not\":{\"type\":\"null\"}}", "null", "", "not",
		  "must not be valid against the \"not\" schema" },
		{ "{\"contains\":{\"const\":1}}", "[2]", "", "contains",
		  "must contain at least one item that matches the \"contains\" schema" },
		{ "{\"dependentRequired\":{\"a\":[\"b\"]}}", "{\"a\":1}", "", "dependentRequired",
		  "must have property 'b' when property 'a' is present" },
		{ "{\"propertyNames\":{\"maxLength\":2}}", "{\"abc\":1}", "", "propertyNames",
		  "property name 'abc' is invalid" },
		{ "{\"unevaluatedProperties\":false,\"properties\":{\"a\":true}}",
		  "{\"a\":1,\"b\":2}", "", "unevaluatedProperties",
		  "must not have unevaluated property 'b'" },
		{ "{\"prefixItems\":[true],\"items\":false}", "[1,2]", "", "items",
		  "must not have more than 1 item" },
		{ "false", "1", "", "false", "is not allowed here (the schema is false)" },
		{ "{\"if\":{\"type\":\"string\"},\"then\":{\"minLength\":3}}", "\"ab\"", "", "if",
		  "must match the \"then\" schema" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *err = NULL;

		f.schema = schema_compile_text(cases[i].schema, NULL, NULL, &err);
		if (!f.schema)
			fail_msg("%s: %s", cases[i].schema, err);
		assert_true(check(&f, cases[i].instance) >= 1);
		assert_error(&f, cases[i].path, cases[i].keyword, cases[i].message);
		schema_free(f.schema);
		json_decref(f.errors);
		f.errors = NULL;
	}
}

static void anyof__passing_branch__drops_the_errors_of_the_failing_ones(void **state)
{
	struct fixture f = { 0 };

	f.schema = schema_compile_text("{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}],"
				       "\"minLength\":5}", NULL, NULL, NULL);
	assert_non_null(f.schema);
	assert_int_equal(check(&f, "\"abc\""), 1);
	assert_string_equal(field(&f, 0, "keyword"), "minLength");
	schema_free(f.schema);
	json_decref(f.errors);
}

static void false_schemas__in_two_places__report_their_own_location(void **state)
{
	struct fixture f = { 0 };

	f.schema = schema_compile_text("{\"properties\":{\"a\":false,\"b\":false}}",
				       NULL, NULL, NULL);
	assert_non_null(f.schema);
	assert_int_equal(check(&f, "{\"b\":1}"), 1);
	assert_string_equal(field(&f, 0, "instancePath"), "/b");
	assert_string_equal(field(&f, 0, "schemaPath"), "#/properties/b/false");
	schema_free(f.schema);
	json_decref(f.errors);
}

/* ---- Compile errors ---- */

static void compile__non_schema_document__is_refused_at_the_root(void **state)
{
	assert_compile_error("42", "(root): a schema must be an object or a boolean");
}

static void compile__unknown_type__is_located_with_a_json_pointer(void **state)
{
	assert_compile_error("{\"properties\":{\"age\":{\"type\":\"int\"}}}",
			     "/properties/age/type: unknown type \"int\"");
}

static void compile__wrong_keyword_values__say_what_is_expected(void **state)
{
	assert_compile_error("{\"properties\":{\"age\":{\"minimum\":\"zero\"}}}",
			     "/properties/age/minimum: must be a number");
	assert_compile_error("{\"minLength\":-1}", "/minLength: must be a non-negative integer");
	assert_compile_error("{\"required\":[\"a\",1]}", "/required: must be an array of strings");
	assert_compile_error("{\"required\":[\"a\",\"a\"]}", "/required: must not repeat \"a\"");
	assert_compile_error("{\"allOf\":[]}", "/allOf: must be a non-empty array of schemas");
	assert_compile_error("{\"multipleOf\":0}", "/multipleOf: must be a number greater than 0");
	assert_compile_error("{\"items\":{\"not\":3}}", "/items/not: must be a schema");
	assert_compile_error("{\"$anchor\":\"1x\"}", "$anchor must be a name");
	/* Was accepted, and the constraint silently dropped. */
	assert_compile_error("{\"dependentRequired\":{\"a\":\"b\"}}",
			     "/dependentRequired/a: must be an array of property names");
}

/* A property name has no place of its own in the instance: the errors of
 * propertyNames are the object's, not the member's value's (/abcd). */
static void property_names__errors_are_at_the_object(void **state)
{
	struct fixture f = { 0 };

	f.schema = schema_compile_text("{\"properties\":{\"o\":{\"propertyNames\":"
				       "{\"maxLength\":3}}}}", NULL, NULL, NULL);
	assert_non_null(f.schema);
	assert_true(check(&f, "{\"o\":{\"abcd\":1}}") >= 2);
	for (size_t i = 0; i < json_array_size(f.errors); i++)
		assert_string_equal(field(&f, i, "instancePath"), "/o");
	assert_true(has_error(&f, "/o", "propertyNames",
			      "property name 'abcd' is invalid"));
	schema_free(f.schema);
	json_decref(f.errors);
}

static void compile__invalid_regex__is_reported_at_compile_time(void **state)
{
	assert_compile_error("{\"properties\":{\"a\":{\"pattern\":\"^(abc\"}}}",
			     "/properties/a/pattern: invalid regular expression \"^(abc\"");
	assert_compile_error("{\"patternProperties\":{\"[\":true}}",
			     "/patternProperties/[: invalid regular expression");
}

static void compile__unresolvable_ref__names_the_reference(void **state)
{
	assert_compile_error("{\"properties\":{\"a\":{\"$ref\":\"#/$defs/missing\"}}}",
			     "/properties/a/$ref: cannot resolve reference \"#/$defs/missing\"");
	assert_compile_error("{\"$ref\":\"http://example.com/remote.json\"}",
			     "cannot resolve reference \"http://example.com/remote.json\"");
}

static void compile__ref_cycle_without_progress__is_refused(void **state)
{
	assert_compile_error("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"allOf\":"
			     "[{\"$ref\":\"#/$defs/a\"}]}},\"$ref\":\"#/$defs/a\"}",
			     "reference cycle");
	assert_compile_error("{\"$ref\":\"#\"}", "reference cycle");
}

/* A cycle below the root is reached only by the instances that have the
 * property, but it loops on them just the same (and through "anyOf", twice
 * over at each turn): it is refused where it is. */
static void compile__ref_cycle_below_the_root__is_refused_with_its_place(void **state)
{
	assert_compile_error("{\"type\":\"object\",\"properties\":{\"a\":{\"anyOf\":"
			     "[{\"$ref\":\"#/properties/a\"},{\"$ref\":\"#/properties/a\"}]}}}",
			     "/properties/a: reference cycle");
	assert_compile_error("{\"type\":\"object\",\"properties\":{\"a\":"
			     "{\"$ref\":\"#/properties/a\"}}}",
			     "/properties/a: reference cycle");
	assert_compile_error("{\"additionalProperties\":{\"not\":"
			     "{\"$ref\":\"#/additionalProperties\"}}}",
			     "/additionalProperties: reference cycle");
	assert_compile_error("{\"items\":{\"$ref\":\"#/$defs/b\"},\"$defs\":{"
			     "\"b\":{\"if\":true,\"then\":{\"$ref\":\"#/$defs/c\"}},"
			     "\"c\":{\"dependentSchemas\":{\"k\":{\"$ref\":\"#/$defs/b\"}}}}}",
			     "reference cycle");
}

static void compile__recursive_schema_through_properties__is_accepted(void **state)
{
	struct fixture f = { 0 };
	char *err = NULL;

	f.schema = schema_compile_text("{\"type\":\"object\",\"properties\":{\"child\":"
				       "{\"$ref\":\"#\"}},\"additionalProperties\":false}",
				       NULL, NULL, &err);
	assert_non_null(f.schema);
	assert_int_equal(check(&f, "{\"child\":{\"child\":{}}}"), 0);
	assert_int_equal(check(&f, "{\"child\":{\"child\":{\"x\":1}}}"), 1);
	assert_error(&f, "/child/child", "additionalProperties",
		     "must not have additional property 'x'");
	schema_free(f.schema);
	json_decref(f.errors);
}

static void compile__array_items_in_2020__points_to_prefixItems(void **state)
{
	assert_compile_error("{\"items\":[{\"type\":\"string\"}]}", "\"prefixItems\" in draft 2020-12");
}

static void compile__invalid_json_text__reports_line_and_column(void **state)
{
	char *err = compile_error("{\"type\":\n\"object\",", NULL, NULL);

	assert_non_null(strstr(err, "schema is not valid JSON"));
	assert_non_null(strstr(err, "line 2"));
	free(err);
}

static void compile__too_deep_nesting__is_refused_with_a_depth_error(void **state)
{
	struct schema_options opt = { .max_depth = 16 };
	json_t *doc = json_object(), *cur = doc;
	char *err = NULL;

	for (int i = 0; i < 40; i++) {
		json_t *next = json_object();

		json_object_set_new(cur, "not", next);
		cur = next;
	}
	assert_null(schema_compile(doc, &opt, NULL, &err));
	assert_non_null(strstr(err, "nested more than 16 levels"));
	free(err);
	json_decref(doc);
}

/* ---- Bounded work ---- */

static void validate__very_deep_instance__fails_cleanly_instead_of_overflowing(void **state)
{
	struct fixture f = { 0 };
	json_t *inst = json_array(), *cur = inst;
	int rc;

	f.schema = schema_compile_text("{\"items\":{\"$ref\":\"#\"}}", NULL, NULL, NULL);
	assert_non_null(f.schema);
	for (int i = 0; i < 5000; i++) {
		json_t *next = json_array();

		json_array_append_new(cur, next);
		cur = next;
	}
	assert_false(schema_valid(f.schema, inst));
	rc = schema_validate(f.schema, inst, &f.errors);
	assert_int_equal(rc, -EINVAL);
	assert_non_null(strstr(field(&f, 0, "message"), "nested too deeply"));
	json_decref(inst);
	json_decref(f.errors);
	schema_free(f.schema);
}

static void validate__huge_bad_instance__caps_the_number_of_errors(void **state)
{
	struct fixture f = { 0 };
	json_t *inst = json_array();

	f.schema = schema_compile_text("{\"items\":{\"type\":\"string\"}}", NULL, NULL, NULL);
	for (int i = 0; i < 10000; i++)
		json_array_append_new(inst, json_integer(i));
	assert_int_equal(schema_validate(f.schema, inst, &f.errors), -EINVAL);
	assert_int_equal(json_array_size(f.errors), SCHEMA_MAX_ERRORS);
	json_decref(inst);
	json_decref(f.errors);
	schema_free(f.schema);
}

static void validate__catastrophic_regex__is_stopped_by_the_match_limit(void **state)
{
	struct schema *s = schema_compile_text("{\"pattern\":\"^(a|a)*$\"}", NULL, NULL, NULL);
	char text[64];
	json_t *inst;
	clock_t start = clock();

	memset(text, 'a', 40);
	text[40] = 'b';
	text[41] = '\0';
	inst = json_string(text);
	assert_false(schema_valid(s, inst));
	assert_true((double)(clock() - start) / CLOCKS_PER_SEC < 5.0);
	json_decref(inst);
	schema_free(s);
}

/* fan_out returns a schema (new) of n "$defs", each applying the next one
 * twice through kw, the last one leaf: 2^n evaluations from a schema of a
 * few kilobytes, with no cycle. */
static json_t *fan_out(const char *kw, int n, json_t *leaf)
{
	json_t *defs = json_object();
	char name[32], ref[64];

	for (int i = 0; i < n; i++) {
		snprintf(ref, sizeof(ref), "#/$defs/d%d", i + 1);
		snprintf(name, sizeof(name), "d%d", i);
		json_object_set_new(defs, name, json_pack("{s:[{s:s},{s:s}]}", kw,
							  "$ref", ref, "$ref", ref));
	}
	snprintf(name, sizeof(name), "d%d", n);
	json_object_set_new(defs, name, leaf);
	return json_pack("{s:o, s:{s:{s:s}}}", "$defs", defs, "properties", "x",
			 "$ref", "#/$defs/d0");
}

/* check_too_long asserts that validating text against doc (stolen) stops
 * at the step limit, with that one error whatever the keywords around it;
 * schema_valid is asked too when both is true (each run takes a second
 * under the sanitizers). */
static void check_too_long(json_t *doc, const char *text, bool both)
{
	struct fixture f = { 0 };
	json_t *inst = json_loads(text, 0, NULL);
	char want[128];

	f.schema = schema_compile(doc, NULL, NULL, NULL);
	assert_non_null(f.schema);
	if (both)
		assert_int_equal(check(&f, text), 1);
	else
		assert_int_equal(schema_validate(f.schema, inst, &f.errors), -EINVAL);
	assert_int_equal(json_array_size(f.errors), 1);
	snprintf(want, sizeof(want), "the schema takes too long to check this value: "
		 "more than %d steps", SCHEMA_MAX_STEPS);
	if (strncmp(field(&f, 0, "message"), want, strlen(want)) != 0) {
		print_errors(&f);
		fail_msg("not stopped at the step limit");
	}
	json_decref(inst);
	json_decref(f.errors);
	schema_free(f.schema);
	json_decref(doc);
}

/* 2^40 evaluations from 2.9 KB: validation stops at SCHEMA_MAX_STEPS, on a
 * valid instance, under "not" (where giving up must not become a pass) and
 * under "anyOf", whose failed branches drop their errors. */
static void validate__schema_that_fans_out__stops_at_the_step_limit(void **state)
{
	json_t *doc;

	check_too_long(fan_out("allOf", 40, json_pack("{s:s}", "type", "string")),
		       "{\"x\":\"ok\"}", true);
	doc = fan_out("allOf", 40, json_pack("{s:s}", "type", "string"));
	json_object_set_new(json_object_get(doc, "properties"), "x", json_pack(
		"{s:{s:s}}", "not", "$ref", "#/$defs/d0"));
	check_too_long(doc, "{\"x\":\"ok\"}", false);
	/* At each level, a branch that fails after the level below passed,
	 * its errors dropped when the other branch passes. */
	doc = fan_out("anyOf", 40, json_pack("{s:s}", "type", "string"));
	for (int i = 0; i < 40; i++) {
		char name[32], ref[64];
		json_t *d;

		snprintf(name, sizeof(name), "d%d", i);
		snprintf(ref, sizeof(ref), "#/$defs/d%d", i + 1);
		d = json_object_get(json_object_get(doc, "$defs"), name);
		json_array_set_new(json_object_get(d, "anyOf"), 0, json_pack(
			"{s:[{s:s},{s:s}]}", "allOf", "$ref", ref, "type", "number"));
	}
	check_too_long(doc, "{\"x\":\"ok\"}", false);
}

/* Once SCHEMA_MAX_ERRORS errors are collected, validation goes no further
 * than its verdict needs: 5,000 bad items, each 2^12 evaluations, would
 * take 2^24 steps (past the step limit) if each were checked. */
static void validate__after_the_error_cap__goes_no_further(void **state)
{
	struct fixture f = { 0 };
	json_t *doc, *inst = json_array();
	clock_t start = clock();
	char *text;

	doc = fan_out("allOf", 12, json_pack("{s:s}", "type", "string"));
	json_object_set_new(doc, "items", json_pack("{s:s}", "$ref", "#/$defs/d0"));
	json_object_del(doc, "properties");
	f.schema = schema_compile(doc, NULL, NULL, NULL);
	assert_non_null(f.schema);
	for (int i = 0; i < 5000; i++)
		json_array_append_new(inst, json_integer(i));
	text = json_dumps(inst, JSON_COMPACT);
	assert_int_equal(check(&f, text), SCHEMA_MAX_ERRORS);
	assert_error(&f, "/0", "type", "must be string, got number");
	assert_true((double)(clock() - start) / CLOCKS_PER_SEC < 2.0);
	free(text);
	json_decref(inst);
	json_decref(doc);
	json_decref(f.errors);
	schema_free(f.schema);
}

/* A failed union of 120 constants (a Zod union of literals) filled the
 * 100 errors with its branches' "must be equal to constant": its own
 * anyOf error, and the error of another field, were never reported. A
 * failed anyOf or oneOf keeps 10 of its branches' errors, then its own. */
static void validate__a_big_union_that_fails__leaves_room_for_its_own_error_and_others(
	void **state)
{
	static const char *const kinds[] = {"anyOf", "oneOf"};
	struct fixture f = { 0 };

	for (size_t k = 0; k < 2; k++) {
		json_t *branches = json_array(), *doc;

		for (int i = 0; i < 120; i++)
			json_array_append_new(branches, json_pack("{s:i}", "const", i));
		doc = json_pack("{s:{s:{s:o}, s:{s:s}}}", "properties", "unit",
				kinds[k], branches, "temperature", "type", "number");
		f.schema = schema_compile(doc, NULL, NULL, NULL);
		assert_non_null(f.schema);
		assert_int_equal(check(&f, "{\"unit\":\"x\",\"temperature\":\"hot\"}"),
				 12);
		assert_string_equal(field(&f, 10, "keyword"), kinds[k]);
		assert_string_equal(field(&f, 10, "instancePath"), "/unit");
		assert_error(&f, "/temperature", "type", "must be number, got string");
		json_decref(f.errors);
		f.errors = NULL;
		schema_free(f.schema);
		json_decref(doc);
	}
}

/* A match that PCRE2 gives up on is no answer: it stops the validation
 * with an error that says so, not "must match pattern" (the string below
 * does match "^a*b$"), and not a pass under "not". The first string of
 * 1,000 ends it, rather than each taking PCRE2's limit in turn. */
static void validate__regex_past_its_limit__says_the_engine_gave_up(void **state)
{
	static const char gave_up[] = "cannot check pattern \"^(a+)+$|^a*b$\": the "
				      "regular expression needs too much backtracking "
				      "for this value";
	struct fixture f = { 0 };
	char text[40000];
	size_t len = 0;
	clock_t start = clock();

	f.schema = schema_compile_text("{\"pattern\":\"^(a+)+$|^a*b$\"}", NULL, NULL, NULL);
	assert_int_equal(check(&f, "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaab\""), 1);
	assert_error(&f, "", "pattern", gave_up);
	assert_int_equal(check(&f, "\"aaaaaaaaab\""), 0);
	schema_free(f.schema);

	f.schema = schema_compile_text("{\"not\":{\"pattern\":\"^(a+)+$|^a*b$\"}}",
				       NULL, NULL, NULL);
	assert_int_equal(check(&f, "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaab\""), 1);
	assert_error(&f, "", "pattern", gave_up);
	schema_free(f.schema);

	f.schema = schema_compile_text("{\"patternProperties\":{\"^(a+)+$|^a*b$\":true},"
				       "\"additionalProperties\":false}", NULL, NULL, NULL);
	assert_int_equal(check(&f, "{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaab\":1}"), 1);
	assert_error(&f, "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "patternProperties",
		     "cannot check pattern \"^(a+)+$|^a*b$\": the regular expression "
		     "needs too much backtracking for this property name");
	schema_free(f.schema);

	f.schema = schema_compile_text("{\"items\":{\"pattern\":\"^(a|a)*$\"}}",
				       NULL, NULL, NULL);
	text[len++] = '[';
	for (int i = 0; i < 1000; i++)
		len += (size_t)sprintf(text + len, "%s\"aaaaaaaaaaaaaaaaaaaaaaaaaaaa!\"",
				       i ? "," : "");
	text[len++] = ']';
	text[len] = '\0';
	assert_int_equal(check(&f, text), 1);
	assert_non_null(strstr(field(&f, 0, "message"), "needs too much backtracking"));
	assert_true((double)(clock() - start) / CLOCKS_PER_SEC < 5.0);
	json_decref(f.errors);
	schema_free(f.schema);
}

/* A group that repeats without backtracking ("^[a-z]+(,[a-z]+)*$", a
 * list of ids) matches a long value: PCRE2 keeps a frame per repeat, and
 * its depth limit of 10,000 refused a valid list of 5,000 ids as "too
 * much backtracking". Past the memory given to those frames (64 MiB,
 * about 200,000 repeats) the error says what it is. */
static void validate__regex_group_repeated_often__matches_until_its_memory_runs_out(
	void **state)
{
	struct fixture f = { 0 };
	size_t n = 400000, len = 0;
	char *text = malloc(3 * n + 8);

	assert_non_null(text);
	f.schema = schema_compile_text("{\"pattern\":\"^[a-z]+(,[a-z]+)*$\"}",
				       NULL, NULL, NULL);
	assert_non_null(f.schema);
	text[len++] = '"';
	for (size_t i = 0; i < 20000; i++)
		len += (size_t)sprintf(text + len, "%sab", i ? "," : "");
	strcpy(text + len, "\"");
	assert_int_equal(check(&f, text), 0);
	len = 1;
	for (size_t i = 0; i < n; i++)
		len += (size_t)sprintf(text + len, "%sab", i ? "," : "");
	strcpy(text + len, "\"");
	assert_int_equal(check(&f, text), 1);
	assert_error(&f, "", "pattern",
		     "cannot check pattern \"^[a-z]+(,[a-z]+)*$\": the regular "
		     "expression repeats a group too often for this value (more "
		     "than 64 MiB of the engine's memory)");
	json_decref(f.errors);
	schema_free(f.schema);
	free(text);
}

/* PCRE2's limits apply to each start position afresh and do not count a
 * scan of a character class, so "\w+\s+\w+" on a megabyte of letters is
 * quadratic within them (minutes); matching counts against the step
 * limit. */
static void validate__regex_on_a_long_string__counts_against_the_step_limit(void **state)
{
	static const char schemas[][64] = {
		"{\"pattern\":\"\\\\w+\\\\s+\\\\w+\"}",
		"{\"pattern\":\"(?:a|a){0,14}(?:!|b)\"}",
	};
	size_t n = 1 << 20;
	char *s = malloc(n + 1);
	json_t *inst;
	clock_t start = clock();

	memset(s, 'a', n);
	s[n] = '\0';
	inst = json_string(s);
	for (size_t i = 0; i < sizeof(schemas) / sizeof(schemas[0]); i++) {
		struct schema *schema = schema_compile_text(schemas[i], NULL, NULL, NULL);
		json_t *errors = NULL;
		const char *msg;

		assert_non_null(schema);
		assert_false(schema_valid(schema, inst));
		assert_int_equal(schema_validate(schema, inst, &errors), -EINVAL);
		msg = json_string_value(json_object_get(json_array_get(errors, 0), "message"));
		if (!msg || !strstr(msg, "takes too long"))
			fail_msg("%s: %s", schemas[i], msg ? msg : "no error");
		json_decref(errors);
		schema_free(schema);
	}
	assert_true((double)(clock() - start) / CLOCKS_PER_SEC < 10.0);
	json_decref(inst);
	free(s);
}

static void validate__large_array_with_unique_items__is_checked_quickly(void **state)
{
	struct schema *s = schema_compile_text("{\"uniqueItems\":true}", NULL, NULL, NULL);
	json_t *inst = json_array();
	clock_t start = clock();

	for (int i = 0; i < 100000; i++)
		json_array_append_new(inst, json_integer(i));
	assert_true(schema_valid(s, inst));
	json_array_append_new(inst, json_real(99999.0));
	assert_false(schema_valid(s, inst));
	assert_true((double)(clock() - start) / CLOCKS_PER_SEC < 5.0);
	json_decref(inst);
	schema_free(s);
}

/* ---- Formats, registry, threads ---- */

static void format__is_an_annotation_unless_assertion_is_asked_for(void **state)
{
	const char *text = "{\"format\":\"email\"}";
	struct schema_options assert_opt = { .format_assert = true };
	struct schema *annotate = schema_compile_text(text, NULL, NULL, NULL);
	struct schema *asserts = schema_compile_text(text, &assert_opt, NULL, NULL);
	json_t *bad = json_string("not an address"), *good = json_string("a@example.com");
	json_t *errors = NULL;

	assert_true(schema_valid(annotate, bad));
	assert_false(schema_valid(asserts, bad));
	assert_true(schema_valid(asserts, good));
	assert_int_equal(schema_validate(asserts, bad, &errors), -EINVAL);
	assert_string_equal(json_string_value(json_object_get(json_array_get(errors, 0),
							      "message")),
			    "must match format \"email\"");
	json_decref(errors);
	json_decref(bad);
	json_decref(good);
	schema_free(annotate);
	schema_free(asserts);
}

static void registry__remote_ref__resolves_from_registered_documents_only(void **state)
{
	struct schema_registry *reg = schema_registry_create();
	json_t *remote = json_pack("{s:s, s:{s:{s:s}}}", "$id", "https://example.com/defs.json",
				   "$defs", "name", "type", "string");
	struct schema *s;
	json_t *inst;
	char *err = NULL;

	assert_int_equal(schema_registry_add(reg, "https://example.com/defs.json", remote, &err), 0);
	assert_int_equal(schema_registry_add(reg, "https://example.com/defs.json", remote, &err),
			 -EEXIST);
	free(err);
	assert_int_equal(schema_registry_add(reg, "defs.json", remote, &err), -EINVAL);
	assert_non_null(strstr(err, "not absolute"));
	free(err);
	json_decref(remote);

	s = schema_compile_text("{\"$ref\":\"https://example.com/defs.json#/$defs/name\"}",
				NULL, reg, &err);
	assert_non_null(s);
	/* The schema keeps what it needs: the registry may go first. */
	schema_registry_destroy(reg);
	inst = json_string("x");
	assert_true(schema_valid(s, inst));
	json_decref(inst);
	inst = json_integer(1);
	assert_false(schema_valid(s, inst));
	json_decref(inst);
	schema_free(s);
}

/* A registry's document holds values the compiled schema goes on reading
 * (a minimum, a pattern's source for its message): `berth validate -r`
 * destroys its registry before it validates. */
static void registry__destroyed_after_compile__leaves_what_the_schema_reads(void **state)
{
	struct schema_registry *reg = schema_registry_create();
	json_t *remote = json_pack("{s:s, s:{s:{s:s, s:i}, s:{s:s, s:s}}}",
				   "$id", "https://example.com/limits.json", "$defs",
				   "count", "type", "integer", "minimum", 3,
				   "code", "type", "string", "pattern", "^[A-Z]{2}$");
	json_t *inst, *errors = NULL;
	struct schema *s;
	char *err = NULL;

	assert_int_equal(schema_registry_add(reg, "https://example.com/limits.json",
					     remote, &err), 0);
	json_decref(remote);
	s = schema_compile_text("{\"properties\":{"
				"\"n\":{\"$ref\":\"https://example.com/limits.json#/$defs/count\"},"
				"\"c\":{\"$ref\":\"https://example.com/limits.json#/$defs/code\"}}}",
				NULL, reg, &err);
	assert_non_null(s);
	schema_registry_destroy(reg);
	inst = json_pack("{s:i, s:s}", "n", 2, "c", "abc");
	assert_int_equal(schema_validate(s, inst, &errors), -EINVAL);
	assert_int_equal(json_array_size(errors), 2);
	json_decref(errors);
	json_decref(inst);
	inst = json_pack("{s:i, s:s}", "n", 3, "c", "AB");
	assert_int_equal(schema_validate(s, inst, &errors), 0);
	json_decref(inst);
	schema_free(s);
}

static void metaschema__is_built_in_and_validates_schemas(void **state)
{
	struct fixture f = { 0 };

	f.schema = schema_compile_text(
		"{\"$ref\":\"https://json-schema.org/draft/2020-12/schema\"}", NULL, NULL, NULL);
	assert_non_null(f.schema);
	assert_int_equal(check(&f, "{\"type\":\"object\",\"properties\":{\"a\":"
				   "{\"minLength\":1}}}"), 0);
	assert_true(check(&f, "{\"properties\":{\"a\":{\"minLength\":-1}}}") >= 1);
	assert_error(&f, "/properties/a/minLength", "minimum", "must be >= 0");
	schema_free(f.schema);
	json_decref(f.errors);
}

struct thread_arg {
	const struct schema *schema;
	int mismatches;
};

static void *validate_many(void *p)
{
	struct thread_arg *a = p;
	json_t *good = json_pack("{s:s}", "location", "Oslo");
	json_t *bad = json_pack("{s:i}", "location", 3);

	for (int i = 0; i < 20000; i++) {
		json_t *errors = NULL;

		a->mismatches += !schema_valid(a->schema, good);
		a->mismatches += schema_valid(a->schema, bad);
		a->mismatches += schema_validate(a->schema, bad, &errors) != -EINVAL;
		json_decref(errors);
	}
	json_decref(good);
	json_decref(bad);
	return NULL;
}

static void schema__used_from_several_threads__gives_the_same_answers(void **state)
{
	struct fixture *f = *state;
	pthread_t threads[4];
	struct thread_arg args[4];

	for (int i = 0; i < 4; i++) {
		args[i] = (struct thread_arg){ f->schema, 0 };
		assert_int_equal(pthread_create(&threads[i], NULL, validate_many, &args[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(threads[i], NULL);
		assert_int_equal(args[i].mismatches, 0);
	}
}

/* ---- Schemas from agent frameworks ---- */

static void zod__typical_tool_input__is_valid(void **state)
{
	assert_int_equal(check(*state,
		"{\"location\":\"Oslo\",\"units\":\"celsius\",\"days\":3,\"contact\":null,"
		"\"stops\":[{\"name\":\"A\",\"lat\":1.5,\"lon\":2}],"
		"\"mode\":{\"kind\":\"train\",\"line\":\"R10\"}}"), 0);
}

static void zod__bad_fields__are_each_reported_where_they_are(void **state)
{
	struct fixture *f = *state;

	check(f, "{\"location\":\"\",\"units\":\"kelvin\",\"days\":20,\"contact\":\"nope\","
		 "\"stops\":[{\"name\":\"A\",\"lat\":1,\"lon\":2},{\"name\":\"B\",\"lat\":\"x\"}],"
		 "\"mode\":{\"kind\":\"bus\"}}");
	assert_error(f, "/location", "minLength", "must have at least 1 character");
	assert_error(f, "/units", "enum",
		     "must be equal to one of the allowed values: \"celsius\", \"fahrenheit\"");
	assert_error(f, "/days", "maximum", "must be <= 14");
	assert_error(f, "/contact", "format", "must match format \"email\"");
	assert_error(f, "/stops/1/lat", "type", "must be number, got string");
	assert_error(f, "/stops/1", "required", "must have required property 'lon'");
	assert_error(f, "/mode", "anyOf", "must match at least one schema in anyOf");
	assert_error(f, "/mode/kind", "const", "must be equal to the constant \"car\"");
}

static void zod__draft07_ref_siblings__are_ignored_as_draft07_says(void **state)
{
	struct fixture f = { 0 };

	f.schema = schema_compile_text(
		"{\"$schema\":\"http://json-schema.org/draft-07/schema#\","
		"\"definitions\":{\"s\":{\"type\":\"string\"}},"
		"\"properties\":{\"a\":{\"$ref\":\"#/definitions/s\",\"maxLength\":1},"
		"\"t\":{\"items\":[{\"type\":\"integer\"}],\"additionalItems\":false}},"
		"\"dependencies\":{\"a\":[\"t\"]}}", NULL, NULL, NULL);
	assert_non_null(f.schema);
	assert_int_equal(check(&f, "{\"a\":\"long\",\"t\":[1]}"), 0);
	assert_int_equal(check(&f, "{\"a\":\"x\"}"), 1);
	/* Errors name the keywords the schema was written with (before:
	 * 2020-12's, "dependentRequired" and "items"). */
	assert_error(&f, "", "dependencies", "must have property 't' when property 'a' is present");
	assert_true(check(&f, "{\"t\":[1,2]}") >= 1);
	assert_error(&f, "/t", "additionalItems", "must not have more than 1 item");
	schema_free(f.schema);
	json_decref(f.errors);
}

static void valibot__typical_tool_input__is_valid(void **state)
{
	assert_int_equal(check(*state, "{\"location\":\"oslo\",\"units\":\"fahrenheit\","
				       "\"days\":2.5,\"contact\":null,\"stops\":[{\"name\":\"a\","
				       "\"lat\":0,\"extra\":true}]}"), 0);
}

static void valibot__nullable_and_pattern_failures__are_reported(void **state)
{
	struct fixture *f = *state;

	check(f, "{\"location\":\"Oslo\",\"units\":\"celsius\",\"contact\":7,"
		 "\"stops\":[{\"lat\":0}]}");
	assert_error(f, "/location", "pattern", "must match pattern \"^[a-z]+$\"");
	assert_error(f, "/contact", "type", "must be string, got number");
	assert_error(f, "/contact", "type", "must be null, got number");
	assert_error(f, "/contact", "anyOf", "must match at least one schema in anyOf");
	assert_error(f, "/stops/0", "required", "must have required property 'name'");
	check(f, "{\"location\":\"oslo\",\"units\":\"celsius\"}");
	assert_error(f, "", "required", "must have required property 'contact'");
}

static void arktype__typical_tool_input__is_valid(void **state)
{
	assert_int_equal(check(*state, "{\"location\":\"oslo\",\"units\":\"celsius\","
				       "\"contact\":null,\"stops\":[]}"), 0);
}

static void arktype__const_null_union_and_enum__are_reported(void **state)
{
	struct fixture *f = *state;

	check(f, "{\"location\":\"oslo\",\"units\":\"K\",\"contact\":false}");
	assert_error(f, "/units", "enum",
		     "must be equal to one of the allowed values: \"celsius\", \"fahrenheit\"");
	assert_error(f, "/contact", "const", "must be equal to the constant null");
	assert_error(f, "/contact", "anyOf", "must match at least one schema in anyOf");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(weather__valid_input__passes_both_paths,
						setup_weather, teardown),
		cmocka_unit_test_setup_teardown(weather__number_for_string__says_expected_and_actual_type,
						setup_weather, teardown),
		cmocka_unit_test_setup_teardown(weather__missing_location__names_the_required_property,
						setup_weather, teardown),
		cmocka_unit_test_setup_teardown(weather__extra_property__names_the_property,
						setup_weather, teardown),
		cmocka_unit_test_setup_teardown(weather__several_problems__are_all_reported,
						setup_weather, teardown),
		cmocka_unit_test_setup_teardown(weather__non_object__is_rejected_at_the_root,
						setup_weather, teardown),
		cmocka_unit_test_setup_teardown(validate__without_an_error_list__returns_einval_only,
						setup_weather, teardown),
		cmocka_unit_test_setup_teardown(schema_doc__returns_a_copy_of_the_compiled_document,
						setup_weather, teardown),
		cmocka_unit_test(keywords__each_failure__reads_as_a_sentence),
		cmocka_unit_test(anyof__passing_branch__drops_the_errors_of_the_failing_ones),
		cmocka_unit_test(false_schemas__in_two_places__report_their_own_location),
		cmocka_unit_test(compile__non_schema_document__is_refused_at_the_root),
		cmocka_unit_test(compile__unknown_type__is_located_with_a_json_pointer),
		cmocka_unit_test(compile__wrong_keyword_values__say_what_is_expected),
		cmocka_unit_test(property_names__errors_are_at_the_object),
		cmocka_unit_test(compile__invalid_regex__is_reported_at_compile_time),
		cmocka_unit_test(compile__unresolvable_ref__names_the_reference),
		cmocka_unit_test(compile__ref_cycle_without_progress__is_refused),
		cmocka_unit_test(compile__ref_cycle_below_the_root__is_refused_with_its_place),
		cmocka_unit_test(compile__recursive_schema_through_properties__is_accepted),
		cmocka_unit_test(compile__array_items_in_2020__points_to_prefixItems),
		cmocka_unit_test(compile__invalid_json_text__reports_line_and_column),
		cmocka_unit_test(compile__too_deep_nesting__is_refused_with_a_depth_error),
		cmocka_unit_test(validate__very_deep_instance__fails_cleanly_instead_of_overflowing),
		cmocka_unit_test(validate__huge_bad_instance__caps_the_number_of_errors),
		cmocka_unit_test(validate__catastrophic_regex__is_stopped_by_the_match_limit),
		cmocka_unit_test(validate__schema_that_fans_out__stops_at_the_step_limit),
		cmocka_unit_test(validate__after_the_error_cap__goes_no_further),
		cmocka_unit_test(validate__a_big_union_that_fails__leaves_room_for_its_own_error_and_others),
		cmocka_unit_test(validate__regex_past_its_limit__says_the_engine_gave_up),
		cmocka_unit_test(validate__regex_group_repeated_often__matches_until_its_memory_runs_out),
		cmocka_unit_test(validate__regex_on_a_long_string__counts_against_the_step_limit),
		cmocka_unit_test(validate__large_array_with_unique_items__is_checked_quickly),
		cmocka_unit_test(format__is_an_annotation_unless_assertion_is_asked_for),
		cmocka_unit_test(registry__remote_ref__resolves_from_registered_documents_only),
		cmocka_unit_test(registry__destroyed_after_compile__leaves_what_the_schema_reads),
		cmocka_unit_test(metaschema__is_built_in_and_validates_schemas),
		cmocka_unit_test_setup_teardown(schema__used_from_several_threads__gives_the_same_answers,
						setup_weather, teardown),
		cmocka_unit_test_setup_teardown(zod__typical_tool_input__is_valid,
						setup_zod, teardown),
		cmocka_unit_test_setup_teardown(zod__bad_fields__are_each_reported_where_they_are,
						setup_zod, teardown),
		cmocka_unit_test(zod__draft07_ref_siblings__are_ignored_as_draft07_says),
		cmocka_unit_test_setup_teardown(valibot__typical_tool_input__is_valid,
						setup_valibot, teardown),
		cmocka_unit_test_setup_teardown(valibot__nullable_and_pattern_failures__are_reported,
						setup_valibot, teardown),
		cmocka_unit_test_setup_teardown(arktype__typical_tool_input__is_valid,
						setup_arktype, teardown),
		cmocka_unit_test_setup_teardown(arktype__const_null_union_and_enum__are_reported,
						setup_arktype, teardown),
	};

	/* usage: test_schema [FIXTURES [TEST-NAME-PATTERN]] */
	if (argc > 1)
		fixtures_dir = argv[1];
	if (argc > 2)
		cmocka_set_test_filter(argv[2]);
	return cmocka_run_group_tests_name("schema", tests, NULL, NULL);
}

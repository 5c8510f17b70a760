/*
 * test_defaults.c: schema_apply_defaults fills in what a Zod parse fills
 * in (schema/defaults.c): absent properties with a default, through the
 * keywords that apply to the instance for sure, and never through the ones
 * whose application depends on it; and a schema without defaults costs
 * nothing and changes nothing.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "schema/schema.h"

static const char *fixtures_dir = "fixtures";

static struct schema *compile(const char *text)
{
	char *err = NULL;
	struct schema *s = schema_compile_text(text, NULL, NULL, &err);

	if (!s)
		fail_msg("%s: %s", text, err);
	return s;
}

static json_t *parse(const char *text)
{
	json_error_t jerr;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);

	if (!v)
		fail_msg("%s: %s", text, jerr.text);
	return v;
}

/* expect_filled asserts that filling instance with the defaults of schema
 * gives want, and that instance itself is left as it was. */
static void expect_filled(const char *schema, const char *instance,
			  const char *want)
{
	struct schema *s = compile(schema);
	json_t *in = parse(instance), *before = json_deep_copy(in);
	json_t *w = parse(want), *got = schema_apply_defaults(s, in);

	assert_non_null(got);
	if (!json_equal(got, w)) {
		char *g = json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY);

		fail_msg("schema %s, instance %s: got %s, want %s", schema,
			 instance, g, want);
	}
	assert_true(json_equal(in, before));
	json_decref(got);
	json_decref(w);
	json_decref(before);
	json_decref(in);
	schema_free(s);
}

static const char weather[] =
	"{\"type\":\"object\",\"properties\":{"
	"\"location\":{\"type\":\"string\"},"
	"\"unit\":{\"enum\":[\"C\",\"F\"],\"default\":\"C\"}},"
	"\"required\":[\"location\"],\"additionalProperties\":false}";

static void defaults__of_an_absent_property__are_filled_in_a_new_value(
	void **state)
{
	expect_filled(weather, "{\"location\":\"Paris\"}",
		      "{\"location\":\"Paris\",\"unit\":\"C\"}");
	expect_filled(weather, "{}", "{\"unit\":\"C\"}");
}

static void defaults__of_a_present_property__leave_its_value_even_null(
	void **state)
{
	expect_filled(weather, "{\"location\":\"Oslo\",\"unit\":\"F\"}",
		      "{\"location\":\"Oslo\",\"unit\":\"F\"}");
	/* Zod fills in only what is undefined; null is a value. */
	expect_filled(weather, "{\"unit\":null}", "{\"unit\":null}");
}

static void defaults__of_nested_objects__fill_present_and_inserted_values(
	void **state)
{
	static const char schema[] =
		"{\"type\":\"object\",\"properties\":{\"opts\":{"
		"\"type\":\"object\",\"default\":{},\"properties\":{"
		"\"depth\":{\"type\":\"integer\",\"default\":2},"
		"\"deep\":{\"type\":\"object\",\"properties\":{"
		"\"on\":{\"type\":\"boolean\",\"default\":true}}}}}}}";

	expect_filled(schema, "{}", "{\"opts\":{\"depth\":2}}");
	expect_filled(schema, "{\"opts\":{\"deep\":{}}}",
		      "{\"opts\":{\"depth\":2,\"deep\":{\"on\":true}}}");
	expect_filled(schema, "{\"opts\":{\"depth\":5,\"deep\":{\"on\":false}}}",
		      "{\"opts\":{\"depth\":5,\"deep\":{\"on\":false}}}");
	/* A value of another type is left for validation to refuse. */
	expect_filled(schema, "{\"opts\":7}", "{\"opts\":7}");
}

/* Zod's JSON Schema in output mode lists a property with a default as
 * required (tests/schema/fixtures/zod-tool.json does): filled first, it
 * validates, as the parse it came from does. */
static void defaults__of_a_required_property__make_the_instance_valid(
	void **state)
{
	char path[1024];
	json_error_t jerr;
	json_t *doc, *in, *got;
	struct schema *s;

	snprintf(path, sizeof(path), "%s/zod-tool.json", fixtures_dir);
	doc = json_load_file(path, 0, &jerr);
	assert_non_null(doc);
	s = schema_compile(doc, NULL, NULL, NULL);
	assert_non_null(s);
	assert_true(schema_has_defaults(s));
	in = parse("{\"location\":\"Lyon\"}");
	assert_false(schema_valid(s, in));
	got = schema_apply_defaults(s, in);
	assert_string_equal(json_string_value(json_object_get(got, "units")),
			    "celsius");
	assert_true(schema_valid(s, got));
	json_decref(got);
	json_decref(in);
	json_decref(doc);
	schema_free(s);
}

static void defaults__through_ref_and_allof__are_filled(void **state)
{
	static const char schema[] =
		"{\"$defs\":{\"page\":{\"type\":\"object\",\"properties\":{"
		"\"size\":{\"type\":\"integer\",\"default\":50}}},"
		"\"mode\":{\"type\":\"string\",\"default\":\"fast\"}},"
		"\"allOf\":[{\"$ref\":\"#/$defs/page\"},{\"properties\":{"
		"\"sort\":{\"default\":\"asc\"}}}],"
		"\"properties\":{\"mode\":{\"$ref\":\"#/$defs/mode\"},"
		"\"own\":{\"$ref\":\"#/$defs/mode\",\"default\":\"slow\"}}}";

	expect_filled(schema, "{}",
		      "{\"size\":50,\"sort\":\"asc\",\"mode\":\"fast\","
		      "\"own\":\"slow\"}");
}

static void defaults__of_arrays__fill_trailing_places_and_each_element(
	void **state)
{
	static const char tuple[] =
		"{\"type\":\"array\",\"prefixItems\":["
		"{\"type\":\"string\"},{\"type\":\"integer\",\"default\":1},"
		"{\"type\":\"integer\",\"default\":2},{\"type\":\"integer\"},"
		"{\"default\":4}]}";
	static const char list[] =
		"{\"type\":\"object\",\"properties\":{\"stops\":{"
		"\"type\":\"array\",\"items\":{\"type\":\"object\","
		"\"properties\":{\"wait\":{\"default\":0}}}}}}";
	static const char draft07[] =
		"{\"$schema\":\"http://json-schema.org/draft-07/schema#\","
		"\"type\":\"array\",\"items\":[{\"default\":\"a\"},"
		"{\"default\":\"b\"}]}";

	expect_filled(tuple, "[\"x\"]", "[\"x\",1,2]");
	expect_filled(tuple, "[\"x\",9]", "[\"x\",9,2]");
	/* The first place without a default stops the filling: an array has
	 * no holes. */
	expect_filled(tuple, "[]", "[]");
	expect_filled(list, "{\"stops\":[{},{\"wait\":3},{}]}",
		      "{\"stops\":[{\"wait\":0},{\"wait\":3},{\"wait\":0}]}");
	expect_filled(draft07, "[]", "[\"a\",\"b\"]");
}

static void defaults__of_record_values__fill_every_matching_member(
	void **state)
{
	static const char schema[] =
		"{\"type\":\"object\",\"properties\":{\"fixed\":{"
		"\"type\":\"object\"}},\"patternProperties\":{\"^x-\":{"
		"\"properties\":{\"p\":{\"default\":true}}}},"
		"\"additionalProperties\":{\"type\":\"object\",\"properties\":"
		"{\"a\":{\"default\":1}}}}";

	expect_filled(schema,
		      "{\"fixed\":{},\"x-one\":{},\"other\":{},\"more\":{\"a\":5}}",
		      "{\"fixed\":{},\"x-one\":{\"p\":true},\"other\":{\"a\":1},"
		      "\"more\":{\"a\":5}}");
}

/* A nullable object (Zod's .nullable()) is an anyOf with a null branch:
 * an object matches one branch only. Several matching branches are
 * ambiguous and none is used. */
static void defaults__in_anyof_and_oneof__come_only_from_the_one_match(
	void **state)
{
	static const char nullable[] =
		"{\"type\":\"object\",\"properties\":{\"page\":{\"anyOf\":["
		"{\"type\":\"object\",\"properties\":{\"size\":{"
		"\"default\":10}}},{\"type\":\"null\"}]}}}";
	static const char tagged[] =
		"{\"oneOf\":["
		"{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"car\"},"
		"\"seats\":{\"default\":4}},\"required\":[\"kind\"]},"
		"{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":"
		"\"train\"},\"line\":{\"default\":\"A1\"}},\"required\":"
		"[\"kind\"]}]}";
	static const char ambiguous[] =
		"{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"a\":"
		"{\"default\":1}}},{\"type\":\"object\",\"properties\":{\"b\":"
		"{\"default\":2}}}]}";

	expect_filled(nullable, "{\"page\":{}}", "{\"page\":{\"size\":10}}");
	expect_filled(nullable, "{\"page\":null}", "{\"page\":null}");
	expect_filled(tagged, "{\"kind\":\"train\"}",
		      "{\"kind\":\"train\",\"line\":\"A1\"}");
	expect_filled(tagged, "{\"kind\":\"car\"}",
		      "{\"kind\":\"car\",\"seats\":4}");
	expect_filled(tagged, "{\"kind\":\"boat\"}", "{\"kind\":\"boat\"}");
	expect_filled(ambiguous, "{}", "{}");
}

static void defaults__under_conditional_keywords__are_not_filled(
	void **state)
{
	static const char schema[] =
		"{\"type\":\"object\","
		"\"if\":{\"properties\":{\"i\":{\"default\":1}}},"
		"\"then\":{\"properties\":{\"t\":{\"default\":1}}},"
		"\"else\":{\"properties\":{\"e\":{\"default\":1}}},"
		"\"not\":{\"properties\":{\"n\":{\"default\":1}},"
		"\"required\":[\"zz\"]},"
		"\"dependentSchemas\":{\"k\":{\"properties\":{\"d\":"
		"{\"default\":1}}}},"
		"\"$dynamicRef\":\"#meta\",\"$defs\":{\"m\":{\"$dynamicAnchor\":"
		"\"meta\",\"properties\":{\"m\":{\"default\":1}}}}}";
	struct schema *s = compile(schema);

	assert_false(schema_has_defaults(s));
	schema_free(s);
	expect_filled(schema, "{\"k\":1}", "{\"k\":1}");
}

static void defaults__of_a_schema_without_any__return_the_instance_itself(
	void **state)
{
	struct schema *s = compile("{\"type\":\"object\",\"properties\":{"
				   "\"a\":{\"type\":\"string\"}},"
				   "\"default\":{\"a\":\"root defaults are "
				   "not used\"}}");
	json_t *in = parse("{}"), *got;

	assert_false(schema_has_defaults(s));
	got = schema_apply_defaults(s, in);
	assert_ptr_equal(got, in);
	json_decref(got);
	assert_null(schema_apply_defaults(s, NULL));
	json_decref(in);
	schema_free(s);
}

/* A recursive schema (a tree) fills every level the instance has, and
 * ends where the instance ends. */
static void defaults__of_a_recursive_schema__follow_the_instance(
	void **state)
{
	static const char tree[] =
		"{\"type\":\"object\",\"properties\":{"
		"\"label\":{\"type\":\"string\",\"default\":\"node\"},"
		"\"children\":{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}}}}";

	expect_filled(tree, "{\"children\":[{\"children\":[{}]},{}]}",
		      "{\"label\":\"node\",\"children\":[{\"label\":\"node\","
		      "\"children\":[{\"label\":\"node\"}]},"
		      "{\"label\":\"node\"}]}");
}

/* ---- Bounded filling ---- */

/* fill_error fills instance with the defaults of s, which must fail, and
 * returns its one error (new). */
static json_t *fill_error(const struct schema *s, const char *instance)
{
	json_t *in = parse(instance), *filled = NULL, *errors = NULL, *e;

	assert_int_equal(schema_fill_defaults(s, in, &filled, &errors), -EINVAL);
	assert_null(filled);
	assert_non_null(errors);
	assert_int_equal(json_array_size(errors), 1);
	e = json_incref(json_array_get(errors, 0));
	json_decref(errors);
	json_decref(in);
	return e;
}

static const char *member(const json_t *e, const char *name)
{
	const char *v = json_string_value(json_object_get(e, name));

	assert_non_null(v);
	return v;
}

/* Two properties whose default {} refers back to the root would fill a
 * binary tree as deep as the depth limit (2^256 values): filling stops at
 * SCHEMA_MAX_DEFAULT_VALUES with an error that names the default and the
 * limit. A tool's inputExamples are filled the same way at registration. */
static void defaults__that_refer_back_to_their_own_schema__stop_at_the_limit(
	void **state)
{
	static const char bomb[] =
		"{\"type\":\"object\",\"properties\":{"
		"\"a\":{\"$ref\":\"#\",\"default\":{}},"
		"\"b\":{\"$ref\":\"#\",\"default\":{}}}}";
	/* With a depth limit of 36 the tree has 2^17 nodes, past the limit,
	 * yet small enough to be built where there is no limit. */
	struct schema_options shallow = { .max_depth = 36 };
	struct schema *s = schema_compile_text(bomb, &shallow, NULL, NULL);
	json_t *in = parse("{}"), *got, *e;
	char want[64];

	assert_non_null(s);
	got = schema_apply_defaults(s, in);
	if (got) {
		char *text = json_dumps(got, JSON_COMPACT);

		fail_msg("filled in %zu bytes of defaults", text ? strlen(text) : 0);
	}
	schema_free(s);

	s = compile(bomb);
	assert_null(schema_apply_defaults(s, in));
	e = fill_error(s, "{}");
	assert_string_equal(member(e, "keyword"), "default");
	assert_non_null(strstr(member(e, "schemaPath"), "/default"));
	assert_string_equal(member(e, "instancePath"), "");
	snprintf(want, sizeof(want), "more than %d values",
		 SCHEMA_MAX_DEFAULT_VALUES);
	assert_non_null(strstr(member(e, "message"), want));
	json_decref(e);
	json_decref(in);
	schema_free(s);
}

/* An anyOf at every level of a nested instance makes filling try both
 * branches of the level below for each branch of the level above (2^40
 * here), even with nothing to insert: one budget of SCHEMA_MAX_STEPS pays
 * for filling and for the validations that choose a branch, and running
 * out of it fails the filling. (Each level has its defaults already, so
 * nothing is inserted and only the budget stops it.) */
static void defaults__of_nested_unions__stop_at_the_step_limit(void **state)
{
	static const char nested[] =
		"{\"$ref\":\"#/$defs/n\",\"$defs\":{\"n\":{\"anyOf\":["
		"{\"type\":\"object\",\"properties\":{\"x\":{\"$ref\":"
		"\"#/$defs/n\"},\"d\":{\"default\":1}}},"
		"{\"type\":\"object\",\"properties\":{\"x\":{\"$ref\":"
		"\"#/$defs/n\"},\"e\":{\"default\":1}},\"required\":[\"y\"]}"
		"]}}}";
	struct schema *s = compile(nested);
	json_t *in = json_object(), *cur = in, *e;

	for (int i = 0; i < 40; i++) {
		json_t *next = json_object();

		json_object_set_new(cur, "d", json_integer(0));
		json_object_set_new(cur, "e", json_integer(0));
		json_object_set_new(cur, "x", next);
		cur = next;
	}
	json_object_set_new(cur, "d", json_integer(0));
	json_object_set_new(cur, "e", json_integer(0));
	assert_null(schema_apply_defaults(s, in));
	{
		char *text = json_dumps(in, JSON_COMPACT);

		e = fill_error(s, text);
		free(text);
	}
	assert_non_null(strstr(member(e, "message"), "takes too long"));
	json_decref(e);
	json_decref(in);
	schema_free(s);
}

/* Under the limits, a large instance gets every default. */
static void defaults__of_a_large_array__are_all_filled(void **state)
{
	struct schema *s = compile("{\"type\":\"array\",\"items\":{"
				   "\"type\":\"object\",\"properties\":{"
				   "\"unit\":{\"default\":\"C\"}}}}");
	json_t *in = json_array(), *got;

	for (int i = 0; i < 20000; i++)
		json_array_append_new(in, json_object());
	got = schema_apply_defaults(s, in);
	assert_non_null(got);
	assert_int_equal(json_array_size(got), 20000);
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(got, 19999), "unit")), "C");
	json_decref(got);
	json_decref(in);
	schema_free(s);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults__of_an_absent_property__are_filled_in_a_new_value),
		cmocka_unit_test(defaults__of_a_present_property__leave_its_value_even_null),
		cmocka_unit_test(defaults__of_nested_objects__fill_present_and_inserted_values),
		cmocka_unit_test(defaults__of_a_required_property__make_the_instance_valid),
		cmocka_unit_test(defaults__through_ref_and_allof__are_filled),
		cmocka_unit_test(defaults__of_arrays__fill_trailing_places_and_each_element),
		cmocka_unit_test(defaults__of_record_values__fill_every_matching_member),
		cmocka_unit_test(defaults__in_anyof_and_oneof__come_only_from_the_one_match),
		cmocka_unit_test(defaults__under_conditional_keywords__are_not_filled),
		cmocka_unit_test(defaults__of_a_schema_without_any__return_the_instance_itself),
		cmocka_unit_test(defaults__of_a_recursive_schema__follow_the_instance),
		cmocka_unit_test(defaults__that_refer_back_to_their_own_schema__stop_at_the_limit),
		cmocka_unit_test(defaults__of_nested_unions__stop_at_the_step_limit),
		cmocka_unit_test(defaults__of_a_large_array__are_all_filled),
	};

	/* usage: test_defaults [FIXTURES [TEST-NAME-PATTERN]] */
	if (argc > 1)
		fixtures_dir = argv[1];
	if (argc > 2)
		cmocka_set_test_filter(argv[2]);
	return cmocka_run_group_tests_name("schema defaults", tests, NULL,
					   NULL);
}

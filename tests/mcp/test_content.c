/*
 * test_content.c: what an MCP client is shown of a tool's results
 * (api/mcp_content.c), without a daemon: the content blocks of each AI SDK
 * model output shape, the wrapping of outputs and output schemas that are
 * not objects, checked with berth's own validator.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/mcp_content.h"
#include "schema/schema.h"

#define JOB "01234567-89ab-7def-8123-456789abcdef"

static json_t *parse(const char *text)
{
	json_error_t e;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &e);

	if (!v)
		fail_msg("bad test JSON at %d: %s", e.position, e.text);
	return v;
}

/* content returns the blocks for the model output in text. */
static json_t *content(const char *text, bool links, bool *is_error)
{
	json_t *mo = parse(text);
	json_t *c = api_mcp_content(mo, JOB, links, is_error);

	json_decref(mo);
	assert_non_null(c);
	assert_true(json_is_array(c));
	return c;
}

static const char *str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* assert_json checks that v equals the JSON in text. */
static void assert_json(const json_t *v, const char *text)
{
	json_t *want = parse(text);

	if (!json_equal(v, want)) {
		char *got = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

		fail_msg("got %s, want %s", got, text);
	}
	json_decref(want);
}

/* ---- content ---------------------------------------------------------- */

static void content__of_a_bare_string__is_one_text_block(void **state)
{
	bool err = true;
	json_t *c = content("\"It is 21 C.\"", true, &err);

	assert_json(c, "[{\"type\":\"text\",\"text\":\"It is 21 C.\"}]");
	assert_false(err);
	json_decref(c);
}

static void content__of_text_and_json__is_their_text(void **state)
{
	bool err = true;
	json_t *c = content("{\"type\":\"text\",\"value\":\"plain\"}", true,
			    &err);

	assert_json(c, "[{\"type\":\"text\",\"text\":\"plain\"}]");
	assert_false(err);
	json_decref(c);
	c = content("{\"type\":\"json\",\"value\":{\"a\":[1,null]}}", true,
		    &err);
	assert_json(c, "[{\"type\":\"text\",\"text\":\"{\\\"a\\\":[1,null]}\"}]");
	assert_false(err);
	json_decref(c);
}

static void content__of_error_text_and_error_json__sets_is_error(void **state)
{
	bool err = false;
	json_t *c = content("{\"type\":\"error-text\",\"value\":\"quota\"}",
			    true, &err);
	char *e;

	assert_json(c, "[{\"type\":\"text\",\"text\":\"quota\"}]");
	assert_true(err);
	json_decref(c);
	err = false;
	c = content("{\"type\":\"error-json\",\"value\":{\"code\":429}}", true,
		    &err);
	assert_json(c, "[{\"type\":\"text\",\"text\":\"{\\\"code\\\":429}\"}]");
	assert_true(err);
	json_decref(c);

	c = parse("{\"type\":\"error-json\",\"value\":{\"code\":429}}");
	assert_true(api_mcp_says_failed(c));
	e = api_mcp_error_text(c);
	assert_string_equal(e, "{\"code\":429}");
	free(e);
	json_decref(c);
}

static void content__of_execution_denied__says_why_and_sets_is_error(
	void **state)
{
	bool err = false;
	json_t *c = content("{\"type\":\"execution-denied\",\"reason\":\"no\"}",
			    true, &err);

	assert_true(err);
	assert_int_equal(json_array_size(c), 1);
	assert_non_null(strstr(str(json_array_get(c, 0), "text"), "denied"));
	assert_non_null(strstr(str(json_array_get(c, 0), "text"), ": no"));
	json_decref(c);
}

static void error_text__is_null_unless_the_output_says_the_call_failed(
	void **state)
{
	static const char *const fine[] = {
		"\"error-text\"", "{\"type\":\"text\",\"value\":\"x\"}",
		"{\"type\":\"content\",\"value\":[]}", "{\"value\":\"x\"}", "7",
	};

	for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
		json_t *mo = parse(fine[i]);

		assert_null(api_mcp_error_text(mo));
		assert_false(api_mcp_says_failed(mo));
		json_decref(mo);
	}
	assert_null(api_mcp_error_text(NULL));
	assert_false(api_mcp_says_failed(NULL));
}

/* Mastra's example: a text and the radar image by URL. */
static void content__of_mastras_example__is_text_and_a_resource_link(
	void **state)
{
	bool err = true;
	json_t *c = content(
		"{\"type\":\"content\",\"value\":["
		"{\"type\":\"text\",\"text\":\"Seattle: 21 C\"},"
		"{\"type\":\"image-url\","
		"\"url\":\"https://example.com/radar/seattle.png\"}]}",
		true, &err);

	assert_json(c, "[{\"type\":\"text\",\"text\":\"Seattle: 21 C\"},"
		       "{\"type\":\"resource_link\","
		       "\"uri\":\"https://example.com/radar/seattle.png\","
		       "\"name\":\"seattle.png\"}]");
	assert_false(err);
	json_decref(c);
}

static void content__of_base64_parts__is_image_audio_or_a_blob_resource(
	void **state)
{
	bool err;
	json_t *c = content(
		"{\"type\":\"content\",\"value\":["
		"{\"type\":\"image-data\",\"data\":\"iVBORw0=\","
		"\"mediaType\":\"image/png\"},"
		"{\"type\":\"media\",\"data\":\"UklGRg==\","
		"\"mediaType\":\"audio/wav\"},"
		"{\"type\":\"file-data\",\"data\":\"JVBERi0=\","
		"\"mediaType\":\"application/pdf\",\"filename\":\"q 1/ä.pdf\"},"
		"{\"type\":\"file\",\"data\":{\"type\":\"data\","
		"\"data\":\"aGk=\"},\"mediaType\":\"image\"}]}",
		true, &err);

	assert_json(c,
		    "[{\"type\":\"image\",\"data\":\"iVBORw0=\","
		    "\"mimeType\":\"image/png\"},"
		    "{\"type\":\"audio\",\"data\":\"UklGRg==\","
		    "\"mimeType\":\"audio/wav\"},"
		    "{\"type\":\"resource\",\"resource\":{\"uri\":"
		    "\"berth://jobs/" JOB "/modelOutput/2/q%201%2F%C3%A4.pdf\","
		    "\"mimeType\":\"application/pdf\",\"blob\":\"JVBERi0=\"}},"
		    "{\"type\":\"image\",\"data\":\"aGk=\",\"mimeType\":\"image\"}]");
	json_decref(c);
}

static void content__of_a_data_url__is_its_data(void **state)
{
	bool err;
	json_t *c = content(
		"{\"type\":\"content\",\"value\":["
		"{\"type\":\"image-url\","
		"\"url\":\"data:image/gif;base64,R0lGODlhAQABAAAAACw=\"},"
		"{\"type\":\"file-url\",\"url\":\"data:,a%20b\"}]}",
		true, &err);

	assert_json(c,
		    "[{\"type\":\"image\",\"data\":\"R0lGODlhAQABAAAAACw=\","
		    "\"mimeType\":\"image/gif\"},"
		    "{\"type\":\"resource\",\"resource\":{\"uri\":"
		    "\"berth://jobs/" JOB "/modelOutput/1\","
		    "\"mimeType\":\"text/plain\",\"text\":\"a b\"}}]");
	json_decref(c);
}

static void content__of_ai_sdk_7_file_parts__follows_their_data_tag(
	void **state)
{
	bool err;
	json_t *c = content(
		"{\"type\":\"content\",\"value\":["
		"{\"type\":\"file\",\"data\":{\"type\":\"text\",\"text\":\"hi\"},"
		"\"mediaType\":\"text/markdown\",\"filename\":\"a.md\"},"
		"{\"type\":\"file\",\"data\":{\"type\":\"url\","
		"\"url\":\"https://x.test/d/r.csv?s=1#t\"},"
		"\"mediaType\":\"text/csv\"}]}",
		true, &err);

	assert_json(c,
		    "[{\"type\":\"resource\",\"resource\":{\"uri\":"
		    "\"berth://jobs/" JOB "/modelOutput/0/a.md\","
		    "\"mimeType\":\"text/markdown\",\"text\":\"hi\"}},"
		    "{\"type\":\"resource_link\","
		    "\"uri\":\"https://x.test/d/r.csv?s=1#t\",\"name\":\"r.csv\","
		    "\"mimeType\":\"text/csv\"}]");
	json_decref(c);
}

/* Provider file ids, custom parts, unknown parts and broken parts are
 * words for the model, saying what they were. */
static void content__of_parts_mcp_cannot_carry__is_text_saying_what_they_were(
	void **state)
{
	static const char *const want[] = {
		"file-id: a file held by a model provider",
		"image-file-id: a file held by a model provider",
		"file-reference: a file held by a model provider",
		"custom: a part for a model provider only",
		"hologram: a content part MCP has no block for",
		"not base64",
		"without a mediaType",
		"without a type",
		"not an object",
		"a text part without text",
		"a file held by a model provider",
	};
	bool err;
	json_t *c = content(
		"{\"type\":\"content\",\"value\":["
		"{\"type\":\"file-id\",\"fileId\":\"file-abc\"},"
		"{\"type\":\"image-file-id\",\"fileId\":{\"openai\":\"f\"}},"
		"{\"type\":\"file-reference\",\"providerReference\":{\"a\":\"b\"}},"
		"{\"type\":\"custom\",\"providerOptions\":{\"x\":{}}},"
		"{\"type\":\"hologram\"},"
		"{\"type\":\"image-data\",\"data\":\"not base64!\","
		"\"mediaType\":\"image/png\"},"
		"{\"type\":\"file-data\",\"data\":\"aGk=\"},"
		"{\"text\":\"?\"},"
		"7,"
		"{\"type\":\"text\",\"text\":3},"
		"{\"type\":\"file\",\"data\":{\"type\":\"reference\","
		"\"reference\":{\"openai\":\"f\"}},\"mediaType\":\"image/png\"}]}",
		true, &err);

	assert_int_equal(json_array_size(c), sizeof want / sizeof want[0]);
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		json_t *b = json_array_get(c, i);

		assert_string_equal(str(b, "type"), "text");
		if (!strstr(str(b, "text"), want[i]))
			fail_msg("block %zu: %s lacks \"%s\"", i, str(b, "text"),
				 want[i]);
	}
	/* The provider's id is quoted: the model may know what to do. */
	assert_non_null(strstr(str(json_array_get(c, 0), "text"), "file-abc"));
	assert_false(err);
	json_decref(c);
}

static void content__for_a_client_without_resource_links__says_the_link(
	void **state)
{
	bool err;
	json_t *c = content("{\"type\":\"content\",\"value\":[{\"type\":"
			    "\"image-url\",\"url\":\"https://e.test/a.png\"}]}",
			    false, &err);

	assert_json(c, "[{\"type\":\"text\","
		       "\"text\":\"[link: https://e.test/a.png]\"}]");
	json_decref(c);
}

static void content__of_anything_else__is_its_json(void **state)
{
	static const char *const other[] = {
		"{\"answer\":42}", "[1,2]", "7", "null",
		"{\"type\":\"content\",\"value\":\"not a list\"}",
		"{\"type\":\"hologram\",\"value\":1}",
	};

	for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
		bool err = true;
		json_t *c = content(other[i], true, &err);
		json_t *back;

		assert_int_equal(json_array_size(c), 1);
		back = parse(str(json_array_get(c, 0), "text"));
		assert_json(back, other[i]);
		assert_false(err);
		json_decref(back);
		json_decref(c);
	}
}

/* ---- structuredContent and outputSchema ------------------------------- */

static void structured__is_an_object_as_it_is_and_anything_else_wrapped(
	void **state)
{
	json_t *o = parse("{\"a\":1}"), *l = parse("[1]"), *v;

	v = api_mcp_structured(o, false);
	assert_ptr_equal(v, o);
	json_decref(v);
	v = api_mcp_structured(o, true);
	assert_json(v, "{\"result\":{\"a\":1}}");
	json_decref(v);
	v = api_mcp_structured(l, false);
	assert_json(v, "{\"result\":[1]}");
	json_decref(v);
	v = api_mcp_structured(NULL, false);
	assert_json(v, "{\"result\":null}");
	json_decref(v);
	json_decref(o);
	json_decref(l);
}

/* valid compiles schema with berth's validator and checks instance. */
static bool valid(const json_t *schema, const char *instance)
{
	char *why = NULL;
	struct schema *s = schema_compile(schema, NULL, NULL, &why);
	json_t *v = parse(instance);
	bool ok;

	if (!s)
		fail_msg("the schema does not compile: %s", why);
	ok = schema_valid(s, v);
	schema_free(s);
	json_decref(v);
	return ok;
}

static void output_schema__of_an_object_schema__is_it_unchanged(void **state)
{
	json_t *s = parse("{\"type\":\"object\",\"required\":[\"a\"]}");
	json_t *o = api_mcp_output_schema(s);

	assert_true(api_mcp_object_schema(s));
	assert_true(json_equal(o, s));
	assert_ptr_not_equal(o, s);
	json_decref(o);
	json_decref(s);
}

static void output_schema__of_anything_else__describes_result(void **state)
{
	static const char *const others[] = {
		"{\"type\":\"string\"}", "{\"type\":[\"object\",\"null\"]}",
		"{\"anyOf\":[{\"type\":\"object\"}]}", "true", "{}",
	};

	for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
		json_t *s = parse(others[i]);
		json_t *o = api_mcp_output_schema(s);

		assert_false(api_mcp_object_schema(s));
		assert_true(api_mcp_object_schema(o));
		assert_true(json_equal(json_object_get(
			json_object_get(o, "properties"), "result"), s));
		assert_json(json_object_get(o, "required"), "[\"result\"]");
		json_decref(o);
		json_decref(s);
	}
}

static void output_schema__moves_defs_to_the_root_and_keeps_refs_working(
	void **state)
{
	json_t *s = parse(
		"{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\","
		"\"$defs\":{\"n\":{\"type\":\"integer\",\"minimum\":1},"
		"\"nested\":{\"$ref\":\"#\"}},"
		"\"type\":\"array\",\"items\":{\"anyOf\":["
		"{\"$ref\":\"#/$defs/n\"},{\"$ref\":\"#/$defs/nested\"}]},"
		"\"default\":[{\"$ref\":\"#/not/a/ref\"}]}");
	json_t *o = api_mcp_output_schema(s), *inner;

	assert_string_equal(str(o, "$schema"),
			    "https://json-schema.org/draft/2020-12/schema");
	assert_non_null(json_object_get(json_object_get(o, "$defs"), "n"));
	inner = json_object_get(json_object_get(o, "properties"), "result");
	assert_null(json_object_get(inner, "$defs"));
	assert_null(json_object_get(inner, "$schema"));
	/* A default is data: a "$ref" in it is left as it was. */
	assert_json(json_object_get(inner, "default"),
		    "[{\"$ref\":\"#/not/a/ref\"}]");
	assert_true(valid(o, "{\"result\":[1,[2,[3]]]}"));
	assert_false(valid(o, "{\"result\":[0]}"));
	assert_false(valid(o, "{\"result\":[[\"x\"]]}"));
	assert_false(valid(o, "[1]"));
	json_decref(o);
	json_decref(s);
}

static void output_schema__leaves_a_schema_with_its_own_id_to_resolve_itself(
	void **state)
{
	json_t *s = parse(
		"{\"$id\":\"https://example.com/counts\","
		"\"$defs\":{\"n\":{\"type\":\"integer\",\"minimum\":1}},"
		"\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/n\"}}");
	json_t *o = api_mcp_output_schema(s);

	assert_true(json_equal(json_object_get(json_object_get(
				       o, "properties"), "result"), s));
	assert_true(valid(o, "{\"result\":[1,2]}"));
	assert_false(valid(o, "{\"result\":[0]}"));
	json_decref(o);
	json_decref(s);
}

static void listed_schema__gives_boolean_properties_their_object_form(
	void **state)
{
	json_t *s = parse("{\"type\":\"object\",\"properties\":"
			  "{\"a\":true,\"b\":false,\"c\":{\"type\":\"string\"}},"
			  "\"required\":[\"a\"]}");
	json_t *wrapped = api_mcp_output_schema(json_true());
	json_t *l = api_mcp_listed_schema(s), *lw;

	/* Object forms, and the schema as declared left as it was. */
	assert_json(json_object_get(l, "properties"),
		    "{\"a\":{},\"b\":{\"not\":{}},\"c\":{\"type\":\"string\"}}");
	assert_json(json_object_get(l, "required"), "[\"a\"]");
	assert_true(json_is_true(json_object_get(
		json_object_get(s, "properties"), "a")));
	/* The same answers. */
	assert_true(valid(l, "{\"a\":[1]}"));
	assert_false(valid(l, "{\"a\":1,\"b\":2}"));
	assert_false(valid(l, "{}"));
	/* An outputSchema of true, wrapped. */
	lw = api_mcp_listed_schema(wrapped);
	assert_json(json_object_get(json_object_get(lw, "properties"), "result"),
		    "{}");
	assert_true(valid(lw, "{\"result\":\"anything\"}"));
	json_decref(lw);
	json_decref(l);
	json_decref(wrapped);
	json_decref(s);
	/* Nothing to change: the same schema. */
	s = parse("{\"type\":\"object\",\"properties\":{\"c\":{}}}");
	l = api_mcp_listed_schema(s);
	assert_ptr_equal(l, s);
	json_decref(l);
	json_decref(s);
}

/* A model read 66.2 as 66.200000000000003: jansson writes every real in
 * 17 digits. The text block has the fewest that read back the same. */
static void dumps__writes_reals_in_the_fewest_digits_that_read_back(
	void **state)
{
	json_t *v = json_pack("{s:f, s:f, s:f, s:i}", "t", 66.2, "p", 0.1,
			      "third", 1.0 / 3.0, "n", 7);
	char *s = api_mcp_dumps(v, SIZE_MAX);
	json_t *back = json_loads(s, 0, NULL);

	/* One precision for the whole text: a third needs 16 digits. */
	assert_string_equal(s, "{\"t\":66.2,\"p\":0.1,"
			       "\"third\":0.3333333333333333,\"n\":7}");
	assert_true(json_equal(back, v));
	free(s);
	json_decref(back);
	json_decref(v);
	v = json_pack("{s:f}", "t", 66.2);
	s = api_mcp_dumps(v, SIZE_MAX);
	assert_string_equal(s, "{\"t\":66.2}");
	free(s);
	json_decref(v);
}

static void dumps__cuts_long_text_on_a_character_boundary(void **state)
{
	json_t *v = json_string("ääääääääää"); /* 20 bytes, 22 as JSON */
	char *s = api_mcp_dumps(v, 10);
	json_t *back = json_string(s); /* NULL unless still UTF-8 */

	assert_true(strlen(s) <= 10);
	assert_non_null(strstr(s, "\xE2\x80\xA6"));
	assert_non_null(back);
	json_decref(back);
	free(s);
	s = api_mcp_dumps(NULL, 10);
	assert_string_equal(s, "null");
	free(s);
	json_decref(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(content__of_a_bare_string__is_one_text_block),
		cmocka_unit_test(content__of_text_and_json__is_their_text),
		cmocka_unit_test(content__of_error_text_and_error_json__sets_is_error),
		cmocka_unit_test(content__of_execution_denied__says_why_and_sets_is_error),
		cmocka_unit_test(error_text__is_null_unless_the_output_says_the_call_failed),
		cmocka_unit_test(content__of_mastras_example__is_text_and_a_resource_link),
		cmocka_unit_test(content__of_base64_parts__is_image_audio_or_a_blob_resource),
		cmocka_unit_test(content__of_a_data_url__is_its_data),
		cmocka_unit_test(content__of_ai_sdk_7_file_parts__follows_their_data_tag),
		cmocka_unit_test(content__of_parts_mcp_cannot_carry__is_text_saying_what_they_were),
		cmocka_unit_test(content__for_a_client_without_resource_links__says_the_link),
		cmocka_unit_test(content__of_anything_else__is_its_json),
		cmocka_unit_test(structured__is_an_object_as_it_is_and_anything_else_wrapped),
		cmocka_unit_test(output_schema__of_an_object_schema__is_it_unchanged),
		cmocka_unit_test(output_schema__of_anything_else__describes_result),
		cmocka_unit_test(output_schema__moves_defs_to_the_root_and_keeps_refs_working),
		cmocka_unit_test(output_schema__leaves_a_schema_with_its_own_id_to_resolve_itself),
		cmocka_unit_test(listed_schema__gives_boolean_properties_their_object_form),
		cmocka_unit_test(dumps__writes_reals_in_the_fewest_digits_that_read_back),
		cmocka_unit_test(dumps__cuts_long_text_on_a_character_boundary),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

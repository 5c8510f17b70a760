/*
 * test_frame.c: the line framing, the nesting pre-scan and the JSON-RPC
 * message shapes of api/, without a daemon.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/frame.h"
#include "api/rpc.h"

/* A fixture that records what the frame hands out. */
struct lines {
	struct api_frame frame;
	char *got[64];
	size_t n;
	int oversize;
	int stop_after; /* return stop_with after this many lines (0: never) */
	int stop_with;  /* API_FRAME_PAUSE (the default) or API_FRAME_STOP */
};

static int record(void *arg, const char *line, size_t len, bool oversize)
{
	struct lines *l = arg;

	if (oversize) {
		l->oversize++;
		return 0;
	}
	assert_true(l->n < 64);
	l->got[l->n] = strndup(line, len);
	l->n++;
	if (l->stop_after && (int)l->n >= l->stop_after)
		return l->stop_with ? l->stop_with : API_FRAME_PAUSE;
	return API_FRAME_GO;
}

static int setup(void **state)
{
	struct lines *l = calloc(1, sizeof *l);

	api_frame_init(&l->frame, 32);
	*state = l;
	return 0;
}

static int teardown(void **state)
{
	struct lines *l = *state;

	for (size_t i = 0; i < l->n; i++)
		free(l->got[i]);
	api_frame_finish(&l->frame);
	free(l);
	return 0;
}

static void feed(struct lines *l, const char *s)
{
	api_frame_feed(&l->frame, s, strlen(s), record, l);
}

static void whole_lines__in_one_read__come_out_one_by_one(void **state)
{
	struct lines *l = *state;

	feed(l, "{\"a\":1}\n{\"b\":2}\r\n");
	assert_int_equal(l->n, 2);
	assert_string_equal(l->got[0], "{\"a\":1}");
	assert_string_equal(l->got[1], "{\"b\":2}");
	assert_int_equal(l->oversize, 0);
}

static void a_line__split_across_reads__is_joined(void **state)
{
	struct lines *l = *state;

	feed(l, "{\"a\"");
	assert_int_equal(l->n, 0);
	feed(l, ":");
	feed(l, "1}");
	assert_int_equal(l->n, 0);
	feed(l, "\n{\"b\":");
	assert_int_equal(l->n, 1);
	assert_string_equal(l->got[0], "{\"a\":1}");
	feed(l, "2}\n");
	assert_int_equal(l->n, 2);
	assert_string_equal(l->got[1], "{\"b\":2}");
}

static void a_carriage_return__split_from_its_newline__is_dropped(void **state)
{
	struct lines *l = *state;

	feed(l, "[1]\r");
	feed(l, "\n");
	assert_int_equal(l->n, 1);
	assert_string_equal(l->got[0], "[1]");
}

static void blank_lines__are_not_messages(void **state)
{
	struct lines *l = *state;

	feed(l, "\n\r\n  \n[1]\n");
	assert_int_equal(l->n, 1);
	assert_string_equal(l->got[0], "[1]");
}

static void a_line_over_the_limit__is_reported_once_and_skipped(void **state)
{
	struct lines *l = *state;
	char big[100];

	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	feed(l, big);          /* over 32 bytes, no newline yet */
	assert_int_equal(l->oversize, 1);
	feed(l, big);          /* still the same line */
	assert_int_equal(l->oversize, 1);
	feed(l, "tail\n[2]\n"); /* its end, then a good line */
	assert_int_equal(l->oversize, 1);
	assert_int_equal(l->n, 1);
	assert_string_equal(l->got[0], "[2]");
}

static void a_whole_line_over_the_limit__in_one_read__is_reported(void **state)
{
	struct lines *l = *state;
	char buf[80];

	memset(buf, 'y', 60);
	strcpy(buf + 60, "\n[3]\n");
	feed(l, buf);
	assert_int_equal(l->oversize, 1);
	assert_int_equal(l->n, 1);
	assert_string_equal(l->got[0], "[3]");
}

static void a_line_of_exactly_the_limit__passes(void **state)
{
	struct lines *l = *state;
	char buf[40];

	memset(buf, 'z', 32);
	strcpy(buf + 32, "\n");
	feed(l, buf);
	assert_int_equal(l->oversize, 0);
	assert_int_equal(l->n, 1);
	assert_int_equal(strlen(l->got[0]), 32);
}

static void a_last_line_without_newline__comes_out_at_eof(void **state)
{
	struct lines *l = *state;

	feed(l, "[1]\n[2");
	assert_int_equal(l->n, 1);
	api_frame_eof(&l->frame, record, l);
	assert_int_equal(l->n, 2);
	assert_string_equal(l->got[1], "[2");
}

static void a_stop__leaves_the_rest_unread(void **state)
{
	struct lines *l = *state;

	l->stop_after = 1;
	l->stop_with = API_FRAME_STOP;
	assert_int_equal(api_frame_feed(&l->frame, "[1]\n[2]\n", 8, record, l),
			 API_FRAME_STOP);
	assert_int_equal(l->n, 1);
	/* Nothing was held for later. */
	assert_int_equal(api_frame_resume(&l->frame, record, l), 0);
	assert_int_equal(l->n, 1);
}

static void a_pause__holds_the_rest_until_resumed(void **state)
{
	struct lines *l = *state;

	l->stop_after = 1;
	assert_int_equal(api_frame_feed(&l->frame, "[1]\n[2]\n[3", 10, record,
					l), API_FRAME_PAUSE);
	assert_int_equal(l->n, 1);
	/* The caller's buffer may be reused: the rest was copied. */
	l->stop_after = 2;
	assert_int_equal(api_frame_resume(&l->frame, record, l), API_FRAME_PAUSE);
	assert_int_equal(l->n, 2);
	assert_string_equal(l->got[1], "[2]");
	l->stop_after = 0;
	assert_int_equal(api_frame_resume(&l->frame, record, l), 0);
	assert_int_equal(l->n, 2);
	/* "[3" was a partial line: it goes on with the next read. */
	feed(l, "]\n");
	assert_int_equal(l->n, 3);
	assert_string_equal(l->got[2], "[3]");
}

static void a_pause_at_the_last_line__holds_nothing(void **state)
{
	struct lines *l = *state;

	l->stop_after = 1;
	assert_int_equal(api_frame_feed(&l->frame, "[1]\n", 4, record, l),
			 API_FRAME_PAUSE);
	assert_null(l->frame.held);
	assert_int_equal(api_frame_resume(&l->frame, record, l), 0);
}

static void the_line_limit__may_change_between_lines(void **state)
{
	struct lines *l = *state;

	/* As a connection's does once it authenticates. */
	l->frame.max_line = 4;
	feed(l, "[12345]\n[1]\n");
	assert_int_equal(l->oversize, 1);
	assert_int_equal(l->n, 1);
	l->frame.max_line = 32;
	feed(l, "[12345]\n");
	assert_int_equal(l->n, 2);
}

static void depth__counts_brackets_outside_strings(void **state)
{
	assert_int_equal(api_json_depth("1", 1, 64), 0);
	assert_int_equal(api_json_depth("{\"a\":[1,{}]}", 12, 64), 3);
	assert_int_equal(api_json_depth("\"[[[[\"", 6, 2), 0);
	assert_int_equal(api_json_depth("[\"\\\"[[[\"]", 9, 2), 1);
}

static void depth__stops_past_the_limit(void **state)
{
	size_t n = 100000;
	char *s = malloc(n);

	memset(s, '[', n);
	assert_int_equal(api_json_depth(s, n, 64), 65);
	free(s);
}

static size_t batch_len(const char *s, size_t limit)
{
	return api_json_batch_len(s, strlen(s), limit);
}

static void batch_len__counts_the_top_level_elements(void **state)
{
	assert_int_equal(batch_len("{\"a\":[1,2]}", 10), 0);
	assert_int_equal(batch_len("7", 10), 0);
	assert_int_equal(batch_len("[]", 10), 0);
	assert_int_equal(batch_len(" [ ] ", 10), 0);
	assert_int_equal(batch_len("[{}]", 10), 1);
	assert_int_equal(batch_len("[{},{},{}]", 10), 3);
	assert_int_equal(batch_len("[{\"a\":[1,2,3]},{\"b\":{\"c\":1,\"d\":2}}]",
				   10), 2);
	/* Commas in strings and escaped quotes are not separators. */
	assert_int_equal(batch_len("[\"a,b\",\"c\\\",d\"]", 10), 2);
	/* What follows the batch's end is the parser's business. */
	assert_int_equal(batch_len("[1,2],3,4", 10), 2);
}

static void batch_len__stops_past_the_limit(void **state)
{
	size_t n = 3000001;
	char *s = malloc(n + 1);

	s[0] = '[';
	for (size_t i = 1; i + 3 <= n; i += 3)
		memcpy(s + i, "{},", 3);
	s[n - 1] = ']';
	s[n] = '\0';
	assert_int_equal(api_json_batch_len(s, n, 1000), 1001);
	assert_int_equal(batch_len("[1,2,3]", 3), 3);
	assert_int_equal(batch_len("[1,2,3,4]", 3), 4);
	free(s);
}

static int kind_of(const char *text, const char **why)
{
	json_t *msg = json_loads(text, JSON_DECODE_ANY, NULL);
	int kind;

	assert_non_null(msg);
	kind = api_rpc_classify(msg, why);
	json_decref(msg);
	return kind;
}

static void classify__tells_requests_notifications_and_responses(void **state)
{
	const char *why;

	assert_int_equal(kind_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
				 &why), API_MSG_REQUEST);
	assert_int_equal(kind_of("{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"ping\"}",
				 &why), API_MSG_REQUEST);
	assert_int_equal(kind_of("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}",
				 &why), API_MSG_REQUEST);
	assert_int_equal(kind_of("{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}", &why),
			 API_MSG_NOTIFICATION);
	assert_int_equal(kind_of("{\"jsonrpc\":\"2.0\",\"id\":\"berth-1\",\"result\":{}}",
				 &why), API_MSG_RESPONSE);
	assert_int_equal(kind_of("{\"jsonrpc\":\"2.0\",\"id\":\"berth-1\","
				 "\"error\":{\"code\":1,\"message\":\"no\"}}",
				 &why), API_MSG_RESPONSE);
}

static void classify__rejects_what_is_not_json_rpc(void **state)
{
	const char *why;

	assert_int_equal(kind_of("{\"id\":1,\"method\":\"ping\"}", &why),
			 API_MSG_INVALID);
	assert_non_null(why);
	assert_int_equal(kind_of("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}",
				 &why), API_MSG_INVALID);
	assert_int_equal(kind_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", &why),
			 API_MSG_INVALID);
	assert_int_equal(kind_of("{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"p\"}",
				 &why), API_MSG_INVALID);
	assert_int_equal(kind_of("[1]", &why), API_MSG_INVALID);
	assert_int_equal(kind_of("7", &why), API_MSG_INVALID);
	assert_int_equal(kind_of("{\"jsonrpc\":\"2.0\",\"id\":1}", &why),
			 API_MSG_INVALID);
	assert_int_equal(kind_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\","
				 "\"params\":[1]}", &why), API_MSG_BAD_PARAMS);
}

static void replies__echo_the_id_and_carry_error_data(void **state)
{
	json_t *id = json_string("abc");
	json_t *r = api_rpc_error(id, API_OVERLOADED, "busy", api_rpc_limit(7));
	json_t *ok = api_rpc_result(NULL, json_object());

	assert_string_equal(json_string_value(json_object_get(r, "jsonrpc")), "2.0");
	assert_string_equal(json_string_value(json_object_get(r, "id")), "abc");
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(r, "error"), "code")), -32013);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(
				 json_object_get(r, "error"), "data"), "limit")), 7);
	assert_true(json_is_null(json_object_get(ok, "id")));
	assert_true(json_is_object(json_object_get(ok, "result")));
	json_decref(r);
	json_decref(ok);
	json_decref(id);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(whole_lines__in_one_read__come_out_one_by_one),
		T(a_line__split_across_reads__is_joined),
		T(a_carriage_return__split_from_its_newline__is_dropped),
		T(blank_lines__are_not_messages),
		T(a_line_over_the_limit__is_reported_once_and_skipped),
		T(a_whole_line_over_the_limit__in_one_read__is_reported),
		T(a_line_of_exactly_the_limit__passes),
		T(a_last_line_without_newline__comes_out_at_eof),
		T(a_stop__leaves_the_rest_unread),
		T(a_pause__holds_the_rest_until_resumed),
		T(a_pause_at_the_last_line__holds_nothing),
		T(the_line_limit__may_change_between_lines),
		cmocka_unit_test(depth__counts_brackets_outside_strings),
		cmocka_unit_test(depth__stops_past_the_limit),
		cmocka_unit_test(batch_len__counts_the_top_level_elements),
		cmocka_unit_test(batch_len__stops_past_the_limit),
		cmocka_unit_test(classify__tells_requests_notifications_and_responses),
		cmocka_unit_test(classify__rejects_what_is_not_json_rpc),
		cmocka_unit_test(replies__echo_the_id_and_carry_error_data),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

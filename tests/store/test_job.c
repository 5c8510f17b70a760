/*
 * test_job.c: the store's values: names, times, ids, and jobs and events
 * as PROTOCOL.md's objects.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "store/store.h"
#include "store/store_int.h"

static void status_and_event_names__round_trip(void **state)
{
	for (int s = 0; s < STORE_NSTATUS; s++)
		assert_int_equal(store_status_parse(store_status_name(s)), s);
	for (int e = 0; e < STORE_NEVENT; e++)
		assert_int_equal(store_event_parse(store_event_name(e)), e);
	assert_string_equal(store_status_name(STORE_AWAITING_APPROVAL), "awaiting_approval");
	assert_string_equal(store_event_name(STORE_EV_APPROVAL_REQUESTED), "approval_requested");
	assert_null(store_status_name(STORE_NSTATUS));
	assert_int_equal(store_status_parse("nope"), -1);
	assert_true(store_status_terminal(STORE_EXPIRED));
	assert_false(store_status_terminal(STORE_SUSPENDED));
}

static void format_time__writes_utc_with_milliseconds(void **state)
{
	char buf[32];
	assert_string_equal(store_format_time(1795561025123, buf), "2026-11-24T22:57:05.123Z");
	assert_string_equal(store_format_time(0, buf), "1970-01-01T00:00:00.000Z");
	assert_string_equal(store_format_time(-1, buf), "1969-12-31T23:59:59.999Z");
	assert_string_equal(store_format_time(951782400000, buf), "2000-02-29T00:00:00.000Z");
	assert_string_equal(store_format_time(253402300799999, buf), "9999-12-31T23:59:59.999Z");
}

/* The arithmetic formatter against gmtime_r, on times spread over years 1
 * to 9999 and on every day boundary around the epoch. */
static void format_time__agrees_with_gmtime(void **state)
{
	uint64_t x = 88172645463325252u;
	for (int i = 0; i < 200000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		int64_t t = i < 3000 ? (i - 1500) * 86400000LL + (i % 7) - 3
				     : (int64_t)(x % 315537897600000u) - 62135596800000LL;
		int64_t secs = t / 1000, ms = t % 1000;
		if (ms < 0) {
			ms += 1000;
			secs--;
		}
		time_t tt = (time_t)secs;
		struct tm tm;
		assert_non_null(gmtime_r(&tt, &tm));
		char want[96], got[32];
		snprintf(want, sizeof(want), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
			 tm.tm_min, tm.tm_sec, (int)ms);
		assert_string_equal(store_format_time(t, got), want);
	}
}

/* same_text asserts that got (freed) is the text of the tree o (stolen). */
static void same_text(json_t *o, char *got)
{
	char *want = store_json_text(o);

	assert_non_null(got);
	assert_string_equal(got, want);
	free(want);
	free(got);
	json_decref(o);
}

/* as_jansson asserts that store_json_text writes v (stolen) as jansson
 * does, or fails where jansson fails. */
static void as_jansson(json_t *v)
{
	char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	char *got = store_json_text(v);

	if (want == NULL)
		assert_null(got);
	else
		assert_string_equal(got, want);
	free(want);
	free(got);
	json_decref(v);
}

/* Every byte value at every place of strings of 1 to 24 bytes: the scan
 * takes 8 bytes at a time, so this crosses each of its boundaries with
 * each kind of byte (plain, escaped, control, beyond ASCII, NUL). */
static void json_text__escapes_every_byte_as_jansson_does(void **state)
{
	char s[25];

	for (size_t n = 1; n <= 24; n++) {
		for (size_t at = 0; at < n; at++) {
			for (int c = 0; c < 256; c++) {
				memset(s, 'a', n);
				s[at] = (char)c;
				as_jansson(json_stringn_nocheck(s, n));
				/* ... and as an object's key. */
				json_t *o = json_object();
				json_object_setn_new_nocheck(o, s, n, json_true());
				as_jansson(o);
			}
		}
	}
	as_jansson(json_string(""));
}

/* Texts past the buffer's first kilobyte move it to the heap and grow it;
 * they come out whole. */
static void json_text__writes_texts_longer_than_its_first_buffer(void **state)
{
	static const size_t sizes[] = {1000, 1022, 1023, 1024, 1025, 2047,
				       2048, 5000, 100000};

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char *s = malloc(sizes[i]);
		assert_non_null(s);
		for (size_t k = 0; k < sizes[i]; k++)
			s[k] = k % 97 == 3 ? '"' : (char)('a' + k % 26);
		as_jansson(json_pack("{s:s%, s:[i, s%]}", "a", s, sizes[i],
				     "b", 7, s, sizes[i] / 2));
		free(s);
	}
}

/* The direct writer of a Job's text against the tree and its dump: a bare
 * job, then one with every member, decisions, reals and non-ASCII. */
static void job_text__is_the_text_of_the_job_object(void **state)
{
	for (int i = 0; i < 6; i++) {
		struct store_job j = {.tool = "web.fetch", .status = i % STORE_NSTATUS,
				      .priority = -3 + i, .attempt = 1 + i,
				      .max_retries = i, .created_at = 1795561025123,
				      .updated_at = 1795561025124};
		snprintf(j.id, sizeof(j.id), "0190f7a2-job-%d", i);
		if (i > 0) {
			j.input = json_pack("{s:s, s:[i, b, n]}", "q", "a\"b\\c\n", "l", -7, 1);
			j.request_context = json_pack("{s:s}", "user", "u1");
			j.metadata = json_object();
			j.run_id = "run";
			j.tool_call_id = "call";
			j.idempotency_key = "key";
			j.run_at = 1795561025000;
			j.timeout_ms = 30000;
			j.expires_at = 1795561099000;
			j.output = json_pack("{s:i}", "n", 1);
			j.model_output = json_string("done");
			j.error = json_pack("{s:s}", "code", "x");
			j.suspend_payload = json_pack("{s:s}", "ask", "name");
			j.resume_data = json_pack("{s:s}", "name", "Ada");
			j.checkpoint = json_pack("{s:i}", "step", 2);
			j.approval_required = true;
			j.decision = i % 3;
			j.reason = i == 2 ? "looks fine" : NULL;
			j.decided_at = i == 2 ? 1795561026000 : 0;
			j.progress = json_pack("{s:f}", "progress", 0.5); /* a real */
			j.retry_of = "0190f7a2-older";
			j.started_at = 1795561025200;
			j.finished_at = i == 5 ? 1795561025300 : 0;
		}
		if (i == 3)
			j.tool = "caf\xc3\xa9"; /* non-ASCII goes through jansson */
		if (i == 4) {
			json_decref(j.progress);
			j.progress = NULL;
		}
		same_text(store_job_to_json(&j), store_job_text(&j));
		j.tool = NULL;
		j.run_id = j.tool_call_id = j.idempotency_key = j.reason = j.retry_of = NULL;
		json_decref(j.input);
		json_decref(j.request_context);
		json_decref(j.metadata);
		json_decref(j.output);
		json_decref(j.model_output);
		json_decref(j.error);
		json_decref(j.suspend_payload);
		json_decref(j.resume_data);
		json_decref(j.checkpoint);
		json_decref(j.progress);
	}
}

/* The direct writer of an Event's text against the tree and its dump. */
static void event_text__is_the_text_of_the_event_object(void **state)
{
	static const char *const data[] = {
		NULL, "{}", "{\"input\":{\"a\":[1,-2,true,null,\"x\\ny\"]}}",
		"{\"r\":1.5e300}", "{\"city\":\"Z\u00fcrich\"}", "[]", "\"s\"",
		"{\"deep\":{\"a\":{\"b\":{\"c\":[[[[1]]]]}}}}",
	};
	for (size_t i = 0; i < sizeof(data) / sizeof(data[0]); i++) {
		struct store_event ev = {.seq = 9007199254740993LL + (int64_t)i,
					 .tool = i == 5 ? NULL : "web.fetch",
					 .type = (int)(i % STORE_NEVENT),
					 .status = (int)(i % STORE_NSTATUS),
					 .at = i == 6 ? 0 : 1795561025123 + (int64_t)i};
		snprintf(ev.job_id, sizeof(ev.job_id), "0190f7a2-job-%zu", i);
		ev.data = data[i] ? json_loads(data[i], JSON_DECODE_ANY, NULL) : NULL;
		assert_true(data[i] == NULL || ev.data != NULL);
		same_text(store_event_to_json(&ev), store_event_text(&ev));
		json_decref(ev.data);
	}
}

static void parse_time__reads_offsets_and_missing_fractions(void **state)
{
	int64_t t;
	assert_int_equal(store_parse_time("2026-11-24T22:57:05.123Z", &t), 0);
	assert_int_equal(t, 1795561025123);
	assert_int_equal(store_parse_time("2026-11-25T00:57:05.123+02:00", &t), 0);
	assert_int_equal(t, 1795561025123);
	assert_int_equal(store_parse_time("2026-11-24T22:57:05Z", &t), 0);
	assert_int_equal(t, 1795561025000);
	assert_int_equal(store_parse_time("2026-11-24T22:57:05.1Z", &t), 0);
	assert_int_equal(t, 1795561025100);
}

static void parse_time__refuses_what_is_not_a_time(void **state)
{
	int64_t t;
	const char *bad[] = {"", "2026-11-24", "2026-11-24T22:57:05", "2026-13-01T00:00:00Z",
			     "2026-02-31T00:00:00Z", "2026-11-24T22:57:05.Z",
			     "2026-11-24T22:57:05Zjunk", "tomorrow"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(store_parse_time(bad[i], &t), -EINVAL);
}

static void uuid7__is_version_7_time_ordered_and_unique(void **state)
{
	char a[40], b[40];
	store_uuid7(a);
	assert_int_equal(strlen(a), 36);
	assert_int_equal(a[14], '7');
	assert_true(strchr("89ab", a[19]) != NULL);
	assert_true(a[8] == '-' && a[13] == '-' && a[18] == '-' && a[23] == '-');
	for (int i = 0; i < 1000; i++) {
		store_uuid7(b);
		assert_string_not_equal(a, b);
		/* The first 48 bits are the time in ms and the next 12 (after
		 * the version) its fraction: ids made one after the other
		 * increase strictly, also many to a millisecond. */
		assert_true(strcmp(a, b) < 0);
		assert_int_equal(b[14], '7');
		memcpy(a, b, 40);
	}
}

static void uuid7_floor__sorts_between_the_ids_of_its_millisecond_and_the_one_before(void **state)
{
	char id[40], floor[14], before[14], after[14];
	int64_t now = store_now();

	store_uuid7(id);
	store__uuid7_floor(now - 1, before);
	store__uuid7_floor(now + 1000, after);
	assert_int_equal(strlen(before), 13);
	assert_true(strcmp(before, id) < 0);
	assert_true(strcmp(id, after) < 0);
	/* At the id's own millisecond (now or a little later) the floor is
	 * at most the id's first 13 characters. */
	memcpy(floor, id, 13);
	floor[13] = '\0';
	char at_now[14];
	store__uuid7_floor(now, at_now);
	assert_true(strcmp(at_now, floor) <= 0);
	store__uuid7_floor(0x0190a0d2aabbLL, floor);
	assert_string_equal(floor, "0190a0d2-aabb");
	store__uuid7_floor(-5, floor);
	assert_string_equal(floor, "00000000-0000");
}

static void job_to_json__is_the_protocol_job_with_absent_values_omitted(void **state)
{
	struct store_job j = {
		.id = "0190a0d2-0000-7000-8000-000000000001",
		.tool = "web.fetch",
		.status = STORE_SUSPENDED,
		.priority = 3,
		.run_at = 1795561025123,
		.attempt = 2,
		.max_retries = 4,
		.timeout_ms = 5000,
		.created_at = 1795561025000,
		.updated_at = 1795561026000,
	};
	j.input = json_pack("{s:s}", "url", "https://example.org");
	j.suspend_payload = json_pack("{s:b}", "needsLogin", 1);
	j.progress = json_pack("{s:i,s:i}", "progress", 1, "total", 2);
	json_t *o = store_job_to_json(&j);
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(o, "status")), "suspended");
	assert_string_equal(json_string_value(json_object_get(o, "runAt")), "2026-11-24T22:57:05.123Z");
	assert_int_equal(json_integer_value(json_object_get(o, "timeoutMs")), 5000);
	assert_int_equal(json_integer_value(json_object_get(o, "attempt")), 2);
	assert_true(json_equal(json_object_get(o, "input"), j.input));
	assert_true(json_equal(json_object_get(o, "suspendPayload"), j.suspend_payload));
	assert_true(json_equal(json_object_get(o, "progress"), j.progress));
	json_t *a = json_object_get(o, "approval");
	assert_true(json_is_false(json_object_get(a, "required")));
	assert_true(json_is_null(json_object_get(a, "decision")));
	assert_null(json_object_get(a, "decidedAt"));
	const char *absent[] = {"output", "error", "runId", "startedAt", "finishedAt",
				"expiresAt", "retryOf", "idempotencyKey", "metadata"};
	for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
		assert_null(json_object_get(o, absent[i]));
	json_decref(o);
	json_decref(j.input);
	json_decref(j.suspend_payload);
	json_decref(j.progress);
}

static void job_to_json__shows_a_decision_with_its_reason_and_time(void **state)
{
	struct store_job j = {
		.id = "x", .tool = "t", .status = STORE_DECLINED,
		.approval_required = true, .decision = STORE_DECISION_DECLINED,
		.reason = "too expensive", .decided_at = 1795561025123,
	};
	json_t *o = store_job_to_json(&j);
	json_t *a = json_object_get(o, "approval");
	assert_true(json_is_true(json_object_get(a, "required")));
	assert_string_equal(json_string_value(json_object_get(a, "decision")), "declined");
	assert_string_equal(json_string_value(json_object_get(a, "reason")), "too expensive");
	assert_string_equal(json_string_value(json_object_get(a, "decidedAt")), "2026-11-24T22:57:05.123Z");
	json_decref(o);
}

static void event_to_json__is_the_protocol_event(void **state)
{
	struct store_event ev = {
		.seq = 42, .job_id = "j1", .tool = "web.fetch", .type = STORE_EV_RETRYING,
		.status = STORE_PENDING, .at = 1795561025123,
	};
	ev.data = json_pack("{s:s}", "reason", "interrupted");
	json_t *o = store_event_to_json(&ev);
	/* An event stored before berth recorded who caused it reads as
	 * caused by "unknown", with no via. */
	json_t *want = json_pack("{s:i,s:s,s:s,s:s,s:s,s:s,s:s,s:{s:s}}", "seq", 42, "jobId", "j1",
				 "tool", "web.fetch", "type", "retrying", "status", "pending",
				 "at", "2026-11-24T22:57:05.123Z", "by", "unknown",
				 "data", "reason", "interrupted");
	assert_true(json_equal(o, want));
	json_decref(o);
	json_decref(want);
	ev.by = "alice";
	ev.via = "mcp";
	ev.client = json_pack("{s:s, s:s}", "name", "claude", "version", "1");
	o = store_event_to_json(&ev);
	assert_string_equal(json_string_value(json_object_get(o, "by")), "alice");
	assert_string_equal(json_string_value(json_object_get(o, "via")), "mcp");
	assert_string_equal(json_string_value(json_object_get(
		json_object_get(o, "client"), "name")), "claude");
	/* The text form says the same, in the same order. */
	char *text = store_event_text(&ev), *tree = json_dumps(o, JSON_COMPACT);
	assert_string_equal(text, tree);
	free(text);
	free(tree);
	json_decref(o);
	json_decref(ev.client);
	ev.tool = NULL; /* borrowed above: finish frees only what it owns */
	ev.by = ev.via = NULL;
	json_decref(ev.data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(status_and_event_names__round_trip),
		cmocka_unit_test(format_time__writes_utc_with_milliseconds),
		cmocka_unit_test(format_time__agrees_with_gmtime),
		cmocka_unit_test(json_text__escapes_every_byte_as_jansson_does),
		cmocka_unit_test(json_text__writes_texts_longer_than_its_first_buffer),
		cmocka_unit_test(event_text__is_the_text_of_the_event_object),
		cmocka_unit_test(job_text__is_the_text_of_the_job_object),
		cmocka_unit_test(parse_time__reads_offsets_and_missing_fractions),
		cmocka_unit_test(parse_time__refuses_what_is_not_a_time),
		cmocka_unit_test(uuid7__is_version_7_time_ordered_and_unique),
		cmocka_unit_test(uuid7_floor__sorts_between_the_ids_of_its_millisecond_and_the_one_before),
		cmocka_unit_test(job_to_json__is_the_protocol_job_with_absent_values_omitted),
		cmocka_unit_test(job_to_json__shows_a_decision_with_its_reason_and_time),
		cmocka_unit_test(event_to_json__is_the_protocol_event),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_events.c: the event log seen through events/subscribe and
 * jobs/wait: no gap and no duplicate when a replay turns live under load,
 * and waits and subscriptions picked up again across restarts of berthd.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/api/support.h"

#define PRODUCED 300

struct producer {
	struct harness *h;
	int made;
	int failed;
	volatile int started; /* jobs submitted so far */
};

/* produce submits PRODUCED jobs on its own connection, without cmocka's
 * asserts (they belong to the main thread). */
static void *produce(void *arg)
{
	struct producer *p = arg;
	struct berth_client *c = harness_connect(p->h);

	if (!c) {
		p->failed = 1;
		return NULL;
	}
	for (int i = 0; i < PRODUCED; i++) {
		json_t *res = NULL, *err = NULL;
		json_t *params = json_pack("{s:s, s:{s:i}}", "tool", "noop",
					   "input", "i", i);
		int rc = berth_client_call(c, "jobs/submit", params, 30000, &res,
					   &err);

		json_decref(params);
		if (rc != 0)
			p->failed = 1;
		json_decref(res);
		json_decref(err);
		p->made++;
		p->started = p->made;
	}
	berth_client_close(c);
	return NULL;
}

/* last_seq returns the highest seq in the log now. */
static json_int_t last_seq(struct berth_client *c)
{
	json_int_t since = 0;

	for (;;) {
		json_t *page = call_ok(c, "events/poll",
				       json_pack("{s:I, s:i}", "since", since,
						 "limit", 1000));
		size_t n = json_array_size(json_object_get(page, "events"));

		since = json_integer_value(json_object_get(page, "next"));
		json_decref(page);
		if (n == 0)
			return since;
	}
}

static void subscribe__turning_live_under_load__has_no_gap_or_duplicate(void **state)
{
	struct harness h;
	struct producer p = {.h = &h};
	struct berth_client *c, *q;
	pthread_t t;
	json_int_t expect = 1, end;
	int spin = 0;

	support_start(&h, NULL);
	c = support_connect(&h);
	q = support_connect(&h);
	assert_int_equal(pthread_create(&t, NULL, produce, &p), 0);
	/* Subscribe from the very start while jobs are being made and run:
	 * the replay and the switch to live happen under load. */
	while (p.started < PRODUCED / 3 && spin++ < 100000)
		usleep(100);
	json_decref(call_ok(c, "events/subscribe", json_pack("{s:i}", "since", 0)));
	pthread_join(t, NULL);
	assert_int_equal(p.failed, 0);
	/* Every job was made; wait until each has finished, then read up to
	 * the end of the log. */
	for (;;) {
		json_t *page = call_ok(q, "jobs/list",
				       json_pack("{s:[s,s], s:i}", "status", "pending",
						 "running", "limit", 1));
		size_t n = json_array_size(json_object_get(page, "jobs"));

		json_decref(page);
		if (n == 0)
			break;
		usleep(20000);
	}
	end = last_seq(q);
	assert_true(end >= 3 * PRODUCED);
	while (expect <= end) {
		json_t *note = berth_client_next_notification(c, 30000);
		json_int_t seq;

		assert_non_null(note);
		seq = json_integer_value(json_object_get(json_object_get(note, "params"),
							 "seq"));
		if (seq != expect)
			print_message("expected seq %lld, got %lld\n",
				      (long long)expect, (long long)seq);
		assert_int_equal(seq, expect);
		expect++;
		json_decref(note);
	}
	assert_null(berth_client_next_notification(c, 200));
	berth_client_close(c);
	berth_client_close(q);
	harness_cleanup(&h);
}

/* next_type returns the type of the next events/event notification on c
 * (30 s), "" when none came. */
static char *next_type(struct berth_client *c, char *buf, size_t size)
{
	json_t *note = berth_client_next_notification(c, 30000);

	snprintf(buf, size, "%s",
		 note ? jstr(json_object_get(note, "params"), "type") : "");
	json_decref(note);
	return buf;
}

/* types passes over the events it does not name, in the replay and live.
 * Three hundred jobs log 900 events none of which is "cancelled", more
 * than a replay reads at once: a replay that did not move past the
 * events it passed over would read the same ones again and never turn
 * live, and the cancellation would never arrive. */
static void subscribe__with_types__sends_only_those_types(void **state)
{
	struct harness h;
	struct berth_client *c, *s;
	char buf[64];

	support_start(&h, NULL);
	c = support_connect(&h);
	s = support_connect(&h);
	for (int i = 0; i < 300; i++)
		json_decref(submit(c, "noop", "{}"));
	json_t *last = submit(c, "noop", "{}");
	json_decref(wait_for(c, jstr(last, "id"), "completed"));
	json_decref(last);

	json_decref(call_ok(s, "events/subscribe",
			    json_pack("{s:i, s:[s]}", "since", 0, "types",
				      "cancelled")));
	json_t *later = call_ok(c, "jobs/submit",
				json_pack("{s:s, s:{}, s:s}", "tool", "noop",
					  "input", "runAt",
					  "2099-01-01T00:00:00.000Z"));
	json_decref(call_ok(c, "jobs/cancel",
			    json_pack("{s:s}", "id", jstr(later, "id"))));
	json_t *note = berth_client_next_notification(s, 30000);
	assert_non_null(note);
	assert_string_equal(jstr(json_object_get(note, "params"), "type"),
			    "cancelled");
	assert_string_equal(jstr(json_object_get(note, "params"), "jobId"),
			    jstr(later, "id"));
	json_decref(note);
	json_decref(later);
	assert_null(berth_client_next_notification(s, 200));

	/* One name or several; the others pass by. */
	json_decref(call_ok(c, "events/subscribe",
			    json_pack("{s:[s,s]}", "types", "created",
				      "completed")));
	json_t *j = submit(s, "noop", "{}");
	assert_string_equal(next_type(c, buf, sizeof buf), "created");
	assert_string_equal(next_type(c, buf, sizeof buf), "completed");
	json_decref(j);
	json_decref(call_ok(c, "events/subscribe",
			    json_pack("{s:s}", "types", "started")));
	json_decref(submit(s, "noop", "{}"));
	/* The first subscription's two, the second's one, in seq order. */
	assert_string_equal(next_type(c, buf, sizeof buf), "created");
	assert_string_equal(next_type(c, buf, sizeof buf), "started");
	assert_string_equal(next_type(c, buf, sizeof buf), "completed");

	/* Not an event type, an empty list, not a string. */
	const char *bad[] = {"[\"finished\"]", "[]", "[1]", "\"\"", "{}"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		json_t *params = json_pack("{s:o}", "types",
					   json_loads(bad[i], JSON_DECODE_ANY,
						      NULL));
		json_t *err = call_err(c, "events/subscribe", params, -32602);
		char *text = json_dumps(err, 0);
		assert_non_null(strstr(text, "types must be an event type"));
		assert_non_null(strstr(text, "/types"));
		free(text);
		json_decref(err);
	}
	berth_client_close(s);
	berth_client_close(c);
	harness_stop(&h);
}

static json_int_t next_of(const json_t *page)
{
	return json_integer_value(json_object_get(page, "next"));
}

/* cancelled_job submits a noop to run in 2099 and cancels it; returns
 * the job. */
static json_t *cancelled_job(struct berth_client *c)
{
	json_t *job = call_ok(c, "jobs/submit",
			      json_pack("{s:s, s:{}, s:s}", "tool", "noop",
					"input", "runAt",
					"2099-01-01T00:00:00.000Z"));

	json_decref(call_ok(c, "jobs/cancel",
			    json_pack("{s:s}", "id", jstr(job, "id"))));
	return job;
}

/* events/poll's types are read by the store: limit counts the events of
 * those types, and next passes over the others, so that a client looping
 * on next reads each of them once and none of the rest. */
static void poll__with_types__returns_only_those_and_next_passes_the_rest(void **state)
{
	struct harness h;
	struct berth_client *c;
	json_t *page, *late;
	json_int_t end, since;
	char buf[512];

	support_start(&h, NULL);
	c = support_connect(&h);
	/* Five jobs that run at once (created, started, completed), one
	 * cancelled between the second and the third. */
	for (int i = 0; i < 5; i++) {
		json_t *j = submit(c, "noop", "{}");

		json_decref(wait_for(c, jstr(j, "id"), "completed"));
		json_decref(j);
		if (i == 1)
			json_decref(cancelled_job(c));
	}
	end = last_seq(c);
	assert_int_equal(end, 17);

	/* Only the types asked for; limit counts them alone. */
	page = call_ok(c, "events/poll", json_pack("{s:i, s:s, s:i}", "since", 0,
						   "types", "completed", "limit", 3));
	assert_string_equal(harness_event_types(page, buf, sizeof buf),
			    "completed completed completed ");
	since = next_of(page);
	assert_int_equal(since, json_integer_value(json_object_get(
		json_array_get(json_object_get(page, "events"), 2), "seq")));
	json_decref(page);
	/* The page after it holds the last two; its next is the end of
	 * the log, past the events it passed over. */
	page = call_ok(c, "events/poll", json_pack("{s:I, s:[s], s:i}", "since",
						   since, "types", "completed",
						   "limit", 3));
	assert_string_equal(harness_event_types(page, buf, sizeof buf),
			    "completed completed ");
	assert_int_equal(next_of(page), end);
	json_decref(page);

	/* Several types; the whole log in one page. */
	page = call_ok(c, "events/poll", json_pack("{s:i, s:[s,s]}", "since", 0,
						   "types", "cancelled",
						   "created"));
	/* Two jobs', the cancelled one's two, three jobs'. */
	assert_string_equal(harness_event_types(page, buf, sizeof buf),
			    "created created created cancelled created created "
			    "created ");
	assert_int_equal(next_of(page), end);
	json_decref(page);

	/* A type the log has none of: an empty page whose next is the end
	 * of the log, so that the next poll reads nothing of it again. */
	page = call_ok(c, "events/poll", json_pack("{s:i, s:s}", "since", 0,
						   "types", "expired"));
	assert_string_equal(harness_event_types(page, buf, sizeof buf), "");
	assert_int_equal(next_of(page), end);
	json_decref(page);
	page = call_ok(c, "events/poll", json_pack("{s:I, s:s}", "since", end,
						   "types", "expired"));
	assert_string_equal(harness_event_types(page, buf, sizeof buf), "");
	assert_int_equal(next_of(page), end);
	json_decref(page);

	/* With jobId, that job's events of those types. */
	late = cancelled_job(c);
	page = call_ok(c, "events/poll", json_pack("{s:i, s:s, s:[s,s]}", "since",
						   0, "jobId", jstr(late, "id"),
						   "types", "cancelled",
						   "completed"));
	assert_string_equal(harness_event_types(page, buf, sizeof buf), "cancelled ");
	assert_string_equal(jstr(json_array_get(json_object_get(page, "events"), 0),
				 "jobId"), jstr(late, "id"));
	json_decref(page);
	json_decref(late);

	/* Not an event type, an empty list, not a string: refused as
	 * events/subscribe refuses them. */
	const char *bad[] = {"[\"finished\"]", "[]", "[1]", "\"\"", "{}",
			     "[\"completed\",\"\"]"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		json_t *params = json_pack("{s:o}", "types",
					   json_loads(bad[i], JSON_DECODE_ANY,
						      NULL));
		json_t *err = call_err(c, "events/poll", params, -32602);
		char *text = json_dumps(err, 0);

		assert_non_null(strstr(text, "types must be an event type"));
		assert_non_null(strstr(text, "\"instancePath\": \"/types\""));
		free(text);
		json_decref(err);
	}
	berth_client_close(c);
	harness_cleanup(&h);
}

/* submit_many submits n noops in batches of 1000 and waits until no job
 * is pending or running. */
static void submit_many(struct berth_client *c, int n)
{
	while (n > 0) {
		int k = n < 1000 ? n : 1000;
		json_t *batch = json_array(), *replies;
		char *line;

		for (int i = 0; i < k; i++)
			json_array_append_new(batch, json_pack(
				"{s:s, s:i, s:s, s:{s:s, s:{}}}", "jsonrpc", "2.0",
				"id", i, "method", "jobs/submit", "params", "tool",
				"noop", "input"));
		line = json_dumps(batch, JSON_COMPACT);
		json_decref(batch);
		replies = exchange(c, line);
		free(line);
		assert_int_equal(json_array_size(replies), (size_t)k);
		json_decref(replies);
		n -= k;
	}
	for (;;) {
		json_t *page = call_ok(c, "jobs/list",
				       json_pack("{s:[s,s], s:i}", "status",
						 "pending", "running", "limit", 1));
		size_t left = json_array_size(json_object_get(page, "jobs"));

		json_decref(page);
		if (left == 0)
			break;
		usleep(20000);
	}
}

/* A poll by type looks through a bounded span of the log, so that types
 * that match nothing cannot make one poll read the whole of it: over a
 * log longer than the span, each poll answers an empty page at once,
 * waitMs or not, with next further on, and looping on next reaches the
 * end, where a poll with waitMs waits. */
static void poll__with_types_matching_nothing__walks_a_long_log_a_span_at_a_time(void **state)
{
	struct harness h;
	struct berth_client *c;
	json_t *page;
	json_int_t end, since = 0, first_next;
	char buf[64], *line;
	int polls = 0;

	support_start(&h, NULL);
	c = support_connect(&h);
	submit_many(c, 3600); /* 10,800 events, more than a span */
	end = last_seq(c);
	assert_true(end >= 3 * 3600);

	page = call_ok(c, "events/poll", json_pack("{s:i, s:s}", "since", 0,
						   "types", "expired"));
	assert_string_equal(harness_event_types(page, buf, sizeof buf), "");
	first_next = next_of(page);
	assert_true(first_next > 0 && first_next < end);
	json_decref(page);

	/* With waitMs too, for events of those types may lie past next:
	 * the answer comes long before waitMs is up, with the same next. */
	line = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"events/poll\","
	       "\"params\":{\"since\":0,\"types\":\"expired\","
	       "\"waitMs\":600000}}";
	page = exchange(c, line);
	assert_string_equal(harness_event_types(json_object_get(page, "result"), buf,
				       sizeof buf), "");
	assert_int_equal(next_of(json_object_get(page, "result")), first_next);
	json_decref(page);

	for (;;) {
		page = call_ok(c, "events/poll",
			       json_pack("{s:I, s:s, s:i}", "since", since,
					 "types", "expired", "limit", 1000));
		assert_string_equal(harness_event_types(page, buf, sizeof buf), "");
		assert_true(next_of(page) >= since);
		polls++;
		if (next_of(page) == since) {
			json_decref(page);
			break;
		}
		since = next_of(page);
		json_decref(page);
		assert_true(polls < 100);
	}
	assert_int_equal(since, end);
	assert_true(polls >= 3); /* two spans at least, then the end */

	/* A type that is there once, at the very end, after the span. */
	json_t *late = cancelled_job(c);
	since = 0;
	for (polls = 0;; polls++) {
		page = call_ok(c, "events/poll",
			       json_pack("{s:I, s:s}", "since", since,
					 "types", "cancelled"));
		if (json_array_size(json_object_get(page, "events")))
			break;
		since = next_of(page);
		json_decref(page);
		assert_true(polls < 100);
	}
	assert_string_equal(harness_event_types(page, buf, sizeof buf), "cancelled ");
	assert_true(polls >= 1);
	json_decref(page);
	json_decref(late);
	berth_client_close(c);
	harness_cleanup(&h);
}

/* A replay by type reads a long log a step a turn of the loop, so that
 * the other clients are served between its steps. Before, one whose types
 * matched little read the whole log in one turn, sending nothing, while
 * every other connection waited; its answer and the event it found went
 * out together at the end. Here the answer comes after the first step,
 * and a ping on another connection is answered while the replay still
 * reads: the one event it wants, at the end of the log, has not come
 * yet. A test process held up for the rest of the replay would see it
 * come, so that case is tried again, up to three times. */
static void subscribe__with_types__replays_a_long_log_a_step_a_turn(void **state)
{
	static const char sub[] =
		"{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":"
		"\"events/subscribe\",\"params\":{\"since\":0,"
		"\"types\":\"cancelled\"}}";
	struct harness h;
	struct berth_client *c;
	json_t *late;
	int round;

	support_start(&h, NULL);
	c = support_connect(&h);
	submit_many(c, 20000); /* 60,000 events, six spans */
	late = cancelled_job(c);
	for (round = 0; round < 3; round++) {
		struct berth_client *a = support_connect(&h);
		json_t *note;
		char *line;
		bool still_reading;

		assert_int_equal(berth_client_send_line(a, sub, strlen(sub)), 0);
		line = berth_client_read_line(a, 30000);
		assert_non_null(line);
		assert_non_null(strstr(line, "\"subscription\""));
		free(line);
		json_decref(call_ok(c, "ping", json_object()));
		note = berth_client_next_notification(a, 0);
		still_reading = note == NULL;
		json_decref(note);
		if (still_reading) {
			/* It goes on to the end and finds the one. */
			note = berth_client_next_notification(a, 30000);
			assert_non_null(note);
			assert_string_equal(jstr(json_object_get(note, "params"),
						 "jobId"),
					    jstr(late, "id"));
			json_decref(note);
		}
		berth_client_close(a);
		if (still_reading)
			break;
	}
	assert_true(round < 3);
	json_decref(late);
	berth_client_close(c);
	harness_cleanup(&h);
}

/* send_poll starts an events/poll with params (JSON text) on c, without
 * reading its answer. */
static void send_poll(struct berth_client *c, const char *params)
{
	char line[512];

	snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":"
		 "\"events/poll\",\"params\":%s}", params);
	assert_int_equal(berth_client_send_line(c, line, strlen(line)), 0);
}

/* read_result reads the answer of c's request and returns its result. */
static json_t *read_result(struct berth_client *c)
{
	char *line = berth_client_read_line(c, 30000);
	json_t *msg, *res;

	assert_non_null(line);
	msg = json_loads(line, 0, NULL);
	free(line);
	assert_non_null(msg);
	res = json_incref(json_object_get(msg, "result"));
	json_decref(msg);
	assert_non_null(res);
	return res;
}

/* A poll by type that waits is woken by an event of those types, not by
 * the others, which pass by; one whose time is up answers an empty page
 * whose next is past them. */
static void poll__with_types_and_wait_ms__wakes_only_on_those_types(void **state)
{
	struct harness h;
	struct berth_client *c, *w;
	json_t *job, *page, *ev;
	json_int_t end;
	char params[256], buf[128];

	support_start(&h, NULL);
	c = support_connect(&h);
	w = support_connect(&h);
	json_decref(submit(c, "noop", "{}"));
	end = last_seq(c);

	/* Waiting from the end for a cancellation: a job that runs (three
	 * events of other types) wakes nothing; the cancellation after it
	 * does, and is the whole page. */
	snprintf(params, sizeof params, "{\"since\":%lld,\"types\":[\"cancelled\"],"
		 "\"waitMs\":120000}", (long long)end);
	send_poll(w, params);
	job = submit(c, "noop", "{}");
	json_decref(wait_for(c, jstr(job, "id"), "completed"));
	json_decref(job);
	job = cancelled_job(c);
	page = read_result(w);
	assert_string_equal(harness_event_types(page, buf, sizeof buf), "cancelled ");
	ev = json_array_get(json_object_get(page, "events"), 0);
	assert_string_equal(jstr(ev, "jobId"), jstr(job, "id"));
	assert_int_equal(next_of(page), json_integer_value(json_object_get(ev, "seq")));
	json_decref(page);
	json_decref(job);

	/* Of one job: another job's cancellation passes by too. */
	job = call_ok(c, "jobs/submit",
		      json_pack("{s:s, s:{}, s:s}", "tool", "noop", "input",
				"runAt", "2099-01-01T00:00:00.000Z"));
	end = last_seq(c);
	snprintf(params, sizeof params, "{\"since\":%lld,\"jobId\":\"%s\","
		 "\"types\":\"cancelled\",\"waitMs\":120000}", (long long)end,
		 jstr(job, "id"));
	send_poll(w, params);
	json_decref(cancelled_job(c));
	json_decref(call_ok(c, "jobs/cancel", json_pack("{s:s}", "id",
							jstr(job, "id"))));
	page = read_result(w);
	assert_string_equal(harness_event_types(page, buf, sizeof buf), "cancelled ");
	ev = json_array_get(json_object_get(page, "events"), 0);
	assert_string_equal(jstr(ev, "jobId"), jstr(job, "id"));
	json_decref(page);
	json_decref(job);

	/* Nothing of the type before the time is up: an empty page, its
	 * next past the events that came meanwhile (a job that runs in far
	 * less than the 8 s of the wait). */
	end = last_seq(c);
	snprintf(params, sizeof params, "{\"since\":%lld,\"types\":\"expired\","
		 "\"waitMs\":8000}", (long long)end);
	send_poll(w, params);
	job = submit(c, "noop", "{}");
	json_decref(wait_for(c, jstr(job, "id"), "completed"));
	json_decref(job);
	end = last_seq(c);
	page = read_result(w);
	assert_string_equal(harness_event_types(page, buf, sizeof buf), "");
	assert_int_equal(next_of(page), end);
	json_decref(page);
	berth_client_close(w);
	berth_client_close(c);
	harness_cleanup(&h);
}

/* send_wait starts a jobs/wait for id until status on c, without reading
 * its answer. */
static void send_wait(struct berth_client *c, const char *id, const char *status)
{
	char line[256];

	snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":\"w\",\"method\":"
		 "\"jobs/wait\",\"params\":{\"id\":\"%s\",\"until\":[\"%s\"]}}",
		 id, status);
	assert_int_equal(berth_client_send_line(c, line, strlen(line)), 0);
}

/* next_event returns the params of the next events/event notification. */
static json_t *next_event(struct berth_client *c)
{
	json_t *note = berth_client_next_notification(c, 30000), *ev;

	assert_non_null(note);
	assert_string_equal(jstr(note, "method"), "events/event");
	ev = json_incref(json_object_get(note, "params"));
	json_decref(note);
	return ev;
}

static void waits_and_subscriptions__pick_up_again_after_a_restart(void **state)
{
	struct harness h;
	struct berth_client *c, *s, *w;
	json_t *job, *ev, *done;
	json_int_t last = 0;
	char id[64], *line;
	static const char *const before[] = {"created", "started", "suspended"};
	static const char *const after[] = {"resumed", "started", "completed"};

	support_start(&h, NULL);
	c = support_connect(&h);
	job = submit(c, "api-ask", "{\"question\":\"still there?\"}");
	snprintf(id, sizeof id, "%s", jstr(job, "id"));
	json_decref(job);
	json_decref(wait_for(c, id, "suspended"));

	s = support_connect(&h);
	json_decref(call_ok(s, "events/subscribe",
			    json_pack("{s:i, s:s}", "since", 0, "jobId", id)));
	for (size_t i = 0; i < 3; i++) {
		ev = next_event(s);
		assert_string_equal(jstr(ev, "type"), before[i]);
		last = json_integer_value(json_object_get(ev, "seq"));
		json_decref(ev);
	}
	w = support_connect(&h);
	send_wait(w, id, "completed");

	/* berthd stops: both connections end, nothing is lost. */
	assert_int_equal(harness_stop(&h), 0);
	assert_null(berth_client_read_line(w, 10000));
	assert_null(berth_client_next_notification(s, 10000));
	berth_client_close(c);
	berth_client_close(s);
	berth_client_close(w);
	assert_int_equal(harness_restart(&h), 0);

	c = support_connect(&h);
	s = support_connect(&h);
	w = support_connect(&h);
	json_decref(call_ok(s, "events/subscribe",
			    json_pack("{s:I, s:s}", "since", last, "jobId", id)));
	send_wait(w, id, "completed");
	done = wait_for(c, id, "suspended"); /* still waiting, as it was */
	json_decref(done);
	json_decref(call_ok(c, "jobs/resume",
			    json_pack("{s:s, s:{s:s}}", "id", id, "resumeData",
				      "answer", "yes")));
	for (size_t i = 0; i < 3; i++) {
		ev = next_event(s);
		assert_string_equal(jstr(ev, "type"), after[i]);
		/* The log goes on from where it was: no gap, no repeat. */
		assert_int_equal(json_integer_value(json_object_get(ev, "seq")),
				 last + 1);
		last++;
		json_decref(ev);
	}
	line = berth_client_read_line(w, 30000);
	assert_non_null(line);
	done = json_loads(line, 0, NULL);
	free(line);
	assert_string_equal(jstr(json_object_get(done, "result"), "status"),
			    "completed");
	assert_string_equal(jstr(json_object_get(json_object_get(done, "result"),
						 "output"), "answer"), "yes");
	json_decref(done);
	berth_client_close(c);
	berth_client_close(s);
	berth_client_close(w);
	harness_cleanup(&h);
}

static void events__survive_a_crash_and_the_interrupted_run_is_logged(void **state)
{
	struct harness h;
	struct berth_client *c;
	json_t *job, *page, *ev;
	char id[64];
	size_t i;
	bool created = false, retrying = false;

	support_start(&h, NULL);
	c = support_connect(&h);
	job = submit(c, "sleep", "{\"ms\":60000}");
	snprintf(id, sizeof id, "%s", jstr(job, "id"));
	json_decref(job);
	json_decref(wait_for(c, id, "running"));
	berth_client_close(c);
	assert_int_equal(harness_kill9(&h), 0);
	assert_int_equal(harness_restart(&h), 0);

	c = support_connect(&h);
	page = call_ok(c, "events/poll", json_pack("{s:i, s:s}", "since", 0,
						   "jobId", id));
	json_array_foreach(json_object_get(page, "events"), i, ev) {
		if (strcmp(jstr(ev, "type"), "created") == 0)
			created = true;
		if (strcmp(jstr(ev, "type"), "retrying") == 0 ||
		    strcmp(jstr(ev, "type"), "failed") == 0)
			retrying = true;
	}
	json_decref(page);
	assert_true(created);
	assert_true(retrying);
	/* Requeued (and running again) or failed: either way it ends here. */
	json_decref(harness_call(c, "jobs/cancel", json_pack("{s:s}", "id", id),
				 &ev));
	json_decref(ev);
	berth_client_close(c);
	harness_cleanup(&h);
}

/* ---- large events: pages and replays bounded in bytes ------------------ */

#define BIG_INPUT (3 * 1024 * 1024)
#define PAGE_BYTES (8 * 1024 * 1024)

/* submit_big submits n noop jobs of run runId whose input holds a string
 * of BIG_INPUT bytes (and so its output, which is the input), and waits
 * until each is completed. */
static void poll_and_subscribe__of_a_job_not_stored__are_not_found(void **state)
{
	static const char missing[] = "0190f1d2-0000-7000-8000-000000000000";
	struct harness h;
	struct berth_client *c;
	json_t *job, *err, *page;
	json_int_t end;

	support_start(&h, NULL);
	c = support_connect(&h);
	job = submit(c, "noop", "{}");
	json_decref(wait_for(c, jstr(job, "id"), "completed"));
	end = last_seq(c);

	/* Not a page that stays empty for as long as one waits on it: the
	 * id is named, as jobs/get and jobs/logs name it. */
	err = call_err(c, "events/poll", json_pack("{s:s, s:i}", "jobId",
						   missing, "waitMs", 60000),
		       -32011);
	assert_string_equal(jstr(json_object_get(err, "data"), "id"), missing);
	json_decref(err);
	json_decref(call_err(c, "events/poll",
			     json_pack("{s:s, s:I, s:s}", "jobId", missing,
				       "since", end, "types", "completed"),
			     -32011));
	err = call_err(c, "events/subscribe", json_pack("{s:s}", "jobId",
							missing), -32011);
	assert_string_equal(jstr(json_object_get(err, "data"), "id"), missing);
	json_decref(err);

	/* A stored job's empty page is still a page, and its wait ends at
	 * its time-out with nothing. */
	page = call_ok(c, "events/poll",
		       json_pack("{s:s, s:I, s:i}", "jobId", jstr(job, "id"),
				 "since", end, "waitMs", 50));
	assert_int_equal(json_array_size(json_object_get(page, "events")), 0);
	json_decref(page);
	json_decref(call_ok(c, "events/subscribe",
			    json_pack("{s:s}", "jobId", jstr(job, "id"))));
	assert_pings(c, 7);

	json_decref(job);
	berth_client_close(c);
	harness_stop(&h);
	(void)state;
}

static void submit_big(struct berth_client *c, const char *run, int n)
{
	char *text = malloc(BIG_INPUT + 1);

	assert_non_null(text);
	memset(text, 'b', BIG_INPUT);
	text[BIG_INPUT] = '\0';
	for (int i = 0; i < n; i++) {
		json_t *job = call_ok(c, "jobs/submit",
				      json_pack("{s:s, s:{s:s, s:i}, s:s}",
						"tool", "noop", "input", "s",
						text, "i", i, "runId", run));

		json_decref(wait_for(c, jstr(job, "id"), "completed"));
		json_decref(job);
	}
	free(text);
}

/* poll_seqs polls the log after since with limit a page until it is
 * caught up, writing the seqs read to seqs (at most max) and returning
 * their count; *pages counts the pages that held events, and *longest is
 * the longest answer's line. */
static size_t poll_seqs(struct berth_client *c, json_int_t since, int limit,
			json_int_t *seqs, size_t max, int *pages,
			size_t *longest)
{
	size_t n = 0;

	*pages = 0;
	*longest = 0;
	for (;;) {
		char params[96], *line;
		json_t *msg, *page, *evs, *ev;
		size_t i;

		snprintf(params, sizeof params, "{\"since\":%lld,\"limit\":%d}",
			 (long long)since, limit);
		send_poll(c, params);
		line = berth_client_read_line(c, 60000);
		assert_non_null(line);
		if (strlen(line) > *longest)
			*longest = strlen(line);
		msg = json_loads(line, 0, NULL);
		free(line);
		page = json_incref(json_object_get(msg, "result"));
		json_decref(msg);
		assert_non_null(page);
		evs = json_object_get(page, "events");
		if (json_array_size(evs) == 0) {
			json_decref(page);
			return n;
		}
		(*pages)++;
		json_array_foreach(evs, i, ev) {
			assert_true(n < max);
			seqs[n++] = json_integer_value(json_object_get(ev, "seq"));
		}
		since = json_integer_value(json_object_get(page, "next"));
		assert_int_equal(since, seqs[n - 1]);
		json_decref(page);
	}
}

/* events/poll ends a page after the event that takes it past 8 MiB, and
 * its next goes on from there: ten events of 3 MiB are not one line of
 * 30 MiB (or, with inputs of 10 MiB, a gigabyte), and nothing is lost or
 * repeated across the pages. */
static void poll__large_events__come_in_pages_of_about_8_mib(void **state)
{
	struct harness h;
	struct berth_client *c;
	json_int_t since, one[64], paged[64];
	size_t n_one, n_paged, longest, ignored;
	int pages, pages_one;

	support_start(&h, NULL);
	c = support_connect(&h);
	since = last_seq(c);
	submit_big(c, "big-poll", 5);
	n_one = poll_seqs(c, since, 1, one, 64, &pages_one, &ignored);
	n_paged = poll_seqs(c, since, 1000, paged, 64, &pages, &longest);
	print_message("%zu events, %d pages, the longest %zu bytes\n", n_paged,
		      pages, longest);
	assert_int_equal(n_paged, n_one);
	for (size_t i = 0; i < n_one; i++)
		assert_int_equal(paged[i], one[i]);
	/* The created and completed events carry 3 MiB each: ten of them. */
	assert_true(pages >= 3);
	assert_true(longest < PAGE_BYTES + BIG_INPUT + 4096);
	berth_client_close(c);
	harness_cleanup(&h);
}

/* jobs/list ends a page after the job that takes it past 8 MiB, with a
 * cursor that goes on from there. */
static void list__large_jobs__come_in_pages_of_about_8_mib(void **state)
{
	struct harness h;
	struct berth_client *c;
	json_t *cursor = NULL;
	int pages = 0, jobs = 0, seen[5] = {0};

	support_start(&h, NULL);
	c = support_connect(&h);
	submit_big(c, "big-list", 5);
	do {
		json_t *params = json_pack("{s:s, s:i}", "runId", "big-list",
					   "limit", 50), *page, *job;
		size_t i;
		char *text;

		if (cursor)
			json_object_set_new(params, "cursor", cursor);
		page = call_ok(c, "jobs/list", params);
		text = json_dumps(page, JSON_COMPACT);
		/* A job here is 6 MiB, its input and output. */
		assert_true(strlen(text) < PAGE_BYTES + 2 * BIG_INPUT + 4096);
		free(text);
		json_array_foreach(json_object_get(page, "jobs"), i, job) {
			int k = (int)json_integer_value(json_object_get(
				json_object_get(job, "input"), "i"));

			assert_true(k >= 0 && k < 5);
			seen[k]++;
			jobs++;
		}
		cursor = json_incref(json_object_get(page, "nextCursor"));
		json_decref(page);
		pages++;
	} while (cursor);
	print_message("5 jobs of 6 MiB in %d pages\n", pages);
	assert_int_equal(jobs, 5);
	for (int k = 0; k < 5; k++)
		assert_int_equal(seen[k], 1);
	assert_true(pages >= 3);
	berth_client_close(c);
	harness_cleanup(&h);
}

/* A subscription's replay of large events sends each once and in order,
 * a few at a time as its client reads. */
static void subscribe__replay_of_large_events__sends_each_once_in_order(void **state)
{
	struct harness h;
	struct berth_client *c, *s;
	json_int_t since, want[64];
	size_t n_want, ignored;
	int pages;
	char line[160], *reply;

	support_start(&h, NULL);
	c = support_connect(&h);
	since = last_seq(c);
	submit_big(c, "big-sub", 5);
	n_want = poll_seqs(c, since, 1, want, 64, &pages, &ignored);
	s = support_connect(&h);
	snprintf(line, sizeof line, "{\"jsonrpc\":\"2.0\",\"id\":\"s\","
		 "\"method\":\"events/subscribe\",\"params\":{\"since\":%lld}}",
		 (long long)since);
	assert_int_equal(berth_client_send_line(s, line, strlen(line)), 0);
	reply = berth_client_read_line(s, 30000);
	assert_non_null(reply);
	assert_non_null(strstr(reply, "\"subscription\""));
	free(reply);
	for (size_t i = 0; i < n_want; i++) {
		json_t *ev = next_event(s);

		assert_int_equal(json_integer_value(json_object_get(ev, "seq")),
				 want[i]);
		json_decref(ev);
	}
	berth_client_close(s);
	berth_client_close(c);
	harness_cleanup(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(subscribe__turning_live_under_load__has_no_gap_or_duplicate),
		cmocka_unit_test(subscribe__with_types__sends_only_those_types),
		cmocka_unit_test(subscribe__with_types__replays_a_long_log_a_step_a_turn),
		cmocka_unit_test(poll__with_types__returns_only_those_and_next_passes_the_rest),
		cmocka_unit_test(poll__with_types_matching_nothing__walks_a_long_log_a_span_at_a_time),
		cmocka_unit_test(poll__with_types_and_wait_ms__wakes_only_on_those_types),
		cmocka_unit_test(waits_and_subscriptions__pick_up_again_after_a_restart),
		cmocka_unit_test(events__survive_a_crash_and_the_interrupted_run_is_logged),
		cmocka_unit_test(poll_and_subscribe__of_a_job_not_stored__are_not_found),
		cmocka_unit_test(poll__large_events__come_in_pages_of_about_8_mib),
		cmocka_unit_test(list__large_jobs__come_in_pages_of_about_8_mib),
		cmocka_unit_test(subscribe__replay_of_large_events__sends_each_once_in_order),
	};

	if (getenv("BERTH_TEST_FILTER"))
		cmocka_set_test_filter(getenv("BERTH_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}

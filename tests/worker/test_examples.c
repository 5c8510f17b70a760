/*
 * test_examples.c: the example tools of examples/tools/ load and do what
 * their manifests promise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"

#ifndef EXAMPLES_DIR
#error "EXAMPLES_DIR must name examples/tools"
#endif

static const struct worker_config cfg = {.workers = 4, .kill_grace_ms = 500,
					 .shutdown_grace_ms = 100};

static void load_examples(struct fx *f)
{
	char *err = NULL;
	int n = worker_load_dir(f->w, EXAMPLES_DIR, &err);

	if (n < 0)
		fprintf(stderr, "%s\n", err);
	assert_true(n >= 4);
}

static int setup(void **state)
{
	struct fx *f = fx_new(&cfg);

	load_examples(f);
	fx_start(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx_free(*state);
	return 0;
}

static void weather_tool__answers_like_the_reference_page(void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	struct fx_res res;
	char id[40];

	fx_submit_ok(f, "weather-tool", "{\"location\":\"Paris\"}", NULL, id);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	j = fx_get(f, id);
	assert_string_equal(json_string_value(json_object_get(j->output,
							      "location")),
			    "Paris");
	assert_true(json_is_number(json_object_get(j->output,
						   "temperatureCelsius")));
	store_job_free(j);
	fx_submit(f, "weather-tool", "{}", NULL, &res);
	assert_int_equal(res.err, WORKER_EINVAL);
	fx_res_finish(&res);
}

/* Without a unit the tool gets the schema's default, "C", as execute gets
 * it from a Zod parse; the job keeps the input as it was sent. */
static void weather_tool__without_a_unit__answers_in_celsius(void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	char c[40], fahrenheit[40];

	fx_submit_ok(f, "weather-tool", "{\"location\":\"Seattle\"}", NULL, c);
	fx_submit_ok(f, "weather-tool",
		     "{\"location\":\"Seattle\",\"unit\":\"F\"}", NULL,
		     fahrenheit);
	fx_wait_status(f, c, STORE_COMPLETED, 5000);
	fx_wait_status(f, fahrenheit, STORE_COMPLETED, 5000);
	j = fx_get(f, c);
	assert_string_equal(json_string_value(json_object_get(j->output,
							      "unit")),
			    "C");
	assert_true(json_number_value(json_object_get(j->output,
						      "temperature")) ==
		    json_number_value(json_object_get(j->output,
						      "temperatureCelsius")));
	assert_null(json_object_get(j->input, "unit"));
	store_job_free(j);
	j = fx_get(f, fahrenheit);
	assert_string_equal(json_string_value(json_object_get(j->output,
							      "unit")),
			    "F");
	assert_true(json_number_value(json_object_get(j->output,
						      "temperature")) >
		    json_number_value(json_object_get(j->output,
						      "temperatureCelsius")));
	store_job_free(j);
}

static void write_note__runs_only_once_approved(void **state)
{
	struct fx *f = *state;
	struct fx_res res = {0};
	char declined[40], approved[40], in[600], path1[300], path2[300];

	snprintf(path1, sizeof(path1), "%s/declined.txt", f->dir);
	snprintf(path2, sizeof(path2), "%s/approved.txt", f->dir);
	snprintf(in, sizeof(in), "{\"path\":\"%s\",\"text\":\"no\"}", path1);
	fx_submit_ok(f, "write-note", in, NULL, declined);
	snprintf(in, sizeof(in), "{\"path\":\"%s\",\"text\":\"yes\"}", path2);
	fx_submit_ok(f, "write-note", in, NULL, approved);
	assert_int_equal(fx_status(f, declined), STORE_AWAITING_APPROVAL);
	assert_int_equal(worker_decline(f->w, declined, "no", NULL, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	fx_res_finish(&res);
	memset(&res, 0, sizeof(res));
	assert_int_equal(worker_approve(f->w, approved, NULL, NULL, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	fx_res_finish(&res);
	fx_wait_status(f, approved, STORE_COMPLETED, 5000);
	assert_int_equal(access(path2, F_OK), 0);
	assert_int_not_equal(access(path1, F_OK), 0);
}

/* ask greets with input (JSON text) and answer, and returns the
 * message. */
static void ask(struct fx *f, const char *input, const char *answer,
		const char *want)
{
	struct fx_res res = {0};
	struct store_job *j;
	json_t *d = json_pack("{s:s}", "answer", answer);
	char id[40];

	fx_submit_ok(f, "ask-name", input, NULL, id);
	fx_wait_status(f, id, STORE_SUSPENDED, 5000);
	assert_int_equal(worker_resume(f->w, id, d, NULL, fx_cb, &res), 0);
	fx_wait_res(f, &res);
	assert_int_equal(res.err, WORKER_OK);
	fx_res_finish(&res);
	fx_wait_status(f, id, STORE_COMPLETED, 5000);
	j = fx_get(f, id);
	assert_string_equal(json_string_value(json_object_get(j->output,
							      "message")),
			    want);
	store_job_free(j);
	json_decref(d);
}

static void ask_name__suspends_and_greets_with_the_answer(void **state)
{
	ask(*state, "{\"greeting\":\"Hi\"}", "Ada", "Hi, Ada!");
	/* The greeting's default, filled in by berth. */
	ask(*state, "{}", "Grace", "Hello, Grace!");
}

struct step_wait {
	struct fx *f;
	const char *id;
	int at_least;
};

static bool checkpoint_reached(void *arg)
{
	struct step_wait *sw = arg;
	struct store_job *j = fx_get(sw->f, sw->id);
	json_int_t i = json_integer_value(json_object_get(j->checkpoint, "i"));

	store_job_free(j);
	return i >= sw->at_least;
}

static void count_to__continues_from_its_checkpoint_after_a_restart(
	void **state)
{
	struct fx *f = *state;
	struct store_job *j;
	struct step_wait sw;
	char id[40];

	fx_submit_ok(f, "count-to", "{\"to\":30,\"delayMs\":40}", NULL, id);
	sw = (struct step_wait){f, id, 3};
	assert_true(fx_run_until(f, checkpoint_reached, &sw, 10000));
	fx_restart(f, &cfg);
	assert_int_equal(fx_status(f, id), STORE_PENDING);
	load_examples(f);
	fx_start(f);
	fx_wait_status(f, id, STORE_COMPLETED, 10000);
	j = fx_get(f, id);
	assert_int_equal(json_integer_value(json_object_get(j->output,
							    "counted")),
			 30);
	assert_true(json_integer_value(json_object_get(j->output,
						       "resumedFrom")) >= 3);
	store_job_free(j);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(weather_tool__answers_like_the_reference_page),
		T(weather_tool__without_a_unit__answers_in_celsius),
		T(write_note__runs_only_once_approved),
		T(ask_name__suspends_and_greets_with_the_answer),
		T(count_to__continues_from_its_checkpoint_after_a_restart),
	};

	return cmocka_run_group_tests_name("worker examples", tests, NULL,
					   NULL);
}

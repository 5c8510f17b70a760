/*
 * Tests of `berth validate` (cli/validate.c) through cli_validate_main, with
 * standard output and error captured in temporary files.  argv[1] is the
 * fixtures directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/validate.h"

static const char *fixtures_dir = "fixtures";

/* The result of one run: exit status and what it printed. */
struct run {
	int status;
	char out[8192];
	char err[8192];
};

static void slurp(FILE *f, char *buf, size_t n)
{
	size_t len;

	rewind(f);
	len = fread(buf, 1, n - 1, f);
	buf[len] = '\0';
	fclose(f);
}

/* run_validate runs `berth validate ARGS...` (fixture names are resolved in
 * the fixtures directory; "-" stays "-"), with stdin_file (a fixture, or
 * NULL) as standard input. */
static void run_validate(struct run *r, const char *stdin_file, int argc, ...)
{
	char paths[4][1024], *argv[6] = { "validate" };
	FILE *out = tmpfile(), *err = tmpfile(), *in = NULL;
	int saved_out, saved_err, saved_in = -1;
	va_list ap;

	assert_true(argc <= 4);
	va_start(ap, argc);
	for (int i = 0; i < argc; i++) {
		const char *a = va_arg(ap, const char *);

		if (a[0] == '-' || a[0] == '/')
			snprintf(paths[i], sizeof(paths[i]), "%s", a);
		else
			snprintf(paths[i], sizeof(paths[i]), "%s/%s", fixtures_dir, a);
		argv[i + 1] = paths[i];
	}
	va_end(ap);
	assert_non_null(out);
	assert_non_null(err);
	fflush(stdout);
	fflush(stderr);
	saved_out = dup(STDOUT_FILENO);
	saved_err = dup(STDERR_FILENO);
	dup2(fileno(out), STDOUT_FILENO);
	dup2(fileno(err), STDERR_FILENO);
	if (stdin_file) {
		char p[1024];

		snprintf(p, sizeof(p), "%s/%s", fixtures_dir, stdin_file);
		in = fopen(p, "r");
		assert_non_null(in);
		saved_in = dup(STDIN_FILENO);
		dup2(fileno(in), STDIN_FILENO);
		clearerr(stdin);
	}
	r->status = cli_validate_main(argc + 1, argv);
	fflush(stdout);
	fflush(stderr);
	dup2(saved_out, STDOUT_FILENO);
	dup2(saved_err, STDERR_FILENO);
	close(saved_out);
	close(saved_err);
	if (in) {
		dup2(saved_in, STDIN_FILENO);
		close(saved_in);
		fclose(in);
	}
	slurp(out, r->out, sizeof(r->out));
	slurp(err, r->err, sizeof(r->err));
}

static void validate__valid_instance__exits_0_and_prints_nothing(void **state)
{
	struct run r;

	run_validate(&r, NULL, 2, "weather-tool.json", "weather-valid.json");
	assert_int_equal(r.status, 0);
	assert_string_equal(r.out, "");
	assert_string_equal(r.err, "");
}

static void validate__invalid_instance__exits_1_with_one_line_per_error(void **state)
{
	struct run r;

	run_validate(&r, NULL, 2, "weather-tool.json", "weather-invalid.json");
	assert_int_equal(r.status, 1);
	assert_string_equal(r.out,
			    "/location: must be string, got number (type)\n"
			    "(root): must not have additional property 'extra' (additionalProperties)\n");
}

static void validate__instance_on_stdin__is_read_with_a_dash(void **state)
{
	struct run r;

	run_validate(&r, "weather-invalid.json", 2, "weather-tool.json", "-");
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.out, "/location: must be string, got number (type)"));
	run_validate(&r, "weather-valid.json", 2, "weather-tool.json", "-");
	assert_int_equal(r.status, 0);
}

static void validate__schema_only__checks_the_schema(void **state)
{
	struct run r;

	run_validate(&r, NULL, 1, "zod-tool.json");
	assert_int_equal(r.status, 0);
	run_validate(&r, NULL, 1, "bad-schema.json");
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "is invalid: /properties/age/minimum: must be a number"));
}

static void validate__unreadable_file__exits_2_saying_why(void **state)
{
	struct run r;

	run_validate(&r, NULL, 2, "weather-tool.json", "/nonexistent/instance.json");
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "cannot read instance /nonexistent/instance.json"));
	run_validate(&r, NULL, 1, "not-json.json");
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "is not valid JSON"));
}

static void validate__bad_usage__exits_2_with_the_usage(void **state)
{
	struct run r;

	run_validate(&r, NULL, 0);
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "usage: berth validate"));
	run_validate(&r, NULL, 2, "--bogus", "weather-tool.json");
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "unknown option --bogus"));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(validate__valid_instance__exits_0_and_prints_nothing),
		cmocka_unit_test(validate__invalid_instance__exits_1_with_one_line_per_error),
		cmocka_unit_test(validate__instance_on_stdin__is_read_with_a_dash),
		cmocka_unit_test(validate__schema_only__checks_the_schema),
		cmocka_unit_test(validate__unreadable_file__exits_2_saying_why),
		cmocka_unit_test(validate__bad_usage__exits_2_with_the_usage),
	};

	if (argc > 1)
		fixtures_dir = argv[1];
	return cmocka_run_group_tests_name("validate_cli", tests, NULL, NULL);
}

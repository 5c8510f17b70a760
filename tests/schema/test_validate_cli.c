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
#include <sys/stat.h>
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
	char paths[8][1024], *argv[10] = { "validate" };
	FILE *out = tmpfile(), *err = tmpfile(), *in = NULL;
	int saved_out, saved_err, saved_in = -1;
	va_list ap;

	assert_true(argc <= 8);
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

/* ---- schemas in other files (-r) ---- */

static void validate__ref_to_a_file_beside_the_schema__is_found_with_r(void **state)
{
	struct run r;

	/* order.json reaches address.json by its path and item.json by its
	 * "$id". */
	run_validate(&r, NULL, 6, "-r", "refs/address.json", "--ref",
		     "refs/item.json", "refs/order.json", "order-valid.json");
	assert_int_equal(r.status, 0);
	assert_string_equal(r.err, "");
	run_validate(&r, NULL, 6, "-r", "refs/address.json", "-r",
		     "refs/item.json", "refs/order.json", "order-invalid.json");
	assert_int_equal(r.status, 1);
	assert_string_equal(r.out,
			    "/shipTo: must have required property 'city' (required)\n"
			    "/shipTo/zip: must match pattern \"^[0-9]{5}$\" (pattern)\n"
			    "/items/0/quantity: must be >= 1 (minimum)\n");
}

static void validate__r_with_a_folder__adds_every_json_file_in_it(void **state)
{
	char opt[1100];
	struct run r;

	/* The folder holds order.json itself too: it counts once. */
	run_validate(&r, NULL, 4, "-r", "refs", "refs/order.json", "order-valid.json");
	assert_int_equal(r.status, 0);
	assert_string_equal(r.err, "");
	snprintf(opt, sizeof(opt), "--ref=%s/refs", fixtures_dir);
	run_validate(&r, NULL, 3, opt, "refs/order.json", "order-invalid.json");
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.out, "/items/0/quantity: must be >= 1 (minimum)"));
}

static void validate__missing_reference__names_it_and_says_how_to_give_it(void **state)
{
	struct run r;

	run_validate(&r, NULL, 2, "refs/order.json", "order-valid.json");
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "cannot resolve reference \"address.json\" (as file:///"));
	assert_non_null(strstr(r.err, "/refs/address.json)"));
	assert_non_null(strstr(r.err, "with -r FILE or -r DIR"));
	/* item.json alone leaves address.json missing. */
	run_validate(&r, NULL, 4, "-r", "refs/item.json", "refs/order.json",
		     "order-valid.json");
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "\"address.json\""));
}

static void validate__draft_07_root_ref__resolves_against_its_own_file(void **state)
{
	struct run r;

	/* draft-07 ignores "$id" beside "$ref", so this root's base is its
	 * file all the same. */
	run_validate(&r, NULL, 4, "-r", "refs", "refs/draft7.json", "order-invalid.json");
	assert_int_equal(r.status, 1);
	assert_string_equal(r.out, "(root): must have required property 'city' (required)\n");
}

static void validate__bad_referenced_file__exits_2_naming_it(void **state)
{
	struct run r;

	run_validate(&r, NULL, 4, "-r", "not-json.json", "weather-tool.json",
		     "weather-valid.json");
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "referenced schema "));
	assert_non_null(strstr(r.err, "not-json.json is not valid JSON"));
	run_validate(&r, NULL, 3, "-r", "/nonexistent/x.json", "weather-tool.json");
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "cannot read referenced schema /nonexistent/x.json"));
	run_validate(&r, NULL, 2, "weather-tool.json", "-r");
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "-r needs a file or a folder"));
	run_validate(&r, NULL, 3, "-r", "-", "weather-tool.json");
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "not standard input"));
}

/* write_file writes text to dir/name. */
static void write_file(const char *dir, const char *name, const char *text)
{
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void remove_dir(const char *dir, const char *const *names)
{
	char path[1024];

	for (size_t i = 0; names[i]; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

/* Names and values of the instance in an error are escaped: a newline
 * in a member's name started a forged line of its own, and an escape
 * reached the terminal. A folder given for a file is named as one (it
 * was "not valid JSON"). */
static void validate__control_characters_and_folders__are_told_plainly(void **state)
{
	char dir[] = "/tmp/berth-validate-XXXXXX", schema[1100], inst[1100];
	static const char *const names[] = {"s.json", "i.json", NULL};
	struct run r;

	assert_non_null(mkdtemp(dir));
	write_file(dir, "s.json", "{\"additionalProperties\":false}");
	write_file(dir, "i.json",
		   "{\"a\\nforged/line: must be OK (fake)\\u001b[31m\":1}");
	snprintf(schema, sizeof schema, "%s/s.json", dir);
	snprintf(inst, sizeof inst, "%s/i.json", dir);
	run_validate(&r, NULL, 2, schema, inst);
	assert_int_equal(r.status, 1);
	assert_string_equal(r.out,
			    "(root): must not have additional property "
			    "'a\\nforged/line: must be OK (fake)\\u001b[31m' "
			    "(additionalProperties)\n");
	run_validate(&r, NULL, 2, schema, dir);
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "Is a directory"));
	remove_dir(dir, names);
}

static void validate__two_referenced_files_with_one_id__are_refused(void **state)
{
	static const char *const names[] = { "a.json", "b.json", "s.json", NULL };
	char dir[512] = "/tmp/berth-validate-XXXXXX", schema[600];
	struct run r;

	assert_non_null(mkdtemp(dir));
	write_file(dir, "a.json", "{\"$id\":\"https://example.com/x\",\"type\":\"string\"}");
	write_file(dir, "b.json", "{\"$id\":\"https://example.com/x\",\"type\":\"integer\"}");
	write_file(dir, "s.json", "{\"$ref\":\"https://example.com/x\"}");
	snprintf(schema, sizeof(schema), "%s/s.json", dir);
	run_validate(&r, NULL, 3, "-r", dir, schema);
	remove_dir(dir, names);
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "/a.json and "));
	assert_non_null(strstr(r.err, "/b.json both have \"$id\": \"https://example.com/x\""));
}

static void validate__paths_with_spaces__resolve_as_file_uris(void **state)
{
	static const char *const names[] = { "my address.json", "order 100%.json",
					     "valid.json", NULL };
	char dir[512] = "/tmp/berth validate #XXXXXX", schema[600], instance[600];
	struct run r;

	assert_non_null(mkdtemp(dir));
	write_file(dir, "my address.json",
		   "{\"type\":\"object\",\"required\":[\"city\"]}");
	write_file(dir, "order 100%.json",
		   "{\"properties\":{\"shipTo\":{\"$ref\":\"my%20address.json\"}}}");
	write_file(dir, "valid.json", "{\"shipTo\":{\"street\":\"Pike\"}}");
	snprintf(schema, sizeof(schema), "%s/order 100%%.json", dir);
	snprintf(instance, sizeof(instance), "%s/valid.json", dir);
	run_validate(&r, NULL, 4, "-r", dir, schema, instance);
	remove_dir(dir, names);
	assert_int_equal(r.status, 1);
	assert_string_equal(r.out, "/shipTo: must have required property 'city' (required)\n");
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
		cmocka_unit_test(validate__ref_to_a_file_beside_the_schema__is_found_with_r),
		cmocka_unit_test(validate__r_with_a_folder__adds_every_json_file_in_it),
		cmocka_unit_test(validate__missing_reference__names_it_and_says_how_to_give_it),
		cmocka_unit_test(validate__draft_07_root_ref__resolves_against_its_own_file),
		cmocka_unit_test(validate__bad_referenced_file__exits_2_naming_it),
		cmocka_unit_test(validate__two_referenced_files_with_one_id__are_refused),
		cmocka_unit_test(validate__paths_with_spaces__resolve_as_file_uris),
		cmocka_unit_test(validate__control_characters_and_folders__are_told_plainly),
	};

	if (argc > 1)
		fixtures_dir = argv[1];
	return cmocka_run_group_tests_name("validate_cli", tests, NULL, NULL);
}

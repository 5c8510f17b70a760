/*
 * validate: `berth validate`, a thin shell over schema/: read two files,
 * compile, validate, print.  It talks to no daemon and reads no database.
 */
#include "cli/validate.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/schema.h"

static const char usage[] =
	"usage: berth validate [--assert-formats] [--json] SCHEMA_FILE [INSTANCE_FILE|-]\n"
	"Checks SCHEMA_FILE, then INSTANCE_FILE (or standard input for \"-\") "
	"against it.\n"
	"--json prints {\"valid\": true} or {\"valid\": false, \"errors\": [...]} "
	"on stdout,\nand an error as {\"error\": {\"message\"}, \"exitStatus\": 2} "
	"on stderr.\n"
	"Exit status: 0 valid, 1 invalid (one line per error), 2 cannot read "
	"a file or the schema is invalid.\n";

/* --json: results and errors as JSON (the berth command's --json). */
static bool json_out;

/* fail says why validate stops with status 2: "berth validate: why" (and
 * the usage when with_usage), or {"error": ...} with --json. */
static int fail(bool with_usage, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int fail(bool with_usage, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (json_out) {
		json_t *o = json_pack("{s:{s:s}, s:i}", "error", "message", msg,
				      "exitStatus", 2);
		char *text = json_dumps(o, JSON_COMPACT);

		if (text)
			fprintf(stderr, "%s\n", text);
		free(text);
		json_decref(o);
	} else {
		fprintf(stderr, "berth validate: %s\n%s", msg,
			with_usage ? usage : "");
	}
	return 2;
}

/* print_valid prints the --json verdict: valid, or the errors (borrowed). */
static void print_valid(const json_t *errors)
{
	json_t *o = errors ? json_pack("{s:b, s:O}", "valid", 0, "errors", errors)
			   : json_pack("{s:b}", "valid", 1);
	char *text = json_dumps(o, JSON_COMPACT);

	if (text)
		printf("%s\n", text);
	free(text);
	json_decref(o);
}

/* load reads a JSON document from path ("-" is standard input); returns a
 * new reference, or NULL after printing why on standard error.  Any JSON
 * value is accepted: a boolean is a schema and a string is an instance. */
static json_t *load(const char *path, const char *what)
{
	json_error_t jerr;
	json_t *doc;
	FILE *f;

	if (strcmp(path, "-") == 0) {
		doc = json_loadf(stdin, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
		path = "<stdin>";
	} else {
		f = fopen(path, "rb");
		if (!f) {
			fail(false, "cannot read %s %s: %s", what, path,
			     strerror(errno));
			return NULL;
		}
		doc = json_loadf(f, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
		fclose(f);
	}
	if (!doc)
		fail(false, "%s %s is not valid JSON: %s (line %d, column %d)", what,
		     path, jerr.text, jerr.line, jerr.column);
	return doc;
}

/* print_errors writes one line per error of a schema_validate result. */
static void print_errors(const json_t *errors)
{
	size_t i;
	json_t *e;

	json_array_foreach(errors, i, e) {
		const char *path = json_string_value(json_object_get(e, "instancePath"));

		printf("%s: %s (%s)\n", path && path[0] ? path : "(root)",
		       json_string_value(json_object_get(e, "message")),
		       json_string_value(json_object_get(e, "keyword")));
	}
	if (json_array_size(errors) >= SCHEMA_MAX_ERRORS)
		fprintf(stderr, "berth validate: stopped after %d errors\n",
			SCHEMA_MAX_ERRORS);
}

int cli_validate_main(int argc, char **argv)
{
	struct schema_options opt = { 0 };
	const char *files[2] = { NULL, NULL };
	int nfiles = 0, rc;
	json_t *doc, *instance, *errors = NULL;
	struct schema *s;
	char *err = NULL;

	json_out = false;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--json") == 0)
			json_out = true;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--assert-formats") == 0) {
			opt.format_assert = true;
		} else if (strcmp(argv[i], "--json") == 0) {
			continue;
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			fputs(usage, stdout);
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1] != '\0') {
			return fail(true, "unknown option %s", argv[i]);
		} else if (nfiles == 2) {
			return fail(true, "too many arguments");
		} else {
			files[nfiles++] = argv[i];
		}
	}
	if (nfiles == 0 || (files[0] && strcmp(files[0], "-") == 0))
		return fail(true, "%s", nfiles ? "the schema must be a file, not "
			    "standard input" : "missing SCHEMA_FILE");

	doc = load(files[0], "schema");
	if (!doc)
		return 2;
	s = schema_compile(doc, &opt, NULL, &err);
	json_decref(doc);
	if (!s) {
		fail(false, "schema %s is invalid: %s", files[0],
		     err ? err : "out of memory");
		free(err);
		return 2;
	}
	if (!files[1]) {
		if (json_out)
			print_valid(NULL);
		schema_free(s);
		return 0;
	}

	instance = load(files[1], "instance");
	if (!instance) {
		schema_free(s);
		return 2;
	}
	rc = schema_validate(s, instance, &errors);
	if (rc == -EINVAL && json_out)
		print_valid(errors);
	else if (rc == -EINVAL)
		print_errors(errors);
	else if (rc == 0 && json_out)
		print_valid(NULL);
	else if (rc != 0)
		fail(false, "out of memory");
	json_decref(errors);
	json_decref(instance);
	schema_free(s);
	return rc == 0 ? 0 : rc == -EINVAL ? 1 : 2;
}

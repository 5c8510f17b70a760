/*
 * validate: `berth validate`, a thin shell over schema/: read the files,
 * compile, validate, print.  It talks to no daemon and reads no database.
 *
 * Schemas in other files are reached the way ajv-cli reaches them: each
 * `-r FILE` (or every *.json file of `-r DIR`) goes into a schema registry
 * before SCHEMA_FILE is compiled.  A file is known there by its path as a
 * file:// URI and, through the registry, by its own "$id"s.  SCHEMA_FILE
 * without an "$id" gets its own file:// URI as its base, which is what the
 * specification calls its retrieval URI, so that "$ref": "address.json"
 * finds the address.json beside it.
 */
#include "cli/validate.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "schema/schema.h"

static const char usage[] =
	"usage: berth validate [--assert-formats] [--json] [-r FILE|DIR]... "
	"SCHEMA_FILE [INSTANCE_FILE|-]\n"
	"Checks SCHEMA_FILE, then INSTANCE_FILE (or standard input for \"-\") "
	"against it.\n"
	"\n"
	"  -r, --ref FILE|DIR  a schema that \"$ref\" may reach (repeatable); a DIR\n"
	"                      gives every *.json file in it. A file is found by its\n"
	"                      \"$id\" and by its path: \"$ref\": \"address.json\" in a\n"
	"                      schema without an \"$id\" is the address.json beside it\n"
	"  --assert-formats    make \"format\" an assertion, not an annotation\n"
	"  --json              print {\"valid\": true} or {\"valid\": false, \"errors\":\n"
	"                      [...]} on stdout, and an error as {\"error\":\n"
	"                      {\"message\"}, \"exitStatus\": 2} on stderr\n"
	"\n"
	"Exit status: 0 valid, 1 invalid (one line per error), 2 cannot read "
	"a file or the schema is invalid.\n";

/* The files given with -r, in the order given (a folder's in name order). */
struct refs {
	char **paths; /* malloc'd, each malloc'd */
	size_t n, cap;
};

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
		struct stat st;

		f = fopen(path, "rb");
		if (f && fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
			/* fopen takes a folder; reading it fails with EISDIR,
			 * which jansson calls invalid JSON. */
			fclose(f);
			errno = EISDIR;
			f = NULL;
		}
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

/* file_uri returns the file:// URI of path (made absolute, symbolic links
 * resolved) as a malloc'd string, or NULL after printing why.  Bytes that
 * may not stand in a URI path (a space, '#', '%', '?', anything not ASCII)
 * are percent-encoded, so that a reference resolved against it matches
 * the URI another file was registered under byte for byte. */
static char *file_uri(const char *path)
{
	static const char hex[] = "0123456789ABCDEF";
	char *real = realpath(path, NULL), *uri, *o;

	if (!real) {
		fail(false, "cannot read %s: %s", path,
			strerror(errno));
		return NULL;
	}
	uri = malloc(strlen("file://") + 3 * strlen(real) + 1);
	if (!uri) {
		free(real);
		fail(false, "out of memory");
		return NULL;
	}
	o = uri + sprintf(uri, "file://");
	for (const unsigned char *p = (const unsigned char *)real; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("/-._~!$&'()*+,;=:@", *p)) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	free(real);
	return uri;
}

static int refs_add(struct refs *r, const char *path)
{
	char *copy;

	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 8;
		char **p = realloc(r->paths, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		r->paths = p;
		r->cap = cap;
	}
	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	r->paths[r->n++] = copy;
	return 0;
}

static void refs_finish(struct refs *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->paths[i]);
	free(r->paths);
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* refs_add_dir adds every *.json file of dir (not of its subfolders; names
 * starting with '.' are skipped), in name order so that errors come out
 * the same on every machine.  Returns 0, or 2 after printing why. */
static int refs_add_dir(struct refs *r, const char *dir)
{
	struct refs names = { 0 };
	struct dirent *e;
	DIR *d = opendir(dir);
	int rc = 0;

	if (!d) {
		fail(false, "cannot read the folder %s: %s",
			dir, strerror(errno));
		return 2;
	}
	while (rc == 0 && (e = readdir(d))) {
		size_t len = strlen(e->d_name);
		struct stat st;
		char *p;

		if (e->d_name[0] == '.' || len < 6 ||
		    strcmp(e->d_name + len - 5, ".json") != 0)
			continue;
		if (asprintf(&p, "%s/%s", dir, e->d_name) < 0) {
			rc = -ENOMEM;
			break;
		}
		/* A folder or a device named x.json is not a schema. */
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
			rc = refs_add(&names, p);
		free(p);
	}
	closedir(d);
	if (rc == 0 && names.n == 0) {
		fail(false, "the folder %s holds no *.json "
			"file", dir);
		rc = 2;
	}
	if (rc == 0)
		qsort(names.paths, names.n, sizeof(*names.paths), compare_names);
	for (size_t i = 0; rc == 0 && i < names.n; i++)
		rc = refs_add(r, names.paths[i]);
	refs_finish(&names);
	if (rc == -ENOMEM)
		fail(false, "out of memory");
	return rc ? 2 : 0;
}

/* refs_add_arg adds what one -r names: a file, or the *.json files of a
 * folder.  Returns 0, or 2 after printing why. */
static int refs_add_arg(struct refs *r, const char *arg)
{
	struct stat st;

	if (strcmp(arg, "-") == 0) {
		fail(true, "-r takes a file or a folder, not standard input");
		return 2;
	}
	if (stat(arg, &st) < 0) {
		fail(false, "cannot read referenced schema %s: "
			"%s", arg, strerror(errno));
		return 2;
	}
	if (S_ISDIR(st.st_mode))
		return refs_add_dir(r, arg);
	if (refs_add(r, arg) < 0) {
		fail(false, "out of memory");
		return 2;
	}
	return 0;
}

/* top_id returns the "$id" of a schema document when it is a string, else
 * NULL (borrowed). */
static const char *top_id(const json_t *doc)
{
	return json_string_value(json_object_get(doc, "$id"));
}

/*
 * load_refs loads the files of r into a new registry (*out), each under its
 * file:// URI.  A file given twice (-r a.json -r .), and SCHEMA_FILE when a
 * folder brings it along, count once.  Two files with one "$id" are
 * refused: which of them a "$ref" reached would depend on the order of the
 * -r options.  Returns 0, or 2 after printing why.
 */
static int load_refs(const struct refs *r, const char *schema_path,
		     const char *schema_uri, const json_t *schema_doc,
		     struct schema_registry **out)
{
	struct schema_registry *reg = schema_registry_create();
	json_t *seen = json_object(); /* file:// URI -> true */
	json_t *ids = json_object();  /* "$id" -> the file that has it */
	int rc = 0;

	*out = NULL;
	if (!reg || !seen || !ids ||
	    json_object_set_new(seen, schema_uri, json_true()) < 0 ||
	    (top_id(schema_doc) &&
	     json_object_set_new(ids, top_id(schema_doc),
				 json_string(schema_path)) < 0)) {
		fail(false, "out of memory");
		rc = 2;
	}
	for (size_t i = 0; rc == 0 && i < r->n; i++) {
		const char *path = r->paths[i], *id, *other;
		char *uri = file_uri(path), *err = NULL;
		json_t *doc = NULL;
		int added;

		if (!uri) {
			rc = 2;
			break;
		}
		if (json_object_get(seen, uri)) {
			free(uri);
			continue;
		}
		doc = load(path, "referenced schema");
		if (!doc) {
			rc = 2;
		} else if (!json_is_object(doc) && !json_is_boolean(doc)) {
			fail(false, "referenced schema %s is not "
				"a schema (an object or a boolean)", path);
			rc = 2;
		} else if ((id = top_id(doc)) &&
			   (other = json_string_value(json_object_get(ids, id)))) {
			fail(false, "%s and %s both have \"$id\": "
				"\"%s\"", other, path, id);
			rc = 2;
		} else if (json_object_set_new(seen, uri, json_true()) < 0 ||
			   (id && json_object_set_new(ids, id, json_string(path)) < 0)) {
			fail(false, "out of memory");
			rc = 2;
		} else if ((added = schema_registry_add(reg, uri, doc, &err)) < 0) {
			fail(false, "referenced schema %s: %s",
				path, err ? err : strerror(-added));
			rc = 2;
		}
		free(err);
		json_decref(doc);
		free(uri);
	}
	json_decref(ids);
	json_decref(seen);
	if (rc) {
		schema_registry_destroy(reg);
		return rc;
	}
	*out = reg;
	return 0;
}

/*
 * with_base returns doc (borrowed) ready to compile as the file at uri: a
 * new reference to a copy with "$id": uri when doc is an object without an
 * "$id", else a new reference to doc itself.  draft-07 ignores "$id" beside
 * "$ref", and so does berth's compiler (schema/compile.c), so such a root
 * is compiled as a reference to its own file instead, which the caller
 * registers; *by_ref says so.  The test of the dialect is the compiler's.
 */
static json_t *with_base(json_t *doc, const char *uri, bool *by_ref)
{
	const char *dialect = json_string_value(json_object_get(doc, "$schema"));
	json_t *copy;

	*by_ref = false;
	if (!json_is_object(doc) || json_object_get(doc, "$id"))
		return json_incref(doc);
	if (dialect && strstr(dialect, "json-schema.org/draft-0") &&
	    json_object_get(doc, "$ref")) {
		*by_ref = true;
		return json_pack("{s:s, s:s}", "$schema", dialect, "$ref", uri);
	}
	copy = json_copy(doc);
	if (copy && json_object_set_new(copy, "$id", json_string(uri)) < 0) {
		json_decref(copy);
		copy = NULL;
	}
	return copy;
}

/* print_errors writes one line per error of a schema_validate result. */
static void print_errors(const json_t *errors)
{
	size_t i;
	json_t *e;

	json_array_foreach(errors, i, e) {
		const char *path = json_string_value(json_object_get(e, "instancePath"));

		/* One line per error: the instance's names and values in
		 * it are escaped, so that none starts a line of its own or
		 * reaches the terminal as an escape. */
		cli_put(stdout, path && path[0] ? path : "(root)");
		fputs(": ", stdout);
		cli_put(stdout, json_string_value(json_object_get(e, "message")));
		fputs(" (", stdout);
		cli_put(stdout, json_string_value(json_object_get(e, "keyword")));
		fputs(")\n", stdout);
	}
	if (json_array_size(errors) >= SCHEMA_MAX_ERRORS)
		fprintf(stderr, "berth validate: stopped after %d errors\n",
			SCHEMA_MAX_ERRORS);
}

/* compile loads and compiles the schema file with the referenced files of
 * refs.  Returns the schema, or NULL after printing why. */
static struct schema *compile(const char *path, const struct refs *refs,
			      const struct schema_options *opt)
{
	struct schema_registry *reg = NULL;
	struct schema *s = NULL;
	json_t *doc, *root = NULL;
	char *uri, *err = NULL;
	bool by_ref = false;
	int rc;

	doc = load(path, "schema");
	if (!doc)
		return NULL;
	uri = file_uri(path);
	if (!uri || load_refs(refs, path, uri, doc, &reg) != 0)
		goto out;
	root = with_base(doc, uri, &by_ref);
	if (!root) {
		fail(false, "out of memory");
		goto out;
	}
	if (by_ref && (rc = schema_registry_add(reg, uri, doc, &err)) < 0) {
		fail(false, "schema %s: %s", path,
			err ? err : strerror(-rc));
		goto out;
	}
	s = schema_compile(root, opt, reg, &err);
	if (!s) {
		fail(false, "schema %s is invalid: %s%s", path,
		     err ? err : "out of memory",
		     err && strstr(err, "cannot resolve reference")
			     ? "; give the schema that holds it with -r FILE "
			       "or -r DIR" : "");
	}
out:
	free(err);
	json_decref(root);
	json_decref(doc);
	schema_registry_destroy(reg);
	free(uri);
	return s;
}

int cli_validate_main(int argc, char **argv)
{
	struct schema_options opt = { 0 };
	struct refs refs = { 0 };
	const char *files[2] = { NULL, NULL };
	int nfiles = 0, rc = 0;
	json_t *instance, *errors = NULL;
	struct schema *s;

	json_out = false;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--json") == 0)
			json_out = true;
	for (int i = 1; i < argc && rc == 0; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--assert-formats") == 0) {
			opt.format_assert = true;
		} else if (strcmp(a, "--json") == 0) {
			continue;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			fputs(usage, stdout);
			refs_finish(&refs);
			return 0;
		} else if (strcmp(a, "-r") == 0 || strcmp(a, "--ref") == 0) {
			if (i + 1 == argc)
				rc = fail(true, "%s needs a file or a folder", a);
			else
				rc = refs_add_arg(&refs, argv[++i]);
		} else if (strncmp(a, "--ref=", 6) == 0) {
			rc = refs_add_arg(&refs, a + 6);
		} else if (a[0] == '-' && a[1] != '\0') {
			rc = fail(true, "unknown option %s", a);
		} else if (nfiles == 2) {
			rc = fail(true, "too many arguments");
		} else {
			files[nfiles++] = a;
		}
	}
	if (rc == 0 && (nfiles == 0 || strcmp(files[0], "-") == 0))
		rc = fail(true, "%s", nfiles ? "the schema must be a file, not "
			  "standard input" : "missing SCHEMA_FILE");
	if (rc) {
		refs_finish(&refs);
		return rc;
	}

	s = compile(files[0], &refs, &opt);
	refs_finish(&refs);
	if (!s)
		return 2;
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

/*
 * suite: runs the official JSON Schema Test Suite against schema/.
 *
 * usage: test-schema-suite SUITE_DIR REMOTES_DIR SKIP_FILE [--format]
 *
 * Without --format it runs the required tests (SUITE_DIR/\*.json) with the
 * default options; with --format it runs SUITE_DIR/optional/format/\*.json
 * with format assertion on.  Every document under REMOTES_DIR is registered
 * under http://localhost:1234/ plus its relative path, as the suite's README
 * asks.  SKIP_FILE lists tests that are known not to pass, one per line:
 *     FILE | GROUP DESCRIPTION | TEST DESCRIPTION | REASON
 * They are reported as skipped, never as passed.  Each test checks both the
 * fast path (schema_valid) and the error path (schema_validate, which must
 * agree and, for an invalid instance, say why).  Exits 1 if any test fails.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "schema/schema.h"

struct skip {
	char *file, *group, *test;
	bool seen;
};

struct run {
	struct schema_registry *reg;
	struct schema_options opt;
	struct skip *skips;
	size_t nskips;
	int passed, failed, skipped;
};

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

static int load_skips(struct run *r, const char *path)
{
	FILE *f = fopen(path, "r");
	char line[2048];

	if (!f) {
		fprintf(stderr, "cannot open skip list %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *parts[4] = { 0 }, *p = line;
		int n = 0;

		if (trim(line)[0] == '#' || trim(line)[0] == '\0')
			continue;
		while (n < 4 && (parts[n] = strsep(&p, "|")))
			n++;
		if (n < 3)
			continue;
		r->skips = realloc(r->skips, (r->nskips + 1) * sizeof(*r->skips));
		r->skips[r->nskips++] = (struct skip){ strdup(trim(parts[0])),
			strdup(trim(parts[1])), strdup(trim(parts[2])), false };
	}
	fclose(f);
	return 0;
}

static bool is_skipped(struct run *r, const char *file, const char *group,
		       const char *test)
{
	for (size_t i = 0; i < r->nskips; i++)
		if (strcmp(r->skips[i].file, file) == 0 &&
		    strcmp(r->skips[i].group, group) == 0 &&
		    strcmp(r->skips[i].test, test) == 0) {
			r->skips[i].seen = true;
			return true;
		}
	return false;
}

/* The optional/format files berth runs in assertion mode: the formats
 * schema_options.format_assert covers ("ecmascript-regex" tests format
 * "regex"), and "unknown", which must stay an annotation. */
static const char *const asserted[] = {
	"date-time", "date", "time", "duration", "email", "hostname", "ipv4",
	"ipv6", "uri", "uri-reference", "uuid", "regex", "ecmascript-regex",
	"unknown", NULL,
};

static bool is_asserted(const char *file)
{
	size_t n = strlen(file) - 5; /* without ".json" */

	for (int i = 0; asserted[i]; i++)
		if (strlen(asserted[i]) == n && strncmp(asserted[i], file, n) == 0)
			return true;
	return false;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* list_json returns the sorted .json file names in dir (NULL-terminated). */
static char **list_json(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0;

	if (!d)
		return NULL;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);

		if (len > 5 && strcmp(e->d_name + len - 5, ".json") == 0) {
			names = realloc(names, (n + 2) * sizeof(*names));
			names[n++] = strdup(e->d_name);
		}
	}
	closedir(d);
	if (!names)
		names = calloc(1, sizeof(*names));
	names[n] = NULL;
	qsort(names, n, sizeof(*names), cmp_names);
	return names;
}

static void free_list(char **names)
{
	for (size_t i = 0; names && names[i]; i++)
		free(names[i]);
	free(names);
}

static void free_skips(struct run *r)
{
	for (size_t i = 0; i < r->nskips; i++) {
		free(r->skips[i].file);
		free(r->skips[i].group);
		free(r->skips[i].test);
	}
	free(r->skips);
	r->skips = NULL;
	r->nskips = 0;
}

/* add_remotes registers every .json file under dir, recursively. */
static int add_remotes(struct run *r, const char *root, const char *rel)
{
	char path[4096];
	DIR *d;
	struct dirent *e;
	int rc = 0;

	if (snprintf(path, sizeof(path), "%s/%s", root, rel) >= (int)sizeof(path))
		return -1;
	if (!(d = opendir(path))) {
		fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((e = readdir(d)) && rc == 0) {
		char sub[2048], full[8192];
		struct stat st;

		if (e->d_name[0] == '.')
			continue;
		if (snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "",
			     e->d_name) >= (int)sizeof(sub) ||
		    snprintf(full, sizeof(full), "%s/%s", root, sub) >= (int)sizeof(full) ||
		    stat(full, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			rc = add_remotes(r, root, sub);
		} else if (strstr(e->d_name, ".json")) {
			json_error_t jerr;
			json_t *doc = json_load_file(full, 0, &jerr);
			char uri[8300], *err = NULL;

			if (!doc) {
				fprintf(stderr, "%s: %s\n", full, jerr.text);
				rc = -1;
				break;
			}
			if (snprintf(uri, sizeof(uri), "http://localhost:1234/%s", sub) >=
				    (int)sizeof(uri) ||
			    schema_registry_add(r->reg, uri, doc, &err) != 0) {
				fprintf(stderr, "cannot register %s: %s\n", uri, err);
				rc = -1;
			}
			free(err);
			json_decref(doc);
		}
	}
	closedir(d);
	return rc;
}

static void run_file(struct run *r, const char *dir, const char *name)
{
	char path[4096];
	json_error_t jerr;
	json_t *groups, *g, *t;
	size_t i, k;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return;
	groups = json_load_file(path, JSON_ALLOW_NUL, &jerr);
	if (!groups) {
		printf("FAIL %s: cannot load: %s\n", name, jerr.text);
		r->failed++;
		return;
	}
	json_array_foreach(groups, i, g) {
		const char *gdesc = json_string_value(json_object_get(g, "description"));
		char *err = NULL;
		struct schema *s = schema_compile(json_object_get(g, "schema"), &r->opt,
						  r->reg, &err);

		json_array_foreach(json_object_get(g, "tests"), k, t) {
			const char *tdesc = json_string_value(json_object_get(t, "description"));
			bool want = json_is_true(json_object_get(t, "valid"));
			json_t *data = json_object_get(t, "data"), *errors = NULL;
			bool fast = false, full_ok = false;
			int rc = 0;

			if (s) {
				fast = schema_valid(s, data);
				rc = schema_validate(s, data, &errors);
				full_ok = (rc == 0) == fast &&
					  (rc == 0 ? errors == NULL
						   : json_array_size(errors) > 0);
			}
			if (is_skipped(r, name, gdesc, tdesc)) {
				r->skipped++;
				if (s && fast == want && full_ok)
					printf("NOTE %s | %s | %s: skipped but passes\n",
					       name, gdesc, tdesc);
			} else if (s && fast == want && full_ok) {
				r->passed++;
			} else {
				r->failed++;
				printf("FAIL %s | %s | %s: ", name, gdesc, tdesc);
				if (!s)
					printf("schema refused: %s\n", err);
				else if (fast != want)
					printf("expected %s, got %s\n", want ? "valid" : "invalid",
					       fast ? "valid" : "invalid");
				else
					printf("schema_validate disagrees (rc %d)\n", rc);
			}
			json_decref(errors);
		}
		free(err);
		schema_free(s);
	}
	json_decref(groups);
}

int main(int argc, char **argv)
{
	struct run r = { 0 };
	bool format = argc > 4 && strcmp(argv[4], "--format") == 0;
	char dir[4096];
	char **names;

	if (argc < 4) {
		fprintf(stderr, "usage: %s SUITE_DIR REMOTES_DIR SKIP_FILE [--format]\n",
			argv[0]);
		return 2;
	}
	r.opt.format_assert = format;
	r.reg = schema_registry_create();
	if (!r.reg) {
		fprintf(stderr, "out of memory\n");
		return 2;
	}
	if (add_remotes(&r, argv[2], "") != 0 || load_skips(&r, argv[3]) != 0 ||
	    snprintf(dir, sizeof(dir), "%s%s", argv[1],
		     format ? "/optional/format" : "") >= (int)sizeof(dir)) {
		free_skips(&r);
		schema_registry_destroy(r.reg);
		return 2;
	}
	names = list_json(dir);
	if (!names || !names[0]) {
		fprintf(stderr, "no test files in %s\n", dir);
		free_list(names);
		free_skips(&r);
		schema_registry_destroy(r.reg);
		return 2;
	}
	for (size_t i = 0; names[i]; i++) {
		if (format && !is_asserted(names[i])) {
			printf("not run: %s (berth does not assert this format)\n", names[i]);
			continue;
		}
		run_file(&r, dir, names[i]);
	}
	for (size_t i = 0; i < r.nskips; i++) {
		if (!r.skips[i].seen && strstr(r.skips[i].file, ".json") &&
		    (strstr(argv[3], "format") != NULL) == format)
			printf("NOTE skip list entry matches no test: %s | %s | %s\n",
			       r.skips[i].file, r.skips[i].group, r.skips[i].test);
	}
	free_skips(&r);
	free_list(names);
	schema_registry_destroy(r.reg);
	printf("[  SUITE   ] JSON Schema Test Suite draft2020-12 (%s): %d passed, "
	       "%d failed, %d skipped, %d total\n", format ? "optional/format, asserted"
	       : "required", r.passed, r.failed, r.skipped,
	       r.passed + r.failed + r.skipped);
	return r.failed ? 1 : 0;
}

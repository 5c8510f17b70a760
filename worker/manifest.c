/*
 * manifest.c: tools in any language. A manifest is a JSON file holding the
 * fields of a C tool plus the command that runs it (PROTOCOL of the
 * process: proc.c). Every field is checked; an unknown field is an error,
 * so that a misspelt "requireAproval" stops start-up instead of silently
 * running a tool without its approval gate.
 */
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "worker/internal.h"

static const char *const known_fields[] = {
	"id", "title", "description", "inputSchema", "outputSchema",
	"suspendSchema", "resumeSchema", "requestContextSchema",
	"requireApproval", "strict", "background", "mcp", "inputExamples",
	"providerOptions", "command", "env", "cwd", "$schema", "$comment",
	NULL,
};

static const char *const background_fields[] = {
	"enabled", "timeoutMs", "maxRetries", "concurrency", "backoffMs",
	"backoffMaxMs", "onInterrupt", NULL,
};

static bool known(const char *const *list, const char *key)
{
	for (; *list; list++)
		if (strcmp(*list, key) == 0)
			return true;
	return false;
}

/* bad sets *errmsg to "PATH: FIELD WHY" and returns -EINVAL. */
static int bad(char **errmsg, const char *path, const char *field,
	       const char *why)
{
	if (errmsg)
		*errmsg = worker__errmsg("%s: %s %s", path, field, why);
	return -EINVAL;
}

/* get_int reads a non-negative integer field of o into *out. */
static int get_int(const json_t *o, const char *key, int64_t max,
		   int64_t *out, const char *path, const char *field,
		   char **errmsg)
{
	json_t *v = json_object_get(o, key);

	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > max)
		return bad(errmsg, path, field,
			   "must be a non-negative integer");
	*out = json_integer_value(v);
	return 0;
}

static int parse_background(struct worker_tool *t, const json_t *bg,
			    const char *path, char **errmsg)
{
	const char *key;
	json_t *v;
	int64_t n;
	int rc;

	if (!json_is_object(bg))
		return bad(errmsg, path, "background", "must be an object");
	json_object_foreach((json_t *)bg, key, v) {
		if (!known(background_fields, key)) {
			char field[160];
			snprintf(field, sizeof(field), "background.%s", key);
			return bad(errmsg, path, field, "is not a known field");
		}
	}
	v = json_object_get(bg, "enabled");
	if (v && !json_is_boolean(v))
		return bad(errmsg, path, "background.enabled",
			   "must be true or false");
	t->bg.disabled = v && json_is_false(v);
	n = 0;
	if ((rc = get_int(bg, "timeoutMs", INT64_MAX / 2, &n, path,
			  "background.timeoutMs", errmsg)))
		return rc;
	t->bg.timeout_ms = n;
	n = 0;
	if ((rc = get_int(bg, "maxRetries", 1000000, &n, path,
			  "background.maxRetries", errmsg)))
		return rc;
	t->bg.max_retries = (int)n;
	n = 0;
	if ((rc = get_int(bg, "concurrency", 1000000, &n, path,
			  "background.concurrency", errmsg)))
		return rc;
	t->bg.concurrency = (int)n;
	n = 0;
	if ((rc = get_int(bg, "backoffMs", INT64_MAX / 4, &n, path,
			  "background.backoffMs", errmsg)))
		return rc;
	t->bg.backoff_ms = n;
	n = 0;
	if ((rc = get_int(bg, "backoffMaxMs", INT64_MAX / 4, &n, path,
			  "background.backoffMaxMs", errmsg)))
		return rc;
	t->bg.backoff_max_ms = n;
	v = json_object_get(bg, "onInterrupt");
	if (v) {
		const char *s = json_string_value(v);
		if (s && strcmp(s, "retry") == 0)
			t->bg.on_interrupt = BERTH_INTERRUPT_RETRY;
		else if (s && strcmp(s, "fail") == 0)
			t->bg.on_interrupt = BERTH_INTERRUPT_FAIL;
		else
			return bad(errmsg, path, "background.onInterrupt",
				   "must be \"retry\" or \"fail\"");
	}
	return 0;
}

/* parse_command fills cmd from the manifest's command, env and cwd. A
 * relative program path and cwd are relative to the manifest's folder;
 * a bare program name ("jq") is looked up in PATH by execvp. */
static int parse_command(struct worker__cmd *cmd, const json_t *m,
			 const char *path, const char *dir, char **errmsg)
{
	json_t *argv = json_object_get(m, "command");
	json_t *env = json_object_get(m, "env");
	json_t *cwd = json_object_get(m, "cwd");
	size_t n, i;
	json_t *v;
	const char *key;

	if (!argv)
		return bad(errmsg, path, "command", "is missing");
	if (!json_is_array(argv) || json_array_size(argv) == 0)
		return bad(errmsg, path, "command",
			   "must be a non-empty array of strings");
	n = json_array_size(argv);
	cmd->argv = calloc(n + 1, sizeof(char *));
	if (!cmd->argv)
		return -ENOMEM;
	json_array_foreach(argv, i, v) {
		const char *s = json_string_value(v);
		char field[64];

		snprintf(field, sizeof(field), "command[%zu]", i);
		if (!s || (i == 0 && !*s))
			return bad(errmsg, path, field,
				   "must be a non-empty string");
		if (i == 0 && s[0] != '/' && strchr(s, '/'))
			cmd->argv[i] = worker__errmsg("%s/%s", dir, s);
		else
			cmd->argv[i] = strdup(s);
		if (!cmd->argv[i])
			return -ENOMEM;
	}
	if (env) {
		if (!json_is_object(env))
			return bad(errmsg, path, "env",
				   "must be an object of strings");
		cmd->env = calloc(json_object_size(env) + 1, sizeof(char *));
		if (!cmd->env)
			return -ENOMEM;
		i = 0;
		json_object_foreach(env, key, v) {
			char field[160];

			snprintf(field, sizeof(field), "env.%s", key);
			if (!json_is_string(v) || !*key || strchr(key, '='))
				return bad(errmsg, path, field,
					   "must be a string under a name "
					   "without '='");
			cmd->env[i] = worker__errmsg("%s=%s", key,
						     json_string_value(v));
			if (!cmd->env[i++])
				return -ENOMEM;
		}
	}
	if (cwd && !json_is_string(cwd))
		return bad(errmsg, path, "cwd", "must be a string");
	if (!cwd)
		cmd->cwd = strdup(dir);
	else if (json_string_value(cwd)[0] == '/')
		cmd->cwd = strdup(json_string_value(cwd));
	else
		cmd->cwd = worker__errmsg("%s/%s", dir,
					  json_string_value(cwd));
	if (!cmd->cwd)
		return -ENOMEM;
	cmd->path = strdup(path);
	return cmd->path ? 0 : -ENOMEM;
}

/* copy_json sets *out to a copy of m's key when it has the wanted type
 * ('o' object, 'a' array, 's' schema: object or boolean). */
static int copy_json(const json_t *m, const char *key, int want,
		     json_t **out, const char *path, char **errmsg)
{
	json_t *v = json_object_get(m, key);
	bool ok;

	if (!v)
		return 0;
	ok = want == 'o'   ? json_is_object(v)
	     : want == 'a' ? json_is_array(v)
			   : json_is_object(v) || json_is_boolean(v);
	if (!ok)
		return bad(errmsg, path, key,
			   want == 'o'   ? "must be an object"
			   : want == 'a' ? "must be an array"
					 : "must be a JSON Schema (an object "
					   "or a boolean)");
	*out = json_deep_copy(v);
	return *out ? 0 : -ENOMEM;
}

static int get_string(const json_t *m, const char *key, char **out,
		      const char *path, char **errmsg)
{
	json_t *v = json_object_get(m, key);

	if (!v)
		return 0;
	if (!json_is_string(v))
		return bad(errmsg, path, key, "must be a string");
	*out = strdup(json_string_value(v));
	return *out ? 0 : -ENOMEM;
}

static int get_bool(const json_t *m, const char *key, bool *out,
		    const char *path, char **errmsg)
{
	json_t *v = json_object_get(m, key);

	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return bad(errmsg, path, key, "must be true or false");
	*out = json_is_true(v);
	return 0;
}

static int parse_manifest(struct worker_tool *t, const json_t *m,
			  const char *path, const char *dir, char **errmsg)
{
	const char *key;
	json_t *v;
	int rc;

	json_object_foreach((json_t *)m, key, v) {
		if (!known(known_fields, key))
			return bad(errmsg, path, key, "is not a known field");
	}
	if ((rc = get_string(m, "title", &t->title, path, errmsg)) ||
	    (rc = get_string(m, "description", &t->description, path,
			     errmsg)) ||
	    (rc = get_bool(m, "requireApproval", &t->require_approval, path,
			   errmsg)) ||
	    (rc = get_bool(m, "strict", &t->strict, path, errmsg)))
		return rc;
	for (int k = 0; k < WORKER__NSCHEMA; k++) {
		json_t *doc = NULL;
		char *why = NULL;

		rc = copy_json(m, worker__schema_name(k), 's', &doc, path,
			       errmsg);
		if (rc)
			return rc;
		if (worker__tool_set_schema(t, k, doc, &why)) {
			/* Name the file, then the tool and the field. */
			if (errmsg)
				*errmsg = worker__errmsg(
					"%s: %s", path,
					why ? why : "a schema does not compile");
			free(why);
			return -EINVAL;
		}
	}
	v = json_object_get(m, "background");
	if (v && (rc = parse_background(t, v, path, errmsg)))
		return rc;
	v = json_object_get(m, "mcp");
	if (v) {
		if (!json_is_object(v))
			return bad(errmsg, path, "mcp", "must be an object");
		json_t *mv;

		json_object_foreach(v, key, mv) {
			if (strcmp(key, "annotations") && strcmp(key, "_meta")) {
				char field[160];
				snprintf(field, sizeof(field), "mcp.%s", key);
				return bad(errmsg, path, field,
					   "is not a known field");
			}
		}
		if ((rc = copy_json(v, "annotations", 'o', &t->annotations,
				    path, errmsg)) ||
		    (rc = copy_json(v, "_meta", 'o', &t->meta, path, errmsg)))
			return rc;
	}
	if ((rc = copy_json(m, "inputExamples", 'a', &t->input_examples, path,
			    errmsg)) ||
	    (rc = copy_json(m, "providerOptions", 'o', &t->provider_options,
			    path, errmsg)))
		return rc;
	t->cmd = calloc(1, sizeof(*t->cmd));
	if (!t->cmd)
		return -ENOMEM;
	return parse_command(t->cmd, m, path, dir, errmsg);
}

int worker__manifest_load(const char *path, struct worker_tool **out,
			  char **errmsg)
{
	json_error_t jerr;
	json_t *m, *id;
	struct worker_tool *t;
	char *dirbuf, *abs;
	int rc;

	*out = NULL;
	m = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!m) {
		if (errmsg)
			*errmsg = worker__errmsg("%s: not a JSON file (line %d, "
						 "column %d: %s)",
						 path, jerr.line, jerr.column,
						 jerr.text);
		return -EINVAL;
	}
	if (!json_is_object(m)) {
		json_decref(m);
		return bad(errmsg, path, "the manifest", "must be an object");
	}
	id = json_object_get(m, "id");
	if (!json_is_string(id)) {
		json_decref(m);
		return bad(errmsg, path, "id", "is missing or not a string");
	}
	t = worker__tool_new(json_string_value(id));
	abs = realpath(path, NULL);
	dirbuf = abs ? strdup(abs) : NULL;
	if (!t || !dirbuf) {
		rc = -ENOMEM;
		if (errmsg)
			*errmsg = worker__errmsg("%s: cannot be read: %s", path,
						 strerror(abs ? ENOMEM : errno));
		goto done;
	}
	rc = parse_manifest(t, m, path, dirname(dirbuf), errmsg);
	if (rc == -ENOMEM && errmsg && !*errmsg)
		*errmsg = worker__errmsg("%s: out of memory", path);
done:
	free(abs);
	free(dirbuf);
	json_decref(m);
	if (rc) {
		worker__tool_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int worker_load_dir(struct worker *w, const char *dir, char **errmsg)
{
	DIR *d;
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0, loaded = 0;

	if (errmsg)
		*errmsg = NULL;
	d = opendir(dir);
	if (!d) {
		if (errmsg)
			*errmsg = worker__errmsg("--tools %s: %s", dir,
						 strerror(errno));
		return -EINVAL;
	}
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len < 6 || e->d_name[0] == '.' ||
		    strcmp(e->d_name + len - 5, ".json"))
			continue;
		if (n == cap) {
			char **p;
			cap = cap ? 2 * cap : 16;
			p = realloc(names, cap * sizeof(*p));
			if (!p) {
				rc = -ENOMEM;
				break;
			}
			names = p;
		}
		if (!(names[n] = worker__errmsg("%s/%s", dir, e->d_name))) {
			rc = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(d);
	/* Sorted, so that the first error reported is the same every time. */
	if (names)
		qsort(names, n, sizeof(*names), by_name);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		struct stat sb;
		struct worker_tool *t;
		char *why = NULL;

		if (stat(names[i], &sb) || !S_ISREG(sb.st_mode))
			continue;
		rc = worker__manifest_load(names[i], &t, errmsg);
		if (rc)
			break;
		rc = worker__tool_register(w, t, &why);
		if (rc) {
			if (errmsg)
				*errmsg = worker__errmsg("%s: %s", names[i],
							 why ? why : "");
			free(why);
			worker__tool_free(t);
			break;
		}
		loaded++;
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (rc == -ENOMEM && errmsg && !*errmsg)
		*errmsg = worker__errmsg("--tools %s: out of memory", dir);
	return rc ? -EINVAL : loaded;
}

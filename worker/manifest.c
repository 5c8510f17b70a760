/*
 * manifest.c: tool definitions as JSON. A definition holds the fields of
 * createTool() that JSON can hold (docs/TOOLS.md lists them); a manifest
 * is a file holding one, plus the command that runs the tool (the process
 * protocol: proc.c and docs/TOOLS.md). Every field is checked; an unknown
 * field is an error, so that a misspelt "requireAproval" stops start-up
 * instead of silently running a tool without its approval gate.
 *
 * worker__tool_from_json parses a definition from any JSON object, not
 * only from a file, so that a definition that arrives another way (a
 * worker process registering its tools) is read by the same code.
 */
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "worker/internal.h"

static const char *const definition_fields[] = {
	"id", "title", "description", "inputSchema", "outputSchema",
	"suspendSchema", "resumeSchema", "requestContextSchema",
	"requireApproval", "strict", "background", "mcp", "inputExamples",
	"providerOptions", "transform", "$schema", "$comment", NULL,
};

/* What a manifest adds to a definition (parse_command). */
static const char *const manifest_fields[] = {"command", "env", "cwd", NULL};

/* Fields of createTool() that are functions, or exist only where a model
 * streams the call, with what stands for them here: a porter who copies
 * a definition learns where each went instead of reading "unknown". */
static const struct {
	const char *field, *why;
} moved_fields[] = {
	{"execute", "is a function; an external tool's execute is its "
		    "\"command\" (docs/TOOLS.md)"},
	{"toModelOutput", "is a function; an external tool writes the model's "
			  "view as \"modelOutput\" beside \"output\" in "
			  "its final line"},
	{"onInputStart", "has no source in berth: a tool call's input streams "
			 "from the agent's model, and berth receives it whole"},
	{"onInputDelta", "has no source in berth: a tool call's input streams "
			 "from the agent's model, and berth receives it whole"},
	{"onInputAvailable", "is a function; a definition cannot hold one (a C "
			     "tool's on_input_available, or the \"created\" "
			     "event)"},
	{"onOutput", "is a function; a definition cannot hold one (a C tool's "
		     "on_output, or the \"completed\" event)"},
};

static const char *const background_fields[] = {
	"enabled", "timeoutMs", "maxRetries", "concurrency", "backoffMs",
	"backoffMaxMs", "onInterrupt", "retries", NULL,
};

/* Mastra's RetryConfig ("background.retries" of its older
 * ToolBackgroundConfig), read into berth's fields. */
static const char *const retries_fields[] = {
	"maxRetries", "retryDelayMs", "maxRetryDelayMs", "backoffMultiplier",
	NULL,
};

/* Settings of Mastra's ToolBackgroundConfig that berth has no place for,
 * each refused with what berth has instead. */
static const struct {
	const char *field, *why;
} refused_background[] = {
	{"waitTimeoutMs", "is how long an agent's loop waits for the result; "
			  "berth waits for no one: a caller bounds its own "
			  "wait (jobs/wait's timeoutMs), and "
			  "background.timeoutMs bounds the run"},
	{"messageHandling", "is about an agent's message history, which berth "
			    "does not keep; a caller reads the job and its "
			    "views (jobs/get)"},
	{"onComplete", "is a function; a definition cannot hold one (a C "
		       "tool's on_complete, or the \"completed\" event)"},
	{"onFailed", "is a function; a definition cannot hold one (a C tool's "
		     "on_failed, or the \"failed\" event)"},
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

/* parse_retries reads Mastra's "retries" (RetryConfig) of background bg
 * into t's settings, once bg's own are read. A setting given both ways
 * must agree. */
static int parse_retries(struct worker_tool *t, const json_t *bg,
			 const json_t *r, const char *path, char **errmsg)
{
	const char *key;
	json_t *v;
	int64_t n;
	int rc;

	if (!json_is_object(r))
		return bad(errmsg, path, "background.retries",
			   "must be an object (Mastra's RetryConfig)");
	json_object_foreach((json_t *)r, key, v) {
		char field[160];

		if (known(retries_fields, key))
			continue;
		snprintf(field, sizeof(field), "background.retries.%s", key);
		return bad(errmsg, path, field,
			   strcmp(key, "retryableErrors") == 0
				   ? "is a function; a definition cannot "
				     "hold one (an error line says whether "
				     "it is retryable)"
				   : "is not a known field (maxRetries, "
				     "retryDelayMs, maxRetryDelayMs, "
				     "backoffMultiplier)");
	}
	n = t->bg.max_retries;
	if ((rc = get_int(r, "maxRetries", 1000000, &n, path,
			  "background.retries.maxRetries", errmsg)))
		return rc;
	if (json_object_get(bg, "maxRetries") && n != t->bg.max_retries)
		return bad(errmsg, path, "background.retries.maxRetries",
			   "differs from background.maxRetries");
	t->bg.max_retries = (int)n;
	n = t->bg.backoff_ms;
	if ((rc = get_int(r, "retryDelayMs", INT64_MAX / 4, &n, path,
			  "background.retries.retryDelayMs", errmsg)))
		return rc;
	if (json_object_get(bg, "backoffMs") && n != t->bg.backoff_ms)
		return bad(errmsg, path, "background.retries.retryDelayMs",
			   "differs from background.backoffMs");
	t->bg.backoff_ms = n;
	n = t->bg.backoff_max_ms;
	if ((rc = get_int(r, "maxRetryDelayMs", INT64_MAX / 4, &n, path,
			  "background.retries.maxRetryDelayMs", errmsg)))
		return rc;
	if (json_object_get(bg, "backoffMaxMs") && n != t->bg.backoff_max_ms)
		return bad(errmsg, path, "background.retries.maxRetryDelayMs",
			   "differs from background.backoffMaxMs");
	t->bg.backoff_max_ms = n;
	/* berth doubles the delay after each failed try (backoff.c). */
	v = json_object_get(r, "backoffMultiplier");
	if (v && !(json_is_number(v) && json_number_value(v) == 2))
		return bad(errmsg, path, "background.retries.backoffMultiplier",
			   "can only be 2: berth doubles the delay after each "
			   "failed try, from background.backoffMs up to "
			   "background.backoffMaxMs");
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
		char field[160];

		if (known(background_fields, key))
			continue;
		snprintf(field, sizeof(field), "background.%s", key);
		for (size_t i = 0; i < sizeof(refused_background) /
					       sizeof(refused_background[0]);
		     i++)
			if (strcmp(refused_background[i].field, key) == 0)
				return bad(errmsg, path, field,
					   refused_background[i].why);
		return bad(errmsg, path, field, "is not a known field");
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
	v = json_object_get(bg, "retries");
	return v ? parse_retries(t, bg, v, path, errmsg) : 0;
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

/* check_fields refuses a member of def that is neither a definition's
 * nor one of extra, saying where a createTool field that JSON cannot
 * hold has gone. */
static int check_fields(const json_t *def, const char *where,
			const char *const *extra, char **errmsg)
{
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)def, key, v) {
		if (known(definition_fields, key) ||
		    (extra && known(extra, key)))
			continue;
		for (size_t i = 0;
		     i < sizeof(moved_fields) / sizeof(moved_fields[0]); i++)
			if (strcmp(moved_fields[i].field, key) == 0)
				return bad(errmsg, where, key,
					   moved_fields[i].why);
		return bad(errmsg, where, key, "is not a known field");
	}
	return 0;
}

static int parse_mcp(struct worker_tool *t, const json_t *v,
		     const char *where, char **errmsg)
{
	const char *key;
	json_t *mv;
	char *why = NULL;
	int rc;

	if (!json_is_object(v))
		return bad(errmsg, where, "mcp", "must be an object");
	json_object_foreach((json_t *)v, key, mv) {
		if (strcmp(key, "annotations") && strcmp(key, "_meta")) {
			char field[160];
			snprintf(field, sizeof(field), "mcp.%s", key);
			return bad(errmsg, where, field, "is not a known field");
		}
	}
	if ((rc = copy_json(v, "annotations", 'o', &t->annotations, where,
			    errmsg)) ||
	    (rc = copy_json(v, "_meta", 'o', &t->meta, where, errmsg)))
		return rc;
	if (t->annotations &&
	    worker__check_annotations(t->id, t->annotations, &why)) {
		if (errmsg)
			*errmsg = worker__errmsg("%s: %s", where,
						 why ? why : "mcp.annotations");
		free(why);
		return -EINVAL;
	}
	return 0;
}

/* parse_definition fills t from the createTool fields of def. */
static int parse_definition(struct worker_tool *t, const json_t *def,
			    const char *where, char **errmsg)
{
	json_t *v;
	int rc;

	if ((rc = get_string(def, "title", &t->title, where, errmsg)) ||
	    (rc = get_string(def, "description", &t->description, where,
			     errmsg)) ||
	    (rc = get_bool(def, "requireApproval", &t->require_approval, where,
			   errmsg)) ||
	    (rc = get_bool(def, "strict", &t->strict, where, errmsg)))
		return rc;
	for (int k = 0; k < WORKER__NSCHEMA; k++) {
		json_t *doc = NULL;
		char *why = NULL;

		rc = copy_json(def, worker__schema_name(k), 's', &doc, where,
			       errmsg);
		if (rc)
			return rc;
		if (worker__tool_set_schema(t, k, doc, &why)) {
			/* Name the file, then the tool and the field. */
			if (errmsg)
				*errmsg = worker__errmsg(
					"%s: %s", where,
					why ? why : "a schema does not compile");
			free(why);
			return -EINVAL;
		}
	}
	v = json_object_get(def, "background");
	if (v && (rc = parse_background(t, v, where, errmsg)))
		return rc;
	v = json_object_get(def, "mcp");
	if (v && (rc = parse_mcp(t, v, where, errmsg)))
		return rc;
	if ((rc = copy_json(def, "inputExamples", 'a', &t->input_examples,
			    where, errmsg)) ||
	    (rc = copy_json(def, "providerOptions", 'o', &t->provider_options,
			    where, errmsg)))
		return rc;
	v = json_object_get(def, "transform");
	if (v) {
		char *why = NULL;

		if (worker__transform_check(v, &why)) {
			if (errmsg)
				*errmsg = worker__errmsg("%s: %s", where,
							 why ? why
							     : "transform");
			free(why);
			return -EINVAL;
		}
		if (!(t->transform = json_deep_copy(v)))
			return -ENOMEM;
	}
	return 0;
}

int worker__tool_from_json(const json_t *def, const char *where,
			   const char *const *extra, struct worker_tool **out,
			   char **errmsg)
{
	json_t *id = json_object_get(def, "id");
	struct worker_tool *t;
	int rc;

	*out = NULL;
	if (errmsg)
		*errmsg = NULL;
	if (!json_is_object(def))
		return bad(errmsg, where, "the definition", "must be an object");
	if (!json_is_string(id))
		return bad(errmsg, where, "id", "is missing or not a string");
	if ((rc = check_fields(def, where, extra, errmsg)))
		return rc;
	t = worker__tool_new(json_string_value(id));
	if (!t) {
		if (errmsg)
			*errmsg = worker__errmsg("%s: out of memory", where);
		return -ENOMEM;
	}
	rc = parse_definition(t, def, where, errmsg);
	if (rc == -ENOMEM && errmsg && !*errmsg)
		*errmsg = worker__errmsg("%s: out of memory", where);
	if (rc) {
		worker__tool_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

int worker__manifest_load(const char *path, struct worker_tool **out,
			  char **errmsg)
{
	json_error_t jerr;
	json_t *m;
	struct worker_tool *t = NULL;
	char *dirbuf = NULL, *abs;
	int rc;

	*out = NULL;
	if (errmsg)
		*errmsg = NULL;
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
	rc = worker__tool_from_json(m, path, manifest_fields, &t, errmsg);
	if (rc)
		goto done;
	abs = realpath(path, NULL);
	dirbuf = abs ? strdup(abs) : NULL;
	t->cmd = calloc(1, sizeof(*t->cmd));
	if (!dirbuf || !t->cmd) {
		rc = -ENOMEM;
		if (errmsg)
			*errmsg = worker__errmsg("%s: cannot be read: %s", path,
						 strerror(abs ? ENOMEM : errno));
		free(abs);
		goto done;
	}
	free(abs);
	rc = parse_command(t->cmd, m, path, dirname(dirbuf), errmsg);
	if (rc == -ENOMEM && errmsg && !*errmsg)
		*errmsg = worker__errmsg("%s: out of memory", path);
done:
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

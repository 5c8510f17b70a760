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

#include "log/log.h"
#include "worker/internal.h"

static const char *const definition_fields[] = {
	"id", "title", "description", "inputSchema", "outputSchema",
	"suspendSchema", "resumeSchema", "requestContextSchema",
	"requireApproval", "approvalPolicy", "strict", "background", "mcp",
	"inputExamples", "providerOptions", "transform", "$schema", "$comment",
	NULL,
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
	/* Names a port often brings for berth's own settings. */
	{"retryDelay", "is not berth's: the delay before the first retry is "
		       "backoffMs (ms), or Mastra's retries.retryDelayMs"},
	{"retryDelayMs", "belongs in background.retries (Mastra's "
			 "RetryConfig); berth's own is backoffMs"},
	{"maxRetryDelay", "is not berth's: the longest delay between tries is "
			  "backoffMaxMs (ms), or Mastra's "
			  "retries.maxRetryDelayMs"},
	{"maxRetryDelayMs", "belongs in background.retries (Mastra's "
			    "RetryConfig); berth's own is backoffMaxMs"},
	{"backoffMultiplier", "belongs in background.retries (Mastra's "
			      "RetryConfig); berth's backoff doubles"},
	{"maxRetry", "is not berth's: tries after the first are maxRetries"},
	{"retry", "is not berth's: tries after the first are maxRetries"},
	{"timeout", "is not berth's: the time a run gets is timeoutMs (ms)"},
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
		return bad(errmsg, path, field,
			   "is not a known field (berth's: enabled, "
			   "timeoutMs, maxRetries, concurrency, backoffMs, "
			   "backoffMaxMs, onInterrupt, retries)");
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
	v = json_object_get(def, "approvalPolicy");
	if (v && (rc = worker__policy_parse(&t->policy, v, where, errmsg)))
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
	if (rc) {
		json_decref(m);
		worker__tool_free(t);
		return rc;
	}
	t->source = m;
	*out = t;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* list_manifests sets *names to the paths of the *.json files directly in
 * dir that are regular files, sorted (malloc'd, each and the array), so
 * that the first error reported is the same every time. Returns 0, or
 * -EINVAL with *errmsg naming dir. */
static int list_manifests(const char *dir, char ***names, size_t *n,
			  char **errmsg)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t cap = 0, k = 0;
	char **v = NULL;
	int rc = 0;

	*names = NULL;
	*n = 0;
	if (!d) {
		if (errmsg)
			*errmsg = worker__errmsg("--tools %s: %s", dir,
						 strerror(errno));
		return -EINVAL;
	}
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		struct stat sb;
		char *path;

		if (len < 6 || e->d_name[0] == '.' ||
		    strcmp(e->d_name + len - 5, ".json"))
			continue;
		if (!(path = worker__errmsg("%s/%s", dir, e->d_name))) {
			rc = -ENOMEM;
			break;
		}
		if (stat(path, &sb) || !S_ISREG(sb.st_mode)) {
			free(path);
			continue;
		}
		if (k == cap) {
			char **p;

			cap = cap ? 2 * cap : 16;
			p = realloc(v, cap * sizeof(*p));
			if (!p) {
				free(path);
				rc = -ENOMEM;
				break;
			}
			v = p;
		}
		v[k++] = path;
	}
	closedir(d);
	if (rc) {
		free_names(v, k);
		if (errmsg)
			*errmsg = worker__errmsg("--tools %s: out of memory",
						 dir);
		return -EINVAL;
	}
	if (v)
		qsort(v, k, sizeof(*v), by_name);
	*names = v;
	*n = k;
	return 0;
}

/* remember_dir keeps dir for the reloads. */
static int remember_dir(struct worker *w, const char *dir)
{
	char **p = realloc(w->dirs, (w->ndirs + 1) * sizeof(*p));

	if (!p)
		return -ENOMEM;
	w->dirs = p;
	if (!(w->dirs[w->ndirs] = strdup(dir)))
		return -ENOMEM;
	w->ndirs++;
	return 0;
}

int worker_load_dir(struct worker *w, const char *dir, char **errmsg)
{
	char **names;
	size_t n;
	int rc, loaded = 0;

	if (errmsg)
		*errmsg = NULL;
	if (list_manifests(dir, &names, &n, errmsg))
		return -EINVAL;
	rc = remember_dir(w, dir);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		struct worker_tool *t;
		char *why = NULL;

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
	free_names(names, n);
	if (rc == -ENOMEM && errmsg && !*errmsg)
		*errmsg = worker__errmsg("--tools %s: out of memory", dir);
	return rc ? -EINVAL : loaded;
}

/* ---- reload ----------------------------------------------------------- */

/*
 * A reload reads every --tools folder again and builds a new registry from
 * the built-in and C tools, the manifests that load, and, for a manifest
 * that does not (or a folder that cannot be read), the definition it had.
 * A manifest whose text is the same keeps its tool as it was; a changed
 * one gets a new definition, and the runs of the old one finish under it
 * (they hold a reference). A removed tool's jobs stay in the database and
 * wait: they are left out of claims until a tool of that name comes back.
 */

/* struct reload is one reload's state: the old registry, the new one, the
 * manifests read, and what the log lines report. */
struct reload {
	struct worker *w;
	struct worker_tool **old;
	size_t nold;
	struct worker_tool **tools; /* the new registry, sorted */
	size_t ntools, captools;
	int added, changed, removed, kept, failed;
};

/* old_at_path returns the external tool of the old registry loaded from
 * path, or NULL. */
static struct worker_tool *old_at_path(const struct reload *rl,
				       const char *path)
{
	for (size_t i = 0; i < rl->nold; i++)
		if (rl->old[i]->cmd && strcmp(rl->old[i]->cmd->path, path) == 0)
			return rl->old[i];
	return NULL;
}

static struct worker_tool *old_by_id(const struct reload *rl, const char *id)
{
	for (size_t i = 0; i < rl->nold; i++)
		if (strcmp(rl->old[i]->id, id) == 0)
			return rl->old[i];
	return NULL;
}

/* in_dir is true when path is a file directly in dir (as list_manifests
 * built it: dir, a slash, the name). */
static bool in_dir(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return strncmp(path, dir, n) == 0 && path[n] == '/' &&
	       !strchr(path + n + 1, '/');
}

/* keep_old puts the old definition t into the new registry, for a manifest
 * that failed to load now; false when another tool took its id. */
static bool keep_old(struct reload *rl, struct worker_tool *t)
{
	if (worker__tools_insert(&rl->tools, &rl->ntools, &rl->captools, t)) {
		log_warn("reload: tool %s (%s) is removed: its manifest did "
			 "not load, and another manifest now defines %s",
			 t->id, t->cmd->path, t->id);
		return false;
	}
	return true;
}

/* load_one reads manifest path into the new registry. */
static void load_one(struct reload *rl, const char *path)
{
	struct worker_tool *t = NULL, *old = old_at_path(rl, path), *same;
	char *why = NULL;
	int rc;

	rc = worker__manifest_load(path, &t, &why);
	if (rc == 0 && (rc = worker__tool_check(t, &why)) != 0) {
		char *named = worker__errmsg("%s: %s", path, why ? why : "invalid");

		free(why);
		why = named;
		worker__tool_free(t);
		t = NULL;
	}
	if (rc == 0) {
		same = old_by_id(rl, t->id);
		/* The same text from the same file: the tool as it was. */
		if (same && same->cmd && strcmp(same->cmd->path, path) == 0 &&
		    json_equal(same->source, t->source)) {
			worker__tool_free(t);
			t = same;
		}
		rc = worker__tools_insert(&rl->tools, &rl->ntools,
					  &rl->captools, t);
		if (rc == 0) {
			if (t == same)
				rl->kept++;
			return;
		}
		if (rc == -EEXIST)
			why = worker__errmsg("%s: tool %s: id is already "
					     "registered", path, t->id);
		if (t != same)
			worker__tool_free(t);
	}
	rl->failed++;
	if (old && keep_old(rl, old))
		log_warn("reload: %s; tool %s keeps the definition it had",
			 why ? why : path, old->id);
	else
		log_warn("reload: %s; it is not loaded", why ? why : path);
	free(why);
}

/* in_new returns the tool of id in the new registry, or NULL. */
static struct worker_tool *in_new(const struct reload *rl, const char *id)
{
	size_t lo = 0, hi = rl->ntools;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(rl->tools[mid]->id, id);

		if (c == 0)
			return rl->tools[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* count_waiting counts the jobs of tool that wait for it to run (pending,
 * awaiting approval or suspended), up to max; each status is read through
 * its own index. Returns the count, or -1 when the store could not say. */
static long count_waiting(struct worker *w, const char *tool, long max)
{
	static const int statuses[] = {STORE_PENDING, STORE_AWAITING_APPROVAL,
				       STORE_SUSPENDED};
	long count = 0;

	for (size_t s = 0; s < 3 && count < max; s++) {
		struct store_filter f = {.status_mask = STORE_MASK(statuses[s]),
					 .tool = tool};
		char *cursor = NULL, *next;

		do {
			struct store_job **jobs;
			size_t n;

			if (store_list(w->st, &f, 1000, cursor, &jobs, &n,
				       &next) < 0) {
				free(cursor);
				return -1;
			}
			for (size_t i = 0; i < n; i++)
				store_job_free(jobs[i]);
			free(jobs);
			free(cursor);
			cursor = next;
			count += (long)n;
		} while (cursor && count < max);
		free(cursor);
	}
	return count;
}

/* runs_of counts the runs of tool id that hold a slot. */
static int runs_of(const struct worker *w, const char *id)
{
	int n = 0;

	for (const struct worker__run *r = w->runs; r; r = r->next)
		if (r->slot_held && strcmp(r->job->tool, id) == 0)
			n++;
	return n;
}

/* report_removed logs a tool the reload removed and leaves its jobs out of
 * claims. */
static void report_removed(struct reload *rl, const struct worker_tool *t)
{
	struct worker *w = rl->w;
	long waiting = count_waiting(w, t->id, 100000);
	int running = runs_of(w, t->id);
	char count[96], runs[96] = "";

	rl->removed++;
	worker__tool_missing(w, t->id);
	if (waiting < 0)
		snprintf(count, sizeof count, "its waiting jobs (the store "
			 "could not count them) stay");
	else if (waiting == 0)
		snprintf(count, sizeof count, "no job of it waits");
	else
		snprintf(count, sizeof count, "%s%ld waiting job%s (pending, "
			 "awaiting approval or suspended) stay%s",
			 waiting >= 100000 ? "at least " : "", waiting,
			 waiting == 1 ? "" : "s", waiting == 1 ? "s" : "");
	if (running)
		snprintf(runs, sizeof runs, "; %d running job%s finish%s "
			 "under its old definition", running,
			 running == 1 ? "" : "s", running == 1 ? "es" : "");
	log_info("reload: tool %s is removed (%s is gone); %s, and a job of "
		 "it runs when a tool %s comes back%s",
		 t->id, t->cmd ? t->cmd->path : "its manifest", count, t->id,
		 runs);
}

int worker_reload(struct worker *w)
{
	struct reload rl = {.w = w, .old = w->tools, .nold = w->ntools};
	bool oom = false;

	if (w->ndirs == 0) {
		log_info("reload: no --tools folder to read again");
		return 0;
	}
	/* The C tools stay, and so do worker processes' (remote.c); a
	 * manifest cannot take their ids. */
	for (size_t i = 0; i < rl.nold && !oom; i++)
		if (!rl.old[i]->cmd)
			oom = worker__tools_insert(&rl.tools, &rl.ntools,
						   &rl.captools, rl.old[i]) != 0;
	for (size_t d = 0; d < w->ndirs && !oom; d++) {
		char **names, *why = NULL;
		size_t n;

		if (list_manifests(w->dirs[d], &names, &n, &why)) {
			log_warn("reload: %s; the tools of this folder keep "
				 "the definitions they had", why);
			free(why);
			rl.failed++;
			for (size_t i = 0; i < rl.nold; i++)
				if (rl.old[i]->cmd &&
				    in_dir(rl.old[i]->cmd->path, w->dirs[d]) &&
				    !in_new(&rl, rl.old[i]->id))
					keep_old(&rl, rl.old[i]);
			continue;
		}
		for (size_t i = 0; i < n; i++)
			load_one(&rl, names[i]);
		free_names(names, n);
	}
	if (oom) {
		log_error("reload: out of memory; the tools stay as they were");
		for (size_t i = 0; i < rl.ntools; i++)
			if (old_by_id(&rl, rl.tools[i]->id) != rl.tools[i])
				worker__tool_free(rl.tools[i]);
		free(rl.tools);
		return -ENOMEM;
	}

	/* What changed, by id. A definition new to the registry takes the
	 * old one's pause state and counts the runs of its id. */
	for (size_t i = 0; i < rl.ntools; i++) {
		struct worker_tool *t = rl.tools[i], *old = old_by_id(&rl, t->id);

		if (t == old)
			continue;
		t->refs = 1;
		t->running = runs_of(w, t->id);
		t->pause = old ? old->pause : WORKER__PAUSE_UNKNOWN;
		if (old && t->running) {
			rl.changed++;
			log_info("reload: tool %s is changed (%s); %d running "
				 "job%s finish%s under the definition %s "
				 "started with",
				 t->id, t->cmd->path, t->running,
				 t->running == 1 ? "" : "s",
				 t->running == 1 ? "es" : "",
				 t->running == 1 ? "it" : "they");
		} else if (old) {
			rl.changed++;
			log_info("reload: tool %s is changed (%s)", t->id,
				 t->cmd->path);
		} else {
			rl.added++;
			log_info("reload: tool %s is added (%s)%s", t->id,
				 t->cmd->path,
				 worker__tool_is_missing(w, t->id)
					 ? "; the jobs that waited for it "
					   "can run"
					 : "");
		}
	}
	for (size_t i = 0; i < rl.nold; i++)
		if (!in_new(&rl, rl.old[i]->id))
			report_removed(&rl, rl.old[i]);

	/* The swap. A definition that left the registry goes with its last
	 * run or operation. */
	w->tools = rl.tools;
	w->ntools = rl.ntools;
	w->captools = rl.captools;
	for (size_t i = 0; i < rl.nold; i++)
		if (in_new(&rl, rl.old[i]->id) != rl.old[i])
			worker__tool_unref(rl.old[i]);
	free(rl.old);
	for (size_t i = 0; i < rl.ntools; i++)
		worker__tool_present(w, rl.tools[i]->id);

	log_info("reloaded --tools: %d added, %d changed, %d removed, %d "
		 "unchanged, %d failed to load; %zu tool%s",
		 rl.added, rl.changed, rl.removed, rl.kept, rl.failed,
		 w->ntools, w->ntools == 1 ? "" : "s");
	/* A changed limit or a returned tool may let waiting jobs start. */
	w->backlog = true;
	worker__remote_wake(w, NULL);
	worker__sched_kick(w);
	worker__sched_rearm(w);
	return 0;
}

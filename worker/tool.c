/*
 * tool.c: the tool registry, the C form of createTool(). A tool is checked
 * completely when it is registered (its id, every schema, its examples), so
 * a mistake stops start-up with the tool and the field named instead of
 * failing a job later.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log/log.h"
#include "worker/internal.h"

static const char *const schema_names[WORKER__NSCHEMA] = {
	[WORKER_SCHEMA_INPUT] = "inputSchema",
	[WORKER_SCHEMA_OUTPUT] = "outputSchema",
	[WORKER_SCHEMA_SUSPEND] = "suspendSchema",
	[WORKER_SCHEMA_RESUME] = "resumeSchema",
	[WORKER_SCHEMA_REQUEST_CONTEXT] = "requestContextSchema",
};

const char *worker__schema_name(int kind)
{
	if (kind < 0 || kind >= WORKER__NSCHEMA)
		return "schema";
	return schema_names[kind];
}

char *worker__errmsg(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

static void set_err(char **errmsg, char *msg)
{
	if (errmsg)
		*errmsg = msg;
	else
		free(msg);
}

bool worker__valid_tool_name(const char *id)
{
	size_t n = 0;

	if (!id)
		return false;
	for (const char *p = id; *p; p++, n++) {
		char c = *p;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '_' || c == '-' ||
			  c == '.';
		if (!ok)
			return false;
	}
	return n >= 1 && n <= 128;
}

struct worker_tool *worker__tool_new(const char *id)
{
	struct worker_tool *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->id = strdup(id ? id : "");
	if (!t->id) {
		free(t);
		return NULL;
	}
	worker__policy_init(&t->policy);
	return t;
}

static void cmd_free(struct worker__cmd *c)
{
	if (!c)
		return;
	for (char **p = c->argv; p && *p; p++)
		free(*p);
	for (char **p = c->env; p && *p; p++)
		free(*p);
	free(c->argv);
	free(c->env);
	free(c->cwd);
	free(c->path);
	free(c);
}

void worker__tool_ref(struct worker_tool *t)
{
	if (t)
		t->refs++;
}

void worker__tool_unref(struct worker_tool *t)
{
	if (t && --t->refs <= 0)
		worker__tool_free(t);
}

void worker__tool_free(struct worker_tool *t)
{
	if (!t)
		return;
	json_decref(t->source);
	for (int i = 0; i < WORKER__NSCHEMA; i++) {
		json_decref(t->schema_doc[i]);
		schema_free(t->schema[i]);
	}
	json_decref(t->annotations);
	json_decref(t->meta);
	json_decref(t->input_examples);
	json_decref(t->provider_options);
	json_decref(t->transform);
	json_decref(t->definition);
	worker__policy_finish(&t->policy);
	cmd_free(t->cmd);
	free(t->id);
	free(t->title);
	free(t->description);
	free(t);
}

/* takes_objects is false for a schema that refuses every object: false,
 * or a "type" that names no "object". */
static bool takes_objects(const json_t *doc)
{
	const json_t *type = json_object_get(doc, "type"), *e;
	size_t i;

	if (json_is_false(doc))
		return false;
	if (json_is_string(type))
		return strcmp(json_string_value(type), "object") == 0;
	if (!json_is_array(type))
		return true;
	json_array_foreach(type, i, e)
		if (json_is_string(e) && strcmp(json_string_value(e), "object") == 0)
			return true;
	return false;
}


int worker__tool_set_schema(struct worker_tool *t, int kind, json_t *doc,
			    char **errmsg)
{
	char *why = NULL;
	struct schema *s;

	if (!doc)
		return 0;
	s = schema_compile(doc, NULL, NULL, &why);
	if (!s) {
		set_err(errmsg, worker__errmsg("tool %s: %s does not compile: %s",
					       t->id, worker__schema_name(kind),
					       why ? why : "out of memory"));
		free(why);
		json_decref(doc);
		return -EINVAL;
	}
	/* MCP's Tool requires inputSchema to be an object schema:
	 * {"type": "object", ...}. A client would refuse the whole
	 * tools/list otherwise, so such a tool is refused here, at
	 * registration; a tool's input is an object of named arguments
	 * anyway. An outputSchema of any type is accepted, as createTool
	 * accepts it: berth validates outputs against it as it is written,
	 * and MCP, whose structuredContent must be an object, gets such an
	 * output wrapped as {"result": ...} (docs/MCP.md). */
	if (kind == WORKER_SCHEMA_INPUT &&
	    !(json_is_object(doc) &&
	      json_is_string(json_object_get(doc, "type")) &&
	      strcmp(json_string_value(json_object_get(doc, "type")),
		     "object") == 0)) {
		set_err(errmsg, worker__errmsg("tool %s: %s must be a JSON "
					       "Schema with \"type\": "
					       "\"object\" (MCP requires it)",
					       t->id,
					       worker__schema_name(kind)));
		schema_free(s);
		json_decref(doc);
		return -EINVAL;
	}
	/* A request context is always an object ({} when absent): a
	 * schema that takes none (a type without "object", or false) would
	 * refuse every submission of the tool, for good. */
	if (kind == WORKER_SCHEMA_REQUEST_CONTEXT && !takes_objects(doc)) {
		set_err(errmsg, worker__errmsg("tool %s: %s must take an "
					       "object (a request context is "
					       "one): give it \"type\": "
					       "\"object\"",
					       t->id,
					       worker__schema_name(kind)));
		schema_free(s);
		json_decref(doc);
		return -EINVAL;
	}
	json_decref(t->schema_doc[kind]);
	schema_free(t->schema[kind]);
	t->schema_doc[kind] = doc;
	t->schema[kind] = s;
	return 0;
}

int worker__validate(const struct worker_tool *t, int kind,
		     const json_t *inst, json_t **errors)
{
	int rc;

	*errors = NULL;
	if (!t || !t->schema[kind])
		return 0;
	rc = schema_validate(t->schema[kind], inst ? inst : json_null(),
			     errors);
	if (rc == -ENOMEM) {
		*errors = json_pack("[{s:s, s:s, s:s}]", "instancePath", "",
				    "keyword", "", "message",
				    "out of memory while validating");
		return -EINVAL;
	}
	return rc;
}

json_t *worker__with_defaults(const struct worker_tool *t, int kind,
			      const json_t *inst)
{
	if (!inst)
		return NULL;
	if (!t || !t->schema[kind])
		return json_incref((json_t *)inst);
	return schema_apply_defaults(t->schema[kind], inst);
}

int worker__check(const struct worker_tool *t, int kind, const json_t *inst,
		  json_t **filled, json_t **errors)
{
	json_t *v;
	int rc;

	if (filled)
		*filled = NULL;
	*errors = NULL;
	if (!inst)
		inst = json_null();
	/* The common case, a schema without defaults, takes no copy and no
	 * reference on the way to the validator (submissions pass here). */
	if (!t || !t->schema[kind] || !schema_has_defaults(t->schema[kind])) {
		rc = worker__validate(t, kind, inst, errors);
		if (rc == 0 && filled)
			*filled = json_incref((json_t *)inst);
		return rc;
	}
	/* Filling has limits of its own (schema_fill_defaults), past which
	 * the value is refused with the error that says which. */
	rc = schema_fill_defaults(t->schema[kind], inst, &v, errors);
	if (rc == -ENOMEM) {
		*errors = json_pack("[{s:s, s:s, s:s}]", "instancePath", "",
				    "keyword", "", "message",
				    "out of memory while filling defaults");
		return -EINVAL;
	}
	if (rc)
		return rc;
	rc = worker__validate(t, kind, v, errors);
	if (rc == 0 && filled)
		*filled = v;
	else
		json_decref(v);
	return rc;
}

/* The annotations MCP's ToolAnnotations defines besides title. */
static const char *const mcp_hints[] = {
	"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint",
	NULL,
};

int worker__check_annotations(const char *id, const json_t *ann,
			      char **errmsg)
{
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)ann, key, v) {
		size_t n = strlen(key);
		bool known = strcmp(key, "title") == 0;

		for (const char *const *h = mcp_hints; *h && !known; h++)
			known = strcmp(*h, key) == 0;
		if (strcmp(key, "title") == 0 && !json_is_string(v)) {
			set_err(errmsg, worker__errmsg("tool %s: mcp.annotations."
						       "title must be a string",
						       id));
			return -EINVAL;
		}
		/* Every hint MCP defines is a boolean, and a client that
		 * checks types would refuse the whole tools/list over one
		 * that is not; a name MCP may add later is held to the
		 * same rule. */
		if (n > 4 && strcmp(key + n - 4, "Hint") == 0 &&
		    !json_is_boolean(v)) {
			set_err(errmsg, worker__errmsg("tool %s: mcp.annotations."
						       "%s must be true or "
						       "false",
						       id, key));
			return -EINVAL;
		}
		if (!known)
			log_warn("tool %s: mcp.annotations.%s is not an "
				 "annotation MCP defines (title, readOnlyHint, "
				 "destructiveHint, idempotentHint, "
				 "openWorldHint); it is listed as it is",
				 id, key);
	}
	return 0;
}

/* first_error returns the first error's "instancePath: message" (malloc'd)
 * for a registration message. */
static char *first_error(const json_t *errors)
{
	const json_t *e = json_array_get(errors, 0);
	const char *path = json_string_value(json_object_get(e, "instancePath"));
	const char *msg = json_string_value(json_object_get(e, "message"));

	return worker__errmsg("\"%s\": %s", path ? path : "",
			      msg ? msg : "invalid");
}

struct worker_tool *worker__tool_find(const struct worker *w, const char *name)
{
	size_t lo = 0, hi = w->ntools;

	if (!name)
		return NULL;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(w->tools[mid]->id, name);
		if (c == 0)
			return w->tools[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int worker__tool_check(const struct worker_tool *t, char **errmsg)
{
	if (!worker__valid_tool_name(t->id)) {
		set_err(errmsg,
			worker__errmsg("tool \"%s\": id is not a valid MCP tool "
				       "name (1 to 128 of A-Z a-z 0-9 _ - .)",
				       t->id));
		return -EINVAL;
	}
	if (t->bg.timeout_ms < 0 || t->bg.max_retries < 0 ||
	    t->bg.concurrency < 0 || t->bg.backoff_ms < 0 ||
	    t->bg.backoff_max_ms < 0) {
		set_err(errmsg, worker__errmsg("tool %s: background holds a "
					       "negative number", t->id));
		return -EINVAL;
	}
	/* A policy says who may decide; a tool that never asks has nobody
	 * to decide, and its policy is a mistake (a forgotten
	 * requireApproval) that would otherwise go unnoticed. */
	if (t->policy.declared && !t->require_approval &&
	    !(t->c && t->c->require_approval_fn)) {
		set_err(errmsg, worker__errmsg("tool %s: approvalPolicy is "
					       "given, but the tool requires "
					       "no approval (requireApproval)",
					       t->id));
		return -EINVAL;
	}
	if (t->input_examples) {
		size_t i;
		json_t *ex;

		if (!json_is_array(t->input_examples)) {
			set_err(errmsg, worker__errmsg("tool %s: inputExamples "
						       "is not an array",
						       t->id));
			return -EINVAL;
		}
		json_array_foreach(t->input_examples, i, ex) {
			json_t *in = json_object_get(ex, "input");
			json_t *errors = NULL;
			char *why;

			if (!json_is_object(ex) || !in) {
				set_err(errmsg,
					worker__errmsg("tool %s: inputExamples"
						       "[%zu] has no \"input\"",
						       t->id, i));
				return -EINVAL;
			}
			/* Filled first, as a submission is. */
			if (worker__check(t, WORKER_SCHEMA_INPUT, in, NULL,
					  &errors) == 0)
				continue;
			why = first_error(errors);
			json_decref(errors);
			set_err(errmsg,
				worker__errmsg("tool %s: inputExamples[%zu] "
					       "fails inputSchema at %s",
					       t->id, i, why ? why : "?"));
			free(why);
			return -EINVAL;
		}
	}
	return 0;
}

int worker__tools_insert(struct worker_tool ***tools, size_t *n,
			 size_t *cap, struct worker_tool *t)
{
	size_t at;

	for (at = 0; at < *n && strcmp((*tools)[at]->id, t->id) < 0; at++)
		;
	if (at < *n && strcmp((*tools)[at]->id, t->id) == 0)
		return -EEXIST;
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 16;
		struct worker_tool **p = realloc(*tools, c * sizeof(*p));

		if (!p)
			return -ENOMEM;
		*tools = p;
		*cap = c;
	}
	memmove(&(*tools)[at + 1], &(*tools)[at],
		(*n - at) * sizeof((*tools)[0]));
	(*tools)[at] = t;
	(*n)++;
	return 0;
}

int worker__tool_register(struct worker *w, struct worker_tool *t,
			  char **errmsg)
{
	int rc = worker__tool_check(t, errmsg);

	if (rc)
		return rc;
	rc = worker__tools_insert(&w->tools, &w->ntools, &w->captools, t);
	if (rc == -EEXIST)
		set_err(errmsg, worker__errmsg("tool %s: id is already "
					       "registered", t->id));
	else if (rc)
		set_err(errmsg, worker__errmsg("tool %s: out of memory",
					       t->id));
	if (rc)
		return rc == -EEXIST ? -EINVAL : rc;
	t->refs = 1; /* the registry's */
	worker__tool_present(w, t->id);
	return 0;
}

/* parse_field parses a JSON text field of a C tool into *out (new), or
 * fails naming the field. want is 'o' for an object, 'a' an array, 's' a
 * schema (object or boolean). */
static int parse_field(const char *id, const char *field, const char *text,
		       int want, json_t **out, char **errmsg)
{
	json_error_t jerr;
	json_t *v;
	bool ok;

	*out = NULL;
	if (!text)
		return 0;
	v = json_loads(text, JSON_DECODE_ANY, &jerr);
	if (!v) {
		set_err(errmsg, worker__errmsg("tool %s: %s is not JSON (line "
					       "%d, column %d: %s)",
					       id, field, jerr.line,
					       jerr.column, jerr.text));
		return -EINVAL;
	}
	ok = want == 'o'   ? json_is_object(v)
	     : want == 'a' ? json_is_array(v)
			   : json_is_object(v) || json_is_boolean(v);
	if (!ok) {
		json_decref(v);
		set_err(errmsg, worker__errmsg("tool %s: %s is not a JSON %s",
					       id, field,
					       want == 'a'   ? "array"
					       : want == 'o' ? "object"
							     : "schema (an "
							       "object or a "
							       "boolean)"));
		return -EINVAL;
	}
	*out = v;
	return 0;
}

int worker_add_tool(struct worker *w, const struct berth_tool *tool,
		    char **errmsg)
{
	const char *texts[WORKER__NSCHEMA];
	struct worker_tool *t;
	json_t *v;
	int rc;

	if (errmsg)
		*errmsg = NULL;
	if (!tool || !tool->id) {
		set_err(errmsg, worker__errmsg("a tool has no id"));
		return -EINVAL;
	}
	if (!tool->execute) {
		set_err(errmsg, worker__errmsg("tool %s: execute is missing",
					       tool->id));
		return -EINVAL;
	}
	t = worker__tool_new(tool->id);
	if (!t)
		return -ENOMEM;
	t->c = tool;
	t->strict = tool->strict;
	t->require_approval = tool->require_approval;
	t->bg = tool->background;
	if ((tool->title && !(t->title = strdup(tool->title))) ||
	    (tool->description && !(t->description = strdup(tool->description)))) {
		rc = -ENOMEM;
		goto fail;
	}
	texts[WORKER_SCHEMA_INPUT] = tool->input_schema;
	texts[WORKER_SCHEMA_OUTPUT] = tool->output_schema;
	texts[WORKER_SCHEMA_SUSPEND] = tool->suspend_schema;
	texts[WORKER_SCHEMA_RESUME] = tool->resume_schema;
	texts[WORKER_SCHEMA_REQUEST_CONTEXT] = tool->request_context_schema;
	for (int k = 0; k < WORKER__NSCHEMA; k++) {
		rc = parse_field(t->id, worker__schema_name(k), texts[k], 's',
				 &v, errmsg);
		if (rc == 0)
			rc = worker__tool_set_schema(t, k, v, errmsg);
		if (rc)
			goto fail;
	}
	if ((rc = parse_field(t->id, "approvalPolicy", tool->approval_policy,
			      'o', &v, errmsg)))
		goto fail;
	if (v) {
		char *where = worker__errmsg("tool %s", t->id);

		rc = where ? worker__policy_parse(&t->policy, v, where, errmsg)
			   : -ENOMEM;
		free(where);
		json_decref(v);
		if (rc)
			goto fail;
	}
	if ((rc = parse_field(t->id, "mcp.annotations", tool->mcp_annotations,
			      'o', &t->annotations, errmsg)) ||
	    (rc = parse_field(t->id, "mcp._meta", tool->mcp_meta, 'o',
			      &t->meta, errmsg)) ||
	    (rc = parse_field(t->id, "inputExamples", tool->input_examples,
			      'a', &t->input_examples, errmsg)) ||
	    (rc = parse_field(t->id, "providerOptions", tool->provider_options,
			      'o', &t->provider_options, errmsg)))
		goto fail;
	if (t->annotations &&
	    (rc = worker__check_annotations(t->id, t->annotations, errmsg)))
		goto fail;
	rc = worker__tool_register(w, t, errmsg);
	if (rc)
		goto fail;
	return 0;
fail:
	worker__tool_free(t);
	return rc;
}

size_t worker_tool_count(const struct worker *w)
{
	return w->ntools;
}

const struct worker_tool *worker_tool_at(const struct worker *w, size_t i)
{
	return i < w->ntools ? w->tools[i] : NULL;
}

const struct worker_tool *worker_tool_find(const struct worker *w,
					   const char *name)
{
	return worker__tool_find(w, name);
}

const char *worker_tool_name(const struct worker_tool *t)
{
	return t->id;
}

const json_t *worker_tool_schema(const struct worker_tool *t, int kind)
{
	if (!t || kind < 0 || kind >= WORKER__NSCHEMA)
		return NULL;
	return t->schema_doc[kind];
}

/* set_copy sets key of o to a copy of v when v is not NULL. */
static void set_copy(json_t *o, const char *key, json_t *v)
{
	if (v)
		json_object_set_new(o, key, json_deep_copy(v));
}

json_t *worker_tool_to_json(struct worker *w, const struct worker_tool *t)
{
	const char *title = t->title;
	json_t *o = json_object();
	json_t *bg, *ann;
	int64_t backoff, backoff_max;
	int paused;

	if (!o)
		return NULL;
	if (!title && t->annotations)
		title = json_string_value(json_object_get(t->annotations,
							  "title"));
	json_object_set_new(o, "name", json_string(t->id));
	if (title)
		json_object_set_new(o, "title", json_string(title));
	if (t->description)
		json_object_set_new(o, "description",
				    json_string(t->description));
	/* MCP requires an inputSchema of type object; a tool without one
	 * takes any object. */
	if (t->schema_doc[WORKER_SCHEMA_INPUT])
		set_copy(o, "inputSchema", t->schema_doc[WORKER_SCHEMA_INPUT]);
	else
		json_object_set_new(o, "inputSchema",
				    json_pack("{s:s}", "type", "object"));
	set_copy(o, "outputSchema", t->schema_doc[WORKER_SCHEMA_OUTPUT]);
	/* The hints a tool leaves out are listed with MCP's defaults, so a
	 * client sees what MCP assumes rather than guessing. */
	ann = json_pack("{s:b, s:b, s:b, s:b}", "readOnlyHint", 0,
			"destructiveHint", 1, "idempotentHint", 0,
			"openWorldHint", 1);
	if (ann && t->annotations)
		json_object_update(ann, t->annotations);
	json_object_set_new(o, "annotations", ann);
	set_copy(o, "_meta", t->meta);
	json_object_set_new(o, "execution",
			    json_pack("{s:s}", "taskSupport",
				      t->bg.disabled ? "forbidden"
						     : "optional"));
	set_copy(o, "suspendSchema", t->schema_doc[WORKER_SCHEMA_SUSPEND]);
	set_copy(o, "resumeSchema", t->schema_doc[WORKER_SCHEMA_RESUME]);
	set_copy(o, "requestContextSchema",
		 t->schema_doc[WORKER_SCHEMA_REQUEST_CONTEXT]);
	/* A policy function may or may not ask; clients are told that
	 * approval can be required. */
	json_object_set_new(o, "requireApproval",
			    json_boolean(t->require_approval ||
					 (t->c && t->c->require_approval_fn) ||
					 (t->fns & WORKER__FN_APPROVAL)));
	/* Who may decide, as it takes effect (docs/TOOLS.md); only for a
	 * tool that asks. */
	if (t->require_approval || (t->c && t->c->require_approval_fn) ||
	    (t->fns & WORKER__FN_APPROVAL))
		json_object_set_new(o, "approvalPolicy",
				    worker__policy_to_json(&t->policy, w));
	/* Every setting, as it takes effect (a default filled in), so that
	 * a client sees how a job of the tool will be run. */
	backoff = t->bg.backoff_ms > 0 ? t->bg.backoff_ms : WORKER__BACKOFF_MS;
	backoff_max = t->bg.backoff_max_ms > 0 ? t->bg.backoff_max_ms
					       : WORKER__BACKOFF_MAX_MS;
	if (backoff_max < backoff)
		backoff_max = backoff;
	bg = json_pack("{s:b, s:I, s:i, s:i, s:I, s:I, s:s}", "enabled",
		       !t->bg.disabled, "timeoutMs",
		       (json_int_t)(t->bg.timeout_ms > 0
					    ? t->bg.timeout_ms
					    : w->cfg.default_timeout_ms),
		       "maxRetries", t->bg.max_retries, "concurrency",
		       t->bg.concurrency, "backoffMs", (json_int_t)backoff,
		       "backoffMaxMs", (json_int_t)backoff_max, "onInterrupt",
		       t->bg.on_interrupt == BERTH_INTERRUPT_FAIL ? "fail"
								  : "retry");
	json_object_set_new(o, "background", bg);
	set_copy(o, "inputExamples", t->input_examples);
	json_object_set_new(o, "strict", json_boolean(t->strict));
	set_copy(o, "providerOptions", t->provider_options);
	paused = store_tool_paused(w->st, t->id);
	json_object_set_new(o, "paused", json_boolean(paused == 1));
	/* How the tool runs: linked in (C), a command per run (a
	 * manifest), or by the worker processes connected now
	 * (docs/WORKERS.md), with their runs at once summed. */
	json_object_set_new(o, "kind",
			    json_string(t->c     ? "c"
					: t->cmd ? "external"
						 : "worker"));
	if (t->definition)
		json_object_set_new(o, "workers",
				    json_pack("{s:i, s:i}", "connected",
					      t->serving, "capacity",
					      t->capacity));
	return o;
}

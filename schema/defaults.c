/*
 * defaults: fills in the "default"s of a schema, the way a Zod schema's
 * parse does (a property with .default() is present in what parse returns)
 * and Ajv's useDefaults option does for plain JSON Schema. berth gives a
 * tool's execute its input with them filled in, so that a tool ported from
 * Zod sees what it saw there.
 *
 * Where a default is taken from, and why only there:
 *
 *   - "properties": a property that is absent gets its subschema's
 *     "default" (a deep copy), then is filled in itself, so that a default
 *     object gets the defaults of its own properties (Ajv does the same;
 *     Zod 4 requires such a default to be complete anyway). A property
 *     whose subschema is a "$ref" takes the default of what it refers to
 *     when it has none of its own. A property that is present, even as
 *     null, keeps its value: Zod fills in only what is undefined.
 *   - "prefixItems" (and draft-07's array "items"): the missing places at
 *     the end of a shorter array, in order, while each has a default; an
 *     array has no holes, so the first place without one stops it.
 *   - Into the values that are there: "properties", "patternProperties"
 *     and "additionalProperties" for the members of an object (Zod's
 *     records are "additionalProperties"), "prefixItems" and "items" for
 *     the elements of an array, each with the subschemas that apply to
 *     that member as the validator applies them.
 *   - At the same place: "$ref" and every "allOf" branch, since all of
 *     them apply to the instance whatever it is.
 *   - "anyOf" and "oneOf" only when they are unambiguous: exactly one
 *     branch accepts the instance once that branch's defaults are filled
 *     in (a nullable object is {"anyOf": [{...}, {"type": "null"}]}; an
 *     object matches one branch only). When several branches would, none
 *     is used, because which defaults the instance should get is not
 *     decided by the schema.
 *
 * Never followed: "not", "if"/"then"/"else" and "dependentSchemas"
 * (whether they apply depends on the instance, which filling changes),
 * "contains", "propertyNames", "unevaluatedItems" and
 * "unevaluatedProperties" (they do not say what a member is), and
 * "$dynamicRef" (its target depends on the dynamic scope of a
 * validation). A "default" at the root is not used: the callers always
 * have an instance (an absent input or request context is {}).
 *
 * A schema without any default where these rules look pays nothing: the
 * nodes that can fill something are marked once, at compile time
 * (schema__mark_defaults), and schema_apply_defaults of an unmarked root
 * returns the instance itself.
 *
 * Filling is bounded three ways.  Depth: like validation, by max_depth.
 * Size: one filling inserts at most SCHEMA_MAX_DEFAULT_VALUES values in
 * all, counting every value inside a default and every copy, kept or not,
 * since a default that holds a "$ref" back to its own schema would
 * otherwise grow a tree as deep as max_depth and as wide as two to that
 * power ({"properties": {"a": {"$ref": "#", "default": {}}, "b": ...}}).
 * Time: one budget of SCHEMA_MAX_STEPS (struct schema__run) pays for the
 * nodes filled, the values inserted and copied, and the validations that
 * choose an "anyOf" or "oneOf" branch, which draw on it rather than start
 * their own.  Past any of them filling fails with an error that names the
 * place and the limit.
 */
#include "schema/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How many "$ref"s default_of follows from a property to find a default. */
#define REF_HOPS 32

/* What copying a value costs in steps (struct schema__run): an allocation,
 * and a hash insertion for a member, take about as long as evaluating four
 * subschemas. */
#define COPY_STEPS 4

/* default_of returns the "default" of a property's subschema n (borrowed),
 * from n itself or along its "$ref"s, or NULL; *from (when from is not
 * NULL) is the node that holds it. */
static const json_t *default_of(const struct schema__node *n,
				const struct schema__node **from)
{
	for (int hops = 0; n && hops < REF_HOPS; hops++, n = n->ref) {
		const json_t *d;

		if (n->is_bool)
			return NULL;
		if ((d = json_object_get(n->json, "default"))) {
			if (from)
				*from = n;
			return d;
		}
	}
	return NULL;
}

/* own_defaults tells whether n itself declares a default it would fill in:
 * one of a property, or of a place of "prefixItems". */
static bool own_defaults(const struct schema__node *n)
{
	for (size_t i = 0; i < n->nproperties; i++)
		if (default_of(n->properties[i].node, NULL))
			return true;
	for (size_t i = 0; i < n->nprefix_items; i++)
		if (default_of(n->prefix_items[i], NULL))
			return true;
	return false;
}

static bool marked(const struct schema__node *n)
{
	return n && n->has_defaults;
}

/* child_marked tells whether filling can reach a default through one of
 * the keywords of n that schema_apply_defaults follows. */
static bool child_marked(const struct schema__node *n)
{
	if (marked(n->ref) || marked(n->additional_properties) ||
	    marked(n->items))
		return true;
	for (size_t i = 0; i < n->nall_of; i++)
		if (marked(n->all_of[i]))
			return true;
	for (size_t i = 0; i < n->nany_of; i++)
		if (marked(n->any_of[i]))
			return true;
	for (size_t i = 0; i < n->none_of; i++)
		if (marked(n->one_of[i]))
			return true;
	for (size_t i = 0; i < n->nproperties; i++)
		if (marked(n->properties[i].node))
			return true;
	for (size_t i = 0; i < n->npattern_props; i++)
		if (marked(n->pattern_props[i].node))
			return true;
	for (size_t i = 0; i < n->nprefix_items; i++)
		if (marked(n->prefix_items[i]))
			return true;
	return false;
}

void schema__mark_defaults(struct schema *s)
{
	bool changed = true;

	for (struct schema__node *n = s->nodes; n; n = n->next)
		n->has_defaults = !n->is_bool && own_defaults(n);
	/* A mark spreads from a node to those that reach it; references may
	 * form cycles, so this runs until nothing changes (each pass marks
	 * at least one more node, so at most one pass per node). */
	while (changed) {
		changed = false;
		for (struct schema__node *n = s->nodes; n; n = n->next)
			if (!n->has_defaults && !n->is_bool && child_marked(n)) {
				n->has_defaults = true;
				changed = true;
			}
	}
}

bool schema_has_defaults(const struct schema *s)
{
	return s && marked(s->root);
}

/* ---- Filling ---- */

struct fctx {
	const struct schema *s;
	struct schema__run run;
	long long values; /* how many more may be inserted */
	int depth;
	bool oom;
};

static void fill(struct fctx *c, const struct schema__node *n, json_t *inst,
		 const struct schema__ipath *path);

static bool done(const struct fctx *c)
{
	return c->oom || c->run.stopped;
}

__attribute__((format(printf, 5, 6)))
static void stop(struct fctx *c, const struct schema__ipath *path,
		 const char *loc, const char *kw, const char *fmt, ...)
{
	char msg[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!schema__run_stop(&c->run, path, loc, kw, "%s", msg))
		c->oom = true;
}

static void out_of_steps(struct fctx *c, const struct schema__ipath *path,
			 const struct schema__node *n)
{
	stop(c, path, n->loc, "", "the schema takes too long to fill in the "
	     "defaults of this value: more than %d steps (stopped at %s)",
	     SCHEMA_MAX_STEPS, n->loc);
}

/* size_of returns what inserting or copying j costs, in values: one for
 * each value in it, and one more for every 64 bytes of a string; it stops
 * counting once past cap. */
static long long size_of(const json_t *j, long long cap)
{
	long long n = 1;
	const char *key;
	json_t *v;
	size_t i;

	switch (json_typeof(j)) {
	case JSON_STRING:
		return n + (long long)(json_string_length(j) / 64);
	case JSON_OBJECT:
		json_object_foreach((json_t *)j, key, v)
			if ((n += size_of(v, cap - n)) > cap)
				break;
		return n;
	case JSON_ARRAY:
		json_array_foreach(j, i, v)
			if ((n += size_of(v, cap - n)) > cap)
				break;
		return n;
	default:
		return n;
	}
}

/* insert returns a deep copy of the default d, held by node from, after
 * counting it against the limits; NULL when a limit or memory stopped the
 * filling.  The limit is on the value as a whole, so its error is at the
 * instance's root ("") rather than wherever the last default would have
 * gone (in a runaway fill, hundreds of levels down). */
static json_t *insert(struct fctx *c, const json_t *d,
		      const struct schema__node *from)
{
	long long size = size_of(d, c->values);
	json_t *v;

	if (size > c->values) {
		stop(c, NULL, from->loc, "default", "cannot fill in defaults: they "
		     "would insert more than %d values (the limit), the last "
		     "from the \"default\" at %s", SCHEMA_MAX_DEFAULT_VALUES,
		     from->loc);
		return NULL;
	}
	c->values -= size;
	c->run.steps -= size * COPY_STEPS;
	v = json_deep_copy(d);
	if (!v)
		c->oom = true;
	return v;
}

/* branch_fill fills a copy of inst with branch b's defaults; returns the
 * copy (new) when b accepts it, else NULL. */
static json_t *branch_fill(struct fctx *c, const struct schema__node *b,
			   const json_t *inst, const struct schema__ipath *path)
{
	json_t *copy;
	int rc;

	c->run.steps -= COPY_STEPS * size_of(inst, c->run.steps > 0 ?
					     c->run.steps / COPY_STEPS : 0);
	if (c->run.steps < 0) {
		out_of_steps(c, path, b);
		return NULL;
	}
	copy = json_deep_copy(inst);
	if (!copy) {
		c->oom = true;
		return NULL;
	}
	fill(c, b, copy, path);
	rc = done(c) ? 0 : schema__valid_node(&c->run, c->s, b, copy, path);
	if (rc == 1)
		return copy;
	if (rc == -ENOMEM)
		c->oom = true;
	json_decref(copy);
	return NULL;
}

/* replace_contents makes container inst hold what filled holds: filling
 * only adds members and elements, so an update (object) or a refill
 * (array) gives inst the filled value in place, where its parent holds
 * it. */
static void replace_contents(struct fctx *c, json_t *inst, json_t *filled)
{
	int rc = 0;

	if (json_is_object(inst)) {
		rc = json_object_update(inst, filled);
	} else if (json_is_array(inst)) {
		rc = json_array_clear(inst);
		if (!rc)
			rc = json_array_extend(inst, filled);
	}
	if (rc)
		c->oom = true;
}

/* one_branch fills inst from the one branch of an "anyOf" or "oneOf"
 * that accepts it, when exactly one does (the file's comment). */
static void one_branch(struct fctx *c, struct schema__node *const *branches,
		       size_t n, json_t *inst, const struct schema__ipath *path)
{
	json_t *chosen = NULL;
	size_t accepting = 0;

	for (size_t i = 0; i < n && !done(c) && accepting < 2; i++) {
		json_t *r;

		/* A branch without defaults changes nothing, but it may still
		 * accept the instance and so make the choice ambiguous. */
		if (!branches[i]->has_defaults) {
			int rc = schema__valid_node(&c->run, c->s, branches[i], inst,
						    path);

			if (rc == -ENOMEM)
				c->oom = true;
			accepting += rc == 1;
			continue;
		}
		r = branch_fill(c, branches[i], inst, path);
		if (!r)
			continue;
		accepting++;
		if (!chosen)
			chosen = r;
		else
			json_decref(r);
	}
	if (accepting == 1 && chosen && !done(c))
		replace_contents(c, inst, chosen);
	json_decref(chosen);
}

static void fill_object(struct fctx *c, const struct schema__node *n,
			json_t *inst, const struct schema__ipath *path)
{
	const char *key;
	json_t *val;

	for (size_t i = 0; i < n->nproperties && !done(c); i++) {
		const struct schema__prop *p = &n->properties[i];
		struct schema__ipath cp = { path, p->name, 0 };
		json_t *v = json_object_get(inst, p->name);

		if (!v) {
			const struct schema__node *from;
			const json_t *d = default_of(p->node, &from);

			if (!d)
				continue;
			v = insert(c, d, from);
			if (!v)
				return;
			if (json_object_set_new(inst, p->name, v)) {
				c->oom = true;
				return;
			}
		}
		fill(c, p->node, v, &cp);
	}
	if (!n->npattern_props && !marked(n->additional_properties))
		return;
	/* Filling changes members' values, never the set of members, so the
	 * iteration is safe. */
	json_object_foreach(inst, key, val) {
		struct schema__ipath cp = { path, key, 0 };
		bool matched = n->prop_index && json_object_get(n->prop_index, key);

		if (done(c))
			return;
		c->run.steps--;
		for (size_t i = 0; i < n->npattern_props && !done(c); i++) {
			const struct schema__pattern *p = &n->pattern_props[i];

			switch (schema__regex_match(&c->run, p->re, key, strlen(key))) {
			case SCHEMA__RE_MATCH:
				matched = true;
				fill(c, p->node, val, &cp);
				break;
			case SCHEMA__RE_NO_MATCH:
				break;
			case SCHEMA__RE_OUT_OF_STEPS:
				out_of_steps(c, &cp, n);
				break;
			case SCHEMA__RE_NOMEM:
				c->oom = true;
				break;
			default:
				stop(c, &cp, n->loc, "patternProperties", "cannot check "
				     "pattern \"%s\": the regular expression needs too "
				     "much backtracking for this property name", p->source);
				break;
			}
		}
		if (!matched && n->additional_properties)
			fill(c, n->additional_properties, val, &cp);
	}
}

static void fill_array(struct fctx *c, const struct schema__node *n,
		       json_t *inst, const struct schema__ipath *path)
{
	size_t size = json_array_size(inst);

	for (size_t i = 0; i < n->nprefix_items && !done(c); i++) {
		struct schema__ipath cp = { path, NULL, i };
		json_t *v = json_array_get(inst, i);

		if (!v) {
			const struct schema__node *from;
			const json_t *d = default_of(n->prefix_items[i], &from);

			if (!d)
				return;
			v = insert(c, d, from);
			if (!v)
				return;
			if (json_array_append_new(inst, v)) {
				c->oom = true;
				return;
			}
		}
		fill(c, n->prefix_items[i], v, &cp);
	}
	if (!marked(n->items))
		return;
	for (size_t i = n->nprefix_items; i < size && !done(c); i++) {
		struct schema__ipath cp = { path, NULL, i };

		fill(c, n->items, json_array_get(inst, i), &cp);
	}
}

static void fill(struct fctx *c, const struct schema__node *n, json_t *inst,
		 const struct schema__ipath *path)
{
	/* Only a container can receive a default. */
	if (!n || !n->has_defaults || done(c) ||
	    !(json_is_object(inst) || json_is_array(inst)))
		return;
	if (--c->run.steps < 0) {
		out_of_steps(c, path, n);
		return;
	}
	/* Bounded like validation: a schema recursive through "properties"
	 * follows the instance, whose depth the api already caps. */
	if (c->depth >= c->s->max_depth)
		return;
	c->depth++;
	fill(c, n->ref, inst, path);
	for (size_t i = 0; i < n->nall_of; i++)
		fill(c, n->all_of[i], inst, path);
	if (json_is_object(inst))
		fill_object(c, n, inst, path);
	else
		fill_array(c, n, inst, path);
	if (n->nany_of)
		one_branch(c, n->any_of, n->nany_of, inst, path);
	if (n->none_of)
		one_branch(c, n->one_of, n->none_of, inst, path);
	c->depth--;
}

int schema_fill_defaults(const struct schema *s, const json_t *instance,
			 json_t **filled, json_t **errors)
{
	struct fctx c = { .s = s, .run = SCHEMA__RUN_INIT,
			  .values = SCHEMA_MAX_DEFAULT_VALUES };
	json_t *copy;
	int rc = 0;

	*filled = NULL;
	if (errors)
		*errors = NULL;
	if (!instance)
		return -EINVAL;
	if (!schema_has_defaults(s) ||
	    !(json_is_object(instance) || json_is_array(instance))) {
		*filled = json_incref((json_t *)instance);
		return 0;
	}
	copy = json_deep_copy(instance);
	if (!copy)
		return -ENOMEM;
	fill(&c, s->root, copy, NULL);
	if (c.oom) {
		rc = -ENOMEM;
	} else if (c.run.stopped) {
		rc = -EINVAL;
		if (errors && !(*errors = json_array()))
			rc = -ENOMEM;
		else if (errors && json_array_append(*errors, c.run.stop))
			rc = -ENOMEM;
	}
	schema__run_finish(&c.run);
	if (rc) {
		if (errors && rc == -ENOMEM) {
			json_decref(*errors);
			*errors = NULL;
		}
		json_decref(copy);
		return rc;
	}
	*filled = copy;
	return 0;
}

json_t *schema_apply_defaults(const struct schema *s, const json_t *instance)
{
	json_t *filled;

	schema_fill_defaults(s, instance, &filled, NULL);
	return filled;
}

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
 */
#include "schema/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* How many "$ref"s default_of follows from a property to find a default. */
#define REF_HOPS 32

/* default_of returns the "default" of a property's subschema n (borrowed),
 * from n itself or along its "$ref"s, or NULL. */
static const json_t *default_of(const struct schema__node *n)
{
	for (int hops = 0; n && hops < REF_HOPS; hops++, n = n->ref) {
		const json_t *d;

		if (n->is_bool)
			return NULL;
		if ((d = json_object_get(n->json, "default")))
			return d;
	}
	return NULL;
}

/* own_defaults tells whether n itself declares a default it would fill in:
 * one of a property, or of a place of "prefixItems". */
static bool own_defaults(const struct schema__node *n)
{
	for (size_t i = 0; i < n->nproperties; i++)
		if (default_of(n->properties[i].node))
			return true;
	for (size_t i = 0; i < n->nprefix_items; i++)
		if (default_of(n->prefix_items[i]))
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
	int depth;
	bool oom;
};

static void fill(struct fctx *c, const struct schema__node *n, json_t *inst);

/* branch_fill fills a copy of inst with branch b's defaults; returns the
 * copy (new) when b accepts it, else NULL. */
static json_t *branch_fill(struct fctx *c, const struct schema__node *b,
			   const json_t *inst)
{
	json_t *copy = json_deep_copy(inst);

	if (!copy) {
		c->oom = true;
		return NULL;
	}
	fill(c, b, copy);
	if (!c->oom && schema__valid_node(c->s, b, copy))
		return copy;
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
		       size_t n, json_t *inst)
{
	json_t *chosen = NULL;
	size_t accepting = 0;

	for (size_t i = 0; i < n && !c->oom && accepting < 2; i++) {
		json_t *r;

		/* A branch without defaults changes nothing, but it may still
		 * accept the instance and so make the choice ambiguous. */
		if (!branches[i]->has_defaults) {
			if (schema__valid_node(c->s, branches[i], inst))
				accepting++;
			continue;
		}
		r = branch_fill(c, branches[i], inst);
		if (!r)
			continue;
		accepting++;
		if (!chosen)
			chosen = r;
		else
			json_decref(r);
	}
	if (accepting == 1 && chosen)
		replace_contents(c, inst, chosen);
	json_decref(chosen);
}

static void fill_object(struct fctx *c, const struct schema__node *n,
			json_t *inst)
{
	const char *key;
	json_t *val;

	for (size_t i = 0; i < n->nproperties && !c->oom; i++) {
		const struct schema__prop *p = &n->properties[i];
		json_t *v = json_object_get(inst, p->name);

		if (!v) {
			const json_t *d = default_of(p->node);

			if (!d)
				continue;
			v = json_deep_copy(d);
			if (!v || json_object_set_new(inst, p->name, v)) {
				c->oom = true;
				return;
			}
		}
		fill(c, p->node, v);
	}
	if (!n->npattern_props && !marked(n->additional_properties))
		return;
	/* Filling changes members' values, never the set of members, so the
	 * iteration is safe. */
	json_object_foreach(inst, key, val) {
		bool matched = n->prop_index && json_object_get(n->prop_index, key);

		if (c->oom)
			return;
		for (size_t i = 0; i < n->npattern_props; i++) {
			const struct schema__pattern *p = &n->pattern_props[i];

			if (schema__regex_match(c->s, p->re, key, strlen(key)) == 1) {
				matched = true;
				fill(c, p->node, val);
			}
		}
		if (!matched && n->additional_properties)
			fill(c, n->additional_properties, val);
	}
}

static void fill_array(struct fctx *c, const struct schema__node *n,
		       json_t *inst)
{
	size_t size = json_array_size(inst);

	for (size_t i = 0; i < n->nprefix_items && !c->oom; i++) {
		json_t *v = json_array_get(inst, i);

		if (!v) {
			const json_t *d = default_of(n->prefix_items[i]);

			if (!d)
				return;
			v = json_deep_copy(d);
			if (!v || json_array_append_new(inst, v)) {
				c->oom = true;
				return;
			}
		}
		fill(c, n->prefix_items[i], v);
	}
	if (!marked(n->items))
		return;
	for (size_t i = n->nprefix_items; i < size && !c->oom; i++)
		fill(c, n->items, json_array_get(inst, i));
}

static void fill(struct fctx *c, const struct schema__node *n, json_t *inst)
{
	/* Only a container can receive a default. */
	if (!n || !n->has_defaults || c->oom ||
	    !(json_is_object(inst) || json_is_array(inst)))
		return;
	/* Bounded like validation: a schema recursive through "properties"
	 * follows the instance, whose depth the api already caps. */
	if (c->depth >= c->s->max_depth)
		return;
	c->depth++;
	fill(c, n->ref, inst);
	for (size_t i = 0; i < n->nall_of; i++)
		fill(c, n->all_of[i], inst);
	if (json_is_object(inst))
		fill_object(c, n, inst);
	else
		fill_array(c, n, inst);
	if (n->nany_of)
		one_branch(c, n->any_of, n->nany_of, inst);
	if (n->none_of)
		one_branch(c, n->one_of, n->none_of, inst);
	c->depth--;
}

json_t *schema_apply_defaults(const struct schema *s, const json_t *instance)
{
	struct fctx c = {.s = s};
	json_t *copy;

	if (!instance)
		return NULL;
	if (!schema_has_defaults(s) ||
	    !(json_is_object(instance) || json_is_array(instance)))
		return json_incref((json_t *)instance);
	copy = json_deep_copy(instance);
	if (!copy)
		return NULL;
	fill(&c, s->root, copy);
	if (c.oom) {
		json_decref(copy);
		return NULL;
	}
	return copy;
}

/*
 * compile: turns a schema document into the tree of struct schema__node that
 * validate.c walks, and owns the registry of remote documents.
 *
 * Compilation has two passes.  The first (index) walks every document that a
 * reference could reach (the schema itself, the registry's documents and,
 * when asked for, the built-in meta-schemas) through the keywords that hold
 * subschemas, and records for each subschema its base URI, its resource, its
 * location and its dialect; "$id", "$anchor" and "$dynamicAnchor" are entered
 * in a table by absolute URI.  Values of "enum", "const" and unknown keywords
 * are never walked, so an "$id" inside them is just data.  The second pass
 * (compile) starts at the root and compiles only what is reachable from it,
 * each subschema once: a reference is resolved through the table to a
 * subschema, whose node is made (or found) and linked, so reference cycles
 * become cycles of pointers rather than infinite recursion.  Finally a check
 * refuses cycles that would make evaluation recurse at the same instance
 * location forever ("$defs": {"a": {"$ref": "#/$defs/a"}}), wherever they
 * are: at the root, or below a "properties" where only some instances
 * reach them.
 */
#include "schema/internal.h"
#include "schema/uri.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum dialect { DRAFT7 = 7, DRAFT2020 = 2020 };

struct schema_registry {
	json_t *docs; /* absolute URI -> the registry's own copy */
};

/* What the index pass learned about one subschema. */
struct info {
	const json_t *json;
	char *base;
	char *loc;
	struct schema__resource *res;
	int dialect;
	bool validation; /* the validation vocabulary is on */
	struct schema__node *node;
};

struct compiler {
	struct schema *s;
	const struct schema_options *opt;
	struct schema_registry *reg;
	struct info *infos;
	size_t ninfos, cap;
	json_t *by_ptr; /* "%p" of a json_t -> index into infos */
	json_t *by_uri; /* absolute URI (of an "$id" or an anchor) -> index */
	json_t *dyn_uris; /* the URIs of the "$dynamicAnchor"s -> true */
	bool meta_loaded;
	bool strict; /* index errors count (the schema itself, not remotes) */
	int depth;
	char *err;
};

/* fail records the first error, formatted as "LOCATION: MESSAGE" where the
 * location is a JSON Pointer into the schema (loc is a "#..." location). */
__attribute__((format(printf, 3, 4)))
static void fail(struct compiler *c, const char *loc, const char *fmt, ...)
{
	va_list ap;
	char msg[512];
	const char *where;

	if (c->err)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	where = loc;
	if (where[0] == '#')
		where++;
	if (asprintf(&c->err, "%s: %s", where[0] ? where : "(root)", msg) < 0)
		c->err = NULL;
}

/* Out of memory is reported like any other compile error; schema_compile
 * turns it into a NULL return either way. */
static void *oom(struct compiler *c)
{
	if (!c->err)
		c->err = strdup("out of memory");
	return NULL;
}

static char *xstrdup(struct compiler *c, const char *s)
{
	char *p = strdup(s);

	return p ? p : oom(c);
}

/* child_loc returns loc extended by the JSON Pointer token key (escaped). */
static char *child_loc(struct compiler *c, const char *loc, const char *key)
{
	size_t n = strlen(loc), k = strlen(key);
	char *p = malloc(n + 2 * k + 2), *o;

	if (!p)
		return oom(c);
	memcpy(p, loc, n);
	o = p + n;
	*o++ = '/';
	for (; *key; key++) {
		if (*key == '~') {
			*o++ = '~';
			*o++ = '0';
		} else if (*key == '/') {
			*o++ = '~';
			*o++ = '1';
		} else {
			*o++ = *key;
		}
	}
	*o = '\0';
	return p;
}

static char *child_loc_index(struct compiler *c, const char *loc, size_t i)
{
	char key[32];

	snprintf(key, sizeof(key), "%zu", i);
	return child_loc(c, loc, key);
}

static void ptr_key(const json_t *j, char *buf, size_t n)
{
	snprintf(buf, n, "%p", (const void *)j);
}

static long lookup(json_t *table, const char *key)
{
	json_t *v = json_object_get(table, key);

	return v ? (long)json_integer_value(v) : -1;
}

static long info_of(struct compiler *c, const json_t *j)
{
	char key[32];

	ptr_key(j, key, sizeof(key));
	return lookup(c->by_ptr, key);
}

/* ---- The index pass ---- */

static struct schema__resource *new_resource(struct compiler *c,
					     const char *uri)
{
	struct schema__resource *r = calloc(1, sizeof(*r));

	if (!r)
		return oom(c);
	r->uri = strdup(uri);
	if (!r->uri) {
		free(r);
		return oom(c);
	}
	r->next = c->s->resources;
	c->s->resources = r;
	return r;
}

static long add_info(struct compiler *c, const json_t *j, const char *base,
		     const char *loc, struct schema__resource *res, int dialect,
		     bool validation)
{
	char key[32];
	struct info *in;

	if (c->ninfos == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct info *p = realloc(c->infos, cap * sizeof(*p));

		if (!p)
			{
			oom(c);
			return -1;
		}
		c->infos = p;
		c->cap = cap;
	}
	in = &c->infos[c->ninfos];
	memset(in, 0, sizeof(*in));
	in->json = j;
	in->base = strdup(base);
	in->loc = strdup(loc);
	in->res = res;
	in->dialect = dialect;
	in->validation = validation;
	if (!in->base || !in->loc) {
		free(in->base);
		free(in->loc);
		oom(c);
		return -1;
	}
	ptr_key(j, key, sizeof(key));
	if (json_object_set_new(c->by_ptr, key, json_integer((json_int_t)c->ninfos)))
		{
			oom(c);
			return -1;
		}
	return (long)c->ninfos++;
}

/* set_uri enters uri in the table unless it is there already: the schema is
 * indexed before the registry, so its own "$id"s win. */
static void set_uri(struct compiler *c, const char *uri, long idx)
{
	if (json_object_get(c->by_uri, uri))
		return;
	if (json_object_set_new(c->by_uri, uri, json_integer(idx)))
		oom(c);
}

static bool is_anchor_name(const char *s)
{
	if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
		return false;
	for (s++; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '.' || *s == '_'))
			return false;
	return true;
}

/* dialect_of reads a "$schema" value: draft-07 (and the older drafts, which
 * berth treats as draft-07) or 2020-12 (and 2019-09, close enough); a
 * registered meta-schema may also switch vocabularies off. */
static int dialect_of(struct compiler *c, const char *uri, bool *validation)
{
	json_t *meta, *vocab;

	*validation = true;
	if (strstr(uri, "json-schema.org/draft-0"))
		return DRAFT7;
	if (c->reg) {
		char *u = schema__uri_resolve(NULL, uri);

		meta = u ? json_object_get(c->reg->docs, u) : NULL;
		free(u);
		vocab = json_object_get(meta, "$vocabulary");
		if (json_is_object(vocab))
			*validation = json_object_get(vocab,
				"https://json-schema.org/draft/2020-12/vocab/validation") != NULL;
	}
	return DRAFT2020;
}

static void walk(struct compiler *c, const json_t *j, const char *base,
		 struct schema__resource *res, const char *loc, int dialect,
		 bool validation, int depth);

/* Keywords whose value is one subschema, an object of subschemas or an
 * array of subschemas; the index walks exactly these. */
static const char *const single_kw[] = {
	"not", "if", "then", "else", "items", "contains", "additionalProperties",
	"additionalItems", "propertyNames", "unevaluatedItems",
	"unevaluatedProperties", "contentSchema", NULL,
};
static const char *const map_kw[] = {
	"$defs", "definitions", "properties", "patternProperties",
	"dependentSchemas", "dependencies", NULL,
};
static const char *const array_kw[] = {
	"allOf", "anyOf", "oneOf", "prefixItems", "items", NULL,
};

static void walk_child(struct compiler *c, const json_t *v, const char *base,
		       struct schema__resource *res, const char *loc,
		       int dialect, bool validation, int depth)
{
	/* "dependencies" may hold arrays of names; only schemas are walked. */
	if (json_is_object(v) || json_is_boolean(v))
		walk(c, v, base, res, loc, dialect, validation, depth + 1);
}

static void walk(struct compiler *c, const json_t *j, const char *base,
		 struct schema__resource *res, const char *loc, int dialect,
		 bool validation, int depth)
{
	const json_t *v;
	char *newbase = NULL;
	long idx;
	int max = c->s->max_depth;

	if (c->err)
		return;
	if (depth > max) {
		if (c->strict)
			fail(c, loc, "schema is nested more than %d levels deep", max);
		return;
	}
	if (!json_is_object(j)) {
		add_info(c, j, base, loc, res, dialect, validation);
		return;
	}

	v = json_object_get(j, "$schema");
	if (json_is_string(v))
		dialect = dialect_of(c, json_string_value(v), &validation);

	v = json_object_get(j, "$id");
	if (json_is_string(v) &&
	    !(dialect == DRAFT7 && json_object_get(j, "$ref"))) {
		const char *id = json_string_value(v);

		if (dialect == DRAFT7 && id[0] == '#') {
			/* draft-07 spells an anchor as "$id": "#name". */
			char *u = schema__uri_resolve(base, id);

			if (!u) {
				oom(c);
				return;
			}
			idx = add_info(c, j, base, loc, res, dialect, validation);
			if (idx >= 0)
				set_uri(c, u, idx);
			free(u);
			goto keywords;
		}
		newbase = schema__uri_resolve(base, id);
		if (!newbase) {
			oom(c);
			return;
		}
		if (strchr(newbase, '#')) {
			if (c->strict)
				fail(c, loc, "$id must not contain a fragment: \"%s\"", id);
			free(newbase);
			return;
		}
		res = new_resource(c, newbase);
		if (!res) {
			free(newbase);
			return;
		}
		base = newbase;
	} else if (v && !json_is_string(v) && c->strict) {
		fail(c, loc, "$id must be a string");
		return;
	}
	idx = add_info(c, j, base, loc, res, dialect, validation);
	if (idx < 0)
		goto out;
	if (newbase)
		set_uri(c, newbase, idx);

	for (int dyn = 0; dyn < 2; dyn++) {
		const char *kw = dyn ? "$dynamicAnchor" : "$anchor";
		char *u;

		v = json_object_get(j, kw);
		if (!v)
			continue;
		if (!json_is_string(v) || !is_anchor_name(json_string_value(v))) {
			if (c->strict)
				fail(c, loc, "%s must be a name (a letter or '_', "
				     "then letters, digits, '-', '.' or '_')", kw);
			goto out;
		}
		if (asprintf(&u, "%s#%s", base, json_string_value(v)) < 0) {
			oom(c);
			goto out;
		}
		set_uri(c, u, idx);
		if (dyn) {
			struct schema__anchor *a;

			json_object_set_new(c->dyn_uris, u, json_true());
			a = realloc(res->dyn, (res->ndyn + 1) * sizeof(*a));
			if (!a) {
				free(u);
				oom(c);
				goto out;
			}
			res->dyn = a;
			a[res->ndyn].name = strdup(json_string_value(v));
			a[res->ndyn].json = j;
			a[res->ndyn].node = NULL;
			if (!a[res->ndyn++].name)
				oom(c);
		}
		free(u);
	}

keywords:
	for (int i = 0; single_kw[i]; i++) {
		v = json_object_get(j, single_kw[i]);
		if (v && !json_is_array(v)) {
			char *l = child_loc(c, loc, single_kw[i]);

			if (l)
				walk_child(c, v, base, res, l, dialect, validation, depth);
			free(l);
		}
	}
	for (int i = 0; map_kw[i]; i++) {
		const char *key;
		json_t *sub;
		char *l;

		v = json_object_get(j, map_kw[i]);
		if (!json_is_object(v))
			continue;
		l = child_loc(c, loc, map_kw[i]);
		json_object_foreach((json_t *)v, key, sub) {
			char *l2 = l ? child_loc(c, l, key) : NULL;

			if (l2)
				walk_child(c, sub, base, res, l2, dialect, validation, depth);
			free(l2);
		}
		free(l);
	}
	for (int i = 0; array_kw[i]; i++) {
		size_t k;
		json_t *sub;
		char *l;

		v = json_object_get(j, array_kw[i]);
		if (!json_is_array(v))
			continue;
		l = child_loc(c, loc, array_kw[i]);
		json_array_foreach(v, k, sub) {
			char *l2 = l ? child_loc_index(c, l, k) : NULL;

			if (l2)
				walk_child(c, sub, base, res, l2, dialect, validation, depth);
			free(l2);
		}
		free(l);
	}
out:
	free(newbase);
}

/* index_doc walks a whole document whose retrieval URI is uri ("" for a
 * schema without one). */
static void index_doc(struct compiler *c, const json_t *doc, const char *uri)
{
	struct schema__resource *res = new_resource(c, uri);
	const json_t *schema = json_object_get(doc, "$schema");
	bool validation = true;
	int dialect = DRAFT2020;
	char *loc;
	long idx;

	if (!res)
		return;
	if (json_is_string(schema))
		dialect = dialect_of(c, json_string_value(schema), &validation);
	if (uri[0]) {
		if (asprintf(&loc, "%s#", uri) < 0) {
			oom(c);
			return;
		}
	} else {
		loc = xstrdup(c, "#");
		if (!loc)
			return;
	}
	walk(c, doc, uri, res, loc, dialect, validation, 0);
	free(loc);
	idx = info_of(c, doc);
	if (idx >= 0)
		set_uri(c, uri, idx);
}

/* load_metaschemas parses the built-in draft 2020-12 meta-schemas and
 * indexes them; it runs only when a reference needs one. */
static void load_metaschemas(struct compiler *c)
{
	c->meta_loaded = true;
	for (int i = 0; schema__metaschemas[i]; i++) {
		json_t *doc = json_loads(schema__metaschemas[i], 0, NULL);
		const char *id = json_string_value(json_object_get(doc, "$id"));
		bool strict = c->strict;

		if (!doc || !id || json_array_append_new(c->s->docs, doc)) {
			json_decref(doc);
			oom(c);
			return;
		}
		c->strict = false;
		index_doc(c, doc, id);
		c->strict = strict;
	}
}

/* ---- Reference resolution ---- */

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* pointer_get follows the JSON Pointer ptr (already percent-decoded) from
 * root; returns the target (borrowed) or NULL. */
static const json_t *pointer_get(const json_t *root, const char *ptr)
{
	const json_t *cur = root;
	char token[1024];

	if (*ptr == '\0')
		return root;
	if (*ptr != '/')
		return NULL;
	while (cur && *ptr == '/') {
		size_t n = 0;

		ptr++;
		while (*ptr && *ptr != '/') {
			char ch = *ptr++;

			if (ch == '~') {
				if (*ptr == '0')
					ch = '~';
				else if (*ptr == '1')
					ch = '/';
				else
					return NULL;
				ptr++;
			}
			if (n + 1 >= sizeof(token))
				return NULL;
			token[n++] = ch;
		}
		token[n] = '\0';
		if (json_is_object(cur)) {
			cur = json_object_get(cur, token);
		} else if (json_is_array(cur)) {
			char *end;
			unsigned long i;

			if (n == 0 || (token[0] == '0' && n > 1) ||
			    token[0] < '0' || token[0] > '9')
				return NULL;
			i = strtoul(token, &end, 10);
			if (*end)
				return NULL;
			cur = json_array_get(cur, i);
		} else {
			return NULL;
		}
	}
	return cur;
}

/* resolve returns the index of the subschema that ref (relative to base)
 * names, or -1 after recording an error located at loc. */
static long resolve(struct compiler *c, const char *base, const char *ref,
		    const char *loc, bool *dynamic)
{
	char *abs = schema__uri_resolve(base, ref), *hash, *frag = NULL;
	long idx = -1, ridx;

	*dynamic = false;
	if (!abs)
		{
			oom(c);
			return -1;
		}
	hash = strchr(abs, '#');
	for (int attempt = 0; attempt < 2; attempt++) {
		if (hash && hash[1] == '/') {
			const json_t *target;
			size_t n = 0;

			*hash = '\0';
			ridx = lookup(c->by_uri, abs);
			*hash = '#';
			if (ridx < 0)
				goto retry;
			free(frag);
			frag = malloc(strlen(hash));
			if (!frag)
				break;
			for (const char *p = hash + 1; *p; p++) {
				if (*p == '%' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
					frag[n++] = (char)(hexval(p[1]) * 16 + hexval(p[2]));
					p += 2;
				} else {
					frag[n++] = *p;
				}
			}
			frag[n] = '\0';
			target = pointer_get(c->infos[ridx].json, frag);
			if (!target)
				break;
			idx = info_of(c, target);
			if (idx < 0 && (json_is_object(target) || json_is_boolean(target))) {
				/* A pointer into a place the index did not walk
				 * (an unknown keyword): index it now. */
				struct info r = c->infos[ridx];
				char *l = NULL;

				if (asprintf(&l, "%s#%s", r.res->uri, frag) < 0)
					break;
				walk(c, target, r.base, r.res, l, r.dialect, r.validation, 0);
				free(l);
				idx = info_of(c, target);
			}
			break;
		}
		idx = lookup(c->by_uri, abs);
		if (idx >= 0) {
			*dynamic = json_object_get(c->dyn_uris, abs) != NULL;
			break;
		}
retry:
		if (c->meta_loaded || strncmp(abs, "https://json-schema.org/", 24) != 0)
			break;
		load_metaschemas(c);
	}
	if (idx < 0 && !c->err)
		fail(c, loc, "cannot resolve reference \"%s\" (as %s)", ref, abs);
	free(frag);
	free(abs);
	return idx;
}

/* ---- The compile pass ---- */

static struct schema__node *compile_node(struct compiler *c, long idx);

/* bool_node makes the node of a boolean schema at loc.  jansson's true and
 * false are singletons, so a boolean subschema cannot be found by its
 * address like an object: each place gets a node of its own, which keeps
 * the schemaPath of a "false" right. */
static struct schema__node *bool_node(struct compiler *c, bool value,
				      const char *loc)
{
	struct schema__node *n = calloc(1, sizeof(*n));

	if (!n)
		return oom(c);
	n->next = c->s->nodes;
	c->s->nodes = n;
	n->is_bool = true;
	n->bool_value = value;
	n->loc = strdup(loc);
	return n->loc ? n : oom(c);
}

/* sub compiles the subschema v, which the index must have walked. */
static struct schema__node *sub(struct compiler *c, const json_t *v,
				const char *loc)
{
	long idx;

	if (!json_is_object(v) && !json_is_boolean(v)) {
		fail(c, loc, "must be a schema (an object or a boolean)");
		return NULL;
	}
	if (json_is_boolean(v))
		return bool_node(c, json_is_true(v), loc);
	idx = info_of(c, v);
	if (idx < 0) {
		if (!c->err)
			fail(c, loc, "schema is nested too deeply");
		return NULL;
	}
	return compile_node(c, idx);
}

static struct schema__node *sub_kw(struct compiler *c, const json_t *j,
				   const char *loc, const char *kw)
{
	const json_t *v = json_object_get(j, kw);
	struct schema__node *n;
	char *l;

	if (!v)
		return NULL;
	l = child_loc(c, loc, kw);
	if (!l)
		return NULL;
	n = sub(c, v, l);
	free(l);
	return n;
}

/* sub_array compiles a non-empty array of subschemas. */
static struct schema__node **sub_array(struct compiler *c, const json_t *j,
				       const char *loc, const char *kw,
				       size_t *count)
{
	const json_t *v = json_object_get(j, kw);
	struct schema__node **nodes;
	char *l;
	size_t i;
	json_t *e;

	*count = 0;
	if (!v)
		return NULL;
	l = child_loc(c, loc, kw);
	if (!l)
		return NULL;
	if (!json_is_array(v) || json_array_size(v) == 0) {
		fail(c, l, "must be a non-empty array of schemas");
		free(l);
		return NULL;
	}
	nodes = calloc(json_array_size(v), sizeof(*nodes));
	if (!nodes) {
		free(l);
		return oom(c);
	}
	json_array_foreach(v, i, e) {
		char *l2 = child_loc_index(c, l, i);

		nodes[i] = l2 ? sub(c, e, l2) : NULL;
		free(l2);
		if (!nodes[i]) {
			free(nodes);
			free(l);
			return NULL;
		}
	}
	free(l);
	*count = json_array_size(v);
	return nodes;
}

/* sub_map compiles an object of subschemas ("properties" and the like). */
static struct schema__prop *sub_map(struct compiler *c, const json_t *v,
				    const char *l, size_t *count)
{
	struct schema__prop *props;
	const char *key;
	json_t *e;
	size_t n = 0;

	*count = 0;
	if (!json_is_object(v)) {
		fail(c, l, "must be an object of schemas");
		return NULL;
	}
	props = calloc(json_object_size(v) + 1, sizeof(*props));
	if (!props)
		return oom(c);
	json_object_foreach((json_t *)v, key, e) {
		char *l2 = child_loc(c, l, key);

		props[n].name = strdup(key);
		props[n].node = l2 && props[n].name ? sub(c, e, l2) : NULL;
		free(l2);
		if (!props[n].name)
			oom(c);
		n++;
		if (c->err)
			break;
	}
	*count = n;
	return props;
}

static bool is_number(const json_t *v)
{
	return json_is_integer(v) || (json_is_real(v) && isfinite(json_real_value(v)));
}

static const json_t *number_kw(struct compiler *c, const json_t *j,
			       const char *loc, const char *kw, bool positive)
{
	const json_t *v = json_object_get(j, kw);

	if (!v)
		return NULL;
	if (!is_number(v) || (positive && json_number_value(v) <= 0)) {
		char *l = child_loc(c, loc, kw);

		if (l)
			fail(c, l, positive ? "must be a number greater than 0"
					    : "must be a number");
		free(l);
		return NULL;
	}
	return v;
}

/* count_kw reads a non-negative integer keyword (2.0 counts as 2, as the
 * meta-schema's "integer" allows); -1 when absent. */
static long long count_kw(struct compiler *c, const json_t *j, const char *loc,
			  const char *kw)
{
	const json_t *v = json_object_get(j, kw);
	double d;

	if (!v)
		return -1;
	if (json_is_integer(v) && json_integer_value(v) >= 0)
		return json_integer_value(v);
	d = json_is_real(v) ? json_real_value(v) : -1;
	if (d >= 0 && d == floor(d))
		return d > 9e18 ? (long long)9e18 : (long long)d;
	{
		char *l = child_loc(c, loc, kw);

		if (l)
			fail(c, l, "must be a non-negative integer");
		free(l);
	}
	return -1;
}

/* string_list reads an array of unique strings ("required"). */
static char **string_list(struct compiler *c, const json_t *v, const char *l,
			  size_t *count)
{
	char **names;
	size_t i;
	json_t *e;

	*count = 0;
	if (!json_is_array(v)) {
		fail(c, l, "must be an array of strings");
		return NULL;
	}
	names = calloc(json_array_size(v) + 1, sizeof(*names));
	if (!names)
		return oom(c);
	json_array_foreach(v, i, e) {
		if (!json_is_string(e)) {
			fail(c, l, "must be an array of strings; item %zu is not a string", i);
			break;
		}
		for (size_t k = 0; k < i; k++)
			if (strcmp(names[k], json_string_value(e)) == 0) {
				fail(c, l, "must not repeat \"%s\"", names[k]);
				break;
			}
		names[i] = strdup(json_string_value(e));
		*count = i + 1;
		if (!names[i] || c->err)
			break;
	}
	if (names && !c->err && *count < json_array_size(v))
		oom(c);
	return names;
}

static const struct {
	const char *name;
	unsigned bits;
} type_names[] = {
	{ "null", SCHEMA__T_NULL },
	{ "boolean", SCHEMA__T_BOOLEAN },
	{ "object", SCHEMA__T_OBJECT },
	{ "array", SCHEMA__T_ARRAY },
	{ "number", SCHEMA__T_NUMBER | SCHEMA__T_INTEGER },
	{ "string", SCHEMA__T_STRING },
	{ "integer", SCHEMA__T_INTEGER },
};

static unsigned type_bits(const json_t *v)
{
	for (size_t i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++)
		if (json_is_string(v) && strcmp(json_string_value(v), type_names[i].name) == 0)
			return type_names[i].bits;
	return 0;
}

static void compile_type(struct compiler *c, struct schema__node *n,
			 const json_t *v, const char *loc)
{
	char *l = child_loc(c, loc, "type");
	size_t i;
	json_t *e;

	if (!l)
		return;
	if (json_is_string(v)) {
		n->types = type_bits(v);
		if (!n->types)
			fail(c, l, "unknown type \"%s\" (the types are null, boolean, "
			     "object, array, number, string and integer)",
			     json_string_value(v));
	} else if (json_is_array(v) && json_array_size(v) > 0) {
		json_array_foreach(v, i, e) {
			unsigned b = type_bits(e);

			if (!b) {
				fail(c, l, "item %zu is not a type name", i);
				break;
			}
			n->types |= b;
		}
	} else {
		fail(c, l, "must be a type name or a non-empty array of type names");
	}
	free(l);
}

/* dump_values renders v (one value, or every item of an array) for a
 * message, cut short after about 200 bytes. */
static char *dump_values(const char *prefix, const json_t *v, bool list)
{
	char *out = NULL;
	size_t n = list ? json_array_size(v) : 1;
	size_t len = strlen(prefix), cap = len + 256;

	out = malloc(cap);
	if (!out)
		return NULL;
	memcpy(out, prefix, len + 1);
	for (size_t i = 0; i < n; i++) {
		char *s = json_dumps(list ? json_array_get(v, i) : v,
				     JSON_ENCODE_ANY | JSON_COMPACT);
		size_t k;

		if (!s)
			break;
		k = strlen(s);
		if (len + k + 8 > 220) {
			strcpy(out + len, i ? ", ..." : "...");
			free(s);
			break;
		}
		if (len + k + 3 > cap)
			break;
		len += (size_t)sprintf(out + len, "%s%s", i ? ", " : "", s);
		free(s);
	}
	return out;
}

static pcre2_code *compile_regex(struct compiler *c, const char *source,
				 const char *l)
{
	char err[256];
	pcre2_code *re = schema__regex_compile(source, strlen(source), err, sizeof(err));

	if (!re)
		fail(c, l, "invalid regular expression \"%s\": %s", source, err);
	return re;
}

static void compile_ref(struct compiler *c, struct schema__node *n,
			const struct info *in, const char *kw)
{
	const json_t *v = json_object_get(in->json, kw);
	bool dyn_kw = strcmp(kw, "$dynamicRef") == 0, dynamic;
	char *l;
	long idx;

	if (!v)
		return;
	l = child_loc(c, in->loc, kw);
	if (!l)
		return;
	if (!json_is_string(v)) {
		fail(c, l, "must be a URI reference (a string)");
		free(l);
		return;
	}
	idx = resolve(c, in->base, json_string_value(v), l, &dynamic);
	free(l);
	if (idx < 0)
		return;
	if (!dyn_kw) {
		n->ref = compile_node(c, idx);
		return;
	}
	n->dynref = compile_node(c, idx);
	/* The reference is dynamic only when its fragment is a plain name
	 * that the first target declares with "$dynamicAnchor". */
	if (dynamic) {
		const char *hash = strrchr(json_string_value(v), '#');

		n->dynref_anchor = xstrdup(c, hash + 1);
	}
}

static void compile_object(struct compiler *c, struct schema__node *n,
			   const struct info *in)
{
	const json_t *j = in->json, *v;
	const char *loc = in->loc;
	bool draft7 = in->dialect == DRAFT7;
	char *l;

	n->draft7 = draft7;
	compile_ref(c, n, in, "$ref");
	/* In draft-07 "$ref" makes its siblings be ignored. */
	if (draft7 && json_object_get(j, "$ref"))
		return;
	compile_ref(c, n, in, "$dynamicRef");

	if (in->validation) {
		if ((v = json_object_get(j, "type")))
			compile_type(c, n, v, loc);
		if ((v = json_object_get(j, "enum"))) {
			if (!json_is_array(v)) {
				if ((l = child_loc(c, loc, "enum")))
					fail(c, l, "must be an array");
				free(l);
			} else {
				n->enum_values = v;
				n->enum_msg = dump_values(
					"must be equal to one of the allowed values: ", v, true);
				if (!n->enum_msg)
					oom(c);
			}
		}
		if ((v = json_object_get(j, "const"))) {
			n->const_value = v;
			n->const_msg = dump_values("must be equal to the constant ", v, false);
			if (!n->const_msg)
				oom(c);
		}
		n->multiple_of = number_kw(c, j, loc, "multipleOf", true);
		n->maximum = number_kw(c, j, loc, "maximum", false);
		n->exclusive_maximum = number_kw(c, j, loc, "exclusiveMaximum", false);
		n->minimum = number_kw(c, j, loc, "minimum", false);
		n->exclusive_minimum = number_kw(c, j, loc, "exclusiveMinimum", false);
		n->max_length = count_kw(c, j, loc, "maxLength");
		n->min_length = count_kw(c, j, loc, "minLength");
		n->max_items = count_kw(c, j, loc, "maxItems");
		n->min_items = count_kw(c, j, loc, "minItems");
		n->max_contains = count_kw(c, j, loc, "maxContains");
		n->min_contains = count_kw(c, j, loc, "minContains");
		n->max_properties = count_kw(c, j, loc, "maxProperties");
		n->min_properties = count_kw(c, j, loc, "minProperties");
		if ((v = json_object_get(j, "uniqueItems"))) {
			if (!json_is_boolean(v)) {
				if ((l = child_loc(c, loc, "uniqueItems")))
					fail(c, l, "must be a boolean");
				free(l);
			}
			n->unique_items = json_is_true(v);
		}
		if ((v = json_object_get(j, "pattern")) && (l = child_loc(c, loc, "pattern"))) {
			if (!json_is_string(v))
				fail(c, l, "must be a string");
			else
				n->pattern = compile_regex(c, json_string_value(v), l);
			n->pattern_source = json_string_value(v);
			free(l);
		}
		if ((v = json_object_get(j, "required")) && (l = child_loc(c, loc, "required"))) {
			n->required = string_list(c, v, l, &n->nrequired);
			free(l);
		}
		v = json_object_get(j, "dependentRequired");
		if (!v && draft7)
			v = json_object_get(j, "dependencies");
		if (v && (l = child_loc(c, loc, draft7 ? "dependencies" : "dependentRequired"))) {
			const char *key;
			json_t *e;

			if (!json_is_object(v))
				fail(c, l, "must be an object");
			else if (!(n->dep_required = calloc(json_object_size(v) + 1,
							     sizeof(*n->dep_required))))
				oom(c);
			else
				json_object_foreach((json_t *)v, key, e) {
					struct schema__dep *d = &n->dep_required[n->ndep_required];
					char *l2;

					if (!(l2 = child_loc(c, l, key)))
						break;
					if (!json_is_array(e) && draft7) {
						free(l2);
						continue; /* a draft-07 schema dependency */
					}
					if (!json_is_array(e)) {
						fail(c, l2, "must be an array of property "
						     "names");
						free(l2);
						break;
					}
					d->name = strdup(key);
					d->names = string_list(c, e, l2, &d->n);
					n->ndep_required++;
					free(l2);
					if (!d->name)
						oom(c);
					if (c->err)
						break;
				}
			free(l);
		}
	}

	if ((v = json_object_get(j, "format"))) {
		if (!json_is_string(v)) {
			if ((l = child_loc(c, loc, "format")))
				fail(c, l, "must be a string");
			free(l);
		} else if (c->opt->format_assert) {
			n->format = schema__format_lookup(json_string_value(v));
			n->format_name = json_string_value(v);
		}
	}

	n->all_of = sub_array(c, j, loc, "allOf", &n->nall_of);
	n->any_of = sub_array(c, j, loc, "anyOf", &n->nany_of);
	n->one_of = sub_array(c, j, loc, "oneOf", &n->none_of);
	n->not_ = sub_kw(c, j, loc, "not");
	n->if_ = sub_kw(c, j, loc, "if");
	n->then_ = sub_kw(c, j, loc, "then");
	n->else_ = sub_kw(c, j, loc, "else");

	v = json_object_get(j, "items");
	if (draft7 && json_is_array(v)) {
		n->prefix_items = sub_array(c, j, loc, "items", &n->nprefix_items);
		n->items = sub_kw(c, j, loc, "additionalItems");
	} else {
		if (json_is_array(v) && (l = child_loc(c, loc, "items"))) {
			fail(c, l, "must be a schema; the array form of \"items\" is "
			     "\"prefixItems\" in draft 2020-12 (or declare draft-07 in "
			     "\"$schema\")");
			free(l);
		}
		n->prefix_items = sub_array(c, j, loc, "prefixItems", &n->nprefix_items);
		n->items = sub_kw(c, j, loc, "items");
	}
	n->contains = sub_kw(c, j, loc, "contains");

	if ((v = json_object_get(j, "properties")) && (l = child_loc(c, loc, "properties"))) {
		n->properties = sub_map(c, v, l, &n->nproperties);
		free(l);
		n->prop_index = json_object();
		if (!n->prop_index)
			oom(c);
		for (size_t i = 0; i < n->nproperties && !c->err; i++)
			if (json_object_set_new(n->prop_index, n->properties[i].name,
						json_integer((json_int_t)i)))
				oom(c);
	}
	if ((v = json_object_get(j, "patternProperties")) &&
	    (l = child_loc(c, loc, "patternProperties"))) {
		struct schema__prop *p = sub_map(c, v, l, &n->npattern_props);

		n->pattern_props = calloc(n->npattern_props + 1, sizeof(*n->pattern_props));
		if (!n->pattern_props)
			oom(c);
		for (size_t i = 0; i < n->npattern_props && n->pattern_props; i++) {
			char *l2 = child_loc(c, l, p[i].name);

			n->pattern_props[i].source = p[i].name;
			n->pattern_props[i].node = p[i].node;
			if (l2 && p[i].name && !c->err)
				n->pattern_props[i].re = compile_regex(c, p[i].name, l2);
			free(l2);
		}
		if (!n->pattern_props)
			for (size_t i = 0; i < n->npattern_props; i++)
				free(p[i].name);
		free(p);
		free(l);
	}
	n->additional_properties = sub_kw(c, j, loc, "additionalProperties");
	n->property_names = sub_kw(c, j, loc, "propertyNames");
	v = json_object_get(j, "dependentSchemas");
	if (v && (l = child_loc(c, loc, "dependentSchemas"))) {
		n->dep_schemas = sub_map(c, v, l, &n->ndep_schemas);
		free(l);
	} else if (draft7 && (v = json_object_get(j, "dependencies")) &&
		   json_is_object(v) && (l = child_loc(c, loc, "dependencies"))) {
		const char *key;
		json_t *e;

		n->dep_schemas = calloc(json_object_size(v) + 1, sizeof(*n->dep_schemas));
		if (!n->dep_schemas)
			oom(c);
		else
			json_object_foreach((json_t *)v, key, e) {
				struct schema__prop *p = &n->dep_schemas[n->ndep_schemas];
				char *l2;

				if (json_is_array(e))
					continue;
				if (!(l2 = child_loc(c, l, key)))
					break;
				p->name = strdup(key);
				p->node = sub(c, e, l2);
				n->ndep_schemas++;
				free(l2);
				if (!p->name)
					oom(c);
				if (c->err)
					break;
			}
		free(l);
	}
	n->unevaluated_items = sub_kw(c, j, loc, "unevaluatedItems");
	n->unevaluated_properties = sub_kw(c, j, loc, "unevaluatedProperties");
	n->has_uneval = n->unevaluated_items || n->unevaluated_properties;
}

/* compile_dyn_anchors compiles every "$dynamicAnchor" subschema of res, so
 * that a "$dynamicRef" that lands on res at run time finds a node. */
static void compile_dyn_anchors(struct compiler *c, struct schema__resource *res)
{
	if (res->dyn_compiled)
		return;
	res->dyn_compiled = true;
	for (size_t i = 0; i < res->ndyn && !c->err; i++) {
		long idx = info_of(c, res->dyn[i].json);

		if (idx >= 0)
			res->dyn[i].node = compile_node(c, idx);
	}
}

static struct schema__node *compile_node(struct compiler *c, long idx)
{
	struct schema__node *n;
	struct info in;

	if (c->err)
		return NULL;
	if (c->infos[idx].node)
		return c->infos[idx].node;
	in = c->infos[idx];
	if (c->depth >= c->s->max_depth) {
		fail(c, in.loc, "schema (with its references) is nested more than "
		     "%d levels deep", c->s->max_depth);
		return NULL;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return oom(c);
	n->next = c->s->nodes;
	c->s->nodes = n;
	n->json = in.json;
	n->loc = strdup(in.loc);
	n->resource = in.res;
	n->max_length = n->min_length = n->max_items = n->min_items = -1;
	n->max_contains = n->min_contains = n->max_properties = n->min_properties = -1;
	c->infos[idx].node = n;
	if (!n->loc)
		return oom(c);
	c->depth++;
	compile_dyn_anchors(c, in.res);
	if (json_is_boolean(in.json)) {
		n->is_bool = true;
		n->bool_value = json_is_true(in.json);
	} else if (json_is_object(in.json)) {
		compile_object(c, n, &in);
	} else {
		fail(c, in.loc, "must be a schema (an object or a boolean)");
	}
	c->depth--;
	return c->err ? NULL : n;
}

/* ---- Cycle check ---- */

/*
 * find_cycle looks for a cycle through the applicators that evaluate the
 * same instance location ("$ref", "$dynamicRef", "allOf", "anyOf", "oneOf",
 * "not", "if", "then", "else", "dependentSchemas"), from n, which was
 * reached from the node from (NULL for a start).  Such a cycle means the
 * evaluation of some instance never ends (or, through "anyOf", doubles at
 * each turn until the depth limit), so the schema is refused.  Applicators
 * that move into the instance (properties, items, ...) cannot loop forever
 * on a finite instance and are not followed.  A "$dynamicRef" is followed
 * to its first target; the targets it may reach at run time are bounded by
 * max_depth instead.  Nodes keep their marks between calls, so that a
 * search from every node (schema_compile) visits each node once.
 */
static bool find_cycle(struct compiler *c, struct schema__node *n,
		       const struct schema__node *from, int depth)
{
	struct schema__node *next[8];
	size_t k = 0;

	if (!n || n->mark == 2)
		return false;
	if (n->mark == 1) {
		const char *via = from->loc[0] == '#' ? from->loc + 1 : from->loc;

		fail(c, n->loc, "reference cycle: evaluating this schema leads back "
		     "to it (from %s) without moving into the instance",
		     via[0] ? via : "the root");
		return true;
	}
	if (depth > 4 * c->s->max_depth) {
		fail(c, n->loc, "references are nested too deeply");
		return true;
	}
	n->mark = 1;
	next[k++] = n->ref;
	next[k++] = n->dynref;
	next[k++] = n->not_;
	next[k++] = n->if_;
	next[k++] = n->then_;
	next[k++] = n->else_;
	for (size_t i = 0; i < k; i++)
		if (find_cycle(c, next[i], n, depth + 1))
			return true;
	for (size_t i = 0; i < n->nall_of; i++)
		if (find_cycle(c, n->all_of[i], n, depth + 1))
			return true;
	for (size_t i = 0; i < n->nany_of; i++)
		if (find_cycle(c, n->any_of[i], n, depth + 1))
			return true;
	for (size_t i = 0; i < n->none_of; i++)
		if (find_cycle(c, n->one_of[i], n, depth + 1))
			return true;
	for (size_t i = 0; i < n->ndep_schemas; i++)
		if (find_cycle(c, n->dep_schemas[i].node, n, depth + 1))
			return true;
	n->mark = 2;
	return false;
}

/* find_cycle_everywhere runs find_cycle from the root, which names the
 * same place as ever for a cycle there, then from every other node in the
 * order they were compiled (outer places first), for the cycles that only
 * some instance locations reach (below "properties", "items", ...). */
static void find_cycle_everywhere(struct compiler *c)
{
	struct schema__node **order, *n;
	size_t count = 0, i;

	if (find_cycle(c, c->s->root, NULL, 0))
		return;
	for (n = c->s->nodes; n; n = n->next)
		count++;
	order = malloc(count * sizeof(*order));
	if (!order) {
		oom(c);
		return;
	}
	/* s->nodes holds the newest first. */
	for (n = c->s->nodes, i = count; n; n = n->next)
		order[--i] = n;
	for (i = 0; i < count && !c->err; i++)
		find_cycle(c, order[i], NULL, 0);
	free(order);
}

/* ---- Public API ---- */

struct schema_registry *schema_registry_create(void)
{
	struct schema_registry *reg = calloc(1, sizeof(*reg));

	if (!reg)
		return NULL;
	reg->docs = json_object();
	if (!reg->docs) {
		free(reg);
		return NULL;
	}
	return reg;
}

__attribute__((format(printf, 3, 4)))
static int set_errmsg(char **errmsg, int rc, const char *fmt, ...)
{
	va_list ap;

	if (!errmsg)
		return rc;
	va_start(ap, fmt);
	if (vasprintf(errmsg, fmt, ap) < 0)
		*errmsg = NULL;
	va_end(ap);
	return rc;
}

int schema_registry_add(struct schema_registry *reg, const char *uri,
			json_t *doc, char **errmsg)
{
	char *u;
	json_t *copy;
	int rc = 0;

	if (errmsg)
		*errmsg = NULL;
	if (!uri || !schema__uri_is_absolute(uri))
		return set_errmsg(errmsg, -EINVAL,
				  "schema URI \"%s\" is not absolute", uri ? uri : "");
	if (!json_is_object(doc) && !json_is_boolean(doc))
		return set_errmsg(errmsg, -EINVAL,
				  "schema %s is neither an object nor a boolean", uri);
	u = schema__uri_resolve(NULL, uri);
	if (!u)
		return -ENOMEM;
	if (strchr(u, '#'))
		*strchr(u, '#') = '\0';
	if (json_object_get(reg->docs, u)) {
		rc = set_errmsg(errmsg, -EEXIST, "schema %s is already registered", u);
	} else {
		copy = json_deep_copy(doc);
		if (!copy || json_object_set_new(reg->docs, u, copy))
			rc = -ENOMEM;
	}
	free(u);
	return rc;
}

void schema_registry_destroy(struct schema_registry *reg)
{
	if (!reg)
		return;
	json_decref(reg->docs);
	free(reg);
}

void schema_free(struct schema *s)
{
	struct schema__node *n, *nn;
	struct schema__resource *r, *rn;

	if (!s)
		return;
	for (n = s->nodes; n; n = nn) {
		nn = n->next;
		free(n->loc);
		free(n->dynref_anchor);
		free(n->enum_msg);
		free(n->const_msg);
		pcre2_code_free(n->pattern);
		free(n->prefix_items);
		for (size_t i = 0; n->required && n->required[i]; i++)
			free(n->required[i]);
		free(n->required);
		for (size_t i = 0; i < n->ndep_required; i++) {
			for (size_t k = 0; k < n->dep_required[i].n; k++)
				free(n->dep_required[i].names[k]);
			free(n->dep_required[i].names);
			free(n->dep_required[i].name);
		}
		free(n->dep_required);
		for (size_t i = 0; i < n->nproperties; i++)
			free(n->properties[i].name);
		free(n->properties);
		json_decref(n->prop_index);
		for (size_t i = 0; i < n->npattern_props; i++) {
			free(n->pattern_props[i].source);
			pcre2_code_free(n->pattern_props[i].re);
		}
		free(n->pattern_props);
		for (size_t i = 0; i < n->ndep_schemas; i++)
			free(n->dep_schemas[i].name);
		free(n->dep_schemas);
		free(n->all_of);
		free(n->any_of);
		free(n->one_of);
		free(n);
	}
	for (r = s->resources; r; r = rn) {
		rn = r->next;
		for (size_t i = 0; i < r->ndyn; i++)
			free(r->dyn[i].name);
		free(r->dyn);
		free(r->uri);
		free(r);
	}
	json_decref(s->docs);
	json_decref(s->doc);
	free(s);
}

struct schema *schema_compile(const json_t *doc, const struct schema_options *opt,
			      struct schema_registry *reg, char **errmsg)
{
	static const struct schema_options defaults = { 0 };
	struct compiler c = { 0 };
	struct schema *s;
	const char *key;
	json_t *rdoc;
	long idx;

	if (errmsg)
		*errmsg = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	c.s = s;
	c.opt = opt ? opt : &defaults;
	c.reg = reg;
	s->max_depth = c.opt->max_depth > 0 ? c.opt->max_depth : SCHEMA_DEFAULT_MAX_DEPTH;
	s->doc = json_deep_copy(doc);
	s->docs = json_array();
	c.by_ptr = json_object();
	c.by_uri = json_object();
	c.dyn_uris = json_object();
	if (!s->doc || !s->docs || !c.by_ptr || !c.by_uri || !c.dyn_uris) {
		oom(&c);
		goto out;
	}
	if (!json_is_object(s->doc) && !json_is_boolean(s->doc)) {
		fail(&c, "#", "a schema must be an object or a boolean");
		goto out;
	}

	/* The root has no retrieval URI: its base is its "$id", or the empty
	 * base, which relative references keep as they are. */
	c.strict = true;
	index_doc(&c, s->doc, "");
	c.strict = false;
	if (reg) {
		json_object_foreach(reg->docs, key, rdoc) {
			if (c.err)
				break;
			/* The nodes point into the document (a minimum, a
			 * pattern's source), so the schema holds a reference
			 * of its own: the registry may be destroyed first. A
			 * registered document is never changed. */
			if (json_array_append(s->docs, rdoc)) {
				oom(&c);
				break;
			}
			index_doc(&c, rdoc, key);
		}
	}
	if (c.err)
		goto out;
	idx = info_of(&c, s->doc);
	if (idx >= 0)
		s->root = compile_node(&c, idx);
	if (!c.err)
		find_cycle_everywhere(&c);
	if (!c.err && s->root)
		schema__mark_defaults(s);
out:
	for (size_t i = 0; i < c.ninfos; i++) {
		free(c.infos[i].base);
		free(c.infos[i].loc);
	}
	free(c.infos);
	json_decref(c.by_ptr);
	json_decref(c.by_uri);
	json_decref(c.dyn_uris);
	if (c.err || !s->root) {
		if (errmsg)
			*errmsg = c.err ? c.err : strdup("out of memory");
		else
			free(c.err);
		schema_free(s);
		return NULL;
	}
	return s;
}

struct schema *schema_compile_text(const char *json_text,
				   const struct schema_options *opt,
				   struct schema_registry *reg, char **errmsg)
{
	json_error_t jerr;
	json_t *doc = json_loads(json_text, JSON_DECODE_ANY, &jerr);
	struct schema *s;

	if (!doc) {
		if (errmsg && asprintf(errmsg, "schema is not valid JSON: %s "
				       "(line %d, column %d)", jerr.text, jerr.line,
				       jerr.column) < 0)
			*errmsg = NULL;
		return NULL;
	}
	s = schema_compile(doc, opt, reg, errmsg);
	json_decref(doc);
	return s;
}

const json_t *schema_doc(const struct schema *s)
{
	return s->doc;
}

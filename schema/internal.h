/*
 * internal: the compiled form of a schema, shared by compile.c (which builds
 * it) and validate.c (which walks it).  Nothing here is part of berth's API;
 * names carry the double prefix schema__.
 */
#ifndef BERTH_SCHEMA_INTERNAL_H
#define BERTH_SCHEMA_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8

#include <pcre2.h>
#include <stdbool.h>
#include <stddef.h>

#include "schema/schema.h"

/* The bits of node.types; integer is its own bit because a schema may allow
 * integers and not other numbers. */
enum {
	SCHEMA__T_NULL = 1 << 0,
	SCHEMA__T_BOOLEAN = 1 << 1,
	SCHEMA__T_OBJECT = 1 << 2,
	SCHEMA__T_ARRAY = 1 << 3,
	SCHEMA__T_NUMBER = 1 << 4,
	SCHEMA__T_STRING = 1 << 5,
	SCHEMA__T_INTEGER = 1 << 6,
};

struct schema__node;

/* A "$dynamicAnchor" of a resource and the subschema it names. */
struct schema__anchor {
	char *name;
	const json_t *json;
	struct schema__node *node;
};

/* A schema resource: a document root or a subschema with "$id".  The
 * dynamic scope of an evaluation is a stack of these. */
struct schema__resource {
	char *uri;
	struct schema__anchor *dyn;
	size_t ndyn;
	bool dyn_compiled;
	struct schema__resource *next;
};

struct schema__prop {
	char *name;
	struct schema__node *node;
};

struct schema__pattern {
	char *source;
	pcre2_code *re;
	struct schema__node *node;
};

struct schema__dep {
	char *name;
	char **names;
	size_t n;
};

/*
 * A compiled subschema.  Absent keywords are NULL pointers, zero counts, or
 * -1 for the integer limits.  Numbers stay as the jansson values of the
 * schema document (which the schema owns), so comparisons are exact for
 * integers.
 */
struct schema__node {
	const json_t *json;
	char *loc;
	const struct schema__resource *resource;
	bool is_bool, bool_value;
	/* Written in draft-07: errors name its keywords ("additionalItems",
	 * "dependencies") rather than 2020-12's, which it is compiled to. */
	bool draft7;
	bool has_uneval;
	/* Filling defaults in from here can change an instance (defaults.c). */
	bool has_defaults;
	unsigned types;

	struct schema__node *ref;
	struct schema__node *dynref;
	char *dynref_anchor;

	const json_t *enum_values;
	char *enum_msg;
	const json_t *const_value;
	char *const_msg;

	const json_t *multiple_of, *maximum, *exclusive_maximum, *minimum,
		*exclusive_minimum;
	long long max_length, min_length;
	pcre2_code *pattern;
	const char *pattern_source;
	int format;
	const char *format_name;

	long long max_items, min_items, max_contains, min_contains;
	bool unique_items;
	struct schema__node **prefix_items;
	size_t nprefix_items;
	struct schema__node *items, *contains, *unevaluated_items;

	long long max_properties, min_properties;
	char **required;
	size_t nrequired;
	struct schema__dep *dep_required;
	size_t ndep_required;
	struct schema__prop *properties;
	size_t nproperties;
	json_t *prop_index;
	struct schema__pattern *pattern_props;
	size_t npattern_props;
	struct schema__node *additional_properties, *property_names,
		*unevaluated_properties;
	struct schema__prop *dep_schemas;
	size_t ndep_schemas;

	struct schema__node **all_of, **any_of, **one_of;
	size_t nall_of, nany_of, none_of;
	struct schema__node *not_, *if_, *then_, *else_;

	int mark;
	struct schema__node *next;
};

struct schema {
	json_t *doc;
	json_t *docs;
	struct schema__node *root;
	struct schema__node *nodes;
	struct schema__resource *resources;
	int max_depth;
};

/* A JSON Pointer into an instance, as a chain of frames on the C stack; it
 * is turned into a string only when an error names it. */
struct schema__ipath {
	const struct schema__ipath *up;
	const char *key; /* NULL: index */
	size_t index;
};

/*
 * What one validation may still spend, and why it stopped.  Everything a
 * validation evaluates draws on the same one: recursion, the branches of
 * "anyOf" and "oneOf" (whose errors may be dropped), "not", "if" and
 * "contains" (whose errors are never kept) and every pattern matched.
 * Filling in defaults (defaults.c) draws on one too, and lends it to the
 * validations it runs to choose an "anyOf" branch, so neither recursion nor
 * a branch can start afresh.  A validation that runs out, or that cannot
 * be finished (an instance nested too deeply, a pattern PCRE2 gives up on),
 * is stopped: it fails with the error in stop alone, whatever keyword it
 * was under, so that giving up can never turn into a pass (under "not",
 * say).
 */
struct schema__run {
	long long steps; /* left; below 0 once stopped */
	pcre2_match_context *mctx; /* made at the first pattern matched */
	pcre2_match_data *md;
	bool stopped;
	json_t *stop; /* the error object that says why (new), or NULL */
};

/* SCHEMA__RUN_INIT is a new run's initializer: SCHEMA_MAX_STEPS left. */
#define SCHEMA__RUN_INIT { .steps = SCHEMA_MAX_STEPS }

/* schema__run_release frees what r holds (schema__run_finish's work). */
void schema__run_release(struct schema__run *r);

/* schema__run_finish frees what r holds, its stop error too (a caller that
 * keeps it takes a reference of its own).  Most runs match no pattern and
 * are not stopped, and pay a test; schema__run_release does the rest. */
static inline void schema__run_finish(struct schema__run *r)
{
	if (r->md || r->mctx || r->stop)
		schema__run_release(r);
}

/* schema__run_stop stops r unless it is stopped already, with an error
 * object as schema_validate reports them (instancePath from path,
 * schemaPath loc + "/" + kw, or loc alone for an empty kw); returns false
 * when out of memory. */
__attribute__((format(printf, 5, 6)))
bool schema__run_stop(struct schema__run *r, const struct schema__ipath *path,
		      const char *loc, const char *kw, const char *fmt, ...);

/* schema__error returns a new error object {"instancePath", "keyword",
 * "schemaPath", "message"} (schemaPath as for schema__run_stop), or NULL
 * when out of memory. */
json_t *schema__error(const struct schema__ipath *path, const char *loc,
		      const char *kw, const char *msg);

/* regex.c */

/* schema__regex_compile compiles an ECMAScript-flavoured pattern with PCRE2
 * (UTF mode).  Returns the code, or NULL with a description of the problem
 * written to err (at most errlen bytes). */
pcre2_code *schema__regex_compile(const char *source, size_t len, char *err,
				  size_t errlen);

/* What schema__regex_match found. */
enum {
	SCHEMA__RE_MATCH = 1,
	SCHEMA__RE_NO_MATCH = 0,
	SCHEMA__RE_GAVE_UP = -1, /* past PCRE2's limits for one match */
	SCHEMA__RE_OUT_OF_STEPS = -2, /* past what run had left */
	SCHEMA__RE_NOMEM = -3,
	SCHEMA__RE_TOO_LONG = -4, /* a group repeated past PCRE2's heap limit */
};

/* schema__regex_match tells whether re matches somewhere in subject, and
 * charges run with the work it took (regex.c says how); a result below 0
 * is no answer, which the caller must not take for either. */
int schema__regex_match(struct schema__run *run, const pcre2_code *re,
			const char *subject, size_t len);

/* format.c */

/* schema__format_lookup returns the id (> 0) of a format berth can assert,
 * or 0 for one it treats as an annotation only. */
int schema__format_lookup(const char *name);

/* schema__format_check returns true when s (len bytes) is valid for the
 * format with id fmt. */
bool schema__format_check(int fmt, const char *s, size_t len);

/* validate.c */

/* schema__valid_node returns 1 when inst is valid against n, a node of s,
 * evaluated on its own (an empty dynamic scope) with what run has left, 0
 * when it is not, -ECANCELED when run is stopped (run->stop says why; its
 * instancePath starts at path, where inst is) and -ENOMEM. */
int schema__valid_node(struct schema__run *run, const struct schema *s,
		       const struct schema__node *n, const json_t *inst,
		       const struct schema__ipath *path);

/* defaults.c */

/* schema__mark_defaults sets has_defaults on every node of s from which
 * schema_apply_defaults can reach a default; compile time only. */
void schema__mark_defaults(struct schema *s);

/* metaschema.c */

/* schema__metaschemas is a NULL-terminated list of the draft 2020-12
 * meta-schema documents (JSON text), each with its "$id". */
extern const char *const schema__metaschemas[];

#endif

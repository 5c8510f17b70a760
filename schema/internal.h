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
	pcre2_match_context *mctx;
	int max_depth;
};

/* regex.c */

/* schema__regex_compile compiles an ECMAScript-flavoured pattern with PCRE2
 * (UTF mode).  Returns the code, or NULL with a description of the problem
 * written to err (at most errlen bytes). */
pcre2_code *schema__regex_compile(const char *source, size_t len, char *err,
				  size_t errlen);

/* schema__regex_match returns 1 when re matches somewhere in s, 0 when it
 * does not, and -1 when matching failed (a match limit, no memory); callers
 * treat -1 as "does not match", which fails closed. */
int schema__regex_match(const struct schema *s, const pcre2_code *re,
			const char *subject, size_t len);

/* schema__regex_match_context returns a new match context with berth's
 * limits on backtracking, or NULL when out of memory. */
pcre2_match_context *schema__regex_match_context(void);

/* format.c */

/* schema__format_lookup returns the id (> 0) of a format berth can assert,
 * or 0 for one it treats as an annotation only. */
int schema__format_lookup(const char *name);

/* schema__format_check returns true when s (len bytes) is valid for the
 * format with id fmt. */
bool schema__format_check(int fmt, const char *s, size_t len);

/* validate.c */

/* schema__valid_node returns true when inst is valid against n, a node of
 * s, evaluated on its own (an empty dynamic scope). */
bool schema__valid_node(const struct schema *s, const struct schema__node *n,
			const json_t *inst);

/* defaults.c */

/* schema__mark_defaults sets has_defaults on every node of s from which
 * schema_apply_defaults can reach a default; compile time only. */
void schema__mark_defaults(struct schema *s);

/* metaschema.c */

/* schema__metaschemas is a NULL-terminated list of the draft 2020-12
 * meta-schema documents (JSON text), each with its "$id". */
extern const char *const schema__metaschemas[];

#endif

/*
 * schema: a JSON Schema compiler and validator on jansson.
 *
 * Draft 2020-12 is the default dialect; a schema that names draft-07 in its
 * "$schema" also gets the draft-07 forms ("definitions", array-form "items",
 * "additionalItems", "dependencies").  A schema is compiled once into a
 * struct schema and can then validate any number of instances, from any
 * number of threads at once: a compiled schema is never written to after
 * schema_compile returns.
 *
 * Remote references ("$ref": "http://...") resolve only against documents
 * added to a struct schema_registry and against the draft 2020-12
 * meta-schemas built into this library; nothing is ever fetched from the
 * network.
 *
 * Errors follow berth's convention: 0 or a negative errno value, NULL for a
 * failed pointer.  Every error message is a malloc'd string the caller frees.
 */
#ifndef BERTH_SCHEMA_H
#define BERTH_SCHEMA_H

#include <stdbool.h>
#include <jansson.h>

/* A compiled, immutable validator; safe to use from several threads at once. */
struct schema;

/* Documents that "$ref" may reach by URI.  Not thread-safe while it is being
 * filled; read-only (and so shareable) while schemas are compiled from it. */
struct schema_registry;

/*
 * Options for schema_compile.  A zeroed struct (or NULL) means the defaults.
 *
 * format_assert: make "format" an assertion for date-time, date, time,
 *   duration, email, hostname, ipv4, ipv6, uri, uri-reference, uuid and regex.
 *   By default "format" is an annotation only, as the specification says.
 * max_depth: how deep schema nesting and evaluation may go before the schema
 *   is refused (at compile time) or the instance is rejected (at validation
 *   time); 0 means SCHEMA_DEFAULT_MAX_DEPTH.  This is what keeps a deep
 *   schema, a deep instance or a "$dynamicRef" loop off the end of the stack.
 */
struct schema_options {
	bool format_assert;
	int max_depth;
};

#define SCHEMA_DEFAULT_MAX_DEPTH 512

/* The most errors schema_validate reports for one instance; a huge bad
 * instance cannot produce an unbounded reply, and once they are collected
 * validation goes no further than it must to reach its verdict. */
#define SCHEMA_MAX_ERRORS 100

/*
 * The most steps one validation, or one filling of defaults with the
 * validations it runs to choose a branch, may take.  A step is a subschema
 * evaluated, or the work a subschema does on its own for about as long
 * (a member or item visited, a value compared or copied, 64 bytes of a
 * string scanned, an item of a pattern tried; schema/validate.c and
 * schema/regex.c say what each costs).  A typical tool input takes tens of
 * steps, and a 1 MiB one a few hundred thousand; ten million take about a
 * third of a second of one core in a release build.  It bounds what no other
 * limit does: a schema whose references fan out ("allOf" twice to the next
 * "$defs" entry, forty times over) or patterns that backtrack on every
 * string of a long array.  Past it, validation fails with one error, "the
 * schema takes too long to check this value", at the place it stopped.
 */
#define SCHEMA_MAX_STEPS 10000000

/*
 * The most values one filling of defaults (schema_fill_defaults) may
 * insert, counting every value inside each default inserted (a default
 * {"a": [1, 2]} is four) and one more for every 64 bytes of a string.  Far
 * above what any tool's defaults fill in (a few, or a few per item of an
 * array), and small enough in memory (some megabytes): without it a
 * default that holds a "$ref" back to its own schema fills a tree as wide
 * as two to the power of half the depth limit.
 */
#define SCHEMA_MAX_DEFAULT_VALUES 100000

/* schema_registry_create returns a new, empty registry, or NULL when out of
 * memory.  The caller frees it with schema_registry_destroy. */
struct schema_registry *schema_registry_create(void);

/*
 * schema_registry_add registers doc under the absolute URI uri (a fragment,
 * if any, is ignored), so that "$ref" can reach it and, through its "$id"s,
 * the resources inside it.  doc is borrowed: the registry keeps its own deep
 * copy.  Returns 0, -EINVAL (with *errmsg, if errmsg is not NULL, set to a
 * malloc'd explanation the caller frees) when uri is not absolute or doc is
 * neither an object nor a boolean, -EEXIST when uri is already registered,
 * or -ENOMEM.
 */
int schema_registry_add(struct schema_registry *reg, const char *uri,
			json_t *doc, char **errmsg);

/* schema_registry_destroy frees reg and its documents.  Schemas compiled with
 * reg stay valid: they hold what they need. NULL is a no-op. */
void schema_registry_destroy(struct schema_registry *reg);

/*
 * schema_compile compiles doc (borrowed; the schema keeps its own deep copy)
 * into a new validator the caller frees with schema_free.  opt may be NULL
 * for the defaults and reg may be NULL for no remote documents.  Returns NULL
 * when doc is not a valid schema or memory runs out; then, if errmsg is not
 * NULL, *errmsg is a malloc'd message the caller frees, saying what is wrong
 * and where, as a JSON Pointer into the schema ("/properties/age/minimum:
 * must be a number").
 */
struct schema *schema_compile(const json_t *doc,
			      const struct schema_options *opt,
			      struct schema_registry *reg, char **errmsg);

/* schema_compile_text parses json_text and compiles it as schema_compile
 * does; a parse error is reported in *errmsg with its line and column. */
struct schema *schema_compile_text(const char *json_text,
				   const struct schema_options *opt,
				   struct schema_registry *reg, char **errmsg);

/* schema_free frees s.  NULL is a no-op. */
void schema_free(struct schema *s);

/*
 * schema_valid returns true when instance (borrowed) is valid against s.
 * This is the fast path: it collects no errors, stops at the first failure
 * and keeps no annotations unless the schema uses unevaluatedItems or
 * unevaluatedProperties.
 */
bool schema_valid(const struct schema *s, const json_t *instance);

/*
 * schema_validate returns 0 when instance (borrowed) is valid against s,
 * -EINVAL when it is not, and -ENOMEM when memory runs out.  On -EINVAL, if
 * errors is not NULL, *errors is set to a new JSON array (the caller owns the
 * reference) of at most SCHEMA_MAX_ERRORS objects
 *   {"instancePath": "/items/0/name",     a JSON Pointer into the instance
 *    "keyword": "type",                   the keyword that failed
 *    "schemaPath": "#/properties/items/...", where that keyword sits
 *    "message": "must be string, got number"}
 * On 0 and -ENOMEM, *errors is set to NULL.
 *
 * A validation that cannot be finished fails with one error alone, wherever
 * it was ("not" and "anyOf" included): more than SCHEMA_MAX_STEPS steps
 * (keyword "", schemaPath the subschema it stopped at, "the schema takes
 * too long to check this value: ..."), an instance nested deeper than
 * max_depth (keyword "$ref"), or a "pattern" or "patternProperties" whose
 * regular expression PCRE2 gives up on ("cannot check pattern ...").
 * schema_valid is false for them.
 */
int schema_validate(const struct schema *s, const json_t *instance,
		    json_t **errors);

/* schema_has_defaults returns true when schema_apply_defaults can change an
 * instance: a "default" sits where it looks (schema/defaults.c says where).
 * Decided once, when s is compiled, so that a caller on a hot path pays one
 * test for a schema without defaults. */
bool schema_has_defaults(const struct schema *s);

/*
 * schema_fill_defaults sets *filled to a new reference to instance
 * (borrowed) with the defaults of s filled in where it lacks them, as Zod's
 * parse and Ajv's useDefaults fill them: absent properties of "properties"
 * and missing trailing places of "prefixItems" get their "default",
 * recursively through the values that are there, "$ref", "allOf", and an
 * "anyOf" or "oneOf" branch when exactly one accepts the instance
 * (schema/defaults.c has the whole rule and why).  instance itself is
 * never changed: when anything is filled the result is a new value,
 * otherwise it is instance (a new reference to it).  Validation is
 * separate: a caller fills, then validates what it got, so that a property
 * that is "required" and has a default passes when absent, as it does in
 * Zod.  Safe from several threads at once, like validation.
 *
 * Returns 0; -EINVAL when instance is NULL (*errors NULL) or when filling
 * would go past SCHEMA_MAX_DEFAULT_VALUES values inserted or
 * SCHEMA_MAX_STEPS steps, or meets a pattern PCRE2 gives up on: then, if
 * errors is not NULL, *errors is a new array of one error object as
 * schema_validate reports them (keyword "default" and the default's
 * schemaPath for the first limit), at the place filling stopped; or
 * -ENOMEM.  *filled is NULL unless 0 is returned.
 */
int schema_fill_defaults(const struct schema *s, const json_t *instance,
			 json_t **filled, json_t **errors);

/* schema_apply_defaults is schema_fill_defaults without the errors: it
 * returns the filled value (new), or NULL when instance is NULL, memory
 * runs out or a limit stops the filling. */
json_t *schema_apply_defaults(const struct schema *s, const json_t *instance);

/* schema_doc returns the schema document s was compiled from (a borrowed
 * reference that lives as long as s). */
const json_t *schema_doc(const struct schema *s);

#endif

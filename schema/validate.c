/*
 * validate: evaluates an instance against a compiled schema.
 *
 * One recursive function, eval, applies a node to an instance location.  It
 * runs in two modes.  With v->errors NULL (schema_valid, and every place
 * whose errors would be thrown away: "not", "if", "contains") it stops at the
 * first failure.  With v->errors set (schema_validate) it evaluates every
 * keyword and appends one error object per failure, at most
 * SCHEMA_MAX_ERRORS of them.
 *
 * Annotations (which properties and items have been evaluated) are kept only
 * for the nodes whose result an "unevaluatedProperties" or
 * "unevaluatedItems" needs: such a node passes a struct ann down through the
 * in-place applicators ("$ref", "allOf", ...), each applicator hands its
 * subschema a fresh one and merges it only if the subschema passed, because
 * the specification drops the annotations of failed subschemas.  Everything
 * else passes NULL and pays nothing.
 *
 * Recursion is bounded by schema->max_depth, counted per node evaluated, so
 * a deep instance or a "$dynamicRef" loop ends with an error instead of a
 * stack overflow.  Time is bounded by a budget of SCHEMA_MAX_STEPS (struct
 * schema__run): every node evaluated costs a step, and so does the work a
 * node does on its own in proportion to the instance or to its keywords
 * (members and items visited, values compared, bytes scanned, patterns
 * matched), so that no schema, however its references fan out, and no
 * instance can keep the caller's thread for long.  A validation that runs
 * out, or is nested too deeply, or meets a pattern PCRE2 gives up on, is
 * stopped and fails with that one error.
 *
 * Once SCHEMA_MAX_ERRORS errors are collected, a keyword that fails ends
 * the evaluation of its node, as it does when errors are not collected:
 * the node has failed either way and no more errors would be kept, so the
 * verdict is the same and a huge bad instance costs no more than its first
 * errors.  (Errors are only reported on a failing path; the failed branches
 * of a passing "anyOf" drop theirs, and then there is room again.)
 */
#include "schema/internal.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The dynamic scope: the resources entered so far, innermost first. */
struct scope {
	const struct scope *up;
	const struct schema__resource *res;
};

/* What has been evaluated at one instance location. */
struct ann {
	json_t *props; /* names evaluated, as a set; NULL until the first */
	bool all_props;
	unsigned char *items; /* one flag per index; NULL until the first */
	size_t nitems;
	bool all_items;
};

struct vctx {
	const struct schema *s;
	json_t *errors;
	bool oom;
	int depth;
	struct schema__run run;
};

/* What a reported error costs in steps: its message and path are
 * formatted and allocated, which takes about as long as evaluating forty
 * nodes, and the errors of failed branches may be reported and dropped
 * over and over. */
#define REPORT_STEPS 40

static bool eval(struct vctx *v, const struct schema__node *n, const json_t *inst,
		 const struct schema__ipath *path, const struct scope *scope, struct ann *a);

/* ---- Errors ---- */

static void put_token(char **out, size_t *len, size_t *cap, const char *s, bool *oom)
{
	size_t k = strlen(s);

	if (*len + 2 * k + 2 > *cap) {
		size_t c = (*len + 2 * k + 2) * 2;
		char *p = realloc(*out, c);

		if (!p) {
			*oom = true;
			return;
		}
		*out = p;
		*cap = c;
	}
	(*out)[(*len)++] = '/';
	for (; *s; s++) {
		if (*s == '~' || *s == '/') {
			(*out)[(*len)++] = '~';
			(*out)[(*len)++] = *s == '~' ? '0' : '1';
		} else {
			(*out)[(*len)++] = *s;
		}
	}
	(*out)[*len] = '\0';
}

/* instance_path returns the JSON Pointer of p as a new string. */
static char *instance_path(const struct schema__ipath *p, bool *oom)
{
	size_t depth = 0, len = 0, cap = 64, i = 0;
	const struct schema__ipath **frames;
	char *out = malloc(cap);

	for (const struct schema__ipath *q = p; q; q = q->up)
		depth++;
	frames = malloc((depth + 1) * sizeof(*frames));
	if (!out || !frames) {
		free(out);
		free(frames);
		*oom = true;
		return NULL;
	}
	out[0] = '\0';
	for (const struct schema__ipath *q = p; q; q = q->up)
		frames[depth - ++i] = q;
	for (i = 0; i < depth && !*oom; i++) {
		char num[32];

		if (frames[i]->key) {
			put_token(&out, &len, &cap, frames[i]->key, oom);
		} else {
			snprintf(num, sizeof(num), "%zu", frames[i]->index);
			put_token(&out, &len, &cap, num, oom);
		}
	}
	free(frames);
	if (*oom) {
		free(out);
		return NULL;
	}
	return out;
}

json_t *schema__error(const struct schema__ipath *path, const char *loc,
		      const char *kw, const char *msg)
{
	char *ipath, *spath = NULL;
	bool oom = false;
	json_t *e = NULL;

	ipath = instance_path(path, &oom);
	if (ipath && asprintf(&spath, "%s%s%s", loc, kw[0] ? "/" : "", kw) >= 0)
		e = json_pack("{s:s, s:s, s:s, s:s}", "instancePath", ipath,
			      "keyword", kw, "schemaPath", spath, "message", msg);
	free(ipath);
	free(spath);
	return e;
}

__attribute__((format(printf, 5, 6)))
static void report(struct vctx *v, const struct schema__ipath *path,
		   const struct schema__node *n, const char *kw, const char *fmt, ...)
{
	char msg[600];
	json_t *e;
	va_list ap;

	if (!v->errors || json_array_size(v->errors) >= SCHEMA_MAX_ERRORS)
		return;
	v->run.steps -= REPORT_STEPS;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	e = schema__error(path, n->loc, kw, msg);
	if (!e || json_array_append_new(v->errors, e))
		v->oom = true;
}

/* ---- Stopping ---- */

void schema__run_release(struct schema__run *r)
{
	pcre2_match_data_free(r->md);
	pcre2_match_context_free(r->mctx);
	json_decref(r->stop);
	r->md = NULL;
	r->mctx = NULL;
	r->stop = NULL;
}

bool schema__run_stop(struct schema__run *r, const struct schema__ipath *path,
		      const char *loc, const char *kw, const char *fmt, ...)
{
	char msg[600];
	va_list ap;

	if (r->stopped)
		return true;
	/* Below 0, so that every node evaluated from here on fails at its
	 * first test (eval). */
	r->steps = -1;
	r->stopped = true;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r->stop = schema__error(path, loc, kw, msg);
	return r->stop != NULL;
}

/* halt stops the validation at node n, path; returns false, the result of
 * whatever was being evaluated. */
__attribute__((format(printf, 5, 6)))
static bool halt(struct vctx *v, const struct schema__ipath *path,
		 const struct schema__node *n, const char *kw, const char *fmt, ...)
{
	char msg[600];
	va_list ap;

	if (v->run.stopped)
		return false;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!schema__run_stop(&v->run, path, n->loc, kw, "%s", msg))
		v->oom = true;
	return false;
}

static bool out_of_steps(struct vctx *v, const struct schema__ipath *path,
			 const struct schema__node *n)
{
	return halt(v, path, n, "", "the schema takes too long to check this "
		    "value: more than %d steps (stopped at %s)", SCHEMA_MAX_STEPS,
		    n->loc);
}

/* match runs a pattern for keyword kw of n; returns 1 or 0, or -1 after
 * stopping the validation when there is no answer. */
static int match(struct vctx *v, const struct schema__ipath *path,
		 const struct schema__node *n, const char *kw, const pcre2_code *re,
		 const char *source, const char *subject, size_t len)
{
	switch (schema__regex_match(&v->run, re, subject, len)) {
	case SCHEMA__RE_MATCH:
		return 1;
	case SCHEMA__RE_NO_MATCH:
		return 0;
	case SCHEMA__RE_OUT_OF_STEPS:
		out_of_steps(v, path, n);
		return -1;
	case SCHEMA__RE_NOMEM:
		v->oom = true;
		halt(v, path, n, kw, "out of memory");
		return -1;
	case SCHEMA__RE_TOO_LONG:
		halt(v, path, n, kw, "cannot check pattern \"%s\": the regular "
		     "expression repeats a group too often for this %s (more "
		     "than 64 MiB of the engine's memory)",
		     source, strcmp(kw, "pattern") ? "property name" : "value");
		return -1;
	default:
		halt(v, path, n, kw, "cannot check pattern \"%s\": the regular "
		     "expression needs too much backtracking for this %s",
		     source, strcmp(kw, "pattern") ? "property name" : "value");
		return -1;
	}
}

static size_t error_mark(const struct vctx *v)
{
	return v->errors ? json_array_size(v->errors) : 0;
}

/* drop_errors forgets the errors reported since mark (the failed branches
 * of an "anyOf" that passed). */
static void drop_errors(struct vctx *v, size_t mark)
{
	while (v->errors && json_array_size(v->errors) > mark)
		json_array_remove(v->errors, json_array_size(v->errors) - 1);
}

/* The errors of the branches of a failed "anyOf" or "oneOf" that are
 * kept before its own: a union of a hundred literals (Zod's z.enum of
 * objects, z.union) must not fill SCHEMA_MAX_ERRORS with "must be equal
 * to constant", leaving out its own error and every other field's. */
#define BRANCH_ERRORS_KEPT 10

/* trim_branch_errors keeps the first BRANCH_ERRORS_KEPT errors reported
 * since mark (by the branches of a combinator that failed). */
static void trim_branch_errors(struct vctx *v, size_t mark)
{
	drop_errors(v, mark + BRANCH_ERRORS_KEPT);
}

/* ---- Annotations ---- */

static void ann_prop(struct vctx *v, struct ann *a, const char *key)
{
	if (!a || a->all_props)
		return;
	if (!a->props && !(a->props = json_object())) {
		v->oom = true;
		return;
	}
	if (json_object_set_new(a->props, key, json_null()))
		v->oom = true;
}

static void ann_item(struct vctx *v, struct ann *a, size_t i, size_t n)
{
	if (!a || a->all_items)
		return;
	if (!a->items) {
		v->run.steps -= (long long)(n / 64);
		a->items = calloc(n ? n : 1, 1);
		a->nitems = n;
		if (!a->items) {
			v->oom = true;
			return;
		}
	}
	if (i < a->nitems)
		a->items[i] = 1;
}

static bool ann_has_item(const struct ann *a, size_t i)
{
	return a->all_items || (a->items && i < a->nitems && a->items[i]);
}

static void ann_merge(struct vctx *v, struct ann *dst, const struct ann *src)
{
	const char *key;
	json_t *val;

	dst->all_props |= src->all_props;
	dst->all_items |= src->all_items;
	if (src->props && !dst->all_props)
		json_object_foreach(src->props, key, val) {
			v->run.steps--;
			ann_prop(v, dst, key);
		}
	if (src->items)
		v->run.steps -= (long long)(src->nitems / 64);
	for (size_t i = 0; src->items && i < src->nitems; i++)
		if (src->items[i])
			ann_item(v, dst, i, src->nitems);
}

static void ann_finish(struct ann *a)
{
	json_decref(a->props);
	free(a->items);
}

/* apply evaluates sub at the same instance location; its annotations reach
 * a only if it passes. */
static bool apply(struct vctx *v, const struct schema__node *sub, const json_t *inst,
		  const struct schema__ipath *path, const struct scope *scope, struct ann *a)
{
	struct ann child = { 0 };
	bool ok;

	if (!a)
		return eval(v, sub, inst, path, scope, NULL);
	ok = eval(v, sub, inst, path, scope, &child);
	if (ok)
		ann_merge(v, a, &child);
	ann_finish(&child);
	return ok;
}

/* silent evaluates sub with error collection off, for the keywords whose
 * subschema errors are not errors of the instance ("not", "if",
 * "contains"). */
static bool silent(struct vctx *v, const struct schema__node *sub, const json_t *inst,
		   const struct schema__ipath *path, const struct scope *scope, struct ann *a)
{
	json_t *saved = v->errors;
	bool ok;

	v->errors = NULL;
	ok = eval(v, sub, inst, path, scope, a);
	v->errors = saved;
	return ok;
}

/* ---- Values ---- */

static unsigned type_of(const json_t *j)
{
	double d;

	switch (json_typeof(j)) {
	case JSON_OBJECT:
		return SCHEMA__T_OBJECT;
	case JSON_ARRAY:
		return SCHEMA__T_ARRAY;
	case JSON_STRING:
		return SCHEMA__T_STRING;
	case JSON_INTEGER:
		return SCHEMA__T_INTEGER;
	case JSON_REAL:
		d = json_real_value(j);
		return isfinite(d) && d == floor(d) ? SCHEMA__T_INTEGER : SCHEMA__T_NUMBER;
	case JSON_TRUE:
	case JSON_FALSE:
		return SCHEMA__T_BOOLEAN;
	default:
		return SCHEMA__T_NULL;
	}
}

static const char *type_name(const json_t *j)
{
	switch (json_typeof(j)) {
	case JSON_OBJECT:
		return "object";
	case JSON_ARRAY:
		return "array";
	case JSON_STRING:
		return "string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "boolean";
	default:
		return "null";
	}
}

static void type_list(unsigned bits, char *buf, size_t n)
{
	static const struct {
		unsigned bit;
		const char *name;
	} t[] = {
		{ SCHEMA__T_OBJECT, "object" }, { SCHEMA__T_ARRAY, "array" },
		{ SCHEMA__T_STRING, "string" }, { SCHEMA__T_NUMBER, "number" },
		{ SCHEMA__T_INTEGER, "integer" }, { SCHEMA__T_BOOLEAN, "boolean" },
		{ SCHEMA__T_NULL, "null" },
	};
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (!(bits & t[i].bit))
			continue;
		if (t[i].bit == SCHEMA__T_INTEGER && (bits & SCHEMA__T_NUMBER))
			continue;
		len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s%s",
					len ? " or " : "", t[i].name);
	}
}

static void number_text(const json_t *j, char *buf, size_t n)
{
	if (json_is_integer(j)) {
		snprintf(buf, n, "%lld", (long long)json_integer_value(j));
	} else {
		snprintf(buf, n, "%.15g", json_real_value(j));
		if (strtod(buf, NULL) != json_real_value(j))
			snprintf(buf, n, "%.17g", json_real_value(j));
	}
}

/* compare returns <0, 0 or >0 as a is less than, equal to or greater than b
 * (both numbers); exact when both are integers. */
static int compare(const json_t *a, const json_t *b)
{
	double x, y;

	if (json_is_integer(a) && json_is_integer(b)) {
		json_int_t p = json_integer_value(a), q = json_integer_value(b);

		return (p > q) - (p < q);
	}
	if (json_is_integer(a) || json_is_integer(b)) {
		/* An integer beside a real: compared exactly, in a long
		 * double (64 bits of mantissa on x86-64, where an int64 and
		 * a double both fit). As doubles, 9007199254740993 was equal
		 * to 9007199254740992.0 and passed it as a maximum. */
		long double lx = json_is_integer(a)
					 ? (long double)json_integer_value(a)
					 : (long double)json_real_value(a);
		long double ly = json_is_integer(b)
					 ? (long double)json_integer_value(b)
					 : (long double)json_real_value(b);

		return (lx > ly) - (lx < ly);
	}
	x = json_number_value(a);
	y = json_number_value(b);
	return (x > y) - (x < y);
}

/* equal compares two instances the way JSON Schema does: 1 and 1.0 are the
 * same number, object members are unordered.  Each value compared costs a
 * step. */
static bool equal(struct vctx *v, const json_t *a, const json_t *b, int depth)
{
	const char *key;
	json_t *va;
	size_t i;

	v->run.steps--;
	if (depth > 4096)
		return false;
	if (json_is_number(a) && json_is_number(b))
		return compare(a, b) == 0;
	if (json_typeof(a) != json_typeof(b))
		return false;
	switch (json_typeof(a)) {
	case JSON_STRING:
		return json_string_length(a) == json_string_length(b) &&
		       memcmp(json_string_value(a), json_string_value(b),
			      json_string_length(a)) == 0;
	case JSON_ARRAY:
		if (json_array_size(a) != json_array_size(b))
			return false;
		json_array_foreach(a, i, va)
			if (!equal(v, va, json_array_get(b, i), depth + 1))
				return false;
		return true;
	case JSON_OBJECT:
		if (json_object_size(a) != json_object_size(b))
			return false;
		json_object_foreach((json_t *)a, key, va) {
			json_t *vb = json_object_get(b, key);

			if (!vb || !equal(v, va, vb, depth + 1))
				return false;
		}
		return true;
	default:
		return true;
	}
}

/* hash is consistent with equal: equal instances hash alike.  Each value
 * hashed costs a step, and a string one per 64 bytes. */
static uint64_t hash(struct vctx *v, const json_t *j, int depth)
{
	uint64_t h = 1469598103934665603ULL;
	const char *key;
	json_t *val;
	size_t i;

	v->run.steps--;
	if (depth > 4096)
		return 0;
	switch (json_typeof(j)) {
	case JSON_INTEGER:
	case JSON_REAL: {
		double d = json_number_value(j);
		uint64_t bits;

		if (d == 0)
			d = 0; /* -0.0 equals 0 */
		memcpy(&bits, &d, sizeof(bits));
		return bits * 0x9E3779B97F4A7C15ULL;
	}
	case JSON_STRING:
		v->run.steps -= (long long)(json_string_length(j) / 64);
		for (i = 0; i < json_string_length(j); i++)
			h = (h ^ (unsigned char)json_string_value(j)[i]) * 1099511628211ULL;
		return h;
	case JSON_ARRAY:
		json_array_foreach(j, i, val)
			h = (h ^ hash(v, val, depth + 1)) * 1099511628211ULL;
		return h + 1;
	case JSON_OBJECT: {
		uint64_t sum = 0;

		json_object_foreach((json_t *)j, key, val) {
			uint64_t k = 1469598103934665603ULL;

			for (const char *p = key; *p; p++)
				k = (k ^ (unsigned char)*p) * 1099511628211ULL;
			sum += k * (hash(v, val, depth + 1) | 1);
		}
		return sum + 2;
	}
	default:
		return (uint64_t)json_typeof(j) + 3;
	}
}

struct hashed {
	uint64_t h;
	size_t i;
};

static int by_hash(const void *a, const void *b)
{
	const struct hashed *x = a, *y = b;

	if (x->h != y->h)
		return x->h < y->h ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* find_duplicate returns true and the indices of two equal items, if any;
 * sorting by hash keeps it near-linear for large arrays. */
static bool find_duplicate(struct vctx *v, const json_t *arr, size_t *first, size_t *second)
{
	size_t n = json_array_size(arr);
	struct hashed *hs;
	bool found = false;

	if (n < 2)
		return false;
	hs = malloc(n * sizeof(*hs));
	if (!hs) {
		v->oom = true;
		return false;
	}
	for (size_t i = 0; i < n; i++)
		hs[i] = (struct hashed){ hash(v, json_array_get(arr, i), 0), i };
	v->run.steps -= (long long)n;
	qsort(hs, n, sizeof(*hs), by_hash);
	for (size_t i = 0; i < n && !found; i++)
		for (size_t k = i + 1; k < n && hs[k].h == hs[i].h && !found; k++)
			if (equal(v, json_array_get(arr, hs[i].i),
				  json_array_get(arr, hs[k].i), 0)) {
				*first = hs[i].i;
				*second = hs[k].i;
				found = true;
			}
	free(hs);
	return found;
}

static size_t utf8_length(const char *s, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++)
		n += ((unsigned char)s[i] & 0xC0) != 0x80;
	return n;
}

/* ---- Keyword groups ---- */

/* stop_early tells whether a node whose keyword failed is done: when
 * errors are not collected, when no more would be kept (the file's
 * comment), or when the validation is stopped. */
static bool stop_early(const struct vctx *v)
{
	return !v->errors || v->run.stopped ||
	       json_array_size(v->errors) >= SCHEMA_MAX_ERRORS;
}

#define STOP_EARLY(ok) do { if (!(ok) && stop_early(v)) return false; } while (0)

static bool multiple_of(const json_t *x, const json_t *m)
{
	double q, r;

	if (json_is_integer(x) && json_is_integer(m))
		return json_integer_value(x) % json_integer_value(m) == 0;
	/* A real that is a whole number an integer holds (1e17) is judged
	 * as that integer, so that it gets the verdict 100000000000000000
	 * gets. */
	if (json_is_real(x) && json_is_integer(m) &&
	    fabs(json_real_value(x)) < 9.2e18 &&
	    json_real_value(x) == nearbyint(json_real_value(x)))
		return (json_int_t)json_real_value(x) % json_integer_value(m) == 0;
	q = json_number_value(x) / json_number_value(m);
	if (!isfinite(q))
		return false;
	/* The quotient of two doubles is off by a few units in its last
	 * place (0.0075 / 0.0001 is 75.00000000000001): a tolerance that
	 * grows with it, and no floor, which took 0.30000000001 for a
	 * multiple of 0.1. */
	r = q - nearbyint(q);
	return fabs(r) <= fabs(q) * DBL_EPSILON * 4;
}

static bool numeric(struct vctx *v, const struct schema__node *n, const json_t *inst,
		    const struct schema__ipath *path)
{
	static const struct {
		size_t off;
		const char *kw, *op;
		int fail_if; /* fail when compare() has this sign (or 0 too) */
		bool or_equal;
	} limits[] = {
		{ offsetof(struct schema__node, maximum), "maximum", "<=", 1, false },
		{ offsetof(struct schema__node, exclusive_maximum), "exclusiveMaximum", "<", 1, true },
		{ offsetof(struct schema__node, minimum), "minimum", ">=", -1, false },
		{ offsetof(struct schema__node, exclusive_minimum), "exclusiveMinimum", ">", -1, true },
	};
	bool ok = true;
	char num[64];

	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		const json_t *lim = *(const json_t *const *)((const char *)n + limits[i].off);
		int c;

		if (!lim)
			continue;
		c = compare(inst, lim);
		if (c == limits[i].fail_if || (limits[i].or_equal && c == 0)) {
			number_text(lim, num, sizeof(num));
			report(v, path, n, limits[i].kw, "must be %s %s", limits[i].op, num);
			ok = false;
			STOP_EARLY(ok);
		}
	}
	if (n->multiple_of && !multiple_of(inst, n->multiple_of)) {
		number_text(n->multiple_of, num, sizeof(num));
		report(v, path, n, "multipleOf", "must be a multiple of %s", num);
		ok = false;
	}
	return ok;
}

static bool string(struct vctx *v, const struct schema__node *n, const json_t *inst,
		   const struct schema__ipath *path)
{
	const char *s = json_string_value(inst);
	size_t len = json_string_length(inst);
	bool ok = true;

	if (n->max_length >= 0 || n->min_length >= 0) {
		size_t chars = utf8_length(s, len);

		v->run.steps -= (long long)(len / 64);
		if (n->max_length >= 0 && chars > (size_t)n->max_length) {
			report(v, path, n, "maxLength", "must not have more than %lld %s",
			       n->max_length, n->max_length == 1 ? "character" : "characters");
			ok = false;
			STOP_EARLY(ok);
		}
		if (n->min_length >= 0 && chars < (size_t)n->min_length) {
			report(v, path, n, "minLength", "must have at least %lld %s",
			       n->min_length, n->min_length == 1 ? "character" : "characters");
			ok = false;
			STOP_EARLY(ok);
		}
	}
	if (n->pattern) {
		int m = match(v, path, n, "pattern", n->pattern, n->pattern_source, s, len);

		if (m == 0)
			report(v, path, n, "pattern", "must match pattern \"%s\"",
			       n->pattern_source);
		if (m != 1) {
			ok = false;
			STOP_EARLY(ok);
		}
	}
	if (n->format)
		v->run.steps -= 1 + (long long)(len / 16);
	if (n->format && !schema__format_check(n->format, s, len)) {
		report(v, path, n, "format", "must match format \"%s\"", n->format_name);
		ok = false;
	}
	return ok;
}

static bool array(struct vctx *v, const struct schema__node *n, const json_t *inst,
		  const struct schema__ipath *path, const struct scope *scope, struct ann *a)
{
	size_t size = json_array_size(inst), i0 = 0, i1 = 0;
	bool ok = true;

	if (n->max_items >= 0 && size > (size_t)n->max_items) {
		report(v, path, n, "maxItems", "must not have more than %lld %s", n->max_items,
		       n->max_items == 1 ? "item" : "items");
		ok = false;
		STOP_EARLY(ok);
	}
	if (n->min_items >= 0 && size < (size_t)n->min_items) {
		report(v, path, n, "minItems", "must have at least %lld %s", n->min_items,
		       n->min_items == 1 ? "item" : "items");
		ok = false;
		STOP_EARLY(ok);
	}
	if (n->unique_items && find_duplicate(v, inst, &i0, &i1)) {
		report(v, path, n, "uniqueItems",
		       "must not have duplicate items (items %zu and %zu are equal)", i0, i1);
		ok = false;
		STOP_EARLY(ok);
	}
	for (size_t i = 0; i < size && i < n->nprefix_items; i++) {
		struct schema__ipath cp = { path, NULL, i };

		ok &= eval(v, n->prefix_items[i], json_array_get(inst, i), &cp, scope, NULL);
		STOP_EARLY(ok);
		ann_item(v, a, i, size);
	}
	if (n->items && size > n->nprefix_items) {
		if (n->items->is_bool && !n->items->bool_value) {
			report(v, path, n, n->draft7 && json_is_array(
					    json_object_get(n->json, "items"))
					    ? "additionalItems" : "items",
			       "must not have more than %zu %s",
			       n->nprefix_items,
			       n->nprefix_items == 1 ? "item" : "items");
			ok = false;
			STOP_EARLY(ok);
		} else {
			for (size_t i = n->nprefix_items; i < size; i++) {
				struct schema__ipath cp = { path, NULL, i };

				ok &= eval(v, n->items, json_array_get(inst, i), &cp, scope, NULL);
				STOP_EARLY(ok);
			}
		}
		if (a)
			a->all_items = true;
	}
	if (n->contains) {
		long long min = n->min_contains >= 0 ? n->min_contains : 1;
		long long count = 0;

		for (size_t i = 0; i < size; i++) {
			struct schema__ipath cp = { path, NULL, i };

			if (v->run.stopped)
				return false;
			if (silent(v, n->contains, json_array_get(inst, i), &cp, scope, NULL)) {
				count++;
				ann_item(v, a, i, size);
				if (!a && !v->errors && n->max_contains < 0 && count >= min)
					break;
			}
		}
		if (count < min) {
			if (n->min_contains >= 0)
				report(v, path, n, "minContains", "must contain at least %lld "
				       "%s the \"contains\" schema", min,
				       min == 1 ? "item that matches" : "items that match");
			else
				report(v, path, n, "contains", "must contain at least one item "
				       "that matches the \"contains\" schema");
			ok = false;
			STOP_EARLY(ok);
		}
		if (n->max_contains >= 0 && count > n->max_contains) {
			report(v, path, n, "maxContains", "must contain at most %lld %s "
			       "the \"contains\" schema", n->max_contains,
			       n->max_contains == 1 ? "item that matches"
						    : "items that match");
			ok = false;
		}
	}
	return ok;
}

static bool object(struct vctx *v, const struct schema__node *n, const json_t *inst,
		   const struct schema__ipath *path, const struct scope *scope, struct ann *a)
{
	size_t size = json_object_size(inst);
	const char *key;
	json_t *val;
	bool ok = true;

	if (n->max_properties >= 0 && size > (size_t)n->max_properties) {
		report(v, path, n, "maxProperties", "must not have more than %lld %s",
		       n->max_properties,
		       n->max_properties == 1 ? "property" : "properties");
		ok = false;
		STOP_EARLY(ok);
	}
	if (n->min_properties >= 0 && size < (size_t)n->min_properties) {
		report(v, path, n, "minProperties", "must have at least %lld %s",
		       n->min_properties,
		       n->min_properties == 1 ? "property" : "properties");
		ok = false;
		STOP_EARLY(ok);
	}
	v->run.steps -= (long long)n->nrequired;
	for (size_t i = 0; i < n->nrequired; i++)
		if (!json_object_get(inst, n->required[i])) {
			report(v, path, n, "required", "must have required property '%s'",
			       n->required[i]);
			ok = false;
			STOP_EARLY(ok);
		}
	for (size_t i = 0; i < n->ndep_required; i++) {
		const struct schema__dep *d = &n->dep_required[i];

		v->run.steps--;
		if (!json_object_get(inst, d->name))
			continue;
		v->run.steps -= (long long)d->n;
		for (size_t k = 0; k < d->n; k++)
			if (!json_object_get(inst, d->names[k])) {
				report(v, path, n, n->draft7 ? "dependencies"
							   : "dependentRequired",
				       "must have property '%s' "
				       "when property '%s' is present", d->names[k], d->name);
				ok = false;
				STOP_EARLY(ok);
			}
	}
	if (n->properties || n->pattern_props || n->additional_properties || n->property_names) {
		json_object_foreach((json_t *)inst, key, val) {
			struct schema__ipath cp = { path, key, 0 };
			json_t *idx = n->prop_index ? json_object_get(n->prop_index, key) : NULL;
			bool matched = false;

			v->run.steps--;
			if (idx) {
				matched = true;
				ok &= eval(v, n->properties[json_integer_value(idx)].node, val,
					   &cp, scope, NULL);
				STOP_EARLY(ok);
			}
			for (size_t i = 0; i < n->npattern_props; i++) {
				const struct schema__pattern *p = &n->pattern_props[i];
				int m = match(v, &cp, n, "patternProperties", p->re,
					      p->source, key, strlen(key));

				if (m < 0)
					return false;
				if (m == 1) {
					matched = true;
					ok &= eval(v, p->node, val, &cp, scope, NULL);
					STOP_EARLY(ok);
				}
			}
			if (!matched && n->additional_properties) {
				const struct schema__node *ap = n->additional_properties;

				matched = true;
				if (ap->is_bool && !ap->bool_value) {
					report(v, path, n, "additionalProperties",
					       "must not have additional property '%s'", key);
					ok = false;
				} else {
					ok &= eval(v, ap, val, &cp, scope, NULL);
				}
				STOP_EARLY(ok);
			}
			if (matched)
				ann_prop(v, a, key);
			if (n->property_names) {
				json_t *name = json_string(key);
				bool r;

				if (!name) {
					v->oom = true;
					return false;
				}
				/* A name has no place of its own in the
				 * instance: its errors are the object's
				 * (at cp they would name the member's
				 * value). */
				r = eval(v, n->property_names, name, path, scope,
					 NULL);
				json_decref(name);
				if (!r) {
					report(v, path, n, "propertyNames",
					       "property name '%s' is invalid", key);
					ok = false;
					STOP_EARLY(ok);
				}
			}
		}
	}
	for (size_t i = 0; i < n->ndep_schemas; i++) {
		v->run.steps--;
		if (!json_object_get(inst, n->dep_schemas[i].name))
			continue;
		ok &= apply(v, n->dep_schemas[i].node, inst, path, scope, a);
		STOP_EARLY(ok);
	}
	return ok;
}

/* combinators applies allOf, anyOf, oneOf, not and if/then/else. */
static bool combinators(struct vctx *v, const struct schema__node *n, const json_t *inst,
			const struct schema__ipath *path, const struct scope *scope, struct ann *a)
{
	bool ok = true;

	for (size_t i = 0; i < n->nall_of; i++) {
		ok &= apply(v, n->all_of[i], inst, path, scope, a);
		STOP_EARLY(ok);
	}
	if (n->nany_of) {
		size_t mark = error_mark(v);
		bool any = false;

		for (size_t i = 0; i < n->nany_of; i++) {
			if (apply(v, n->any_of[i], inst, path, scope, a)) {
				any = true;
				if (!a)
					break;
			}
		}
		if (any) {
			drop_errors(v, mark);
		} else {
			trim_branch_errors(v, mark);
			report(v, path, n, "anyOf", "must match at least one schema in anyOf");
			ok = false;
			STOP_EARLY(ok);
		}
	}
	if (n->none_of) {
		size_t mark = error_mark(v), first = 0, second = 0;
		int count = 0;

		for (size_t i = 0; i < n->none_of; i++) {
			struct ann child = { 0 };

			if (eval(v, n->one_of[i], inst, path, scope, a ? &child : NULL)) {
				if (count++ == 0) {
					first = i;
					if (a)
						ann_merge(v, a, &child);
				} else {
					second = i;
				}
			}
			ann_finish(&child);
			if (count > 1)
				break;
		}
		if (count == 1) {
			drop_errors(v, mark);
		} else {
			if (count > 1) {
				drop_errors(v, mark);
				report(v, path, n, "oneOf", "must match exactly one schema in "
				       "oneOf, but matches %zu and %zu", first, second);
			} else {
				trim_branch_errors(v, mark);
				report(v, path, n, "oneOf",
				       "must match exactly one schema in oneOf");
			}
			ok = false;
			STOP_EARLY(ok);
		}
	}
	if (n->not_ && silent(v, n->not_, inst, path, scope, NULL)) {
		report(v, path, n, "not", "must not be valid against the \"not\" schema");
		ok = false;
		STOP_EARLY(ok);
	}
	if (n->if_) {
		struct ann child = { 0 };
		bool cond = silent(v, n->if_, inst, path, scope, a ? &child : NULL);
		const struct schema__node *branch = cond ? n->then_ : n->else_;

		if (cond && a)
			ann_merge(v, a, &child);
		ann_finish(&child);
		if (branch && !apply(v, branch, inst, path, scope, a)) {
			report(v, path, n, "if", "must match the \"%s\" schema",
			       cond ? "then" : "else");
			ok = false;
		}
	}
	return ok;
}

static bool unevaluated(struct vctx *v, const struct schema__node *n, const json_t *inst,
			const struct schema__ipath *path, const struct scope *scope, struct ann *a)
{
	const struct schema__node *u;
	const char *key;
	json_t *val;
	bool ok = true;

	if ((u = n->unevaluated_properties) && json_is_object(inst) && !a->all_props) {
		json_object_foreach((json_t *)inst, key, val) {
			struct schema__ipath cp = { path, key, 0 };

			if (a->props && json_object_get(a->props, key))
				continue;
			if (u->is_bool && !u->bool_value) {
				report(v, path, n, "unevaluatedProperties",
				       "must not have unevaluated property '%s'", key);
				ok = false;
			} else {
				ok &= eval(v, u, val, &cp, scope, NULL);
			}
			STOP_EARLY(ok);
		}
		a->all_props = true;
	}
	if ((u = n->unevaluated_items) && json_is_array(inst) && !a->all_items) {
		for (size_t i = 0; i < json_array_size(inst); i++) {
			struct schema__ipath cp = { path, NULL, i };

			if (ann_has_item(a, i))
				continue;
			if (u->is_bool && !u->bool_value) {
				report(v, &cp, n, "unevaluatedItems",
				       "must not have unevaluated item %zu", i);
				ok = false;
			} else {
				ok &= eval(v, u, json_array_get(inst, i), &cp, scope, NULL);
			}
			STOP_EARLY(ok);
		}
		a->all_items = true;
	}
	return ok;
}

/* dynamic_target finds the outermost resource in the dynamic scope with a
 * "$dynamicAnchor" called name. */
static const struct schema__node *dynamic_target(struct vctx *v,
						 const struct scope *scope,
						 const char *name)
{
	const struct schema__node *found = NULL;

	for (; scope; scope = scope->up)
		for (size_t i = 0; i < scope->res->ndyn; i++, v->run.steps--)
			if (scope->res->dyn[i].node && strcmp(scope->res->dyn[i].name, name) == 0)
				found = scope->res->dyn[i].node;
	return found;
}

static bool eval_object(struct vctx *v, const struct schema__node *n, const json_t *inst,
			const struct schema__ipath *path, const struct scope *scope, struct ann *a)
{
	bool ok = true;

	if (n->ref) {
		ok &= apply(v, n->ref, inst, path, scope, a);
		STOP_EARLY(ok);
	}
	if (n->dynref) {
		const struct schema__node *target = NULL;

		if (n->dynref_anchor)
			target = dynamic_target(v, scope, n->dynref_anchor);
		ok &= apply(v, target ? target : n->dynref, inst, path, scope, a);
		STOP_EARLY(ok);
	}
	if (n->types && !(n->types & type_of(inst))) {
		char want[96];

		type_list(n->types, want, sizeof(want));
		report(v, path, n, "type", "must be %s, got %s", want, type_name(inst));
		ok = false;
		STOP_EARLY(ok);
	}
	if (n->enum_values) {
		bool found = false;

		for (size_t i = 0; i < json_array_size(n->enum_values) && !found; i++)
			found = equal(v, inst, json_array_get(n->enum_values, i), 0);
		if (!found) {
			report(v, path, n, "enum", "%s", n->enum_msg);
			ok = false;
			STOP_EARLY(ok);
		}
	}
	if (n->const_value && !equal(v, inst, n->const_value, 0)) {
		report(v, path, n, "const", "%s", n->const_msg);
		ok = false;
		STOP_EARLY(ok);
	}
	switch (json_typeof(inst)) {
	case JSON_INTEGER:
	case JSON_REAL:
		ok &= numeric(v, n, inst, path);
		break;
	case JSON_STRING:
		ok &= string(v, n, inst, path);
		break;
	case JSON_ARRAY:
		ok &= array(v, n, inst, path, scope, a);
		break;
	case JSON_OBJECT:
		ok &= object(v, n, inst, path, scope, a);
		break;
	default:
		break;
	}
	STOP_EARLY(ok);
	ok &= combinators(v, n, inst, path, scope, a);
	STOP_EARLY(ok);
	if (n->has_uneval)
		ok &= unevaluated(v, n, inst, path, scope, a);
	return ok;
}

static bool eval(struct vctx *v, const struct schema__node *n, const json_t *inst,
		 const struct schema__ipath *path, const struct scope *scope, struct ann *a)
{
	struct scope here;
	struct ann local = { 0 };
	bool ok;

	/* The one test a node pays for the budget; a stopped validation
	 * fails here too, as steps is below 0 then. */
	if (--v->run.steps < 0)
		return out_of_steps(v, path, n);
	if (n->is_bool) {
		if (!n->bool_value)
			report(v, path, n, "false", "is not allowed here (the schema is false)");
		return n->bool_value;
	}
	if (v->depth >= v->s->max_depth)
		return halt(v, path, n, "$ref", "is nested too deeply to validate (more "
			    "than %d levels of schemas)", v->s->max_depth);
	if (!scope || scope->res != n->resource) {
		here.up = scope;
		here.res = n->resource;
		scope = &here;
	}
	v->depth++;
	ok = eval_object(v, n, inst, path, scope, a ? a : n->has_uneval ? &local : NULL);
	v->depth--;
	ann_finish(&local);
	return ok;
}

bool schema_valid(const struct schema *s, const json_t *instance)
{
	struct vctx v = { .s = s, .run = SCHEMA__RUN_INIT };
	bool ok;

	if (!instance)
		return false;
	ok = eval(&v, s->root, instance, NULL, NULL, NULL);
	ok = ok && !v.oom && !v.run.stopped;
	schema__run_finish(&v.run);
	return ok;
}

int schema__valid_node(struct schema__run *run, const struct schema *s,
		       const struct schema__node *n, const json_t *inst,
		       const struct schema__ipath *path)
{
	struct vctx v = { .s = s, .run = *run };
	bool ok;

	ok = eval(&v, n, inst, path, NULL, NULL);
	*run = v.run;
	if (v.oom)
		return -ENOMEM;
	if (run->stopped)
		return -ECANCELED;
	return ok;
}

int schema_validate(const struct schema *s, const json_t *instance, json_t **errors)
{
	struct vctx v = { .s = s, .run = SCHEMA__RUN_INIT };
	bool ok;

	if (errors)
		*errors = NULL;
	if (!instance)
		return -EINVAL;
	v.errors = errors ? json_array() : NULL;
	if (errors && !v.errors)
		return -ENOMEM;
	ok = eval(&v, s->root, instance, NULL, NULL, NULL);
	if (v.run.stopped && !v.oom) {
		/* The error that stopped it is the answer: the others were
		 * collected on the way to a verdict it never reached. */
		ok = false;
		if (v.errors && (json_array_clear(v.errors) ||
				 json_array_append(v.errors, v.run.stop)))
			v.oom = true;
	}
	schema__run_finish(&v.run);
	if (v.oom) {
		json_decref(v.errors);
		return -ENOMEM;
	}
	if (ok) {
		json_decref(v.errors);
		return 0;
	}
	if (errors) {
		if (json_array_size(v.errors) == 0)
			report(&v, NULL, s->root, "$ref", "is not valid");
		*errors = v.errors;
	}
	return -EINVAL;
}

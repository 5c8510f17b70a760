/*
 * params.c: the one place where params are checked (params.h).
 */
#include "api/params.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

#define DEFAULT_MAX_STRING 4096

/* The errors of a check: the array is made on the first error (most
 * params have none); found stays true when it could not be. */
struct problems {
	json_t *list;
	bool found;
};

/* add_error appends {instancePath: "/name", keyword, message} to errors;
 * the message is formatted from fmt. */
static void add_error(struct problems *errors, const char *name,
		      const char *keyword, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void add_error(struct problems *errors, const char *name,
		      const char *keyword, const char *fmt, ...)
{
	char path[160], msg[512];
	va_list ap;

	errors->found = true;
	if (!errors->list && !(errors->list = json_array()))
		return;
	snprintf(path, sizeof path, "/%s", name);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	json_array_append_new(errors->list,
			      json_pack("{s:s, s:s, s:s}", "instancePath", path,
					"keyword", keyword, "message", msg));
}

static bool status_ok(const json_t *v)
{
	return json_is_string(v) && store_status_parse(json_string_value(v)) >= 0;
}

static bool event_type_ok(const json_t *v)
{
	return json_is_string(v) && store_event_parse(json_string_value(v)) >= 0;
}

/* one_or_some is true when v passes ok, or is a non-empty array whose
 * every element does. */
static bool one_or_some(const json_t *v, bool (*ok)(const json_t *))
{
	size_t i;
	json_t *e;

	if (!json_is_array(v))
		return ok(v);
	if (json_array_size(v) == 0)
		return false;
	json_array_foreach(v, i, e)
		if (!ok(e))
			return false;
	return true;
}

/* int_value stores in *out the integer v holds and returns true: a JSON
 * integer, or a number with a zero fraction such as 5000.0, which JSON
 * Schema counts as an integer too (draft 2020-12, "type") and which a
 * client computing a duration in floating point sends. A fraction, a
 * value outside 64 bits or anything else is false. */
static bool int_value(const json_t *v, int64_t *out)
{
	double d;

	if (json_is_integer(v)) {
		*out = (int64_t)json_integer_value(v);
		return true;
	}
	if (!json_is_real(v))
		return false;
	d = json_real_value(v);
	/* -2^63 is exact as a double and 2^63 the first value past the
	 * range; the cast is defined only inside it (so NaN fails first). */
	if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
		return false;
	*out = (int64_t)d;
	return (double)*out == d;
}

/* check_one checks the present value v of member p. */
static void check_one(const struct api_param *p, const json_t *v,
		      struct problems *errors)
{
	char detail[96];
	int64_t t, n;

	switch (p->type) {
	case API_P_ANY:
		break;
	case API_P_STRING: {
		size_t max = p->max ? (size_t)p->max : DEFAULT_MAX_STRING;

		if (!json_is_string(v))
			add_error(errors, p->name, "type",
				  "%s must be a string", p->name);
		else if (json_string_length(v) == 0)
			add_error(errors, p->name, "minLength",
				  "%s must not be empty", p->name);
		else if (json_string_length(v) > max) {
			snprintf(detail, sizeof detail, "%zu", max);
			add_error(errors, p->name, "maxLength",
				  "%s must be at most %s bytes", p->name, detail);
		}
		break;
	}
	case API_P_INT:
		if (!int_value(v, &n)) {
			add_error(errors, p->name, "type",
				  "%s must be an integer", p->name);
		} else if (n < p->min || n > p->max) {
			snprintf(detail, sizeof detail, "%lld to %lld",
				 (long long)p->min, (long long)p->max);
			add_error(errors, p->name,
				  n < p->min ? "minimum" : "maximum",
				  "%s must be from %s", p->name, detail);
		}
		break;
	case API_P_NUMBER:
		if (!json_is_number(v))
			add_error(errors, p->name, "type",
				  "%s must be a number", p->name);
		break;
	case API_P_ARRAY:
		if (!json_is_array(v)) {
			add_error(errors, p->name, "type",
				  "%s must be an array", p->name);
		} else if ((int64_t)json_array_size(v) < p->min ||
			   (p->max && (int64_t)json_array_size(v) > p->max)) {
			snprintf(detail, sizeof detail, "%lld to %lld",
				 (long long)p->min, (long long)p->max);
			add_error(errors, p->name,
				  (int64_t)json_array_size(v) < p->min
					  ? "minItems"
					  : "maxItems",
				  "%s must hold %s elements", p->name, detail);
		}
		break;
	case API_P_BOOL:
		if (!json_is_boolean(v))
			add_error(errors, p->name, "type",
				  "%s must be true or false", p->name);
		break;
	case API_P_OBJECT:
		if (!json_is_object(v))
			add_error(errors, p->name, "type",
				  "%s must be an object", p->name);
		break;
	case API_P_TIME:
		if (!json_is_string(v) ||
		    store_parse_time(json_string_value(v), &t) < 0)
			add_error(errors, p->name, "format",
				  "%s must be an ISO 8601 time such as "
				  "2026-01-02T03:04:05.000Z", p->name);
		else if (t < 0)
			add_error(errors, p->name, "minimum",
				  "%s must not be before "
				  "1970-01-01T00:00:00.000Z", p->name);
		break;
	case API_P_ENUM: {
		bool ok = false;

		for (size_t i = 0; json_is_string(v) && p->choices[i]; i++)
			if (strcmp(json_string_value(v), p->choices[i]) == 0)
				ok = true;
		if (!ok) {
			detail[0] = '\0';
			for (size_t i = 0; p->choices[i]; i++) {
				if (i)
					strncat(detail, ", ",
						sizeof detail - strlen(detail) - 1);
				strncat(detail, p->choices[i],
					sizeof detail - strlen(detail) - 1);
			}
			add_error(errors, p->name, "enum",
				  "%s must be one of %s", p->name, detail);
		}
		break;
	}
	case API_P_STATUSES:
		if (!one_or_some(v, status_ok))
			add_error(errors, p->name, "enum",
				  "%s must be a job status (pending, "
				  "awaiting_approval, running, suspended, "
				  "completed, failed, timed_out, declined, "
				  "cancelled, expired) or a non-empty array "
				  "of them", p->name);
		break;
	case API_P_EVENT_TYPES:
		if (!one_or_some(v, event_type_ok))
			add_error(errors, p->name, "enum",
				  "%s must be an event type (created, "
				  "approval_requested, approved, declined, "
				  "started, suspended, resumed, retrying, "
				  "completed, failed, timed_out, cancelled, "
				  "expired) or a non-empty array of them",
				  p->name);
		break;
	case API_P_ID_PREFIX: {
		size_t max = p->max ? (size_t)p->max : 36;
		const char *id = json_string_value(v);

		if (!id || !*id || strlen(id) > max ||
		    strspn(id, "0123456789abcdefABCDEF-") != strlen(id)) {
			snprintf(detail, sizeof detail, "%zu", max);
			add_error(errors, p->name, "pattern",
				  "%s must be the start of a job id: 1 to %s "
				  "hex digits and '-'", p->name, detail);
		}
		break;
	}
	default:
		break;
	}
}

/* The members of a table found by one walk of params; any past them (no
 * table has so many) are looked up by name. */
#define PARAMS_MAX 32

/* lower_in_place sets the string s in lower case, when it is not. */
static void lower_in_place(json_t *s)
{
	const char *v = json_string_value(s);
	size_t len = json_string_length(s);
	char *low;

	if (!memchr(v, 0, len) && strspn(v, "0123456789abcdef-") == len)
		return; /* the common case: an id as berth writes it */
	if (!(low = malloc(len + 1)))
		return;
	for (size_t i = 0; i < len; i++)
		low[i] = v[i] >= 'A' && v[i] <= 'Z' ? (char)(v[i] - 'A' + 'a')
						    : v[i];
	low[len] = '\0';
	json_string_setn_nocheck(s, low, len);
	free(low);
}

int api_params_check(const struct api_param *spec, const json_t *params,
		     json_t **errors)
{
	/* The members given, by their entry in spec: one walk of the few
	 * members a request has, instead of a hash lookup of every name in
	 * spec (13 for jobs/submit, most of them absent). */
	const json_t *given[PARAMS_MAX] = {NULL};
	struct problems errs = {NULL, false};
	const char *key;
	size_t n = 0, len;
	json_t *member;

	*errors = NULL;
	while (spec && spec[n].name && n < PARAMS_MAX)
		n++;
	/* By length too: a key with a NUL ("tool\u0000x", which jansson's
	 * parser refuses but json_object_setn makes) is not the member
	 * "tool" that the handler will look up. */
	json_object_keylen_foreach((json_t *)params, key, len, member)
		for (size_t i = 0; i < n; i++)
			if (strlen(spec[i].name) == len &&
			    memcmp(spec[i].name, key, len) == 0) {
				given[i] = member;
				break;
			}
	for (size_t i = 0; spec && spec[i].name; i++) {
		const struct api_param *p = &spec[i];
		const json_t *v = i < n ? given[i]
				  : json_object_get(params, p->name);

		if (!v) {
			if (p->flags & API_P_REQUIRED)
				add_error(&errs, p->name, "required",
					  "%s is required", p->name);
			continue;
		}
		check_one(p, v, &errs);
		if ((p->flags & API_P_LOWER) && json_is_string(v))
			lower_in_place((json_t *)v);
		if (p->excludes && json_object_get(params, p->excludes))
			add_error(&errs, p->name, "not",
				  "%s and %s may not both be given",
				  p->name, p->excludes);
	}
	if (!errs.found)
		return 0;
	*errors = errs.list;
	return -1;
}

/* name_mask returns the STORE_MASK of v, a name or an array of names,
 * each read by parse. */
static unsigned name_mask(const json_t *v, int (*parse)(const char *))
{
	unsigned mask = 0;

	if (json_is_string(v)) {
		mask = STORE_MASK(parse(json_string_value(v)));
	} else if (json_is_array(v)) {
		size_t i;
		json_t *s;

		json_array_foreach(v, i, s)
			mask |= STORE_MASK(parse(json_string_value(s)));
	}
	return mask;
}

unsigned api_params_status_mask(const json_t *v)
{
	return name_mask(v, store_status_parse);
}

unsigned api_params_event_mask(const json_t *v)
{
	return name_mask(v, store_event_parse);
}

const char *api_params_str(const json_t *params, const char *name)
{
	return json_string_value(json_object_get(params, name));
}

int64_t api_params_int(const json_t *params, const char *name, int64_t def)
{
	int64_t n;

	return int_value(json_object_get(params, name), &n) ? n : def;
}

bool api_params_bool(const json_t *params, const char *name, bool def)
{
	json_t *v = json_object_get(params, name);

	return json_is_boolean(v) ? json_is_true(v) : def;
}

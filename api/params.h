/*
 * params.h: the params of each method, declared as data and checked in one
 * place (api_params_check) before any handler runs, so that a handler
 * reads its params without checking them again.
 */
#ifndef BERTH_API_PARAMS_H
#define BERTH_API_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

enum api_param_type {
	API_P_ANY = 0,  /* any JSON value (a tool's payload: its schema
			   judges it later) */
	API_P_STRING,   /* a non-empty string of at most max bytes (0: 4096) */
	API_P_INT,      /* an integer in [min, max] */
	API_P_BOOL,
	API_P_OBJECT,
	API_P_TIME,     /* an ISO 8601 time, as store_parse_time reads it */
	API_P_ENUM,     /* one of choices */
	API_P_STATUSES, /* a status name, or a non-empty array of them */
	API_P_EVENT_TYPES, /* an event type name, or a non-empty array of
			      them */
	API_P_ID_PREFIX, /* the start of a job id: 1 to max (0: 36) hex
			    digits, either case, and '-' */
	API_P_NUMBER,   /* any JSON number */
	API_P_ARRAY,    /* an array of min to max (0: any) elements */
};

#define API_P_REQUIRED 1u
/* A string that is set in lower case in params itself once checked: a
 * job id, which is a UUID, read in either case (RFC 9562, section 4). */
#define API_P_LOWER 2u

/* struct api_param describes one member of params; a table of them ends
 * with a zeroed entry. Members not in the table are ignored (a client may
 * send _meta or fields of a later protocol revision). */
struct api_param {
	const char *name;
	int type;             /* enum api_param_type */
	unsigned flags;       /* API_P_REQUIRED, API_P_LOWER */
	int64_t min, max;     /* API_P_INT bounds; API_P_STRING max length */
	const char *const *choices; /* API_P_ENUM, NULL-ended */
	const char *excludes; /* a member that may not be given with this one */
};

/* api_params_check checks params (an object) against the table spec, and
 * sets its API_P_LOWER strings in lower case (which changes params).
 * Returns 0, or -1 with *errors set to a new array of
 * {instancePath, keyword, message}, the shape of schema errors. */
int api_params_check(const struct api_param *spec, const json_t *params,
		     json_t **errors);

/* api_params_status_mask returns the STORE_MASK of an API_P_STATUSES value
 * that passed the check (0 for NULL). */
unsigned api_params_status_mask(const json_t *v);

/* api_params_event_mask returns the STORE_MASK of the event types of an
 * API_P_EVENT_TYPES value that passed the check (0 for NULL). */
unsigned api_params_event_mask(const json_t *v);

/* Typed reads of checked params, with a default for absent members;
 * api_params_int reads an integer written with a zero fraction (5000.0)
 * as the check does. */
const char *api_params_str(const json_t *params, const char *name);
int64_t api_params_int(const json_t *params, const char *name, int64_t def);
bool api_params_bool(const json_t *params, const char *name, bool def);

#endif

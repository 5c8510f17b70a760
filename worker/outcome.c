/*
 * outcome.c: the values execute returns (berth_output, berth_suspend,
 * berth_error).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "worker/internal.h"

struct berth_outcome berth_output(json_t *output)
{
	return berth_output_model(output, NULL);
}

struct berth_outcome berth_output_model(json_t *output, json_t *model_output)
{
	struct berth_outcome o = {
		.kind = BERTH_OUTPUT,
		.value = output ? output : json_null(),
		.model_output = model_output,
	};

	/* A null modelOutput (Python's None, a toModelOutput that returned
	 * nothing) is none: the output stands for itself, not "null". */
	if (json_is_null(model_output)) {
		json_decref(model_output);
		o.model_output = NULL;
	}
	return o;
}

struct berth_outcome berth_suspend(json_t *payload)
{
	struct berth_outcome o = {
		.kind = BERTH_SUSPEND,
		.value = payload ? payload : json_null(),
	};
	return o;
}

struct berth_outcome berth_error(bool retryable, json_t *data, const char *fmt,
				 ...)
{
	struct berth_outcome o = {
		.kind = BERTH_ERROR,
		.value = data,
		.retryable = retryable,
	};
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&o.message, fmt, ap) < 0)
		o.message = NULL; /* the run reports "execute failed" */
	va_end(ap);
	return o;
}

/* worker__outcome_finish releases what o holds. */
void worker__outcome_finish(struct berth_outcome *o)
{
	json_decref(o->value);
	json_decref(o->model_output);
	free(o->message);
	o->value = NULL;
	o->model_output = NULL;
	o->message = NULL;
}

int worker__finals(const json_t *o)
{
	return !!json_object_get(o, "output") + !!json_object_get(o, "suspend") +
	       !!json_object_get(o, "error");
}

/*
 * view.c: payloads as a view shows them. Raw is the payload as stored;
 * display and transcript pass it through the tool's transform
 * (Mastra's transform.display / transform.transcript). Events carry the
 * display view.
 */
#include "worker/internal.h"

json_t *worker__view(const struct worker_tool *t, int view,
		     enum berth_payload which, const json_t *payload)
{
	json_t *(*fn)(enum berth_payload, const json_t *, void *) = NULL;
	json_t *v = NULL;

	if (!payload)
		return NULL;
	if (t && t->c && view == WORKER_VIEW_DISPLAY)
		fn = t->c->display;
	else if (t && t->c && view == WORKER_VIEW_TRANSCRIPT)
		fn = t->c->transcript;
	if (fn)
		v = fn(which, payload, t->c->data);
	return v ? v : json_incref((json_t *)payload);
}

/* replace sets o[key] to the view of its payload when o has it. */
static void replace(json_t *o, const struct worker_tool *t, int view,
		    const char *key, enum berth_payload which)
{
	json_t *v = json_object_get(o, key);

	if (v)
		json_object_set_new(o, key, worker__view(t, view, which, v));
}

json_t *worker_job_to_json(struct worker *w, const struct store_job *j,
			   int view)
{
	const struct worker_tool *t = worker__tool_find(w, j->tool);
	json_t *o = store_job_to_json(j);

	/* A job that may still run, whose tool this berthd does not have
	 * (removed by a reload, gone since a restart): it waits for one,
	 * and jobs/get says so (docs/API.md). */
	if (o && !t && !store_status_terminal(j->status))
		json_object_set_new(o, "toolMissing", json_true());
	if (!o || view == WORKER_VIEW_RAW)
		return o;
	if (!t || !t->c || !(t->c->display || t->c->transcript))
		return o;
	replace(o, t, view, "input", BERTH_PAYLOAD_INPUT);
	replace(o, t, view, "output", BERTH_PAYLOAD_OUTPUT);
	replace(o, t, view, "error", BERTH_PAYLOAD_ERROR);
	replace(o, t, view, "suspendPayload", BERTH_PAYLOAD_SUSPEND);
	replace(o, t, view, "resumeData", BERTH_PAYLOAD_RESUME);
	return o;
}

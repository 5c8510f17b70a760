/*
 * view.c: payloads as a view shows them. Raw is the payload as stored;
 * display and transcript pass it through the tool's transform
 * (Mastra's transform.display / transform.transcript). Events carry the
 * display view.
 *
 * A C tool's transform is its display and transcript functions. A tool
 * defined in JSON (a manifest) declares its transform as data:
 *
 *   "transform": {"display": {STAGE: SPEC, ...}, "transcript": {...}}
 *
 * with STAGE one of the stages berth has (input, output, error, suspend,
 * resume, approval) and SPEC {"pick": [POINTER, ...]} (keep only these
 * members), {"omit": [POINTER, ...]} (drop them), both (pick, then omit),
 * or {"const": VALUE} (show VALUE instead). A POINTER is a JSON Pointer
 * to an object member ("/customer/id"). As in Mastra, a target that is
 * declared shows nothing it was not told to show: a stage it has no SPEC
 * for is shown as {"message": "Tool STAGE payload unavailable"}, so that a
 * secret in a payload nobody thought of does not leak through the view
 * meant to hide it. Mastra's inputDelta stage is refused at load: a tool
 * call's input streams from the agent's model, never through berth.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "worker/internal.h"

static const char *const stage_names[] = {
	[BERTH_PAYLOAD_INPUT] = "input",     [BERTH_PAYLOAD_OUTPUT] = "output",
	[BERTH_PAYLOAD_ERROR] = "error",     [BERTH_PAYLOAD_SUSPEND] = "suspend",
	[BERTH_PAYLOAD_RESUME] = "resume",   [BERTH_PAYLOAD_APPROVAL] = "approval",
};

#define NSTAGES (sizeof(stage_names) / sizeof(stage_names[0]))

/* ---- checking a declared transform (at load) ------------------------- */

/* check_pointers checks that v is an array of JSON Pointers to members. */
static int check_pointers(const json_t *v, const char *at, const char *kw,
			  char **why)
{
	size_t i;
	json_t *p;

	if (!json_is_array(v)) {
		*why = worker__errmsg("%s.%s must be an array of JSON Pointers "
				      "(\"/member/inner\")",
				      at, kw);
		return -EINVAL;
	}
	json_array_foreach(v, i, p) {
		const char *s = json_string_value(p);

		if (!s || s[0] != '/' || strstr(s, "//") ||
		    s[strlen(s) - 1] == '/') {
			*why = worker__errmsg("%s.%s[%zu] must be a JSON Pointer "
					      "to a member (\"/member/inner\")",
					      at, kw, i);
			return -EINVAL;
		}
	}
	return 0;
}

static int check_spec(const json_t *spec, const char *at, char **why)
{
	const char *key;
	json_t *v;
	int rc;

	if (!json_is_object(spec) || json_object_size(spec) == 0) {
		*why = worker__errmsg("%s must be an object with \"pick\", "
				      "\"omit\" or \"const\"",
				      at);
		return -EINVAL;
	}
	json_object_foreach((json_t *)spec, key, v) {
		if (strcmp(key, "pick") && strcmp(key, "omit") &&
		    strcmp(key, "const")) {
			*why = worker__errmsg("%s.%s is not a known field "
					      "(pick, omit, const)",
					      at, key);
			return -EINVAL;
		}
		if (strcmp(key, "const") && (rc = check_pointers(v, at, key, why)))
			return rc;
	}
	if (json_object_get(spec, "const") && json_object_size(spec) > 1) {
		*why = worker__errmsg("%s: \"const\" shows a value instead of "
				      "the payload and takes no \"pick\" or "
				      "\"omit\"",
				      at);
		return -EINVAL;
	}
	return 0;
}

int worker__transform_check(const json_t *transform, char **why)
{
	const char *target, *stage;
	json_t *stages, *spec;

	*why = NULL;
	if (!json_is_object(transform)) {
		*why = worker__errmsg("transform must be an object of "
				      "\"display\" and \"transcript\"");
		return -EINVAL;
	}
	json_object_foreach((json_t *)transform, target, stages) {
		if (strcmp(target, "display") && strcmp(target, "transcript")) {
			*why = worker__errmsg("transform.%s is not a known "
					      "target (display, transcript)",
					      target);
			return -EINVAL;
		}
		if (!json_is_object(stages)) {
			*why = worker__errmsg("transform.%s must be an object "
					      "of stages",
					      target);
			return -EINVAL;
		}
		json_object_foreach(stages, stage, spec) {
			char at[200];
			size_t k;
			int rc;

			for (k = 0; k < NSTAGES; k++)
				if (strcmp(stage_names[k], stage) == 0)
					break;
			if (strcmp(stage, "inputDelta") == 0) {
				*why = worker__errmsg(
					"transform.%s.inputDelta: berth has no "
					"input stream to transform: a tool "
					"call's input streams from the agent's "
					"model, and berth receives it whole "
					"(its stage is \"input\")",
					target);
				return -EINVAL;
			}
			if (k == NSTAGES) {
				*why = worker__errmsg(
					"transform.%s.%s is not a stage berth "
					"has (input, output, error, suspend, "
					"resume, approval)",
					target, stage);
				return -EINVAL;
			}
			snprintf(at, sizeof(at), "transform.%s.%s", target,
				 stage);
			if ((rc = check_spec(spec, at, why)))
				return rc;
		}
	}
	return 0;
}

/* ---- applying one ------------------------------------------------------ */

/* token_at copies the JSON Pointer token that starts at *p (after its
 * '/') into buf, unescaping ~1 and ~0, and moves *p past it. */
static void token_at(const char **p, char *buf, size_t size)
{
	const char *s = *p;
	size_t n = 0;

	for (; *s && *s != '/'; s++) {
		char c = *s;

		if (c == '~' && (s[1] == '0' || s[1] == '1'))
			c = *++s == '0' ? '~' : '/';
		if (n + 1 < size)
			buf[n++] = c;
	}
	buf[n] = '\0';
	*p = s;
}

/* pick_into copies the member of from that pointer names into to, with
 * the objects on its way (created in to as needed). A pointer that does
 * not reach a member through objects adds nothing. */
static void pick_into(json_t *to, const json_t *from, const char *pointer)
{
	char key[512];
	const char *p = pointer;

	while (*p == '/') {
		json_t *v, *next;

		p++;
		token_at(&p, key, sizeof(key));
		v = json_object_get(from, key);
		if (!v)
			return;
		if (!*p) {
			json_object_set_new(to, key, json_deep_copy(v));
			return;
		}
		if (!json_is_object(v))
			return;
		next = json_object_get(to, key);
		if (!json_is_object(next)) {
			next = json_object();
			if (!next || json_object_set_new(to, key, next))
				return;
		}
		to = next;
		from = v;
	}
}

/* omit_from removes the member that pointer names from o, if it is
 * there. */
static void omit_from(json_t *o, const char *pointer)
{
	char key[512];
	const char *p = pointer;

	while (*p == '/' && json_is_object(o)) {
		p++;
		token_at(&p, key, sizeof(key));
		if (!*p) {
			json_object_del(o, key);
			return;
		}
		o = json_object_get(o, key);
	}
}

/* apply_spec returns a new reference to payload as spec shows it (NULL
 * when out of memory). Picking from a payload that is not an object
 * keeps nothing: what was not named is not shown. */
static json_t *apply_spec(const json_t *spec, const json_t *payload)
{
	const json_t *c = json_object_get(spec, "const");
	const json_t *pick = json_object_get(spec, "pick");
	const json_t *omit = json_object_get(spec, "omit");
	json_t *v, *p;
	size_t i;

	if (c)
		return json_deep_copy(c);
	if (pick) {
		v = json_object();
		json_array_foreach(pick, i, p)
			if (v && json_is_object(payload))
				pick_into(v, payload, json_string_value(p));
	} else {
		v = json_deep_copy(payload);
	}
	json_array_foreach(omit, i, p)
		if (v)
			omit_from(v, json_string_value(p));
	return v;
}

/* declared returns the view of payload by t's declared transform: NULL
 * when the target is not declared (the payload is shown as it is). When
 * memory runs out it shows null rather than the payload it was declared
 * to hide. */
static json_t *declared(const struct worker_tool *t, int view,
			enum berth_payload which, const json_t *payload)
{
	const json_t *stages = json_object_get(
		t->transform,
		view == WORKER_VIEW_DISPLAY ? "display" : "transcript");
	const json_t *spec;
	json_t *v;

	if (!stages || (size_t)which >= NSTAGES)
		return NULL;
	spec = json_object_get(stages, stage_names[which]);
	if (spec)
		v = apply_spec(spec, payload);
	else
		v = json_pack("{s:s++}", "message", "Tool ",
			      stage_names[which], " payload unavailable");
	return v ? v : json_null();
}

json_t *worker__view(const struct worker_tool *t, int view,
		     enum berth_payload which, const json_t *payload)
{
	json_t *(*fn)(enum berth_payload, const json_t *, void *) = NULL;
	json_t *v = NULL;

	if (!payload)
		return NULL;
	if (t && t->transform && view != WORKER_VIEW_RAW)
		v = declared(t, view, which, payload);
	else if (t && t->c && view == WORKER_VIEW_DISPLAY)
		fn = t->c->display;
	else if (t && t->c && view == WORKER_VIEW_TRANSCRIPT)
		fn = t->c->transcript;
	if (fn)
		v = fn(which, payload, t->c->data);
	return v ? v : json_incref((json_t *)payload);
}

bool worker_tool_has_view(const struct worker_tool *t, int view)
{
	if (!t || !t->c)
		return false;
	return view == WORKER_VIEW_DISPLAY      ? t->c->display != NULL
	       : view == WORKER_VIEW_TRANSCRIPT ? t->c->transcript != NULL
						: false;
}

json_t *worker_payload_view(struct worker *w, const char *tool, int view,
			    enum berth_payload which, const json_t *payload)
{
	return worker__view(tool ? worker__tool_find(w, tool) : NULL, view,
			    which, payload);
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
	if (!t || (!t->transform &&
		   !(t->c && (t->c->display || t->c->transcript))))
		return o;
	replace(o, t, view, "input", BERTH_PAYLOAD_INPUT);
	replace(o, t, view, "output", BERTH_PAYLOAD_OUTPUT);
	replace(o, t, view, "error", BERTH_PAYLOAD_ERROR);
	replace(o, t, view, "suspendPayload", BERTH_PAYLOAD_SUSPEND);
	replace(o, t, view, "resumeData", BERTH_PAYLOAD_RESUME);
	return o;
}

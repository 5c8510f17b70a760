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
 *
 * A worker process's tool (remote.c) transforms with functions in the
 * worker. berthd asks for their views when a stage happens and stores
 * them with the job (store_job.views), so that a read never calls into a
 * worker (docs/WORKERS.md):
 *
 *   {"display": {STAGE: VIEW, ...}, "transcript": {...},
 *    "pending": [STAGE, ...],   stages whose views are still to come
 *    "errorOf": MESSAGE,        the message of the error whose views
 *                               "error" holds
 *    "onInputAvailable": true}  the hook is still to run
 *
 * A declared target shows, for a stage its functions do not transform,
 * the placeholder a declared transform shows; for a stage whose view is
 * not there yet, nothing (the payload is left out and the stage listed
 * in "viewsPending"); for an error berthd made itself (a timeout, a
 * cancel, an interruption), the error's message and code, which hold
 * nothing of the tool's. A raw payload never stands in for a view.
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

const char *worker__stage_name(int which)
{
	return which >= 0 && (size_t)which < NSTAGES ? stage_names[which]
						       : "payload";
}

int worker__stage_parse(const char *name)
{
	for (size_t k = 0; name && k < NSTAGES; k++)
		if (strcmp(stage_names[k], name) == 0)
			return (int)k;
	return -1;
}

/* placeholder returns what a declared target shows of a stage it does not
 * transform (Mastra's text). */
static json_t *placeholder(enum berth_payload which)
{
	json_t *v = json_pack("{s:s++}", "message", "Tool ",
			      worker__stage_name(which), " payload unavailable");

	return v ? v : json_null();
}

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
		return placeholder(which);
	return v ? v : json_null();
}

/* ---- the stored views of worker processes' tools ---------------------- */

static const char *const target_names[] = {"display", "transcript"};

json_t *worker__views_take(const struct worker_tool *t, const json_t *views)
{
	json_t *out = NULL;

	if (!t || !json_is_object(views))
		return NULL;
	for (int v = 0; v < 2; v++) {
		const json_t *stages = json_object_get(views, target_names[v]);
		const char *stage;
		json_t *val, *o;

		if (!t->view_declared[v] || !json_is_object(stages))
			continue;
		json_object_foreach((json_t *)stages, stage, val) {
			int k = worker__stage_parse(stage);

			if (k < 0 || !(t->view_stages[v] & (1u << k)))
				continue;
			if (!out && !(out = json_object()))
				return NULL;
			o = json_object_get(out, target_names[v]);
			if (!o) {
				o = json_object();
				if (json_object_set_new(out, target_names[v], o))
					continue;
			}
			json_object_set(o, stage, val);
		}
	}
	return out;
}

json_t *worker__views_merge(const struct worker_tool *t, const json_t *stored,
			    const json_t *fresh, unsigned stages,
			    const json_t *error, int hook)
{
	json_t *out = json_object(), *pending = json_array();
	/* Pending from before, but for the stages this answer is about. */
	unsigned pend = worker__views_pending(stored, NULL) & ~stages;
	bool keep_hook = json_is_true(json_object_get(stored,
						      "onInputAvailable"));
	const json_t *eo = json_object_get(stored, "errorOf");

	if (!out || !pending)
		goto oom;
	for (int v = 0; v < 2; v++) {
		const json_t *old = json_object_get(stored, target_names[v]);
		const json_t *now = json_object_get(fresh, target_names[v]);
		json_t *o = json_is_object(old) ? json_copy((json_t *)old)
						 : json_object();

		if (!o)
			goto oom;
		for (size_t k = 0; k < NSTAGES; k++) {
			const json_t *val;

			if (!(stages & (1u << k)))
				continue;
			/* A view of an earlier payload of the stage is no
			 * view of this one. */
			json_object_del(o, stage_names[k]);
			val = json_object_get(now, stage_names[k]);
			if (val)
				json_object_set(o, stage_names[k], (json_t *)val);
			else if (t->view_declared[v] &&
				 (t->view_stages[v] & (1u << k)))
				pend |= 1u << k;
		}
		if (json_object_size(o))
			json_object_set_new(out, target_names[v], o);
		else
			json_decref(o);
	}
	for (size_t k = 0; k < NSTAGES; k++)
		if (pend & (1u << k))
			json_array_append_new(pending,
					      json_string(stage_names[k]));
	if (json_array_size(pending))
		json_object_set(out, "pending", pending);
	if (stages & (1u << BERTH_PAYLOAD_ERROR)) {
		const json_t *m = json_object_get(error, "message");

		if (json_is_string(m))
			json_object_set(out, "errorOf", (json_t *)m);
	} else if (eo) {
		json_object_set(out, "errorOf", (json_t *)eo);
	}
	if (hook > 0 || (hook < 0 && keep_hook))
		json_object_set_new(out, "onInputAvailable", json_true());
	json_decref(pending);
	/* errorOf alone says nothing: no view is kept for it. */
	if (json_object_size(out) == 0 ||
	    (json_object_size(out) == 1 && json_object_get(out, "errorOf"))) {
		json_decref(out);
		return NULL;
	}
	return out;
oom:
	json_decref(out);
	json_decref(pending);
	return NULL;
}

unsigned worker__views_pending(const json_t *views, bool *hook)
{
	const json_t *p = json_object_get(views, "pending");
	unsigned stages = 0;
	size_t i;
	json_t *s;

	json_array_foreach(p, i, s) {
		int k = worker__stage_parse(json_string_value(s));

		if (k >= 0)
			stages |= 1u << k;
	}
	if (hook)
		*hook = json_is_true(json_object_get(views,
						     "onInputAvailable"));
	return stages;
}

json_t *worker__stored_view(const struct worker_tool *t, const json_t *views,
			    int view, enum berth_payload which,
			    const json_t *payload)
{
	int v = view == WORKER_VIEW_TRANSCRIPT ? 1 : 0;
	const json_t *stored;

	if (!payload)
		return NULL;
	if (view == WORKER_VIEW_RAW || !t->view_declared[v])
		return json_incref((json_t *)payload);
	if ((size_t)which >= NSTAGES || !(t->view_stages[v] & (1u << which)))
		return placeholder(which);
	stored = json_object_get(json_object_get(views, target_names[v]),
				 stage_names[which]);
	if (which == BERTH_PAYLOAD_ERROR) {
		const char *of = json_string_value(json_object_get(views,
								   "errorOf"));
		const char *m = json_string_value(json_object_get(payload,
								  "message"));
		json_t *own;

		/* The worker's error: its view, or nothing until it comes. */
		if (of && m && strcmp(of, m) == 0)
			return stored ? json_incref((json_t *)stored) : NULL;
		/* berthd's own (a timeout, a cancel, an interruption):
		 * its words, without the data a tool could have put there. */
		own = json_object();
		if (own && json_object_get(payload, "message"))
			json_object_set(own, "message",
					json_object_get(payload, "message"));
		if (own && json_object_get(payload, "code"))
			json_object_set(own, "code",
					json_object_get(payload, "code"));
		return own ? own : json_null();
	}
	return stored ? json_incref((json_t *)stored) : NULL;
}

json_t *worker__view(const struct worker_tool *t, int view,
		     enum berth_payload which, const json_t *payload)
{
	json_t *(*fn)(enum berth_payload, const json_t *, void *) = NULL;
	json_t *v = NULL;

	if (!payload)
		return NULL;
	/* Without its job's stored views a worker process's tool shows a
	 * stage it transforms as a placeholder, never the payload (the
	 * callers that have the job use worker__stored_view). */
	if (t && t->definition && view != WORKER_VIEW_RAW) {
		v = worker__stored_view(t, NULL, view, which, payload);
		return v ? v : placeholder(which);
	}
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
	if (t && t->definition && view != WORKER_VIEW_RAW)
		return t->view_declared[view == WORKER_VIEW_TRANSCRIPT];
	/* A manifest's declarative transform declares its targets. */
	if (t && t->transform && view != WORKER_VIEW_RAW)
		return json_object_get(t->transform,
				       view == WORKER_VIEW_TRANSCRIPT
					       ? "transcript"
					       : "display") != NULL;
	if (!t || !t->c)
		return false;
	return view == WORKER_VIEW_DISPLAY      ? t->c->display != NULL
	       : view == WORKER_VIEW_TRANSCRIPT ? t->c->transcript != NULL
						: false;
}

json_t *worker_payload_view(struct worker *w, const struct store_job *j,
			    int view, enum berth_payload which,
			    const json_t *payload)
{
	const struct worker_tool *t = worker__tool_find(w, j->tool);
	json_t *v;

	if (!payload)
		return NULL;
	if (t && t->definition) {
		v = worker__stored_view(t, j->views, view, which, payload);
		return v ? v : placeholder(which);
	}
	return worker__view(t, view, which, payload);
}

/* replace sets o[key] to the view of its payload when o has it. */
static void replace(json_t *o, const struct worker_tool *t, int view,
		    const char *key, enum berth_payload which)
{
	json_t *v = json_object_get(o, key);

	if (v)
		json_object_set_new(o, key, worker__view(t, view, which, v));
}

/* remote_views replaces o's payloads by the stored views of j, a job of
 * the worker process's tool t, leaving out those still to come and
 * listing their stages in "viewsPending". */
static void remote_views(json_t *o, const struct worker_tool *t,
			 const struct store_job *j, int view)
{
	static const struct {
		const char *key;
		enum berth_payload which;
	} fields[] = {
		{"input", BERTH_PAYLOAD_INPUT},
		{"output", BERTH_PAYLOAD_OUTPUT},
		{"error", BERTH_PAYLOAD_ERROR},
		{"suspendPayload", BERTH_PAYLOAD_SUSPEND},
		{"resumeData", BERTH_PAYLOAD_RESUME},
	};
	json_t *pending = NULL;

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		json_t *p = json_object_get(o, fields[i].key), *v;

		if (!p)
			continue;
		v = worker__stored_view(t, j->views, view, fields[i].which, p);
		if (v) {
			json_object_set_new(o, fields[i].key, v);
			continue;
		}
		json_object_del(o, fields[i].key);
		if (!pending)
			pending = json_array();
		json_array_append_new(pending, json_string(worker__stage_name(
						       fields[i].which)));
	}
	if (pending)
		json_object_set_new(o, "viewsPending", pending);
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
	if (t && t->definition) {
		remote_views(o, t, j, view);
		return o;
	}
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

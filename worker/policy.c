/*
 * policy.c: a tool's approvalPolicy (docs/TOOLS.md, docs/API.md): who may
 * decide its jobs and how many must approve.
 *
 *   {"selfApproval": false, "approvers": ["alice", "role:approve"],
 *    "quorum": 2}
 *
 * The same parser serves a manifest, a C tool's approval_policy text and
 * a definition a worker process registers (worker__tool_from_json), so
 * that a policy means one thing wherever it was written. What it says is
 * judged in ops.c when someone decides.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/role.h"
#include "worker/internal.h"

/* A quorum beyond this is surely a mistake: no approval queue asks a
 * thousand people. */
#define QUORUM_MAX 1000
#define APPROVER_MAX 64

static int bad(char **errmsg, const char *where, const char *field,
	       const char *why)
{
	if (errmsg)
		*errmsg = worker__errmsg("%s: %s %s", where, field, why);
	return -EINVAL;
}

void worker__policy_finish(struct worker__policy *p)
{
	for (size_t i = 0; i < p->napprovers; i++)
		free(p->approvers[i]);
	free(p->approvers);
	json_decref(p->declared);
	memset(p, 0, sizeof(*p));
	p->self_approval = -1;
	p->quorum = 1;
}

void worker__policy_init(struct worker__policy *p)
{
	memset(p, 0, sizeof(*p));
	p->self_approval = -1;
	p->quorum = 1;
}

static int parse_approvers(struct worker__policy *p, const json_t *v,
			   const char *where, char **errmsg)
{
	size_t i;
	json_t *a;

	if (!json_is_array(v) || json_array_size(v) == 0)
		return bad(errmsg, where, "approvalPolicy.approvers",
			   "must be a non-empty array of principal names and "
			   "\"role:NAME\"");
	p->approvers = calloc(json_array_size(v), sizeof(char *));
	if (!p->approvers)
		return -ENOMEM;
	json_array_foreach(v, i, a) {
		const char *s = json_string_value(a);
		char field[64];

		snprintf(field, sizeof(field), "approvalPolicy.approvers[%zu]",
			 i);
		if (!s || !*s || strlen(s) > APPROVER_MAX)
			return bad(errmsg, where, field, "must be a principal's "
				   "name or \"role:NAME\" (1 to 64 bytes)");
		if (strncmp(s, "role:", 5) == 0) {
			unsigned bit = berth_role_parse(s + 5);

			if (!bit)
				return bad(errmsg, where, field,
					   "names no role (read, submit, "
					   "approve, resume, operate, worker, "
					   "admin)");
			p->approver_roles |= bit;
		}
		for (size_t k = 0; k < p->napprovers; k++)
			if (strcmp(p->approvers[k], s) == 0)
				return bad(errmsg, where, field,
					   "is named twice");
		if (!(p->approvers[p->napprovers] = strdup(s)))
			return -ENOMEM;
		p->napprovers++;
	}
	return 0;
}

int worker__policy_parse(struct worker__policy *p, const json_t *v,
			 const char *where, char **errmsg)
{
	const char *key;
	json_t *f;
	size_t named = 0;
	int rc;

	worker__policy_finish(p);
	if (!json_is_object(v))
		return bad(errmsg, where, "approvalPolicy", "must be an object "
			   "(selfApproval, approvers, quorum)");
	json_object_foreach((json_t *)v, key, f) {
		if (strcmp(key, "selfApproval") && strcmp(key, "approvers") &&
		    strcmp(key, "quorum")) {
			char field[160];

			snprintf(field, sizeof(field), "approvalPolicy.%s", key);
			return bad(errmsg, where, field, "is not a known field "
				   "(selfApproval, approvers, quorum)");
		}
	}
	f = json_object_get(v, "selfApproval");
	if (f && !json_is_boolean(f))
		return bad(errmsg, where, "approvalPolicy.selfApproval",
			   "must be true or false");
	if (f)
		p->self_approval = json_is_true(f);
	f = json_object_get(v, "approvers");
	if (f && (rc = parse_approvers(p, f, where, errmsg)))
		return rc;
	f = json_object_get(v, "quorum");
	if (f && (!json_is_integer(f) || json_integer_value(f) < 1 ||
		  json_integer_value(f) > QUORUM_MAX))
		return bad(errmsg, where, "approvalPolicy.quorum",
			   "must be an integer from 1 to 1000");
	if (f)
		p->quorum = (int)json_integer_value(f);
	for (size_t i = 0; i < p->napprovers; i++)
		named += strncmp(p->approvers[i], "role:", 5) != 0;
	/* Named people alone can never be more approvals than there are of
	 * them: such a tool's jobs could never run. */
	if (p->napprovers && !p->approver_roles && (size_t)p->quorum > named) {
		char why[160];

		snprintf(why, sizeof(why), "is %d, more than the %zu "
			 "approvers named: a job could never run", p->quorum,
			 named);
		return bad(errmsg, where, "approvalPolicy.quorum", why);
	}
	p->declared = json_deep_copy(v);
	return p->declared ? 0 : -ENOMEM;
}

bool worker__policy_self(const struct worker__policy *p,
			 const struct worker *w)
{
	return p->self_approval < 0 ? w->cfg.self_approval
				    : p->self_approval == 1;
}

bool worker__policy_approver(const struct worker__policy *p,
			     const struct worker_actor *by)
{
	if (!p->napprovers)
		return true;
	if (p->approver_roles & by->roles)
		return true;
	for (size_t i = 0; i < p->napprovers; i++)
		if (strcmp(p->approvers[i], by->name) == 0)
			return true;
	return false;
}

json_t *worker__policy_to_json(const struct worker__policy *p,
			       const struct worker *w)
{
	json_t *o = json_pack("{s:b, s:i}", "selfApproval",
			      worker__policy_self(p, w), "quorum", p->quorum);
	json_t *a;

	if (!o || !p->napprovers)
		return o;
	a = json_array();
	for (size_t i = 0; a && i < p->napprovers; i++)
		json_array_append_new(a, json_string(p->approvers[i]));
	json_object_set_new(o, "approvers", a);
	return o;
}

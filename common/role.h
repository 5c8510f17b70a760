/*
 * role.h: the roles of principals (docs/API.md, "Principals and roles"),
 * as names and bits.
 *
 * Both the api, which grants roles (a principals file) and checks them
 * before any handler runs, and the worker, whose approval policies name
 * them ("approvers": ["role:approve"]), must read a role's name alike: a
 * function of the text alone, included by both, shares it without a
 * dependency between the two (as common/duration.h does).
 */
#ifndef BERTH_COMMON_ROLE_H
#define BERTH_COMMON_ROLE_H

#include <string.h>

enum berth_role {
	BERTH_ROLE_READ = 1u << 0,    /* get, list, wait, events, logs, tools */
	BERTH_ROLE_SUBMIT = 1u << 1,  /* jobs/submit, MCP tools/call */
	BERTH_ROLE_APPROVE = 1u << 2, /* jobs/approve, jobs/decline */
	BERTH_ROLE_RESUME = 1u << 3,  /* jobs/resume */
	BERTH_ROLE_OPERATE = 1u << 4, /* cancel, retry, pause, unpause */
	BERTH_ROLE_WORKER = 1u << 5,  /* the worker methods: serve tools */
	BERTH_ROLE_ADMIN = 1u << 6,   /* everything */
};

#define BERTH_ROLE_COUNT 7
#define BERTH_ROLE_ALL ((1u << BERTH_ROLE_COUNT) - 1)

/* berth_role_name returns the name of one role bit ("approve"), or NULL. */
static inline const char *berth_role_name(unsigned bit)
{
	static const char *const names[BERTH_ROLE_COUNT] = {
		"read", "submit", "approve", "resume", "operate", "worker",
		"admin",
	};

	for (unsigned i = 0; i < BERTH_ROLE_COUNT; i++)
		if (bit == 1u << i)
			return names[i];
	return NULL;
}

/* berth_role_parse returns the bit of the role named name, or 0. */
static inline unsigned berth_role_parse(const char *name)
{
	for (unsigned i = 0; name && i < BERTH_ROLE_COUNT; i++)
		if (strcmp(berth_role_name(1u << i), name) == 0)
			return 1u << i;
	return 0;
}

/*
 * berth_role_effective returns the roles that the declared ones grant:
 * admin is every role; submit, approve, resume and operate each imply
 * read, since a person who decides about a job, or an agent that
 * submitted one, must be able to see it (worker does not: a worker
 * process is handed what it runs and needs to read nothing else).
 */
static inline unsigned berth_role_effective(unsigned declared)
{
	if (declared & BERTH_ROLE_ADMIN)
		return BERTH_ROLE_ALL;
	if (declared & (BERTH_ROLE_SUBMIT | BERTH_ROLE_APPROVE |
			BERTH_ROLE_RESUME | BERTH_ROLE_OPERATE))
		declared |= BERTH_ROLE_READ;
	return declared;
}

#endif

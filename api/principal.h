/*
 * principal.h: who a connection acts as (docs/API.md, "Principals and
 * roles").
 *
 * A principal is a name and the roles it holds (common/role.h). berthd
 * --principals FILE declares them, each known by a token (or the token's
 * SHA-256) or by a Unix user; a connection that none of them names may
 * still act as an implicit principal, as berthd did before principals:
 *
 *   berthd's own user, root   the Unix user's name (getpwuid, else
 *                             "uid:N"), admin
 *   an --allow-uid user       its name, every role but admin and worker
 *   --token-file's token      "token", admin (only without --principals,
 *                             whose tokens stand in for it)
 *   an --http-open gateway    "anonymous", admin (only without
 *                             --principals)
 *
 * Principals live as long as the api: a connection, an HTTP session and
 * a request borrow them.
 */
#ifndef BERTH_API_PRINCIPAL_H
#define BERTH_API_PRINCIPAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

#include "api/sha256.h"
#include "common/role.h"

struct api_principal {
	char *name;
	unsigned declared; /* the roles the file (or the implicit rule)
			      gives, BERTH_ROLE_* */
	unsigned roles;    /* with what they imply (berth_role_effective) */
	bool has_token;
	unsigned char token_sha256[API_SHA256_SIZE];
	bool has_uid;
	uid_t uid;
	bool implicit;
	struct api_principal *next; /* the set's implicit ones */
};

/* The principals of one berthd: those declared, and the implicit ones
 * made as they are first needed. */
struct api_principals {
	struct api_principal *v; /* declared, in the file's order */
	size_t n;
	bool declared;           /* --principals was given */
	struct api_principal *implicit;
};

/*
 * api_principals_load reads the principals file at path into a new set
 * (*out, freed with api_principals_free). The file must be a regular file
 * owned by berthd's user or root that neither group nor others may read
 * or write: it holds tokens. Anything malformed (an unknown field or role,
 * a duplicate name, token or user, an entry with no way to authenticate)
 * is refused with *errmsg (malloc'd) naming the entry and the field; a
 * token shorter than 32 bytes is logged as a warning. Returns 0 or
 * -EINVAL, -EACCES, -ENOMEM.
 */
int api_principals_load(const char *path, struct api_principals **out,
			char **errmsg);

/* api_principals_check_users refuses a declared principal named after a
 * Unix user that acts on the socket as an implicit principal of that name
 * (berthd's own user, root, each of allow) without being declared by its
 * uid: the two would be one name, and one person to separation of duties,
 * approvers and the audit. Returns 0, or -EINVAL with *errmsg (malloc'd)
 * naming both. */
int api_principals_check_users(const struct api_principals *set,
			       const uid_t *allow, size_t nallow,
			       char **errmsg);

/* api_principals_new returns an empty set (no --principals), or NULL. */
struct api_principals *api_principals_new(void);

/* api_principals_free frees set and every principal in it (NULL is
 * ignored). */
void api_principals_free(struct api_principals *set);

/* api_principals_has_token is true when some declared principal has a
 * token (TCP and HTTP need one). */
bool api_principals_has_token(const struct api_principals *set);

/*
 * api_principal_of_uid returns the principal a Unix-socket peer of uid
 * acts as (borrowed from set): a declared one with that uid, else an
 * implicit one for berthd's own user and root (admin) or a user of
 * allow (every role but admin and worker); NULL when uid may not use the
 * socket, or when out of memory.
 */
const struct api_principal *api_principal_of_uid(struct api_principals *set,
						 uid_t uid, const uid_t *allow,
						 size_t nallow);

/* api_principal_implicit returns the implicit admin principal of that
 * name ("token", "anonymous"), made on first use; NULL when out of
 * memory. */
const struct api_principal *api_principal_implicit(struct api_principals *set,
						   const char *name);

/* api_principal_of_token returns the declared principal whose token is
 * token (len bytes), or NULL. Every principal with a token is compared,
 * each in constant time, so the time taken tells nothing of which (or
 * whether one) matched. */
const struct api_principal *
api_principal_of_token(const struct api_principals *set, const char *token,
		       size_t len);

/* api_principal_roles_json returns a new array of p's role names: ["admin"]
 * for an admin, else every role it holds, implied ones included. */
json_t *api_principal_roles_json(const struct api_principal *p);

#endif

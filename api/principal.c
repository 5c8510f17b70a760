/*
 * principal.c: the principals file and the principals of connections
 * (principal.h).
 *
 * The file is JSON:
 *
 *   {"principals": [
 *     {"name": "agent", "token": "...", "roles": ["submit"]},
 *     {"name": "alice", "tokenSha256": "64 hex digits", "roles": ["approve"]},
 *     {"name": "ops", "user": "ops", "roles": ["admin"]}]}
 *
 * It is read once, at start: a mistake stops berthd with the entry and
 * the field named, rather than leave someone with more rights, or fewer,
 * than the operator meant. Tokens are kept as their SHA-256 only.
 */
#include "api/principal.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/strf.h"
#include "log/log.h"

/* A token shorter than this is warned about: 32 random bytes cannot be
 * guessed at any rate (api/auth.c says the same of --token-file's). */
#define TOKEN_MIN_LEN 32
#define NAME_MAX_LEN 64
/* A principals file larger than this is surely not one. */
#define FILE_MAX (4 * 1024 * 1024)

/* The roles of an --allow-uid user: what that user could do before
 * principals, everything but the roles that came with them. */
#define ALLOWED_USER_ROLES                                                     \
	(BERTH_ROLE_READ | BERTH_ROLE_SUBMIT | BERTH_ROLE_APPROVE |            \
	 BERTH_ROLE_RESUME | BERTH_ROLE_OPERATE)

static const char *const entry_fields[] = {
	"name", "token", "tokenSha256", "uid", "user", "roles", "$comment",
	NULL,
};

static void sha256_of(const char *s, size_t len,
		      unsigned char out[API_SHA256_SIZE])
{
	struct api_sha256 h;

	api_sha256_init(&h);
	api_sha256_update(&h, s, len);
	api_sha256_final(&h, out);
}

static void principal_free(struct api_principal *p)
{
	free(p->name);
	memset(p->token_sha256, 0, sizeof p->token_sha256);
}

struct api_principals *api_principals_new(void)
{
	return calloc(1, sizeof(struct api_principals));
}

void api_principals_free(struct api_principals *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->n; i++)
		principal_free(&set->v[i]);
	free(set->v);
	while (set->implicit) {
		struct api_principal *p = set->implicit;

		set->implicit = p->next;
		principal_free(p);
		free(p);
	}
	free(set);
}

bool api_principals_has_token(const struct api_principals *set)
{
	for (size_t i = 0; set && i < set->n; i++)
		if (set->v[i].has_token)
			return true;
	return false;
}

/* ---- the file ------------------------------------------------------------ */

/* valid_name is true for 1 to 64 of A-Z a-z 0-9 . _ - @, and none of the
 * names berthd writes in an audit itself. */
static bool valid_name(const char *s, const char **why)
{
	size_t n = strlen(s);

	*why = "must be 1 to 64 of A-Z a-z 0-9 . _ - @";
	if (n == 0 || n > NAME_MAX_LEN)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' ||
		      *p == '-' || *p == '@'))
			return false;
	if (strcmp(s, "berthd") == 0 || strcmp(s, "unknown") == 0) {
		*why = "is a name berthd gives itself in the audit "
		       "(\"berthd\", \"unknown\"); choose another";
		return false;
	}
	return true;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* read_file reads path, checking who may read and change it, into a new
 * JSON value. */
static int read_file(const char *path, json_t **out, char **errmsg)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	json_error_t jerr;
	json_t *v;

	if (fd < 0 || fstat(fd, &st) < 0) {
		*errmsg = berth_strf("cannot read the principals file %s: %s", path,
				     strerror(errno));
		if (fd >= 0)
			close(fd);
		return -EACCES;
	}
	/* It holds tokens: anyone else who could read it could act as
	 * those principals, and anyone who could write it could make
	 * themselves one. */
	if (!S_ISREG(st.st_mode)) {
		*errmsg = berth_strf("the principals file %s is not a regular file",
				     path);
		close(fd);
		return -EACCES;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		*errmsg = berth_strf("the principals file %s is mode %04o: it holds "
				     "tokens, so no other user may read or change "
				     "it; chmod 600 %s",
				     path, (unsigned)(st.st_mode & 07777), path);
		close(fd);
		return -EACCES;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0) {
		*errmsg = berth_strf("the principals file %s belongs to uid %lu: it "
				     "must belong to berthd's user (uid %lu) or "
				     "root, since its owner could change it",
				     path, (unsigned long)st.st_uid,
				     (unsigned long)geteuid());
		close(fd);
		return -EACCES;
	}
	if (st.st_size > FILE_MAX) {
		*errmsg = berth_strf("the principals file %s is larger than %d "
				     "bytes", path, FILE_MAX);
		close(fd);
		return -EINVAL;
	}
	v = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
	close(fd);
	if (!v) {
		*errmsg = berth_strf("the principals file %s is not JSON (line %d, "
				     "column %d: %s)", path, jerr.line, jerr.column,
				     jerr.text);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

/* The entry being read, for messages: "FILE: principals[2] (alice)". */
struct where {
	const char *path;
	size_t i;
	const char *name;
};

static int bad(char **errmsg, const struct where *at, const char *field,
	       const char *why)
{
	if (at->name)
		*errmsg = berth_strf("the principals file %s: principals[%zu] "
				     "(\"%s\"): %s %s", at->path, at->i, at->name,
				     field, why);
	else
		*errmsg = berth_strf("the principals file %s: principals[%zu]: "
				     "%s %s", at->path, at->i, field, why);
	return -EINVAL;
}

static int parse_roles(const json_t *v, struct api_principal *p,
		       const struct where *at, char **errmsg)
{
	size_t i;
	json_t *r;

	if (!json_is_array(v) || json_array_size(v) == 0)
		return bad(errmsg, at, "roles", "must be a non-empty array of "
			   "role names (read, submit, approve, resume, "
			   "operate, worker, admin)");
	json_array_foreach(v, i, r) {
		unsigned bit = berth_role_parse(json_string_value(r));
		char field[32];

		snprintf(field, sizeof field, "roles[%zu]", i);
		if (!bit)
			return bad(errmsg, at, field, "is not a role (read, "
				   "submit, approve, resume, operate, worker, "
				   "admin)");
		p->declared |= bit;
	}
	p->roles = berth_role_effective(p->declared);
	return 0;
}

static int parse_token(const json_t *e, struct api_principal *p,
		       const struct where *at, char **errmsg)
{
	json_t *tok = json_object_get(e, "token");
	json_t *sha = json_object_get(e, "tokenSha256");
	const char *s;

	if (tok && sha)
		return bad(errmsg, at, "token", "and tokenSha256 are both "
			   "given; give one");
	if (tok) {
		if (!json_is_string(tok) || json_string_length(tok) == 0)
			return bad(errmsg, at, "token", "must be a non-empty "
				   "string");
		if (json_string_length(tok) < TOKEN_MIN_LEN)
			log_warn("the principals file %s: principals[%zu] "
				 "(\"%s\"): the token is %zu bytes long: one "
				 "shorter than %d bytes may be guessed; use 32 "
				 "random bytes (head -c 32 /dev/urandom | "
				 "base64)", at->path, at->i, at->name,
				 json_string_length(tok), TOKEN_MIN_LEN);
		sha256_of(json_string_value(tok), json_string_length(tok),
			  p->token_sha256);
		p->has_token = true;
	} else if (sha) {
		s = json_string_value(sha);
		if (!s || strlen(s) != 2 * API_SHA256_SIZE)
			return bad(errmsg, at, "tokenSha256", "must be the 64 "
				   "hex digits of the token's SHA-256 "
				   "(printf %s TOKEN | sha256sum)");
		for (size_t k = 0; k < API_SHA256_SIZE; k++) {
			int hi = hex_value(s[2 * k]), lo = hex_value(s[2 * k + 1]);

			if (hi < 0 || lo < 0)
				return bad(errmsg, at, "tokenSha256", "must be "
					   "64 hex digits");
			p->token_sha256[k] = (unsigned char)(hi * 16 + lo);
		}
		p->has_token = true;
	}
	return 0;
}

static int parse_user(const json_t *e, struct api_principal *p,
		      const struct where *at, char **errmsg)
{
	json_t *uid = json_object_get(e, "uid");
	json_t *user = json_object_get(e, "user");

	if (uid && user)
		return bad(errmsg, at, "uid", "and user are both given; give "
			   "one");
	if (uid) {
		if (!json_is_integer(uid) || json_integer_value(uid) < 0 ||
		    json_integer_value(uid) >= (json_int_t)UINT32_MAX)
			return bad(errmsg, at, "uid", "must be a user id (a "
				   "non-negative integer)");
		p->uid = (uid_t)json_integer_value(uid);
		p->has_uid = true;
	} else if (user) {
		struct passwd pw, *pwp = NULL;
		char buf[4096];

		if (!json_is_string(user))
			return bad(errmsg, at, "user", "must be a user name");
		if (getpwnam_r(json_string_value(user), &pw, buf, sizeof buf,
			       &pwp) != 0 || !pwp)
			return bad(errmsg, at, "user", "names no user of this "
				   "system (give its uid instead)");
		p->uid = pw.pw_uid;
		p->has_uid = true;
	}
	return 0;
}

/* parse_entry reads principals[i] into p (zeroed). */
static int parse_entry(const json_t *e, struct api_principal *p,
		       struct where *at, char **errmsg)
{
	const char *key, *why;
	json_t *v;
	int rc;

	if (!json_is_object(e))
		return bad(errmsg, at, "the entry", "must be an object");
	v = json_object_get(e, "name");
	if (!json_is_string(v))
		return bad(errmsg, at, "name", "is missing or not a string");
	if (!valid_name(json_string_value(v), &why))
		return bad(errmsg, at, "name", why);
	at->name = json_string_value(v);
	json_object_foreach((json_t *)e, key, v) {
		bool known = false;

		for (size_t k = 0; entry_fields[k]; k++)
			known = known || strcmp(entry_fields[k], key) == 0;
		if (!known)
			return bad(errmsg, at, key, "is not a known field "
				   "(name, token, tokenSha256, uid, user, "
				   "roles)");
	}
	if ((rc = parse_roles(json_object_get(e, "roles"), p, at, errmsg)) ||
	    (rc = parse_token(e, p, at, errmsg)) ||
	    (rc = parse_user(e, p, at, errmsg)))
		return rc;
	if (!p->has_token && !p->has_uid)
		return bad(errmsg, at, "the entry", "has no way to "
			   "authenticate: give a token (or tokenSha256), or a "
			   "Unix uid (or user)");
	p->name = strdup(at->name);
	return p->name ? 0 : -ENOMEM;
}

/* check_unique refuses a name, token or uid that an earlier entry has. */
static int check_unique(const struct api_principals *set, size_t i,
			const struct where *at, char **errmsg)
{
	const struct api_principal *p = &set->v[i];

	for (size_t k = 0; k < i; k++) {
		const struct api_principal *q = &set->v[k];
		char why[160];

		if (strcmp(p->name, q->name) == 0) {
			snprintf(why, sizeof why, "is also principals[%zu]'s",
				 k);
			return bad(errmsg, at, "name", why);
		}
		if (p->has_token && q->has_token &&
		    memcmp(p->token_sha256, q->token_sha256,
			   API_SHA256_SIZE) == 0) {
			snprintf(why, sizeof why, "is also the token of "
				 "principals[%zu] (\"%s\"): a token must name "
				 "one principal", k, q->name);
			return bad(errmsg, at, "token", why);
		}
		if (p->has_uid && q->has_uid && p->uid == q->uid) {
			snprintf(why, sizeof why, "%lu is also the user of "
				 "principals[%zu] (\"%s\"): a user must be one "
				 "principal", (unsigned long)p->uid, k, q->name);
			return bad(errmsg, at, "uid", why);
		}
	}
	return 0;
}

int api_principals_load(const char *path, struct api_principals **out,
			char **errmsg)
{
	struct api_principals *set;
	json_t *doc = NULL, *list;
	const char *key;
	json_t *v;
	size_t i;
	int rc;

	*out = NULL;
	*errmsg = NULL;
	if ((rc = read_file(path, &doc, errmsg)))
		return rc;
	list = json_object_get(doc, "principals");
	if (!json_is_object(doc) || !json_is_array(list)) {
		*errmsg = berth_strf("the principals file %s must be an object "
				     "{\"principals\": [...]}", path);
		json_decref(doc);
		return -EINVAL;
	}
	json_object_foreach(doc, key, v) {
		if (strcmp(key, "principals") && strcmp(key, "$comment")) {
			*errmsg = berth_strf("the principals file %s: %s is not a "
					     "known field (principals)", path, key);
			json_decref(doc);
			return -EINVAL;
		}
	}
	set = api_principals_new();
	if (set)
		set->v = calloc(json_array_size(list) + 1, sizeof *set->v);
	if (!set || !set->v) {
		api_principals_free(set);
		json_decref(doc);
		*errmsg = berth_strf("out of memory");
		return -ENOMEM;
	}
	set->declared = true;
	json_array_foreach(list, i, v) {
		struct where at = {path, i, NULL};

		rc = parse_entry(v, &set->v[i], &at, errmsg);
		if (rc == 0) {
			set->n++;
			rc = check_unique(set, i, &at, errmsg);
		} else {
			principal_free(&set->v[i]);
		}
		if (rc) {
			if (rc == -ENOMEM && !*errmsg)
				*errmsg = berth_strf("out of memory");
			api_principals_free(set);
			json_decref(doc);
			return rc;
		}
	}
	json_decref(doc);
	if (set->n == 0)
		log_warn("the principals file %s declares no principal: only "
			 "berthd's own user and root may use it", path);
	*out = set;
	return 0;
}

/* check_user refuses a declared principal named as uid's login name when
 * uid would act as an implicit principal (who says what it is). */
static int check_user(const struct api_principals *set, uid_t uid,
		      const char *who, char **errmsg)
{
	struct passwd pw, *pwp = NULL;
	char buf[4096];

	for (size_t i = 0; i < set->n; i++)
		if (set->v[i].has_uid && set->v[i].uid == uid)
			return 0; /* declared: it acts as that entry */
	if (getpwuid_r(uid, &pw, buf, sizeof buf, &pwp) != 0 || !pwp)
		return 0; /* named uid:N, which no declared name can be */
	for (size_t i = 0; i < set->n; i++)
		if (strcmp(set->v[i].name, pw.pw_name) == 0) {
			*errmsg = berth_strf(
				"principal %s of the principals file has the "
				"name of Unix user %s (uid %lu, %s), whose "
				"connections to the socket act under that "
				"name: the two would be one person to "
				"approvals and the audit; rename the "
				"principal, or declare the user by its uid",
				set->v[i].name, pw.pw_name,
				(unsigned long)uid, who);
			return -EINVAL;
		}
	return 0;
}

int api_principals_check_users(const struct api_principals *set,
			       const uid_t *allow, size_t nallow,
			       char **errmsg)
{
	int rc;

	*errmsg = NULL;
	if ((rc = check_user(set, geteuid(), "berthd's own user", errmsg)) ||
	    (geteuid() != 0 && (rc = check_user(set, 0, "root", errmsg))))
		return rc;
	for (size_t i = 0; i < nallow; i++)
		if ((rc = check_user(set, allow[i], "--allow-uid", errmsg)))
			return rc;
	return 0;
}

/* ---- lookups --------------------------------------------------------------- */

/* implicit_add returns the implicit principal name, made with roles
 * (and uid, when has_uid) on first use. */
static const struct api_principal *implicit_add(struct api_principals *set,
						const char *name,
						unsigned roles, bool has_uid,
						uid_t uid)
{
	struct api_principal *p;

	for (p = set->implicit; p; p = p->next)
		if (strcmp(p->name, name) == 0 && p->has_uid == has_uid &&
		    (!has_uid || p->uid == uid))
			return p;
	p = calloc(1, sizeof *p);
	if (!p || !(p->name = strdup(name))) {
		free(p);
		return NULL;
	}
	p->declared = roles;
	p->roles = berth_role_effective(roles);
	p->has_uid = has_uid;
	p->uid = uid;
	p->implicit = true;
	p->next = set->implicit;
	set->implicit = p;
	return p;
}

const struct api_principal *api_principal_of_uid(struct api_principals *set,
						 uid_t uid, const uid_t *allow,
						 size_t nallow)
{
	struct passwd pw, *pwp = NULL;
	char buf[4096], name[64];
	unsigned roles = 0;

	for (size_t i = 0; i < set->n; i++)
		if (set->v[i].has_uid && set->v[i].uid == uid)
			return &set->v[i];
	if (uid == geteuid() || uid == 0)
		roles = BERTH_ROLE_ADMIN;
	for (size_t i = 0; !roles && i < nallow; i++)
		if (allow[i] == uid)
			roles = ALLOWED_USER_ROLES;
	if (!roles)
		return NULL;
	/* Made once per user: every connection of the owner must not cost a
	 * look-up in the user database. */
	for (const struct api_principal *p = set->implicit; p; p = p->next)
		if (p->has_uid && p->uid == uid)
			return p;
	if (getpwuid_r(uid, &pw, buf, sizeof buf, &pwp) == 0 && pwp &&
	    strlen(pw.pw_name) < sizeof name)
		snprintf(name, sizeof name, "%s", pw.pw_name);
	else
		snprintf(name, sizeof name, "uid:%lu", (unsigned long)uid);
	return implicit_add(set, name, roles, true, uid);
}

const struct api_principal *api_principal_implicit(struct api_principals *set,
						   const char *name)
{
	return implicit_add(set, name, BERTH_ROLE_ADMIN, false, 0);
}

const struct api_principal *
api_principal_of_token(const struct api_principals *set, const char *token,
		       size_t len)
{
	const struct api_principal *found = NULL;
	unsigned char h[API_SHA256_SIZE];

	if (!set || !token)
		return NULL;
	sha256_of(token, len, h);
	for (size_t i = 0; i < set->n; i++) {
		unsigned char diff = 0;

		if (!set->v[i].has_token)
			continue;
		for (size_t k = 0; k < API_SHA256_SIZE; k++)
			diff |= (unsigned char)(h[k] ^ set->v[i].token_sha256[k]);
		if (diff == 0)
			found = &set->v[i];
	}
	memset(h, 0, sizeof h);
	return found;
}

json_t *api_principal_roles_json(const struct api_principal *p)
{
	json_t *a = json_array();

	for (unsigned bit = 1; a && bit <= BERTH_ROLE_ADMIN; bit <<= 1) {
		if (p->roles & BERTH_ROLE_ADMIN) {
			json_array_append_new(a, json_string("admin"));
			break;
		}
		if (p->roles & bit)
			json_array_append_new(a, json_string(berth_role_name(bit)));
	}
	return a;
}

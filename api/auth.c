/*
 * auth.c: the token of --token-file, its one check, and the throttle in
 * front of it (auth.h).
 *
 * Credits are kept in thousandths, refilled from the loop's clock when
 * they are looked at: a bucket costs no timer. Peers that failed lately
 * sit in a small table; a peer whose credit is full again has nothing to
 * remember, so its slot may be taken. When every slot holds a peer that
 * is still short of credit, the one closest to full gives way: only
 * everyone's credit then stands between a crowd of addresses and the
 * token, which is what it is for.
 */
#include "api/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <uv.h>

#include "api/principal.h"
#include "api/server.h"
#include "log/log.h"

#define MAX_TOKEN 4096
/* A token shorter than this is warned about at start: 32 random bytes
 * (or 64 hex digits) cannot be guessed at any rate. */
#define TOKEN_MIN_LEN 32

#define MILLI 1000
#define PEER_BURST (10 * MILLI)
#define PEER_RATE 1  /* credits a second: thousandths per ms */
#define ALL_BURST (100 * MILLI)
#define ALL_RATE 10
#define PEERS 256

/* A peer as the throttle sees it: an address family and up to 8 bytes of
 * its address (IPv4: 4; IPv6: its /64; loopback and the Unix socket:
 * none). */
struct auth_key {
	int family;
	unsigned char addr[8];
};

struct bucket {
	int64_t credit; /* thousandths of a failure */
	uint64_t at;    /* uv_now when credit was last brought up to date */
	bool warned;    /* the throttling of this bucket was logged */
};

struct peer {
	bool used;
	struct auth_key key;
	struct bucket b;
};

struct api_auth {
	char *token; /* malloc'd, or NULL */
	size_t token_len;
	struct bucket all;
	struct peer peers[PEERS];
	struct api_auth_stats stats;
};

static const char *const via_names[API_AUTH_NVIA] = {"socket", "http"};

static const char *const refusal_names[API_NREFUSAL] = {
	[API_REFUSED_UNAUTHENTICATED] = "unauthenticated",
	[API_REFUSED_FORBIDDEN] = "forbidden",
	[API_REFUSED_SELF_APPROVAL] = "self_approval",
	[API_REFUSED_NOT_AN_APPROVER] = "not_an_approver",
};

const char *api_refusal_name(int r)
{
	return r >= 0 && r < API_NREFUSAL ? refusal_names[r] : NULL;
}

int api_refusal_parse(const char *name)
{
	for (int r = 0; name && r < API_NREFUSAL; r++)
		if (strcmp(refusal_names[r], name) == 0)
			return r;
	return -1;
}

void api_refused(struct api *a, int r)
{
	if (a->auth && r >= 0 && r < API_NREFUSAL)
		a->auth->stats.refusals[r]++;
}

/* ---- the token ---------------------------------------------------------- */

int api_auth_check(struct api *a, const char *token, size_t len,
		   const struct api_principal **who)
{
	const struct api_auth *t = a->auth;
	unsigned char diff;

	*who = NULL;
	if (a->principals->declared) {
		/* Every principal's token is compared (principal.c), so the
		 * time taken names none of them. */
		*who = api_principal_of_token(a->principals, token, len);
		if (*who)
			return 0;
		return api_principals_has_token(a->principals) ? -EACCES
							       : -ENOENT;
	}
	if (!t || !t->token)
		return -ENOENT;
	diff = len != t->token_len;
	for (size_t i = 0; i < t->token_len; i++)
		diff |= (unsigned char)(t->token[i] ^
					(token && i < len ? token[i] : 0));
	if (diff != 0)
		return -EACCES;
	/* Without --principals, the token of --token-file is one admin, as
	 * it was before there were principals. */
	*who = api_principal_implicit(a->principals, "token");
	return *who ? 0 : -ENOMEM;
}

const struct api_principal *api_auth_owner(struct api *a)
{
	return api_principal_of_uid(a->principals, geteuid(), a->allow_uids,
				    a->nallow_uids);
}

const struct api_principal *api_auth_anonymous(struct api *a)
{
	if (a->principals->declared)
		return NULL;
	return api_principal_implicit(a->principals, "anonymous");
}

/* read_token reads path's first line into t. Returns 0 or -1 with
 * *errmsg. */
static int read_token(struct api_auth *t, const char *path, char **errmsg)
{
	char buf[MAX_TOKEN + 1];
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0 || (n = read(fd, buf, MAX_TOKEN)) < 0) {
		if (asprintf(errmsg, "cannot read the token file %s: %s", path,
			     strerror(errno)) < 0)
			*errmsg = NULL;
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	n = (ssize_t)strlen(buf);
	while (n > 0 && (buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		buf[--n] = '\0';
	if (n == 0) {
		if (asprintf(errmsg, "the token file %s is empty", path) < 0)
			*errmsg = NULL;
		return -1;
	}
	/* Neither stops berthd: a token that is in use keeps working, and
	 * the operator learns what to fix. */
	if (st.st_mode & (S_IRWXG | S_IRWXO))
		log_warn("the token file %s is mode %04o: other users may "
			 "read it or change it; chmod 600 %s", path,
			 (unsigned)(st.st_mode & 07777), path);
	if (n < TOKEN_MIN_LEN)
		log_warn("the token in %s is %zd bytes long: one shorter than "
			 "%d bytes may be guessed; use 32 random bytes (head "
			 "-c 32 /dev/urandom | base64)", path, n,
			 TOKEN_MIN_LEN);
	t->token = strdup(buf);
	t->token_len = (size_t)n;
	memset(buf, 0, sizeof buf);
	if (!t->token) {
		*errmsg = strdup("out of memory");
		return -1;
	}
	return 0;
}

int api_auth_init(struct api *a, const char *path, char **errmsg)
{
	struct api_auth *t = calloc(1, sizeof *t);

	if (!t) {
		*errmsg = strdup("out of memory");
		return -1;
	}
	a->auth = t;
	t->all.credit = ALL_BURST;
	t->all.at = uv_now(a->loop);
	if (path && read_token(t, path, errmsg) < 0)
		return -1;
	return 0;
}

void api_auth_finish(struct api *a)
{
	struct api_auth *t = a->auth;

	if (!t)
		return;
	if (t->token)
		memset(t->token, 0, t->token_len);
	free(t->token);
	free(t);
	a->auth = NULL;
}

void api_auth_stats(const struct api *a, struct api_auth_stats *out)
{
	if (a->auth)
		*out = a->auth->stats;
	else
		memset(out, 0, sizeof *out);
}

/* ---- peers -------------------------------------------------------------- */

char *api_peer_name(const struct sockaddr *peer, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (!peer) {
		snprintf(buf, size, "unknown");
	} else if (peer->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)peer;

		uv_ip4_name(in, host, sizeof host);
		snprintf(buf, size, "%s:%u", host, ntohs(in->sin_port));
	} else if (peer->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 =
			(const struct sockaddr_in6 *)peer;

		uv_ip6_name(in6, host, sizeof host);
		snprintf(buf, size, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else if (peer->sa_family == AF_UNIX) {
		snprintf(buf, size, "the Unix socket");
	} else {
		snprintf(buf, size, "unknown");
	}
	return buf;
}

/* key_of reduces peer to what the throttle tells apart (auth.h). */
static struct auth_key key_of(const struct sockaddr *peer)
{
	struct auth_key k;

	memset(&k, 0, sizeof k);
	if (!peer)
		return k;
	k.family = peer->sa_family;
	if (peer->sa_family == AF_INET) {
		const unsigned char *b = (const unsigned char *)&(
			(const struct sockaddr_in *)peer)->sin_addr;

		if (b[0] != 127)
			memcpy(k.addr, b, 4);
	} else if (peer->sa_family == AF_INET6) {
		const struct in6_addr *a6 =
			&((const struct sockaddr_in6 *)peer)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			/* An IPv4 peer of a dual-stack socket is that
			 * IPv4 address. */
			k.family = AF_INET;
			if (a6->s6_addr[12] != 127)
				memcpy(k.addr, a6->s6_addr + 12, 4);
		} else if (!IN6_IS_ADDR_LOOPBACK(a6)) {
			memcpy(k.addr, a6->s6_addr, 8);
		} else {
			/* ::1 and 127/8 are the same host. */
			k.family = AF_INET;
		}
	}
	return k;
}

/* key_name writes what key covers ("127.0.0.0/8", "2001:db8::/64"). */
static char *key_name(const struct auth_key *k, char *buf, size_t size)
{
	static const unsigned char zero[8];

	if (k->family == AF_INET && memcmp(k->addr, zero, 4) == 0) {
		snprintf(buf, size, "the loopback addresses");
	} else if (k->family == AF_INET) {
		snprintf(buf, size, "%u.%u.%u.%u", k->addr[0], k->addr[1],
			 k->addr[2], k->addr[3]);
	} else if (k->family == AF_INET6) {
		struct sockaddr_in6 s6 = {.sin6_family = AF_INET6};
		char host[INET6_ADDRSTRLEN] = "?";

		memcpy(&s6.sin6_addr, k->addr, 8);
		uv_ip6_name(&s6, host, sizeof host);
		snprintf(buf, size, "%s/64", host);
	} else if (k->family == AF_UNIX) {
		snprintf(buf, size, "the Unix socket");
	} else {
		snprintf(buf, size, "unknown peers");
	}
	return buf;
}

/* refill brings b's credit up to date at now. */
static void refill(struct bucket *b, uint64_t now, int64_t burst, int64_t rate)
{
	if (now > b->at) {
		uint64_t add = (now - b->at) * (uint64_t)rate;

		b->credit = add >= (uint64_t)burst ? burst
			    : b->credit + (int64_t)add > burst
				    ? burst
				    : b->credit + (int64_t)add;
	}
	b->at = now;
	if (b->credit == burst)
		b->warned = false;
}

/* peer_find returns the table's entry of k brought up to date, or NULL.
 * With create, a missing peer takes a slot (auth.c's header says which). */
static struct peer *peer_find(struct api_auth *t, const struct auth_key *k,
			      uint64_t now, bool create)
{
	struct peer *victim = NULL;

	for (int i = 0; i < PEERS; i++) {
		struct peer *p = &t->peers[i];

		if (!p->used) {
			if (!victim || victim->used)
				victim = p;
			continue;
		}
		refill(&p->b, now, PEER_BURST, PEER_RATE);
		if (memcmp(&p->key, k, sizeof *k) == 0)
			return p;
		if (p->b.credit == PEER_BURST) {
			/* Nothing left to remember of this one. */
			p->used = false;
			if (!victim || victim->used)
				victim = p;
		} else if (!victim ||
			   (victim->used && p->b.credit > victim->b.credit)) {
			victim = p;
		}
	}
	if (!create)
		return NULL;
	victim->used = true;
	victim->key = *k;
	victim->b.credit = PEER_BURST;
	victim->b.at = now;
	victim->b.warned = false;
	return victim;
}

/* wait_ms returns how long until b holds one failure's credit. */
static int64_t wait_ms(const struct bucket *b, int64_t rate)
{
	return b->credit >= MILLI ? 0 : (MILLI - b->credit + rate - 1) / rate;
}

int api_auth_gate(struct api *a, const struct sockaddr *peer, int via,
		  int64_t *retry_ms)
{
	struct api_auth *t = a->auth;
	uint64_t now = uv_now(a->loop);
	struct auth_key k = key_of(peer);
	struct peer *p = peer_find(t, &k, now, false);
	int64_t wait = 0;

	refill(&t->all, now, ALL_BURST, ALL_RATE);
	if (t->all.credit < MILLI)
		wait = wait_ms(&t->all, ALL_RATE);
	if (p && p->b.credit < MILLI && wait_ms(&p->b, PEER_RATE) > wait)
		wait = wait_ms(&p->b, PEER_RATE);
	*retry_ms = wait;
	if (wait == 0)
		return 0;
	t->stats.throttled[via]++;
	return -EAGAIN;
}

void api_auth_failed(struct api *a, const struct sockaddr *peer, int via,
		     const char *what)
{
	struct api_auth *t = a->auth;
	uint64_t now = uv_now(a->loop);
	struct auth_key k = key_of(peer);
	struct peer *p = peer_find(t, &k, now, true);
	char name[96], kname[96];

	t->stats.failures[via]++;
	refill(&t->all, now, ALL_BURST, ALL_RATE);
	t->all.credit -= MILLI;
	p->b.credit -= MILLI;
	/* The log names the transport, as a job's submittedVia does: a
	 * server/auth over TCP is not a local socket's. */
	log_warn("refused login from %s (%s, %s): wrong token",
		 api_peer_name(peer, name, sizeof name),
		 via == API_AUTH_VIA_SOCKET && peer &&
				 peer->sa_family != AF_UNIX
			 ? "tcp"
			 : via_names[via],
		 what);
	/* One line when a bucket runs dry, not one per refused attempt: a
	 * flood of guesses must not become a flood of log lines. */
	if (p->b.credit < MILLI && !p->b.warned) {
		p->b.warned = true;
		log_warn("throttling logins from %s: %d failed lately; "
			 "attempts are refused unchecked until its credit "
			 "returns (1 a second)", key_name(&k, kname, sizeof kname),
			 PEER_BURST / MILLI);
	}
	if (t->all.credit < MILLI && !t->all.warned) {
		t->all.warned = true;
		log_warn("throttling every login: %d failed lately; attempts "
			 "are refused unchecked until the credit returns (%d "
			 "a second)", ALL_BURST / MILLI, ALL_RATE);
	}
}

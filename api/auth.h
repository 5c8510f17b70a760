/*
 * auth.h: the token of --token-file and the throttle in front of it.
 *
 * Every secret a client offers instead of the Unix socket's peer check
 * (the socket's server/auth, the HTTP gateway's Bearer tokens and its
 * login) goes through the same three steps:
 *
 *   api_auth_gate     may this peer have a secret looked at now? A peer
 *                     (and everyone together) has a small credit of
 *                     failures that refills slowly; without credit the
 *                     attempt is refused unchecked, so no guess is ever
 *                     verified faster than the credit allows.
 *   api_auth_check    whose token is it? The one place a token is
 *                     verified, shared by the socket and HTTP: it names
 *                     the principal the token stands for (a declared
 *                     one of --principals, or "token" for --token-file's
 *                     without them).
 *   api_auth_failed   a verified failure: logged with the peer's address,
 *                     counted for /metrics, and taken from the credits.
 *
 * The credits, and why they are what they are:
 *   per peer   10 failures at once, then 1 a second. A peer is an IPv4
 *              address, an IPv6 /64 (what one host usually holds), or the
 *              Unix socket; every loopback address (127/8, ::1) is one
 *              peer, since any local process may bind any of them.
 *   everyone   100 failures at once, then 10 a second, so that many
 *              addresses together guess no faster.
 * A token of 32 random bytes is out of reach at any rate; the throttle is
 * for the token a person chose, which 66,000 guesses a second would find.
 * The price: while someone guesses, others with the token who share that
 * peer wait too (HTTP sessions and the Unix socket never do).
 */
#ifndef BERTH_API_AUTH_H
#define BERTH_API_AUTH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct api;
struct api_principal;

/* What a secret came through, for the log and the counters. */
enum api_auth_via {
	API_AUTH_VIA_SOCKET = 0, /* server/auth on the socket (TCP, Unix) */
	API_AUTH_VIA_HTTP,       /* a Bearer token or a login of --http */
	API_AUTH_NVIA,
};

/* api_auth_check returns 0 and sets *who (borrowed: principals live as
 * long as the api) when token (len bytes, borrowed) is a principal's
 * token, -ENOENT when berthd takes no token (no --token-file, and no
 * principal with one), or -EACCES. Its time does not depend on where a
 * wrong token differs from a right one, nor on which principal's it is.
 * It neither logs nor counts: callers go through api_auth_gate first and
 * report a failure with api_auth_failed. */
int api_auth_check(struct api *a, const char *token, size_t len,
		   const struct api_principal **who);

/* api_auth_owner returns the principal of berthd's own user (what the
 * HTTP gateway's login URL, printed in berthd's log, opens a session as),
 * and api_auth_anonymous the one of an --http-open gateway's requests
 * ("anonymous", admin), or NULL when principals are declared (--http-open
 * is then refused) or out of memory. Both are borrowed. */
const struct api_principal *api_auth_owner(struct api *a);
const struct api_principal *api_auth_anonymous(struct api *a);

/* api_auth_gate returns 0 when a secret from peer (may be NULL: unknown)
 * may be verified now, or -EAGAIN when peer, or everyone, failed too
 * often lately; *retry_ms then tells when the next attempt will be looked
 * at. A refused attempt is counted as throttled and must not be
 * verified. */
int api_auth_gate(struct api *a, const struct sockaddr *peer, int via,
		  int64_t *retry_ms);

/* api_auth_failed records a secret from peer that failed its check:
 * what (borrowed) names it for the log ("server/auth", "Bearer token on
 * GET /api/info"). The line carries the peer's address. */
void api_auth_failed(struct api *a, const struct sockaddr *peer, int via,
		     const char *what);

/* Why a request was refused -32010 (docs/API.md), as data.reason says. */
enum api_refusal {
	API_REFUSED_UNAUTHENTICATED = 0, /* no principal yet (TCP before
					    server/auth, a wrong token) */
	API_REFUSED_FORBIDDEN,           /* outside the caller's roles */
	API_REFUSED_SELF_APPROVAL,       /* the submitter deciding its job */
	API_REFUSED_NOT_AN_APPROVER,     /* not among the tool's approvers */
	API_NREFUSAL,
};

/* api_refusal_name returns data.reason's word for r ("forbidden"), and
 * api_refusal_parse the refusal of such a word, or -1. */
const char *api_refusal_name(int r);
int api_refusal_parse(const char *name);

/* api_refused counts a refusal of reason r for /metrics. */
void api_refused(struct api *a, int r);

/* struct api_auth_stats counts, since berthd started, the secrets that
 * failed their check and the attempts refused unchecked by the throttle,
 * by enum api_auth_via (/metrics: berth_auth_failures_total and
 * berth_auth_throttled_total), and the requests refused -32010, by enum
 * api_refusal (berth_refusals_total). */
struct api_auth_stats {
	uint64_t failures[API_AUTH_NVIA];
	uint64_t throttled[API_AUTH_NVIA];
	uint64_t refusals[API_NREFUSAL];
};

void api_auth_stats(const struct api *a, struct api_auth_stats *out);

/* api_peer_name writes peer as text ("127.0.0.1:4242", "[::1]:80",
 * "the Unix socket", "unknown") into buf of size bytes, and returns
 * buf. */
char *api_peer_name(const struct sockaddr *peer, char *buf, size_t size);

/* ---- for api/server.c -------------------------------------------------- */

/* api_auth_init reads the token file when path is not NULL (its first
 * line, without the newline and trailing blanks) and warns when the token
 * is shorter than 32 bytes or the file may be read by other users.
 * Returns 0, or -1 with *errmsg (malloc'd). With --principals there is no
 * token file: api_start refuses the two together. */
int api_auth_init(struct api *a, const char *path, char **errmsg);

/* api_auth_finish wipes the token and frees the throttle's state. */
void api_auth_finish(struct api *a);

#endif

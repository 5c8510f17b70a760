/*
 * pg.h: what pg.c shares with pg_copy.c (store_copy): the connection, the
 * migration runner and COPY text.
 */
#ifndef BERTH_STORE_PG_H
#define BERTH_STORE_PG_H

#include <stdbool.h>
#include <stddef.h>

#include <libpq-fe.h>

/* store__pg_connect connects to url and sets the session up. Returns 0
 * and sets *out, or a negative code and sets *errmsg (which never repeats
 * the URL: it may hold a password). */
int store__pg_connect(const char *url, PGconn **out, char **errmsg);

/*
 * store__pg_migrate brings the database up to the last embedded
 * PostgreSQL migration, tracked by the table berth_schema. Each pending
 * migration and its version bump are one transaction; nodes starting
 * together migrate one at a time (an advisory lock); a database newer
 * than this binary is refused (-EPROTO) before anything is written.
 * Returns 0 or a negative code and sets *errmsg.
 */
int store__pg_migrate(PGconn *pg, char **errmsg);

/* store__pg_error returns the negative errno code of a failed result (by
 * its SQLSTATE): -EDEADLK for a deadlock or serialization failure (the
 * store runs the batch again), -ENOSPC, -ENOMEM, -EBUSY, -EROFS, -EACCES,
 * -EINVAL, else -EIO. */
int store__pg_error(const PGresult *res, PGconn *pg);

/* A growing text buffer; oom is set (and further adds ignored) when an
 * allocation failed. */
struct store__buf {
	char *p;
	size_t n, cap;
	bool oom;
};
void store__buf_add(struct store__buf *b, const char *s, size_t n);

/* store__copy_field appends v to a line of COPY's text format: \N for
 * NULL, backslash escapes for backslash, tab, newline and CR; then sep
 * (a tab between fields, a newline after the last). */
void store__copy_field(struct store__buf *b, const char *v, char sep);

/* store__pg_copy_in runs sql, a "COPY ... FROM STDIN" of ours, with the
 * lines of b. Returns 0 or a negative code. */
int store__pg_copy_in(PGconn *pg, const char *sql, const struct store__buf *b);

#endif

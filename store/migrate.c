/*
 * migrate.c: applies the embedded migrations to a SQLite database.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "store/migrate.h"
#include "store/store_int.h"

int store__sqlite_error(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_CONSTRAINT:
	case SQLITE_MISMATCH:
	case SQLITE_RANGE:
	case SQLITE_TOOBIG:
		return -EINVAL;
	default: /* IOERR, CORRUPT, NOTADB, CANTOPEN, PROTOCOL, ... */
		return -EIO;
	}
}

void store__set_msg(char **errmsg, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	free(*errmsg);
	*errmsg = s;
}

int store__user_version(sqlite3 *db, int *version)
{
	sqlite3_stmt *s;
	int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL);
	if (rc != SQLITE_OK)
		return rc;
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*version = sqlite3_column_int(s, 0);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	return rc;
}

/* apply runs one migration and its version bump in one transaction.
 * Returns a SQLite result code; on failure nothing of it stays and why is
 * in why (read before the rollback, which would replace it). */
static int apply(sqlite3 *db, const struct migration *m, char why[256])
{
	/* The version is an integer of ours, never a user string. */
	char bump[64];
	snprintf(bump, sizeof(bump), "PRAGMA user_version = %d", m->version);

	int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		snprintf(why, 256, "%s", sqlite3_errmsg(db));
		return rc;
	}
	rc = sqlite3_exec(db, m->sql, NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, bump, NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		snprintf(why, 256, "%s", sqlite3_errmsg(db));
		if (!sqlite3_get_autocommit(db))
			sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	}
	return rc;
}

/* other_tables returns, malloc'd, the names of db's tables and views that
 * are not SQLite's own (sqlite_sequence, sqlite_stat1, ...), the first few
 * joined by ", " in name order with ", ..." after them, or "" when there is
 * none; NULL when out of memory or db cannot be read (*rc says which). */
static char *other_tables(sqlite3 *db, int *rc)
{
	sqlite3_stmt *s;
	char *names = NULL;
	size_t len = 0, n = 0;
	FILE *fp = open_memstream(&names, &len);

	if (fp == NULL) {
		*rc = SQLITE_NOMEM;
		return NULL;
	}
	*rc = sqlite3_prepare_v2(db,
		"SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
		" AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
		-1, &s, NULL);
	while (*rc == SQLITE_OK && (*rc = sqlite3_step(s)) == SQLITE_ROW) {
		*rc = SQLITE_OK;
		if (n++ == 5) {
			fputs(", ...", fp);
			break;
		}
		fprintf(fp, "%s%s", n > 1 ? ", " : "",
			(const char *)sqlite3_column_text(s, 0));
	}
	if (*rc == SQLITE_DONE)
		*rc = SQLITE_OK;
	sqlite3_finalize(s);
	if (fclose(fp) != 0 && *rc == SQLITE_OK)
		*rc = SQLITE_NOMEM;
	if (*rc != SQLITE_OK) {
		free(names);
		return NULL;
	}
	return names;
}

/* berth_tables returns how many of the four tables berth's first
 * migration made (and none later drops) the database has, or -1 with *rc
 * set when it cannot be read. */
static int berth_tables(sqlite3 *db, int *rc)
{
	sqlite3_stmt *s;
	int n = -1;

	*rc = sqlite3_prepare_v2(db,
		"SELECT count(*) FROM sqlite_master WHERE type = 'table'"
		" AND name IN ('jobs', 'events', 'job_logs', 'tools')",
		-1, &s, NULL);
	if (*rc == SQLITE_OK && (*rc = sqlite3_step(s)) == SQLITE_ROW) {
		n = sqlite3_column_int(s, 0);
		*rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	return n;
}

/* foreign refuses, -EEXIST, the database at path as another program's,
 * naming its tables (what the operator recognises). */
static int foreign(sqlite3 *db, const char *path, int version, char **errmsg)
{
	int rc;
	char *names = other_tables(db, &rc);

	if (names == NULL) {
		store__set_msg(errmsg, "cannot read the database %s: %s", path,
			sqlite3_errmsg(db));
		return store__sqlite_error(rc);
	}
	char version_text[40] = "";

	if (version != 0)
		snprintf(version_text, sizeof version_text,
			 "user_version %d, ", version);
	store__set_msg(errmsg,
		"the database %s is a SQLite database of another program (%stables: %s), not berth's; it was left untouched: give a new path, or a database of berth's",
		path, version_text, names[0] ? names : "none");
	free(names);
	return -EEXIST;
}

int store__berths(sqlite3 *db, const char *path, char **errmsg)
{
	int version = 0, have;
	int rc = store__user_version(db, &version);

	if (rc == SQLITE_OK && version == 0)
		return 0; /* store__migrate tells new from another's */
	if (rc == SQLITE_OK && (have = berth_tables(db, &rc)) == 4)
		return 0;
	if (rc != SQLITE_OK) {
		store__set_msg(errmsg, "cannot read the database %s: %s", path,
			sqlite3_errmsg(db));
		return store__sqlite_error(rc);
	}
	return foreign(db, path, version, errmsg);
}

int store__migrate(sqlite3 *db, const char *path, const struct migration *m,
		   size_t n, char **errmsg)
{
	for (size_t i = 0; i < n; i++) {
		if (m[i].version != (int)i + 1) {
			store__set_msg(errmsg, "migration %zu is numbered %d", i + 1,
				m[i].version);
			return -EINVAL;
		}
	}

	int version = 0;
	int rc = store__user_version(db, &version);
	if (rc != SQLITE_OK) {
		store__set_msg(errmsg, "cannot read the database %s: %s", path,
			sqlite3_errmsg(db));
		return store__sqlite_error(rc);
	}
	if (version < 0 || (size_t)version > n) {
		store__set_msg(errmsg,
			"the database %s was written by a newer berth (schema version %d, this binary knows %zu); it was left untouched",
			path, version, n);
		return -EPROTO;
	}

	/* Version 0 is a database no migration of berth's ran on: a new or
	 * empty file, or a SQLite database of some other program (a --db
	 * typed wrong). berth's tables would be added to the other for good,
	 * so it is refused, -EEXIST, before anything is written. */
	if (version == 0) {
		char *names = other_tables(db, &rc);
		if (names == NULL) {
			store__set_msg(errmsg, "cannot read the database %s: %s",
				path, sqlite3_errmsg(db));
			return store__sqlite_error(rc);
		}
		bool any = names[0] != '\0';

		free(names);
		if (any)
			return foreign(db, path, version, errmsg);
	}

	for (size_t i = (size_t)version; i < n; i++) {
		char why[256];
		rc = apply(db, &m[i], why);
		if (rc != SQLITE_OK) {
			store__set_msg(errmsg,
				"migration %04d_%s of the database %s failed and was rolled back: %s",
				m[i].version, m[i].name, path, why);
			return store__sqlite_error(rc);
		}
	}
	return 0;
}

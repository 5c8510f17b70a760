/*
 * migrate.h: the SQLite migration runner.
 */
#ifndef BERTH_STORE_MIGRATE_H
#define BERTH_STORE_MIGRATE_H

#include <stddef.h>

#include <sqlite3.h>

#include "migrations/migrations.h"

/*
 * store__migrate brings db up to the last of the n migrations m (numbered
 * 1..n without gaps, as embed.py guarantees), tracked by PRAGMA
 * user_version. Each pending migration and its user_version bump are one
 * transaction, applied in order; a failing one is rolled back completely
 * and the ones before it stay. A database whose version is newer than n is
 * refused before anything is written to it, and so is one at version 0
 * that holds tables of another program. Returns 0; -EPROTO for a newer
 * database; -EEXIST for another program's; -EINVAL for a list with gaps;
 * or a storage error. On failure
 * *errmsg is a malloc'd sentence naming path.
 */
int store__migrate(sqlite3 *db, const char *path, const struct migration *m,
		   size_t n, char **errmsg);

/* store__berths refuses, -EEXIST with *errmsg naming path and its tables,
 * a database whose user_version another program set: one past version 0
 * without the tables berth's first migration makes. Called before
 * store__migrate with berth's own migrations; returns 0 for a database of
 * berth's or at version 0, or a storage error. */
int store__berths(sqlite3 *db, const char *path, char **errmsg);

/* store__user_version reads db's PRAGMA user_version into *version.
 * Returns a SQLite result code. */
int store__user_version(sqlite3 *db, int *version);

/* store__sqlite_error returns the negative errno code for a SQLite result
 * code: -ENOSPC for SQLITE_FULL, -EIO, -EBUSY, -ENOMEM, -EROFS, ... */
int store__sqlite_error(int rc);

#endif

/*
 * migrations.h: the migrations embedded into the binary at build time.
 *
 * Each backend has its own folder of numbered files (migrations/sqlite/
 * NNNN_name.sql, migrations/postgres/NNNN_name.sql). embed.py turns a folder
 * into a C array in version order; the store's runner applies the pending
 * ones (store/migrate.h).
 */
#ifndef BERTH_MIGRATIONS_H
#define BERTH_MIGRATIONS_H

#include <stddef.h>

/* One migration: its number (1, 2, ...), the rest of its file name and its
 * SQL text, all static. */
struct migration {
	int version;
	const char *name;
	const char *sql;
};

/* The SQLite migrations, version 1 first, numbered without gaps. */
extern const struct migration migrations_sqlite[];
extern const size_t migrations_sqlite_count;

/* The PostgreSQL migrations (built with the PostgreSQL backend). */
extern const struct migration migrations_postgres[];
extern const size_t migrations_postgres_count;

#endif

/*
 * pg_copy.c: store_copy, which moves a single-node SQLite database to
 * PostgreSQL (docs/POSTGRES.md, "Moving a SQLite database").
 *
 * Every table is streamed with COPY in one PostgreSQL transaction: either
 * the whole database arrives, or nothing does. Column values are copied as
 * SQLite stores them (integers, and JSON as compact text), so jobs,
 * payloads, decisions and events keep every byte and every seq.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "store/lock.h"
#include "store/migrate.h"
#include "store/pg.h"
#include "store/store_int.h"

/* The tables copied, with the columns both schemas share. */
static const struct {
	const char *name;
	const char *cols;
} tables[] = {
	{"jobs", STORE__JOB_COLS},
	{"events", "seq, job_id, tool, type, status, at, data, actor, via, "
		   "client"},
	{"job_logs", "job_id, n, at, level, message, data"},
	{"tools", "name, paused"},
	{"worker_tools", "name, definition, updated_at"},
};

/* Rows are sent in chunks of about this size. */
enum { CHUNK = 1 << 20 };

/* copy_table streams one table from db to pg. Returns the rows copied or
 * a negative code. */
static int64_t copy_table(sqlite3 *db, PGconn *pg, const char *name,
			  const char *cols, char **errmsg)
{
	char sql[1024];
	sqlite3_stmt *s;
	snprintf(sql, sizeof(sql), "SELECT %s FROM %s", cols, name);
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK) {
		store__set_msg(errmsg, "cannot read %s from SQLite: %s", name, sqlite3_errmsg(db));
		return -EIO;
	}
	snprintf(sql, sizeof(sql), "COPY %s (%s) FROM STDIN", name, cols);
	PGresult *r = PQexec(pg, sql);
	if (r == NULL || PQresultStatus(r) != PGRES_COPY_IN) {
		store__set_msg(errmsg, "cannot copy into %s: %s", name, PQerrorMessage(pg));
		PQclear(r);
		sqlite3_finalize(s);
		return -EIO;
	}
	PQclear(r);

	struct store__buf b = {0};
	int64_t rows = 0;
	int ncols = sqlite3_column_count(s), rc;
	bool bad = false;
	while (!bad && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		for (int i = 0; i < ncols; i++)
			store__copy_field(&b, (const char *)sqlite3_column_text(s, i),
					  i + 1 < ncols ? '\t' : '\n');
		rows++;
		if (b.oom)
			bad = true;
		else if (b.n >= CHUNK) {
			bad = PQputCopyData(pg, b.p, (int)b.n) != 1;
			b.n = 0;
		}
	}
	if (!bad && rc != SQLITE_DONE) {
		store__set_msg(errmsg, "cannot read %s from SQLite: %s", name, sqlite3_errmsg(db));
		bad = true;
	}
	if (!bad && b.n > 0)
		bad = PQputCopyData(pg, b.p, (int)b.n) != 1;
	free(b.p);
	sqlite3_finalize(s);
	PQputCopyEnd(pg, bad ? "the copy from SQLite failed" : NULL);
	while ((r = PQgetResult(pg)) != NULL) {
		if (PQresultStatus(r) != PGRES_COMMAND_OK && !bad) {
			store__set_msg(errmsg, "cannot copy into %s: %s", name,
				PQresultErrorMessage(r));
			bad = true;
		}
		PQclear(r);
	}
	if (bad && *errmsg == NULL)
		store__set_msg(errmsg, "cannot copy %s: %s", name, b.oom ? "out of memory" : PQerrorMessage(pg));
	return bad ? -EIO : rows;
}

/* scalar runs a query of one integer on SQLite. */
static int64_t scalar(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *s;
	int64_t v = 0;
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
		return 0;
	if (sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return v;
}

static int exec_ok(PGconn *pg, const char *sql, char **errmsg)
{
	PGresult *r = PQexec(pg, sql);
	ExecStatusType st = r != NULL ? PQresultStatus(r) : PGRES_FATAL_ERROR;
	int rc = 0;
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		store__set_msg(errmsg, "PostgreSQL: %s", PQerrorMessage(pg));
		rc = store__pg_error(r, pg);
	}
	PQclear(r);
	return rc;
}

int store_copy(const char *from, const char *to, char **errmsg)
{
	char *msg = NULL;
	sqlite3 *db = NULL;
	PGconn *pg = NULL;
	int rc;

	if (errmsg == NULL)
		errmsg = &msg;
	*errmsg = NULL;
	/* The words are the user's: berthd --migrate-from and
	 * berth-store-copy pass their arguments as they were given. */
	if (from == NULL || to == NULL) {
		store__set_msg(errmsg, "the copy needs a SQLite database to copy and a PostgreSQL one to copy into");
		free(msg);
		return -EINVAL;
	}
	if (store__is_pg_url(from)) {
		store__set_msg(errmsg, "%s is a PostgreSQL URL: the database to copy from must be a SQLite file's path", from);
		free(msg);
		return -EINVAL;
	}
	if (!store__is_pg_url(to)) {
		store__set_msg(errmsg, "%s is not a postgres:// or postgresql:// URL: the database to copy into must be PostgreSQL", to);
		free(msg);
		return -EINVAL;
	}
	struct store__lock lock;
	rc = store__lock_acquire(from, false, &lock, errmsg);
	if (rc < 0) {
		free(msg);
		return rc;
	}
	if (sqlite3_open_v2(from, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
		store__set_msg(errmsg, "cannot open the SQLite database %s: %s", from,
			db != NULL ? sqlite3_errmsg(db) : "out of memory");
		rc = -EIO;
		goto out;
	}
	sqlite3_busy_timeout(db, 5000);
	/* An older SQLite schema is brought up to date first, so that the
	 * columns match; a newer one is refused. */
	if ((rc = store__berths(db, from, errmsg)) != 0 ||
	    (rc = store__migrate(db, from, migrations_sqlite, migrations_sqlite_count,
				 errmsg)) != 0)
		goto out;
	if ((rc = store__pg_connect(to, &pg, errmsg)) != 0 ||
	    (rc = store__pg_migrate(pg, errmsg)) != 0)
		goto out;

	/* A read transaction on SQLite gives one consistent picture. */
	if ((rc = exec_ok(pg, "BEGIN", errmsg)) != 0)
		goto out;
	if (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
		store__set_msg(errmsg, "cannot read the SQLite database: %s", sqlite3_errmsg(db));
		rc = -EIO;
		goto rollback;
	}
	/* Nothing may be merged into a database in use: jobs and seqs of
	 * two histories would collide. */
	if ((rc = exec_ok(pg, "LOCK TABLE jobs, events, job_logs, tools,"
			      " event_seq IN EXCLUSIVE MODE", errmsg)) != 0)
		goto rollback;
	PGresult *r = PQexec(pg, "SELECT (SELECT count(*) FROM jobs)"
				 " + (SELECT count(*) FROM events)"
				 " + (SELECT n FROM event_seq)");
	if (r == NULL || PQresultStatus(r) != PGRES_TUPLES_OK ||
	    strcmp(PQgetvalue(r, 0, 0), "0") != 0) {
		store__set_msg(errmsg, "the PostgreSQL database already holds jobs or events; the copy only fills an empty one");
		PQclear(r);
		rc = -EEXIST;
		goto rollback;
	}
	PQclear(r);
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		int64_t n = copy_table(db, pg, tables[i].name, tables[i].cols, errmsg);
		if (n < 0) {
			rc = (int)n;
			goto rollback;
		}
	}
	/* seq goes on from the highest ever given out, even a pruned one. */
	int64_t last = scalar(db, "SELECT max(n, coalesce((SELECT max(seq) FROM events), 0))"
				  " FROM event_seq_floor");
	char sql[128];
	snprintf(sql, sizeof(sql), "UPDATE event_seq SET n = %lld", (long long)last);
	if ((rc = exec_ok(pg, sql, errmsg)) != 0)
		goto rollback;
	r = PQexec(pg, "COMMIT");
	if (r == NULL || PQresultStatus(r) != PGRES_COMMAND_OK ||
	    strcmp(PQcmdStatus(r), "COMMIT") != 0) {
		store__set_msg(errmsg, "the copy to PostgreSQL did not commit: %s", PQerrorMessage(pg));
		rc = -EIO;
	}
	PQclear(r);
	sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	goto out;

rollback:
	PQclear(PQexec(pg, "ROLLBACK"));
	if (!sqlite3_get_autocommit(db))
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
out:
	PQfinish(pg);
	sqlite3_close(db);
	store__lock_release(&lock);
	free(msg);
	return rc;
}

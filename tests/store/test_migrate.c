/*
 * test_migrate.c: the migration runner, on real temporary database files:
 * the embedded list, and injected lists for the failure cases.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store/migrate.h"
#include "tests/store/fixture.h"

static int user_version(const char *path)
{
	sqlite3 *db;
	sqlite3_stmt *s;
	int v = -1;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL), SQLITE_OK);
	if (sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int(s, 0);
	sqlite3_finalize(s);
	sqlite3_close(db);
	return v;
}

static bool table_exists(const char *path, const char *name)
{
	sqlite3 *db;
	sqlite3_stmt *s;
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE name = ?1",
					    -1, &s, NULL), SQLITE_OK);
	sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
	bool found = sqlite3_step(s) == SQLITE_ROW;
	sqlite3_finalize(s);
	sqlite3_close(db);
	return found;
}

/* slurp returns the bytes of path (malloc'd) and their count in *n. */
static char *slurp(const char *path, size_t *n)
{
	FILE *fp = fopen(path, "rb");
	assert_non_null(fp);
	fseek(fp, 0, SEEK_END);
	long len = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	char *buf = malloc((size_t)len + 1);
	assert_int_equal(fread(buf, 1, (size_t)len, fp), (size_t)len);
	fclose(fp);
	*n = (size_t)len;
	return buf;
}

static void embedded_migrations__are_numbered_from_one_without_gaps(void **state)
{
	assert_true(migrations_sqlite_count >= 1);
	for (size_t i = 0; i < migrations_sqlite_count; i++) {
		assert_int_equal(migrations_sqlite[i].version, (int)i + 1);
		assert_true(strlen(migrations_sqlite[i].sql) > 0);
	}
	assert_string_equal(migrations_sqlite[0].name, "init");
}

static void open__fresh_database__applies_every_migration(void **state)
{
	struct fx *f = *state;
	assert_int_equal(fx_open(f, NULL), 0);
	fx_close(f);
	assert_int_equal(user_version(f->path), (int)migrations_sqlite_count);
	const char *tables[] = {"jobs", "events", "job_logs", "tools", "jobs_pending_tool",
				"jobs_pending_run_at", "jobs_expiry", "jobs_status",
				"jobs_run_id", "jobs_idempotency"};
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
		assert_true(table_exists(f->path, tables[i]));
	/* 0005: the prune walks the primary key; no index by finished_at
	 * is written by each job's last commit. */
	assert_false(table_exists(f->path, "jobs_finished"));
	/* 0008: claims read the pending jobs by tool, not in one order. */
	assert_false(table_exists(f->path, "jobs_runnable"));
	/* 0006: jobs_status leaves completed jobs out. */
	sqlite3 *db;
	sqlite3_stmt *s;
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT sql FROM sqlite_master"
					    " WHERE name = 'jobs_status'",
					    -1, &s, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	assert_non_null(strstr((const char *)sqlite3_column_text(s, 0),
			       "WHERE status <> 4"));
	sqlite3_finalize(s);
	sqlite3_close(db);
}

static void open__again__keeps_the_version_and_the_data(void **state)
{
	struct fx *f = *state;
	char id[40];
	assert_int_equal(fx_open(f, NULL), 0);
	assert_int_equal(fx_create(f, "t", STORE_PENDING, NULL, 1, id), 0);
	fx_close(f);
	assert_int_equal(fx_open(f, NULL), 0);
	assert_int_equal(fx_status(f, id), STORE_PENDING);
	fx_close(f);
	assert_int_equal(user_version(f->path), (int)migrations_sqlite_count);
}

static void open__newer_database__is_refused_and_left_untouched(void **state)
{
	struct fx *f = *state;
	sqlite3 *db;
	/* berth's database, as a later berth would have left it. */
	assert_int_equal(fx_open(f, NULL), 0);
	fx_close(f);
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "CREATE TABLE future (x); PRAGMA user_version = 99",
				      NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	size_t n0, n1;
	char *before = slurp(f->path, &n0);

	char *msg = NULL;
	assert_int_equal(fx_open(f, &msg), -EPROTO);
	assert_null(f->st);
	assert_non_null(msg);
	assert_non_null(strstr(msg, "newer"));
	assert_non_null(strstr(msg, "99"));
	free(msg);

	char *after = slurp(f->path, &n1);
	assert_int_equal(n0, n1);
	assert_memory_equal(before, after, n0);
	char wal[160];
	snprintf(wal, sizeof(wal), "%s-wal", f->path);
	assert_int_equal(access(wal, F_OK), -1);
	free(before);
	free(after);
}

/* A SQLite database of another program (tables of its own, user_version
 * 0: berth's migrations never ran on it) is refused, naming the file and
 * its tables, and left as it was: a mistyped --db must not get berth's
 * tables added for good. */
static void open__a_database_of_another_program__is_refused_and_left_untouched(void **state)
{
	struct fx *f = *state;
	sqlite3 *db;
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "CREATE TABLE users (name TEXT);"
				      " CREATE TABLE orders (id INTEGER PRIMARY KEY"
				      " AUTOINCREMENT); INSERT INTO users VALUES ('ann')",
				      NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	size_t n0, n1;
	char *before = slurp(f->path, &n0);

	char *msg = NULL;
	assert_int_equal(fx_open(f, &msg), -EEXIST);
	assert_null(f->st);
	assert_non_null(msg);
	assert_non_null(strstr(msg, f->path));
	assert_non_null(strstr(msg, "another program"));
	assert_non_null(strstr(msg, "orders, users"));
	/* sqlite_sequence is SQLite's, not the program's. */
	assert_null(strstr(msg, "sqlite_sequence"));
	free(msg);

	char *after = slurp(f->path, &n1);
	assert_int_equal(n0, n1);
	assert_memory_equal(before, after, n0);
	assert_false(table_exists(f->path, "jobs"));
	free(before);
	free(after);
}

/* A program that sets PRAGMA user_version too (many do) made a database
 * that looked like berth's at that version: berthd ran the migrations
 * past it on the other's tables, or failed in one, instead of refusing it
 * untouched as it refuses one at version 0. */
static void open__another_programs_database_with_a_user_version__is_refused_and_left_untouched(void **state)
{
	static const int versions[] = {3, 1000};
	struct fx *f = *state;

	for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
		char sql[200];
		sqlite3 *db;

		unlink(f->path);
		snprintf(sql, sizeof sql,
			 "CREATE TABLE jobs (id TEXT); CREATE TABLE notes (t);"
			 " INSERT INTO jobs VALUES ('x'); PRAGMA user_version = %d",
			 versions[i]);
		assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
		assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL),
				 SQLITE_OK);
		sqlite3_close(db);
		size_t n0, n1;
		char *before = slurp(f->path, &n0), *msg = NULL;

		assert_int_equal(fx_open(f, &msg), -EEXIST);
		assert_null(f->st);
		assert_non_null(msg);
		assert_non_null(strstr(msg, f->path));
		assert_non_null(strstr(msg, "another program"));
		assert_non_null(strstr(msg, "jobs, notes"));
		assert_int_equal(user_version(f->path), versions[i]);
		free(msg);
		char *after = slurp(f->path, &n1);
		assert_int_equal(n0, n1);
		assert_memory_equal(before, after, n0);
		assert_false(table_exists(f->path, "events"));
		free(before);
		free(after);
	}
	/* berth's own database at its version still opens. */
	unlink(f->path);
	assert_int_equal(fx_open(f, NULL), 0);
	fx_close(f);
	assert_int_equal(fx_open(f, NULL), 0);
	fx_close(f);
}

/* An empty file (touch berth.db) is a new database, not another
 * program's. */
static void open__an_empty_file__is_made_a_berth_database(void **state)
{
	struct fx *f = *state;
	FILE *fp = fopen(f->path, "w");
	assert_non_null(fp);
	fclose(fp);
	assert_int_equal(chmod(f->path, 0600), 0);
	assert_int_equal(fx_open(f, NULL), 0);
	fx_close(f);
	assert_int_equal(user_version(f->path), (int)migrations_sqlite_count);
	assert_true(table_exists(f->path, "jobs"));
}

static void migrate__failing_migration__rolls_back_completely(void **state)
{
	struct fx *f = *state;
	const struct migration list[] = {
		{1, "one", "CREATE TABLE a (x);"},
		{2, "two", "CREATE TABLE b (x); INSERT INTO a VALUES (1); THIS IS NOT SQL;"},
	};
	sqlite3 *db;
	char *msg = NULL;
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	int rc = store__migrate(db, f->path, list, 2, &msg);
	assert_true(rc < 0);
	assert_non_null(msg);
	assert_non_null(strstr(msg, "0002_two"));
	free(msg);
	sqlite3_close(db);

	assert_int_equal(user_version(f->path), 1);
	assert_true(table_exists(f->path, "a"));
	assert_false(table_exists(f->path, "b"));
	assert_int_equal(fx_count(f, "SELECT count(*) FROM a"), 0);
}

static void migrate__applies_only_the_pending_ones_in_order(void **state)
{
	struct fx *f = *state;
	const struct migration list[] = {
		{1, "one", "CREATE TABLE a (x);"},
		{2, "two", "INSERT INTO a VALUES (2);"},
		{3, "three", "INSERT INTO a SELECT x + 1 FROM a;"},
	};
	sqlite3 *db;
	char *msg = NULL;
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(store__migrate(db, f->path, list, 2, &msg), 0);
	assert_int_equal(store__migrate(db, f->path, list, 3, &msg), 0);
	assert_int_equal(store__migrate(db, f->path, list, 3, &msg), 0);
	sqlite3_close(db);
	assert_null(msg);
	assert_int_equal(user_version(f->path), 3);
	assert_int_equal(fx_count(f, "SELECT sum(x) FROM a"), 5);
}

static void migrate__list_with_a_gap__is_refused(void **state)
{
	struct fx *f = *state;
	const struct migration list[] = {
		{1, "one", "CREATE TABLE a (x);"},
		{3, "three", "CREATE TABLE c (x);"},
	};
	sqlite3 *db;
	char *msg = NULL;
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(store__migrate(db, f->path, list, 2, &msg), -EINVAL);
	sqlite3_close(db);
	free(msg);
	assert_false(table_exists(f->path, "a"));
}

/* at_version makes f's database one of migration `version` (the first
 * `version` embedded migrations and its user_version), with sql of ours
 * run on it: a database an older berth left. */
static void at_version(struct fx *f, int version, const char *sql)
{
	sqlite3 *db;
	char bump[40];

	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	for (int i = 0; i < version; i++)
		assert_int_equal(sqlite3_exec(db, migrations_sqlite[i].sql, NULL,
					      NULL, NULL), SQLITE_OK);
	snprintf(bump, sizeof(bump), "PRAGMA user_version = %d", version);
	assert_int_equal(sqlite3_exec(db, bump, NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

/* A database of migration 0006 whose newest events were pruned (its
 * AUTOINCREMENT counter at 9, its events at 1..5) is copied into events
 * without AUTOINCREMENT by 0007 with every event kept, and its next event
 * takes seq 10, not 6: a seq once given out never comes back. */
static void open__a_database_with_autoincrement__keeps_its_pruned_seqs_given_out(void **state)
{
	struct fx *f = *state;

	at_version(f, 6,
		"WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k"
		" WHERE i < 9)"
		" INSERT INTO events (job_id, tool, type, status, at, data, actor)"
		" SELECT 'j' || i, 't', 0, 0, 1795561025123 + i, '{\"i\":' || i || '}',"
		" 'ann' FROM k;"
		"DELETE FROM events WHERE seq > 5;");

	assert_int_equal(fx_open(f, NULL), 0);
	assert_int_equal(user_version(f->path), (int)migrations_sqlite_count);
	assert_false(table_exists(f->path, "events_0007"));
	assert_int_equal(fx_count(f, "SELECT count(*) FROM sqlite_sequence"
				     " WHERE name = 'events'"), 0);
	assert_int_equal(store_last_seq(f->st), 9);

	struct store_event *ev = NULL;
	size_t n = 0;
	assert_int_equal(store_events(f->st, 0, NULL, 10, &ev, &n), 0);
	assert_int_equal(n, 5);
	for (size_t i = 0; i < n; i++) {
		char job[24];
		snprintf(job, sizeof(job), "j%zu", i + 1);
		assert_int_equal(ev[i].seq, (int64_t)i + 1);
		assert_string_equal(ev[i].job_id, job);
		assert_int_equal(ev[i].at, 1795561025123 + (int64_t)i + 1);
		store_event_finish(&ev[i]);
	}
	free(ev);

	char id[40];
	assert_int_equal(fx_create(f, "t", STORE_PENDING, NULL, 1, id), 0);
	assert_int_equal(store_events(f->st, 5, NULL, 10, &ev, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ev[0].seq, 10);
	assert_string_equal(ev[0].job_id, id);
	store_event_finish(&ev[0]);
	free(ev);
	assert_int_equal(store_last_seq(f->st), 10);
}

/* A database of schema 2 (before principals) is migrated by
 * 0003_principals, and its jobs and events read as submitted, decided and
 * caused by "unknown": nothing that was there is lost, and nothing is
 * made up. */
static void open__a_database_before_principals__reads_its_deciders_as_unknown(void **state)
{
	struct fx *f = *state;
	struct store_job *j = NULL;
	struct store_event *ev = NULL;
	size_t n = 0;
	json_t *o;

	at_version(f, 2,
		"INSERT INTO jobs (id, tool, status, run_at, approval_required,"
		" decision, reason, decided_at, created_at, updated_at)"
		" VALUES ('0190a0a0-0000-7000-8000-000000000001', 'deploy', 0,"
		" 1795561025123, 1, 1, 'fine', 1795561025123, 1795561025123,"
		" 1795561025123);"
		"INSERT INTO events (job_id, tool, type, status, at) VALUES"
		" ('0190a0a0-0000-7000-8000-000000000001', 'deploy', 2, 0,"
		" 1795561025123);");

	assert_int_equal(fx_open(f, NULL), 0);
	assert_int_equal(user_version(f->path), (int)migrations_sqlite_count);
	assert_int_equal(store_get(f->st, "0190a0a0-0000-7000-8000-000000000001",
				   &j), 0);
	o = store_job_to_json(j);
	assert_string_equal(json_string_value(json_object_get(o, "submittedBy")),
			    "unknown");
	assert_string_equal(json_string_value(json_object_get(json_object_get(
		json_object_get(o, "approval"), "decidedBy"), "name")), "unknown");
	assert_null(json_object_get(json_object_get(json_object_get(
		o, "approval"), "decidedBy"), "via"));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(
		o, "approval"), "quorum")), 1);
	assert_int_equal(json_array_size(json_object_get(json_object_get(
		o, "approval"), "approvals")), 0);
	/* The text form of the job is the same as its tree. */
	{
		char *text = store_job_text(j), *tree = json_dumps(o, JSON_COMPACT);

		assert_string_equal(text, tree);
		free(text);
		free(tree);
	}
	json_decref(o);
	store_job_free(j);
	assert_int_equal(store_events(f->st, 0, NULL, 10, &ev, &n), 0);
	assert_int_equal(n, 1);
	o = store_event_to_json(&ev[0]);
	assert_string_equal(json_string_value(json_object_get(o, "by")), "unknown");
	assert_null(json_object_get(o, "via"));
	json_decref(o);
	store_event_finish(&ev[0]);
	free(ev);
	fx_close(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(embedded_migrations__are_numbered_from_one_without_gaps),
		cmocka_unit_test_setup_teardown(open__fresh_database__applies_every_migration,
						fx_setup_closed, fx_teardown),
		cmocka_unit_test_setup_teardown(open__again__keeps_the_version_and_the_data,
						fx_setup_closed, fx_teardown),
		cmocka_unit_test_setup_teardown(open__newer_database__is_refused_and_left_untouched,
						fx_setup_closed, fx_teardown),
		cmocka_unit_test_setup_teardown(open__a_database_of_another_program__is_refused_and_left_untouched,
						fx_setup_closed, fx_teardown),
		cmocka_unit_test_setup_teardown(open__another_programs_database_with_a_user_version__is_refused_and_left_untouched,
						fx_setup_closed, fx_teardown),
		cmocka_unit_test_setup_teardown(open__an_empty_file__is_made_a_berth_database,
						fx_setup_closed, fx_teardown),
		cmocka_unit_test_setup_teardown(migrate__failing_migration__rolls_back_completely,
						fx_setup_closed, fx_teardown),
		cmocka_unit_test_setup_teardown(migrate__applies_only_the_pending_ones_in_order,
						fx_setup_closed, fx_teardown),
		cmocka_unit_test_setup_teardown(migrate__list_with_a_gap__is_refused,
						fx_setup_closed, fx_teardown),
		cmocka_unit_test_setup_teardown(open__a_database_with_autoincrement__keeps_its_pruned_seqs_given_out,
						fx_setup_closed, fx_teardown),
		cmocka_unit_test_setup_teardown(open__a_database_before_principals__reads_its_deciders_as_unknown,
						fx_setup_closed, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_walbuf.c: store/walbuf.c, the VFS that gathers a commit's writes to
 * the WAL into one. Real SQLite files in a temporary directory, over a VFS
 * of this test ("count") that counts the writes reaching a WAL file and
 * can make them fail: a commit reaches the WAL in one write (SQLite's own
 * VFS makes two a page), every write is in the file before its sync, a
 * reader on SQLite's own VFS sees every commit at once, a WAL on a device without "powersafe overwrite" is written
 * through, a failed write fails its commit and leaves the database as it
 * was, and every commit survives a kill -9 of its writer.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <sqlite3.h>

#include "store/walbuf.h"
#include "tests/harness/child.h"

/* ---- "count": SQLite's default VFS, counting a WAL's writes ------------ */

static sqlite3_vfs count_vfs;
static sqlite3_io_methods count_methods;
static const sqlite3_io_methods *unix_methods;
static long wal_writes;	 /* writes that reached a WAL file */
static long wal_bytes;	 /* their bytes */
static bool fail_writes; /* the next WAL writes fail with SQLITE_IOERR_WRITE */
static sqlite3_int64 size_at_sync; /* the WAL's size at its last sync */

static int count_write(sqlite3_file *file, const void *data, int amt,
		       sqlite3_int64 off)
{
	if (fail_writes)
		return SQLITE_IOERR_WRITE;
	wal_writes++;
	wal_bytes += amt;
	return unix_methods->xWrite(file, data, amt, off);
}

static int count_sync(sqlite3_file *file, int flags)
{
	if (unix_methods->xFileSize(file, &size_at_sync) != SQLITE_OK)
		size_at_sync = -1;
	return unix_methods->xSync(file, flags);
}

/* count_open opens with the default VFS and, for a WAL, swaps in a copy
 * of its methods whose xWrite counts: the file is the default VFS's own,
 * so its other methods take it as it is. */
static int count_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file,
		      int flags, int *out_flags)
{
	sqlite3_vfs *below = vfs->pAppData;
	int rc = below->xOpen(below, name, file, flags, out_flags);
	if (rc == SQLITE_OK && (flags & SQLITE_OPEN_WAL)) {
		if (unix_methods == NULL) {
			unix_methods = file->pMethods;
			count_methods = *unix_methods;
			count_methods.xWrite = count_write;
			count_methods.xSync = count_sync;
		}
		assert_ptr_equal(file->pMethods, unix_methods);
		file->pMethods = &count_methods;
	}
	return rc;
}

static int setup_vfs(void **state)
{
	(void)state;
	sqlite3_vfs *dflt = sqlite3_vfs_find(NULL);
	count_vfs = *dflt;
	count_vfs.zName = "count";
	count_vfs.pAppData = dflt;
	/* Of the default VFS's methods only xOpen reads pAppData (the unix
	 * VFS keeps its locking style there), and count_open hands it the
	 * default VFS itself. */
	count_vfs.xOpen = count_open;
	if (sqlite3_vfs_register(&count_vfs, 0) != SQLITE_OK)
		return -1;
	return store__walbuf_register("walbuf-count", "count");
}

/* ---- a database in a temporary directory ------------------------------ */

struct db {
	char dir[64];
	char path[128];
};

static int setup(void **state)
{
	struct db *d = calloc(1, sizeof(*d));
	if (d == NULL)
		return -1;
	snprintf(d->dir, sizeof(d->dir), "/tmp/berth-walbuf-XXXXXX");
	if (mkdtemp(d->dir) == NULL)
		return -1;
	snprintf(d->path, sizeof(d->path), "%s/w.db", d->dir);
	wal_writes = wal_bytes = 0;
	fail_writes = false;
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	struct db *d = *state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", d->dir);
	(void)!system(cmd);
	free(d);
	return 0;
}

static void exec(sqlite3 *db, const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK)
		fail_msg("%s: %s", sql, msg ? msg : sqlite3_errstr(rc));
}

static sqlite3 *open_db(const char *path, const char *vfs, int flags)
{
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open_v2(path, &db, flags, vfs), SQLITE_OK);
	return db;
}

/* open_writer opens path over vfs the way berthd's writer does (WAL,
 * synchronous = FULL, a cache of 32 MiB, so that a commit of a few MiB
 * spills nothing before it commits), with a table of rows and two
 * indexes, so that one commit touches several pages. */
static sqlite3 *open_writer(const char *path, const char *vfs)
{
	sqlite3 *db = open_db(path, vfs,
			      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
	exec(db, "PRAGMA journal_mode = WAL");
	exec(db, "PRAGMA synchronous = FULL");
	exec(db, "PRAGMA cache_size = -32768");
	exec(db, "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, "
		 "k TEXT, v TEXT);"
		 "CREATE INDEX IF NOT EXISTS t_k ON t (k);"
		 "CREATE INDEX IF NOT EXISTS t_v ON t (v)");
	return db;
}

/* insert commits n rows of about size bytes each, in one transaction. */
static int insert(sqlite3 *db, int n, int size)
{
	char sql[200];
	snprintf(sql, sizeof(sql),
		 "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 "
		 "FROM c WHERE i < %d) INSERT INTO t (k, v) "
		 "SELECT hex(randomblob(16)), hex(randomblob(%d)) FROM c",
		 n, size / 2);
	return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

static long count_rows(sqlite3 *db)
{
	sqlite3_stmt *s = NULL;
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1,
					    &s, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	long n = (long)sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return n;
}

/* writes_of_commit returns the WAL writes of one commit of n rows of
 * size bytes, and their bytes in *bytes, after one to warm the WAL up (the
 * first commit into a WAL writes its header and syncs it apart). */
static long writes_of_commit(const char *path, const char *vfs, int n,
			     int size, long *bytes)
{
	sqlite3 *db = open_writer(path, vfs);
	assert_int_equal(insert(db, 4, 100), SQLITE_OK);
	long before = wal_writes, before_bytes = wal_bytes;
	assert_int_equal(insert(db, n, size), SQLITE_OK);
	long writes = wal_writes - before;
	*bytes = wal_bytes - before_bytes;
	sqlite3_close(db);
	return writes;
}

/* ---- the tests -------------------------------------------------------- */

static void walbuf__a_commit_reaches_the_wal_in_one_write(void **state)
{
	struct db *d = *state;

	/* Twenty rows of 300 bytes and two indexes: a commit of several
	 * pages, which SQLite's own VFS writes as two writes a page. */
	long bytes = 0;
	long plain = writes_of_commit(d->path, "count", 20, 300, &bytes);
	assert_true(plain >= 6);
	assert_int_equal(plain % 2, 0);

	char other[160];
	snprintf(other, sizeof(other), "%s/v.db", d->dir);
	long gathered = writes_of_commit(other, "walbuf-count", 20, 300,
					 &bytes);
	assert_int_equal(gathered, 1);
	assert_int_equal(bytes % (4096 + 24), 0);
}

static void walbuf__a_commit_larger_than_the_buffer_goes_in_pieces(void **state)
{
	struct db *d = *state;

	/* 3 MiB of rows (and more for the indexes): writes of 64 KiB, the
	 * most SQLite's unix VFS takes whole (128 KiB, exactly, it would
	 * write as nothing and call the disk full). A transaction that
	 * spills pages before its commit writes some of them again, out of
	 * order, and those go down one by one: the cache holds this one. */
	long bytes = 0;
	long writes = writes_of_commit(d->path, "walbuf-count", 3000, 1000,
				       &bytes);
	assert_true(bytes > 3000L * 1000);
	assert_true(writes >= bytes / (64 * 1024));
	assert_true(writes <= bytes / (64 * 1024) + 2);
}

/* What SQLite wrote is in the file when the file is synced: the WAL's
 * size at each commit's sync is its size once the commit returned. A
 * checkpoint never runs, so the WAL only grows. */
static void walbuf__every_write_is_down_before_the_sync(void **state)
{
	struct db *d = *state;
	sqlite3 *w = open_writer(d->path, "walbuf-count");
	exec(w, "PRAGMA wal_autocheckpoint = 0");
	char wal[160];
	snprintf(wal, sizeof(wal), "%s-wal", d->path);

	sqlite3_int64 last = 0;
	for (int i = 0; i < 60; i++) {
		assert_int_equal(insert(w, 1 + i % 9, i % 5 == 0 ? 3000 : 200),
				 SQLITE_OK);
		struct stat st;
		assert_int_equal(stat(wal, &st), 0);
		assert_true(st.st_size > last);
		assert_int_equal(size_at_sync, st.st_size);
		last = st.st_size;
	}
	sqlite3_close(w);
}

static void walbuf__a_reader_sees_every_commit_at_once(void **state)
{
	struct db *d = *state;
	sqlite3 *w = open_writer(d->path, "walbuf-count");
	/* A small WAL: checkpoints and restarts of the WAL come often. */
	exec(w, "PRAGMA wal_autocheckpoint = 16");
	sqlite3 *r = open_db(d->path, NULL, SQLITE_OPEN_READONLY);

	long rows = 0;
	for (int i = 0; i < 400; i++) {
		int n = i % 50 == 49 ? 400 : 1 + i % 7;
		assert_int_equal(insert(w, n, i % 3 == 0 ? 2000 : 120),
				 SQLITE_OK);
		rows += n;
		assert_int_equal(count_rows(r), rows);
	}
	exec(r, "PRAGMA quick_check");
	sqlite3_close(r);
	sqlite3_close(w);
}

/* Opened with psow=0, the unix VFS does not promise "powersafe
 * overwrite", and SQLite writes the end of a commit after its sync: the
 * WAL is written through, one write at a time, and a reader still sees
 * every commit. */
static void walbuf__without_powersafe_overwrite_writes_through(void **state)
{
	struct db *d = *state;
	char uri[200];
	snprintf(uri, sizeof(uri), "file:%s?psow=0", d->path);
	sqlite3 *w = open_db(uri, "walbuf-count",
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				     SQLITE_OPEN_URI);
	exec(w, "PRAGMA journal_mode = WAL");
	exec(w, "PRAGMA synchronous = FULL");
	exec(w, "CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT, v TEXT);"
		"CREATE INDEX t_k ON t (k)");
	sqlite3 *r = open_db(d->path, NULL, SQLITE_OPEN_READONLY);

	long before = wal_writes;
	assert_int_equal(insert(w, 20, 300), SQLITE_OK);
	assert_true(wal_writes - before >= 6);
	long rows = 20;
	for (int i = 0; i < 50; i++) {
		assert_int_equal(insert(w, 1 + i % 4, 500), SQLITE_OK);
		rows += 1 + i % 4;
		assert_int_equal(count_rows(r), rows);
	}
	sqlite3_close(r);
	sqlite3_close(w);
}

static void walbuf__a_failed_write_fails_its_commit_alone(void **state)
{
	struct db *d = *state;
	sqlite3 *w = open_writer(d->path, "walbuf-count");
	assert_int_equal(insert(w, 10, 200), SQLITE_OK);

	fail_writes = true;
	int rc = insert(w, 10, 200);
	fail_writes = false;
	assert_int_equal(rc & 0xff, SQLITE_IOERR);
	assert_int_equal(sqlite3_get_autocommit(w), 1);

	/* The failed commit left nothing, and the next one commits. */
	assert_int_equal(count_rows(w), 10);
	assert_int_equal(insert(w, 5, 200), SQLITE_OK);
	sqlite3_close(w);

	sqlite3 *r = open_db(d->path, NULL, SQLITE_OPEN_READONLY);
	assert_int_equal(count_rows(r), 15);
	exec(r, "PRAGMA quick_check");
	sqlite3_close(r);
}

/* A child commits rows one transaction at a time and reports each commit
 * down a pipe once sqlite3_exec returned; the parent kills it with
 * SIGKILL mid-stream and finds every reported commit in the database. */
static void walbuf__every_commit_survives_kill_9(void **state)
{
	struct db *d = *state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = harness_fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* No cmocka here: a failed assertion would jump into the
		 * child's copy of the runner. */
		close(p[0]);
		sqlite3 *w = NULL;
		if (sqlite3_open_v2(d->path, &w,
				    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
				    "walbuf-count") != SQLITE_OK ||
		    sqlite3_exec(w, "PRAGMA journal_mode = WAL;"
				    "PRAGMA synchronous = FULL;"
				    "CREATE TABLE t (id INTEGER PRIMARY KEY, "
				    "k TEXT, v TEXT)",
				 NULL, NULL, NULL) != SQLITE_OK)
			_exit(1);
		for (long n = 1;; n++) {
			if (insert(w, 1 + (int)(n % 5), 150) != SQLITE_OK)
				_exit(1);
			if (write(p[1], &n, sizeof(n)) != sizeof(n))
				_exit(1);
		}
	}
	close(p[1]);
	long n = 0, last = 0;
	while (last < 300 && read(p[0], &n, sizeof(n)) == sizeof(n))
		last = n;
	kill(pid, SIGKILL);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	while (read(p[0], &n, sizeof(n)) == sizeof(n))
		last = n;
	close(p[0]);
	assert_true(WIFSIGNALED(status));
	assert_true(last >= 300);

	/* Commit k added 1 + k % 5 rows. */
	long want = 0;
	for (long k = 1; k <= last; k++)
		want += 1 + k % 5;
	sqlite3 *r = open_db(d->path, NULL, SQLITE_OPEN_READWRITE);
	long rows = count_rows(r);
	assert_true(rows >= want);
	/* At most the commit in flight when the signal came is there too. */
	assert_true(rows <= want + 5);
	exec(r, "PRAGMA quick_check");
	sqlite3_close(r);
}

static void walbuf__register_twice_or_over_nothing(void **state)
{
	(void)state;
	assert_int_equal(store__walbuf_register("walbuf-count", "count"), 0);
	assert_int_equal(store__walbuf_register("walbuf-none", "no-such-vfs"),
			 -ENOENT);
	assert_null(sqlite3_vfs_find("walbuf-none"));
	const char *name = store__walbuf_vfs();
	assert_non_null(name);
	assert_ptr_equal(store__walbuf_vfs(), name);
	assert_non_null(sqlite3_vfs_find(name));
	/* Not the default: a connection that names no VFS is not gathered. */
	assert_ptr_not_equal(sqlite3_vfs_find(NULL), sqlite3_vfs_find(name));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			walbuf__a_commit_reaches_the_wal_in_one_write, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			walbuf__a_commit_larger_than_the_buffer_goes_in_pieces,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			walbuf__every_write_is_down_before_the_sync, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			walbuf__a_reader_sees_every_commit_at_once, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			walbuf__without_powersafe_overwrite_writes_through,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			walbuf__a_failed_write_fails_its_commit_alone, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			walbuf__every_commit_survives_kill_9, setup, teardown),
		cmocka_unit_test(walbuf__register_twice_or_over_nothing),
	};
	return cmocka_run_group_tests(tests, setup_vfs, NULL);
}

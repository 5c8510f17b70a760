/*
 * test_open.c: what store_open refuses and what it creates, on real files:
 * the one-daemon lock whatever path names the database, the modes of the
 * files it creates, a database it cannot write, and a damaged database,
 * checked at open or, when large, by the writer before its first write.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store/lock.h"
#include "tests/harness/child.h"
#include "tests/store/fixture.h"

/* The user a test becomes to meet permissions root would bypass. */
#define NOBODY 65534

static void closed(void *arg)
{
	*(bool *)arg = true;
}

/* refused opens path while f's store holds the database and checks the
 * refusal names the holder. */
static void refused(struct fx *f, const char *path)
{
	struct store *other = NULL;
	struct store_config cfg = {.path = path};
	char *msg = NULL;
	char pid[32];
	int rc = store_open(&f->loop, &cfg, &other, &msg);

	if (rc == 0) {
		/* A second store on the database: closed before the test
		 * fails, or its handles would keep the loop from ending. */
		bool done = false;

		store_close(other, closed, &done);
		while (!done)
			uv_run(&f->loop, UV_RUN_ONCE);
		fail_msg("%s: a second store opened the database in use", path);
	}
	assert_int_equal(rc, -EBUSY);
	assert_null(other);
	assert_non_null(msg);
	snprintf(pid, sizeof(pid), "pid %ld", (long)getpid());
	if (strstr(msg, pid) == NULL)
		fail_msg("%s: %s", path, msg);
	free(msg);
}

static void lock__follows_the_file__through_a_symlink_a_dotdot_path_and_a_hard_link(
	void **state)
{
	struct fx *f = *state;
	char soft[200], hard[200], sub[200], dotdot[240];

	snprintf(soft, sizeof(soft), "%s/link.db", f->dir);
	snprintf(hard, sizeof(hard), "%s/hard.db", f->dir);
	snprintf(sub, sizeof(sub), "%s/x", f->dir);
	snprintf(dotdot, sizeof(dotdot), "%s/x/../berth.db", f->dir);
	assert_int_equal(symlink(f->path, soft), 0);
	assert_int_equal(link(f->path, hard), 0);
	assert_int_equal(mkdir(sub, 0700), 0);

	refused(f, f->path);
	refused(f, soft);
	refused(f, dotdot);
	refused(f, hard);

	/* Once the holder is gone, any of the names opens it. */
	fx_close(f);
	f->cfg.path = soft;
	assert_int_equal(store_open(&f->loop, &f->cfg, &f->st, NULL), 0);
	refused(f, hard);
	fx_close(f);

	unlink(soft);
	unlink(hard);
	rmdir(sub);
	snprintf(soft, sizeof(soft), "%s/link.db.lock", f->dir);
	unlink(soft);
}

/* A berthd killed while it started a tool leaves the tool's process,
 * between its clone and its exec, holding copies of its descriptors, the
 * lock's among them, for tens of ms after the berthd is gone
 * (store/lock.c). A store opened meanwhile waits for them to be let go,
 * rather than be refused as in use by the berthd that ended. Here the
 * holder is a process that locks and ends at once, and its child keeps
 * the copies for half a second. */
static void lock__still_held_by_the_child_of_a_holder_that_ended__is_waited_for(
	void **state)
{
	struct fx *f = *state;
	struct store__lock held;
	char *msg = NULL;
	int status, fd;
	pid_t holder = fork();

	assert_true(holder >= 0);
	if (holder == 0) {
		if (store__lock_acquire(f->path, true, &held, &msg) != 0)
			_exit(1);
		if (fork() == 0) {
			usleep(500 * 1000);
			_exit(0);
		}
		_exit(0);
	}
	assert_int_equal(waitpid(holder, &status, 0), holder);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The holder has ended and the lock is still held. */
	fd = open(f->path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), -1);
	assert_int_equal(errno, EWOULDBLOCK);
	close(fd);

	if (fx_open(f, &msg) != 0)
		fail_msg("refused: %s", msg ? msg : "(no message)");
	fx_close(f);
}

static mode_t mode_of(const char *path)
{
	struct stat st;

	if (stat(path, &st) != 0)
		fail_msg("%s: %s", path, strerror(errno));
	return st.st_mode & 07777;
}

static void open__creates_its_files_0600__whatever_the_umask(void **state)
{
	struct fx *f = *state;
	static const char *const suffix[] = {"", "-wal", "-shm", ".lock"};
	mode_t old = umask(0);
	char id[40], p[200];

	assert_int_equal(fx_open(f, NULL), 0);
	umask(old);
	assert_int_equal(fx_create(f, "t", STORE_PENDING, NULL, 1, id), 0);
	for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", f->path, suffix[i]);
		if (mode_of(p) != 0600)
			fail_msg("%s is mode %04o, not 0600", p, (unsigned)mode_of(p));
	}
	fx_close(f);
}

/* open_as_nobody opens path in a child process running as user nobody and
 * returns the child's exit status: 0 when store_open returned want and
 * its message held the word expect, else 1. */
static int open_as_nobody(const char *path, int want, const char *expect)
{
	pid_t pid = harness_fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		uv_loop_t loop;
		struct store *st = NULL;
		struct store_config cfg = {.path = path};
		char *msg = NULL;
		int rc;

		if (setgid(NOBODY) != 0 || setuid(NOBODY) != 0)
			_exit(2);
		uv_loop_init(&loop);
		rc = store_open(&loop, &cfg, &st, &msg);
		fprintf(stderr, "as nobody: %d: %s\n", rc, msg ? msg : "(none)");
		_exit(rc == want && msg && strstr(msg, expect) ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void open__a_database_it_cannot_write__is_refused_with_a_clear_message(
	void **state)
{
	struct fx *f = *state;
	char wal[220], id[40];
	struct store *st = NULL;
	char *msg = NULL;

	assert_int_equal(fx_open(f, NULL), 0);
	assert_int_equal(fx_create(f, "t", STORE_PENDING, NULL, 1, id), 0);
	fx_close(f);
	snprintf(wal, sizeof(wal), "%s.lock", f->path);
	/* As for a database copied in, or made by another user: no lock
	 * file of its own. */
	unlink(wal);
	if (geteuid() == 0) {
		/* Root writes whatever the modes say: the files are root's,
		 * readable by all, and the opener is nobody. */
		assert_int_equal(chmod(f->dir, 0777), 0);
		assert_int_equal(chmod(f->path, 0644), 0);
		assert_int_equal(open_as_nobody(f->path, -EACCES, "cannot write the database"), 0);
		/* The file writable, but not its folder, where SQLite
		 * creates the -wal and -shm files. */
		unlink(wal);
		assert_int_equal(chmod(f->dir, 0755), 0);
		assert_int_equal(chmod(f->path, 0666), 0);
		assert_int_equal(open_as_nobody(f->path, -EACCES, "cannot create files in"), 0);
		return;
	}
	assert_int_equal(chmod(f->path, 0444), 0);
	f->cfg.path = f->path;
	assert_int_equal(store_open(&f->loop, &f->cfg, &st, &msg), -EACCES);
	assert_null(st);
	assert_non_null(strstr(msg, "cannot write the database"));
	free(msg);
	assert_int_equal(chmod(f->path, 0600), 0);
}

/* damage fills page `page` (1-based, 4 KiB pages) of the database file
 * with a byte pattern no b-tree page has. */
static void damage(const char *path, long page)
{
	char junk[4096];
	int fd = open(path, O_WRONLY);

	memset(junk, 0x5a, sizeof(junk));
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, junk, sizeof(junk), (page - 1) * 4096), sizeof(junk));
	close(fd);
}

/* filled makes a database of n jobs and closes it (its WAL checkpointed
 * into the file); returns the file's pages. */
static long filled(struct fx *f, int n)
{
	struct stat st;
	char id[40];

	assert_int_equal(fx_open(f, NULL), 0);
	for (int i = 0; i < n; i++)
		assert_int_equal(fx_create(f, "t", STORE_PENDING, NULL, i, id), 0);
	fx_close(f);
	assert_int_equal(stat(f->path, &st), 0);
	return (long)(st.st_size / 4096);
}

static void open__a_damaged_database__is_refused_with_a_clear_message(void **state)
{
	struct fx *f = *state;
	long pages = filled(f, 300);
	char *msg = NULL;

	assert_true(pages > 4);
	damage(f->path, pages / 2);
	assert_int_equal(fx_open(f, &msg), -EIO);
	assert_null(f->st);
	assert_non_null(msg);
	fprintf(stderr, "%s\n", msg);
	assert_non_null(strstr(msg, "fails its integrity check"));
	assert_non_null(strstr(msg, f->path));
	free(msg);
}

static void fatal_seen(void *arg, const char *message)
{
	char **out = arg;

	assert_null(*out);
	*out = strdup(message);
}

static void open__a_large_damaged_database__writes_nothing_and_says_so_once(
	void **state)
{
	struct fx *f = *state;
	long pages = filled(f, 300);
	char *fatal = NULL, id[40];
	struct stat before, after;

	damage(f->path, pages / 2);
	assert_int_equal(stat(f->path, &before), 0);
	/* Checked by the writer, as a database too large to check at open
	 * is: the open succeeds and reads are served, but nothing is
	 * written. */
	f->cfg.check_inline_max = -1;
	f->cfg.on_fatal = fatal_seen;
	f->cfg.fatal_arg = &fatal;
	assert_int_equal(fx_open(f, NULL), 0);
	assert_int_equal(fx_create(f, "t", STORE_PENDING, NULL, 1, id), -EIO);
	while (fatal == NULL)
		uv_run(&f->loop, UV_RUN_ONCE);
	assert_non_null(strstr(fatal, "fails its integrity check"));
	assert_int_equal(fx_create(f, "t", STORE_PENDING, NULL, 2, id), -EIO);
	fx_close(f);
	assert_int_equal(stat(f->path, &after), 0);
	assert_int_equal(before.st_size, after.st_size);
	assert_true(before.st_mtim.tv_sec == after.st_mtim.tv_sec &&
		    before.st_mtim.tv_nsec == after.st_mtim.tv_nsec);
	free(fatal);
}

static void open__a_large_sound_database__is_checked_by_the_writer_and_serves(
	void **state)
{
	struct fx *f = *state;
	char *fatal = NULL, id[40];

	filled(f, 50);
	f->cfg.check_inline_max = -1;
	f->cfg.on_fatal = fatal_seen;
	f->cfg.fatal_arg = &fatal;
	assert_int_equal(fx_open(f, NULL), 0);
	assert_int_equal(fx_create(f, "t", STORE_PENDING, NULL, 1, id), 0);
	assert_int_equal(fx_status(f, id), STORE_PENDING);
	fx_close(f);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	assert_null(fatal);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup_closed, fx_teardown)
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			lock__follows_the_file__through_a_symlink_a_dotdot_path_and_a_hard_link,
			fx_setup, fx_teardown),
		T(lock__still_held_by_the_child_of_a_holder_that_ended__is_waited_for),
		T(open__creates_its_files_0600__whatever_the_umask),
		T(open__a_database_it_cannot_write__is_refused_with_a_clear_message),
		T(open__a_damaged_database__is_refused_with_a_clear_message),
		T(open__a_large_damaged_database__writes_nothing_and_says_so_once),
		T(open__a_large_sound_database__is_checked_by_the_writer_and_serves),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}

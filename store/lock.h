/*
 * lock.h: one daemon per database, whatever path names the database.
 */
#ifndef BERTH_STORE_LOCK_H
#define BERTH_STORE_LOCK_H

#include <stdbool.h>

/*
 * struct store__lock is the one-daemon lock of a database file. It is two
 * flock(2) locks, both exclusive:
 *
 *   db_fd    the database file itself. A lock belongs to the file, not to
 *            the name it was opened by, so that a second berthd on the same
 *            database through a symlink, "x/../berth.db" or a hard link is
 *            refused. It never meets SQLite's own locks: those are fcntl
 *            locks, which Linux keeps apart from flock locks. The
 *            descriptor stays open until the lock is released, after
 *            SQLite closed its own (closing a descriptor of a file drops
 *            the fcntl locks the process holds on it).
 *   file_fd  the lock file CANONICAL.lock beside the database's resolved
 *            path, holding the holder's pid for messages and people;
 *            berthd releases before this one locked only this file, under
 *            the path as spelled, so that a berthd of each kind started on
 *            the same spelling still refuse each other.
 *
 * flock rather than fcntl locks: a second open in the same process must be
 * refused too, and fcntl locks are per process.
 */
struct store__lock {
	int db_fd;
	int file_fd;
};

/*
 * store__lock_acquire locks the database at db_path into *l. With create,
 * a missing database file is created empty (SQLite makes a new database of
 * an empty file), mode 0600 whatever the umask: SQLite creates the -wal
 * and -shm files with the database's mode, so they are 0600 too. The lock
 * file is created 0600 as well. Returns 0, or a negative code and sets
 * *errmsg to a malloc'd sentence: the holder ("the database ./berth.db is
 * in use by berthd pid 4242"), or why the file cannot be opened for
 * writing ("cannot write the database ...: Read-only file system").
 */
int store__lock_acquire(const char *db_path, bool create, struct store__lock *l,
			char **errmsg);

/* store__lock_release drops both locks (a zeroed or failed lock is
 * ignored). The lock file is left in place: unlinking it would let a third
 * opener lock a new file while a second one holds the old. */
void store__lock_release(struct store__lock *l);

#endif

/*
 * lock.h: one daemon per database, held by a lock file beside it.
 */
#ifndef BERTH_STORE_LOCK_H
#define BERTH_STORE_LOCK_H

/*
 * store__lock_acquire takes an exclusive flock(2) on PATH.lock (created
 * mode 0600) and writes the caller's pid into it. Returns the lock's file
 * descriptor (>= 0), or a negative code and sets *errmsg to a malloc'd
 * sentence naming the holder ("the database ./berth.db is in use by
 * berthd pid 4242"). flock rather than fcntl locks: a second open in the
 * same process must be refused too, and fcntl locks are per process.
 */
int store__lock_acquire(const char *db_path, char **errmsg);

/* store__lock_release drops the lock taken by store__lock_acquire. The
 * file is left in place: unlinking it would let a third opener lock a new
 * file while a second one holds the old. */
void store__lock_release(int fd);

#endif

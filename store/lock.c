/*
 * lock.c: the one-daemon lock of a database (lock.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "common/strf.h"
#include "store/lock.h"

/* holder_pid returns the pid written in the lock file fd, or 0 when it
 * holds none (yet: the holder writes it just after locking). */
static long holder_pid(int fd)
{
	char buf[32];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *end;
	long pid = strtol(buf, &end, 10);
	return end != buf && pid > 0 ? pid : 0;
}

/* flock_holder returns the pid of the process holding an exclusive flock
 * on the file of fd, as /proc/locks shows it, or 0 when none is found
 * (another kernel, or the lock was dropped meanwhile). It names the
 * holder of a database reached through a hard link, whose lock file
 * (beside another name) says nothing. */
static long flock_holder(int fd)
{
	struct stat st;
	char line[256];
	long pid = 0;
	FILE *f;

	if (fstat(fd, &st) < 0 || (f = fopen("/proc/locks", "re")) == NULL)
		return 0;
	/* "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234567 0 EOF" */
	while (pid == 0 && fgets(line, sizeof(line), f) != NULL) {
		char kind[16], mode[16], access[16];
		unsigned int maj, min;
		unsigned long long ino;
		long p;

		if (sscanf(line, "%*d: %15s %15s %15s %ld %x:%x:%llu", kind, mode,
			   access, &p, &maj, &min, &ino) == 7 &&
		    strcmp(kind, "FLOCK") == 0 && strcmp(access, "WRITE") == 0 &&
		    maj == major(st.st_dev) && min == minor(st.st_dev) &&
		    ino == (unsigned long long)st.st_ino)
			pid = p;
	}
	fclose(f);
	return pid;
}

/* The longest a lock is waited for while the berthd that took it has
 * ended (lock_waiting). */
#define LEFT_LOCKED_WAIT_MS 10000

/* holder_of returns the pid that took the lock on fd: the one written in
 * the lock file at lock_path, else the one /proc/locks names, else 0. */
static long holder_of(int fd, const char *lock_path)
{
	int lf = open(lock_path, O_RDONLY | O_CLOEXEC);
	long pid = lf >= 0 ? holder_pid(lf) : 0;

	if (lf >= 0)
		close(lf);
	return pid > 0 ? pid : flock_holder(fd);
}

/*
 * lock_waiting takes the exclusive flock of fd, waiting while the berthd
 * that holds it has ended. Such a lock is held through a copy of that
 * berthd's descriptor in a process it started: a berthd killed (kill -9)
 * while a spawner thread was between a clone and its exec
 * (worker/spawn.c) leaves that child alive with copies of all its
 * descriptors. The child dies at once (its PR_SET_PDEATHSIG, or it sees
 * its parent gone), but as the last user of the dead berthd's memory it
 * unmaps all of it before its descriptors are closed: up to 55 ms under
 * the sanitizers on a busy 2-core machine. A restart in that time,
 * systemd's or an operator's, must start rather than say the database is
 * in use by a berthd that is gone; a lock still held LEFT_LOCKED_WAIT_MS
 * later is reported (left_locked).
 *
 * Returns 0, or an errno: EWOULDBLOCK with *holder the pid that took the
 * lock (0 when unknown) and *ended whether it has ended.
 */
static int lock_waiting(int fd, const char *lock_path, long *holder, bool *ended)
{
	const struct timespec pause = {.tv_nsec = 2 * 1000 * 1000};

	for (int waited = 0;; waited += 2) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK)
			return errno;
		*holder = holder_of(fd, lock_path);
		*ended = *holder > 0 && kill((pid_t)*holder, 0) < 0 && errno == ESRCH;
		if (!*ended || waited >= LEFT_LOCKED_WAIT_MS)
			return EWOULDBLOCK;
		nanosleep(&pause, NULL);
	}
}

/* fd_holder returns a process other than this one with a descriptor open
 * on the file of fd, from /proc/PID/fd, or 0 when none is found. */
static long fd_holder(int fd)
{
	struct stat st, other;
	struct dirent *p, *d;
	char dir[64], link[64 + 256];
	long found = 0;
	DIR *procs, *fds;

	if (fstat(fd, &st) < 0 || (procs = opendir("/proc")) == NULL)
		return 0;
	while (found == 0 && (p = readdir(procs)) != NULL) {
		long pid = strtol(p->d_name, NULL, 10);

		if (pid <= 0 || pid == (long)getpid())
			continue;
		snprintf(dir, sizeof(dir), "/proc/%ld/fd", pid);
		if ((fds = opendir(dir)) == NULL)
			continue;
		while (found == 0 && (d = readdir(fds)) != NULL) {
			snprintf(link, sizeof(link), "%s/%s", dir, d->d_name);
			if (d->d_name[0] != '.' && stat(link, &other) == 0 &&
			    other.st_dev == st.st_dev && other.st_ino == st.st_ino)
				found = pid;
		}
		closedir(fds);
	}
	closedir(procs);
	return found;
}

/* left_locked says that the database path (resolved: real), whose lock
 * fd is, is still locked LEFT_LOCKED_WAIT_MS after the berthd
 * pid that locked it ended, and by whom when /proc tells. */
static char *left_locked(const char *path, const char *real, long pid, int fd)
{
	long by = fd_holder(fd);

	if (by > 0)
		return berth_strf("the database %s (%s) is still locked %d s after "
				  "berthd pid %ld, which locked it, ended: pid %ld "
				  "holds a copy of its descriptor",
				  path, real, LEFT_LOCKED_WAIT_MS / 1000, pid, by);
	return berth_strf("the database %s (%s) is still locked %d s after berthd "
			  "pid %ld, which locked it, ended: a process it started "
			  "holds a copy of its descriptor",
			  path, real, LEFT_LOCKED_WAIT_MS / 1000, pid);
}

/* take locks fd, the database db_path's (resolved: real) or, with
 * is_file, its lock file lock_path, waiting while its holder has ended
 * (lock_waiting). Returns 0, or an errno with *errmsg: EBUSY naming the
 * holder. */
static int take(int fd, const char *db_path, const char *real,
		const char *lock_path, bool is_file, char **errmsg)
{
	long holder;
	bool ended;
	int e = lock_waiting(fd, lock_path, &holder, &ended);

	if (e == 0)
		return 0;
	if (e != EWOULDBLOCK) {
		*errmsg = berth_strf("cannot lock %s: %s", is_file ? lock_path : db_path,
				     strerror(e));
		return e;
	}
	if (ended)
		*errmsg = left_locked(db_path, real, holder, fd);
	else if (holder > 0)
		*errmsg = berth_strf("the database %s (%s) is in use by berthd pid %ld%s%s%s",
				     db_path, real, holder, is_file ? " (lock file " : "",
				     is_file ? lock_path : "", is_file ? ")" : "");
	else
		*errmsg = berth_strf("the database %s (%s) is in use by another berthd%s%s%s",
				     db_path, real, is_file ? " (lock file " : "",
				     is_file ? lock_path : "", is_file ? ")" : "");
	return EBUSY;
}

/* open_private opens path read-write, creating it (mode 0600 whatever the
 * umask) when create is set and it is missing. Returns the descriptor or
 * -errno. */
static int open_private(const char *path, bool create)
{
	int fd;

	if (create) {
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0) {
			/* A umask such as 0277 takes bits from 0600 too. */
			if (fchmod(fd, 0600) < 0) {
				int e = errno;
				close(fd);
				return -e;
			}
			return fd;
		}
		if (errno != EEXIST)
			return -errno;
	}
	fd = open(path, O_RDWR | O_CLOEXEC);
	return fd >= 0 ? fd : -errno;
}

int store__lock_acquire(const char *db_path, bool create, struct store__lock *l,
			char **errmsg)
{
	char *real = NULL, *path = NULL;
	int e;

	l->db_fd = l->file_fd = -1;
	l->db_fd = open_private(db_path, create);
	if (l->db_fd < 0) {
		e = -l->db_fd;
		if (e == ENOENT && !create)
			*errmsg = berth_strf("the database %s does not exist", db_path);
		else if (e == EACCES || e == EPERM || e == EROFS)
			*errmsg = berth_strf("cannot write the database %s: %s; "
					     "berthd needs to write its database",
					     db_path, strerror(e));
		else
			*errmsg = berth_strf("cannot open the database %s: %s", db_path,
					     strerror(e));
		l->db_fd = -1;
		return -e;
	}
	/* The lock file goes beside the resolved path, so that every
	 * spelling of the path finds the holder's pid in the same file. */
	if ((real = realpath(db_path, NULL)) == NULL) {
		e = errno;
		*errmsg = berth_strf("cannot resolve the path %s: %s", db_path,
				     strerror(e));
		goto fail;
	}
	if ((path = berth_strf("%s.lock", real)) == NULL) {
		e = ENOMEM;
		goto fail;
	}
	if ((e = take(l->db_fd, db_path, real, path, false, errmsg)) != 0)
		goto fail;

	l->file_fd = open_private(path, true);
	if (l->file_fd < 0) {
		e = -l->file_fd;
		l->file_fd = -1;
		*errmsg = berth_strf("cannot open the lock file %s: %s", path, strerror(e));
		goto fail;
	}
	if ((e = take(l->file_fd, db_path, real, path, true, errmsg)) != 0)
		goto fail;
	free(real);
	free(path);

	char pid[32];
	int len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(l->file_fd, 0) < 0 || pwrite(l->file_fd, pid, (size_t)len, 0) != len) {
		/* The lock holds without the pid; only the message of a
		 * second opener is poorer for it. */
	}
	return 0;

fail:
	free(real);
	free(path);
	store__lock_release(l);
	return -e;
}

void store__lock_release(struct store__lock *l)
{
	if (l->file_fd >= 0)
		close(l->file_fd);
	if (l->db_fd >= 0)
		close(l->db_fd);
	l->db_fd = l->file_fd = -1;
}

/*
 * lock.c: the one-daemon lock of a database (lock.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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
	if (flock(l->db_fd, LOCK_EX | LOCK_NB) < 0) {
		e = errno;
		if (e == EWOULDBLOCK) {
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			long pid = fd >= 0 ? holder_pid(fd) : 0;

			if (fd >= 0)
				close(fd);
			if (pid == 0)
				pid = flock_holder(l->db_fd);
			if (pid > 0)
				*errmsg = berth_strf("the database %s (%s) is in use by berthd pid %ld",
						     db_path, real, pid);
			else
				*errmsg = berth_strf("the database %s (%s) is in use by another berthd",
						     db_path, real);
			e = EBUSY;
		} else {
			*errmsg = berth_strf("cannot lock the database %s: %s", db_path,
					     strerror(e));
		}
		goto fail;
	}

	l->file_fd = open_private(path, true);
	if (l->file_fd < 0) {
		e = -l->file_fd;
		l->file_fd = -1;
		*errmsg = berth_strf("cannot open the lock file %s: %s", path, strerror(e));
		goto fail;
	}
	if (flock(l->file_fd, LOCK_EX | LOCK_NB) < 0) {
		e = errno;
		if (e == EWOULDBLOCK) {
			long pid = holder_pid(l->file_fd);
			if (pid > 0)
				*errmsg = berth_strf("the database %s is in use by berthd pid %ld (lock file %s)",
						     db_path, pid, path);
			else
				*errmsg = berth_strf("the database %s is in use by another berthd (lock file %s)",
						     db_path, path);
			e = EBUSY;
		} else {
			*errmsg = berth_strf("cannot lock %s: %s", path, strerror(e));
		}
		goto fail;
	}
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

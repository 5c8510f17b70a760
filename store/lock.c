/*
 * lock.c: the one-daemon lock file PATH.lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "store/lock.h"

static char *sentence(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *sentence(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

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

int store__lock_acquire(const char *db_path, char **errmsg)
{
	char *path = sentence("%s.lock", db_path);
	if (path == NULL)
		return -ENOMEM;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		int e = errno;
		*errmsg = sentence("cannot open the lock file %s: %s", path,
				   strerror(e));
		free(path);
		return -e;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		if (e == EWOULDBLOCK) {
			long pid = holder_pid(fd);
			if (pid > 0)
				*errmsg = sentence("the database %s is in use by berthd pid %ld (lock file %s)",
						   db_path, pid, path);
			else
				*errmsg = sentence("the database %s is in use by another berthd (lock file %s)",
						   db_path, path);
			e = EBUSY;
		} else {
			*errmsg = sentence("cannot lock %s: %s", path, strerror(e));
		}
		close(fd);
		free(path);
		return -e;
	}
	free(path);

	char pid[32];
	int len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
		/* The lock holds without the pid; only the message of a
		 * second opener is poorer for it. */
	}
	return fd;
}

void store__lock_release(int fd)
{
	if (fd >= 0)
		close(fd);
}

/*
 * log.c: berthd's log (log.h).
 */
#include "log/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The longest message kept; a line is this plus its prefix. */
#define LOG_MAX_MESSAGE 4096

static atomic_int level_shown = LOG_LEVEL_INFO;

/* journal: 0 not yet known, 1 stderr is the journal, -1 it is not. */
static atomic_int journal;

static const char *const names[] = {"error", "warn", "info", "debug"};

/* The sd-daemon(3) priorities of the levels: err, warning, info, debug. */
static const char *const priorities[] = {"<3>", "<4>", "<6>", "<7>"};

void log_set_level(int level)
{
	if (level >= LOG_LEVEL_ERROR && level <= LOG_LEVEL_DEBUG)
		atomic_store(&level_shown, level);
}

int log_level_parse(const char *s)
{
	for (int i = 0; i <= LOG_LEVEL_DEBUG; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	if (strcmp(s, "warning") == 0)
		return LOG_LEVEL_WARN;
	return -1;
}

bool log_enabled(int level)
{
	return level <= atomic_load(&level_shown);
}

/* to_journal tells whether stderr is the stream systemd named in
 * $JOURNAL_STREAM ("DEVICE:INODE"): a stderr redirected elsewhere by the
 * service keeps timestamps. */
static bool to_journal(void)
{
	int j = atomic_load(&journal);

	if (j == 0) {
		const char *env = getenv("JOURNAL_STREAM");
		unsigned long long dev, ino;
		struct stat st;

		j = -1;
		if (env && sscanf(env, "%llu:%llu", &dev, &ino) == 2 &&
		    fstat(STDERR_FILENO, &st) == 0 &&
		    (unsigned long long)st.st_dev == dev &&
		    (unsigned long long)st.st_ino == ino)
			j = 1;
		atomic_store(&journal, j);
	}
	return j == 1;
}

/* prefix writes the line's start into buf (at least 48 bytes) and returns
 * its length. */
static size_t prefix(char *buf, int level)
{
	struct timespec ts;
	struct tm tm;
	size_t n;

	if (to_journal()) {
		n = (size_t)sprintf(buf, "%s%s ", priorities[level],
				    names[level]);
		return n;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = strftime(buf, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)sprintf(buf + n, ".%03ldZ %s ", ts.tv_nsec / 1000000,
			     names[level]);
	return n;
}

void log_msg(int level, const char *fmt, ...)
{
	char msg[LOG_MAX_MESSAGE];
	char line[64 + 2 * LOG_MAX_MESSAGE];
	size_t n, len;
	va_list ap;
	int saved = errno;

	if (level < LOG_LEVEL_ERROR || level > LOG_LEVEL_DEBUG ||
	    !log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);

	n = prefix(line, level);
	for (const char *p = msg; *p && n < sizeof line - 3; p++) {
		if (*p == '\n') {
			line[n++] = '\\';
			line[n++] = 'n';
		} else if (*p != '\r') {
			line[n++] = *p;
		}
	}
	line[n++] = '\n';
	len = n;
	for (size_t off = 0; off < len;) {
		ssize_t w = write(STDERR_FILENO, line + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	errno = saved;
}

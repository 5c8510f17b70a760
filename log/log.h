/*
 * log.h: berthd's log, one line per event on stderr.
 *
 * Every component logs through log_msg, so that one --log-level governs
 * them all and every line has the same shape. A line is
 *
 *   2026-12-01T10:33:55.123Z warn job 0193...: timed out after 500 ms
 *
 * (UTC time, level, message), which grep and a person read alike. When
 * stderr is connected to the systemd journal ($JOURNAL_STREAM names it),
 * the time is left to the journal and the line starts with the
 * sd-daemon priority prefix instead ("<4>warn job ..."), so that
 * `journalctl -p warning` filters by level.
 *
 * log_msg may be called from any thread: each line is formatted into a
 * buffer of its own and written with one write(2), so lines from the
 * thread pool never interleave.
 */
#ifndef BERTH_LOG_H
#define BERTH_LOG_H

#include <stdbool.h>

enum log_level {
	LOG_LEVEL_ERROR = 0, /* something failed that an operator must fix */
	LOG_LEVEL_WARN,      /* a job or a client failed; berthd serves on */
	LOG_LEVEL_INFO,      /* start-up, shutdown, reloads, recoveries */
	LOG_LEVEL_DEBUG,     /* every transition and connection */
};

/* log_set_level shows lines up to level (enum log_level) from now on;
 * the default is LOG_LEVEL_INFO. */
void log_set_level(int level);

/* log_level_parse returns the level named by s ("error", "warn", "info",
 * "debug"), or -1. */
int log_level_parse(const char *s);

/* log_enabled is true when a line of level would be written: a caller
 * checks it before building an expensive message. */
bool log_enabled(int level);

/* log_msg writes one line of level (enum log_level) when it is enabled.
 * A message longer than 4 KiB is cut; a newline inside it is written as
 * "\n", so that a line is always one event. */
void log_msg(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif

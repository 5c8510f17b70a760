/*
 * frame.h: the line framing of PROTOCOL.md, without any I/O.
 *
 * A message is one line of UTF-8 JSON ended by "\n" (a "\r" before it is
 * dropped). struct api_frame gathers the bytes of a connection and hands
 * out whole lines; it never holds more than max_line bytes of a partial
 * line, so a client that sends an endless line costs at most that much
 * memory: the rest of such a line is skipped up to its newline and
 * reported once as oversize.
 */
#ifndef BERTH_API_FRAME_H
#define BERTH_API_FRAME_H

#include <stdbool.h>
#include <stddef.h>

struct api_frame {
	char *buf;        /* the partial line so far; malloc'd or NULL */
	size_t len, cap;
	size_t max_line;
	bool discarding;  /* skipping the rest of an oversize line */
};

/* api_frame_line_fn is called for each complete line (line borrowed,
 * len bytes, not NUL-terminated, without "\r\n"; blank lines are not
 * reported) or once for an oversize line (line NULL, oversize true). It
 * returns 0 to go on, or non-zero to stop feeding (the connection is
 * closing). */
typedef int (*api_frame_line_fn)(void *arg, const char *line, size_t len,
				 bool oversize);

/* api_frame_init prepares an empty frame; api_frame_finish frees its
 * buffer. */
void api_frame_init(struct api_frame *f, size_t max_line);
void api_frame_finish(struct api_frame *f);

/* api_frame_feed splits n bytes of data into lines and calls fn for each.
 * Returns 0, the non-zero value fn returned, or -ENOMEM (the partial line
 * could not be kept; it is then treated as oversize). */
int api_frame_feed(struct api_frame *f, const char *data, size_t n,
		   api_frame_line_fn fn, void *arg);

/* api_frame_eof hands out a last line that had no newline when the peer
 * closed its side. Returns what fn returned, or 0. */
int api_frame_eof(struct api_frame *f, api_frame_line_fn fn, void *arg);

/* api_json_depth returns the deepest nesting of arrays and objects in the
 * JSON text s (n bytes), counting brackets outside strings. It stops
 * counting once the depth passes limit and returns limit + 1, so that a
 * hostile line is never handed to a recursive parser. The text need not
 * be valid JSON: the parser judges that afterwards. */
int api_json_depth(const char *s, size_t n, int limit);

#endif

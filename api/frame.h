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
	size_t max_line;  /* may be changed between lines */
	bool discarding;  /* skipping the rest of an oversize line */
	char *held;       /* bytes fed but not yet split, kept by a pause;
			     malloc'd or NULL */
	size_t nheld;
};

/* What a line callback returns. */
enum {
	API_FRAME_GO = 0, /* go on with the next line */
	API_FRAME_PAUSE,  /* stop; the bytes after this line are held in
			     the frame until api_frame_resume */
	API_FRAME_STOP,   /* stop; the rest is dropped (the connection is
			     closing) */
};

/* api_frame_line_fn is called for each complete line (line borrowed,
 * len bytes, not NUL-terminated, without "\r\n"; blank lines are not
 * reported) or once for an oversize line (line NULL, oversize true). It
 * returns API_FRAME_GO, API_FRAME_PAUSE or API_FRAME_STOP. */
typedef int (*api_frame_line_fn)(void *arg, const char *line, size_t len,
				 bool oversize);

/* api_frame_init prepares an empty frame; api_frame_finish frees its
 * buffers. */
void api_frame_init(struct api_frame *f, size_t max_line);
void api_frame_finish(struct api_frame *f);

/* api_frame_feed splits n bytes of data (borrowed) into lines and calls
 * fn for each. Returns 0, or the API_FRAME_PAUSE or API_FRAME_STOP that fn
 * returned. After a pause the rest of data is copied into the frame (a
 * connection that pauses reads no more, so that is at most one read),
 * and when it cannot be copied, API_FRAME_STOP is returned instead. A
 * partial line that cannot be kept is treated as oversize. */
int api_frame_feed(struct api_frame *f, const char *data, size_t n,
		   api_frame_line_fn fn, void *arg);

/* api_frame_resume feeds what a pause held back, as api_frame_feed
 * would, and returns what it returns (0 when nothing was held). */
int api_frame_resume(struct api_frame *f, api_frame_line_fn fn, void *arg);

/* api_frame_eof hands out a last line that had no newline when the peer
 * closed its side. Returns what fn returned, or 0. */
int api_frame_eof(struct api_frame *f, api_frame_line_fn fn, void *arg);

/* api_json_depth returns the deepest nesting of arrays and objects in the
 * JSON text s (n bytes), counting brackets outside strings. It stops
 * counting once the depth passes limit and returns limit + 1, so that a
 * hostile line is never handed to a recursive parser. The text need not
 * be valid JSON: the parser judges that afterwards. */
int api_json_depth(const char *s, size_t n, int limit);

/* api_json_batch_len returns the number of elements of the JSON text s (n
 * bytes) when it is an array (a batch), counting commas at its top level
 * outside strings, or 0 when it is not an array. It stops counting once
 * the count passes limit and returns limit + 1, so that a batch too long
 * to answer is refused before it is parsed. Like api_json_depth, it does
 * not judge whether the text is valid JSON. */
size_t api_json_batch_len(const char *s, size_t n, size_t limit);

#endif

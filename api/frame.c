/*
 * frame.c: line framing and the nesting pre-scan (frame.h).
 */
#include "api/frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A partial line's buffer is given back once a line that needed more than
 * this is done, so that one large request does not pin its memory on a
 * connection that then sits idle. */
#define FRAME_KEEP_CAP (64 * 1024)

void api_frame_init(struct api_frame *f, size_t max_line)
{
	memset(f, 0, sizeof *f);
	f->max_line = max_line;
}

void api_frame_finish(struct api_frame *f)
{
	free(f->buf);
	f->buf = NULL;
	f->len = f->cap = 0;
	free(f->held);
	f->held = NULL;
	f->nheld = 0;
}

static void frame_reset(struct api_frame *f)
{
	f->len = 0;
	if (f->cap > FRAME_KEEP_CAP) {
		free(f->buf);
		f->buf = NULL;
		f->cap = 0;
	}
}

/* frame_append keeps n more bytes of the partial line. Returns 0 or
 * -ENOMEM. */
static int frame_append(struct api_frame *f, const char *p, size_t n)
{
	if (f->len + n > f->cap) {
		size_t cap = f->cap ? f->cap : 4096;
		char *b;

		while (cap < f->len + n)
			cap *= 2;
		if (cap > f->max_line + 1)
			cap = f->max_line + 1;
		b = realloc(f->buf, cap);
		if (!b)
			return -ENOMEM;
		f->buf = b;
		f->cap = cap;
	}
	memcpy(f->buf + f->len, p, n);
	f->len += n;
	return 0;
}

/* emit strips the "\r" and reports a whole line; blank lines are not
 * messages and are skipped. */
static int emit(const char *line, size_t len, api_frame_line_fn fn, void *arg)
{
	size_t i;

	if (len && line[len - 1] == '\r')
		len--;
	for (i = 0; i < len; i++)
		if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
			break;
	if (i == len)
		return 0;
	return fn(arg, line, len, false);
}

/* hold keeps the n bytes at data that a pause left unsplit. Returns the
 * callback's API_FRAME_PAUSE, or API_FRAME_STOP when they cannot be
 * kept. */
static int hold(struct api_frame *f, const char *data, size_t n)
{
	if (n == 0)
		return API_FRAME_PAUSE;
	f->held = malloc(n);
	if (!f->held)
		return API_FRAME_STOP;
	memcpy(f->held, data, n);
	f->nheld = n;
	return API_FRAME_PAUSE;
}

int api_frame_feed(struct api_frame *f, const char *data, size_t n,
		   api_frame_line_fn fn, void *arg)
{
	while (n > 0) {
		const char *nl = memchr(data, '\n', n);
		size_t chunk = nl ? (size_t)(nl - data) : n;
		int rc = 0;

		if (f->discarding) {
			if (nl)
				f->discarding = false;
		} else if (f->len + chunk > f->max_line) {
			/* The line is over the limit: report it once, now,
			 * and skip the rest of it up to its newline. */
			frame_reset(f);
			f->discarding = nl == NULL;
			rc = fn(arg, NULL, 0, true);
		} else if (nl && f->len == 0) {
			/* The common case: a whole line inside this read. */
			rc = emit(data, chunk, fn, arg);
		} else if (nl) {
			if (frame_append(f, data, chunk) < 0) {
				frame_reset(f);
				rc = fn(arg, NULL, 0, true);
			} else {
				rc = emit(f->buf, f->len, fn, arg);
				frame_reset(f);
			}
		} else if (frame_append(f, data, chunk) < 0) {
			frame_reset(f);
			f->discarding = true;
			rc = fn(arg, NULL, 0, true);
		}
		if (nl) {
			data = nl + 1;
			n -= chunk + 1;
		} else {
			n = 0;
		}
		if (rc == API_FRAME_PAUSE)
			return hold(f, data, n);
		if (rc)
			return rc;
	}
	return 0;
}

int api_frame_resume(struct api_frame *f, api_frame_line_fn fn, void *arg)
{
	char *held = f->held;
	size_t n = f->nheld;
	int rc;

	/* Feeding may pause again and hold a new tail of these bytes. */
	f->held = NULL;
	f->nheld = 0;
	rc = api_frame_feed(f, held, n, fn, arg);
	free(held);
	return rc;
}

int api_frame_eof(struct api_frame *f, api_frame_line_fn fn, void *arg)
{
	int rc = 0;

	if (!f->discarding && f->len > 0)
		rc = emit(f->buf, f->len, fn, arg);
	frame_reset(f);
	f->discarding = false;
	return rc;
}

int api_json_depth(const char *s, size_t n, int limit)
{
	int depth = 0, max = 0;
	bool in_string = false;

	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (in_string) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
			continue;
		}
		switch (c) {
		case '"':
			in_string = true;
			break;
		case '[':
		case '{':
			if (++depth > max) {
				max = depth;
				if (max > limit)
					return limit + 1;
			}
			break;
		case ']':
		case '}':
			depth--;
			break;
		default:
			break;
		}
	}
	return max;
}

size_t api_json_batch_len(const char *s, size_t n, size_t limit)
{
	size_t i = 0, commas = 0;
	int depth = 0;
	bool in_string = false, any = false;

	while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r'))
		i++;
	if (i == n || s[i] != '[')
		return 0;
	for (; i < n; i++) {
		char c = s[i];

		if (in_string) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
			continue;
		}
		if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
			continue;
		/* Anything but its end inside the batch is an element, or
		 * a part of one. */
		if (depth == 1 && c != ']')
			any = true;
		switch (c) {
		case '"':
			in_string = true;
			break;
		case '[':
		case '{':
			depth++;
			break;
		case ']':
		case '}':
			if (--depth == 0)
				return commas + any;
			break;
		case ',':
			/* Each comma at the top level starts one more. */
			if (depth == 1 && ++commas >= limit)
				return limit + 1;
			break;
		default:
			break;
		}
	}
	return commas + any;
}

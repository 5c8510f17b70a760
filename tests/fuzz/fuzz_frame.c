/*
 * fuzz_frame.c: the line framer and the nesting pre-scan of api/frame.h,
 * then JSON-RPC classification (api/rpc.h) of every line that parses.
 *
 * The first byte picks max_line (1..256) and the chunk size the input is
 * fed in, so that lines split across reads and oversize lines are both
 * exercised. Invariants checked: a line handed out never holds a newline,
 * is never longer than max_line, and the bytes handed out never exceed
 * the bytes fed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/frame.h"
#include "api/rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
	size_t max_line;
	size_t bytes;
};

static int on_line(void *arg, const char *line, size_t len, bool oversize)
{
	struct seen *s = arg;
	json_error_t e;
	json_t *msg;

	if (oversize) {
		if (line)
			abort();
		return 0;
	}
	if (!line || len == 0 || len > s->max_line || memchr(line, '\n', len))
		abort();
	s->bytes += len;
	if (api_json_depth(line, len, 64) > 64)
		return 0;
	msg = json_loadb(line, len, JSON_DECODE_ANY, &e);
	if (msg) {
		const char *why = NULL;
		int kind = api_rpc_classify(msg, &why);

		if (kind < API_MSG_REQUEST || kind > API_MSG_BAD_PARAMS)
			abort();
		if (kind == API_MSG_REQUEST || kind == API_MSG_INVALID) {
			json_t *reply = kind == API_MSG_REQUEST
				? api_rpc_result(api_rpc_id(msg),
						 json_object())
				: api_rpc_error(NULL, API_INVALID_REQUEST,
						why ? why : "?", NULL);
			char *text = json_dumps(reply, JSON_COMPACT);

			/* A reply is one line: no raw newline inside. */
			if (!text || strchr(text, '\n'))
				abort();
			free(text);
			json_decref(reply);
		}
		json_decref(msg);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct api_frame f;
	struct seen s = {0};
	size_t chunk, off = 0;

	if (size < 1)
		return 0;
	s.max_line = (size_t)(data[0] & 0xff) + 1;
	chunk = (size_t)(data[0] >> 4) + 1;
	data++;
	size--;
	api_frame_init(&f, s.max_line);
	while (off < size) {
		size_t n = size - off < chunk ? size - off : chunk;

		if (api_frame_feed(&f, (const char *)data + off, n, on_line,
				   &s) != 0)
			break;
		off += n;
	}
	api_frame_eof(&f, on_line, &s);
	if (s.bytes > size)
		abort();
	api_frame_finish(&f);
	return 0;
}

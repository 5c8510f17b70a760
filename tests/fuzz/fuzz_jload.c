/*
 * fuzz_jload.c: store_json_load (store/jload.h) against json_loadb, the
 * parser it must equal. The first byte of an input chooses the flags
 * (mostly 0 and JSON_DECODE_ANY, the fast path's; sometimes one it leaves
 * to jansson), the rest is the text. Both must give the same value, with
 * members in the same order (the compact texts are compared, as
 * json_equal ignores order), or both NULL, and the same err either way;
 * where the fast path alone takes the text, it must give that value too.
 * Any difference aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/jload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const size_t flag_choices[8] = {
	0,
	JSON_DECODE_ANY,
	0,
	JSON_DECODE_ANY,
	JSON_REJECT_DUPLICATES,
	JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY,
	JSON_DECODE_INT_AS_REAL,
	JSON_ALLOW_NUL | JSON_DECODE_ANY,
};

/* same_value is true when a and b are equal and have the same text. */
static int same_value(const json_t *a, const json_t *b)
{
	char *ta, *tb;
	int same;

	if (a == NULL || b == NULL)
		return a == b;
	if (!json_equal(a, b))
		return 0;
	ta = json_dumps(a, JSON_COMPACT | JSON_ENCODE_ANY);
	tb = json_dumps(b, JSON_COMPACT | JSON_ENCODE_ANY);
	/* Out of memory is the fuzzer's limit, not a difference. */
	same = ta == NULL || tb == NULL || strcmp(ta, tb) == 0;
	free(ta);
	free(tb);
	return same;
}

static int same_error(const json_error_t *a, const json_error_t *b)
{
	return strcmp(a->text, b->text) == 0 && a->line == b->line &&
	       a->column == b->column && a->position == b->position &&
	       strcmp(a->source, b->source) == 0 &&
	       json_error_code(a) == json_error_code(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_error_t want_err, got_err, fast_err;
	json_t *want, *got, *fast;
	const char *text = (const char *)data + 1;
	size_t flags;

	if (size == 0)
		return 0;
	flags = flag_choices[data[0] % 8];
	memset(&want_err, 0x5a, sizeof(want_err));
	memset(&got_err, 0x5a, sizeof(got_err));
	memset(&fast_err, 0x5a, sizeof(fast_err));
	want = json_loadb(text, size - 1, flags, &want_err);
	got = store_json_load(text, size - 1, flags, &got_err);
	fast = store__json_load_fast(text, size - 1, flags, &fast_err);
	if (!same_value(want, got) || !same_error(&want_err, &got_err))
		abort();
	if (fast != NULL &&
	    (!same_value(want, fast) || !same_error(&want_err, &fast_err)))
		abort();
	json_decref(want);
	json_decref(got);
	json_decref(fast);
	return 0;
}

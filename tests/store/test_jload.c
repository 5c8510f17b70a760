/*
 * test_jload.c: store_json_load (store/jload.c) against json_loadb. For
 * every text both must give the same value (json_equal, and the same
 * compact text, which json_equal does not check: the order of members)
 * or both NULL, and the same err either way; the texts meant for the fast
 * path must take it, and the others must not. argv[1] is the JSON Schema
 * Test Suite (tests/schema/json-schema-test-suite), whose documents and
 * the instances in them go through both.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "store/jload.h"

static const char *suite_dir = "tests/schema/json-schema-test-suite";

/* err_fill fills e with a pattern, so that a field one parser sets and
 * the other leaves shows. */
static void err_fill(json_error_t *e)
{
	memset(e, 0x5a, sizeof(*e));
}

/* show prints the text for a failure's message, bytes beyond printable
 * ASCII as \xNN, at most its first 300. */
static void show(const char *what, const char *s, size_t n, size_t flags)
{
	print_error("%s: flags 0x%zx, %zu bytes: '", what, flags, n);
	for (size_t i = 0; i < n && i < 300; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c < 0x7f)
			print_error("%c", c);
		else
			print_error("\\x%02x", c);
	}
	print_error("%s'\n", n > 300 ? "..." : "");
}

/* same_value is true when got is want: equal, and the same compact text,
 * which also holds the members' order. */
static bool same_value(const json_t *want, const json_t *got)
{
	char *a, *b;
	bool same;

	if (want == NULL || got == NULL)
		return want == got;
	if (!json_equal(want, got))
		return false;
	a = json_dumps(want, JSON_COMPACT | JSON_ENCODE_ANY);
	b = json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY);
	assert_non_null(a);
	assert_non_null(b);
	same = strcmp(a, b) == 0;
	free(a);
	free(b);
	return same;
}

/* same_error is true when the two errs say the same. */
static bool same_error(const json_error_t *a, const json_error_t *b)
{
	return strcmp(a->text, b->text) == 0 && a->line == b->line &&
	       a->column == b->column && a->position == b->position &&
	       strcmp(a->source, b->source) == 0 &&
	       json_error_code(a) == json_error_code(b);
}

/*
 * check compares store_json_load with json_loadb on the n bytes at s with
 * flags (with an err and without), and store__json_load_fast with both
 * where it takes the text. Returns whether it did.
 */
static bool check(const char *s, size_t n, size_t flags)
{
	json_error_t want_err, got_err, fast_err, untouched;
	json_t *want, *got, *bare, *fast;
	const char *wrong = NULL;

	err_fill(&want_err);
	err_fill(&got_err);
	err_fill(&fast_err);
	err_fill(&untouched);
	want = json_loadb(s, n, flags, &want_err);
	got = store_json_load(s, n, flags, &got_err);
	bare = store_json_load(s, n, flags, NULL);
	fast = store__json_load_fast(s, n, flags, &fast_err);
	if (!same_value(want, got))
		wrong = want ? "not jansson's value" : "jansson refuses it";
	else if (!same_error(&want_err, &got_err))
		wrong = "not jansson's err";
	else if (!same_value(want, bare))
		wrong = "not jansson's value without err";
	else if (fast != NULL && !same_value(want, fast))
		wrong = "the fast path's value is not jansson's";
	else if (fast != NULL && !same_error(&want_err, &fast_err))
		wrong = "the fast path's err is not jansson's";
	else if (fast == NULL && memcmp(&fast_err, &untouched, sizeof(untouched)))
		wrong = "the fast path wrote err and then left the text";
	if (wrong != NULL) {
		show(wrong, s, n, flags);
		if (want == NULL)
			print_error("jansson: %s (line %d, column %d, position %d)\n",
				    want_err.text, want_err.line, want_err.column,
				    want_err.position);
		if (got == NULL)
			print_error("store_json_load: %s (line %d, column %d, "
				    "position %d)\n", got_err.text, got_err.line,
				    got_err.column, got_err.position);
		fail();
	}
	json_decref(want);
	json_decref(got);
	json_decref(bare);
	json_decref(fast);
	return fast != NULL;
}

/* check_both checks s with flags 0 and JSON_DECODE_ANY and returns how
 * many of the two the fast path took. */
static int check_both(const char *s, size_t n)
{
	return check(s, n, 0) + check(s, n, JSON_DECODE_ANY);
}

struct doc {
	const char *s;
	size_t n;
	size_t flags;
};

/* DOC is a text given as a literal, which may hold a NUL. */
#define DOC(lit, fl) {lit, sizeof(lit) - 1, fl}
#define ANY JSON_DECODE_ANY

#define SUBMIT                                                                \
	"{\"jsonrpc\":\"2.0\",\"id\":12345,\"method\":\"jobs/submit\","      \
	"\"params\":{\"tool\":\"noop\",\"input\":{\"n\":12345}}}"

/* Texts inside the fast subset, each with the flags it is read with. */
static const struct doc fast_docs[] = {
	DOC(SUBMIT, 0),
	DOC(SUBMIT, ANY),
	DOC("{}", 0),
	DOC("[]", 0),
	DOC(" { } ", 0),
	DOC("[ ]", ANY),
	DOC("\t\r\n {\"a\" : [ 1 , 2 ] ,\n\"b\":{ }\t}\r\n ", 0),
	DOC("[true,false,null,[],{},\"\",0]", 0),
	DOC("[ true , false , null ]", ANY),
	/* Every simple escape, in a value and in a key. */
	DOC("{\"e\":\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\"}", 0),
	DOC("{\"\\\"\\\\\\/\\b\\f\\n\\r\\t\":\"x\"}", 0),
	DOC("[\"\\\\\\\\\", \"\\/\\/\", \"a\\tb\\nc\"]", 0),
	/* A decoded key must outlive its value's decoded strings. */
	DOC("{\"k\\n\":{\"k2\\t\":\"v\\r\",\"w\":[\"a\\b\"]},\"k3\\/\":[\"b\\f\"]}",
	    0),
	/* Keys that differ only in an escape are two keys. */
	DOC("{\"a\\/\":1,\"a/\\t\":2,\"a\":3}", 0),
	DOC("[0,-1,1,7,-7,10,-10]", 0),
	DOC("[123456789012345678,-123456789012345678]", 0),
	DOC("[999999999999999999,-999999999999999999,100000000000000000]", 0),
	DOC("\"x\"", ANY),
	DOC("\"\"", ANY),
	DOC(" 0 ", ANY),
	DOC("-42", ANY),
	DOC("true", ANY),
	DOC("false", ANY),
	DOC("null", ANY),
	DOC("\"a\\\"b\"", ANY),
	DOC("{\"jsonrpc\":\"2.0\",\"method\":\"events/event\",\"params\":"
	    "{\"seq\":1,\"jobId\":\"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b\","
	    "\"type\":\"completed\",\"status\":\"completed\",\"at\":"
	    "\"2026-12-01T10:00:00.000Z\",\"data\":{\"output\":{\"ok\":true}}}}",
	    0),
	DOC("{\"output\":{\"text\":\"done: 3 files, 12 lines\",\"count\":3}}", 0),
	DOC("[{\"a\":[{\"b\":[{\"c\":[]}]}]}]", 0),
};

/* Texts the fast path leaves to jansson: every trigger of its fallback,
 * and texts jansson refuses. */
static const struct doc fallback_docs[] = {
	/* Reals, also the invalid ones. */
	DOC("[1.5]", 0), DOC("[1e5]", 0), DOC("[1E5]", 0), DOC("[1e-5]", 0),
	DOC("[1E+5]", 0), DOC("[-0.0]", 0), DOC("[0.5]", 0), DOC("[1.]", 0),
	DOC("[.5]", 0), DOC("[1e]", 0), DOC("[1e+]", 0), DOC("[1.e5]", 0),
	DOC("1.5", ANY), DOC("[1e400]", 0), DOC("{\"a\":1,\"b\":2.5}", 0),
	DOC("[0e0]", 0), DOC("[-1.0e-0]", 0),
	/* \u escapes: characters, NULs, surrogates, invalid ones. */
	DOC("[\"\\u0041\"]", 0), DOC("[\"\\u0000\"]", 0),
	DOC("{\"\\u0000\":1}", 0), DOC("{\"a\\u0000b\":1}", 0),
	DOC("[\"\\ud83d\\ude00\"]", 0), DOC("[\"\\ud800\"]", 0),
	DOC("[\"\\udc00\"]", 0), DOC("[\"\\ud800\\u0041\"]", 0),
	DOC("[\"\\uZZZZ\"]", 0), DOC("[\"\\u12\"]", 0), DOC("[\"\\u00e9\"]", 0),
	DOC("[\"\\U0041\"]", 0),
	/* Bytes beyond ASCII: valid UTF-8, invalid, truncated, a BOM. */
	DOC("[\"\xc3\xa9\"]", 0), DOC("{\"\xc3\xa9\":1}", 0),
	DOC("[\"\xe2\x82\xac\"]", 0), DOC("[\"\xf0\x9f\x98\x80\"]", 0),
	DOC("[\"\xff\"]", 0), DOC("[\"\xc3\"]", 0), DOC("[\"\xc3\"", 0),
	DOC("[\"\xed\xa0\x80\"]", 0), DOC("[\"\xc0\xaf\"]", 0),
	DOC("\xef\xbb\xbf{}", 0), DOC("[\xc3\xa9]", 0), DOC("{}\xc3\xa9", 0),
	/* Control bytes and DEL in strings. */
	DOC("[\"a\tb\"]", 0), DOC("[\"a\nb\"]", 0), DOC("[\"a\rb\"]", 0),
	DOC("[\"\x01\"]", 0), DOC("[\"\x1f\"]", 0), DOC("[\"\x7f\"]", 0),
	DOC("{\"\x7f\":1}", 0), DOC("{\"a\x01\":1}", 0),
	/* Escapes that are not JSON's. */
	DOC("[\"\\x\"]", 0), DOC("[\"\\'\"]", 0), DOC("[\"\\a\"]", 0),
	DOC("[\"\\\"]", 0), DOC("[\"\\", 0), DOC("[\"\\0\"]", 0),
	/* Integers: leading zeros, "-0", signs, 19 digits and more. */
	DOC("[01]", 0), DOC("[-01]", 0), DOC("[00]", 0), DOC("-0", ANY),
	DOC("[-0]", 0), DOC("{\"a\":-0}", 0), DOC("[-]", 0), DOC("[-a]", 0),
	DOC("[+1]", 0), DOC("[- 1]", 0), DOC("[--1]", 0),
	DOC("[1234567890123456789]", 0), DOC("[-1234567890123456789]", 0),
	DOC("[9223372036854775807]", 0), DOC("[-9223372036854775808]", 0),
	DOC("[9223372036854775808]", 0), DOC("[-9223372036854775809]", 0),
	DOC("[100000000000000000000000]", 0), DOC("[0000000000000000000]", 0),
	DOC("1000000000000000000", ANY),
	/* Duplicate keys: jansson keeps the last value. */
	DOC("{\"a\":1,\"a\":2}", 0), DOC("{\"a\":1,\"b\":2,\"a\":3}", 0),
	DOC("{\"x\":{\"a\":[],\"a\":{}}}", 0), DOC("{\"a\":1,\"\\u0061\":2}", 0),
	DOC("{\"a/\":1,\"a\\/\":2}", 0),
	/* Trailing bytes. */
	DOC("{} x", 0), DOC("{}{}", 0), DOC("[1]]", 0), DOC("{\"a\":1}}", 0),
	DOC("1 2", ANY), DOC("[1] ,", 0), DOC("\"a\"\"b\"", ANY),
	DOC("null null", ANY), DOC("{}\f", 0), DOC("{}\v", 0),
	DOC("[]\x00", 0), DOC("{} /* c */", 0),
	/* Nothing but whitespace, or nothing. */
	DOC("", 0), DOC("", ANY), DOC("   ", 0), DOC(" \n\t\r", ANY),
	/* A value that is not an array or an object, without
	 * JSON_DECODE_ANY. */
	DOC("\"x\"", 0), DOC("1", 0), DOC("-1", 0), DOC("true", 0),
	DOC("false", 0), DOC("null", 0), DOC(" 12 ", 0),
	/* Syntax errors. */
	DOC("{\"a\"}", 0), DOC("{\"a\":}", 0), DOC("{a:1}", 0), DOC("[1,]", 0),
	DOC("{\"a\":1,}", 0), DOC("[,1]", 0), DOC("{,}", 0), DOC("[1 2]", 0),
	DOC("{\"a\" 1}", 0), DOC("{\"a\"::1}", 0), DOC("[tru]", 0),
	DOC("nul", ANY), DOC("[truex]", 0), DOC("[true1]", 0),
	DOC("[falsefalse]", 0), DOC("[nan]", 0), DOC("[Infinity]", 0),
	DOC("['x']", 0), DOC("[", 0), DOC("{", 0), DOC("\"abc", ANY),
	DOC("[\"abc", 0), DOC("{\"a\":1", 0), DOC("{\"a\"", 0), DOC("]", 0),
	DOC("}", ANY), DOC(":", ANY), DOC(",", ANY), DOC("[1:2]", 0),
	DOC("{1:2}", 0), DOC("{\"a\":1 \"b\":2}", 0), DOC("[[]", 0),
	DOC("[]]", 0), DOC("{\"a\":[}", 0), DOC("[{]}", 0), DOC("[True]", 0),
	DOC("[NULL]", 0), DOC("[0x10]", 0), DOC("[1_000]", 0),
	/* NUL bytes. */
	DOC("{\"a\":1}\x00", 0), DOC("[\x00]", 0), DOC("[\"a\x00b\"]", 0),
	DOC("{\"a\x00\":1}", 0), DOC("\x00", ANY), DOC("[1\x00]", 0),
	/* Flags other than JSON_DECODE_ANY, on texts the fast path would
	 * take otherwise. */
	DOC("{\"a\":1}", JSON_REJECT_DUPLICATES),
	DOC("{\"a\":1,\"a\":2}", JSON_REJECT_DUPLICATES),
	DOC("{\"a\":1} x", JSON_DISABLE_EOF_CHECK),
	DOC("[1] [2]", JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY),
	DOC("[1,-2,3]", JSON_DECODE_INT_AS_REAL),
	DOC("[\"\\u0000\",\"a\"]", JSON_ALLOW_NUL),
	DOC("[\"a\"]", JSON_ALLOW_NUL),
	DOC("[1]", 0x100),
};

static void fast_path__takes_the_texts_of_its_subset(void **state)
{
	for (size_t i = 0; i < sizeof(fast_docs) / sizeof(fast_docs[0]); i++) {
		const struct doc *d = &fast_docs[i];

		if (!check(d->s, d->n, d->flags)) {
			show("the fast path left the text to jansson", d->s,
			     d->n, d->flags);
			fail();
		}
	}
}

static void fallback__leaves_every_other_text_to_jansson(void **state)
{
	for (size_t i = 0; i < sizeof(fallback_docs) / sizeof(fallback_docs[0]);
	     i++) {
		const struct doc *d = &fallback_docs[i];

		if (check(d->s, d->n, d->flags)) {
			show("the fast path took the text", d->s, d->n, d->flags);
			fail();
		}
	}
}

/* Every printable ASCII byte stands for itself, in a value and in a key;
 * the quote and the backslash escaped. */
static void strings__of_every_printable_byte_take_the_fast_path(void **state)
{
	char text[512], *p = text;

	p += sprintf(p, "{\"");
	for (int c = 0x20; c < 0x7f; c++) {
		if (c == '"' || c == '\\')
			*p++ = '\\';
		*p++ = (char)c;
	}
	p += sprintf(p, "\":\"");
	for (int c = 0x7e; c >= 0x20; c--) {
		if (c == '"' || c == '\\')
			*p++ = '\\';
		*p++ = (char)c;
	}
	p += sprintf(p, "\"}");
	assert_int_equal(check_both(text, (size_t)(p - text)), 2);
}

/* A string with escapes decodes into a buffer of the parser's own; past
 * its first 256 bytes the buffer is allocated, and keys decoded in it must
 * not be overwritten by the strings of their values. */
/* put appends s to *p. */
static void put(char **p, const char *s)
{
	size_t n = strlen(s);

	memcpy(*p, s, n);
	*p += n;
}

static void strings__with_escapes_longer_than_the_buffer_take_the_fast_path(void **state)
{
	enum { LEN = 5000 };
	char *text = malloc(6 * LEN + 64), *p = text;
	size_t len = 0;
	json_t *v, *a;

	assert_non_null(text);
	for (size_t next = 1; next <= LEN; next = next * 3 + 1) {
		len = next;
		p = text;
		put(&p, "{\"");
		for (size_t i = 0; i < len; i++)
			put(&p, i % 7 ? "k" : "\\n");
		put(&p, "\":[\"");
		for (size_t i = 0; i < 2 * len; i++)
			put(&p, i % 5 ? "v" : "\\t");
		put(&p, "\",\"\\\"\"]}");
		assert_int_equal(check_both(text, (size_t)(p - text)), 2);
	}
	/* The last one's key and strings, read back. */
	v = store_json_load(text, (size_t)(p - text), 0, NULL);
	assert_non_null(v);
	void *it = json_object_iter(v);
	assert_non_null(it);
	assert_int_equal(strlen(json_object_iter_key(it)), len);
	assert_int_equal(json_object_iter_key(it)[0], '\n');
	assert_int_equal(json_object_iter_key(it)[1], 'k');
	a = json_object_iter_value(it);
	assert_int_equal(json_string_length(json_array_get(a, 0)), 2 * len);
	assert_string_equal(json_string_value(json_array_get(a, 1)), "\"");
	json_decref(v);
	free(text);
}

/* The fast path builds arrays and objects nested 64 deep (the default
 * limit on a request line); deeper ones, and those deeper than jansson's
 * own limit, are jansson's. */
static void nesting__to_the_fast_depth_takes_the_fast_path_and_beyond_falls_back(void **state)
{
	enum { MAX = 3000 };
	char *text = malloc(8 * MAX + 16);
	size_t n;

	assert_non_null(text);
	for (int depth = 1; depth <= MAX; depth += depth < 70 ? 1 : 733) {
		bool fast_expected = depth <= STORE__JLOAD_MAX_DEPTH;

		/* [[[...1...]]] */
		n = 0;
		for (int i = 0; i < depth; i++)
			text[n++] = '[';
		text[n++] = '1';
		for (int i = 0; i < depth; i++)
			text[n++] = ']';
		assert_int_equal(check(text, n, 0), fast_expected);

		/* {"a":{"a":...{}...}} */
		n = 0;
		for (int i = 1; i < depth; i++) {
			memcpy(text + n, "{\"a\":", 5);
			n += 5;
		}
		text[n++] = '{';
		for (int i = 0; i < depth; i++)
			text[n++] = '}';
		assert_int_equal(check(text, n, ANY), fast_expected);

		/* [{"a":[{"a":...}]}] mixed */
		n = 0;
		for (int i = 0; i < depth; i++) {
			if (i % 2 == 0) {
				text[n++] = '[';
			} else {
				memcpy(text + n, "{\"a\":", 5);
				n += 5;
			}
		}
		text[n++] = '0';
		for (int i = depth - 1; i >= 0; i--)
			text[n++] = i % 2 == 0 ? ']' : '}';
		assert_int_equal(check(text, n, 0), fast_expected);
	}
	free(text);
}

/* Every prefix of a valid text, and of texts the fast path leaves: the
 * parse stops at each byte (jansson's "premature end of input", its
 * positions), read with both flags. */
static void truncation__at_every_byte_agrees_with_jansson(void **state)
{
	const struct doc *sets[] = {fast_docs, fallback_docs};
	size_t lens[] = {sizeof(fast_docs) / sizeof(fast_docs[0]),
			 sizeof(fallback_docs) / sizeof(fallback_docs[0])};

	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < lens[k]; i++)
			for (size_t n = 0; n <= sets[k][i].n; n++)
				check_both(sets[k][i].s, n);
}

/* Each byte of a request line replaced by each of the bytes that mean
 * something to a JSON parser (and some that do not), deleted, or
 * doubled. */
static void edits__of_a_request_line_agree_with_jansson(void **state)
{
	static const char line[] = SUBMIT;
	static const unsigned char bytes[] = {
		0x00, 0x01, 0x08, 0x09, 0x0a, 0x0c, 0x0d, 0x1f, ' ', '"', '\\',
		'/', ',', ':', '[', ']', '{', '}', '0', '1', '9', '-', '+', '.',
		'e', 'E', 't', 'f', 'n', 'u', 'a', 'x', '\'', 0x7e, 0x7f, 0x80,
		0xbf, 0xc3, 0xe2, 0xff,
	};
	const size_t n = sizeof(line) - 1;
	char text[sizeof(line) + 1];
	int fast = 0;

	for (size_t i = 0; i < n; i++) {
		for (size_t b = 0; b < sizeof(bytes); b++) {
			memcpy(text, line, n);
			text[i] = (char)bytes[b];
			fast += check_both(text, n);
		}
		/* deleted */
		memcpy(text, line, i);
		memcpy(text + i, line + i + 1, n - i - 1);
		fast += check_both(text, n - 1);
		/* doubled */
		memcpy(text, line, i + 1);
		memcpy(text + i + 1, line + i, n - i);
		fast += check_both(text, n + 1);
	}
	/* Many edits keep the line valid (another letter in a string, a
	 * space between tokens), and those take the fast path. */
	assert_true(fast > 1000);
}

/* ---- the JSON Schema Test Suite ----------------------------------------- */

struct suite_count {
	int docs;
	int fast;
	int refused;
};

/* check_dumped checks v's text in two forms: compact, and indented (with
 * newlines and runs of spaces between tokens). */
static void check_dumped(const json_t *v, struct suite_count *c)
{
	static const size_t forms[] = {JSON_COMPACT, JSON_INDENT(3)};

	for (size_t f = 0; f < 2; f++) {
		char *text = json_dumps(v, forms[f] | JSON_ENCODE_ANY);

		assert_non_null(text);
		c->fast += check_both(text, strlen(text));
		c->docs++;
		free(text);
	}
}

/* check_file checks the file at path, and each schema and instance
 * ("data") of its test groups. */
static void check_file(const char *path, struct suite_count *c)
{
	FILE *f = fopen(path, "rb");
	char *text;
	long len;
	json_t *groups, *g, *t;
	size_t i, j;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	assert_true(len >= 0);
	rewind(f);
	text = malloc((size_t)len + 1);
	assert_non_null(text);
	assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	c->fast += check_both(text, (size_t)len);
	c->docs++;

	/* Five files hold a \u0000, which only JSON_ALLOW_NUL lets jansson
	 * read: their instances are read with it (and each text checked
	 * without it). optional/bignum.json's integers beyond 64 bits make
	 * jansson refuse it: its refusal was compared above, and it has no
	 * values to read further. */
	groups = json_loadb(text, (size_t)len, JSON_ALLOW_NUL, NULL);
	free(text);
	if (groups == NULL) {
		c->refused++;
		return;
	}
	json_array_foreach(groups, i, g) {
		if (json_object_get(g, "schema") != NULL)
			check_dumped(json_object_get(g, "schema"), c);
		json_array_foreach(json_object_get(g, "tests"), j, t)
			if (json_object_get(t, "data") != NULL)
				check_dumped(json_object_get(t, "data"), c);
	}
	json_decref(groups);
}

static void walk(const char *dir, struct suite_count *c)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (d == NULL) {
		print_error("cannot open %s\n", dir);
		fail();
	}
	while ((e = readdir(d)) != NULL) {
		char path[4096];
		struct stat st;
		size_t len = strlen(e->d_name);

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		assert_int_equal(stat(path, &st), 0);
		if (S_ISDIR(st.st_mode))
			walk(path, c);
		else if (len > 5 && strcmp(e->d_name + len - 5, ".json") == 0)
			check_file(path, c);
	}
	closedir(d);
}

static void json_schema_test_suite__every_document_agrees_with_jansson(void **state)
{
	struct suite_count c = {0};

	walk(suite_dir, &c);
	print_message("%d documents (jansson refuses %d of the files); the "
		      "fast path took %d of their 2 readings each\n", c.docs,
		      c.refused, c.fast);
	/* The suite has some 125 files and thousands of instances; most are
	 * inside the fast subset (the rest: reals, non-ASCII strings,
	 * \u escapes, scalars read with flags 0). */
	assert_true(c.docs > 3000);
	assert_true(c.fast > c.docs);
}

/* ---- out of memory ------------------------------------------------------- */

static long allocs_left;

static void *failing_malloc(size_t size)
{
	if (allocs_left-- <= 0)
		return NULL;
	return malloc(size);
}

static int restore_allocator(void **state)
{
	json_set_alloc_funcs(malloc, free);
	return 0;
}

/* jansson's allocator failing at each of its allocations in turn: the
 * fast path frees what it built and falls back, and jansson fails as it
 * does (NULL), or a value is returned whole. Nothing leaks (ASan). */
static void out_of_memory__at_every_allocation_frees_and_returns_null_or_the_value(void **state)
{
	static const struct doc docs[] = {
		DOC(SUBMIT, 0),
		DOC("{\"k\\n\":{\"k2\\t\":\"v\\r\",\"w\":[\"a\\b\",1,true]}}", 0),
		DOC("[[[\"a\"],{\"b\":[1,2,3,4,5,6,7,8,9,10]}],null]", ANY),
		DOC("[1.5,\"\\u00e9\"]", 0),
		DOC("\"just a string\"", ANY),
	};

	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		json_t *want = json_loadb(docs[i].s, docs[i].n, docs[i].flags, NULL);
		bool complete = false;

		assert_non_null(want);
		for (long k = 0; !complete; k++) {
			json_error_t err;
			json_t *v;

			json_set_alloc_funcs(failing_malloc, free);
			allocs_left = k;
			v = store_json_load(docs[i].s, docs[i].n, docs[i].flags,
					    &err);
			complete = allocs_left >= 0;
			json_set_alloc_funcs(malloc, free);
			if (v != NULL)
				assert_true(same_value(want, v));
			else
				assert_false(complete);
			json_decref(v);
		}
		json_decref(want);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fast_path__takes_the_texts_of_its_subset),
		cmocka_unit_test(fallback__leaves_every_other_text_to_jansson),
		cmocka_unit_test(strings__of_every_printable_byte_take_the_fast_path),
		cmocka_unit_test(strings__with_escapes_longer_than_the_buffer_take_the_fast_path),
		cmocka_unit_test(nesting__to_the_fast_depth_takes_the_fast_path_and_beyond_falls_back),
		cmocka_unit_test(truncation__at_every_byte_agrees_with_jansson),
		cmocka_unit_test(edits__of_a_request_line_agree_with_jansson),
		cmocka_unit_test(json_schema_test_suite__every_document_agrees_with_jansson),
		cmocka_unit_test_teardown(out_of_memory__at_every_allocation_frees_and_returns_null_or_the_value,
					  restore_allocator),
	};

	if (argc > 1)
		suite_dir = argv[1];
	return cmocka_run_group_tests(tests, NULL, NULL);
}

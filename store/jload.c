/*
 * jload.c: JSON texts parsed into jansson values (jload.h says what the
 * fast path takes and why it exists).
 *
 * The fast path is a recursive descent over the bytes themselves that
 * builds the value with jansson's public constructors, in the order
 * json_loadb's parser calls them, so the tree is the one json_loadb
 * builds. It never reports an error of its own: at the first byte it does
 * not take (including every byte that makes the text invalid) it frees
 * what it built and the whole text goes to json_loadb, which then gives
 * the value or the error exactly as it always did. The text is read
 * once (a string with an escape twice), and a string is copied once, by
 * jansson, straight from the text unless it has an escape.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "store/jload.h"

/* Object keys by length need jansson 2.14; before, a key is copied to
 * make it a C string. */
#if JANSSON_VERSION_HEX >= 0x020e00
#define JL_KEYS_BY_LENGTH 1
#else
#define JL_KEYS_BY_LENGTH 0
#endif

/*
 * struct jload is one parse: the text still to read (p up to end) and the
 * buffer that the escapes of a string are decoded into, a small one of
 * its own until a string needs more. A decoded string is handed to jansson
 * (which copies it) before the next string is read, so one buffer serves
 * all of them; a decoded key is copied out first, as its value is read
 * before the key is set.
 */
struct jload {
	const char *p;
	const char *end;
	char *buf;
	size_t cap;
	char small[256];
};

/*
 * plain[c] is 1 for a byte that stands for itself inside a fast string:
 * printable ASCII but the quote and the backslash. Every other byte is
 * jansson's: it refuses control bytes and checks the UTF-8 of bytes of
 * 0x80 and above; DEL, which it takes as it is, stays outside the fast
 * subset with them.
 */
static const unsigned char plain[256] = {
	/* 0x00 */ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	/* 0x10 */ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	/* 0x20 */ 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	/* 0x30 */ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	/* 0x40 */ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	/* 0x50 */ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
	/* 0x60 */ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	/* 0x70 */ 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0,
	/* 0x80 and above: 0 */
};

/* jl_space skips JSON's whitespace, the four bytes jansson skips. */
static inline void jl_space(struct jload *l)
{
	while (l->p < l->end && (*l->p == ' ' || *l->p == '\n' ||
				 *l->p == '\r' || *l->p == '\t'))
		l->p++;
}

/* jl_at is true when the next byte is c. */
static inline bool jl_at(const struct jload *l, char c)
{
	return l->p < l->end && *l->p == c;
}

/* unescape returns the byte the simple escape \c stands for, or -1 for
 * any other c (\u among them: the fast path leaves it to jansson). */
static int unescape(char c)
{
	switch (c) {
	case '"':
	case '\\':
	case '/':
		return c;
	case 'b':
		return '\b';
	case 'f':
		return '\f';
	case 'n':
		return '\n';
	case 'r':
		return '\r';
	case 't':
		return '\t';
	default:
		return -1;
	}
}

/*
 * jl_string reads the string whose opening quote l->p is at and leaves
 * l->p after its closing quote. Its bytes are *s and *len: in the text
 * itself when the string has no escape, else decoded into l->buf, where
 * they stay until the next string is read. Returns false for a string the
 * fast path does not take (or an unterminated one), or when out of memory.
 */
static bool jl_string(struct jload *l, const char **s, size_t *len)
{
	const char *start = l->p + 1, *q = start;
	bool escaped = false;

	for (;;) {
		while (q < l->end && plain[(unsigned char)*q])
			q++;
		if (q >= l->end)
			return false;
		if (*q == '"')
			break;
		if (*q != '\\' || q + 1 >= l->end || unescape(q[1]) < 0)
			return false;
		escaped = true;
		q += 2;
	}
	l->p = q + 1;
	if (!escaped) {
		*s = start;
		*len = (size_t)(q - start);
		return true;
	}

	/* Decoded, a string is shorter than its text. */
	size_t need = (size_t)(q - start);
	if (need > l->cap) {
		char *b = malloc(need);
		if (b == NULL)
			return false;
		if (l->buf != l->small)
			free(l->buf);
		l->buf = b;
		l->cap = need;
	}
	char *o = l->buf;
	for (const char *r = start; r < q; r++)
		*o++ = *r == '\\' ? (char)unescape(*++r) : *r;
	*s = l->buf;
	*len = (size_t)(o - l->buf);
	return true;
}

/*
 * jl_integer reads the number at l->p when it is an integer of at most 18
 * digits (below 10^18, so it cannot overflow a json_int_t) without a
 * leading zero, and returns it as a new value. Anything else is jansson's:
 * a real, which it converts; a longer integer, which it range-checks; "01",
 * which it refuses; and "-0". The reading stops before a fraction, an
 * exponent, a 19th digit or the digit after a leading zero, none of which
 * may follow a value: the caller, which expects a comma, a bracket or the
 * end there, leaves the text to jansson.
 */
static json_t *jl_integer(struct jload *l)
{
	const char *q = l->p, *digits;
	bool negative = false;
	json_int_t v = 0;

	if (*q == '-') {
		negative = true;
		q++;
	}
	digits = q;
	if (q >= l->end || *q < '0' || *q > '9' || (*q == '0' && negative))
		return NULL;
	if (*q == '0')
		q++;
	else
		while (q < l->end && *q >= '0' && *q <= '9' && q - digits < 18)
			v = v * 10 + (*q++ - '0');
	l->p = q;
	return json_integer(negative ? -v : v);
}

/* jl_word reads the literal w (n bytes) and returns v, a singleton of
 * jansson's. A longer word ("truex") fails at the next byte, where the
 * caller expects a comma, a bracket or the end. */
static json_t *jl_word(struct jload *l, const char *w, size_t n, json_t *v)
{
	if ((size_t)(l->end - l->p) < n || memcmp(l->p, w, n) != 0)
		return NULL;
	l->p += n;
	return v;
}

static json_t *jl_value(struct jload *l, int depth);

/*
 * jl_set sets the member k (klen bytes, not a C string) of o, which has n
 * members, to v (stolen, also on failure), unless o has it already: the
 * fast path leaves a key given twice to jansson. k in l->buf, or not a C
 * string for an older jansson, was copied by the caller.
 */
static bool jl_set(json_t *o, size_t n, const char *k, size_t klen, json_t *v)
{
#if JL_KEYS_BY_LENGTH
	if (json_object_setn_new_nocheck(o, k, klen, v) != 0)
		return false;
#else
	(void)klen;
	if (json_object_set_new_nocheck(o, k, v) != 0)
		return false;
#endif
	/* A key seen before replaced its value and left the size. */
	return json_object_size(o) == n + 1;
}

/* jl_object reads the object l->p is at, depth deep, into a new value. */
static json_t *jl_object(struct jload *l, int depth)
{
	json_t *o;
	size_t n = 0;

	if (depth > STORE__JLOAD_MAX_DEPTH || (o = json_object()) == NULL)
		return NULL;
	l->p++;
	jl_space(l);
	if (jl_at(l, '}')) {
		l->p++;
		return o;
	}
	for (;;) {
		const char *k;
		size_t klen;
		char *copy = NULL;
		json_t *v;
		bool set;

		if (!jl_at(l, '"') || !jl_string(l, &k, &klen))
			break;
		if (k == l->buf || !JL_KEYS_BY_LENGTH) {
			/* The value's strings would overwrite l->buf. */
			if ((copy = malloc(klen + 1)) == NULL)
				break;
			memcpy(copy, k, klen);
			copy[klen] = '\0';
			k = copy;
		}
		jl_space(l);
		if (jl_at(l, ':')) {
			l->p++;
			v = jl_value(l, depth);
			set = v != NULL && jl_set(o, n++, k, klen, v);
		} else {
			set = false;
		}
		if (copy != NULL)
			free(copy);
		if (!set)
			break;
		jl_space(l);
		if (jl_at(l, ',')) {
			l->p++;
			jl_space(l);
			continue;
		}
		if (jl_at(l, '}')) {
			l->p++;
			return o;
		}
		break;
	}
	json_decref(o);
	return NULL;
}

/* jl_array reads the array l->p is at, depth deep, into a new value. */
static json_t *jl_array(struct jload *l, int depth)
{
	json_t *a, *v;

	if (depth > STORE__JLOAD_MAX_DEPTH || (a = json_array()) == NULL)
		return NULL;
	l->p++;
	jl_space(l);
	if (jl_at(l, ']')) {
		l->p++;
		return a;
	}
	for (;;) {
		if ((v = jl_value(l, depth)) == NULL ||
		    json_array_append_new(a, v) != 0)
			break;
		jl_space(l);
		if (jl_at(l, ',')) {
			l->p++;
			continue;
		}
		if (jl_at(l, ']')) {
			l->p++;
			return a;
		}
		break;
	}
	json_decref(a);
	return NULL;
}

/* jl_value reads the value after any whitespace at l->p, inside depth
 * arrays and objects, into a new value (NULL: not the fast path's). */
static json_t *jl_value(struct jload *l, int depth)
{
	const char *s;
	size_t len;

	jl_space(l);
	if (l->p >= l->end)
		return NULL;
	switch (*l->p) {
	case '{':
		return jl_object(l, depth + 1);
	case '[':
		return jl_array(l, depth + 1);
	case '"':
		return jl_string(l, &s, &len) ? json_stringn_nocheck(s, len)
					      : NULL;
	case 't':
		return jl_word(l, "true", 4, json_true());
	case 'f':
		return jl_word(l, "false", 5, json_false());
	case 'n':
		return jl_word(l, "null", 4, json_null());
	default:
		return jl_integer(l);
	}
}

json_t *store__json_load_fast(const char *s, size_t n, size_t flags,
			      json_error_t *err)
{
	struct jload l;
	json_t *v = NULL;

	if (s == NULL || (flags & ~(size_t)JSON_DECODE_ANY) != 0)
		return NULL;
	l.p = s;
	l.end = s + n;
	l.buf = l.small;
	l.cap = sizeof l.small;
	jl_space(&l);
	/* Without JSON_DECODE_ANY jansson takes only an array or an object. */
	if (l.p < l.end &&
	    ((flags & JSON_DECODE_ANY) || *l.p == '{' || *l.p == '['))
		v = jl_value(&l, 0);
	if (v != NULL) {
		jl_space(&l);
		if (l.p != l.end) {
			json_decref(v);
			v = NULL;
		}
	}
	if (l.buf != l.small)
		free(l.buf);
	if (v != NULL && err != NULL) {
		/* What json_loadb leaves in err on success: no error, its
		 * source's name, and the position of the end of the text
		 * (the whitespace after the value read). */
		err->text[0] = '\0';
		err->line = -1;
		err->column = -1;
		err->position = (int)n;
		memcpy(err->source, "<buffer>", sizeof "<buffer>");
	}
	return v;
}

json_t *store_json_load(const char *s, size_t n, size_t flags,
			json_error_t *err)
{
	json_t *v = store__json_load_fast(s, n, flags, err);

	return v != NULL ? v : json_loadb(s, n, flags, err);
}

/*
 * utf8.h: berth_utf8_repair, text made fit for a JSON string. jansson
 * refuses a string that is not UTF-8 (json_string returns NULL), so a
 * message built from what a tool printed (a line, the tail of its stderr,
 * cut at a byte count that may split a character) would be lost whole
 * for one bad byte. Header-only for the reason duration.h is.
 */
#ifndef BERTH_COMMON_UTF8_H
#define BERTH_COMMON_UTF8_H

#include <stdlib.h>
#include <string.h>

/* berth_utf8_seq returns the length of the well-formed UTF-8 character at
 * s (n bytes left), or 0 when it is not one: no overlong forms, no
 * surrogates, nothing past U+10FFFF (RFC 3629), and no NUL. */
static inline size_t berth_utf8_seq(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned cp;

	if (c >= 0x01 && c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		len = 2, cp = c & 0x1F;
	else if (c >= 0xE0 && c <= 0xEF)
		len = 3, cp = c & 0x0F;
	else if (c >= 0xF0 && c <= 0xF4)
		len = 4, cp = c & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3F);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
		return 0;
	return len;
}

/* berth_utf8_repair returns a malloc'd, NUL-ended copy of the len bytes
 * at s in which every byte that does not begin a well-formed character
 * (and every NUL) is U+FFFD; NULL without memory. */
static inline char *berth_utf8_repair(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	char *out = malloc(3 * len + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < len;) {
		size_t k = berth_utf8_seq(u + i, len - i);

		if (k) {
			memcpy(o, u + i, k);
			o += k;
			i += k;
		} else {
			memcpy(o, "\xEF\xBF\xBD", 3);
			o += 3;
			i++;
		}
	}
	*o = '\0';
	return out;
}

#endif

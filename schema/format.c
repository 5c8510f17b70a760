/*
 * format: the formats berth can assert when schema_options.format_assert is
 * on.  Each checker takes the exact bytes of the string (which may contain a
 * NUL) and follows the RFC the specification names: RFC 3339 for dates and
 * times, RFC 5321 for e-mail, RFC 1123 and IDNA 2008 (RFC 5891, 5892) for
 * host names, RFC 2673 and 4291 for addresses, RFC 3986 for URIs, RFC 4122
 * for UUIDs and ECMA-262 for regular expressions.  Unknown formats are not
 * looked up at all: they stay annotations.
 */
#include "schema/internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum {
	F_DATE_TIME = 1,
	F_DATE,
	F_TIME,
	F_DURATION,
	F_EMAIL,
	F_HOSTNAME,
	F_IPV4,
	F_IPV6,
	F_URI,
	F_URI_REFERENCE,
	F_UUID,
	F_REGEX,
};

static const char *const names[] = {
	[F_DATE_TIME] = "date-time", [F_DATE] = "date",
	[F_TIME] = "time", [F_DURATION] = "duration",
	[F_EMAIL] = "email", [F_HOSTNAME] = "hostname",
	[F_IPV4] = "ipv4", [F_IPV6] = "ipv6",
	[F_URI] = "uri", [F_URI_REFERENCE] = "uri-reference",
	[F_UUID] = "uuid", [F_REGEX] = "regex",
};

int schema__format_lookup(const char *name)
{
	for (int i = 1; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return 0;
}

static bool digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool hex(char c)
{
	return digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* num reads exactly n ASCII digits at s. */
static bool num(const char *s, int n, int *out)
{
	*out = 0;
	for (int i = 0; i < n; i++) {
		if (!digit(s[i]))
			return false;
		*out = *out * 10 + (s[i] - '0');
	}
	return true;
}

/* ---- RFC 3339 ---- */

static bool check_date(const char *s, size_t len)
{
	static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	int y, m, d;
	bool leap;

	if (len != 10 || s[4] != '-' || s[7] != '-' || !num(s, 4, &y) ||
	    !num(s + 5, 2, &m) || !num(s + 8, 2, &d))
		return false;
	if (m < 1 || m > 12 || d < 1 || d > mdays[m - 1])
		return false;
	leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	return !(m == 2 && d == 29 && !leap);
}

static bool check_time(const char *s, size_t len)
{
	int h, m, sec, oh = 0, om = 0, sign = 0;
	size_t i = 8;

	if (len < 9 || s[2] != ':' || s[5] != ':' || !num(s, 2, &h) ||
	    !num(s + 3, 2, &m) || !num(s + 6, 2, &sec))
		return false;
	if (h > 23 || m > 59 || sec > 60)
		return false;
	if (s[i] == '.') {
		i++;
		if (i >= len || !digit(s[i]))
			return false;
		while (i < len && digit(s[i]))
			i++;
	}
	if (i < len && (s[i] == 'Z' || s[i] == 'z')) {
		i++;
	} else if (i < len && (s[i] == '+' || s[i] == '-')) {
		sign = s[i] == '+' ? 1 : -1;
		if (len - i != 6 || s[i + 3] != ':' || !num(s + i + 1, 2, &oh) ||
		    !num(s + i + 4, 2, &om) || oh > 23 || om > 59)
			return false;
		i += 6;
	} else {
		return false;
	}
	if (i != len)
		return false;
	if (sec == 60) {
		/* A leap second is only ever 23:59:60 in UTC. */
		int utc = ((h * 60 + m - sign * (oh * 60 + om)) % 1440 + 1440) % 1440;

		return utc == 23 * 60 + 59;
	}
	return true;
}

static bool check_date_time(const char *s, size_t len)
{
	return len > 11 && (s[10] == 'T' || s[10] == 't') && check_date(s, 10) &&
	       check_time(s + 11, len - 11);
}

/* component reads 1*DIGIT followed by a unit letter; returns the unit or 0. */
static char component(const char *s, size_t len, size_t *i)
{
	size_t start = *i;

	while (*i < len && digit(s[*i]))
		(*i)++;
	if (*i == start || *i >= len)
		return 0;
	return s[(*i)++];
}

/* run_ok: the units seen must be a contiguous run of order ("YMD", "HMS"),
 * which is what the nested ABNF of RFC 3339 appendix A amounts to. */
static bool run_ok(const char *units, const char *order)
{
	return units[0] && strstr(order, units) != NULL;
}

static bool check_duration(const char *s, size_t len)
{
	char date[4] = { 0 }, time[4] = { 0 };
	size_t i = 1, nd = 0, nt = 0;
	char u;

	if (len < 2 || s[0] != 'P')
		return false;
	if (s[len - 1] == 'W') {
		i = 1;
		return component(s, len, &i) == 'W' && i == len;
	}
	while (i < len && s[i] != 'T') {
		if (nd == 3 || !(u = component(s, len, &i)))
			return false;
		date[nd++] = u;
	}
	if (i < len) {
		i++;
		while (i < len) {
			if (nt == 3 || !(u = component(s, len, &i)))
				return false;
			time[nt++] = u;
		}
		if (nt == 0)
			return false;
	}
	if (nd == 0 && nt == 0)
		return false;
	return (nd == 0 || run_ok(date, "YMD")) && (nt == 0 || run_ok(time, "HMS"));
}

/* ---- Addresses ---- */

static bool check_ipv4(const char *s, size_t len)
{
	size_t i = 0;

	for (int part = 0; part < 4; part++) {
		size_t start = i;
		int v = 0;

		if (part > 0) {
			if (i >= len || s[i] != '.')
				return false;
			start = ++i;
		}
		while (i < len && digit(s[i]) && i - start < 3)
			v = v * 10 + (s[i++] - '0');
		if (i == start || v > 255 || (s[start] == '0' && i - start > 1))
			return false;
	}
	return i == len;
}

/* ipv6_side counts the 16-bit groups in one side of "::" (or the whole
 * address); an IPv4 tail, allowed only at the very end, counts as two. */
static int ipv6_side(const char *s, size_t len, bool last)
{
	int groups = 0;
	size_t i = 0;

	if (len == 0)
		return 0;
	for (;;) {
		size_t start = i, end;

		while (i < len && s[i] != ':')
			i++;
		end = i;
		if (end == start)
			return -1;
		if (end == len && last && memchr(s + start, '.', end - start)) {
			if (!check_ipv4(s + start, end - start))
				return -1;
			groups += 2;
		} else {
			if (end - start > 4)
				return -1;
			for (size_t k = start; k < end; k++)
				if (!hex(s[k]))
					return -1;
			groups++;
		}
		if (i == len)
			return groups;
		i++;
		if (i == len)
			return -1;
	}
}

static bool check_ipv6(const char *s, size_t len)
{
	const char *dc = NULL;
	int l, r;

	for (size_t i = 0; i + 1 < len; i++)
		if (s[i] == ':' && s[i + 1] == ':') {
			if (dc)
				return false;
			dc = s + i;
			i++;
		}
	if (!dc)
		return ipv6_side(s, len, true) == 8;
	l = ipv6_side(s, (size_t)(dc - s), false);
	r = ipv6_side(dc + 2, len - (size_t)(dc - s) - 2, true);
	return l >= 0 && r >= 0 && l + r <= 7;
}

/* ---- Host names (RFC 1123, IDNA 2008) ---- */

/* punycode decodes the RFC 3492 string s into out (at most 63 code points);
 * returns the number of code points or -1. */
static int punycode(const char *s, size_t len, uint32_t *out)
{
	enum { BASE = 36, TMIN = 1, TMAX = 26, SKEW = 38, DAMP = 700 };
	uint32_t n = 128, bias = 72, i = 0;
	size_t b = 0, in, count = 0;

	for (size_t k = 0; k < len; k++)
		if (s[k] == '-')
			b = k;
	for (size_t k = 0; k < b; k++) {
		if ((unsigned char)s[k] >= 0x80 || count >= 63)
			return -1;
		out[count++] = (unsigned char)s[k];
	}
	for (in = b > 0 ? b + 1 : 0; in < len;) {
		uint32_t oldi = i, w = 1, t, digitv, delta;

		for (uint32_t k = BASE;; k += BASE) {
			char c;

			if (in >= len)
				return -1;
			c = s[in++];
			if (digit(c))
				digitv = (uint32_t)(c - '0' + 26);
			else if (c >= 'a' && c <= 'z')
				digitv = (uint32_t)(c - 'a');
			else if (c >= 'A' && c <= 'Z')
				digitv = (uint32_t)(c - 'A');
			else
				return -1;
			if (digitv > (UINT32_MAX - i) / w)
				return -1;
			i += digitv * w;
			t = k <= bias ? TMIN : k >= bias + TMAX ? TMAX : k - bias;
			if (digitv < t)
				break;
			if (w > UINT32_MAX / (BASE - t))
				return -1;
			w *= BASE - t;
		}
		/* Adapt the bias (RFC 3492 section 6.1). */
		delta = oldi == 0 ? (i - oldi) / DAMP : (i - oldi) / 2;
		delta += delta / (uint32_t)(count + 1);
		{
			uint32_t k = 0;

			while (delta > ((BASE - TMIN) * TMAX) / 2) {
				delta /= BASE - TMIN;
				k += BASE;
			}
			bias = k + (BASE - TMIN + 1) * delta / (delta + SKEW);
		}
		if (i / (count + 1) > 0x10FFFF - n)
			return -1;
		n += i / (uint32_t)(count + 1);
		i %= (uint32_t)(count + 1);
		if (count >= 63 || n > 0x10FFFF || (n >= 0xD800 && n <= 0xDFFF))
			return -1;
		memmove(out + i + 1, out + i, (count - i) * sizeof(*out));
		out[i++] = n;
		count++;
	}
	return (int)count;
}

static bool in(uint32_t c, uint32_t lo, uint32_t hi)
{
	return c >= lo && c <= hi;
}

/* is_mark approximates Unicode general category M for the scripts host
 * names use; a label may not start with a combining mark. */
static bool is_mark(uint32_t c)
{
	return in(c, 0x0300, 0x036F) || in(c, 0x0483, 0x0489) ||
	       in(c, 0x0591, 0x05BD) || in(c, 0x0610, 0x061A) ||
	       in(c, 0x064B, 0x065F) || c == 0x0670 || in(c, 0x06D6, 0x06DC) ||
	       in(c, 0x06DF, 0x06E4) || in(c, 0x0900, 0x0903) ||
	       in(c, 0x093A, 0x094F) || in(c, 0x0951, 0x0957) ||
	       in(c, 0x0981, 0x0983) || in(c, 0x09BC, 0x09D7) ||
	       in(c, 0x0A01, 0x0A03) || in(c, 0x0A3C, 0x0A51) ||
	       in(c, 0x0B01, 0x0B03) || in(c, 0x0BBE, 0x0BCD) ||
	       in(c, 0x0C00, 0x0C04) || in(c, 0x0C3E, 0x0C56) ||
	       in(c, 0x0D00, 0x0D03) || in(c, 0x0D3E, 0x0D4D) ||
	       in(c, 0x1AB0, 0x1AFF) || in(c, 0x1DC0, 0x1DFF) ||
	       in(c, 0x20D0, 0x20FF) || in(c, 0xFE20, 0xFE2F);
}

static bool is_virama(uint32_t c)
{
	static const uint32_t v[] = {
		0x094D, 0x09CD, 0x0A4D, 0x0ACD, 0x0B4D, 0x0BCD, 0x0C4D, 0x0CCD,
		0x0D3B, 0x0D3C, 0x0D4D, 0x0DCA, 0x0E3A, 0x0F84, 0x1039, 0x103A,
		0x1714, 0x1734, 0x17D2, 0x1A60, 0x1B44, 0x1BAA, 0x1BAB, 0x1BF2,
		0x1BF3, 0x2D7F, 0xA806, 0xA8C4, 0xA953, 0xA9C0, 0xAAF6, 0xABED,
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		if (c == v[i])
			return true;
	return false;
}

/* ulabel_ok applies the IDNA 2008 rules that the decoded label of an
 * "xn--" label must follow: no "--" in positions 3 and 4, no leading mark,
 * no DISALLOWED exceptions, and the CONTEXTJ/CONTEXTO rules of RFC 5892
 * appendix A. */
static bool ulabel_ok(const uint32_t *u, int n)
{
	bool arabic = false, ext_arabic = false, kana = false, non_ascii = false;

	if (n == 0 || (n >= 4 && u[2] == '-' && u[3] == '-') || is_mark(u[0]))
		return false;
	for (int i = 0; i < n; i++) {
		uint32_t c = u[i];

		if (c >= 0x80)
			non_ascii = true;
		if ((c >= 'A' && c <= 'Z') || c == 0x0640 || c == 0x07FA ||
		    c == 0x302E || c == 0x302F || in(c, 0x3031, 0x3035) || c == 0x303B)
			return false;
		if (c < 0x80 && !(alpha((char)c) || digit((char)c) || c == '-'))
			return false;
		if (in(c, 0x0660, 0x0669))
			arabic = true;
		if (in(c, 0x06F0, 0x06F9))
			ext_arabic = true;
		if (in(c, 0x3040, 0x309F) || (in(c, 0x30A0, 0x30FF) && c != 0x30FB) ||
		    in(c, 0x3400, 0x4DBF) || in(c, 0x4E00, 0x9FFF) ||
		    in(c, 0x20000, 0x2A6DF))
			kana = true;
		switch (c) {
		case 0x00B7: /* MIDDLE DOT: only in "l·l" (Catalan) */
			if (i == 0 || i + 1 >= n || u[i - 1] != 'l' || u[i + 1] != 'l')
				return false;
			break;
		case 0x0375: /* GREEK KERAIA: before a Greek letter */
			if (i + 1 >= n || !(in(u[i + 1], 0x0370, 0x03FF) ||
					   in(u[i + 1], 0x1F00, 0x1FFF)))
				return false;
			break;
		case 0x05F3: /* HEBREW GERESH and GERSHAYIM: after Hebrew */
		case 0x05F4:
			if (i == 0 || !in(u[i - 1], 0x0590, 0x05FF))
				return false;
			break;
		case 0x200D: /* ZERO WIDTH JOINER: after a virama */
			if (i == 0 || !is_virama(u[i - 1]))
				return false;
			break;
		default:
			break;
		}
	}
	for (int i = 0; i < n; i++)
		if (u[i] == 0x30FB && !kana)
			return false;
	return non_ascii && !(arabic && ext_arabic);
}

static bool check_label(const char *s, size_t len)
{
	uint32_t u[64];
	int n;

	if (len == 0 || len > 63 || s[0] == '-' || s[len - 1] == '-')
		return false;
	for (size_t i = 0; i < len; i++)
		if (!alpha(s[i]) && !digit(s[i]) && s[i] != '-')
			return false;
	if (len >= 4 && s[2] == '-' && s[3] == '-') {
		if ((s[0] != 'x' && s[0] != 'X') || (s[1] != 'n' && s[1] != 'N'))
			return false;
		n = punycode(s + 4, len - 4, u);
		return n > 0 && ulabel_ok(u, n);
	}
	return true;
}

static bool check_hostname(const char *s, size_t len)
{
	size_t start = 0;

	if (len == 0 || len > 253)
		return false;
	for (size_t i = 0; i <= len; i++) {
		if (i == len || s[i] == '.') {
			if (!check_label(s + start, i - start))
				return false;
			start = i + 1;
		}
	}
	return true;
}

/* ---- E-mail (RFC 5321 Mailbox) ---- */

static bool atext(char c)
{
	return alpha(c) || digit(c) || (c && strchr("!#$%&'*+-/=?^_`{|}~", c));
}

static bool check_email(const char *s, size_t len)
{
	size_t i = 0;
	const char *d;
	size_t dlen;

	if (len > 0 && s[0] == '"') {
		for (i = 1; i < len && s[i] != '"'; i++) {
			if (s[i] == '\\')
				i++;
			else if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7E)
				return false;
		}
		if (i >= len || i == 1)
			return false;
		i++;
	} else {
		bool dot_ok = false;

		for (; i < len && s[i] != '@'; i++) {
			if (s[i] == '.') {
				if (!dot_ok)
					return false;
				dot_ok = false;
			} else if (atext(s[i])) {
				dot_ok = true;
			} else {
				return false;
			}
		}
		if (!dot_ok)
			return false;
	}
	if (i >= len || s[i] != '@')
		return false;
	d = s + i + 1;
	dlen = len - i - 1;
	if (dlen >= 2 && d[0] == '[' && d[dlen - 1] == ']') {
		if (dlen > 7 && strncmp(d + 1, "IPv6:", 5) == 0)
			return check_ipv6(d + 6, dlen - 7);
		return check_ipv4(d + 1, dlen - 2);
	}
	return check_hostname(d, dlen);
}

/* ---- URIs (RFC 3986) ---- */

static bool unreserved(char c)
{
	return alpha(c) || digit(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

static bool sub_delim(char c)
{
	return c && strchr("!$&'()*+,;=", c);
}

/* chars checks that s[0..len) is made of unreserved characters, sub-delims,
 * percent-encodings and the characters in extra. */
static bool chars(const char *s, size_t len, const char *extra)
{
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '%') {
			if (i + 2 >= len + 0 || !hex(s[i + 1]) || !hex(s[i + 2]))
				return false;
			i += 2;
		} else if (!unreserved(s[i]) && !sub_delim(s[i]) &&
			   !(s[i] && strchr(extra, s[i]))) {
			return false;
		}
	}
	return true;
}

static bool check_authority(const char *s, size_t len)
{
	const char *at = memchr(s, '@', len), *host = s, *end = s + len, *colon = NULL;

	if (at) {
		if (memchr(at + 1, '@', (size_t)(end - at - 1)) ||
		    !chars(s, (size_t)(at - s), ":"))
			return false;
		host = at + 1;
	}
	if (host < end && *host == '[') {
		const char *close = memchr(host, ']', (size_t)(end - host));

		if (!close || !check_ipv6(host + 1, (size_t)(close - host - 1)))
			return false;
		if (close + 1 < end) {
			if (close[1] != ':')
				return false;
			colon = close + 1;
		}
	} else {
		for (const char *p = host; p < end; p++)
			if (*p == ':')
				colon = p;
		if (!chars(host, (size_t)((colon ? colon : end) - host), ""))
			return false;
	}
	if (colon)
		for (const char *p = colon + 1; p < end; p++)
			if (!digit(*p))
				return false;
	return true;
}

/* check_uri validates an RFC 3986 URI, or a relative reference when
 * relative is true and there is no scheme. */
static bool check_uri(const char *s, size_t len, bool relative)
{
	size_t i = strcspn(s, ":/?#"), pe, qe;
	bool scheme = false;

	if (memchr(s, '\0', len))
		return false;
	if (i < len && s[i] == ':' && i > 0 && alpha(s[0])) {
		scheme = true;
		for (size_t k = 0; k < i; k++)
			if (!alpha(s[k]) && !digit(s[k]) && !strchr("+-.", s[k]))
				scheme = false;
	}
	if (!scheme && !relative)
		return false;
	if (scheme)
		i++;
	else
		i = 0;
	if (i + 1 < len && s[i] == '/' && s[i + 1] == '/') {
		size_t a = i + 2, ae = a + strcspn(s + a, "/?#");

		if (!check_authority(s + a, ae - a))
			return false;
		i = ae;
	} else if (!scheme) {
		/* path-noscheme: no ':' in the first segment. */
		size_t seg = strcspn(s + i, "/?#");

		if (memchr(s + i, ':', seg))
			return false;
	}
	pe = i + strcspn(s + i, "?#");
	if (!chars(s + i, pe - i, ":@/"))
		return false;
	qe = pe;
	if (pe < len && s[pe] == '?') {
		qe = pe + 1 + strcspn(s + pe + 1, "#");
		if (!chars(s + pe + 1, qe - pe - 1, ":@/?"))
			return false;
	}
	if (qe < len && !chars(s + qe + 1, len - qe - 1, ":@/?"))
		return false;
	return true;
}

static bool check_uuid(const char *s, size_t len)
{
	if (len != 36)
		return false;
	for (size_t i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return false;
		} else if (!hex(s[i])) {
			return false;
		}
	}
	return true;
}

/* check_regex compiles s as "pattern" would, after refusing the PCRE
 * syntax ECMA-262 does not have: "\a", inline flags and comments, and
 * Python's "(?P" groups. */
static bool check_regex(const char *s, size_t len)
{
	char err[128];
	pcre2_code *re;
	bool in_class = false;

	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\\') {
			if (i + 1 < len && s[i + 1] == 'a')
				return false;
			i++;
		} else if (in_class) {
			if (s[i] == ']')
				in_class = false;
		} else if (s[i] == '[') {
			in_class = true;
		} else if (s[i] == '(' && i + 2 < len && s[i + 1] == '?' &&
			   !strchr("<=!:", s[i + 2])) {
			return false;
		}
	}
	re = schema__regex_compile(s, len, err, sizeof(err));
	pcre2_code_free(re);
	return re != NULL;
}

bool schema__format_check(int fmt, const char *s, size_t len)
{
	switch (fmt) {
	case F_DATE_TIME:
		return check_date_time(s, len);
	case F_DATE:
		return check_date(s, len);
	case F_TIME:
		return check_time(s, len);
	case F_DURATION:
		return check_duration(s, len);
	case F_EMAIL:
		return check_email(s, len);
	case F_HOSTNAME:
		return check_hostname(s, len);
	case F_IPV4:
		return check_ipv4(s, len);
	case F_IPV6:
		return check_ipv6(s, len);
	case F_URI:
		return check_uri(s, len, false);
	case F_URI_REFERENCE:
		return check_uri(s, len, true);
	case F_UUID:
		return check_uuid(s, len);
	case F_REGEX:
		return check_regex(s, len);
	default:
		return true;
	}
}

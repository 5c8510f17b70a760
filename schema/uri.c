/*
 * uri: RFC 3986 reference resolution.
 *
 * A URI is split into its five components (scheme, authority, path, query,
 * fragment) by the regular expression of RFC 3986 appendix B, written out by
 * hand; resolution is the algorithm of section 5.2.2, dot segments removed
 * as in section 5.2.4.  Nothing here validates a URI: format "uri" lives in
 * format.c.
 */
#include "schema/uri.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A component is a slice of the parsed string; ptr is NULL when it is absent
 * (which differs from present and empty: "http://x?" has an empty query). */
struct slice {
	const char *ptr;
	size_t len;
};

struct uri {
	struct slice scheme, authority, path, query, fragment;
};

static bool is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static size_t scheme_length(const char *s)
{
	size_t i = 0;

	if (!is_alpha(s[0]))
		return 0;
	while (is_alpha(s[i]) || (s[i] >= '0' && s[i] <= '9') || s[i] == '+' ||
	       s[i] == '-' || s[i] == '.')
		i++;
	return s[i] == ':' ? i : 0;
}

bool schema__uri_is_absolute(const char *s)
{
	return scheme_length(s) > 0;
}

static void parse(const char *s, struct uri *u)
{
	size_t n;

	memset(u, 0, sizeof(*u));
	n = scheme_length(s);
	if (n > 0) {
		u->scheme = (struct slice){ s, n };
		s += n + 1;
	}
	if (s[0] == '/' && s[1] == '/') {
		s += 2;
		n = strcspn(s, "/?#");
		u->authority = (struct slice){ s, n };
		s += n;
	}
	n = strcspn(s, "?#");
	u->path = (struct slice){ s, n };
	s += n;
	if (*s == '?') {
		s++;
		n = strcspn(s, "#");
		u->query = (struct slice){ s, n };
		s += n;
	}
	if (*s == '#') {
		s++;
		u->fragment = (struct slice){ s, strlen(s) };
	}
}

/* remove_dots rewrites the path in buf (NUL-terminated) in place, as RFC 3986
 * section 5.2.4 does; the output is never longer than the input. */
static void remove_dots(char *buf)
{
	char *in = buf, *out = buf;

	while (*in) {
		if (strncmp(in, "../", 3) == 0) {
			in += 3;
		} else if (strncmp(in, "./", 2) == 0) {
			in += 2;
		} else if (strncmp(in, "/./", 3) == 0) {
			in += 2;
		} else if (strcmp(in, "/.") == 0) {
			in[1] = '\0';
		} else if (strncmp(in, "/../", 4) == 0 || strcmp(in, "/..") == 0) {
			/* Replace the prefix with "/" and drop the last
			 * segment already written, with its '/'. */
			if (in[3] == '/') {
				in += 3;
			} else {
				in += 2;
				*in = '/';
			}
			while (out > buf && *--out != '/')
				;
		} else if (strcmp(in, ".") == 0 || strcmp(in, "..") == 0) {
			in += strlen(in);
		} else {
			/* Move the first segment (with its leading '/', if any). */
			if (*in == '/')
				*out++ = *in++;
			while (*in && *in != '/')
				*out++ = *in++;
		}
	}
	*out = '\0';
}

/* A small growable string; an allocation failure sets failed and later
 * appends are no-ops, so callers check once at the end. */
struct buf {
	char *data;
	size_t len, cap;
	bool failed;
};

static void put(struct buf *b, const char *s, size_t n)
{
	if (b->failed)
		return;
	if (n > SIZE_MAX / 4 || b->len > SIZE_MAX / 4) {
		b->failed = true;
		return;
	}
	if (b->len + n + 1 > b->cap) {
		size_t cap = (b->len + n + 1) * 2;
		char *p = realloc(b->data, cap);

		if (!p) {
			b->failed = true;
			return;
		}
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

static void put_slice(struct buf *b, const char *prefix, struct slice s)
{
	if (s.ptr) {
		put(b, prefix, strlen(prefix));
		put(b, s.ptr, s.len);
	}
}

/* path_with_dots_removed appends path to b with its dot segments removed. */
static void put_path(struct buf *b, const char *path, size_t n)
{
	char *tmp = malloc(n + 1);

	if (!tmp) {
		b->failed = true;
		return;
	}
	memcpy(tmp, path, n);
	tmp[n] = '\0';
	remove_dots(tmp);
	put(b, tmp, strlen(tmp));
	free(tmp);
}

char *schema__uri_resolve(const char *base, const char *ref)
{
	struct uri b, r, t;
	struct buf out = { 0 };
	struct buf merged = { 0 };

	parse(base ? base : "", &b);
	parse(ref, &r);
	memset(&t, 0, sizeof(t));

	if (r.scheme.ptr) {
		t = r;
	} else {
		t.scheme = b.scheme;
		if (r.authority.ptr) {
			t.authority = r.authority;
			t.path = r.path;
			t.query = r.query;
		} else {
			t.authority = b.authority;
			if (r.path.len == 0) {
				t.path = b.path;
				t.query = r.query.ptr ? r.query : b.query;
			} else {
				t.query = r.query;
				if (r.path.ptr[0] == '/') {
					t.path = r.path;
				} else {
					/* Merge (5.2.3): the base path up to its
					 * last '/', then the reference path. */
					size_t keep = 0;

					for (size_t i = 0; i < b.path.len; i++)
						if (b.path.ptr[i] == '/')
							keep = i + 1;
					if (b.authority.ptr && b.path.len == 0)
						put(&merged, "/", 1);
					else if (keep > 0)
						put(&merged, b.path.ptr, keep);
					put(&merged, r.path.ptr, r.path.len);
					if (merged.failed) {
						free(merged.data);
						return NULL;
					}
					t.path = (struct slice){
						merged.data ? merged.data : "",
						merged.len };
				}
			}
		}
	}
	t.fragment = r.fragment;

	put(&out, "", 0);
	if (t.scheme.ptr) {
		put(&out, t.scheme.ptr, t.scheme.len);
		put(&out, ":", 1);
	}
	put_slice(&out, "//", t.authority);
	if (t.path.ptr)
		put_path(&out, t.path.ptr, t.path.len);
	put_slice(&out, "?", t.query);
	if (t.fragment.ptr && t.fragment.len > 0)
		put_slice(&out, "#", t.fragment);
	free(merged.data);
	if (out.failed) {
		free(out.data);
		return NULL;
	}
	return out.data;
}

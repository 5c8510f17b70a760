/*
 * mcp_content.c: a tool's results as an MCP client is shown them
 * (mcp_content.h, docs/MCP.md "Results").
 *
 * The model output shapes are those of the Vercel AI SDK's
 * ToolResultOutput (AI SDK 5: LanguageModelV2ToolResultOutput, with the
 * content parts "text" and "media"; AI SDK 6: V3, which added
 * "execution-denied" and the parts "file-data", "file-url", "file-id",
 * "image-data", "image-url", "image-file-id" and "custom"; AI SDK 7: the
 * part "file" with tagged data and the "*-reference" parts), which is also
 * what Mastra's toModelOutput returns. Each part becomes the MCP block
 * that carries the same thing:
 *
 *	text                          text
 *	base64 data (media, *-data,   image for an image type, audio for
 *	  file {data}, a data: URL)     an audio type, else an embedded
 *	                                resource (blob)
 *	file {text}                   an embedded resource (text)
 *	a URL (*-url, file {url})     resource_link
 *	provider file ids and         a text that says what it was: the
 *	  references, custom parts      client cannot fetch them
 *
 * Nothing here fails on a strange value: a part berth does not know, or
 * one that breaks its own type's rules (data that is not base64, a text
 * that is not a string), becomes a text block that says so and quotes it,
 * so that a tool's mistake reaches the model as words rather than as a
 * result the client refuses.
 */
#include "api/mcp_content.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/jshort.h"

/* cut shortens the malloc'd string s in place to at most max bytes, on a
 * UTF-8 character boundary, ending it with "…" when it was longer. */
static char *cut(char *s, size_t max)
{
	if (s && max >= 4 && strlen(s) > max) {
		/* Leave room for the three bytes of the ellipsis and the
		 * NUL. */
		size_t n = max - 3;

		while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
			n--;
		memcpy(s + n, "\xE2\x80\xA6", 4);
	}
	return s;
}

char *api_mcp_dumps(const json_t *v, size_t max)
{
	return cut(v ? berth_json_short(v, JSON_COMPACT) : strdup("null"), max);
}

static json_t *text_block(const char *s)
{
	return json_pack("{s:s, s:s}", "type", "text", "text", s ? s : "");
}

/* json_text_block returns a text block holding v as JSON (whole: it is
 * meant for the model, which asked for exactly this). */
static json_t *json_text_block(const json_t *v)
{
	char *s = api_mcp_dumps(v, SIZE_MAX);
	json_t *b = s ? text_block(s) : NULL;

	free(s);
	return b;
}

/* note_block returns a text block "[what: JSON of v]", the quote cut, for
 * a part MCP cannot carry or a part that breaks its own rules. */
static json_t *note_block(const char *what, const json_t *v)
{
	char *q = v ? api_mcp_dumps(v, API_MCP_QUOTE_MAX) : NULL;
	char *s = NULL;
	json_t *b = NULL;

	if (asprintf(&s, "[%s%s%s]", what, q ? ": " : "", q ? q : "") >= 0)
		b = text_block(s);
	free(s);
	free(q);
	return b;
}

static const char *str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* is_base64 is true for standard base64 (RFC 4648 section 4, padded), the
 * encoding MCP's image, audio and blob fields require. */
static bool is_base64(const char *s, size_t n)
{
	size_t pad = 0;

	if (n % 4 != 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '=') {
			if (i + 2 < n || ++pad > 2)
				return false;
		} else if (pad || !(isalnum(c) || c == '+' || c == '/')) {
			return false;
		}
	}
	return true;
}

static bool has_prefix(const char *s, const char *p)
{
	return s && strncasecmp(s, p, strlen(p)) == 0;
}

/* resource_uri returns berth://jobs/JOB/modelOutput/N, with the file name
 * percent-encoded as a last segment when there is one (malloc'd). */
static char *resource_uri(const char *job_id, size_t n, const char *filename)
{
	size_t len = 0;
	char *s = NULL;
	FILE *f = open_memstream(&s, &len);

	if (!f)
		return NULL;
	fprintf(f, "berth://jobs/%s/modelOutput/%zu", job_id ? job_id : "-", n);
	if (filename && *filename) {
		fputc('/', f);
		for (const unsigned char *p = (const unsigned char *)filename;
		     *p; p++) {
			if (isalnum(*p) || strchr("-._~", *p))
				fputc(*p, f);
			else
				fprintf(f, "%%%02X", *p);
		}
	}
	if (fclose(f) != 0) {
		free(s);
		return NULL;
	}
	return s;
}

/* data_block returns the block for base64 data of media type mime. */
static json_t *data_block(const char *data, size_t len, const char *mime,
			  const char *filename, const char *job_id, size_t n,
			  const json_t *part)
{
	json_t *b, *d;
	char *uri;

	if (!mime || !*mime)
		return note_block("binary content without a mediaType, left "
				  "out", part);
	if (!is_base64(data, len))
		return note_block("binary content that is not base64, left out",
				  part);
	d = json_stringn(data, len);
	if (!d)
		return NULL;
	/* The AI SDK allows a bare top-level type ("image") for a media
	 * type; MCP's blocks take it as it is. */
	if (has_prefix(mime, "image/") || strcasecmp(mime, "image") == 0)
		return json_pack("{s:s, s:o, s:s}", "type", "image", "data", d,
				 "mimeType", mime);
	if (has_prefix(mime, "audio/") || strcasecmp(mime, "audio") == 0)
		return json_pack("{s:s, s:o, s:s}", "type", "audio", "data", d,
				 "mimeType", mime);
	uri = resource_uri(job_id, n, filename);
	b = uri ? json_pack("{s:s, s:{s:s, s:s, s:o}}", "type", "resource",
			    "resource", "uri", uri, "mimeType", mime, "blob", d)
		: (json_decref(d), NULL);
	free(uri);
	return b;
}

/* text_resource returns an embedded resource holding text. */
static json_t *text_resource(const char *text, size_t len, const char *mime,
			     const char *filename, const char *job_id,
			     size_t n, const json_t *part)
{
	json_t *t = json_stringn(text, len), *b;
	char *uri;

	if (!t) /* not UTF-8 */
		return note_block("text content that is not UTF-8, left out",
				  part);
	uri = resource_uri(job_id, n, filename);
	b = uri ? json_pack("{s:s, s:{s:s, s:s, s:o}}", "type", "resource",
			    "resource", "uri", uri, "mimeType",
			    mime && *mime ? mime : "text/plain", "text", t)
		: (json_decref(t), NULL);
	free(uri);
	return b;
}

static int hexval(int c)
{
	return isdigit(c) ? c - '0' : isxdigit(c) ? tolower(c) - 'a' + 10 : -1;
}

/* data_url_block returns the block for a data: URL (RFC 2397): base64
 * data as data_block, anything else, percent-decoded, as text. */
static json_t *data_url_block(const char *url, const char *filename,
			      const char *job_id, size_t n, const json_t *part)
{
	const char *comma = strchr(url, ','), *head = url + 5;
	size_t hlen, dlen;
	bool b64 = false;
	char mime[128], *text, *o;
	json_t *b;

	if (!comma)
		return note_block("a data: URL without data, left out", part);
	hlen = (size_t)(comma - head);
	if (hlen >= 7 && strncasecmp(comma - 7, ";base64", 7) == 0) {
		b64 = true;
		hlen -= 7;
	}
	if (hlen >= sizeof mime)
		hlen = sizeof mime - 1;
	memcpy(mime, head, hlen);
	mime[hlen] = '\0';
	if (!*mime)
		snprintf(mime, sizeof mime, "text/plain");
	if (b64)
		return data_block(comma + 1, strlen(comma + 1), mime, filename,
				  job_id, n, part);
	dlen = strlen(comma + 1);
	if (!(text = malloc(dlen + 1)))
		return NULL;
	o = text;
	for (const char *p = comma + 1; *p; p++) {
		if (p[0] == '%' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
			*o++ = (char)(hexval(p[1]) * 16 + hexval(p[2]));
			p += 2;
		} else {
			*o++ = *p;
		}
	}
	b = text_resource(text, (size_t)(o - text), mime, filename, job_id, n,
			  part);
	free(text);
	return b;
}

/* link_block returns the block for a URL: a data: URL is its data, any
 * other a resource_link named after the file (or the URL's last path
 * segment), or a text for a client that knows no resource_link. */
static json_t *link_block(const char *url, const char *mime,
			  const char *filename, const char *job_id, size_t n,
			  bool links, const json_t *part)
{
	const char *name = filename, *end;
	char *seg = NULL, *s = NULL;
	json_t *b;

	if (!url || !*url)
		return note_block("a link without a url, left out", part);
	if (has_prefix(url, "data:"))
		return data_url_block(url, filename, job_id, n, part);
	if (!links) {
		b = asprintf(&s, "[link: %s]", url) < 0 ? NULL : text_block(s);
		free(s);
		return b;
	}
	if (!name || !*name) {
		end = url + strcspn(url, "?#");
		while (end > url && end[-1] == '/')
			end--;
		for (name = end; name > url && name[-1] != '/'; name--)
			;
		seg = name < end ? strndup(name, (size_t)(end - name)) : NULL;
		name = seg ? seg : url;
	}
	b = json_pack("{s:s, s:s, s:s}", "type", "resource_link", "uri", url,
		      "name", name);
	if (b && mime && *mime)
		json_object_set_new(b, "mimeType", json_string(mime));
	free(seg);
	return b;
}

/* file_block returns the block for an AI SDK 7 "file" part, whose data is
 * tagged: {type: "data" | "url" | "text" | "reference"}. */
static json_t *file_block(const json_t *part, const char *job_id, size_t n,
			  bool links)
{
	const json_t *data = json_object_get(part, "data");
	const char *mime = str(part, "mediaType");
	const char *name = str(part, "filename");
	const char *tag = str(data, "type");
	const char *s;

	if (json_is_string(data))
		return data_block(json_string_value(data),
				  json_string_length(data), mime, name, job_id,
				  n, part);
	if (tag && strcmp(tag, "data") == 0 &&
	    json_is_string(json_object_get(data, "data"))) {
		s = str(data, "data");
		return data_block(s, strlen(s), mime, name, job_id, n, part);
	}
	if (tag && strcmp(tag, "url") == 0)
		return link_block(str(data, "url"), mime, name, job_id, n,
				  links, part);
	if (tag && strcmp(tag, "text") == 0 && (s = str(data, "text")))
		return text_resource(s, strlen(s), mime, name, job_id, n, part);
	if (tag && strcmp(tag, "reference") == 0)
		return note_block("a file held by a model provider, which MCP "
				  "clients cannot fetch", data);
	return note_block("a file part that is not of the AI SDK's shapes",
			  part);
}

/* part_block returns the block for one content part (the n-th). */
static json_t *part_block(const json_t *part, const char *job_id, size_t n,
			  bool links)
{
	const char *type = str(part, "type");
	const char *mime = str(part, "mediaType");
	const json_t *data = json_object_get(part, "data");
	char what[160];

	if (!type)
		return note_block("a content part without a type", part);
	if (strcmp(type, "text") == 0)
		return str(part, "text") ? text_block(str(part, "text"))
					 : note_block("a text part without text",
						      part);
	if (strcmp(type, "media") == 0 || strcmp(type, "image-data") == 0 ||
	    strcmp(type, "file-data") == 0) {
		if (!json_is_string(data))
			return note_block("a data part without data", part);
		return data_block(json_string_value(data),
				  json_string_length(data), mime,
				  str(part, "filename"), job_id, n, part);
	}
	if (strcmp(type, "file") == 0)
		return file_block(part, job_id, n, links);
	if (strcmp(type, "image-url") == 0 || strcmp(type, "file-url") == 0)
		return link_block(str(part, "url"), mime, NULL, job_id, n,
				  links, part);
	if (strcmp(type, "file-id") == 0 || strcmp(type, "image-file-id") == 0 ||
	    strcmp(type, "file-reference") == 0 ||
	    strcmp(type, "image-file-reference") == 0) {
		snprintf(what, sizeof what, "%.32s: a file held by a model "
			 "provider, which MCP clients cannot fetch", type);
		return note_block(what, part);
	}
	if (strcmp(type, "custom") == 0)
		return note_block("custom: a part for a model provider only, "
				  "which MCP has no block for", part);
	snprintf(what, sizeof what, "%.32s: a content part MCP has no block for",
		 type);
	return note_block(what, part);
}

/* error_kind returns the type of an AI SDK result that says the call
 * failed, or NULL. */
static const char *error_kind(const json_t *mo)
{
	const char *type = str(mo, "type");

	if (type && (strcmp(type, "error-text") == 0 ||
		     strcmp(type, "error-json") == 0 ||
		     strcmp(type, "execution-denied") == 0))
		return type;
	return NULL;
}

bool api_mcp_says_failed(const json_t *mo)
{
	return error_kind(mo) != NULL;
}

char *api_mcp_error_text(const json_t *mo)
{
	const char *type = error_kind(mo);
	const json_t *v = json_object_get(mo, "value");
	const char *reason = str(mo, "reason");
	char *s = NULL;

	if (!type)
		return NULL;
	if (strcmp(type, "execution-denied") == 0) {
		if (asprintf(&s, "the tool's execution was denied%s%s",
			     reason ? ": " : "", reason ? reason : "") < 0)
			s = NULL;
		return s;
	}
	if (strcmp(type, "error-text") == 0 && json_is_string(v))
		return cut(strdup(json_string_value(v)), API_MCP_QUOTE_MAX);
	return api_mcp_dumps(v, API_MCP_QUOTE_MAX);
}

json_t *api_mcp_content(const json_t *mo, const char *job_id, bool links,
			bool *is_error)
{
	const char *type = str(mo, "type");
	const json_t *v = json_object_get(mo, "value");
	json_t *out, *b, *part;
	size_t i;
	char *s;

	*is_error = error_kind(mo) != NULL;
	if (json_is_string(mo))
		return json_pack("[o]", text_block(json_string_value(mo)));
	if (!type || (strcmp(type, "content") == 0 && !json_is_array(v)))
		return json_pack("[o]", json_text_block(mo));
	if (strcmp(type, "text") == 0 || strcmp(type, "error-text") == 0)
		return json_pack("[o]", json_is_string(v)
						? text_block(json_string_value(v))
						: json_text_block(v));
	if (strcmp(type, "json") == 0 || strcmp(type, "error-json") == 0)
		return json_pack("[o]", json_text_block(v));
	if (strcmp(type, "execution-denied") == 0) {
		s = api_mcp_error_text(mo);
		out = s ? json_pack("[o]", text_block(s)) : NULL;
		free(s);
		return out;
	}
	if (strcmp(type, "content") != 0)
		return json_pack("[o]", json_text_block(mo));
	out = json_array();
	json_array_foreach(v, i, part) {
		b = json_is_object(part)
			    ? part_block(part, job_id, i, links)
			    : note_block("a content part that is not an object",
					 part);
		if (!b || json_array_append_new(out, b) < 0) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

bool api_mcp_object_schema(const json_t *schema)
{
	const char *type = str(schema, "type");

	return json_is_object(schema) && type && strcmp(type, "object") == 0;
}

/* Keywords whose value maps names to schemas, and keywords whose value is
 * data rather than a schema (a "$ref" in there is not a reference). */
static const char *const schema_maps[] = {
	"properties", "patternProperties", "dependentSchemas", "$defs",
	"definitions", NULL,
};
static const char *const data_keywords[] = {
	"$ref", "const", "enum", "default", "examples", NULL,
};

static bool is_keyword(const char *key, const char *const *list)
{
	for (; *list; list++)
		if (strcmp(*list, key) == 0)
			return true;
	return false;
}

/* rewrite_refs makes the local references of s (a schema now nested at
 * #/properties/result) point there again. References into $defs and
 * definitions stay: those moved to the new root. A subschema with its own
 * $id resolves its references against itself and is left alone. */
static void rewrite_refs(json_t *s, bool top)
{
	const char *key, *ref;
	json_t *v;
	size_t i;
	char *moved;

	if (json_is_array(s)) {
		json_array_foreach(s, i, v)
			rewrite_refs(v, false);
		return;
	}
	if (!json_is_object(s) || (!top && json_object_get(s, "$id")))
		return;
	ref = str(s, "$ref");
	if (ref && ref[0] == '#' && (ref[1] == '\0' || ref[1] == '/') &&
	    !has_prefix(ref, "#/$defs/") && !has_prefix(ref, "#/definitions/") &&
	    asprintf(&moved, "#/properties/result%s", ref + 1) >= 0) {
		json_object_set_new(s, "$ref", json_string(moved));
		free(moved);
	}
	json_object_foreach(s, key, v) {
		const char *name;
		json_t *sub;

		if (is_keyword(key, schema_maps)) {
			json_object_foreach(v, name, sub)
				rewrite_refs(sub, false);
		} else if (!is_keyword(key, data_keywords)) {
			rewrite_refs(v, false);
		}
	}
}

json_t *api_mcp_output_schema(const json_t *schema)
{
	static const char *const hoist[] = {"$defs", "definitions"};
	json_t *inner, *out, *v, *sub;
	const char *name;

	if (api_mcp_object_schema(schema))
		return json_deep_copy(schema);
	inner = schema ? json_deep_copy(schema) : json_true();
	out = json_pack("{s:s, s:{}, s:[s], s:b}", "type", "object",
			"properties", "required", "result",
			"additionalProperties", 0);
	if (!inner || !out) {
		json_decref(inner);
		json_decref(out);
		return NULL;
	}
	if (json_is_object(inner) && (v = json_object_get(inner, "$schema"))) {
		json_object_set(out, "$schema", v);
		if (!json_object_get(inner, "$id"))
			json_object_del(inner, "$schema");
	}
	if (json_is_object(inner) && !json_object_get(inner, "$id")) {
		for (size_t i = 0; i < sizeof hoist / sizeof hoist[0]; i++) {
			v = json_object_get(inner, hoist[i]);
			if (!v)
				continue;
			json_object_set(out, hoist[i], v);
			json_object_del(inner, hoist[i]);
			/* A definition may refer to the root (a tree). */
			json_object_foreach(v, name, sub)
				rewrite_refs(sub, false);
		}
		rewrite_refs(inner, true);
	}
	json_object_set_new(json_object_get(out, "properties"), "result", inner);
	return out;
}

json_t *api_mcp_listed_schema(json_t *schema)
{
	json_t *props = json_object_get(schema, "properties"), *out, *p, *v;
	const char *name;
	bool any = false;

	if (json_is_object(props))
		json_object_foreach(props, name, v)
			any = any || json_is_boolean(v);
	if (!any)
		return json_incref(schema);
	out = json_copy(schema);
	p = json_copy(props);
	if (!out || !p) {
		json_decref(out);
		json_decref(p);
		return NULL;
	}
	/* Replacing the value of a key the loop is at leaves the loop's
	 * place as it was. */
	json_object_foreach(p, name, v) {
		if (json_is_true(v))
			json_object_set_new(p, name, json_object());
		else if (json_is_false(v))
			json_object_set_new(p, name, json_pack("{s:{}}", "not"));
	}
	json_object_set_new(out, "properties", p);
	return out;
}

json_t *api_mcp_structured(const json_t *v, bool wrap)
{
	if (json_is_object(v) && !wrap)
		return json_incref((json_t *)v);
	return json_pack("{s:O}", "result", v ? v : json_null());
}

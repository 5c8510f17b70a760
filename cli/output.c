/*
 * output.c: how berth shows jobs, tools, events and logs to a person
 * (cli.h). Machine output (--json) is plain JSON and is printed by the
 * commands themselves with cli_print_json.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/jshort.h"

/* Payloads wider than this many columns are cut in tables (not in
 * `berth get`). */
#define CELL_MAX 60
#define BAR_WIDTH 30

/* ---- text for a terminal ----------------------------------------------- */

/* utf8_next decodes the character at s: its code point in *cp, and its
 * length in bytes. A byte that begins no well-formed character is taken
 * alone, as U+FFFD. */
static size_t utf8_next(const unsigned char *s, uint32_t *cp)
{
	size_t n = *s < 0x80 ? 1 : (*s & 0xe0) == 0xc0 ? 2
		 : (*s & 0xf0) == 0xe0 ? 3 : (*s & 0xf8) == 0xf0 ? 4 : 0;
	uint32_t c = n == 1 ? *s : n == 2 ? *s & 0x1fu : n == 3 ? *s & 0x0fu
		   : *s & 0x07u;

	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80) {
			n = 0;
			break;
		}
		c = c << 6 | (s[i] & 0x3fu);
	}
	if (n == 0) {
		*cp = 0xfffd;
		return 1;
	}
	*cp = c;
	return n;
}

/* char_width is how many columns a terminal gives cp: 0 for a combining
 * mark or a zero-width character, 2 for an East Asian wide or full-width
 * one (the ranges of Markus Kuhn's wcwidth, in short), else 1. The C
 * library's wcwidth would need a UTF-8 locale, which berth cannot count
 * on where it runs. */
static int char_width(uint32_t cp)
{
	static const struct {
		uint32_t lo, hi;
	} zero[] = {
		{0x0300, 0x036f}, {0x0483, 0x0489}, {0x0591, 0x05bd},
		{0x0610, 0x061a}, {0x064b, 0x065f}, {0x1ab0, 0x1aff},
		{0x1dc0, 0x1dff}, {0x200b, 0x200f}, {0x202a, 0x202e},
		{0x2060, 0x2064}, {0x20d0, 0x20ff}, {0xfe00, 0xfe0f},
		{0xfe20, 0xfe2f}, {0xfeff, 0xfeff},
	}, wide[] = {
		{0x1100, 0x115f}, {0x2e80, 0x303e}, {0x3041, 0x33ff},
		{0x3400, 0x4dbf}, {0x4e00, 0x9fff}, {0xa000, 0xa4cf},
		{0xac00, 0xd7a3}, {0xf900, 0xfaff}, {0xfe30, 0xfe4f},
		{0xff00, 0xff60}, {0xffe0, 0xffe6}, {0x1f300, 0x1f64f},
		{0x1f900, 0x1f9ff}, {0x20000, 0x2fffd}, {0x30000, 0x3fffd},
	};

	for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
		if (cp >= zero[i].lo && cp <= zero[i].hi)
			return 0;
	for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
		if (cp >= wide[i].lo && cp <= wide[i].hi)
			return 2;
	return 1;
}

/* text_width is how many columns s takes on a terminal. */
static size_t text_width(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t w = 0;
	uint32_t cp;

	while (p && *p) {
		p += utf8_next(p, &cp);
		w += (size_t)char_width(cp);
	}
	return w;
}

/* is_control is true for a C0 control, DEL or a C1 control. */
static bool is_control(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
}

/* clean returns s (NULL: "") with its control characters escaped as JSON
 * escapes them (\n, \t, \u001b; DEL and the C1 controls \u007f to
 * \u009f), malloc'd. Jobs hold text that whoever submitted them, or
 * their tool, chose (a run id, an error message, output): escaped, it
 * cannot move the cursor, change the terminal or start a line that
 * looks like one of berth's. */
static char *clean(const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t len = strlen((const char *)p);
	char *out = malloc(len * 6 + 1), *o = out;
	uint32_t cp;

	if (!out)
		return NULL;
	while (*p) {
		size_t n = utf8_next(p, &cp);

		if (n == 1 && *p >= 0x80) {
			/* A byte of no character, which a terminal that is
			 * not in UTF-8 could read as a C1 control. */
			o += sprintf(o, "\\x%02x", *p);
		} else if (!is_control(cp)) {
			memcpy(o, p, n);
			o += n;
		} else if (cp == '\n' || cp == '\t' || cp == '\r') {
			*o++ = '\\';
			*o++ = cp == '\n' ? 'n' : cp == '\t' ? 't' : 'r';
		} else {
			o += sprintf(o, "\\u%04x", (unsigned)cp);
		}
		p += n;
	}
	*o = '\0';
	return out;
}

/* put writes s to out with its control characters escaped (clean). */
static void put(FILE *out, const char *s)
{
	char *c = clean(s);

	fputs(c ? c : "", out);
	free(c);
}

void cli_put(FILE *out, const char *s)
{
	put(out, s);
}

/* put_padded writes s as put does, then blanks up to width columns. */
static void put_padded(FILE *out, const char *s, size_t width)
{
	char *c = clean(s);
	size_t w = text_width(c);

	fputs(c ? c : "", out);
	for (; w < width; w++)
		fputc(' ', out);
	free(c);
}

/* cut returns s (malloc'd, or NULL) cut to at most max columns at a
 * character, ending in "..." when it was cut; it may move s. */
static char *cut(char *s, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t w = 0;
	char *t;

	if (!s || text_width(s) <= max)
		return s;
	for (;;) {
		uint32_t cp;
		size_t n = utf8_next(p, &cp);

		if (w + (size_t)char_width(cp) > max - 3)
			break;
		w += (size_t)char_width(cp);
		p += n;
	}
	t = realloc(s, (size_t)((const char *)p - s) + 4);
	if (!t) {
		free(s);
		return NULL;
	}
	strcpy(t + ((const char *)p - s), "...");
	return t;
}

void cli_print_json(FILE *out, const json_t *v, bool compact)
{
	char *s = berth_json_short(v, compact ? JSON_COMPACT : JSON_INDENT(2));

	if (s) {
		fputs(s, out);
		fputc('\n', out);
		free(s);
	}
}

static const char *str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "";
}

/* value_text returns a malloc'd one-line text of v for a person: a
 * string as itself, anything else as compact JSON, its control characters
 * escaped (clean). */
static char *value_text(const json_t *v)
{
	char *s, *c;

	if (json_is_string(v))
		return clean(json_string_value(v));
	s = berth_json_short(v, JSON_COMPACT);
	c = s ? clean(s) : NULL;
	free(s);
	return c;
}

static void field(FILE *out, const char *label, const json_t *v)
{
	char *s;

	if (!v || json_is_null(v))
		return;
	s = value_text(v);
	if (s)
		fprintf(out, "%-16s %s\n", label, s);
	free(s);
}

/* print_who prints "LABEL  NAME (VIA, CLIENT) at TIME: WORDS", each
 * part when there is one: who did something and how. */
static void print_who(FILE *out, const char *label, const char *name,
		      const char *via, const char *at, const char *words)
{
	if (!name || !*name)
		return;
	fprintf(out, "%-16s ", label);
	put(out, name);
	if (via && *via) {
		fputs(" (", out);
		put(out, via);
		fputc(')', out);
	}
	if (at && *at) {
		fputs(" at ", out);
		put(out, at);
	}
	if (words && *words) {
		fputs(": ", out);
		put(out, words);
	}
	fputc('\n', out);
}

/* print_approval prints a job's approval: whether one is needed and how
 * many, each approval with who gave it, how and when, and the decision
 * with who made it (docs/API.md). */
static void print_approval(FILE *out, const json_t *a)
{
	const json_t *approvals = json_object_get(a, "approvals");
	const json_t *by = json_object_get(a, "decidedBy");
	json_int_t quorum = json_integer_value(json_object_get(a, "quorum"));
	const char *decision = str(a, "decision");
	const json_t *e;
	size_t i;

	if (!json_is_true(json_object_get(a, "required"))) {
		fprintf(out, "%-16s %s\n", "approval", "not required");
		return;
	}
	if (quorum > 1)
		fprintf(out, "%-16s required from %lld people; %zu so far\n",
			"approval", (long long)quorum, json_array_size(approvals));
	else
		fprintf(out, "%-16s required\n", "approval");
	json_array_foreach(approvals, i, e)
		print_who(out, "approved by", str(e, "by"), str(e, "via"),
			  str(e, "at"), str(e, "note"));
	if (!*decision)
		return;
	print_who(out, strcmp(decision, "declined") == 0 ? "declined by"
							 : "decided by",
		  str(by, "name"), str(by, "via"), str(a, "decidedAt"),
		  strcmp(decision, "declined") == 0 ? str(a, "reason") : NULL);
}

void cli_print_job(FILE *out, const json_t *job)
{
	static const struct {
		const char *key, *label;
	} fields[] = {
		{"id", "id"},
		{"tool", "tool"},
		{"status", "status"},
		{"runId", "run"},
		{"toolCallId", "tool call"},
		{"idempotencyKey", "idempotency key"},
		{"retryOf", "retry of"},
		{"priority", "priority"},
		{"attempt", "attempt"},
		{"maxRetries", "max retries"},
		{"timeoutMs", "timeout ms"},
		{"createdAt", "created"},
		{"runAt", "run at"},
		{"startedAt", "started"},
		{"finishedAt", "finished"},
		{"updatedAt", "updated"},
		{"expiresAt", "expires"},
		{"submittedBy", "submitted by"},
		{"approval", "approval"},
		{"progress", "progress"},
		{"input", "input"},
		{"requestContext", "request context"},
		{"metadata", "metadata"},
		{"suspendPayload", "suspended with"},
		{"resumeData", "resumed with"},
		{"checkpoint", "checkpoint"},
		{"output", "output"},
		{"modelOutput", "model output"},
	};
	const json_t *err = json_object_get(job, "error");

	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
		char *text;

		if (strcmp(fields[i].key, "submittedBy") == 0) {
			print_who(out, fields[i].label, str(job, "submittedBy"),
				  str(job, "submittedVia"), NULL, NULL);
			continue;
		}
		if (strcmp(fields[i].key, "approval") == 0) {
			print_approval(out, json_object_get(job, "approval"));
			continue;
		}
		if (strcmp(fields[i].key, "progress") != 0) {
			field(out, fields[i].label,
			      json_object_get(job, fields[i].key));
			continue;
		}
		text = json_object_get(job, "progress") ? cli_progress_text(job)
							: NULL;
		if (text && *text) {
			fprintf(out, "%-16s ", fields[i].label);
			put(out, text);
			fputc('\n', out);
		}
		free(text);
	}
	if (json_is_true(json_object_get(job, "toolMissing")))
		fprintf(out, "%-16s %s\n", "waits for",
			"its tool, which berthd does not have now (it runs "
			"when the tool comes back)");
	if (json_is_object(err)) {
		fprintf(out, "%-16s ", "error");
		put(out, str(err, "message"));
		if (json_object_get(err, "code")) {
			char *code = value_text(json_object_get(err, "code"));

			fprintf(out, " (%s)", code ? code : "");
			free(code);
		}
		fputc('\n', out);
		field(out, "error data", json_object_get(err, "data"));
	}
}

/* A table of text cells, printed with columns as wide as their widest
 * cell. */
struct table {
	size_t ncols, nrows;
	char **cells; /* nrows * ncols, malloc'd strings */
};

static void table_add(struct table *t, char **row)
{
	char **cells = realloc(t->cells, (t->nrows + 1) * t->ncols * sizeof *cells);

	if (!cells) {
		for (size_t i = 0; i < t->ncols; i++)
			free(row[i]);
		return;
	}
	t->cells = cells;
	/* Each cell on one line, cut at a character to CELL_MAX columns. */
	for (size_t i = 0; i < t->ncols; i++) {
		char *s = clean(row[i]);

		free(row[i]);
		t->cells[t->nrows * t->ncols + i] = cut(s, CELL_MAX);
	}
	t->nrows++;
}

static void table_print(FILE *out, struct table *t)
{
	size_t width[16] = {0};

	for (size_t r = 0; r < t->nrows; r++)
		for (size_t c = 0; c < t->ncols; c++) {
			const char *s = t->cells[r * t->ncols + c];
			size_t n = s ? text_width(s) : 0;

			if (n > width[c])
				width[c] = n;
		}
	for (size_t r = 0; r < t->nrows; r++) {
		size_t last = t->ncols;

		/* Empty cells at the end of a row leave no blanks behind. */
		while (last > 1 && !(t->cells[r * t->ncols + last - 1] &&
				     *t->cells[r * t->ncols + last - 1]))
			last--;
		for (size_t c = 0; c < last; c++) {
			const char *s = t->cells[r * t->ncols + c];

			/* Padded by the columns the text takes, which a
			 * wide or a many-byte character makes other than
			 * its bytes. */
			if (c + 1 == last) {
				fputs(s ? s : "", out);
			} else {
				put_padded(out, s, width[c]);
				fputs("  ", out);
			}
		}
		fputc('\n', out);
	}
	for (size_t i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	t->cells = NULL;
	t->nrows = 0;
}

static char *dup_str(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	return v ? value_text(v) : strdup("");
}

/* progress_percent returns "NN%" (malloc'd) for a job's progress, "100%"
 * once it completed (a tool need not report its last step), "N" without a
 * total, or "". */
static char *progress_percent(const json_t *job)
{
	const json_t *p = json_object_get(job, "progress");
	double done = json_number_value(json_object_get(p, "progress"));
	double total = json_number_value(json_object_get(p, "total"));
	char buf[32];

	if (strcmp(str(job, "status"), "completed") == 0)
		return strdup(p ? "100%" : "");
	if (!p)
		return strdup("");
	if (total > 0)
		snprintf(buf, sizeof buf, "%.0f%%", 100.0 * done / total);
	else
		snprintf(buf, sizeof buf, "%g", done);
	return strdup(buf);
}

char *cli_progress_text(const json_t *job)
{
	const json_t *p = json_object_get(job, "progress");
	double done = json_number_value(json_object_get(p, "progress"));
	double total = json_number_value(json_object_get(p, "total"));
	const char *msg = str(p, "message");
	char *pct = progress_percent(job), *out = NULL;

	if (!pct || !p)
		return pct;
	if (total > 0 && asprintf(&out, "%s (%g of %g)%s%s", pct, done, total,
				  *msg ? " " : "", msg) < 0)
		out = NULL;
	if (total <= 0 && asprintf(&out, "%s%s%s", pct, *msg ? " " : "",
				   msg) < 0)
		out = NULL;
	free(pct);
	return out;
}

void cli_print_jobs(FILE *out, const json_t *jobs)
{
	struct table t = {.ncols = 6};
	size_t i;
	json_t *j;

	table_add(&t, (char *[]){strdup("ID"), strdup("TOOL"), strdup("STATUS"),
				 strdup("ATTEMPT"), strdup("PROGRESS"),
				 strdup("CREATED")});
	json_array_foreach(jobs, i, j)
		table_add(&t, (char *[]){dup_str(j, "id"), dup_str(j, "tool"),
					 dup_str(j, "status"),
					 dup_str(j, "attempt"), progress_percent(j),
					 dup_str(j, "createdAt")});
	table_print(out, &t);
}

/* workers_text writes a worker tool's workers for a person ("2 (cap
 * 8)"), "-" for a tool of another kind (malloc'd). */
static char *workers_text(const json_t *tool)
{
	const json_t *w = json_object_get(tool, "workers");
	char *s;

	if (!json_is_object(w))
		return strdup("-");
	if (asprintf(&s, "%lld (cap %lld)",
		     (long long)json_integer_value(json_object_get(w, "connected")),
		     (long long)json_integer_value(json_object_get(w, "capacity"))) < 0)
		return NULL;
	return s;
}

void cli_print_tools(FILE *out, const json_t *tools)
{
	struct table t = {.ncols = 6};
	size_t i;
	json_t *tool;

	table_add(&t, (char *[]){strdup("NAME"), strdup("KIND"),
				 strdup("WORKERS"), strdup("APPROVAL"),
				 strdup("PAUSED"), strdup("DESCRIPTION")});
	json_array_foreach(tools, i, tool)
		table_add(&t, (char *[]){
			dup_str(tool, "name"), dup_str(tool, "kind"),
			workers_text(tool),
			strdup(json_is_true(json_object_get(tool, "requireApproval"))
				       ? "yes" : "no"),
			strdup(json_is_true(json_object_get(tool, "paused"))
				       ? "yes" : "no"),
			dup_str(tool, "description")});
	table_print(out, &t);
}

/* ---- one tool ---------------------------------------------------------- */

/* duration_text writes ms for a person ("30s", "5m", "1500ms"). */
static const char *duration_text(json_int_t ms, char buf[32])
{
	static const struct {
		const char *unit;
		json_int_t ms;
	} units[] = {{"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}};

	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (ms >= units[i].ms && ms % units[i].ms == 0) {
			snprintf(buf, 32, "%lld%s", (long long)(ms / units[i].ms),
				 units[i].unit);
			return buf;
		}
	snprintf(buf, 32, "%lldms", (long long)ms);
	return buf;
}

/* type_text returns the type of a schema for a person (malloc'd):
 * "string", "integer or null", "array of string", "object", "any". */
static char *type_text(const json_t *schema)
{
	const json_t *type = json_object_get(schema, "type");
	const json_t *items = json_object_get(schema, "items");
	char *out = NULL, *inner;
	size_t i;
	json_t *t;

	if (json_is_string(type) && strcmp(json_string_value(type), "array") == 0 &&
	    json_is_object(items)) {
		inner = type_text(items);
		if (asprintf(&out, "array of %s", inner ? inner : "any") < 0)
			out = NULL;
		free(inner);
		return out;
	}
	if (json_is_string(type))
		return strdup(json_string_value(type));
	if (json_is_array(type)) {
		char buf[160] = "";

		json_array_foreach(type, i, t) {
			strncat(buf, i ? " or " : "", sizeof buf - strlen(buf) - 1);
			strncat(buf, json_string_value(t) ? json_string_value(t) : "?",
				sizeof buf - strlen(buf) - 1);
		}
		return strdup(buf);
	}
	if (json_object_get(schema, "enum") || json_object_get(schema, "const"))
		return strdup("value");
	if (json_object_get(schema, "properties"))
		return strdup("object");
	if (json_is_false(schema))
		return strdup("nothing");
	if (json_is_array(type = json_object_get(schema, "anyOf")) ||
	    json_is_array(type = json_object_get(schema, "oneOf"))) {
		char buf[160] = "";

		/* Each choice once: "string or null". */
		json_array_foreach(type, i, t) {
			char *one = type_text(t);

			if (one && !strstr(buf, one)) {
				strncat(buf, *buf ? " or " : "",
					sizeof buf - strlen(buf) - 1);
				strncat(buf, one, sizeof buf - strlen(buf) - 1);
			}
			free(one);
		}
		return strdup(*buf ? buf : "any");
	}
	return strdup("any");
}

/* rules_text returns what a schema asks beyond its type (malloc'd): its
 * allowed values, bounds, format and pattern, then its description. */
static char *rules_text(const json_t *schema)
{
	static const struct {
		const char *lo, *hi, *one, *many;
	} ranges[] = {
		{"minimum", "maximum", "", ""},
		{"minLength", "maxLength", " character", " characters"},
		{"minItems", "maxItems", " item", " items"},
		{"minProperties", "maxProperties", " member", " members"},
	};
	char buf[512] = "", part[256];
	const json_t *v;
	size_t i;
	json_t *e;

#define ADD(...)                                                               \
	do {                                                                   \
		snprintf(part, sizeof part, __VA_ARGS__);                      \
		strncat(buf, *buf ? "; " : "", sizeof buf - strlen(buf) - 1); \
		strncat(buf, part, sizeof buf - strlen(buf) - 1);              \
	} while (0)
	if (json_is_array(v = json_object_get(schema, "enum"))) {
		char vals[200] = "";

		json_array_foreach(v, i, e) {
			char *t = berth_json_short(e, JSON_COMPACT);

			strncat(vals, i ? ", " : "", sizeof vals - strlen(vals) - 1);
			strncat(vals, t ? t : "?", sizeof vals - strlen(vals) - 1);
			free(t);
		}
		ADD("one of %s", vals);
	}
	if ((v = json_object_get(schema, "const"))) {
		char *t = berth_json_short(v, JSON_COMPACT);

		ADD("exactly %s", t ? t : "?");
		free(t);
	}
	for (i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
		const json_t *lo = json_object_get(schema, ranges[i].lo);
		const json_t *hi = json_object_get(schema, ranges[i].hi);

		double last = json_number_value(json_is_number(hi) ? hi : lo);
		const char *noun = last == 1 ? ranges[i].one : ranges[i].many;

		if (json_is_number(lo) && json_is_number(hi))
			ADD("%g to %g%s", json_number_value(lo),
			    json_number_value(hi), noun);
		else if (json_is_number(lo))
			ADD("at least %g%s", json_number_value(lo), noun);
		else if (json_is_number(hi))
			ADD("at most %g%s", json_number_value(hi), noun);
	}
	if (json_is_number(v = json_object_get(schema, "exclusiveMinimum")))
		ADD("above %g", json_number_value(v));
	if (json_is_number(v = json_object_get(schema, "exclusiveMaximum")))
		ADD("below %g", json_number_value(v));
	if (json_is_number(v = json_object_get(schema, "multipleOf")))
		ADD("a multiple of %g", json_number_value(v));
	if (json_is_string(v = json_object_get(schema, "format")))
		ADD("format %s", json_string_value(v));
	if (json_is_string(v = json_object_get(schema, "pattern")))
		ADD("pattern %s", json_string_value(v));
	if (json_is_string(v = json_object_get(schema, "description")))
		ADD("%s", json_string_value(v));
#undef ADD
	return strdup(buf);
}

/* resolve follows a local "$ref" of s ("#", "#/$defs/X", any JSON
 * pointer into root), a few at most; anything else is s itself. */
static const json_t *resolve(const json_t *root, const json_t *s)
{
	for (int hops = 0; hops < 8; hops++) {
		const char *ref = json_string_value(json_object_get(s, "$ref"));
		const json_t *at = root;
		char name[256];

		if (!ref || ref[0] != '#' || (ref[1] && ref[1] != '/'))
			return s;
		for (const char *p = ref + 1; at && *p == '/';) {
			size_t n = strcspn(p + 1, "/"), k = 0;

			for (size_t j = 0; j < n && k + 1 < sizeof name; j++) {
				/* JSON pointer escapes: ~1 is /, ~0 is ~. */
				if (p[1 + j] == '~' && j + 1 < n &&
				    (p[2 + j] == '0' || p[2 + j] == '1')) {
					name[k++] = p[2 + j] == '1' ? '/' : '~';
					j++;
				} else {
					name[k++] = p[1 + j];
				}
			}
			name[k] = '\0';
			at = json_object_get(at, name);
			p += 1 + n;
		}
		if (!at)
			return s;
		s = at;
	}
	return s;
}

/* view returns (new) what a person is shown of schema s of root: its
 * "$ref" followed, and the properties and required names of its allOf
 * branches merged in (Zod's .and(), a definition under $defs), so that
 * every field that must be given is listed. */
static json_t *view(const json_t *root, const json_t *s)
{
	const json_t *b;
	json_t *out, *props, *req;
	size_t i;

	s = resolve(root, s);
	if (!json_is_object(s) || !json_is_array(json_object_get(s, "allOf")))
		return json_incref((json_t *)s);
	out = json_copy((json_t *)s);
	props = json_deep_copy(json_object_get(s, "properties"));
	req = json_deep_copy(json_object_get(s, "required"));
	if (!props)
		props = json_object();
	if (!req)
		req = json_array();
	json_array_foreach(json_object_get(s, "allOf"), i, b) {
		json_t *v = view(root, b), *r;
		size_t k;

		json_object_update_missing(props, json_object_get(v,
								  "properties"));
		json_array_foreach(json_object_get(v, "required"), k, r)
			json_array_append(req, r);
		if (!json_object_get(out, "type") && json_object_get(v, "type"))
			json_object_set(out, "type", json_object_get(v, "type"));
		json_decref(v);
	}
	json_object_del(out, "allOf");
	json_object_set_new(out, "properties", props);
	json_object_set_new(out, "required", req);
	return out;
}

static bool required_in(const json_t *schema, const char *name)
{
	size_t i;
	json_t *r;

	json_array_foreach(json_object_get(schema, "required"), i, r)
		if (json_is_string(r) && strcmp(json_string_value(r), name) == 0)
			return true;
	return false;
}

/* add_fields adds a row per property of an object schema to t, the
 * properties of an object (or of an array's objects) under their own
 * path, down to depth 3. */
static void add_fields(struct table *t, const json_t *root,
		       const json_t *schema, const char *prefix, int depth)
{
	const json_t *props = json_object_get(schema, "properties");
	const char *key;
	json_t *given, *r;
	size_t i;

	json_object_foreach((json_t *)props, key, given) {
		json_t *p = view(root, given);
		const json_t *d = json_object_get(p, "default");
		json_t *items = view(root, json_object_get(p, "items"));
		char *name, *mark;

		if (asprintf(&name, "  %s%s", prefix, key) < 0)
			continue;
		if (required_in(schema, key))
			mark = strdup("required");
		else if (d) {
			char *v = berth_json_short(d, JSON_COMPACT);

			if (asprintf(&mark, "default %s", v ? v : "?") < 0)
				mark = NULL;
			free(v);
		} else {
			mark = strdup("optional");
		}
		table_add(t, (char *[]){name, type_text(p), mark, rules_text(p)});
		if (depth < 3 && json_object_get(p, "properties")) {
			char *sub;

			if (asprintf(&sub, "%s%s.", prefix, key) >= 0)
				add_fields(t, root, p, sub, depth + 1);
			free(sub);
		} else if (depth < 3 && json_object_get(items, "properties")) {
			char *sub;

			if (asprintf(&sub, "%s%s[].", prefix, key) >= 0)
				add_fields(t, root, items, sub, depth + 1);
			free(sub);
		}
		json_decref(items);
		json_decref(p);
	}
	/* A required name with no property of its own (one that
	 * additionalProperties or patternProperties describe) must be
	 * given all the same. */
	json_array_foreach(json_object_get(schema, "required"), i, r) {
		char *name;

		if (!json_is_string(r) ||
		    json_object_get(props, json_string_value(r)) ||
		    asprintf(&name, "  %s%s", prefix, json_string_value(r)) < 0)
			continue;
		table_add(t, (char *[]){name, strdup("any"), strdup("required"),
					strdup("")});
	}
}

/* print_schema prints a section of a tool's fields: a heading and a table,
 * or a line that says there are none to show. */
static void print_schema(FILE *out, const char *heading, const json_t *given)
{
	struct table t = {.ncols = 4};
	json_t *schema;

	if (!given)
		return;
	fprintf(out, "\n%s\n", heading);
	schema = view(given, given);
	if (!json_object_size(json_object_get(schema, "properties")) &&
	    !json_array_size(json_object_get(schema, "required"))) {
		char *type = type_text(schema), *rules = rules_text(schema);

		fputs("  (", out);
		put(out, json_is_true(schema) ? "anything"
			 : json_is_false(schema) ? "nothing: every value is refused"
						 : type);
		fputs(*rules ? "; " : "", out);
		put(out, rules);
		fputs(")\n", out);
		free(type);
		free(rules);
		json_decref(schema);
		return;
	}
	add_fields(&t, given, schema, "", 1);
	table_print(out, &t);
	json_decref(schema);
}

void cli_print_tool(FILE *out, const json_t *tool)
{
	const json_t *bg = json_object_get(tool, "background");
	const json_t *ann = json_object_get(tool, "annotations");
	json_int_t retries = json_integer_value(json_object_get(bg, "maxRetries"));
	json_int_t conc = json_integer_value(json_object_get(bg, "concurrency"));
	char d[32], at_once[64];

	put(out, str(tool, "name"));
	if (*str(tool, "title")) {
		fputs(" (", out);
		put(out, str(tool, "title"));
		fputc(')', out);
	}
	fputc('\n', out);
	if (*str(tool, "description")) {
		put(out, str(tool, "description"));
		fputc('\n', out);
	}
	print_schema(out, "input", json_object_get(tool, "inputSchema"));
	print_schema(out, "resume data", json_object_get(tool, "resumeSchema"));
	print_schema(out, "request context",
		     json_object_get(tool, "requestContextSchema"));
	print_schema(out, "output", json_object_get(tool, "outputSchema"));
	fputc('\n', out);
	if (*str(tool, "kind")) {
		const json_t *w = json_object_get(tool, "workers");

		fprintf(out, "%-11s %s", "kind", str(tool, "kind"));
		if (json_is_object(w))
			fprintf(out, "; workers connected %lld, capacity %lld",
				(long long)json_integer_value(
					json_object_get(w, "connected")),
				(long long)json_integer_value(
					json_object_get(w, "capacity")));
		fputc('\n', out);
	}
	fprintf(out, "%-11s %s\n", "approval",
		json_is_true(json_object_get(tool, "requireApproval"))
			? "required: a job waits for berth approve or decline"
			: "not required");
	if (conc > 0)
		snprintf(at_once, sizeof at_once, "at most %lld at once",
			 (long long)conc);
	fprintf(out, "%-11s timeout %s; %lld retr%s; %s; %s\n", "background",
		duration_text(json_integer_value(json_object_get(bg, "timeoutMs")),
			      d),
		(long long)retries, retries == 1 ? "y" : "ies",
		conc > 0 ? at_once : "any number at once",
		json_is_false(json_object_get(bg, "enabled"))
			? "not as an MCP task"
			: "MCP clients may run it as a task");
	fprintf(out, "%-11s %s\n", "paused",
		json_is_true(json_object_get(tool, "paused")) ? "yes: no job "
		"starts until berth unpause" : "no");
	if (json_is_object(ann))
		fprintf(out, "%-11s %s, %s, %s, %s\n", "hints",
			json_is_true(json_object_get(ann, "readOnlyHint"))
				? "read-only" : "may change things",
			json_is_true(json_object_get(ann, "destructiveHint"))
				? "may destroy" : "not destructive",
			json_is_true(json_object_get(ann, "idempotentHint"))
				? "idempotent" : "not idempotent",
			json_is_true(json_object_get(ann, "openWorldHint"))
				? "open world" : "closed world");
}

void cli_print_event(FILE *out, const json_t *ev)
{
	char *data = NULL;
	const json_t *d = json_object_get(ev, "data");

	char *who = NULL;

	if (d && !json_is_null(d))
		data = cut(value_text(d), CELL_MAX);
	if (asprintf(&who, "%s%s%s%s", str(ev, "by"),
		     *str(ev, "via") ? " (" : "", str(ev, "via"),
		     *str(ev, "via") ? ")" : "") < 0)
		who = NULL;
	/* Columns padded by the width of their text, which put_padded
	 * escapes. */
	fprintf(out, "%-8lld ",
		(long long)json_integer_value(json_object_get(ev, "seq")));
	put(out, str(ev, "at"));
	fputs("  ", out);
	put(out, str(ev, "jobId"));
	fputs("  ", out);
	put_padded(out, str(ev, "tool"), 12);
	fputc(' ', out);
	put_padded(out, str(ev, "type"), 18);
	fputc(' ', out);
	put_padded(out, str(ev, "status"), 17);
	fputc(' ', out);
	put_padded(out, who, 20);
	fprintf(out, " %s\n", data ? data : "");
	free(who);
	free(data);
}

void cli_print_info(FILE *out, const json_t *info)
{
	const json_t *jobs = json_object_get(info, "jobs");
	const json_t *workers = json_object_get(info, "workers");
	long long up = (long long)json_integer_value(json_object_get(info, "uptimeMs"));
	const char *key;
	json_t *v;

	fprintf(out, "%s %s (protocol %s)\n", str(info, "name"),
		str(info, "version"), str(info, "protocolVersion"));
	fprintf(out, "database   %s (durability %s)\n", str(info, "database"),
		str(info, "durability"));
	if (json_is_object(json_object_get(info, "principal"))) {
		const json_t *p = json_object_get(info, "principal");
		const json_t *r;
		size_t i;

		fputs("you        ", out);
		put(out, str(p, "name"));
		fputs(" (", out);
		put(out, str(p, "via"));
		fputs("):", out);
		json_array_foreach(json_object_get(p, "roles"), i, r) {
			fputs(i ? ", " : " ", out);
			put(out, json_string_value(r));
		}
		fputc('\n', out);
	}
	fprintf(out, "uptime     %lldh %02lldm %02llds\n", up / 3600000,
		up / 60000 % 60, up / 1000 % 60);
	fprintf(out, "workers    %lld busy of %lld\n",
		(long long)json_integer_value(json_object_get(workers, "busy")),
		(long long)json_integer_value(json_object_get(workers, "size")));
	fprintf(out, "jobs      ");
	json_object_foreach((json_t *)jobs, key, v)
		fprintf(out, " %s %lld", key, (long long)json_integer_value(v));
	fputc('\n', out);
}

void cli_print_log_line(FILE *out, const json_t *line)
{
	char *data = NULL;

	if (json_object_get(line, "data"))
		data = value_text(json_object_get(line, "data"));
	fprintf(out, "%-5lld ",
		(long long)json_integer_value(json_object_get(line, "n")));
	put(out, str(line, "at"));
	fputc(' ', out);
	put_padded(out, str(line, "level"), 5);
	fputc(' ', out);
	put(out, str(line, "message"));
	fprintf(out, "%s%s\n", data ? " " : "", data ? data : "");
	free(data);
}

void cli_progress_bar(FILE *out, const char *status, const json_t *progress)
{
	double done = json_number_value(json_object_get(progress, "progress"));
	double total = json_number_value(json_object_get(progress, "total"));
	/* The tool's message, escaped, cut to what fits beside the bar. */
	char *msg = cut(clean(str(progress, "message")), total > 0 ? 40 : 50);
	char bar[BAR_WIDTH + 1];
	int filled = 0;

	if (total > 0) {
		double f = done / total;

		f = f < 0 ? 0 : f > 1 ? 1 : f;
		filled = (int)(f * BAR_WIDTH);
		memset(bar, '#', (size_t)filled);
		memset(bar + filled, '-', (size_t)(BAR_WIDTH - filled));
		bar[BAR_WIDTH] = '\0';
		fprintf(out, "\r\033[K%-9s [%s] %3.0f%% %s", status, bar,
			100.0 * f, msg ? msg : "");
	} else if (progress) {
		fprintf(out, "\r\033[K%-9s %g %s", status, done,
			msg ? msg : "");
	} else {
		fprintf(out, "\r\033[K%-9s", status);
	}
	free(msg);
	fflush(out);
}

void cli_progress_done(FILE *out)
{
	fputs("\r\033[K", out);
	fflush(out);
}

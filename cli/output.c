/*
 * output.c: how berth shows jobs, tools, events and logs to a person
 * (cli.h). Machine output (--json) is plain JSON and is printed by the
 * commands themselves with cli_print_json.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/jshort.h"

/* Payloads longer than this are cut in tables (not in `berth get`). */
#define CELL_MAX 60
#define BAR_WIDTH 30

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

/* value_text returns a malloc'd one-line text of v: a string as itself,
 * anything else as compact JSON. */
static char *value_text(const json_t *v)
{
	if (json_is_string(v))
		return strdup(json_string_value(v));
	return berth_json_short(v, JSON_COMPACT);
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
	fprintf(out, "%-16s %s", label, name);
	if (via && *via)
		fprintf(out, " (%s)", via);
	if (at && *at)
		fprintf(out, " at %s", at);
	if (words && *words)
		fprintf(out, ": %s", words);
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
		if (text && *text)
			fprintf(out, "%-16s %s\n", fields[i].label, text);
		free(text);
	}
	if (json_is_true(json_object_get(job, "toolMissing")))
		fprintf(out, "%-16s %s\n", "waits for",
			"its tool, which berthd does not have now (it runs "
			"when the tool comes back)");
	if (json_is_object(err)) {
		fprintf(out, "%-16s %s", "error", str(err, "message"));
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
	for (size_t i = 0; i < t->ncols; i++) {
		char *s = row[i] ? row[i] : strdup("");

		if (s && strlen(s) > CELL_MAX)
			strcpy(s + CELL_MAX - 3, "...");
		for (char *p = s; p && *p; p++)
			if (*p == '\n' || *p == '\t')
				*p = ' ';
		t->cells[t->nrows * t->ncols + i] = s;
	}
	t->nrows++;
}

static void table_print(FILE *out, struct table *t)
{
	size_t width[16] = {0};

	for (size_t r = 0; r < t->nrows; r++)
		for (size_t c = 0; c < t->ncols; c++) {
			const char *s = t->cells[r * t->ncols + c];
			size_t n = s ? strlen(s) : 0;

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

			if (c + 1 == last)
				fprintf(out, "%s", s ? s : "");
			else
				fprintf(out, "%-*s  ", (int)width[c], s ? s : "");
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
	if (json_is_string(v = json_object_get(schema, "format")))
		ADD("format %s", json_string_value(v));
	if (json_is_string(v = json_object_get(schema, "pattern")))
		ADD("pattern %s", json_string_value(v));
	if (json_is_string(v = json_object_get(schema, "description")))
		ADD("%s", json_string_value(v));
#undef ADD
	return strdup(buf);
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
static void add_fields(struct table *t, const json_t *schema,
		       const char *prefix, int depth)
{
	const json_t *props = json_object_get(schema, "properties");
	const char *key;
	json_t *p;

	json_object_foreach((json_t *)props, key, p) {
		const json_t *d = json_object_get(p, "default");
		const json_t *items = json_object_get(p, "items");
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
		if (depth >= 3)
			continue;
		if (json_object_get(p, "properties")) {
			char *sub;

			if (asprintf(&sub, "%s%s.", prefix, key) >= 0)
				add_fields(t, p, sub, depth + 1);
			free(sub);
		} else if (json_object_get(items, "properties")) {
			char *sub;

			if (asprintf(&sub, "%s%s[].", prefix, key) >= 0)
				add_fields(t, items, sub, depth + 1);
			free(sub);
		}
	}
}

/* print_schema prints a section of a tool's fields: a heading and a table,
 * or a line that says there are none to show. */
static void print_schema(FILE *out, const char *heading, const json_t *schema)
{
	struct table t = {.ncols = 4};

	if (!schema)
		return;
	fprintf(out, "\n%s\n", heading);
	if (!json_object_size(json_object_get(schema, "properties"))) {
		char *type = type_text(schema), *rules = rules_text(schema);

		fprintf(out, "  (%s%s%s)\n",
			json_is_true(schema) ? "anything" : type,
			*rules ? "; " : "", rules);
		free(type);
		free(rules);
		return;
	}
	add_fields(&t, schema, "", 1);
	table_print(out, &t);
}

void cli_print_tool(FILE *out, const json_t *tool)
{
	const json_t *bg = json_object_get(tool, "background");
	const json_t *ann = json_object_get(tool, "annotations");
	json_int_t retries = json_integer_value(json_object_get(bg, "maxRetries"));
	json_int_t conc = json_integer_value(json_object_get(bg, "concurrency"));
	char d[32], at_once[64];

	fprintf(out, "%s", str(tool, "name"));
	if (*str(tool, "title"))
		fprintf(out, " (%s)", str(tool, "title"));
	fputc('\n', out);
	if (*str(tool, "description"))
		fprintf(out, "%s\n", str(tool, "description"));
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

	if (d && !json_is_null(d)) {
		data = value_text(d);
		if (data && strlen(data) > CELL_MAX)
			strcpy(data + CELL_MAX - 3, "...");
	}
	char who[96];

	snprintf(who, sizeof who, "%s%s%s%s", str(ev, "by"),
		 *str(ev, "via") ? " (" : "", str(ev, "via"),
		 *str(ev, "via") ? ")" : "");
	fprintf(out, "%-8lld %s  %s  %-12s %-18s %-17s %-20s %s\n",
		(long long)json_integer_value(json_object_get(ev, "seq")),
		str(ev, "at"), str(ev, "jobId"), str(ev, "tool"),
		str(ev, "type"), str(ev, "status"), who, data ? data : "");
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

		fprintf(out, "you        %s (%s):", str(p, "name"), str(p, "via"));
		json_array_foreach(json_object_get(p, "roles"), i, r)
			fprintf(out, "%s %s", i ? "," : "", json_string_value(r));
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
	fprintf(out, "%-5lld %s %-5s %s%s%s\n",
		(long long)json_integer_value(json_object_get(line, "n")),
		str(line, "at"), str(line, "level"), str(line, "message"),
		data ? " " : "", data ? data : "");
	free(data);
}

void cli_progress_bar(FILE *out, const char *status, const json_t *progress)
{
	double done = json_number_value(json_object_get(progress, "progress"));
	double total = json_number_value(json_object_get(progress, "total"));
	const char *msg = str(progress, "message");
	char bar[BAR_WIDTH + 1];
	int filled = 0;

	if (total > 0) {
		double f = done / total;

		f = f < 0 ? 0 : f > 1 ? 1 : f;
		filled = (int)(f * BAR_WIDTH);
		memset(bar, '#', (size_t)filled);
		memset(bar + filled, '-', (size_t)(BAR_WIDTH - filled));
		bar[BAR_WIDTH] = '\0';
		fprintf(out, "\r\033[K%-9s [%s] %3.0f%% %.40s", status, bar,
			100.0 * f, msg);
	} else if (progress) {
		fprintf(out, "\r\033[K%-9s %g %.50s", status, done, msg);
	} else {
		fprintf(out, "\r\033[K%-9s", status);
	}
	fflush(out);
}

void cli_progress_done(FILE *out)
{
	fputs("\r\033[K", out);
	fflush(out);
}

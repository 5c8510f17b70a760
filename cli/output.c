/*
 * output.c: how berth shows jobs, tools, events and logs to a person
 * (cli.h). Machine output (--json) is plain JSON and is printed by the
 * commands themselves with cli_print_json.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* Payloads longer than this are cut in tables (not in `berth get`). */
#define CELL_MAX 60
#define BAR_WIDTH 30

void cli_print_json(FILE *out, const json_t *v, bool compact)
{
	char *s = json_dumps(v, JSON_ENCODE_ANY |
					(compact ? JSON_COMPACT : JSON_INDENT(2)));

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
	return json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
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

	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
		field(out, fields[i].label, json_object_get(job, fields[i].key));
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
		for (size_t c = 0; c < t->ncols; c++) {
			const char *s = t->cells[r * t->ncols + c];

			if (c + 1 == t->ncols)
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

/* progress_text returns "NN%" for a job's progress, or "". */
static char *progress_text(const json_t *job)
{
	const json_t *p = json_object_get(job, "progress");
	double done = json_number_value(json_object_get(p, "progress"));
	double total = json_number_value(json_object_get(p, "total"));
	char buf[32];

	if (!p)
		return strdup("");
	if (total > 0)
		snprintf(buf, sizeof buf, "%.0f%%", 100.0 * done / total);
	else
		snprintf(buf, sizeof buf, "%g", done);
	return strdup(buf);
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
					 dup_str(j, "attempt"), progress_text(j),
					 dup_str(j, "createdAt")});
	table_print(out, &t);
}

void cli_print_tools(FILE *out, const json_t *tools)
{
	struct table t = {.ncols = 4};
	size_t i;
	json_t *tool;

	table_add(&t, (char *[]){strdup("NAME"), strdup("APPROVAL"),
				 strdup("PAUSED"), strdup("DESCRIPTION")});
	json_array_foreach(tools, i, tool)
		table_add(&t, (char *[]){
			dup_str(tool, "name"),
			strdup(json_is_true(json_object_get(tool, "requireApproval"))
				       ? "yes" : "no"),
			strdup(json_is_true(json_object_get(tool, "paused"))
				       ? "yes" : "no"),
			dup_str(tool, "description")});
	table_print(out, &t);
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
	fprintf(out, "%-8lld %s  %s  %-12s %-18s %-17s %s\n",
		(long long)json_integer_value(json_object_get(ev, "seq")),
		str(ev, "at"), str(ev, "jobId"), str(ev, "tool"),
		str(ev, "type"), str(ev, "status"), data ? data : "");
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

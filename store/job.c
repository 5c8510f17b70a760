/*
 * job.c: the values of the store: names of statuses and event types, times,
 * ids, and jobs and events as PROTOCOL.md's JSON objects.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"
#include "store/store_int.h"

static const char *const status_names[STORE_NSTATUS] = {
	[STORE_PENDING] = "pending",
	[STORE_AWAITING_APPROVAL] = "awaiting_approval",
	[STORE_RUNNING] = "running",
	[STORE_SUSPENDED] = "suspended",
	[STORE_COMPLETED] = "completed",
	[STORE_FAILED] = "failed",
	[STORE_TIMED_OUT] = "timed_out",
	[STORE_DECLINED] = "declined",
	[STORE_CANCELLED] = "cancelled",
	[STORE_EXPIRED] = "expired",
};

static const char *const event_names[STORE_NEVENT] = {
	[STORE_EV_CREATED] = "created",
	[STORE_EV_APPROVAL_REQUESTED] = "approval_requested",
	[STORE_EV_APPROVED] = "approved",
	[STORE_EV_DECLINED] = "declined",
	[STORE_EV_STARTED] = "started",
	[STORE_EV_SUSPENDED] = "suspended",
	[STORE_EV_RESUMED] = "resumed",
	[STORE_EV_RETRYING] = "retrying",
	[STORE_EV_COMPLETED] = "completed",
	[STORE_EV_FAILED] = "failed",
	[STORE_EV_TIMED_OUT] = "timed_out",
	[STORE_EV_CANCELLED] = "cancelled",
	[STORE_EV_EXPIRED] = "expired",
};

static int name_index(const char *const *names, int n, const char *name)
{
	if (name == NULL)
		return -1;
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}

const char *store_status_name(int s)
{
	return s >= 0 && s < STORE_NSTATUS ? status_names[s] : NULL;
}

int store_status_parse(const char *name)
{
	return name_index(status_names, STORE_NSTATUS, name);
}

const char *store_error_text(int rc)
{
	switch (rc) {
	case -EBUSY:
		return "database is locked";
	case -ENOSPC:
		return "database or disk is full";
	case -EIO:
		return "disk I/O error";
	case -EROFS:
		return "attempt to write a readonly database";
	case -ENOMEM:
		return "out of memory";
	default:
		return strerror(-rc);
	}
}

int store_interrupted_tries(int max_retries)
{
	return max_retries > 0 ? max_retries + 1 : 2;
}

bool store_status_terminal(int s)
{
	return s >= 0 && s < STORE_NSTATUS &&
	       (STORE_MASK(s) & STORE_MASK_TERMINAL) != 0;
}

const char *store_event_name(int type)
{
	return type >= 0 && type < STORE_NEVENT ? event_names[type] : NULL;
}

int store_event_parse(const char *name)
{
	return name_index(event_names, STORE_NEVENT, name);
}

/* ---- times ------------------------------------------------------------- */

int64_t store_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* put_num writes v as exactly n decimal digits at p. */
static void put_num(char *p, int v, int n)
{
	while (n-- > 0) {
		p[n] = (char)('0' + v % 10);
		v /= 10;
	}
}

/* Every reply and event carries times, so this runs several times per
 * job: the date comes from the day number by arithmetic (H. Hinnant's
 * civil_from_days) instead of gmtime_r and snprintf, which were an
 * eighth of the loop thread's instructions. */
char *store_format_time(int64_t t, char buf[32])
{
	/* Floor division, so that times before 1970 keep a positive
	 * millisecond part. */
	int64_t secs = t / 1000, ms = t % 1000;
	if (ms < 0) {
		ms += 1000;
		secs -= 1;
	}
	int64_t days = secs / 86400, sod = secs % 86400;
	if (sod < 0) {
		sod += 86400;
		days -= 1;
	}
	int64_t z = days + 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	int64_t d = doy - (153 * mp + 2) / 5 + 1;
	int64_t m = mp < 10 ? mp + 3 : mp - 9;
	int64_t y = yoe + era * 400 + (m <= 2);
	if (y < 0 || y > 9999) {
		/* Outside what four digits hold: the epoch, as before. */
		memcpy(buf, "1970-01-01T00:00:00.000Z", 25);
		return buf;
	}
	memcpy(buf, "0000-00-00T00:00:00.000Z", 25);
	put_num(buf, (int)y, 4);
	put_num(buf + 5, (int)m, 2);
	put_num(buf + 8, (int)d, 2);
	put_num(buf + 11, (int)(sod / 3600), 2);
	put_num(buf + 14, (int)(sod / 60 % 60), 2);
	put_num(buf + 17, (int)(sod % 60), 2);
	put_num(buf + 20, (int)ms, 3);
	return buf;
}

/* digits reads exactly n decimal digits at *p into *v and advances *p. */
static bool digits(const char **p, int n, int *v)
{
	int x = 0;
	for (int i = 0; i < n; i++) {
		char c = (*p)[i];
		if (c < '0' || c > '9')
			return false;
		x = x * 10 + (c - '0');
	}
	*p += n;
	*v = x;
	return true;
}

int store_parse_time(const char *s, int64_t *t)
{
	int year, mon, day, hour, min, sec, ms = 0;
	const char *p = s;

	if (s == NULL || !digits(&p, 4, &year) || *p++ != '-' ||
	    !digits(&p, 2, &mon) || *p++ != '-' || !digits(&p, 2, &day) ||
	    (*p != 'T' && *p != 't') || !(++p, digits(&p, 2, &hour)) ||
	    *p++ != ':' || !digits(&p, 2, &min) || *p++ != ':' ||
	    !digits(&p, 2, &sec))
		return -EINVAL;
	if (*p == '.') {
		int n = 0;
		p++;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		/* Keep milliseconds; finer digits are dropped. */
		for (; *p >= '0' && *p <= '9'; p++, n++)
			if (n < 3)
				ms = ms * 10 + (*p - '0');
		for (; n < 3; n++)
			ms *= 10;
	}
	int offset = 0; /* minutes east of UTC */
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int sign = *p++ == '-' ? -1 : 1, oh, om;
		if (!digits(&p, 2, &oh))
			return -EINVAL;
		if (*p == ':')
			p++;
		if (!digits(&p, 2, &om) || oh > 23 || om > 59)
			return -EINVAL;
		offset = sign * (oh * 60 + om);
	} else {
		return -EINVAL;
	}
	if (*p != '\0' || mon < 1 || mon > 12 || day < 1 || day > 31 ||
	    hour > 23 || min > 59 || sec > 60)
		return -EINVAL;

	struct tm tm = {
		.tm_year = year - 1900,
		.tm_mon = mon - 1,
		.tm_mday = day,
		.tm_hour = hour,
		.tm_min = min,
		.tm_sec = sec,
	};
	time_t secs = timegm(&tm);
	/* timegm normalises 31 February into March: refuse such a date. */
	if (tm.tm_mday != day)
		return -EINVAL;
	*t = ((int64_t)secs - (int64_t)offset * 60) * 1000 + ms;
	return 0;
}

/* ---- ids --------------------------------------------------------------- */

/* random_bytes fills buf from the kernel's CSPRNG (getrandom(2)). */
static void random_bytes(unsigned char *buf, size_t n)
{
	while (n > 0) {
		ssize_t got = getrandom(buf, n, 0);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			/* getrandom cannot fail on a kernel that has it
			 * (3.17+) once asked for this little; fall back to
			 * the device for a seccomp'd or ancient system. */
			int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
			if (fd >= 0) {
				got = read(fd, buf, n);
				close(fd);
			}
			if (got <= 0)
				return;
		}
		buf += got;
		n -= (size_t)got;
	}
}

/* The random bits of ids come from a per-thread pool refilled by one
 * getrandom call every 51 ids, rather than one system call an id. The pool
 * is used once and wiped as it goes, so no id shares bits with another. */
static _Thread_local struct {
	unsigned char bytes[510];
	size_t used;
} pool = {.used = sizeof(pool.bytes)};

static void pool_take(unsigned char *out, size_t n)
{
	if (pool.used + n > sizeof(pool.bytes)) {
		random_bytes(pool.bytes, sizeof(pool.bytes));
		pool.used = 0;
	}
	memcpy(out, pool.bytes + pool.used, n);
	memset(pool.bytes + pool.used, 0, n);
	pool.used += n;
}

void store__uuid7_floor(int64_t ms, char out[14])
{
	uint64_t t = ms > 0 ? (uint64_t)ms & 0xffffffffffffu : 0;

	snprintf(out, 14, "%08" PRIx64 "-%04" PRIx64, t >> 16, t & 0xffff);
}

void store_uuid7(char out[40])
{
	static const char hex[] = "0123456789abcdef";
	static _Atomic uint64_t last; /* the last id's 60 bits of time */
	unsigned char b[16];
	struct timespec ts;
	uint64_t t, prev;

	/* RFC 9562, 6.2, method 3: the 12 bits after the version hold the
	 * fraction of the millisecond in 4096ths, so that ids sort in the
	 * order they were made, also many to a millisecond; an id made in
	 * the same 4096th as the last one (or after the clock stepped back)
	 * takes the next value. */
	clock_gettime(CLOCK_REALTIME, &ts);
	t = ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000) << 12 |
	    (uint64_t)(ts.tv_nsec % 1000000) * 4096 / 1000000;
	prev = atomic_load(&last);
	do {
		if (t <= prev)
			t = prev + 1;
	} while (!atomic_compare_exchange_weak(&last, &prev, t));

	for (int i = 0; i < 6; i++)
		b[i] = (unsigned char)(t >> (52 - 8 * i));
	b[6] = (unsigned char)(0x70 | ((t >> 8) & 0x0f)); /* version 7 */
	b[7] = (unsigned char)(t & 0xff);
	pool_take(b + 8, 8);
	b[8] = (unsigned char)(0x80 | (b[8] & 0x3f)); /* variant 10 */

	char *p = out;
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*p++ = '-';
		*p++ = hex[b[i] >> 4];
		*p++ = hex[b[i] & 15];
	}
	*p = '\0';
}

/* ---- jobs -------------------------------------------------------------- */

void store_job_free(struct store_job *j)
{
	if (j == NULL)
		return;
	free(j->tool);
	free(j->run_id);
	free(j->tool_call_id);
	free(j->idempotency_key);
	free(j->reason);
	free(j->retry_of);
	free(j->submitted_by);
	free(j->submitted_via);
	free(j->decided_by);
	free(j->decided_via);
	json_decref(j->approvals);
	json_decref(j->input);
	json_decref(j->request_context);
	json_decref(j->metadata);
	json_decref(j->output);
	json_decref(j->model_output);
	json_decref(j->error);
	json_decref(j->suspend_payload);
	json_decref(j->resume_data);
	json_decref(j->checkpoint);
	json_decref(j->progress);
	json_decref(j->views);
	free(j);
}

static char *dup_or_null(const char *s, bool *failed)
{
	if (s == NULL)
		return NULL;
	char *d = strdup(s);
	if (d == NULL)
		*failed = true;
	return d;
}

struct store_job *store__job_copy(const struct store_job *src)
{
	struct store_job *j = malloc(sizeof(*j));
	if (j == NULL)
		return NULL;
	*j = *src;
	bool failed = false;
	j->tool = dup_or_null(src->tool, &failed);
	j->run_id = dup_or_null(src->run_id, &failed);
	j->tool_call_id = dup_or_null(src->tool_call_id, &failed);
	j->idempotency_key = dup_or_null(src->idempotency_key, &failed);
	j->reason = dup_or_null(src->reason, &failed);
	j->retry_of = dup_or_null(src->retry_of, &failed);
	j->submitted_by = dup_or_null(src->submitted_by, &failed);
	j->submitted_via = dup_or_null(src->submitted_via, &failed);
	j->decided_by = dup_or_null(src->decided_by, &failed);
	j->decided_via = dup_or_null(src->decided_via, &failed);
	json_incref(j->approvals);
	json_incref(j->input);
	json_incref(j->request_context);
	json_incref(j->metadata);
	json_incref(j->output);
	json_incref(j->model_output);
	json_incref(j->error);
	json_incref(j->suspend_payload);
	json_incref(j->resume_data);
	json_incref(j->checkpoint);
	json_incref(j->progress);
	json_incref(j->views);
	if (failed) {
		store_job_free(j);
		return NULL;
	}
	return j;
}

/* set_json_ref replaces *field with a reference to v. */
static void set_json_ref(json_t **field, json_t *v)
{
	json_decref(*field);
	*field = json_incref(v);
}

int store__job_apply(struct store_job *j, const struct store_transition *tr,
		     int64_t now)
{
	unsigned set = tr->set;
	if (set & STORE_SET_DECISION) {
		bool failed = false;
		char *reason = dup_or_null(tr->reason, &failed);
		char *by = dup_or_null(tr->by ? tr->by : STORE_BERTHD, &failed);
		char *via = dup_or_null(tr->via ? tr->via : STORE_BERTHD, &failed);
		if (failed) {
			free(reason);
			free(by);
			free(via);
			return -ENOMEM;
		}
		free(j->reason);
		j->reason = reason;
		free(j->decided_by);
		j->decided_by = by;
		free(j->decided_via);
		j->decided_via = via;
		j->decision = tr->decision;
		j->decided_at = now;
	}
	if (set & STORE_SET_APPROVALS) {
		set_json_ref(&j->approvals, tr->approvals);
		j->quorum = tr->quorum;
	}
	j->status = tr->to;
	j->updated_at = now;
	if (set & STORE_SET_RUN_AT)
		j->run_at = tr->run_at != 0 ? tr->run_at : now;
	if (set & STORE_SET_ATTEMPT)
		j->attempt = tr->attempt;
	if (set & STORE_SET_OUTPUT) {
		set_json_ref(&j->output, tr->output);
		set_json_ref(&j->model_output, tr->model_output);
	}
	if (set & STORE_SET_ERROR)
		set_json_ref(&j->error, tr->error);
	if (set & STORE_SET_SUSPEND)
		set_json_ref(&j->suspend_payload, tr->suspend_payload);
	if (set & STORE_SET_RESUME)
		set_json_ref(&j->resume_data, tr->resume_data);
	if (set & STORE_SET_CHECKPOINT)
		set_json_ref(&j->checkpoint, tr->checkpoint);
	if (set & STORE_SET_STARTED)
		j->started_at = now;
	if ((set & STORE_SET_FINISHED) || store_status_terminal(tr->to))
		j->finished_at = now;
	if (set & STORE_SET_EXPIRES_AT)
		j->expires_at = tr->expires_at;
	else if ((tr->to == STORE_SUSPENDED ||
		  tr->to == STORE_AWAITING_APPROVAL) && j->ttl_ms > 0)
		j->expires_at = now + j->ttl_ms;
	if (set & STORE_SET_PROGRESS)
		set_json_ref(&j->progress, tr->progress);
	if (set & STORE_SET_VIEWS)
		set_json_ref(&j->views, tr->views);
	return 0;
}

struct store_job *store_job_copy(const struct store_job *j)
{
	return store__job_copy(j);
}

/* set_* add a member to o when the value is present; they return false when
 * out of memory. */
static bool set_str(json_t *o, const char *key, const char *s)
{
	return s == NULL || json_object_set_new(o, key, json_string(s)) == 0;
}

static bool set_json(json_t *o, const char *key, json_t *v)
{
	return v == NULL || json_object_set(o, key, v) == 0;
}

static bool set_int(json_t *o, const char *key, int64_t v)
{
	return json_object_set_new(o, key, json_integer(v)) == 0;
}

static bool set_time(json_t *o, const char *key, int64_t t)
{
	char buf[32];
	return t == 0 ||
	       json_object_set_new(o, key,
				   json_string(store_format_time(t, buf))) == 0;
}

/* The audit's word for who is not known: a job or an event stored before
 * berth recorded who (docs/API.md). */
#define UNKNOWN "unknown"

static json_t *approval_to_json(const struct store_job *j)
{
	json_t *a = json_object();
	if (a == NULL)
		return NULL;
	json_t *decision = j->decision == STORE_DECISION_APPROVED ? json_string("approved")
			   : j->decision == STORE_DECISION_DECLINED ? json_string("declined")
								    : json_null();
	/* The one column of the decider's words is the note of an approval
	 * and the reason of a decline (docs/API.md). */
	bool ok = json_object_set_new(a, "required",
				      json_boolean(j->approval_required)) == 0 &&
		  json_object_set_new(a, "decision", decision) == 0 &&
		  set_str(a, j->decision == STORE_DECISION_APPROVED ? "note"
								   : "reason",
			  j->reason) &&
		  set_time(a, "decidedAt", j->decided_at);
	if (ok && j->decision != STORE_DECISION_NONE) {
		json_t *by = json_pack("{s:s}", "name",
				       j->decided_by ? j->decided_by : UNKNOWN);
		ok = by != NULL && set_str(by, "via", j->decided_via) &&
		     json_object_set_new(a, "decidedBy", by) == 0;
	}
	if (ok && j->approval_required)
		ok = set_int(a, "quorum", j->quorum > 0 ? j->quorum : 1) &&
		     json_object_set_new(a, "approvals",
					 j->approvals ? json_incref(j->approvals)
						      : json_array()) == 0;
	if (!ok) {
		json_decref(a);
		return NULL;
	}
	return a;
}

json_t *store_job_to_json(const struct store_job *j)
{
	json_t *o = json_object();
	if (o == NULL)
		return NULL;
	/* "approval" is always there: required says whether the tool asked
	 * for one, and decision is null until someone decided. */
	bool ok = set_str(o, "id", j->id) && set_str(o, "tool", j->tool) &&
		  set_str(o, "status", store_status_name(j->status)) &&
		  set_json(o, "input", j->input) &&
		  set_json(o, "requestContext", j->request_context) &&
		  set_json(o, "metadata", j->metadata) &&
		  set_str(o, "submittedBy",
			  j->submitted_by ? j->submitted_by : UNKNOWN) &&
		  set_str(o, "submittedVia", j->submitted_via) &&
		  set_str(o, "runId", j->run_id) &&
		  set_str(o, "toolCallId", j->tool_call_id) &&
		  set_str(o, "idempotencyKey", j->idempotency_key) &&
		  set_int(o, "priority", j->priority) &&
		  set_time(o, "runAt", j->run_at) &&
		  set_int(o, "attempt", j->attempt) &&
		  set_int(o, "maxRetries", j->max_retries) &&
		  (j->timeout_ms == 0 || set_int(o, "timeoutMs", j->timeout_ms)) &&
		  set_time(o, "expiresAt", j->expires_at) &&
		  set_json(o, "output", j->output) &&
		  set_json(o, "modelOutput", j->model_output) &&
		  set_json(o, "error", j->error) &&
		  set_json(o, "suspendPayload", j->suspend_payload) &&
		  set_json(o, "resumeData", j->resume_data) &&
		  set_json(o, "checkpoint", j->checkpoint) &&
		  json_object_set_new(o, "approval", approval_to_json(j)) == 0 &&
		  set_json(o, "progress", j->progress) &&
		  set_str(o, "retryOf", j->retry_of) &&
		  set_time(o, "createdAt", j->created_at) &&
		  set_time(o, "updatedAt", j->updated_at) &&
		  set_time(o, "startedAt", j->started_at) &&
		  set_time(o, "finishedAt", j->finished_at);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- events and log lines ---------------------------------------------- */

void store_event_finish(struct store_event *ev)
{
	if (ev == NULL)
		return;
	free(ev->tool);
	free(ev->by);
	free(ev->via);
	json_decref(ev->data);
	json_decref(ev->client);
	ev->tool = NULL;
	ev->by = NULL;
	ev->via = NULL;
	ev->data = NULL;
	ev->client = NULL;
}

json_t *store_event_to_json(const struct store_event *ev)
{
	json_t *o = json_object();
	if (o == NULL)
		return NULL;
	bool ok = set_int(o, "seq", ev->seq) && set_str(o, "jobId", ev->job_id) &&
		  set_str(o, "tool", ev->tool) &&
		  set_str(o, "type", store_event_name(ev->type)) &&
		  set_str(o, "status", store_status_name(ev->status)) &&
		  set_time(o, "at", ev->at) &&
		  set_str(o, "by", ev->by ? ev->by : UNKNOWN) &&
		  set_str(o, "via", ev->via) && set_json(o, "client", ev->client) &&
		  set_json(o, "data", ev->data);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

void store_log_line_finish(struct store_log_line *l)
{
	if (l == NULL)
		return;
	free(l->level);
	free(l->message);
	json_decref(l->data);
	l->level = NULL;
	l->message = NULL;
	l->data = NULL;
}

/* ---- JSON text ---------------------------------------------------------- */

/* A growing buffer for store__json_text and the Job and Event texts. It
 * starts in place, where nearly every text fits, and moves to the heap
 * past that; tb_finish hands back one malloc'd copy of the exact size.
 * slow is set when the value needs jansson's own dumper (see
 * store__json_text). */
struct text_buf {
	char *p;
	size_t n, cap;
	bool failed;
	bool slow;
	char local[1024];
};

static void tb_init(struct text_buf *b)
{
	b->p = b->local;
	b->n = 0;
	b->cap = sizeof b->local;
	b->failed = false;
	b->slow = false;
}

/* tb_grow makes room for n more bytes and a NUL; false when out of memory
 * (b is then failed, and keeps what it had). */
static bool __attribute__((noinline)) tb_grow(struct text_buf *b, size_t n)
{
	size_t cap = b->cap * 2;
	char *p;

	if (b->failed)
		return false;
	while (cap < b->n + n + 1)
		cap *= 2;
	if (b->p == b->local) {
		if ((p = malloc(cap)) != NULL)
			memcpy(p, b->local, b->n);
	} else {
		p = realloc(b->p, cap);
	}
	if (p == NULL) {
		b->failed = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

/* tb_put is inline: most of its calls put a few bytes of a constant, which
 * the compiler then copies without a call (callgrind: the calls and their
 * checks were a third of writing a text). */
static inline void tb_put(struct text_buf *b, const char *s, size_t n)
{
	if (b->n + n + 1 > b->cap && !tb_grow(b, n))
		return;
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

/* TB_LIT puts a string literal. KEY(k) is the text and length of a member
 * that follows another: ,"k": with k a literal that needs no escaping. */
#define TB_LIT(b, s) tb_put((b), (s), sizeof(s) - 1)
#define KEY(k) ",\"" k "\":", sizeof(",\"" k "\":") - 1

/* tb_release frees b's memory when tb_finish did not hand it out. */
static void tb_release(struct text_buf *b)
{
	if (b->p != b->local)
		free(b->p);
	b->p = b->local;
}

/* tb_finish returns b's text, malloc'd, or NULL when it failed (out of
 * memory) or needs jansson. */
static char *tb_finish(struct text_buf *b)
{
	char *text;

	if (b->failed || b->slow) {
		tb_release(b);
		return NULL;
	}
	if (b->p != b->local) {
		b->p[b->n] = '\0';
		return b->p;
	}
	if ((text = malloc(b->n + 1)) != NULL) {
		memcpy(text, b->local, b->n);
		text[b->n] = '\0';
	}
	return text;
}

/* plain8 is true when none of the 8 bytes at s needs an escape or lies
 * beyond ASCII: each is in 0x20..0x7f, and none is '"' or '\\'. A byte
 * below 0x20 borrows in w - 0x20 and a byte equal to c gives 0xff in
 * (w ^ c) - 1, which sets its high bit; a borrow can only carry out of a
 * byte that is itself flagged, so only a byte that needs care is found. */
static inline bool plain8(const char *s)
{
	const uint64_t ones = 0x0101010101010101ull, highs = ones * 0x80;
	uint64_t w;

	memcpy(&w, s, sizeof w);
	return ((w | (w - ones * 0x20) | ((w ^ (ones * '"')) - ones) |
		 ((w ^ (ones * '\\')) - ones)) & highs) == 0;
}

/* tb_string writes s (n bytes) as a JSON string, escaped as jansson
 * escapes it without JSON_ENSURE_ASCII or JSON_ESCAPE_SLASH. Bytes beyond
 * ASCII send the value to jansson, which also checks the UTF-8. */
static void tb_string(struct text_buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t run = 0, i = 0;

	TB_LIT(b, "\"");
	for (;;) {
		while (i + 8 <= n && plain8(s + i))
			i += 8;
		while (i < n && (unsigned char)s[i] >= 0x20 &&
		       (unsigned char)s[i] < 0x80 && s[i] != '"' && s[i] != '\\')
			i++;
		if (i == n)
			break;
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x80) {
			b->slow = true;
			return;
		}
		tb_put(b, s + run, i - run);
		run = ++i;
		char e[6] = {'\\', (char)c, 0, 0, 0, 0};
		size_t len = 2;
		switch (c) {
		case '"': case '\\': break;
		case '\b': e[1] = 'b'; break;
		case '\f': e[1] = 'f'; break;
		case '\n': e[1] = 'n'; break;
		case '\r': e[1] = 'r'; break;
		case '\t': e[1] = 't'; break;
		default:
			memcpy(e + 1, "u00", 3);
			e[4] = hex[c >> 4];
			e[5] = hex[c & 15];
			len = 6;
		}
		tb_put(b, e, len);
	}
	tb_put(b, s + run, n - run);
	TB_LIT(b, "\"");
}

static void tb_int(struct text_buf *b, int64_t x)
{
	char num[24];
	unsigned long long u = x < 0 ? 0ull - (unsigned long long)x
				     : (unsigned long long)x;
	char *p = num + sizeof(num);
	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0);
	if (x < 0)
		*--p = '-';
	tb_put(b, p, (size_t)(num + sizeof(num) - p));
}

static void tb_value(struct text_buf *b, json_t *v, int depth)
{
	if (b->failed || b->slow)
		return;
	if (depth > 64) {
		/* Deep (or circular) values are rare: jansson deals with
		 * them, and refuses a cycle. */
		b->slow = true;
		return;
	}
	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		bool first = true;
		TB_LIT(b, "{");
		/* In insertion order, as json_dumps without JSON_SORT_KEYS. */
		for (void *it = json_object_iter(v); it != NULL;
		     it = json_object_iter_next(v, it)) {
			const char *key = json_object_iter_key(it);
#if JANSSON_VERSION_HEX >= 0x020e00
			size_t klen = json_object_iter_key_len(it);
#else
			size_t klen = strlen(key);
#endif
			if (!first)
				TB_LIT(b, ",");
			first = false;
			tb_string(b, key, klen);
			TB_LIT(b, ":");
			tb_value(b, json_object_iter_value(it), depth + 1);
		}
		TB_LIT(b, "}");
		return;
	}
	case JSON_ARRAY:
		TB_LIT(b, "[");
		for (size_t i = 0; i < json_array_size(v); i++) {
			if (i > 0)
				TB_LIT(b, ",");
			tb_value(b, json_array_get(v, i), depth + 1);
		}
		TB_LIT(b, "]");
		return;
	case JSON_STRING:
		tb_string(b, json_string_value(v), json_string_length(v));
		return;
	case JSON_INTEGER:
		tb_int(b, json_integer_value(v));
		return;
	case JSON_TRUE:
		TB_LIT(b, "true");
		return;
	case JSON_FALSE:
		TB_LIT(b, "false");
		return;
	case JSON_NULL:
		TB_LIT(b, "null");
		return;
	default:
		/* Reals: jansson's own formatting (and refusal of NaN). */
		b->slow = true;
		return;
	}
}

/*
 * store__json_text returns v serialized as json_dumps(v, JSON_COMPACT |
 * JSON_ENCODE_ANY) would, malloc'd, or NULL (out of memory, or a value
 * jansson refuses). Most payloads are objects of ASCII strings and
 * integers; this writes those several times faster than jansson, whose
 * dumper formats every integer with snprintf and every token through a
 * callback. Anything else (reals, non-ASCII strings, deep values) is left
 * to json_dumps, so the text is always what jansson would have written.
 */
char *store__json_text(json_t *v)
{
	struct text_buf b;
	char *text;

	tb_init(&b);
	tb_value(&b, v, 0);
	if ((text = tb_finish(&b)) != NULL)
		return text;
	return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

char *store_json_text(json_t *v)
{
	return store__json_text(v);
}

/* tb_str_member, tb_json_member and tb_time_member write a member when the
 * value is present, as set_str, set_json and set_time add one; key and
 * klen come from KEY. */
static void tb_str_member(struct text_buf *b, const char *key, size_t klen,
			  const char *s)
{
	if (s == NULL)
		return;
	tb_put(b, key, klen);
	tb_string(b, s, strlen(s));
}

static void tb_json_member(struct text_buf *b, const char *key, size_t klen,
			   json_t *v)
{
	if (v == NULL)
		return;
	tb_put(b, key, klen);
	tb_value(b, v, 1);
}

/* A time's text is digits and "-:.TZ": it goes in quotes as it is. */
static void tb_time_member(struct text_buf *b, const char *key, size_t klen,
			   int64_t t)
{
	char buf[33];

	if (t == 0)
		return;
	tb_put(b, key, klen);
	buf[0] = '"';
	store_format_time(t, buf + 1);
	buf[25] = '"';
	tb_put(b, buf, 26);
}

static void tb_int_member(struct text_buf *b, const char *key, size_t klen,
			  int64_t v)
{
	tb_put(b, key, klen);
	tb_int(b, v);
}

/* dump_tree returns the text of o (stolen; NULL: out of memory): the way
 * for values tb_finish leaves to jansson (non-ASCII strings, reals). */
static char *dump_tree(json_t *o)
{
	char *text = o != NULL ? store__json_text(o) : NULL;

	json_decref(o);
	return text;
}

/* The members and their order are store_job_to_json's. Every reply to a
 * change of a job carries it, and building the tree cost more than
 * writing the text (callgrind, e2e). */
char *store_job_text(const struct store_job *j)
{
	struct text_buf b;
	const char *decided_by = j->decided_by ? j->decided_by : UNKNOWN;

	tb_init(&b);
	TB_LIT(&b, "{\"id\":");
	tb_string(&b, j->id, strlen(j->id));
	tb_str_member(&b, KEY("tool"), j->tool);
	tb_str_member(&b, KEY("status"), store_status_name(j->status));
	tb_json_member(&b, KEY("input"), j->input);
	tb_json_member(&b, KEY("requestContext"), j->request_context);
	tb_json_member(&b, KEY("metadata"), j->metadata);
	tb_str_member(&b, KEY("submittedBy"),
		      j->submitted_by ? j->submitted_by : UNKNOWN);
	tb_str_member(&b, KEY("submittedVia"), j->submitted_via);
	tb_str_member(&b, KEY("runId"), j->run_id);
	tb_str_member(&b, KEY("toolCallId"), j->tool_call_id);
	tb_str_member(&b, KEY("idempotencyKey"), j->idempotency_key);
	tb_int_member(&b, KEY("priority"), j->priority);
	tb_time_member(&b, KEY("runAt"), j->run_at);
	tb_int_member(&b, KEY("attempt"), j->attempt);
	tb_int_member(&b, KEY("maxRetries"), j->max_retries);
	if (j->timeout_ms != 0)
		tb_int_member(&b, KEY("timeoutMs"), j->timeout_ms);
	tb_time_member(&b, KEY("expiresAt"), j->expires_at);
	tb_json_member(&b, KEY("output"), j->output);
	tb_json_member(&b, KEY("modelOutput"), j->model_output);
	tb_json_member(&b, KEY("error"), j->error);
	tb_json_member(&b, KEY("suspendPayload"), j->suspend_payload);
	tb_json_member(&b, KEY("resumeData"), j->resume_data);
	tb_json_member(&b, KEY("checkpoint"), j->checkpoint);
	if (j->approval_required)
		TB_LIT(&b, ",\"approval\":{\"required\":true,\"decision\":");
	else
		TB_LIT(&b, ",\"approval\":{\"required\":false,\"decision\":");
	if (j->decision == STORE_DECISION_APPROVED)
		TB_LIT(&b, "\"approved\"");
	else if (j->decision == STORE_DECISION_DECLINED)
		TB_LIT(&b, "\"declined\"");
	else
		TB_LIT(&b, "null");
	if (j->decision == STORE_DECISION_APPROVED)
		tb_str_member(&b, KEY("note"), j->reason);
	else
		tb_str_member(&b, KEY("reason"), j->reason);
	tb_time_member(&b, KEY("decidedAt"), j->decided_at);
	if (j->decision != STORE_DECISION_NONE) {
		TB_LIT(&b, ",\"decidedBy\":{\"name\":");
		tb_string(&b, decided_by, strlen(decided_by));
		tb_str_member(&b, KEY("via"), j->decided_via);
		TB_LIT(&b, "}");
	}
	if (j->approval_required) {
		tb_int_member(&b, KEY("quorum"), j->quorum > 0 ? j->quorum : 1);
		TB_LIT(&b, ",\"approvals\":");
		if (j->approvals)
			tb_value(&b, j->approvals, 2);
		else
			TB_LIT(&b, "[]");
	}
	TB_LIT(&b, "}");
	tb_json_member(&b, KEY("progress"), j->progress);
	tb_str_member(&b, KEY("retryOf"), j->retry_of);
	tb_time_member(&b, KEY("createdAt"), j->created_at);
	tb_time_member(&b, KEY("updatedAt"), j->updated_at);
	tb_time_member(&b, KEY("startedAt"), j->started_at);
	tb_time_member(&b, KEY("finishedAt"), j->finished_at);
	TB_LIT(&b, "}");
	char *text = tb_finish(&b);
	return text != NULL ? text : dump_tree(store_job_to_json(j));
}

/* The members and their order are store_event_to_json's; an event is
 * serialized once per subscriber batch, and building its tree first cost
 * more than writing it (callgrind, e2e). */
char *store_event_text(const struct store_event *ev)
{
	struct text_buf b;

	tb_init(&b);
	TB_LIT(&b, "{\"seq\":");
	tb_int(&b, ev->seq);
	TB_LIT(&b, ",\"jobId\":");
	tb_string(&b, ev->job_id, strlen(ev->job_id));
	tb_str_member(&b, KEY("tool"), ev->tool);
	tb_str_member(&b, KEY("type"), store_event_name(ev->type));
	tb_str_member(&b, KEY("status"), store_status_name(ev->status));
	tb_time_member(&b, KEY("at"), ev->at);
	tb_str_member(&b, KEY("by"), ev->by ? ev->by : UNKNOWN);
	tb_str_member(&b, KEY("via"), ev->via);
	tb_json_member(&b, KEY("client"), ev->client);
	tb_json_member(&b, KEY("data"), ev->data);
	TB_LIT(&b, "}");
	char *text = tb_finish(&b);
	return text != NULL ? text : dump_tree(store_event_to_json(ev));
}

void store__final_texts(const struct store__wreq *w,
			const struct store__wreq *then,
			const char *t[STORE__T_COUNT])
{
	static const struct {
		unsigned bit;
		int text;
	} by[] = {
		{STORE_SET_OUTPUT, STORE__T_OUTPUT},
		{STORE_SET_OUTPUT, STORE__T_MODEL_OUTPUT},
		{STORE_SET_ERROR, STORE__T_ERROR},
		{STORE_SET_SUSPEND, STORE__T_SUSPEND},
		{STORE_SET_RESUME, STORE__T_RESUME},
		{STORE_SET_CHECKPOINT, STORE__T_CHECKPOINT},
		{STORE_SET_PROGRESS, STORE__T_PROGRESS},
		{STORE_SET_APPROVALS, STORE__T_APPROVALS},
		{STORE_SET_VIEWS, STORE__T_VIEWS},
	};
	unsigned set = then != NULL ? then->req->u.transition.set : 0;

	for (size_t i = 0; i < STORE__T_COUNT; i++)
		t[i] = w->text[i];
	for (size_t i = 0; i < sizeof(by) / sizeof(by[0]); i++)
		if (set & by[i].bit)
			t[by[i].text] = then->text[by[i].text];
}

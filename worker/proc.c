/*
 * proc.c: external tools, run as child processes (no thread held).
 *
 * The process protocol (docs/TOOLS.md has all of it): berthd writes one
 * JSON line to the child's stdin
 *   {"jobId", "tool", "attempt", "toolCallId", "runId", "input",
 *    "requestContext", "metadata", "mcp", "resumeData",
 *    "suspendPayload", "checkpoint"}   (absent values omitted)
 * with the input, request context and resume data as execute gets them
 * (their schemas' defaults filled in), and closes it. The child writes JSON lines to stdout: any number of
 *   {"progress": {"progress", "total"?, "message"?}}
 *   {"log": {"level", "message", ...data}}
 *   {"checkpoint": VALUE}
 * then one final line, {"output": V, "modelOutput"?: V}, {"suspend": V} or
 * {"error": {"message", "retryable", "data"}}, and exits. Its stderr
 * becomes the job's log. A line that is not a JSON object fails the job
 * (the child is killed); exiting without a final line is a retryable error
 * quoting the exit status and the end of stderr.
 *
 * The child is started by spawn.c's spawner, off the loop thread: it leads
 * its own session and process group, so that a cancel or a timeout
 * reaches the shell script and everything it started (SIGTERM to the
 * group, SIGKILL after the kill grace); it dies with berthd; it has
 * nothing open above 2. Its exit is learnt through a pidfd, polled on the
 * loop. The run's timeout starts once the process has (spawned); until
 * then its start timeout bounds the wait (run.c). A cancel, a shutdown or
 * the start timeout while it is being started keeps it from starting, or
 * stops it as soon as it has.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/utf8.h"
#include "store/jload.h"
#include "worker/internal.h"

/* How much of the end of stderr an error message quotes. */
#define STDERR_TAIL 1024

/* The environment variables a tool inherits from berthd; everything else
 * is scrubbed (a token in berthd's environment is not a tool's business). */
static const char *const inherited_env[] = {
	"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "USER",
	"LOGNAME", NULL,
};

struct worker__proc {
	struct worker__run *run; /* holds a reference */
	pid_t pid;               /* the process, and its group */
	int64_t start_min, start_max; /* around its start (orphans.c) */
	bool recorded;           /* its group is recorded in the store */
	int pidfd;               /* readable once it exited; closed last */
	uv_poll_t exit_poll;     /* on pidfd */
	uv_pipe_t in, out, err;
	uv_timer_t kill_timer;
	int open; /* handles not yet closed */
	bool spawned, polled, reaped, in_closed, exited, out_eof, err_eof, ended;
	bool has_final, term_sent;
	int64_t exit_status;
	int term_signal;
	int64_t max_out, max_log, grace;

	uv_write_t wreq;
	char *inbuf;

	/* Its start, made by the spawner (spawned): the request and the
	 * environment, kept until the start is done. */
	struct worker__spawn_req req;
	bool spawning;
	char **env;

	char *line; /* stdout, an unfinished line */
	size_t len, cap;
	int64_t out_total;
	char *eline; /* stderr, an unfinished line */
	size_t elen, ecap;
	int64_t err_total;
	char tail[STDERR_TAIL]; /* the end of stderr */
	size_t tail_len;
};

static void free_env(char **env);

static void proc_free(struct worker__proc *p)
{
	if (p->pidfd >= 0)
		close(p->pidfd);
	free_env(p->env);
	free(p->inbuf);
	free(p->line);
	free(p->eline);
	free(p);
}

static void handle_closed(uv_handle_t *h)
{
	struct worker__proc *p = h->data;
	struct worker__run *r = p->run;

	if (--p->open > 0)
		return;
	r->proc = NULL;
	proc_free(p);
	worker__run_exec_ended(r);
	worker__run_unref(r);
}

static void kill_group(struct worker__proc *p, int sig);

/* close_all ends the process's part in the run: whatever is left in its
 * group is SIGKILLed, the process is reaped, and the handles are closed
 * (the last close ends the executor). Only once the process has exited:
 * its zombie kept the group id from being used again until now. */
static void close_all(struct worker__proc *p)
{
	uv_handle_t *hs[] = {
		(uv_handle_t *)&p->exit_poll, (uv_handle_t *)&p->in,
		(uv_handle_t *)&p->out,	      (uv_handle_t *)&p->err,
		(uv_handle_t *)&p->kill_timer,
	};

	if (p->spawned && !p->reaped) {
		kill_group(p, SIGKILL);
		worker__spawn_reap(p->pid);
		p->reaped = true;
	}
	/* Reaped: nothing of the group is left for a restart to kill. */
	if (p->recorded && p->run->w) {
		worker__orphans_record(p->run->w, p->run->job->id, p->pid,
				       p->start_min, p->start_max, true);
		p->recorded = false;
	}
	/* The poll exists unless its init failed (worker__proc_start). */
	for (size_t i = p->polled ? 0 : 1; i < sizeof(hs) / sizeof(hs[0]); i++)
		if (!uv_is_closing(hs[i]))
			uv_close(hs[i], handle_closed);
}

static void kill_group(struct worker__proc *p, int sig)
{
	if (p->spawned && p->pid > 0)
		kill(-p->pid, sig);
}

static void kill_timer_cb(uv_timer_t *h)
{
	struct worker__proc *p = h->data;

	if (p->exited)
		return;
	if (!p->term_sent) {
		p->term_sent = true;
		kill_group(p, SIGTERM);
		uv_timer_start(&p->kill_timer, kill_timer_cb,
			       (uint64_t)p->grace, 0);
		return;
	}
	kill_group(p, SIGKILL);
}

/* unwanted tells the spawner that p's process is no longer wanted: one
 * not started yet never is; one started meanwhile is stopped once its
 * start is done (spawned). Returns true while the start is under way. */
static bool unwanted(struct worker__proc *p)
{
	if (!p->spawning)
		return false;
	atomic_store(&p->req.cancel, true);
	return true;
}

void worker__proc_kill(struct worker__proc *p, bool reap)
{
	if (unwanted(p) || !p->spawned || p->exited)
		return;
	if (reap) {
		/* The final line is in; give the child the grace to exit on
		 * its own before it is told to. */
		if (!p->term_sent && !uv_is_active((uv_handle_t *)&p->kill_timer))
			uv_timer_start(&p->kill_timer, kill_timer_cb,
				       (uint64_t)p->grace, 0);
		return;
	}
	if (p->term_sent)
		return;
	p->term_sent = true;
	kill_group(p, SIGTERM);
	uv_timer_start(&p->kill_timer, kill_timer_cb, (uint64_t)p->grace, 0);
}

void worker__proc_kill_now(struct worker__proc *p)
{
	if (unwanted(p) || !p->spawned || p->exited)
		return;
	p->term_sent = true;
	uv_timer_stop(&p->kill_timer);
	kill_group(p, SIGKILL);
}

/* final hands an outcome to the run (once). */
static void drain_err(struct worker__proc *p);
static void end_err(struct worker__proc *p);

/* final hands the run its outcome. What the tool wrote to stderr before
 * its final line is read first, so that its log lines commit before the
 * job's end: the loop may read stdout first when both pipes are ready. */
static void final(struct worker__proc *p, struct berth_outcome o)
{
	if (p->has_final) {
		worker__outcome_finish(&o);
		return;
	}
	p->has_final = true;
	drain_err(p);
	worker__run_outcome(p->run, &o);
}

/* protocol_error fails the job for a child that broke the protocol, and
 * stops the child. */
static void protocol_error(struct worker__proc *p, const char *what,
			   const char *line, size_t len)
{
	char excerpt[201];
	size_t n = len < 200 ? len : 200;

	memcpy(excerpt, line ? line : "", line ? n : 0);
	excerpt[line ? n : 0] = '\0';
	final(p, berth_error(false, NULL, "%s%s%s", what,
			     line ? ": " : "", excerpt));
	worker__proc_kill(p, false);
}

static void handle_line(struct worker__proc *p, const char *s, size_t len);
static void err_line(struct worker__proc *p, const char *s, size_t len);

static void maybe_end(struct worker__proc *p)
{
	char status[64];
	char *stderr_text;

	if (!p->exited || !p->out_eof || !p->err_eof || p->ended)
		return;
	p->ended = true;
	/* A last line without its newline still counts. */
	if (p->line && p->len > 0 && !p->has_final)
		handle_line(p, p->line, p->len);
	p->len = 0;
	if (!p->has_final) {
		if (p->term_signal)
			snprintf(status, sizeof(status), "was killed by signal %d",
				 p->term_signal);
		else
			snprintf(status, sizeof(status),
				 "exited with status %lld",
				 (long long)p->exit_status);
		/* The tail may begin inside a character: data's stderr is
		 * made UTF-8 (the message is, by the run). */
		stderr_text = berth_utf8_repair(p->tail, p->tail_len);
		final(p, berth_error(
				 true,
				 json_pack("{s:I, s:i, s:s*}", "exitStatus",
					   (json_int_t)p->exit_status, "signal",
					   p->term_signal, "stderr",
					   stderr_text),
				 "the tool %s without a final line; stderr "
				 "ends with: %s",
				 status, p->tail_len && stderr_text
						 ? stderr_text : "(nothing)"));
		free(stderr_text);
	}
	close_all(p);
}

/* reap_grace_cb: the process exited a while ago, and its pipes are still
 * open: a process it left behind holds them, in its group or out of it.
 * The group is killed (close_all) and the pipes are no longer read, so
 * that nothing but the tool's own process holds a slot. */
static void reap_grace_cb(uv_timer_t *h)
{
	struct worker__proc *p = h->data;

	if (!p->out_eof) {
		uv_read_stop((uv_stream_t *)&p->out);
		p->out_eof = true;
	}
	if (!p->err_eof) {
		uv_read_stop((uv_stream_t *)&p->err);
		end_err(p);
	}
	maybe_end(p);
}

/* exit_cb: the pidfd is readable: the process has exited (or the poll
 * failed, and it is killed). It is reaped by close_all, once the run is
 * over. */
static void exit_cb(uv_poll_t *h, int pstatus, int events)
{
	struct worker__proc *p = h->data;
	int64_t status = 0;
	int sig = 0;
	int rc = worker__spawn_exited(p->pid, &status, &sig);

	if (rc == 0 && pstatus == 0)
		return; /* not yet: a spurious wake-up */
	if (rc <= 0) {
		/* The poll failed: the process cannot be watched, so it is
		 * not left running unwatched. */
		kill_group(p, SIGKILL);
		worker__spawn_reap(p->pid);
		p->reaped = true;
		status = 0;
		sig = SIGKILL;
	}
	uv_poll_stop(h);
	p->exited = true;
	p->exit_status = status;
	p->term_signal = sig;
	uv_timer_stop(&p->kill_timer);
	/* Its output still in the pipes is read; a process it left behind
	 * holding them gets the reap grace, then its group is killed and
	 * the slot freed (docs/RELIABILITY.md). */
	if (!p->out_eof || !p->err_eof)
		uv_timer_start(&p->kill_timer, reap_grace_cb,
			       WORKER__REAP_GRACE_MS, 0);
	maybe_end(p);
}

/* ---- stdout ----------------------------------------------------------- */

int worker__parse_line(const char *s, size_t len, struct worker__line *out)
{
	json_error_t jerr;
	json_t *o, *v;

	memset(out, 0, sizeof(*out));
	if (len && s[len - 1] == '\r')
		len--;
	if (len == 0)
		return 0;
	o = store_json_load(s, len, 0, &jerr);
	if (!json_is_object(o)) {
		/* jansson's words say which: not JSON, or JSON berth does not
		 * take (a U+0000, an integer beyond 64 bits). */
		snprintf(out->why, sizeof out->why,
			 o ? "the tool wrote a line that is not a JSON object"
			   : "the tool wrote a line that is not a JSON object "
			     "berth takes (%.160s)",
			 jerr.text);
		json_decref(o);
		return -EINVAL;
	}
	v = json_object_get(json_object_get(o, "error"), "retryable");
	if (worker__finals(o) > 1) {
		snprintf(out->why, sizeof out->why,
			 "the tool's final line holds more than one of output, "
			 "suspend and error");
	} else if (v && !json_is_boolean(v)) {
		snprintf(out->why, sizeof out->why,
			 "the tool's error has a retryable that is not true or "
			 "false");
	}
	if (out->why[0]) {
		json_decref(o);
		return -EINVAL;
	}
	out->obj = o;
	if ((v = json_object_get(o, "progress"))) {
		if (json_is_object(v) &&
		    json_is_number(json_object_get(v, "progress")) &&
		    (out->progress = json_deep_copy(v)))
			out->has |= WORKER__LINE_PROGRESS;
		else
			out->has |= WORKER__LINE_BAD_PROGRESS;
	}
	if ((v = json_object_get(o, "log"))) {
		const char *level = json_string_value(json_object_get(v, "level"));
		const char *msg = json_string_value(json_object_get(v, "message"));

		out->has |= WORKER__LINE_LOG;
		out->log_level = level ? level : "info";
		out->log_message = msg			? msg
				   : json_is_string(v) ? json_string_value(v)
						       : "";
		out->log_data = json_is_object(v) ? json_deep_copy(v) : NULL;
		if (out->log_data) {
			json_object_del(out->log_data, "level");
			json_object_del(out->log_data, "message");
			if (json_object_size(out->log_data) == 0) {
				json_decref(out->log_data);
				out->log_data = NULL;
			}
		}
	}
	if ((v = json_object_get(o, "checkpoint"))) {
		out->has |= WORKER__LINE_CHECKPOINT;
		out->checkpoint = json_incref(v);
	}
	if ((v = json_object_get(o, "output"))) {
		json_t *mo = json_object_get(o, "modelOutput");

		out->final = berth_output_model(json_incref(v),
						mo ? json_incref(mo) : NULL);
	} else if ((v = json_object_get(o, "suspend"))) {
		out->final = berth_suspend(json_incref(v));
	} else if ((v = json_object_get(o, "error"))) {
		const char *msg = json_is_string(v)
					  ? json_string_value(v)
					  : json_string_value(
						    json_object_get(v, "message"));
		json_t *data = json_object_get(v, "data");

		out->final = berth_error(
			json_is_true(json_object_get(v, "retryable")),
			data ? json_incref(data) : NULL, "%s",
			msg ? msg : "the tool reported an error");
	}
	if (out->final.kind)
		out->has |= WORKER__LINE_FINAL;
	return 0;
}

void worker__line_finish(struct worker__line *l)
{
	json_decref(l->progress);
	json_decref(l->log_data);
	json_decref(l->checkpoint);
	worker__outcome_finish(&l->final);
	json_decref(l->obj);
	memset(l, 0, sizeof(*l));
}

/* handle_line acts on one stdout line of the child. */
static void handle_line(struct worker__proc *p, const char *s, size_t len)
{
	struct worker__run *r = p->run;
	struct worker__line l;

	if (p->has_final)
		return;
	if (worker__parse_line(s, len, &l)) {
		char why[sizeof l.why];

		memcpy(why, l.why, sizeof why);
		worker__line_finish(&l);
		protocol_error(p, why, s, len);
		return;
	}
	if (l.has & WORKER__LINE_PROGRESS) {
		worker__run_progress(r, l.progress);
		l.progress = NULL;
	}
	if (l.has & WORKER__LINE_BAD_PROGRESS)
		worker__run_log(r, "warn",
				"ignored a progress line without a number "
				"\"progress\"",
				NULL);
	if (l.has & WORKER__LINE_LOG)
		worker__run_log(r, l.log_level, l.log_message, l.log_data);
	if (l.has & WORKER__LINE_CHECKPOINT) {
		worker__run_checkpoint(r, l.checkpoint, NULL);
		l.checkpoint = NULL;
	}
	if (l.has & WORKER__LINE_FINAL) {
		final(p, l.final);
		memset(&l.final, 0, sizeof(l.final));
	}
	worker__line_finish(&l);
}

/* alloc_buf gives every read of every process the worker's one read
 * buffer: a read callback consumes what it got before it returns (a line
 * left unfinished is copied into the process's own line buffer), and the
 * loop runs one callback at a time. A buffer per process, zeroed, cost
 * more than the rest of starting it. */
static void alloc_buf(uv_handle_t *h, size_t size, uv_buf_t *buf)
{
	struct worker__proc *p = h->data;

	*buf = uv_buf_init(p->run->w->proc_buf, WORKER__PROC_BUF);
}

/* append adds n bytes to a growing line buffer. */
static int append(char **b, size_t *len, size_t *cap, const char *s, size_t n)
{
	if (*len + n > *cap) {
		size_t c = *cap ? *cap : 4096;
		char *x;

		while (c < *len + n)
			c *= 2;
		x = realloc(*b, c);
		if (!x)
			return -ENOMEM;
		*b = x;
		*cap = c;
	}
	memcpy(*b + *len, s, n);
	*len += n;
	return 0;
}

static void read_out(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct worker__proc *p = s->data;
	const char *d = buf->base, *end, *nl;

	if (n < 0) {
		uv_read_stop(s);
		p->out_eof = true;
		maybe_end(p);
		return;
	}
	p->out_total += n;
	if (p->out_total > p->max_out) {
		char msg[96];

		snprintf(msg, sizeof(msg),
			 "the tool wrote more than %lld bytes to stdout",
			 (long long)p->max_out);
		protocol_error(p, msg, NULL, 0);
		kill_group(p, SIGKILL);
		uv_read_stop(s);
		p->out_eof = true;
		maybe_end(p);
		return;
	}
	end = d + n;
	while (d < end && (nl = memchr(d, '\n', (size_t)(end - d)))) {
		if (p->len) {
			if (append(&p->line, &p->len, &p->cap, d,
				   (size_t)(nl - d)) == 0)
				handle_line(p, p->line, p->len);
			p->len = 0;
		} else {
			handle_line(p, d, (size_t)(nl - d));
		}
		d = nl + 1;
	}
	if (d < end && append(&p->line, &p->len, &p->cap, d,
			      (size_t)(end - d))) {
		protocol_error(p, "out of memory reading the tool's output",
			       NULL, 0);
		p->len = 0;
	}
}

/* ---- stderr ----------------------------------------------------------- */

static void err_line(struct worker__proc *p, const char *s, size_t len)
{
	char *line;

	if (len && s[len - 1] == '\r')
		len--;
	if (p->run->log_capped)
		return;
	/* A NUL the tool wrote is U+FFFD, as a byte that is not UTF-8 is:
	 * the line goes on past it (strndup stopped there). */
	line = berth_utf8_repair(s, len);
	if (line)
		worker__run_log(p->run, "stderr", line, NULL);
	free(line);
}

static void keep_tail(struct worker__proc *p, const char *d, size_t n)
{
	if (n >= STDERR_TAIL) {
		memcpy(p->tail, d + n - STDERR_TAIL, STDERR_TAIL);
		p->tail_len = STDERR_TAIL;
		return;
	}
	if (p->tail_len + n > STDERR_TAIL) {
		size_t drop = p->tail_len + n - STDERR_TAIL;
		memmove(p->tail, p->tail + drop, p->tail_len - drop);
		p->tail_len -= drop;
	}
	memcpy(p->tail + p->tail_len, d, n);
	p->tail_len += n;
}

/* err_data makes log lines of n bytes of stderr, until the run's log is
 * full (worker__run_log); its end is kept for error messages whatever
 * the cap. */
static void err_data(struct worker__proc *p, const char *d, size_t n)
{
	const char *end, *nl;

	keep_tail(p, d, n);
	p->err_total += n;
	if (p->run->log_capped)
		return;
	end = d + n;
	while (d < end && (nl = memchr(d, '\n', (size_t)(end - d)))) {
		if (p->elen) {
			if (append(&p->eline, &p->elen, &p->ecap, d,
				   (size_t)(nl - d)) == 0)
				err_line(p, p->eline, p->elen);
			p->elen = 0;
		} else {
			err_line(p, d, (size_t)(nl - d));
		}
		d = nl + 1;
	}
	if (d < end) {
		/* A line longer than the whole log is not kept for it. */
		if (p->elen + (size_t)(end - d) > (size_t)p->max_log) {
			p->elen = 0;
			worker__run_log_full(p->run);
		} else {
			append(&p->eline, &p->elen, &p->ecap, d,
			       (size_t)(end - d));
		}
	}
}

static void end_err(struct worker__proc *p)
{
	if (p->elen)
		err_line(p, p->eline, p->elen);
	p->elen = 0;
	p->err_eof = true;
}

static void read_err(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct worker__proc *p = s->data;

	if (n < 0) {
		uv_read_stop(s);
		end_err(p);
		maybe_end(p);
		return;
	}
	err_data(p, buf->base, (size_t)n);
}

/* drain_err reads what is in the stderr pipe now, without waiting (the
 * pipe is nonblocking, as uv_pipe_open leaves it), and at most 1 MiB, so
 * that a process writing on cannot hold the loop; its end of file is left
 * to read_err. The final line's own read may be using the worker's read
 * buffer, so this one is on the stack. */
static void drain_err(struct worker__proc *p)
{
	char buf[4096];
	uv_os_fd_t fd;
	ssize_t n;
	size_t total = 0;

	if (p->err_eof || uv_fileno((uv_handle_t *)&p->err, &fd))
		return;
	while (total < 1024 * 1024 &&
	       (n = read(fd, buf, sizeof(buf))) > 0) {
		err_data(p, buf, (size_t)n);
		total += (size_t)n;
	}
}

/* ---- stdin ------------------------------------------------------------ */

static void write_cb(uv_write_t *req, int status)
{
	struct worker__proc *p = req->data;

	/* EPIPE: the child did not read its input; that is its business,
	 * and its exit tells the rest. */
	free(p->inbuf);
	p->inbuf = NULL;
	if (!uv_is_closing((uv_handle_t *)&p->in))
		uv_close((uv_handle_t *)&p->in, handle_closed);
}

/* input_line returns the line for r's process (malloc'd, with its
 * newline): what a C tool's execute gets from its arguments and context,
 * the input, request context and resume data as the run prepared them. */
static char *input_line(const struct worker__run *r)
{
	const struct store_job *j = r->job;
	/* "O*" leaves an absent value out ("O?" would write null). */
	json_t *o = json_pack("{s:s, s:s, s:i, s:s*, s:s*, s:O, s:O*, s:O*, "
			      "s:O*, s:O*, s:O*, s:O*}",
			      "jobId", j->id, "tool", j->tool, "attempt",
			      j->attempt, "toolCallId", j->tool_call_id,
			      "runId", j->run_id, "input", r->p_input,
			      "requestContext", r->p_rc, "metadata",
			      j->metadata, "mcp",
			      json_object_get(j->metadata, WORKER__MCP_META),
			      "resumeData", r->p_resume, "suspendPayload",
			      j->suspend_payload, "checkpoint", j->checkpoint);
	char *s, *line = NULL;

	if (!o)
		return NULL;
	s = json_dumps(o, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(o);
	if (s) {
		line = worker__errmsg("%s\n", s);
		free(s);
	}
	return line;
}

/* ---- start ------------------------------------------------------------ */

static bool overridden(char **env, const char *name)
{
	size_t n = strlen(name);

	for (; env && *env; env++)
		if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
			return true;
	return false;
}

/* build_env returns the child's environment (malloc'd, NULL-ended; every
 * string malloc'd): the manifest's env, then the inherited variables it
 * does not name, then berth's own. */
static char **build_env(const struct worker__cmd *cmd,
			const struct store_job *j)
{
	size_t n = 0, i = 0;
	char **env;

	for (char **e = cmd->env; e && *e; e++)
		n++;
	n += sizeof(inherited_env) / sizeof(inherited_env[0]) + 4;
	env = calloc(n, sizeof(char *));
	if (!env)
		return NULL;
	for (char **e = cmd->env; e && *e; e++)
		env[i++] = strdup(*e);
	for (const char *const *k = inherited_env; *k; k++) {
		const char *v = getenv(*k);

		if (strcmp(*k, "PATH") == 0 && !v)
			v = "/usr/local/bin:/usr/bin:/bin";
		if (v && !overridden(cmd->env, *k))
			env[i++] = worker__errmsg("%s=%s", *k, v);
	}
	env[i++] = worker__errmsg("BERTH_JOB_ID=%s", j->id);
	env[i++] = worker__errmsg("BERTH_TOOL=%s", j->tool);
	env[i++] = worker__errmsg("BERTH_ATTEMPT=%d", j->attempt);
	return env;
}

static void free_env(char **env)
{
	for (char **e = env; e && *e; e++)
		free(*e);
	free(env);
}

static void spawned(struct worker__spawn_req *req);

int worker__proc_start(struct worker__run *r, char **errmsg)
{
	const struct worker__cmd *cmd = r->tool->cmd;
	struct worker *w = r->w;
	struct worker__proc *p = calloc(1, sizeof(*p));

	*errmsg = NULL;
	if (!w->proc_buf)
		w->proc_buf = malloc(WORKER__PROC_BUF);
	if (!w->spawner)
		w->spawner = worker__spawner_create(w->loop,
						    WORKER__SPAWN_THREADS);
	if (!p || !w->proc_buf || !w->spawner) {
		free(p);
		return -ENOMEM;
	}
	p->pidfd = -1;
	p->run = r;
	p->max_out = w->cfg.max_output_bytes;
	p->max_log = w->cfg.max_log_bytes;
	p->grace = w->cfg.kill_grace_ms;
	p->inbuf = input_line(r);
	p->env = build_env(cmd, r->job);
	if (!p->inbuf || !p->env) {
		proc_free(p);
		return -ENOMEM;
	}
	uv_pipe_init(w->loop, &p->in, 0);
	uv_pipe_init(w->loop, &p->out, 0);
	uv_pipe_init(w->loop, &p->err, 0);
	uv_timer_init(w->loop, &p->kill_timer);
	p->in.data = p->out.data = p->err.data = p->kill_timer.data = p;
	p->exit_poll.data = p;
	p->open = 4;
	/* The run is the process's from here: handle_closed ends it. */
	worker__run_ref(r);
	r->proc = p;
	r->exec_started = true;
	/* Started off the loop thread: the clone returns once the child
	 * has exec'd, a millisecond or more on a busy machine, which on the
	 * loop held up every other client and job (docs/BENCHMARKS.md). The
	 * spawner makes the pipes too, just before the clone: pipes made
	 * here for every start still queued would be copied into each
	 * child's descriptor table and closed by it again. */
	p->req.s.argv = cmd->argv;
	p->req.s.env = p->env;
	p->req.s.cwd = cmd->cwd;
	p->req.done = spawned;
	p->req.data = p;
	atomic_init(&p->req.cancel, false);
	atomic_init(&p->req.begun, false);
	p->spawning = true;
	worker__spawner_submit(w->spawner, &p->req);
	return 0;
}

/* watch makes the parent's ends of the pipes of p's process (fds, which
 * it takes) the process's handles, starts reading its output and writes
 * its input. Returns 0 or a libuv error, with every descriptor closed. */
static int watch(struct worker__proc *p, int fds[3])
{
	uv_buf_t b;
	int rc;

	if ((rc = uv_pipe_open(&p->in, fds[0])) == 0)
		fds[0] = -1;
	if (rc == 0 && (rc = uv_pipe_open(&p->out, fds[1])) == 0)
		fds[1] = -1;
	if (rc == 0 && (rc = uv_pipe_open(&p->err, fds[2])) == 0)
		fds[2] = -1;
	worker__spawn_close(fds);
	if (rc == 0)
		rc = uv_poll_init(p->kill_timer.loop, &p->exit_poll, p->pidfd);
	if (rc)
		return rc;
	p->polled = true;
	p->open++;
	rc = uv_poll_start(&p->exit_poll, UV_READABLE, exit_cb);
	if (rc)
		return rc;
	uv_read_start((uv_stream_t *)&p->out, alloc_buf, read_out);
	uv_read_start((uv_stream_t *)&p->err, alloc_buf, read_err);
	b = uv_buf_init(p->inbuf, (unsigned)strlen(p->inbuf));
	p->wreq.data = p;
	if (uv_write(&p->wreq, (uv_stream_t *)&p->in, &b, 1, write_cb))
		uv_close((uv_handle_t *)&p->in, handle_closed);
	return 0;
}

bool worker__proc_exec_begun(const struct worker__proc *p)
{
	return p->spawning && atomic_load(&p->req.begun);
}

/* spawned: the spawner has started p's process, or failed to. */
static void spawned(struct worker__spawn_req *req)
{
	struct worker__proc *p = req->data;
	struct worker__run *r = p->run;
	int rc = req->rc;

	p->spawning = false;
	free_env(p->env);
	p->env = NULL;
	if (rc) {
		/* Nothing runs. Unless a cancel, the start timeout or a
		 * shutdown decided the run meanwhile (a start it no longer
		 * wanted), it fails with the reason. */
		if (rc != -ECANCELED || !atomic_load(&r->aborted)) {
			char *why = worker__errmsg(
				"%s: %s (%s)", r->tool->cmd->argv[0],
				strerror(-rc), worker__spawn_step_name(req->step));

			worker__run_start_failed(r, why ? why : strerror(-rc));
			free(why);
		}
		p->exited = p->out_eof = p->err_eof = p->ended = true;
		p->has_final = true;
		close_all(p);
		return;
	}
	p->pid = req->pid;
	p->pidfd = req->pidfd;
	p->start_min = req->start_min;
	p->start_max = req->start_max;
	p->spawned = true;
	/* The tool runs from here, and its timeout counts from here: the
	 * wait for its start (a backlog of starts, an exec the kernel held
	 * up) was the start timeout's (worker__run_arm_start). */
	worker__run_arm_timeout(r);
	/* Recorded, so that a berthd restarted after a crash can kill what
	 * the process started (orphans.c). The record may commit after the
	 * tool began: the leader is SIGKILLed with berthd in any case. */
	if (r->w) {
		worker__orphans_record(r->w, r->job->id, p->pid, p->start_min,
				       p->start_max, false);
		p->recorded = true;
	}
	rc = watch(p, req->parent);
	if (rc) {
		/* The process runs but cannot be watched: it is killed and
		 * reaped, and the run fails with the reason (as an outcome,
		 * the path of a process that exited). */
		kill_group(p, SIGKILL);
		worker__spawn_reap(p->pid);
		p->reaped = true;
		p->exited = p->out_eof = p->err_eof = true;
		p->ended = true;
		final(p, berth_error(false, NULL,
				     "tool %s could not be watched: %s",
				     r->job->tool, uv_strerror(rc)));
		close_all(p);
		return;
	}
	/* A cancel, the start timeout or a shutdown came while it was being
	 * started: what worker__proc_kill would have done then. */
	if (atomic_load(&r->aborted)) {
		if (r->w && r->w->now)
			worker__proc_kill_now(p);
		else
			worker__proc_kill(p, r->abort_reason ==
						     WORKER__ABORT_FINISHED);
	}
}

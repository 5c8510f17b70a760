/*
 * loadgen.c: berth-bench, the load generator: options, one run of load
 * (producer threads and consumer threads over a target), the join of what
 * producers sent with what consumers saw finish, and the table.
 *
 * A producer connection keeps up to --inflight requests outstanding; with
 * 1 it is one round trip per job. With --rate the load is an open loop:
 * each job is due at a fixed time, its latency counts from then (so a slow
 * reply delays the measure of the jobs behind it rather than hiding them),
 * and the connections share the rate evenly. Every run is bounded by
 * --count jobs and --duration seconds.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "berth/client.h"
#include "idmap.h"
#include "loadgen.h"

/* After the producers stop, consumers wait at most this long for the jobs
 * already acknowledged to finish. */
#define DRAIN_NS (10ull * 1000000000u)

static const char *const scenario_names[] = {
	[SC_SUBMIT] = "submit",   [SC_E2E] = "e2e",   [SC_SUSPEND] = "suspend",
	[SC_APPROVE] = "approve", [SC_LATENCY] = "latency",
	[SC_FILL] = "fill",       [SC_SCALE] = "scale",
	[SC_WORKER] = "worker",   [SC_PING] = "ping",
};

static const struct link_ops *ops_of(const struct loadgen_opts *o)
{
	return o->target == TARGET_BERTH ? &link_berth : &link_beanstalk;
}

int loadgen_record_done(struct loadgen_consumer *c, const char *id,
			uint64_t at)
{
	if (c->ndone == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 65536;
		struct loadgen_done *d = realloc(c->done, cap * sizeof *d);

		if (!d)
			return -ENOMEM;
		c->done = d;
		c->cap = cap;
	}
	c->done[c->ndone].at = at;
	snprintf(c->done[c->ndone].id, LOADGEN_ID_MAX, "%s", id);
	c->ndone++;
	return 0;
}

bool loadgen_consumer_should_stop(struct loadgen_run *r)
{
	if (atomic_load(&r->stop))
		return true;
	if (atomic_load(&r->producers_left) == 0 &&
	    atomic_load(&r->finished) >= atomic_load(&r->acked))
		return true;
	return stats_now() > atomic_load(&r->deadline) + DRAIN_NS;
}

struct producer {
	struct loadgen_run *r;
	int index;
	size_t first, n; /* its share: jobs[first, first + n) */
};

/* produce is a producer thread: it sends its share of jobs, keeping up to
 * --inflight outstanding (and, with --rate, sending each when it is due),
 * and notes each acknowledgement. */
static void *produce(void *arg)
{
	struct producer *p = arg;
	struct loadgen_run *r = p->r;
	const struct loadgen_opts *o = r->o;
	const struct link_ops *ops = ops_of(o);
	uint64_t period = 0, due = r->t0, deadline = atomic_load(&r->deadline);
	size_t next = 0, answered = 0, inflight = 0;
	bool readable = false;
	void *l = ops->open(r, p->index);

	if (!l)
		goto out;
	if (o->rate > 0) {
		/* Connection i sends at t0 + i/rate + k*connections/rate:
		 * together an even stream at the rate asked for. */
		period = (uint64_t)(1e9 * o->connections / o->rate);
		due = r->t0 + (uint64_t)(1e9 * p->index / o->rate);
	}
	while (answered < p->n) {
		uint64_t now = stats_now(), wait;
		struct pollfd pfd = { .fd = ops->fd(l), .events = POLLIN };
		struct timespec ts;
		int rc;

		if (now >= deadline)
			break;
		while (next < p->n && inflight < (size_t)o->inflight &&
		       (!period || due <= now)) {
			struct loadgen_job *j = &r->jobs[p->first + next];

			j->sent = period ? due : now;
			if (ops->send(l, p->first + next) < 0) {
				fprintf(stderr, "berth-bench: connection %d: "
					"send failed\n", p->index);
				goto out;
			}
			next++;
			inflight++;
			due += period;
		}
		/* Read the replies that are there. Only after poll said so:
		 * a drain that ended empty left no whole line buffered, so
		 * until the socket is readable there is nothing to read, and
		 * a round trip costs a send, a poll and a read. */
		while (readable && inflight > 0) {
			size_t tag;
			char id[LOADGEN_ID_MAX];
			bool failed = false;

			rc = ops->recv(l, &tag, id, &failed);
			if (rc < 0) {
				fprintf(stderr, "berth-bench: connection %d: "
					"%s\n", p->index, strerror(-rc));
				goto out;
			}
			if (rc == 0)
				break;
			if (tag < p->first || tag >= p->first + p->n) {
				fprintf(stderr, "berth-bench: connection %d: "
					"a reply to a request never sent\n",
					p->index);
				goto out;
			}
			answered++;
			inflight--;
			if (failed) {
				atomic_fetch_add(&r->failed, 1);
				continue;
			}
			r->jobs[tag].acked = stats_now();
			memcpy(r->jobs[tag].id, id, sizeof id);
			atomic_fetch_add(&r->acked, 1);
		}
		readable = false;
		if (answered == p->n)
			break;
		/* Send the next job now if it may go, else wait for a reply
		 * or until it is due. */
		now = stats_now();
		wait = deadline > now ? deadline - now : 0;
		if (next < p->n && inflight < (size_t)o->inflight) {
			if (!period || due <= now)
				continue;
			wait = due - now;
		}
		if (wait > 100000000u)
			wait = 100000000u;
		ts.tv_sec = (time_t)(wait / 1000000000u);
		ts.tv_nsec = (long)(wait % 1000000000u);
		rc = ppoll(&pfd, 1, &ts, NULL);
		if (rc < 0 && errno != EINTR)
			break;
		readable = rc > 0;
	}
out:
	if (l)
		ops->close(l);
	atomic_fetch_sub(&r->producers_left, 1);
	return NULL;
}

static void *consume(void *arg)
{
	struct loadgen_consumer *c = arg;

	ops_of(c->run->o)->consume(c);
	return NULL;
}

int loadgen_run_load(const struct loadgen_opts *o, struct loadgen_run *r)
{
	const struct link_ops *ops = ops_of(o);
	struct producer *prod;
	pthread_t *pt, *ct;
	int np = o->connections, nc;
	uint64_t setup_end;
	size_t share, extra, first = 0;

	memset(r, 0, sizeof *r);
	r->o = o;
	r->njobs = (size_t)o->count;
	nc = o->scenario == SC_SUBMIT || o->scenario == SC_PING
		     ? 0 : ops->consumers(o);
	r->jobs = calloc(r->njobs, sizeof *r->jobs);
	r->consumers = calloc((size_t)nc + 1, sizeof *r->consumers);
	prod = calloc((size_t)np, sizeof *prod);
	pt = calloc((size_t)np, sizeof *pt);
	ct = calloc((size_t)nc + 1, sizeof *ct);
	if (!r->jobs || !r->consumers || !prod || !pt || !ct) {
		fputs("berth-bench: out of memory\n", stderr);
		free(prod);
		free(pt);
		free(ct);
		return -1;
	}
	r->nconsumers = nc;
	atomic_init(&r->producers_left, np);
	atomic_store(&r->deadline,
		     stats_now() + (uint64_t)(o->duration * 1e9));

	/* Consumers first, and producers only once every consumer is
	 * subscribed or watching: no event of the run can be missed. */
	for (int i = 0; i < nc; i++) {
		r->consumers[i].run = r;
		r->consumers[i].index = i;
		pthread_create(&ct[i], NULL, consume, &r->consumers[i]);
	}
	setup_end = stats_now() + 10000000000u;
	while (atomic_load(&r->consumers_ready) < nc && stats_now() < setup_end)
		usleep(1000);

	r->t0 = stats_now();
	atomic_store(&r->deadline, r->t0 + (uint64_t)(o->duration * 1e9));
	share = r->njobs / (size_t)np;
	extra = r->njobs % (size_t)np;
	for (int i = 0; i < np; i++) {
		prod[i].r = r;
		prod[i].index = i;
		prod[i].first = first;
		prod[i].n = share + ((size_t)i < extra);
		first += prod[i].n;
		pthread_create(&pt[i], NULL, produce, &prod[i]);
	}
	for (int i = 0; i < np; i++)
		pthread_join(pt[i], NULL);
	for (int i = 0; i < nc; i++)
		pthread_join(ct[i], NULL);
	free(prod);
	free(pt);
	free(ct);
	return 0;
}

void loadgen_run_free(struct loadgen_run *r)
{
	for (int i = 0; i < r->nconsumers; i++)
		free(r->consumers[i].done);
	free(r->consumers);
	free(r->jobs);
	memset(r, 0, sizeof *r);
}

/* ---- the join and the table ------------------------------------------- */

/* join computes, for every job a consumer saw finish, the time from its
 * submission to its end. A job's id is known to its producer only from
 * the acknowledgement, and the event may come first, so the two sides are
 * matched after the run, by id. Returns the time of the last finish, or 0
 * when none was seen. */
static uint64_t join(struct loadgen_run *r, struct stats_sample *done)
{
	struct idmap ids = { 0 };
	uint64_t last = 0;

	for (size_t i = 0; i < r->njobs; i++)
		if (r->jobs[i].id[0] && idmap_put(&ids, r->jobs[i].id,
						  (uint32_t)i) < 0)
			break;
	for (int c = 0; c < r->nconsumers; c++) {
		for (size_t k = 0; k < r->consumers[c].ndone; k++) {
			const struct loadgen_done *d = &r->consumers[c].done[k];
			uint32_t i;

			if (d->at > last)
				last = d->at;
			if (idmap_get(&ids, d->id, &i))
				stats_add(done, d->at > r->jobs[i].sent ?
					  d->at - r->jobs[i].sent : 0);
		}
	}
	idmap_free(&ids);
	return last;
}

static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static const char *const columns[] = {
	"target", "mode", "scenario", "conns", "inflight", "offered/s",
	"jobs", "failed", "seconds", "jobs/s", "ack_p50", "ack_p99",
	"ack_p99.9", "done_p50", "done_p99", "done_p99.9", "done_max",
	"gen_cpu%",
};
#define NCOLUMNS (sizeof columns / sizeof columns[0])

/* print_row prints one row of the run table: the header first unless
 * asked not to, aligned for a person or tab-separated for a script. */
static void print_row(const struct loadgen_opts *o, char cells[][32])
{
	static const int width[NCOLUMNS] = {
		6, 12, 8, 5, 8, 9, 8, 6, 7, 8, 7, 7, 9, 8, 8, 10, 8, 8,
	};

	if (o->tsv) {
		if (o->header)
			for (size_t i = 0; i < NCOLUMNS; i++)
				printf("%s%c", columns[i],
				       i + 1 < NCOLUMNS ? '\t' : '\n');
		for (size_t i = 0; i < NCOLUMNS; i++)
			printf("%s%c", cells[i], i + 1 < NCOLUMNS ? '\t' : '\n');
		return;
	}
	if (o->header)
		for (size_t i = 0; i < NCOLUMNS; i++)
			printf("%-*s%s", width[i], columns[i],
			       i + 1 < NCOLUMNS ? " " : "\n");
	for (size_t i = 0; i < NCOLUMNS; i++)
		printf("%-*s%s", width[i], cells[i],
		       i + 1 < NCOLUMNS ? " " : "\n");
}

static void fmt_ms(char *cell, double ms, bool have)
{
	if (!have)
		snprintf(cell, 32, "-");
	else if (ms < 10)
		snprintf(cell, 32, "%.3f", ms);
	else
		snprintf(cell, 32, "%.1f", ms);
}

/* report summarizes a finished run into one table row. */
static void report(const struct loadgen_opts *o, struct loadgen_run *r,
		   double cpu)
{
	struct stats_sample ack = { 0 }, done = { 0 };
	struct stats_summary sa, sd;
	uint64_t last_ack = 0, last_done, end;
	size_t acked = atomic_load(&r->acked);
	size_t count;
	char cells[NCOLUMNS][32];
	double secs;
	bool ends = o->scenario != SC_SUBMIT && o->scenario != SC_PING;

	for (size_t i = 0; i < r->njobs; i++) {
		const struct loadgen_job *j = &r->jobs[i];

		if (!j->acked)
			continue;
		stats_add(&ack, j->acked - j->sent);
		if (j->acked > last_ack)
			last_ack = j->acked;
	}
	last_done = ends ? join(r, &done) : 0;
	end = ends ? last_done : last_ack;
	count = ends ? done.n : acked;
	secs = end > r->t0 ? (double)(end - r->t0) / 1e9 : 0;
	stats_summarize(&ack, &sa);
	stats_summarize(&done, &sd);

	snprintf(cells[0], 32, "%s",
		 o->target == TARGET_BERTH ? "berth" : "beanstalkd");
	snprintf(cells[1], 32, "%s", o->label);
	snprintf(cells[2], 32, "%s", scenario_names[o->scenario]);
	snprintf(cells[3], 32, "%d", o->connections);
	snprintf(cells[4], 32, "%d", o->inflight);
	if (o->rate > 0)
		snprintf(cells[5], 32, "%.0f", o->rate);
	else
		snprintf(cells[5], 32, "-");
	snprintf(cells[6], 32, "%zu", count);
	snprintf(cells[7], 32, "%zu", atomic_load(&r->failed));
	snprintf(cells[8], 32, "%.2f", secs);
	snprintf(cells[9], 32, "%.0f", secs > 0 ? (double)count / secs : 0);
	fmt_ms(cells[10], sa.p50, sa.n);
	fmt_ms(cells[11], sa.p99, sa.n);
	fmt_ms(cells[12], sa.p999, sa.n);
	fmt_ms(cells[13], sd.p50, sd.n);
	fmt_ms(cells[14], sd.p99, sd.n);
	fmt_ms(cells[15], sd.p999, sd.n);
	fmt_ms(cells[16], sd.max, sd.n);
	snprintf(cells[17], 32, "%.0f", secs > 0 ? 100 * cpu / secs : 0);
	print_row(o, cells);
	stats_free(&ack);
	stats_free(&done);
}

/* control calls method with params (stolen) on a connection of its own
 * and returns 0 with *result (a new reference; NULL to drop it), or -1
 * after printing the error. */
static int control(const char *socket, const char *method, json_t *params,
		   json_t **result)
{
	struct berth_client *c = berth_client_connect(socket);
	json_t *res = NULL, *error = NULL;
	int rc;

	if (!c) {
		fprintf(stderr, "berth-bench: %s: %s\n", socket,
			strerror(errno));
		json_decref(params);
		return -1;
	}
	rc = berth_client_call(c, method, params, 10000, &res, &error);
	if (rc == 1) {
		char *s = json_dumps(error, JSON_COMPACT);

		fprintf(stderr, "berth-bench: %s: %s\n", method, s);
		free(s);
	} else if (rc < 0) {
		fprintf(stderr, "berth-bench: %s: %s\n", method,
			strerror(-rc));
	}
	json_decref(params);
	json_decref(error);
	if (result)
		*result = res;
	else
		json_decref(res);
	berth_client_close(c);
	return rc == 0 ? 0 : -1;
}

/* ---- the worker scenario ----------------------------------------------- */

/* proc_cpu returns the user and system CPU seconds of process pid so far
 * (0 when it is gone), and its process group in *pgrp when not NULL. */
static double proc_cpu(pid_t pid, pid_t *pgrp)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	long long grp = 0;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	if (!fgets(buf, sizeof buf, f))
		buf[0] = '\0';
	fclose(f);
	/* The fields after the command, which may hold spaces: state, ppid,
	 * pgrp, session, tty, tpgid, flags, 4 fault counts, utime, stime. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %lld %*d %*d %*d %*u %*u %*u %*u "
			 "%*u %llu %llu", &grp, &ut, &st) != 3)
		return 0;
	if (pgrp)
		*pgrp = (pid_t)grp;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* group_cpu returns the CPU seconds of every process in group pgid. */
static double group_cpu(pid_t pgid)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	double sum = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		pid_t pid = (pid_t)atoi(e->d_name), grp = 0;
		double c;

		if (pid <= 0)
			continue;
		c = proc_cpu(pid, &grp);
		if (grp == pgid)
			sum += c;
	}
	closedir(d);
	return sum;
}

/* berthd_pid returns the pid of the berthd at socket (SO_PEERCRED), or 0. */
static pid_t berthd_pid(const char *socket)
{
	struct berth_client *c = berth_client_connect(socket);
	struct ucred cred;
	socklen_t len = sizeof cred;
	pid_t pid = 0;

	if (c && getsockopt(berth_client_fd(c), SOL_SOCKET, SO_PEERCRED, &cred,
			    &len) == 0)
		pid = cred.pid;
	if (c)
		berth_client_close(c);
	return pid;
}

/* served tells whether tool has a worker process connected. */
static bool served(const char *socket, const char *tool)
{
	json_t *r = NULL, *t;
	bool yes = false;
	size_t i;

	if (control(socket, "tools/list", json_object(), &r) < 0)
		return false;
	json_array_foreach(json_object_get(r, "tools"), i, t)
		if (strcmp(json_string_value(json_object_get(t, "name")),
			   tool) == 0 &&
		    json_integer_value(json_object_get(
			    json_object_get(t, "workers"), "connected")) > 0)
			yes = true;
	json_decref(r);
	return yes;
}

/* start_worker runs o->worker_cmd with sh in a process group of its own,
 * with BERTH_SOCKET set to berthd's socket, and waits (60 s at most) until
 * it serves o->tool. Returns the group's leader, or -1 after printing
 * why. */
static pid_t start_worker(const struct loadgen_opts *o)
{
	struct timespec tick = {0, 20 * 1000000L};
	pid_t pid = fork();

	if (pid < 0) {
		perror("berth-bench: fork");
		return -1;
	}
	if (pid == 0) {
		setpgid(0, 0);
		setenv("BERTH_SOCKET", o->socket, 1);
		execl("/bin/sh", "sh", "-c", o->worker_cmd, (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid);
	for (int waited = 0; waited < 60000; waited += 20) {
		int status;

		if (waitpid(pid, &status, WNOHANG) == pid) {
			fprintf(stderr, "berth-bench: the worker command "
				"exited (status %d) before it served %s: %s\n",
				status, o->tool, o->worker_cmd);
			return -1;
		}
		if (served(o->socket, o->tool))
			return pid;
		nanosleep(&tick, NULL);
	}
	fprintf(stderr, "berth-bench: no worker served %s within 60 s: %s\n",
		o->tool, o->worker_cmd);
	kill(-pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

static void stop_worker(pid_t pid)
{
	struct timespec tick = {0, 20 * 1000000L};
	int status;

	kill(-pid, SIGTERM);
	for (int waited = 0; waited < 10000; waited += 20) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return;
		nanosleep(&tick, NULL);
	}
	kill(-pid, SIGKILL);
	waitpid(pid, &status, 0);
}

/* ---- options ---------------------------------------------------------- */

static const char usage_text[] =
	"Usage: berth-bench [OPTION]...\n"
	"Load berthd (or beanstalkd, for comparison) and print one table.\n"
	"\n"
	"  --target T          berth (default) or beanstalk\n"
	"  --scenario S        submit: acknowledgements only\n"
	"                      e2e: submitted to completed (default)\n"
	"                      suspend: submit, resume on suspended, completed\n"
	"                      approve: submit, approve, completed\n"
	"                      latency: e2e at a fixed --rate (open loop)\n"
	"                      worker: e2e of --tool, served by the worker\n"
	"                      process --worker-cmd starts (docs/WORKERS.md);\n"
	"                      also prints the CPU berthd and the worker spent\n"
	"                      per job\n"
	"                      ping: ping round trips (berth): what the\n"
	"                      socket and the loop cost, with nothing stored\n"
	"                      fill: submit jobs that suspend, and leave them\n"
	"                      scale: fill, restart and resume at two sizes\n"
	"  --socket PATH       berthd's socket (berth)\n"
	"  --port N            beanstalkd's port on 127.0.0.1 (beanstalk)\n"
	"  --tube NAME         beanstalkd's tube (default berth-bench)\n"
	"  --tool NAME         the tool of every job (default: noop; suspend\n"
	"                      and fill: bench_suspend; approve: bench_approve)\n"
	"  --input JSON        the input of every job, a JSON object of at most\n"
	"                      256 bytes (berth; default {\"n\": the job's index})\n"
	"  --connections N     producer connections (default 8)\n"
	"  --inflight N        requests in flight per connection (default 1:\n"
	"                      one round trip per job; with --rate 1024)\n"
	"  --consumers N       beanstalkd reserve/delete connections (default 8)\n"
	"  --count N           jobs in the run (default 100000; with --rate,\n"
	"                      rate x 10 s)\n"
	"  --duration S        stop after S seconds whatever is left (default 60;\n"
	"                      scale: 3600, for each fill)\n"
	"  --rate R            offer R jobs/s in all, open loop\n"
	"  --worker-cmd CMD    worker: the worker process, a shell command run\n"
	"                      with BERTH_SOCKET set; berth-bench starts it,\n"
	"                      waits until it serves --tool, and stops it\n"
	"  --pause             submit: pause the tool while submitting (berth)\n"
	"  --label TEXT        the mode column (default: berthd's durability,\n"
	"                      or \"-\" for beanstalkd)\n"
	"  --tsv               tab-separated output\n"
	"  --no-header         the row only\n"
	"scale:\n"
	"  --berthd PATH       the daemon to start (default build-bench/bench/\n"
	"                      berthd-bench)\n"
	"  --dir DIR           its database, socket and log (default\n"
	"                      /tmp/berth-bench-scale)\n"
	"  --tools DIR         --tools for it\n"
	"  --durability MODE   full (default) or normal\n"
	"  --fill-durability M the durability while filling (default: the\n"
	"                      same); the measures after the restart use\n"
	"                      --durability\n"
	"  --workers N         --workers for it (default 4)\n"
	"  --scale-small N     the reference size (default 1000)\n"
	"  --scale-jobs N      the large size (default 1000000)\n"
	"  --sample N          resumes timed at each size (default 1000)\n";

enum {
	OPT_TARGET = 256, OPT_SCENARIO, OPT_SOCKET, OPT_PORT, OPT_TUBE,
	OPT_TOOL, OPT_INPUT, OPT_CONNECTIONS, OPT_INFLIGHT, OPT_CONSUMERS, OPT_COUNT,
	OPT_DURATION, OPT_RATE, OPT_PAUSE, OPT_LABEL, OPT_TSV, OPT_NO_HEADER,
	OPT_BERTHD, OPT_DIR, OPT_TOOLS, OPT_DURABILITY, OPT_FILL_DURABILITY,
	OPT_WORKERS,
	OPT_SCALE_SMALL, OPT_SCALE_JOBS, OPT_SAMPLE, OPT_WORKER_CMD,
};

static const struct option long_options[] = {
	{"target", required_argument, NULL, OPT_TARGET},
	{"scenario", required_argument, NULL, OPT_SCENARIO},
	{"socket", required_argument, NULL, OPT_SOCKET},
	{"port", required_argument, NULL, OPT_PORT},
	{"tube", required_argument, NULL, OPT_TUBE},
	{"tool", required_argument, NULL, OPT_TOOL},
	{"input", required_argument, NULL, OPT_INPUT},
	{"connections", required_argument, NULL, OPT_CONNECTIONS},
	{"inflight", required_argument, NULL, OPT_INFLIGHT},
	{"consumers", required_argument, NULL, OPT_CONSUMERS},
	{"count", required_argument, NULL, OPT_COUNT},
	{"duration", required_argument, NULL, OPT_DURATION},
	{"rate", required_argument, NULL, OPT_RATE},
	{"pause", no_argument, NULL, OPT_PAUSE},
	{"label", required_argument, NULL, OPT_LABEL},
	{"tsv", no_argument, NULL, OPT_TSV},
	{"no-header", no_argument, NULL, OPT_NO_HEADER},
	{"berthd", required_argument, NULL, OPT_BERTHD},
	{"dir", required_argument, NULL, OPT_DIR},
	{"tools", required_argument, NULL, OPT_TOOLS},
	{"durability", required_argument, NULL, OPT_DURABILITY},
	{"fill-durability", required_argument, NULL, OPT_FILL_DURABILITY},
	{"workers", required_argument, NULL, OPT_WORKERS},
	{"scale-small", required_argument, NULL, OPT_SCALE_SMALL},
	{"scale-jobs", required_argument, NULL, OPT_SCALE_JOBS},
	{"sample", required_argument, NULL, OPT_SAMPLE},
	{"worker-cmd", required_argument, NULL, OPT_WORKER_CMD},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

/* number parses a positive number no greater than max, or exits 2. */
static double number(const char *opt, const char *s, double max)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !(v > 0) || v > max) {
		fprintf(stderr, "berth-bench: --%s takes a number from 1 to "
			"%.0f, not '%s'\n", opt, max, s);
		exit(2);
	}
	return v;
}

static int parse(int argc, char **argv, struct loadgen_opts *o)
{
	static char sock[256];
	bool count_given = false, inflight_given = false;
	bool duration_given = false;
	int c;

	*o = (struct loadgen_opts){
		.target = TARGET_BERTH,
		.scenario = SC_E2E,
		.tube = "berth-bench",
		.connections = 8,
		.inflight = 1,
		.consumers = 8,
		.count = 100000,
		.duration = 60,
		.header = true,
		.berthd = "build-bench/bench/berthd-bench",
		.dir = "/tmp/berth-bench-scale",
		.durability = "full",
		.workers = 4,
		.scale_small = 1000,
		.scale_jobs = 1000000,
		.sample = 1000,
	};
	while ((c = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
		switch (c) {
		case OPT_TARGET:
			if (strcmp(optarg, "berth") == 0)
				o->target = TARGET_BERTH;
			else if (strcmp(optarg, "beanstalk") == 0 ||
				 strcmp(optarg, "beanstalkd") == 0)
				o->target = TARGET_BEANSTALK;
			else
				goto usage;
			break;
		case OPT_SCENARIO: {
			size_t i, n = sizeof scenario_names /
				      sizeof scenario_names[0];

			for (i = 0; i < n; i++)
				if (strcmp(optarg, scenario_names[i]) == 0)
					break;
			if (i == n)
				goto usage;
			o->scenario = (enum loadgen_scenario)i;
			break;
		}
		case OPT_SOCKET: o->socket = optarg; break;
		case OPT_PORT: o->port = (int)number("port", optarg, 65535); break;
		case OPT_TUBE: o->tube = optarg; break;
		case OPT_TOOL: o->tool = optarg; break;
		case OPT_INPUT:
			if (optarg[0] != '{' || strlen(optarg) > 256 ||
			    strpbrk(optarg, "\n\r")) {
				fprintf(stderr, "berth-bench: --input takes a JSON "
					"object on one line of at most 256 bytes\n");
				exit(2);
			}
			o->input = optarg;
			break;
		case OPT_CONNECTIONS:
			o->connections = (int)number("connections", optarg, 1000);
			break;
		case OPT_INFLIGHT:
			o->inflight = (int)number("inflight", optarg, 100000);
			inflight_given = true;
			break;
		case OPT_CONSUMERS:
			o->consumers = (int)number("consumers", optarg, 1000);
			break;
		case OPT_COUNT:
			o->count = (long)number("count", optarg, 1e8);
			count_given = true;
			break;
		case OPT_DURATION:
			o->duration = number("duration", optarg, 86400);
			duration_given = true;
			break;
		case OPT_RATE: o->rate = number("rate", optarg, 1e7); break;
		case OPT_PAUSE: o->pause = true; break;
		case OPT_LABEL: o->label = optarg; break;
		case OPT_TSV: o->tsv = true; break;
		case OPT_NO_HEADER: o->header = false; break;
		case OPT_BERTHD: o->berthd = optarg; break;
		case OPT_DIR: o->dir = optarg; break;
		case OPT_TOOLS: o->tools_dir = optarg; break;
		case OPT_DURABILITY: o->durability = optarg; break;
		case OPT_FILL_DURABILITY: o->fill_durability = optarg; break;
		case OPT_WORKERS:
			o->workers = (int)number("workers", optarg, 1000);
			break;
		case OPT_SCALE_SMALL:
			o->scale_small = (long)number("scale-small", optarg, 1e8);
			break;
		case OPT_SCALE_JOBS:
			o->scale_jobs = (long)number("scale-jobs", optarg, 1e8);
			break;
		case OPT_SAMPLE:
			o->sample = (long)number("sample", optarg, 1e7);
			break;
		case OPT_WORKER_CMD: o->worker_cmd = optarg; break;
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		default:
			goto usage;
		}
	}
	if (optind < argc)
		goto usage;
	if (!o->fill_durability)
		o->fill_durability = o->durability;
	/* Filling a million jobs takes minutes, not the default minute. */
	if (o->scenario == SC_SCALE && !duration_given)
		o->duration = 3600;
	if (o->scenario == SC_LATENCY && o->rate <= 0) {
		fputs("berth-bench: the latency scenario needs --rate\n",
		      stderr);
		return 2;
	}
	if (o->scenario == SC_WORKER && (!o->worker_cmd || !o->tool ||
					  o->target != TARGET_BERTH)) {
		fputs("berth-bench: the worker scenario needs --worker-cmd and "
		      "the --tool it serves (berth only)\n",
		      stderr);
		return 2;
	}
	if (o->rate > 0 && !count_given)
		o->count = (long)(o->rate * 10) > 100 ? (long)(o->rate * 10)
						      : 100;
	if (o->rate > 0 && !inflight_given)
		o->inflight = 1024;
	if (!o->tool)
		o->tool = o->scenario == SC_SUSPEND || o->scenario == SC_FILL ||
				  o->scenario == SC_SCALE ? "bench_suspend"
			  : o->scenario == SC_APPROVE ? "bench_approve"
						      : "noop";
	if (o->target == TARGET_BERTH && !o->socket &&
	    o->scenario != SC_SCALE)
		o->socket = berth_client_default_socket(sock, sizeof sock);
	if (o->target == TARGET_BEANSTALK) {
		if (!o->port) {
			fputs("berth-bench: beanstalk needs --port\n", stderr);
			return 2;
		}
		if (o->scenario != SC_SUBMIT && o->scenario != SC_E2E &&
		    o->scenario != SC_LATENCY) {
			fputs("berth-bench: beanstalkd has only the submit, "
			      "e2e and latency scenarios\n", stderr);
			return 2;
		}
	}
	return 0;
usage:
	fputs("Try 'berth-bench --help'.\n", stderr);
	return 2;
}

int main(int argc, char **argv)
{
	struct loadgen_opts o;
	struct loadgen_run r;
	char label[32] = "-";
	double cpu, bcpu = 0, wcpu = 0;
	pid_t wpid = -1, bpid = 0;
	int rc = parse(argc, argv, &o);

	if (rc)
		return rc;
	signal(SIGPIPE, SIG_IGN);
	if (o.scenario == SC_SCALE)
		return loadgen_scale(&o);
	if (o.target == TARGET_BERTH) {
		/* Also checks that berthd answers before any load starts. */
		json_t *info;
		const char *durability;

		if (control(o.socket, "server/info", NULL, &info) < 0)
			return 1;
		durability = json_string_value(json_object_get(info,
							       "durability"));
		snprintf(label, sizeof label, "%s",
			 durability ? durability : "?");
		json_decref(info);
	}
	if (!o.label)
		o.label = label;
	if (o.pause && o.target == TARGET_BERTH &&
	    control(o.socket, "tools/pause",
		    json_pack("{s:s}", "name", o.tool), NULL) < 0)
		return 1;
	if (o.scenario == SC_WORKER) {
		if ((wpid = start_worker(&o)) < 0)
			return 1;
		bpid = berthd_pid(o.socket);
		bcpu = proc_cpu(bpid, NULL);
		wcpu = group_cpu(wpid);
	}
	cpu = cpu_seconds();
	if (loadgen_run_load(&o, &r) < 0) {
		if (wpid > 0)
			stop_worker(wpid);
		return 1;
	}
	cpu = cpu_seconds() - cpu;
	if (wpid > 0) {
		bcpu = proc_cpu(bpid, NULL) - bcpu;
		wcpu = group_cpu(wpid) - wcpu;
		stop_worker(wpid);
	}
	if (o.pause && o.target == TARGET_BERTH)
		control(o.socket, "tools/unpause",
			json_pack("{s:s}", "name", o.tool), NULL);
	if (!o.tsv && o.target == TARGET_BERTH && o.scenario == SC_PING)
		printf("berth-bench: berthd at %s, ping", o.socket);
	else if (!o.tsv && o.target == TARGET_BERTH)
		printf("berth-bench: berthd at %s, %s, tool %s",
		       o.socket, scenario_names[o.scenario], o.tool);
	else if (!o.tsv)
		printf("berth-bench: beanstalkd on 127.0.0.1:%d, %s, tube %s, "
		       "%d consumers", o.port, scenario_names[o.scenario],
		       o.tube, o.consumers);
	if (!o.tsv)
		printf(", %d connections x %d in flight%s; latencies in ms "
		       "from submission\n", o.connections, o.inflight,
		       o.rate > 0 ? ", open loop" : "");
	report(&o, &r, cpu);
	if (wpid > 0) {
		double jobs = (double)(r.njobs ? r.njobs : 1);

		if (o.tsv)
			printf("cpu_us_per_job\tberthd\t%.1f\tworker\t%.1f\t"
			       "berth-bench\t%.1f\n",
			       1e6 * bcpu / jobs, 1e6 * wcpu / jobs,
			       1e6 * cpu / jobs);
		else
			printf("berth-bench: CPU per job: berthd %.1f us, the "
			       "worker %.1f us, berth-bench %.1f us\n",
			       1e6 * bcpu / jobs, 1e6 * wcpu / jobs,
			       1e6 * cpu / jobs);
	}
	rc = r.acked == r.njobs ? 0 : 1;
	for (int i = 0; i < r.nconsumers; i++)
		if (r.consumers[i].err)
			rc = 1;
	loadgen_run_free(&r);
	return rc;
}

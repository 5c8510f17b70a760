/*
 * scale.c: the scale scenario. At two sizes (--scale-small, by default
 * 1,000, and --scale-jobs, by default 1,000,000) it starts berthd on a new
 * database, fills it with jobs that suspend, and measures what a large
 * backlog of waiting jobs costs: berthd's resident memory, the time from a
 * restart to the first answered request, the integrity check of the
 * database after the restart (as berthd logs it; a large database is
 * checked while reads are served, and writes wait for it), and the
 * latency of jobs/resume on jobs spread evenly over the backlog.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "berth/client.h"
#include "loadgen.h"

extern char **environ;

struct daemon {
	const struct loadgen_opts *o;
	const char *durability;
	char db[512];
	char socket[512];
	char log[512];
	pid_t pid;
};

/* daemon_start starts berthd and returns 0 once it answers ping, with
 * *ready_ms the time from the spawn to that answer; or -1 after printing
 * why. */
static int daemon_start(struct daemon *d, double *ready_ms)
{
	const struct loadgen_opts *o = d->o;
	char workers[16];
	const char *argv[16];
	posix_spawn_file_actions_t fa;
	uint64_t t0, limit;
	int n = 0, fd;

	snprintf(workers, sizeof workers, "%d", o->workers);
	argv[n++] = o->berthd;
	argv[n++] = "--db";
	argv[n++] = d->db;
	argv[n++] = "--socket";
	argv[n++] = d->socket;
	argv[n++] = "--durability";
	argv[n++] = d->durability;
	argv[n++] = "--workers";
	argv[n++] = workers;
	argv[n++] = "--quiet";
	if (o->tools_dir) {
		argv[n++] = "--tools";
		argv[n++] = o->tools_dir;
	}
	argv[n] = NULL;

	fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "berth-bench: %s: %s\n", d->log,
			strerror(errno));
		return -1;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd, 1);
	posix_spawn_file_actions_adddup2(&fa, fd, 2);
	t0 = stats_now();
	if (posix_spawn(&d->pid, o->berthd, &fa, NULL, (char **)argv,
			environ) != 0) {
		fprintf(stderr, "berth-bench: cannot start %s\n", o->berthd);
		posix_spawn_file_actions_destroy(&fa);
		close(fd);
		return -1;
	}
	posix_spawn_file_actions_destroy(&fa);
	close(fd);

	/* Poll every millisecond: the figure is only as fine as this. */
	limit = t0 + 600ull * 1000000000u;
	while (stats_now() < limit) {
		struct berth_client *c = berth_client_connect(d->socket);
		json_t *result = NULL, *error = NULL;
		int rc = -1;

		if (c) {
			rc = berth_client_call(c, "ping", NULL, 5000, &result,
					       &error);
			json_decref(result);
			json_decref(error);
			berth_client_close(c);
		}
		if (rc == 0) {
			*ready_ms = (double)(stats_now() - t0) / 1e6;
			return 0;
		}
		if (waitpid(d->pid, NULL, WNOHANG) == d->pid) {
			fprintf(stderr, "berth-bench: berthd exited at "
				"start-up; see %s\n", d->log);
			d->pid = 0;
			return -1;
		}
		usleep(1000);
	}
	fprintf(stderr, "berth-bench: berthd did not answer within 600 s\n");
	return -1;
}

/* daemon_stop sends SIGTERM and waits for berthd to exit. */
static void daemon_stop(struct daemon *d)
{
	if (d->pid <= 0)
		return;
	kill(d->pid, SIGTERM);
	waitpid(d->pid, NULL, 0);
	d->pid = 0;
}

static void remove_db(const struct daemon *d)
{
	static const char *const suffix[] = { "", "-wal", "-shm", ".lock" };
	char path[600];

	for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
		snprintf(path, sizeof path, "%s%s", d->db, suffix[i]);
		unlink(path);
	}
}

struct scale_row {
	long jobs;
	double fill_rate;
	long rss_fill, rss_restart, rss_resume, hwm; /* KiB */
	double restart_ms;
	long check_ms; /* the integrity check after the restart; -1 unknown */
	struct stats_summary resume;
	size_t failed;
};

/* resume_sample resumes up to o->sample jobs spread evenly over r's jobs,
 * one at a time on one connection, and times each jobs/resume call from
 * request to durable acknowledgement. */
static int resume_sample(const struct daemon *d, const struct loadgen_run *r,
			 struct stats_summary *out, size_t *failed)
{
	struct berth_client *c = berth_client_connect(d->socket);
	struct stats_sample s = { 0 };
	size_t k = (size_t)d->o->sample < r->njobs ? (size_t)d->o->sample
						     : r->njobs;

	if (!c) {
		fprintf(stderr, "berth-bench: %s: %s\n", d->socket,
			strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < k; i++) {
		const struct loadgen_job *j = &r->jobs[i * (r->njobs / k)];
		json_t *params = json_pack("{s:s, s:{s:b}}", "id", j->id,
					   "resumeData", "ok", 1);
		json_t *result = NULL, *error = NULL;
		uint64_t t = stats_now();
		int rc = berth_client_call(c, "jobs/resume", params, 30000,
					   &result, &error);

		if (rc == 0) {
			stats_add(&s, stats_now() - t);
		} else {
			if ((*failed)++ == 0 && error) {
				char *e = json_dumps(error, JSON_COMPACT);

				fprintf(stderr, "berth-bench: resume: %s\n",
					e);
				free(e);
			}
			if (rc < 0) {
				json_decref(params);
				break;
			}
		}
		json_decref(params);
		json_decref(result);
		json_decref(error);
	}
	berth_client_close(c);
	stats_summarize(&s, out);
	stats_free(&s);
	return 0;
}

/* check_ms returns the time of the integrity check berthd logged after
 * offset of its log ("integrity check passed in N ms"), or -1. */
static long check_ms(const struct daemon *d, long offset)
{
	static const char mark[] = "integrity check passed in ";
	char line[1024];
	long ms = -1;
	FILE *f = fopen(d->log, "r");

	if (!f)
		return -1;
	if (fseek(f, offset, SEEK_SET) == 0)
		while (fgets(line, sizeof line, f)) {
			char *p = strstr(line, mark);

			if (p)
				ms = strtol(p + sizeof mark - 1, NULL, 10);
		}
	fclose(f);
	return ms;
}

/* scale_one measures one size. Returns 0 or -1. */
static int scale_one(const struct loadgen_opts *base, long jobs,
		     struct scale_row *row)
{
	struct loadgen_opts o = *base;
	struct daemon d = { .o = base, .durability = base->fill_durability };
	struct loadgen_run r;
	double ms;
	long hwm, log_offset = 0;
	int rc = -1;

	memset(row, 0, sizeof *row);
	row->jobs = jobs;
	snprintf(d.db, sizeof d.db, "%s/scale.db", base->dir);
	snprintf(d.socket, sizeof d.socket, "%s/berthd.sock", base->dir);
	snprintf(d.log, sizeof d.log, "%s/berthd.log", base->dir);
	remove_db(&d);
	if (daemon_start(&d, &ms) < 0)
		return -1;

	/* Fill: as fast as berthd takes them, many in flight. */
	o.scenario = SC_FILL;
	o.socket = d.socket;
	o.count = jobs;
	o.rate = 0;
	if (o.inflight < 64)
		o.inflight = 64;
	fprintf(stderr, "berth-bench: filling %ld jobs\n", jobs);
	if (loadgen_run_load(&o, &r) < 0)
		goto out;
	{
		uint64_t last = 0;
		size_t seen = 0;

		for (int i = 0; i < r.nconsumers; i++) {
			seen += r.consumers[i].ndone;
			for (size_t k = 0; k < r.consumers[i].ndone; k++)
				if (r.consumers[i].done[k].at > last)
					last = r.consumers[i].done[k].at;
		}
		if (seen < (size_t)jobs) {
			fprintf(stderr, "berth-bench: only %zu of %ld jobs "
				"suspended\n", seen, jobs);
			loadgen_run_free(&r);
			goto out;
		}
		row->fill_rate = (double)seen / ((double)(last - r.t0) / 1e9);
	}
	stats_rss_kib(d.pid, &row->rss_fill, &row->hwm);

	/* Restart: from the spawn to the first answer. */
	daemon_stop(&d);
	{
		struct stat st;

		log_offset = stat(d.log, &st) == 0 ? (long)st.st_size : 0;
	}
	d.durability = base->durability;
	if (daemon_start(&d, &row->restart_ms) < 0) {
		loadgen_run_free(&r);
		goto out;
	}
	stats_rss_kib(d.pid, &row->rss_restart, &hwm);
	resume_sample(&d, &r, &row->resume, &row->failed);
	/* The resumes waited for it, when the writer ran it. */
	row->check_ms = check_ms(&d, log_offset);
	usleep(200000); /* let the resumed jobs run before the last look */
	stats_rss_kib(d.pid, &row->rss_resume, &hwm);
	if (hwm > row->hwm)
		row->hwm = hwm;
	loadgen_run_free(&r);
	rc = 0;
out:
	daemon_stop(&d);
	return rc;
}

int loadgen_scale(const struct loadgen_opts *o)
{
	struct scale_row rows[2];
	long sizes[2] = { o->scale_small, o->scale_jobs };

	if (mkdir(o->dir, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "berth-bench: %s: %s\n", o->dir,
			strerror(errno));
		return 1;
	}
	for (int i = 0; i < 2; i++)
		if (scale_one(o, sizes[i], &rows[i]) < 0)
			return 1;
	printf("berth-bench: scale, %s, --workers %d, filled with durability "
	       "%s, restarted with %s, tool %s; RSS in MiB, times in ms\n",
	       o->berthd, o->workers, o->fill_durability, o->durability,
	       o->tool);
	printf("%-9s %-8s %-9s %-11s %-9s %-12s %-11s %-8s %-10s %-10s "
	       "%-10s %-8s\n", "suspended", "fill/s", "rss_fill", "restart_ms",
	       "check_ms", "rss_restart", "rss_resume", "rss_peak",
	       "resume_p50", "resume_p99", "resume_max", "failed");
	for (int i = 0; i < 2; i++)
		printf("%-9ld %-8.0f %-9.1f %-11.1f %-9ld %-12.1f %-11.1f "
		       "%-8.1f %-10.3f %-10.3f %-10.3f %-8zu\n", rows[i].jobs,
		       rows[i].fill_rate, rows[i].rss_fill / 1024.0,
		       rows[i].restart_ms, rows[i].check_ms,
		       rows[i].rss_restart / 1024.0,
		       rows[i].rss_resume / 1024.0, rows[i].hwm / 1024.0,
		       rows[i].resume.p50, rows[i].resume.p99,
		       rows[i].resume.max, rows[i].failed);
	if (rows[0].resume.p50 > 0)
		printf("resume p50 at %ld / at %ld: %.2fx\n", rows[1].jobs,
		       rows[0].jobs, rows[1].resume.p50 / rows[0].resume.p50);
	return 0;
}

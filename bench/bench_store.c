/*
 * bench_store: durable job creations per second and create -> claim ->
 * complete cycles per second, with group commit (many requests in flight)
 * and with one transaction per mutation (max_batch = 1), in one run.
 *
 *   bench_store [-n creations] [-c cycles] [-1 single-tx ops] [-w in-flight]
 *               [-b max_batch] [-d dir] [-s full|normal]
 *
 * The one-transaction-per-request rows run -1 creations and a third as
 * many cycles: at a few hundred fsyncs a second, more would only take
 * longer.
 *
 * Every figure counts only requests whose done callback ran, that is whose
 * transaction was durable (synchronous=FULL unless -s normal).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

struct op {
	struct store_req req;
	struct store_job job;
	struct run *run;
};

struct run {
	struct store *st;
	struct op *ops;
	size_t nops;
	long target;    /* operations to finish */
	long started;   /* creations submitted, or cycles begun */
	long finished;  /* creations durable, or cycles completed */
	long failed;
	json_t *input;
	json_t *output;
	bool cycles;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* writer_cpu returns the CPU seconds the store's writer thread has used,
 * read from /proc (it is named "berth-writer"), or -1. */
static double writer_cpu(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	double secs = -1;
	while (d != NULL && (e = readdir(d)) != NULL) {
		char path[300], buf[512];
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *fp = fopen(path, "r");
		if (fp == NULL)
			continue;
		bool writer = fgets(buf, sizeof(buf), fp) != NULL &&
			      strncmp(buf, "berth-writer", 12) == 0;
		fclose(fp);
		if (!writer)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat", e->d_name);
		if ((fp = fopen(path, "r")) == NULL)
			continue;
		if (fgets(buf, sizeof(buf), fp) != NULL) {
			/* Fields 14 and 15 (utime, stime), after the ")". */
			char *p = strrchr(buf, ')');
			unsigned long ut = 0, st = 0;
			if (p != NULL &&
			    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
				   &ut, &st) == 2)
				secs = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
		}
		fclose(fp);
	}
	if (d != NULL)
		closedir(d);
	return secs;
}

/* thread_cpu returns the CPU seconds the calling thread has used. */
static double thread_cpu(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void step(struct op *op);
static void on_done(struct store_req *req, int rc);

static void submit(struct op *op)
{
	if (store_submit(op->run->st, &op->req) != 0) {
		op->run->failed++;
		op->run->finished++;
	}
}

static void start_create(struct op *op)
{
	struct run *r = op->run;
	memset(&op->req, 0, sizeof(op->req));
	memset(&op->job, 0, sizeof(op->job));
	op->job.tool = "bench.echo";
	op->job.status = STORE_PENDING;
	op->job.input = r->input;
	op->job.max_retries = 2;
	op->req.op = STORE_OP_CREATE;
	op->req.u.create.job = &op->job;
	op->req.u.create.event_data = r->input;
	op->req.data = op;
	op->req.done = on_done;
	r->started++;
	submit(op);
}

static void on_done(struct store_req *req, int rc)
{
	struct op *op = req->data;
	struct run *r = op->run;
	if (rc != 0)
		r->failed++;

	if (!r->cycles) {
		store_req_finish(req);
		r->finished++;
	} else if (req->op == STORE_OP_CREATE) {
		/* Claim one runnable job; it may be another lane's. */
		store_req_finish(req);
		memset(&op->req, 0, sizeof(op->req));
		op->req.op = STORE_OP_CLAIM;
		op->req.u.claim.limit = 1;
		op->req.data = op;
		op->req.done = on_done;
		submit(op);
		return;
	} else if (req->op == STORE_OP_CLAIM && req->njobs == 1) {
		char id[40];
		memcpy(id, req->jobs[0]->id, sizeof(id));
		store_req_finish(req);
		memset(&op->req, 0, sizeof(op->req));
		op->req.op = STORE_OP_TRANSITION;
		struct store_transition *t = &op->req.u.transition;
		memcpy(t->job_id, id, sizeof(id));
		t->from_mask = STORE_MASK(STORE_RUNNING);
		t->to = STORE_COMPLETED;
		t->event = STORE_EV_COMPLETED;
		t->event_data = r->output;
		t->set = STORE_SET_OUTPUT;
		t->output = r->output;
		op->req.data = op;
		op->req.done = on_done;
		submit(op);
		return;
	} else {
		/* A completion, or a claim that found nothing (another lane
		 * took the job this lane created): the cycle ends either way
		 * only when a completion lands. */
		bool completed = req->op == STORE_OP_TRANSITION;
		store_req_finish(req);
		if (completed)
			r->finished++;
		else {
			r->started--;
		}
	}
	step(op);
}

static void step(struct op *op)
{
	struct run *r = op->run;
	if (r->started < r->target)
		start_create(op);
	else if (r->finished >= r->target)
		uv_stop(uv_default_loop());
}

/* measure runs one row of the table; *busy is the writer thread's CPU
 * over the wall time, *loop the loop thread's (store_submit, delivery and
 * the bench's own callbacks). */
static double measure(const char *dir, int max_batch, int durability, bool cycles,
		      long count, size_t inflight, long *failed, double *busy,
		      double *loop_busy)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/bench-%d-%d.db", dir, max_batch, cycles);
	unlink(path);
	char wal[4200];
	snprintf(wal, sizeof(wal), "%s-wal", path);
	unlink(wal);

	uv_loop_t *loop = uv_default_loop();
	struct store_config cfg = {.path = path, .durability = durability,
				   .max_batch = max_batch};
	struct run r = {.target = count, .cycles = cycles};
	char *msg = NULL;
	int rc = store_open(loop, &cfg, &r.st, &msg);
	if (rc != 0) {
		fprintf(stderr, "bench_store: %s\n", msg ? msg : strerror(-rc));
		exit(1);
	}
	r.input = json_pack("{s:s,s:i,s:[i,i,i]}", "prompt", "summarise the report",
			    "limit", 100, "ids", 1, 2, 3);
	r.output = json_pack("{s:s}", "summary", "done");
	r.nops = inflight;
	r.ops = calloc(inflight, sizeof(*r.ops));

	double t0 = now_s(), c0 = thread_cpu();
	for (size_t i = 0; i < inflight && r.started < r.target; i++) {
		r.ops[i].run = &r;
		start_create(&r.ops[i]);
	}
	uv_run(loop, UV_RUN_DEFAULT);
	double secs = now_s() - t0;
	*loop_busy = (thread_cpu() - c0) / secs;
	*busy = writer_cpu() / secs;

	store_close(r.st, NULL, NULL);
	uv_run(loop, UV_RUN_DEFAULT);
	free(r.ops);
	json_decref(r.input);
	json_decref(r.output);
	unlink(path);
	unlink(wal);
	snprintf(wal, sizeof(wal), "%s-shm", path);
	unlink(wal);
	snprintf(wal, sizeof(wal), "%s.lock", path);
	unlink(wal);
	*failed += r.failed;
	return (double)r.finished / secs;
}

int main(int argc, char **argv)
{
	long creations = 200000, cycles = 50000, single = 2000;
	size_t inflight = 4096;
	int batch = 0; /* the store's default, 1024 */
	const char *dir = ".";
	int durability = STORE_DURABILITY_FULL;
	int c;
	while ((c = getopt(argc, argv, "n:c:w:d:s:1:b:")) != -1) {
		switch (c) {
		case 'n': creations = atol(optarg); break;
		case 'c': cycles = atol(optarg); break;
		case '1': single = atol(optarg); break;
		case 'w': inflight = (size_t)atol(optarg); break;
		case 'b': batch = atoi(optarg); break;
		case 'd': dir = optarg; break;
		case 's':
			durability = strcmp(optarg, "normal") == 0 ? STORE_DURABILITY_NORMAL
								   : STORE_DURABILITY_FULL;
			break;
		default:
			fprintf(stderr, "usage: %s [-n creations] [-c cycles] [-1 single-tx ops] [-w in-flight] [-b max_batch] [-d dir] [-s full|normal]\n", argv[0]);
			return 2;
		}
	}

	long failed = 0;
	double busy[4], lb[4];
	double gc_create = measure(dir, batch, durability, false, creations, inflight, &failed, &busy[0], &lb[0]);
	double gc_cycle = measure(dir, batch, durability, true, cycles, inflight, &failed, &busy[1], &lb[1]);
	double one_create = measure(dir, 1, durability, false, single, inflight, &failed, &busy[2], &lb[2]);
	double one_cycle = measure(dir, 1, durability, true, single / 3, inflight, &failed, &busy[3], &lb[3]);
	uv_loop_close(uv_default_loop());

	printf("durability: %s, in flight: %zu, directory: %s\n",
	       durability == STORE_DURABILITY_FULL ? "full" : "normal", inflight, dir);
	printf("%-28s %16s %16s\n", "", "creations/s", "cycles/s");
	char label[64];
	snprintf(label, sizeof(label), "group commit (max_batch %d)", batch > 0 ? batch : 1024);
	printf("%-28s %16.0f %16.0f\n", label, gc_create, gc_cycle);
	printf("%-28s %16.0f %16.0f\n", "one transaction per request", one_create, one_cycle);
	printf("%-28s %15.1fx %15.1fx\n", "ratio", gc_create / one_create, gc_cycle / one_cycle);
	printf("writer thread busy (CPU/wall): group %.0f%% / %.0f%%, one per request %.0f%% / %.0f%%\n",
	       busy[0] * 100, busy[1] * 100, busy[2] * 100, busy[3] * 100);
	printf("loop thread busy (CPU/wall):   group %.0f%% / %.0f%%, one per request %.0f%% / %.0f%%\n",
	       lb[0] * 100, lb[1] * 100, lb[2] * 100, lb[3] * 100);
	/* Which side limited the group-commit rows: a thread near 100% is
	 * the bottleneck; neither near it means waiting (fsync) or other
	 * load on the machine. */
	for (int i = 0; i < 2; i++) {
		const char *what = i == 0 ? "creations" : "cycles";
		if (lb[i] >= 0.9)
			printf("group commit %s: limited by the loop thread (this bench's own submitting and callbacks included)\n", what);
		else if (busy[i] >= 0.9)
			printf("group commit %s: limited by the writer thread\n", what);
		else
			printf("group commit %s: neither thread saturated (fsync waits or other load on the machine)\n", what);
	}
	if (failed)
		printf("failed requests: %ld\n", failed);
	return failed ? 1 : 0;
}

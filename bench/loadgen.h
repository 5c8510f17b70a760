/*
 * loadgen.h: what the load generator's parts share: the options, one run
 * of load (producers and consumers over one target), and the two targets
 * (berth over its client library, beanstalkd over bench/beanstalk.c).
 */
#ifndef BERTH_BENCH_LOADGEN_H
#define BERTH_BENCH_LOADGEN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>


#include "idmap.h"
#include "stats.h"

#define LOADGEN_ID_MAX IDMAP_KEY_MAX /* a UUIDv7 or a beanstalk id */

enum loadgen_target {
	TARGET_BERTH = 0,
	TARGET_BEANSTALK,
};

/* What a run does with each job, and which event ends it. */
enum loadgen_scenario {
	SC_SUBMIT = 0, /* acknowledgements only: no consumer */
	SC_E2E,        /* submitted -> completed (beanstalk: reserved and
			  deleted) */
	SC_SUSPEND,    /* submitted -> suspended -> resumed -> completed */
	SC_APPROVE,    /* submitted -> awaiting_approval -> approved ->
			  completed */
	SC_LATENCY,    /* SC_E2E at a fixed offered rate (open loop) */
	SC_FILL,       /* submitted -> suspended, and left there */
	SC_SCALE,      /* fill, restart and resume at two sizes (scale.c) */
	SC_WORKER,     /* SC_E2E of a tool a worker process serves
			  (docs/WORKERS.md): --worker-cmd starts it, and
			  the CPU it and berthd spent is reported */
	SC_PING,       /* berth: ping round trips, nothing stored: the
			  ceiling the socket and the loop put on one round
			  trip per request */
};

struct loadgen_opts {
	enum loadgen_target target;
	enum loadgen_scenario scenario;
	const char *socket;  /* berth */
	int port;            /* beanstalkd, on 127.0.0.1 */
	const char *tube;    /* beanstalkd */
	const char *tool;    /* berth: the tool every job runs */
	const char *input;   /* berth: every job's input, or NULL: {"n": i} */
	const char *label;   /* the "mode" column: durability, binlog... */
	int connections;     /* producer connections */
	int inflight;        /* requests in flight per producer connection */
	int consumers;       /* beanstalkd: reserve/delete connections */
	long count;          /* jobs in the run */
	double duration;     /* seconds: no run lasts longer */
	double rate;         /* jobs/s offered in all (0: closed loop) */
	const char *worker_cmd; /* worker: the command (sh -c) */
	bool pause;          /* berth submit: pause the tool meanwhile */
	bool tsv;            /* print tab-separated values */
	bool header;         /* with tsv: print the header line too */
	/* scale */
	const char *berthd;  /* the daemon to start */
	const char *dir;     /* its database, socket and log */
	const char *tools_dir; /* --tools for it, or NULL */
	const char *durability;
	const char *fill_durability; /* the fill's berthd, else durability */
	int workers;
	long scale_small;    /* the reference size (1000) */
	long scale_jobs;     /* the large size (1000000) */
	long sample;         /* resumes timed at each size */
};

/* One job of a run: when it was sent (for an open loop, when it was due),
 * when its acknowledgement came, and the id it got. */
struct loadgen_job {
	uint64_t sent;
	uint64_t acked;
	char id[LOADGEN_ID_MAX];
};

/* A consumer's record of one job it saw finish. */
struct loadgen_done {
	uint64_t at;
	char id[LOADGEN_ID_MAX];
};

struct loadgen_consumer {
	struct loadgen_run *run;
	int index;
	struct loadgen_done *done;
	size_t ndone, cap;
	int err; /* 0 or the negative code that stopped it */
};

/* A run: jobs[] is split into one contiguous share per producer. */
struct loadgen_run {
	const struct loadgen_opts *o;
	struct loadgen_job *jobs;
	size_t njobs;
	uint64_t t0;       /* start */
	_Atomic uint64_t deadline; /* t0 + duration */
	atomic_size_t acked;    /* acknowledgements received */
	atomic_size_t finished; /* jobs that reached their end */
	atomic_size_t failed;   /* error replies and failed jobs */
	atomic_int producers_left;
	atomic_int consumers_ready; /* subscribed or watching (or failed) */
	atomic_bool stop;       /* consumers: finish now */
	struct loadgen_consumer *consumers;
	int nconsumers;
};

/* A target's producer connection and its consumer. A producer connection
 * is opaque here (void *): each target has its own struct. */
struct link_ops {
	/* open returns a producer connection, or NULL after printing why. */
	void *(*open)(struct loadgen_run *r, int index);
	void (*close)(void *l);
	int (*fd)(void *l);
	/* send sends the submission of job tag without waiting. */
	int (*send)(void *l, size_t tag);
	/* recv returns 1 with the tag and id of the next acknowledgement
	 * already received (or *failed set for an error reply), 0 when none
	 * is there yet (it never waits), or a negative code. */
	int (*recv)(void *l, size_t *tag, char *id, bool *failed);
	/* consume is a consumer thread's body. */
	void (*consume)(struct loadgen_consumer *c);
	/* consumers returns how many consumer threads the run needs. */
	int (*consumers)(const struct loadgen_opts *o);
};

extern const struct link_ops link_berth;
extern const struct link_ops link_beanstalk;

/* loadgen_record_done notes that job id finished at time at. */
int loadgen_record_done(struct loadgen_consumer *c, const char *id,
			uint64_t at);

/* loadgen_consumer_should_stop reports whether every acknowledged job has
 * been seen finishing after the producers stopped, or the run is past its
 * deadline and drain time. */
bool loadgen_consumer_should_stop(struct loadgen_run *r);

/* loadgen_run_load runs one load of o on its target and fills r (the
 * caller frees it with loadgen_run_free). Returns 0, or -1 after printing
 * why. */
int loadgen_run_load(const struct loadgen_opts *o, struct loadgen_run *r);
void loadgen_run_free(struct loadgen_run *r);

/* loadgen_scale runs the scale scenario and prints its table. Returns the
 * exit status. */
int loadgen_scale(const struct loadgen_opts *o);

#endif

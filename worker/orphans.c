/*
 * orphans.c: the process groups a berthd that died left running, found and
 * killed by the next berthd before it runs their jobs again.
 *
 * Every external tool's process group is recorded in the store when its
 * leader starts (worker__orphans_record, from proc.c) and forgotten once
 * the leader was reaped. PR_SET_PDEATHSIG (spawn.c) kills the leader with
 * berthd, but not what the leader started: a shell script's background
 * job, a program's helper. The keeper (keeper.c) kills those when berthd
 * ends; these records are for when it could not (no keeper, or it was
 * killed too). When berthd starts, before store_recover puts the
 * interrupted jobs back (worker_start), worker__orphans_kill reads the
 * records this node left and SIGKILLs each group that is still alive and
 * still the one recorded:
 *
 *   - the record is of this boot (/proc/sys/kernel/random/boot_id);
 *   - and the leader's pid is alive with a start time (/proc/PID/stat,
 *     field 22, clock ticks after boot) within the span recorded: the
 *     boot clock read just before and just after it was started. Another
 *     process of that pid would have had to start within that span,
 *     while the leader lived (from its fork to the end of the span: the
 *     clone returns after the exec), which no two processes of one pid
 *     can. The leader leads its session, so its group id is its pid for
 *     life, and its zombie keeps the id from being given out. (The span,
 *     rather than the start time read from /proc/PID/stat at every start,
 *     which cost 15 % of the loop thread's time under a load of trivial
 *     tools, docs/BENCHMARKS.md.)
 *   - or the leader is gone, and processes of its group are left: a group
 *     id is not given out again while a member lives, but the whole group
 *     might have ended and a stranger have made a group of the same id
 *     since, so such a group is killed only when one of its members was
 *     started with the job's id in its environment (BERTH_JOB_ID, which
 *     every tool gets and its children inherit).
 *
 * A group that cannot be proved to be the recorded one is left alone and
 * named in the log. Each record is forgotten once dealt with. berthd
 * waits (at most ORPHAN_WAIT_MS) until the killed processes are gone, so
 * that a job run again never overlaps its orphaned run.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log/log.h"
#include "worker/internal.h"

/* How long start-up waits for killed groups to be gone. */
#define ORPHAN_WAIT_MS 5000

static char boot[40];
static pthread_once_t boot_once = PTHREAD_ONCE_INIT;

static void read_boot_id(void)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	if (f) {
		if (!fgets(boot, sizeof(boot), f))
			boot[0] = '\0';
		fclose(f);
	}
	boot[strcspn(boot, "\n")] = '\0';
}

const char *worker__boot_id(void)
{
	pthread_once(&boot_once, read_boot_id);
	return boot;
}

int64_t worker__boot_ticks(void)
{
	long tck = sysconf(_SC_CLK_TCK); /* a constant of glibc's: no call */
	struct timespec ts;

	if (tck <= 0)
		tck = 100;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	/* As the kernel converts a task's start_boottime for /proc: the
	 * nanoseconds divided by those of a tick, rounded down. */
	return ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec) / (1000000000 / tck);
}

int worker__proc_stat(pid_t pid, int64_t *pgid, int64_t *start, char *state)
{
	char path[64], buf[1024];
	unsigned long long st = 0;
	long long pg = 0;
	ssize_t n;
	char *p;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -ESRCH;
	buf[n] = '\0';
	/* "PID (COMM) S PPID PGRP SESSION ...": the name may hold spaces and
	 * parentheses, so the fields are counted from the last ')'. State is
	 * field 3, pgrp 5, starttime 22. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1,
			 " %c %*d %lld %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u "
			 "%*d %*d %*d %*d %*d %*d %llu",
			 state, &pg, &st) != 3)
		return -EINVAL;
	*pgid = pg;
	*start = (int64_t)st;
	return 0;
}

static void record_done(struct worker__op *op, int rc)
{
	const struct store_proc *p = &op->req.u.proc.proc;

	if (rc && !op->req.u.proc.remove)
		log_warn("job %s: its process %lld could not be recorded (%s); "
			 "should berthd die during this run, what the process "
			 "started would be left running",
			 p->job_id, (long long)p->pid, strerror(-rc));
	worker__op_free(op);
}

void worker__orphans_record(struct worker *w, const char *job_id, pid_t pid,
			    int64_t start_min, int64_t start_max, bool remove)
{
	struct worker__op *op;
	struct store_proc *p;

	/* The keeper kills the group should berthd die now; the record
	 * lets the next start kill it should the keeper not be there. */
	worker__keeper_note(pid, remove);
	if (!(op = worker__op_new(w, NULL, NULL)))
		return;
	op->req.op = STORE_OP_PROC;
	op->req.u.proc.remove = remove;
	p = &op->req.u.proc.proc;
	snprintf(p->job_id, sizeof(p->job_id), "%s", job_id);
	snprintf(p->boot_id, sizeof(p->boot_id), "%s", worker__boot_id());
	p->pid = pid;
	p->start_min = start_min;
	p->start_max = start_max;
	if (worker__op_submit(op, record_done))
		worker__op_free(op);
}

/* environ_has tells whether pid was started with entry ("NAME=value") in
 * its environment (/proc/PID/environ: NUL-separated; readable for a
 * process of the same user that is not set-uid). */
static bool environ_has(pid_t pid, const char *entry)
{
	char path[64];
	size_t len = strlen(entry), cap = 1 << 16, n = 0;
	char *buf = malloc(cap + 1);
	bool found = false;
	ssize_t r;
	int fd;

	if (!buf)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(buf);
		return false;
	}
	/* The environment is at most a few hundred KiB (ARG_MAX). */
	while ((r = read(fd, buf + n, cap - n)) > 0) {
		n += (size_t)r;
		if (n == cap) {
			char *x = cap < (1u << 24) ? realloc(buf, cap * 2 + 1) : NULL;

			if (!x)
				break;
			buf = x;
			cap *= 2;
		}
	}
	close(fd);
	buf[n] = '\0';
	for (size_t i = 0; i < n && !found; i += strlen(buf + i) + 1)
		found = strncmp(buf + i, entry, len) == 0 && buf[i + len] == '\0';
	free(buf);
	return found;
}

/* scan_group looks at every process of group pgid that is not a zombie:
 * returns how many there are, and in *marked whether one of them carries
 * entry in its environment (when entry is not NULL). */
static int scan_group(int64_t pgid, const char *entry, bool *marked)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	if (marked)
		*marked = false;
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		int64_t pg, start;
		char state;
		pid_t pid;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid = (pid_t)atoi(e->d_name);
		if (worker__proc_stat(pid, &pg, &start, &state) != 0 ||
		    pg != pgid || state == 'Z')
			continue;
		n++;
		if (entry && marked && !*marked && environ_has(pid, entry))
			*marked = true;
	}
	closedir(d);
	return n;
}

enum verdict { GONE, KILL, UNSURE };

/* decide tells whether the group of record p is gone, or alive and proved
 * to be the recorded one (see the file's comment), or neither. */
static enum verdict decide(const struct store_proc *p)
{
	int64_t pgid, start;
	char state, entry[64];
	bool marked;

	/* Nothing of an earlier boot runs. */
	if (strcmp(p->boot_id, worker__boot_id()) != 0)
		return GONE;
	if (worker__proc_stat((pid_t)p->pid, &pgid, &start, &state) == 0)
		/* Another start time: the pid was given out again, which
		 * it could not have been while the group lived. */
		return start >= p->start_min && start <= p->start_max ? KILL
								      : GONE;
	snprintf(entry, sizeof(entry), "BERTH_JOB_ID=%s", p->job_id);
	if (scan_group(p->pid, entry, &marked) == 0)
		return GONE;
	return marked ? KILL : UNSURE;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

int worker__orphans_kill(struct worker *w)
{
	struct store_proc *v = NULL;
	size_t n = 0;
	int killed = 0, rc;
	int64_t *groups;

	rc = store_procs(w->st, &v, &n);
	if (rc) {
		log_warn("reading the process groups the last run of berthd "
			 "recorded failed (%s); any it left running are not "
			 "stopped",
			 strerror(-rc));
		return rc;
	}
	groups = calloc(n + 1, sizeof(*groups));
	if (!groups) {
		free(v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const struct store_proc *p = &v[i];
		enum verdict d = decide(p);

		if (d == KILL && kill(-(pid_t)p->pid, SIGKILL) == 0) {
			groups[killed++] = p->pid;
			log_info("job %s: killed the process group %lld its "
				 "tool left running when berthd stopped",
				 p->job_id, (long long)p->pid);
		} else if (d == UNSURE) {
			log_warn("job %s: the process group %lld its tool left "
				 "is left alone: its leader is gone, and no "
				 "process left in it carries the job's id, so it "
				 "may be another program's",
				 p->job_id, (long long)p->pid);
		}
		worker__orphans_record(w, p->job_id, (pid_t)p->pid, p->start_min,
				       p->start_max, true);
	}
	/* A SIGKILLed process may take a moment to go: the job it ran must
	 * not start again beside it. */
	for (int waited = 0; killed > 0 && waited < ORPHAN_WAIT_MS; waited += 10) {
		int left = 0;

		for (int i = 0; i < killed; i++)
			left += scan_group(groups[i], NULL, NULL);
		if (left == 0)
			break;
		sleep_ms(10);
	}
	free(groups);
	free(v);
	return killed;
}

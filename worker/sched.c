/*
 * sched.c: the scheduler. It claims runnable jobs from the store when a
 * slot is free, keeping at most one claim in flight, and arms two timers:
 * one at the next run_at (delayed jobs and retries) and one at the next
 * expiry (ttl of suspended and approval-waiting jobs). Nothing polls the
 * database in a loop: a claim happens when work was committed (on any node:
 * the worker listens to the store's events), when a slot was freed that a
 * job may wait for (worker__sched_freed), or when a timer says a job
 * became due. The backlog flag says whether a runnable job may wait: set
 * by every sign of one, and by a kick that found no slot free; cleared by
 * a claim that came back short of its limit with no sign since it was
 * asked for. Each claim also reports, from its own
 * transaction, the earliest future run_at of a job it could take (not of
 * a tool it excluded as full or paused), and the run timer is armed from
 * that: a due job held by its full tool cannot hide the delayed job of
 * another tool, and no re-check polls for it.
 *
 * The store picks jobs (priority, then run_at, then age) and honours the
 * per-tool caps in the same transaction, so the same scheduler works for a
 * store shared by several daemons.
 *
 * Worker processes (remote.c) have room of their own, apart from the pool
 * of --workers: a claim fills both at once, the pool by the claim's limit
 * and each set of connections by a group of its own (store.h), so that
 * neither starves the other and a job of one kind never takes the room of
 * the other. Connections that register the same tools form one group, of
 * their free runs summed; groups whose tools overlap do not go in the same
 * claim (the store could give one group's room to jobs that only the
 * other serves), so the one with the most free runs goes first and the
 * others follow in the next claims. A worker tool no connection has room
 * for has a cap of 0: its jobs stay pending. A connection whose group came
 * back short is dry: no job of its tools was left, and it is left out of
 * claims until something may have made one runnable (worker.wakes).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/builtin.h"
#include "worker/internal.h"

/* At most this many future run_at values are remembered; beyond it the
 * latest are dropped, and a claim's next run_at finds them after the
 * earlier ones ran. */
#define MAX_WAKEUPS 1024

/* A claim that failed (a locked database) is tried again after this. */
#define CLAIM_RETRY_MS 1000

static void claim_done(struct worker__op *op, int rc);
static void run_timer_cb(uv_timer_t *h);
static void expiry_retry_cb(uv_timer_t *h);

/* The longest tool name (worker__valid_tool_name), and its NUL. */
#define CAP_NAME 129

/* How often a freed slot claims on a shared database when nothing is
 * known to wait (worker__sched_freed). */
#define SHARED_IDLE_CLAIM_MS 100

/* same_tools is true when a and b registered the same tools. */
static bool same_tools(const struct worker_remote *a,
		       const struct worker_remote *b)
{
	if (a->ntools != b->ntools)
		return false;
	for (size_t i = 0; i < a->ntools; i++)
		if (a->tools[i] != b->tools[i])
			return false;
	return true;
}

/* share_tools is true when a and b have a tool in common. */
static bool share_tools(const struct worker_remote *a,
			const struct worker_remote *b)
{
	size_t i = 0, k = 0;

	while (i < a->ntools && k < b->ntools) {
		int c = strcmp(a->tools[i]->id, b->tools[k]->id);

		if (c == 0)
			return true;
		if (c < 0)
			i++;
		else
			k++;
	}
	return false;
}

/* takes_runs is true for a connection that a claim may fill. */
static bool takes_runs(const struct worker_remote *rem)
{
	return !rem->draining && !rem->dry && worker__remote_free_runs(rem) > 0;
}

/*
 * plan_groups chooses the groups of a claim (the file's comment): it sets
 * rem->group of the chosen connections (1-based) and writes each group's
 * free runs into room (room and reps have a place per connection), and
 * returns how many groups there are; *skipped tells whether a connection
 * with room was left for a later claim.
 */
static size_t plan_groups(struct worker *w, int *room,
			  struct worker_remote **reps, bool *skipped)
{
	size_t nreps = 0, ngroups = 0;
	int *sums = room; /* each set's free runs, until chosen */

	*skipped = false;
	/* The sets of connections that registered the same tools, each
	 * named by its first connection. */
	for (struct worker_remote *rem = w->remotes; rem; rem = rem->next) {
		size_t k = 0;

		rem->group = 0;
		if (!takes_runs(rem))
			continue;
		while (k < nreps && !same_tools(reps[k], rem))
			k++;
		if (k == nreps) {
			reps[nreps] = rem;
			sums[nreps++] = 0;
		}
		sums[k] += worker__remote_free_runs(rem);
	}
	/* Most free runs first; a set whose tools overlap a chosen one
	 * waits for the next claim. The chosen move to the front, in
	 * order, so that room[g - 1] is group g's. */
	while (ngroups < nreps) {
		size_t best = ngroups;

		for (size_t k = ngroups + 1; k < nreps; k++)
			if (sums[k] > sums[best])
				best = k;
		for (size_t g = 0; g < ngroups && best < nreps; g++)
			if (share_tools(reps[g], reps[best])) {
				*skipped = true;
				/* Out of this claim: moved past the end. */
				reps[best] = reps[--nreps];
				sums[best] = sums[nreps];
				best = nreps;
			}
		if (best == nreps)
			continue;
		{
			struct worker_remote *r = reps[best];
			int f = sums[best];

			reps[best] = reps[ngroups];
			sums[best] = sums[ngroups];
			reps[ngroups] = r;
			sums[ngroups] = f;
			ngroups++;
		}
	}
	for (struct worker_remote *rem = w->remotes; rem; rem = rem->next) {
		if (!takes_runs(rem))
			continue;
		for (size_t g = 0; g < ngroups; g++)
			if (same_tools(reps[g], rem))
				rem->group = (int)g + 1;
	}
	return ngroups;
}

/* group_of returns the group of the claim being planned that serves t. */
static int group_of(const struct worker *w, const struct worker_tool *t)
{
	for (const struct worker_remote *rem = w->remotes; rem; rem = rem->next) {
		if (!rem->group)
			continue;
		for (size_t i = 0; i < rem->ntools; i++)
			if (rem->tools[i] == t)
				return rem->group;
	}
	return 0;
}

bool worker__tool_uses_thread(const struct worker_tool *t)
{
	return t->c && !t->c->nonblocking && !worker__builtin_is_sleep(t->c);
}

/* in_hand returns how many runs that take a thread the claims may bring:
 * the threads, and as many again (at least WORKER__THREAD_QUEUE) waiting
 * for one in exec.c, so that a thread that frees has its next job at hand
 * instead of behind a claim's commit (a claim per freed thread put a
 * durable commit between every two runs on a thread). The queue takes at
 * most half the slots the threads leave, which stay the waits'. */
static int in_hand(const struct worker *w)
{
	int t = w->cfg.threads;
	int queue = t > WORKER__THREAD_QUEUE ? t : WORKER__THREAD_QUEUE;

	if (queue > (w->cfg.workers - t) / 2)
		queue = (w->cfg.workers - t) / 2;
	return t + queue;
}

/* pooled tells whether the runs of t take a slot of cfg.threads too:
 * they use a thread, and the threads are fewer than the slots. */
static bool pooled(const struct worker *w, const struct worker_tool *t)
{
	return w->cfg.threads > 0 && w->cfg.threads < w->cfg.workers &&
	       worker__tool_uses_thread(t);
}

/*
 * claim_caps returns the caps of a claim (calloc'd, one block that
 * worker__op_free frees) and their number in *n: a cap of 0 for each
 * missing tool, whose jobs wait for it, one for each tool with a
 * concurrency limit or whose runs take a thread (pool: the claim takes
 * no more of those than threads are free), and one for each worker
 * process's tool, in the group of the connections that have room for it
 * (or of 0: not now). The groups' room follows the caps in the block
 * (*groups, *ngroups). The claim runs on the store's writer thread, and a
 * reload may free a tool before it comes back, so each cap's name is a
 * copy of its own, after the caps and the groups in the same block.
 */
static struct store_cap *claim_caps(struct worker *w, size_t *n, int **groups,
				    size_t *ngroups, bool *skipped)
{
	size_t want = w->nmissing, k = 0, nr = 0, ng;
	struct worker_remote **reps;
	struct store_cap *caps;
	int *room;
	char *names;

	for (size_t i = 0; i < w->ntools; i++)
		if (w->tools[i]->bg.concurrency > 0 || w->tools[i]->definition ||
		    pooled(w, w->tools[i]))
			want++;
	for (struct worker_remote *rem = w->remotes; rem; rem = rem->next)
		nr++;
	reps = calloc(nr + 1, sizeof(*reps));
	caps = calloc(1, (want ? want : 1) * (sizeof(*caps) + CAP_NAME) +
				 (nr + 1) * sizeof(int));
	if (!caps || !reps) {
		free(reps);
		free(caps);
		return NULL;
	}
	room = (int *)(caps + want);
	names = (char *)(room + nr + 1);
	ng = plan_groups(w, room, reps, skipped);
	free(reps);
	for (size_t i = 0; i < w->nmissing; i++, k++) {
		snprintf(names + k * CAP_NAME, CAP_NAME, "%s", w->missing[i]);
		caps[k].tool = names + k * CAP_NAME;
	}
	for (size_t i = 0; i < w->ntools; i++) {
		struct worker_tool *t = w->tools[i];
		int left = t->bg.concurrency - t->running;

		if (t->bg.concurrency <= 0 && !t->definition && !pooled(w, t))
			continue;
		snprintf(names + k * CAP_NAME, CAP_NAME, "%s", t->id);
		caps[k].tool = names + k * CAP_NAME;
		caps[k].remaining = t->bg.concurrency > 0 ? (left > 0 ? left : 0)
				    : pooled(w, t)    ? in_hand(w)
						      : 0;
		if (t->definition) {
			int g = group_of(w, t);

			/* No connection with room serves it now: its jobs
			 * stay pending. */
			caps[k].group = g;
			if (!g)
				caps[k].remaining = 0;
			else if (t->bg.concurrency <= 0 ||
				 caps[k].remaining > room[g - 1])
				caps[k].remaining = room[g - 1];
		}
		/* A tool's concurrency holds for the whole cluster on a
		 * shared database: the store counts the tool's running jobs
		 * of every node under a lock. remaining alone would let
		 * each node run that many. */
		caps[k].limit = t->bg.concurrency > 0 ? t->bg.concurrency : 0;
		/* A worker process's tool takes none of berthd's threads
		 * (t->c is NULL): only C tools are pooled. */
		caps[k].pool = pooled(w, t);
		k++;
	}
	*n = k;
	*groups = room;
	*ngroups = ng;
	return caps;
}

void worker__tool_missing(struct worker *w, const char *name)
{
	char *copy;

	if (worker__tool_is_missing(w, name))
		return;
	if (w->nmissing == w->capmissing) {
		size_t cap = w->capmissing ? 2 * w->capmissing : 8;
		char **p = realloc(w->missing, cap * sizeof(*p));

		if (!p)
			return; /* its jobs are claimed and put back again */
		w->missing = p;
		w->capmissing = cap;
	}
	if ((copy = strdup(name)))
		w->missing[w->nmissing++] = copy;
}

bool worker__tool_is_missing(const struct worker *w, const char *name)
{
	for (size_t i = 0; i < w->nmissing; i++)
		if (strcmp(w->missing[i], name) == 0)
			return true;
	return false;
}

void worker__tool_present(struct worker *w, const char *name)
{
	for (size_t i = 0; i < w->nmissing; i++) {
		if (strcmp(w->missing[i], name) != 0)
			continue;
		free(w->missing[i]);
		w->missing[i] = w->missing[--w->nmissing];
		/* Its jobs waited for it: claim them. */
		w->backlog = true;
		worker__remote_wake(w, name);
		worker__sched_kick(w);
		worker__sched_rearm(w);
		return;
	}
}

/* remote_room is true when a connection may take a job of a claim. */
static bool remote_room(const struct worker *w)
{
	for (const struct worker_remote *rem = w->remotes; rem; rem = rem->next)
		if (takes_runs(rem))
			return true;
	return false;
}

void worker__sched_kick(struct worker *w)
{
	struct worker__op *op;
	size_t ncaps = 0, ngroups = 0;
	int free_slots, *groups = NULL;
	bool skipped = false;

	if (!w->started || w->stopping)
		return;
	if (w->claim_inflight) {
		w->claim_again = true;
		return;
	}
	/* A kick that cannot claim leaves the backlog set: whatever it was
	 * for waits for the next freed slot, which then claims
	 * (worker__sched_freed). */
	free_slots = w->cfg.workers - w->busy;
	if (free_slots <= 0 && !remote_room(w)) {
		w->backlog = true;
		return;
	}
	op = worker__op_new(w, NULL, NULL);
	if (!op) {
		w->backlog = true;
		return;
	}
	op->caps = claim_caps(w, &ncaps, &groups, &ngroups, &skipped);
	if (!op->caps || (free_slots <= 0 && ngroups == 0)) {
		w->backlog = true;
		worker__op_free(op);
		return;
	}
	op->groups = groups;
	op->wakes = w->wakes;
	w->claim_skipped = skipped;
	op->req.op = STORE_OP_CLAIM;
	/* The pool is this node's: --workers sizes the processes and
	 * threads of one machine, so free_slots bounds the claim. A total
	 * over all nodes (--cluster-workers) is asked for only when the
	 * operator sets one: counted under a lock at each claim, it costs
	 * every claim a count of the running jobs. */
	op->req.u.claim.global_limit =
		store_shared(w->st) ? w->cfg.cluster_workers : 0;
	op->req.u.claim.limit = free_slots > 0 ? free_slots : 0;
	op->req.u.claim.groups = groups;
	op->req.u.claim.ngroups = ngroups;
	/* The threads apart: CPU work takes no more than in_hand, and jobs
	 * that only wait (processes, sleeps, nonblocking tools) the other
	 * slots (daemon.c's --threads). */
	op->req.u.claim.pool_remaining = in_hand(w) - w->threads_busy;
	op->req.u.claim.now = w->last_claim_now = store_now();
	op->req.u.claim.caps = op->caps;
	op->req.u.claim.ncaps = ncaps;
	w->claim_inflight = true;
	w->claim_again = false;
	w->claims++;
	if (worker__op_submit(op, claim_done)) {
		w->claim_inflight = false;
		worker__op_free(op);
	}
}

/*
 * worker__sched_freed is told of a slot freed by a run of t (thread: it
 * held one of cfg.threads) and claims when a job may wait for it. A
 * claim per freed slot put a transaction of the writer's between every
 * two batches of jobs that ran at their submission (on PostgreSQL two
 * round trips, whose wait the next batch shared), and it found nothing:
 * while the backlog is clear no runnable job waits but those a claim
 * left out, and those wait for what this run may have freed, a slot of
 * its tool's limit, a thread, a worker process's room. So a freed slot
 * claims when the backlog is set, a delayed job is due, the run's tool
 * is one a claim caps, or a worker process has room; otherwise it
 * claims nothing. A shared database has one sign no event carries, a
 * tool unpaused by another node, so there a freed slot still claims
 * once every SHARED_IDLE_CLAIM_MS.
 */
void worker__sched_freed(struct worker *w, const struct worker_tool *t,
			 bool thread)
{
	int64_t now = store_now();

	/* A slot of the tool's limit is free: the connections serving it
	 * that a claim found dry while the limit was full may have work
	 * now (a claim leaves dry ones out, and the jobs it left pending
	 * wait for exactly this). */
	if (t && t->bg.concurrency > 0)
		worker__remote_wake(w, t->id);

	if (w->backlog || thread || !t || t->bg.concurrency > 0 ||
	    t->definition || (w->next_run_at && w->next_run_at <= now) ||
	    (w->nwakeups && w->wakeups[0] <= now) || remote_room(w) ||
	    (store_shared(w->st) &&
	     now - w->last_claim_now >= SHARED_IDLE_CLAIM_MS))
		worker__sched_kick(w);
}

/* room_now tells whether the new job j of t may start in its creation's
 * transaction rather than by a claim: a slot is free, nothing runnable
 * waits ahead of it (no backlog, no delayed job or retry due), and a
 * claim has nothing to count for it. A tool with a limit is left to the
 * claim, which counts it (on a shared database, every node's jobs); so is
 * a delayed job, one that needs approval or has an idempotency key. */
static bool room_now(struct worker *w, struct worker_tool *t,
		     const struct store_job *j, int64_t now)
{
	if (!w->started || w->stopping || w->backlog ||
	    w->busy >= w->cfg.workers)
		return false;
	if (t->bg.concurrency > 0 || j->status != STORE_PENDING ||
	    j->run_at > now || j->idempotency_key)
		return false;
	if ((w->next_run_at && w->next_run_at <= now) ||
	    (w->nwakeups && w->wakeups[0] <= now))
		return false;
	return true;
}

bool worker__sched_may_start(struct worker *w, struct worker_tool *t,
			     const struct store_job *j, int64_t now)
{
	/* Only a nonblocking tool's execute may run before its job is
	 * durable (berth.h), and only without a hook that must come first.
	 * Any other job starts after its creation is durable: the answer
	 * leaves before a tool that crashes the daemon can run. On a shared
	 * database the paused flag known here may be stale (another node
	 * may have paused the tool): the store checks it again when the
	 * creation commits, and writes the job as submitted if it is paused
	 * (store.h). */
	if (!t->c || !t->c->nonblocking || t->c->on_input_available ||
	    !room_now(w, t, j, now))
		return false;
	return worker__tool_unpaused(w, t);
}

bool worker__sched_may_start_proc(struct worker *w, struct worker_tool *t,
				  const struct store_job *j, int64_t now)
{
	/* The process starts once the creation, which records the job
	 * running, is durable (ops.c, start_held): as after a claim, a
	 * process never has effects for a job that a crash could lose. On a
	 * shared database a tool paused by another node would be written
	 * as submitted (store.h) while its process ran, so there the claim
	 * decides, as for a worker process's tool (remote.c). */
	if (!t->cmd || store_shared(w->st) || !room_now(w, t, j, now))
		return false;
	return worker__tool_unpaused(w, t);
}

bool worker__tool_unpaused(struct worker *w, struct worker_tool *t)
{
	int paused;

	if (t->pause == WORKER__PAUSE_UNKNOWN) {
		paused = store_tool_paused(w->st, t->id);
		if (paused < 0)
			return false;
		t->pause = paused ? WORKER__PAUSE_YES : WORKER__PAUSE_NO;
	}
	return t->pause == WORKER__PAUSE_NO;
}

/* cap_group returns the group of tool in op's claim (0: the pool's). */
static int cap_group(const struct worker__op *op, const char *tool)
{
	for (size_t i = 0; i < op->req.u.claim.ncaps; i++)
		if (strcmp(op->caps[i].tool, tool) == 0)
			return op->caps[i].group;
	return 0;
}

static void claim_done(struct worker__op *op, int rc)
{
	struct worker *w = op->w;
	int limit = op->req.u.claim.limit, pooled = 0;
	size_t n = rc == 0 ? op->req.njobs : 0;
	size_t ngroups = op->req.u.claim.ngroups;
	int *taken = calloc(ngroups + 1, sizeof(*taken));
	bool more = false;

	if (!taken)
		rc = rc ? rc : -ENOMEM;
	if (rc == 0)
		w->next_run_at = op->req.next_run_at;
	if (rc == 0 && n == 0)
		w->claims_empty++;
	for (size_t i = 0; i < n; i++) {
		int g = cap_group(op, op->req.jobs[i]->tool);

		if (g > 0 && (size_t)g <= ngroups && taken)
			taken[g - 1]++;
		else
			pooled++;
	}
	/* Short of its limit: no job was left that it could take. The
	 * tools it excluded never start a job at submission (full ones
	 * have a limit; paused ones are asked). Unless something asked for
	 * a claim while this one was under way: the job that asked may
	 * have committed after this claim read, so the backlog stays set
	 * for the claim that follows. */
	if (rc == 0 && pooled < limit && !w->claim_again)
		w->backlog = false;
	/* A group short of its room had no job left for its connections:
	 * they are dry until jobs may have become runnable since the claim
	 * was asked for. A full one may have more. */
	for (struct worker_remote *rem = w->remotes; rem; rem = rem->next) {
		int g = rem->group;

		rem->group = 0;
		if (!taken || g <= 0 || (size_t)g > ngroups)
			continue;
		if (taken[g - 1] < op->groups[g - 1]) {
			if (op->wakes == w->wakes)
				rem->dry = true;
		} else {
			more = true;
		}
	}
	/* The claim stays in flight while its jobs start: a run that ends
	 * at once (an unknown tool, a failed start) frees its slot and
	 * kicks, and a claim sized then would not count the jobs of this
	 * batch not yet started; the kick sets claim_again instead. */
	for (size_t i = 0; i < n; i++) {
		struct store_job *j = op->req.jobs[i];

		op->req.jobs[i] = NULL;
		/* Jobs claimed after a shutdown began stay running in the
		 * store; the shutdown puts them back to pending. */
		if (w->stopping) {
			store_job_free(j);
		} else {
			w->started_by_claim++;
			worker__run_start(w, j);
		}
	}
	w->claim_inflight = false;
	free(taken);
	worker__op_free(op);
	if (w->stopping) {
		worker__check_shutdown(w);
		return;
	}
	if (rc) {
		uv_timer_start(&w->run_timer, run_timer_cb, CLAIM_RETRY_MS, 0);
		return;
	}
	if (w->claim_again || (limit > 0 && pooled == limit &&
			       w->busy < w->cfg.workers) ||
	    ((more || w->claim_skipped) && remote_room(w)))
		worker__sched_kick(w);
	worker__sched_rearm(w);
}

void worker__sched_wakeup(struct worker *w, int64_t at)
{
	size_t i;

	/* A job waits for a claim: until one comes back short, nothing
	 * runs at its submission ahead of it. */
	w->backlog = true;
	/* Due already (perhaps only since the caller looked at the clock):
	 * claim now, or the job would wait for some other wake-up. */
	if (at <= store_now()) {
		worker__sched_kick(w);
		return;
	}
	if (w->nwakeups == w->capwakeups) {
		size_t cap = w->capwakeups ? 2 * w->capwakeups : 16;
		int64_t *p;

		if (cap > MAX_WAKEUPS)
			cap = MAX_WAKEUPS;
		if (w->nwakeups < cap &&
		    (p = realloc(w->wakeups, cap * sizeof(*p)))) {
			w->wakeups = p;
			w->capwakeups = cap;
		} else if (w->nwakeups == 0 ||
			   at >= w->wakeups[w->nwakeups - 1]) {
			worker__sched_rearm(w);
			return;
		} else {
			w->nwakeups--; /* drop the latest */
		}
	}
	for (i = w->nwakeups; i > 0 && w->wakeups[i - 1] > at; i--)
		w->wakeups[i] = w->wakeups[i - 1];
	w->wakeups[i] = at;
	w->nwakeups++;
	worker__sched_rearm(w);
}

static void run_timer_cb(uv_timer_t *h)
{
	struct worker *w = h->data;

	/* A delayed job may be due: a dry connection may have work. */
	worker__remote_wake(w, NULL);
	worker__sched_kick(w);
	/* When no claim could start (every slot busy), the next freed slot
	 * claims; still keep the timer on the next due time. */
	if (!w->claim_inflight)
		worker__sched_rearm(w);
}

void worker__sched_rearm(struct worker *w)
{
	int64_t now = store_now(), at, due;
	size_t drop = 0;

	if (!w->started || w->stopping)
		return;
	while (drop < w->nwakeups && w->wakeups[drop] <= now)
		drop++;
	if (drop) {
		memmove(w->wakeups, w->wakeups + drop,
			(w->nwakeups - drop) * sizeof(*w->wakeups));
		w->nwakeups -= drop;
	}
	/* The last claim's next run_at (store.h): the earliest future
	 * run_at of a job it could have taken. A job of a tool it excluded
	 * (full, paused) is claimed when a slot of that tool is freed or the
	 * tool is unpaused, and a due job it left waits for a slot of the
	 * pool, whose release claims again: only this time needs the timer,
	 * and nothing spins. Work committed since (here or on another node)
	 * asked for a claim of its own, which brings a new answer. */
	at = w->next_run_at;
	/* A job came due (a wakeup dropped above), or it became due after
	 * the last claim looked (while that claim was under way, or the
	 * timer fired a little early): claim now. A claim too early for the
	 * job took its worker processes for dry, and a claim leaves dry
	 * ones out, so that no later claim names the job in its next run_at;
	 * they may have work now, as run_timer_cb says, or the job would
	 * wait until something else woke them. */
	if (drop || (at && at <= now && at > w->last_claim_now &&
		     !w->claim_inflight)) {
		w->backlog = true;
		worker__remote_wake(w, NULL);
		if (w->busy < w->cfg.workers || remote_room(w))
			worker__sched_kick(w);
		if (w->claim_inflight)
			return; /* claim_done rearms */
	}
	due = at > now ? at : 0;
	if (w->nwakeups && (!due || w->wakeups[0] < due))
		due = w->wakeups[0];
	if (!due) {
		uv_timer_stop(&w->run_timer);
		return;
	}
	uv_timer_start(&w->run_timer, run_timer_cb, (uint64_t)(due - now), 0);
}

/* ---- expiry ----------------------------------------------------------- */

static void expire_done(struct worker__op *op, int rc)
{
	struct worker *w = op->w;

	worker__op_free(op);
	if (rc && !w->stopping) {
		uv_timer_start(&w->expiry_timer, expiry_retry_cb,
			       CLAIM_RETRY_MS, 0);
		return;
	}
	worker__expiry_rearm(w);
}

static void expiry_retry_cb(uv_timer_t *h)
{
	worker__expiry_rearm(h->data);
}

static void expiry_cb(uv_timer_t *h)
{
	struct worker *w = h->data;
	struct worker__op *op = worker__op_new(w, NULL, NULL);

	if (!op || w->stopping) {
		if (op)
			worker__op_free(op);
		return;
	}
	op->req.op = STORE_OP_EXPIRE;
	op->req.u.expire.now = store_now();
	if (worker__op_submit(op, expire_done))
		worker__op_free(op);
}

void worker__expiry_rearm(struct worker *w)
{
	int64_t at = 0, now = store_now();

	if (!w->started || w->stopping)
		return;
	if (store_next_expiry(w->st, &at)) {
		at = now + CLAIM_RETRY_MS;
	}
	if (!at) {
		uv_timer_stop(&w->expiry_timer);
		return;
	}
	uv_timer_start(&w->expiry_timer, expiry_cb,
		       at > now ? (uint64_t)(at - now) : 0, 0);
}

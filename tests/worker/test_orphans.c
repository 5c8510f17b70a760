/*
 * test_orphans.c: worker__orphans_kill (worker/orphans.c) on real process
 * groups and real records in a temporary store: which recorded groups it
 * kills, which it leaves alone, and that it forgets every record.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "worker/internal.h"

#define JOB "0193aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"

struct group {
	pid_t leader;
	pid_t member; /* a process the leader started, in its group */
	int pidfd;
};

/* start_group starts `sh -c SCRIPT` as a tool is started (its own session
 * and group), with BERTH_JOB_ID=JOB in its environment when marked; the
 * script prints the pid of the member it starts. */
static void start_group(struct group *g, const char *script, bool marked)
{
	char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
	char *env[] = {"PATH=/usr/bin:/bin",
		       marked ? "BERTH_JOB_ID=" JOB : "OTHER=1", NULL};
	struct worker__spawn s = {.argv = argv, .env = env};
	int parent[3], child[3];
	char buf[32] = "";
	ssize_t n;

	assert_int_equal(worker__spawn_pipes(parent, child), 0);
	memcpy(s.stdio, child, sizeof(s.stdio));
	assert_int_equal(worker__spawn_start(&s, &g->leader, &g->pidfd, NULL), 0);
	worker__spawn_close(child);
	close(parent[0]);
	parent[0] = -1;
	n = read(parent[1], buf, sizeof(buf) - 1);
	assert_true(n > 0);
	buf[n] = '\0';
	g->member = (pid_t)atoi(buf);
	assert_true(g->member > 0);
	worker__spawn_close(parent);
}

/* leaderless waits for the leader to exit and reaps it: its group lives on
 * in its member. */
static void leaderless(struct group *g)
{
	struct pollfd pfd = {.fd = g->pidfd, .events = POLLIN};

	assert_int_equal(poll(&pfd, 1, 10000), 1);
	worker__spawn_reap(g->leader);
	close(g->pidfd);
	g->pidfd = -1;
}

/* running tells whether pid exists and is not a zombie. */
static bool running(pid_t pid)
{
	int64_t pgid, start;
	char state;

	return worker__proc_stat(pid, &pgid, &start, &state) == 0 && state != 'Z';
}

static void done_cb(struct store_req *req, int rc)
{
	*(int *)req->data = rc;
}

/* record writes a process record for g's leader with start (0: its own). */
static void record(struct fx *f, const struct group *g, int64_t start,
		   const char *boot)
{
	struct store_req req = {.op = STORE_OP_PROC, .done = done_cb};
	int rc = 1;

	req.data = &rc;
	snprintf(req.u.proc.proc.job_id, sizeof(req.u.proc.proc.job_id), "%s", JOB);
	snprintf(req.u.proc.proc.boot_id, sizeof(req.u.proc.proc.boot_id), "%s",
		 boot ? boot : worker__boot_id());
	req.u.proc.proc.pid = g->leader;
	if (start == 0) {
		int64_t pgid;
		char state;

		assert_int_equal(worker__proc_stat(g->leader, &pgid, &start, &state), 0);
		assert_int_equal(pgid, g->leader);
	}
	req.u.proc.proc.start_min = start;
	req.u.proc.proc.start_max = start;
	assert_int_equal(store_submit(f->st, &req), 0);
	while (rc == 1)
		uv_run(&f->loop, UV_RUN_ONCE);
	assert_int_equal(rc, 0);
}

/* records returns how many process records the store holds. */
static size_t records(struct fx *f)
{
	struct store_proc *v = NULL;
	size_t n = 0;

	fx_run_for(f, 50); /* the forgetting commits */
	assert_int_equal(store_procs(f->st, &v, &n), 0);
	free(v);
	return n;
}

/* finish kills what is left of g, reaps its leader and waits (10 s at
 * most) until its member is gone too: kill only sends the signal, and a
 * member still dying when the next step looks (a busy machine) is a
 * group still alive. */
static void finish(struct group *g)
{
	kill(-g->leader, SIGKILL);
	kill(g->member, SIGKILL);
	if (g->pidfd >= 0) {
		worker__spawn_reap(g->leader);
		close(g->pidfd);
	}
	for (int i = 0; i < 1000 && running(g->member); i++)
		usleep(10000);
	assert_false(running(g->member));
}

static const char *const script = "sleep 60 & echo $!; exec sleep 60";
static const char *const script_exit = "sleep 60 & echo $!; exit 0";

static void orphans__a_recorded_group_still_alive__is_killed_and_forgotten(
	void **state)
{
	struct fx *f = fx_new(NULL);
	struct group g;

	start_group(&g, script, false);
	record(f, &g, 0, NULL);
	assert_int_equal(records(f), 1);
	assert_int_equal(worker__orphans_kill(f->w), 1);
	assert_false(running(g.leader));
	assert_false(running(g.member));
	assert_int_equal(records(f), 0);
	finish(&g);
	fx_free(f);
}

static void orphans__a_pid_naming_another_process__is_left_alone(void **state)
{
	struct fx *f = fx_new(NULL);
	struct group g;
	int64_t pgid, start;
	char st;

	start_group(&g, script, true);
	assert_int_equal(worker__proc_stat(g.leader, &pgid, &start, &st), 0);
	/* The record's process started at another time: the pid was given
	 * to this one since. */
	record(f, &g, start - 2, NULL);
	assert_int_equal(worker__orphans_kill(f->w), 0);
	assert_true(running(g.leader));
	assert_true(running(g.member));
	assert_int_equal(records(f), 0);
	finish(&g);
	fx_free(f);
}

static void orphans__a_record_of_another_boot__is_left_alone(void **state)
{
	struct fx *f = fx_new(NULL);
	struct group g;

	start_group(&g, script, true);
	record(f, &g, 0, "00000000-0000-0000-0000-000000000000");
	assert_int_equal(worker__orphans_kill(f->w), 0);
	assert_true(running(g.leader));
	assert_int_equal(records(f), 0);
	finish(&g);
	fx_free(f);
}

static void orphans__a_leaderless_group_of_the_job__is_killed(void **state)
{
	struct fx *f = fx_new(NULL);
	struct group g;
	int64_t start, pgid;
	char st;

	start_group(&g, script_exit, true);
	assert_int_equal(worker__proc_stat(g.leader, &pgid, &start, &st), 0);
	record(f, &g, start, NULL);
	leaderless(&g);
	assert_true(running(g.member));
	assert_int_equal(worker__orphans_kill(f->w), 1);
	assert_false(running(g.member));
	assert_int_equal(records(f), 0);
	finish(&g);
	fx_free(f);
}

static void orphans__a_leaderless_group_not_proved_the_jobs__is_left_alone(
	void **state)
{
	struct fx *f = fx_new(NULL);
	struct group g;
	int64_t start, pgid;
	char st;

	start_group(&g, script_exit, false);
	assert_int_equal(worker__proc_stat(g.leader, &pgid, &start, &st), 0);
	record(f, &g, start, NULL);
	leaderless(&g);
	assert_int_equal(worker__orphans_kill(f->w), 0);
	assert_true(running(g.member));
	assert_int_equal(records(f), 0);
	finish(&g);
	fx_free(f);
}

static void orphans__a_group_that_ended__is_forgotten(void **state)
{
	struct fx *f = fx_new(NULL);
	struct group g;

	start_group(&g, script, true);
	record(f, &g, 0, NULL);
	finish(&g);
	g.pidfd = -1;
	assert_int_equal(worker__orphans_kill(f->w), 0);
	assert_int_equal(records(f), 0);
	fx_free(f);
}

/* The span proc.c records, the boot clock read around a start, holds the
 * start time /proc shows for the process, every time. */
static void orphans__the_boot_clock_around_a_start__holds_its_start_time(
	void **state)
{
	for (int i = 0; i < 50; i++) {
		struct group g;
		int64_t min = worker__boot_ticks(), max, start, pgid;
		char st;

		start_group(&g, script, true);
		max = worker__boot_ticks();
		assert_int_equal(worker__proc_stat(g.leader, &pgid, &start, &st), 0);
		if (start < min || start > max)
			fail_msg("started at %lld, outside [%lld, %lld]",
				 (long long)start, (long long)min, (long long)max);
		finish(&g);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			orphans__a_recorded_group_still_alive__is_killed_and_forgotten),
		cmocka_unit_test(orphans__a_pid_naming_another_process__is_left_alone),
		cmocka_unit_test(orphans__a_record_of_another_boot__is_left_alone),
		cmocka_unit_test(orphans__a_leaderless_group_of_the_job__is_killed),
		cmocka_unit_test(
			orphans__a_leaderless_group_not_proved_the_jobs__is_left_alone),
		cmocka_unit_test(orphans__a_group_that_ended__is_forgotten),
		cmocka_unit_test(
			orphans__the_boot_clock_around_a_start__holds_its_start_time),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

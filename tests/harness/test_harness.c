/*
 * test_harness.c: what the harness starts dies with the test that started
 * it, however that test dies (harness.h, child.h).
 *
 * Each case plays the test process in a child of its own, "the test": it
 * starts a berthd through the harness (or a plain child through
 * harness_fork or harness_forkpty), reports the pid down a pipe, and dies
 * as a failing test does: by SIGKILL (meson's last word on a timeout), by
 * abort() (a failed assert(), a sanitizer's report) or by exit() with
 * berthd still running (a cmocka test that failed before its cleanup,
 * then the end of main).
 *
 * This program is a child subreaper (PR_SET_CHILD_SUBREAPER): what the
 * dead test leaves is reparented to it rather than to init, so waitpid()
 * tells whether and how it ended. No guessing from kill(pid, 0) about a
 * zombie that a pid 1 which never reaps (some containers) would keep; and
 * a berthd that outlived its test (the old harness's) is still this
 * program's child, which can kill and reap it without the risk that its
 * pid was already given to another process.
 *
 * Before PR_SET_PDEATHSIG in the harness, every case that kills the test
 * failed: berthd (or the plain child) was still running 60 s after; and
 * harness_start on a helper thread started a berthd.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/harness/child.h"
#include "tests/harness/harness.h"

/* How long what the dead test left may take to end. PR_SET_PDEATHSIG
 * sends the signal as the test exits; the rest is a loaded machine. */
#define GONE_MS 60000

enum death { BY_SIGKILL, BY_ABORT, BY_EXIT };

/* What the test tells: the pid to watch, and the harness's directory to
 * remove once it is gone ("" when the test made none). */
struct report {
	pid_t pid;
	char dir[256];
};

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* die ends the test as how says. */
static _Noreturn void die(enum death how)
{
	struct rlimit none = {0, 0};

	switch (how) {
	case BY_SIGKILL:
		for (;;)
			pause(); /* until the parent's SIGKILL */
	case BY_ABORT:
		setrlimit(RLIMIT_CORE, &none); /* no core file to write */
		abort();
	case BY_EXIT:
		exit(1);
	}
	_exit(2);
}

/*
 * play_and_die forks the test, which fills in r with play (pid 0 when it
 * started nothing), sends it down a pipe and dies as how says; then it
 * waits for that death and checks that it was the one asked for. No
 * cmocka assert runs in the test: a failure would jump into its copy of
 * the runner.
 */
static void play_and_die(void (*play)(struct report *), enum death how,
			 struct report *r)
{
	int p[2], status;
	size_t got = 0;
	ssize_t n;
	pid_t test;

	memset(r, 0, sizeof(*r));
	assert_int_equal(pipe(p), 0);
	test = harness_fork();
	assert_true(test >= 0);
	if (test == 0) {
		close(p[0]);
		play(r);
		if (write(p[1], r, sizeof(*r)) != (ssize_t)sizeof(*r))
			_exit(3);
		close(p[1]);
		die(how);
	}
	close(p[1]);
	while (got < sizeof(*r) &&
	       ((n = read(p[0], (char *)r + got, sizeof(*r) - got)) > 0 ||
		(n < 0 && errno == EINTR)))
		if (n > 0)
			got += (size_t)n;
	close(p[0]);
	if (how == BY_SIGKILL)
		kill(test, SIGKILL);
	assert_int_equal(waitpid(test, &status, 0), test);
	assert_int_equal(got, sizeof(*r));
	if (r->pid <= 0) {
		struct harness h = {.pid = 0};

		snprintf(h.dir, sizeof(h.dir), "%s", r->dir);
		harness_cleanup(&h);
		fail_msg("the test started nothing (see its messages above)");
	}
	switch (how) {
	case BY_SIGKILL:
		assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		break;
	case BY_ABORT:
		assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
		break;
	case BY_EXIT:
		assert_true(WIFEXITED(status));
		break;
	}
}

/*
 * assert_ended_by_sigkill waits until r's process, now this program's
 * child, has ended, and asserts that PR_SET_PDEATHSIG's SIGKILL ended it.
 * A process still running after GONE_MS is killed and reaped here first,
 * and the directory is removed either way, so that a failure leaves
 * nothing behind.
 */
static void assert_ended_by_sigkill(const struct report *r)
{
	struct harness h = {.pid = 0};
	int status = 0, waited = 0;
	pid_t w;

	while ((w = waitpid(r->pid, &status, WNOHANG)) == 0 &&
	       waited < GONE_MS) {
		sleep_ms(10);
		waited += 10;
	}
	if (w == 0) {
		kill(r->pid, SIGKILL);
		waitpid(r->pid, NULL, 0);
	}
	snprintf(h.dir, sizeof(h.dir), "%s", r->dir);
	harness_cleanup(&h);
	if (w == 0)
		fail_msg("pid %d still ran %d s after its test died",
			 (int)r->pid, GONE_MS / 1000);
	if (w < 0)
		fail_msg("waitpid(%d): %s: not reparented to this subreaper?",
			 (int)r->pid, strerror(errno));
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
		fail_msg("pid %d ended with status %#x, not by SIGKILL",
			 (int)r->pid, (unsigned)status);
}

/* ---- what the test starts ----------------------------------------------- */

static void start_berthd(struct report *r)
{
	struct harness h;
	int rc = harness_start(&h, NULL);

	snprintf(r->dir, sizeof(r->dir), "%s", h.dir);
	if (rc == 0)
		r->pid = h.pid;
}

/* As tests/crash does it, over and over: kill -9, then start again. */
static void start_kill9_and_restart_berthd(struct report *r)
{
	struct harness h;
	int rc = harness_start(&h, NULL);

	snprintf(r->dir, sizeof(r->dir), "%s", h.dir);
	if (rc == 0 && harness_kill9(&h) == 0 && harness_restart(&h) == 0)
		r->pid = h.pid;
}

/* exec_sleep execs sleep in a child that would run for ten minutes. */
static _Noreturn void exec_sleep(void)
{
	execlp("sleep", "sleep", "600", (char *)NULL);
	_exit(127);
}

static void fork_sleep(struct report *r)
{
	pid_t pid = harness_fork();

	if (pid == 0)
		exec_sleep();
	r->pid = pid;
}

/* forkpty's child leads a session of its own (as `berth wait` on a
 * terminal in tests/cli): meson's kill of the test's process group misses
 * it. The master side closes with the test, which hangs the terminal up,
 * and the SIGHUP would end the child first: it ignores SIGHUP, as a
 * program on a terminal may, so that only PR_SET_PDEATHSIG ends it.
 * The test waits until the child has exec'd sleep (the exec closes
 * `ready`): forkpty's child takes the terminal (login_tty) before any of
 * this runs and exits 1 if the test, and the master with it, is gone by
 * then, which a build without sanitizers is quick enough to reach. */
static void forkpty_sleep(struct report *r)
{
	int master, ready[2];
	pid_t pid;
	char c;

	if (pipe2(ready, O_CLOEXEC) < 0)
		return;
	pid = harness_forkpty(&master);
	if (pid == 0) {
		close(ready[0]);
		signal(SIGHUP, SIG_IGN);
		exec_sleep();
	}
	close(ready[1]);
	while (pid > 0 && read(ready[0], &c, 1) < 0 && errno == EINTR)
		;
	close(ready[0]);
	r->pid = pid;
}

/* ---- the cases ---------------------------------------------------------- */

static void berthd__dies_when_its_test_is_killed_with_sigkill(void **state)
{
	struct report r;

	play_and_die(start_berthd, BY_SIGKILL, &r);
	assert_ended_by_sigkill(&r);
}

static void berthd__dies_when_its_test_aborts(void **state)
{
	struct report r;

	play_and_die(start_berthd, BY_ABORT, &r);
	assert_ended_by_sigkill(&r);
}

static void berthd__dies_when_its_test_exits_without_stopping_it(
	void **state)
{
	struct report r;

	play_and_die(start_berthd, BY_EXIT, &r);
	assert_ended_by_sigkill(&r);
}

static void a_restarted_berthd__dies_with_its_test_too(void **state)
{
	struct report r;

	play_and_die(start_kill9_and_restart_berthd, BY_SIGKILL, &r);
	assert_ended_by_sigkill(&r);
}

static void a_child_of_harness_fork__dies_with_its_test(void **state)
{
	struct report r;

	play_and_die(fork_sleep, BY_SIGKILL, &r);
	assert_ended_by_sigkill(&r);
}

static void a_child_of_harness_forkpty__dies_with_its_test(void **state)
{
	struct report r;

	play_and_die(forkpty_sleep, BY_EXIT, &r);
	assert_ended_by_sigkill(&r);
}

/* meson runs a test in a session of its own and, on a timeout, signals
 * that whole process group: berthd must be in it (child.c). */
static void berthd__stays_in_the_process_group_of_its_test(void **state)
{
	struct harness h;
	pid_t group;

	assert_int_equal(harness_start(&h, NULL), 0);
	group = getpgid(h.pid);
	harness_cleanup(&h);
	assert_int_equal(group, getpgrp());
}

/* A stop and a kill -9 by the test itself are its own business: berthd's
 * exit status reaches the test as before, whatever PR_SET_PDEATHSIG
 * asked for. */
static void berthd__stopped_or_killed_by_its_test__reports_as_before(
	void **state)
{
	struct harness h;

	assert_int_equal(harness_start(&h, NULL), 0);
	assert_int_equal(harness_kill9(&h), 0);
	assert_int_equal(h.pid, 0);
	assert_int_equal(harness_restart(&h), 0);
	assert_int_equal(harness_stop(&h), 0);
	harness_cleanup(&h);
}

/* What a helper thread got from the harness, for the main thread to
 * check. */
struct off_main {
	pid_t forked;
	int fork_errno;
	int started;
	struct harness h;
};

static void *fork_off_main(void *arg)
{
	struct off_main *o = arg;

	o->forked = harness_fork();
	if (o->forked == 0)
		_exit(0); /* not reached unless the refusal broke */
	o->fork_errno = errno;
	o->started = harness_start(&o->h, NULL);
	return NULL;
}

/* PR_SET_PDEATHSIG follows the thread that forked: a berthd forked on a
 * helper thread would be killed when the thread returned. */
static void harness__off_the_main_thread__refuses_to_fork(void **state)
{
	struct off_main o = {.forked = 0};
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, fork_off_main, &o), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	if (o.forked > 0)
		waitpid(o.forked, NULL, 0);
	if (o.started == 0)
		harness_stop(&o.h);
	harness_cleanup(&o.h);
	assert_int_equal(o.forked, -1);
	assert_int_equal(o.fork_errno, EINVAL);
	assert_int_equal(o.started, -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(berthd__dies_when_its_test_is_killed_with_sigkill),
		cmocka_unit_test(berthd__dies_when_its_test_aborts),
		cmocka_unit_test(berthd__dies_when_its_test_exits_without_stopping_it),
		cmocka_unit_test(a_restarted_berthd__dies_with_its_test_too),
		cmocka_unit_test(a_child_of_harness_fork__dies_with_its_test),
		cmocka_unit_test(a_child_of_harness_forkpty__dies_with_its_test),
		cmocka_unit_test(berthd__stays_in_the_process_group_of_its_test),
		cmocka_unit_test(berthd__stopped_or_killed_by_its_test__reports_as_before),
		cmocka_unit_test(harness__off_the_main_thread__refuses_to_fork),
	};

	/* See the top: what a dead test leaves comes to this program. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
		perror("test_harness: PR_SET_CHILD_SUBREAPER");
		return 1;
	}
	if (getenv("BERTH_TEST_FILTER"))
		cmocka_set_test_filter(getenv("BERTH_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}

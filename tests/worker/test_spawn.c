/*
 * test_spawn.c: worker__spawn_start (worker/spawn.c) with real programs:
 * argv, environment and folder; failures before the exec; nothing open
 * above 2 in the child; its own session and group; default signals; and
 * death with the thread that started it. And the spawner, whose threads
 * make those starts for the loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "worker/internal.h"

struct child {
	pid_t pid;
	int pidfd;
	int parent[3];
	char out[8192];
	size_t len;
};

static char *env_default[] = {"PATH=/usr/local/bin:/usr/bin:/bin", NULL};

/* start starts argv with env (NULL: env_default) in cwd; returns
 * worker__spawn_start's code. The child's stdin is closed at once. */
static int start(struct child *c, char *const *argv, char *const *env,
		 const char *cwd, int *step)
{
	int child[3];
	struct worker__spawn s = {.argv = argv, .env = env ? env : env_default,
				  .cwd = cwd};
	int rc;

	memset(c, 0, sizeof(*c));
	assert_int_equal(worker__spawn_pipes(c->parent, child), 0);
	for (int i = 0; i < 3; i++)
		assert_true(c->parent[i] > 2 && child[i] > 2);
	memcpy(s.stdio, child, sizeof(s.stdio));
	rc = worker__spawn_start(&s, &c->pid, &c->pidfd, step);
	worker__spawn_close(child);
	close(c->parent[0]);
	c->parent[0] = -1;
	return rc;
}

/* finish reads the child's stdout to its end, waits for the pidfd to say
 * it exited, reaps it and returns its wait status as exit code (>= 0) or
 * -signal. */
static int finish(struct child *c)
{
	struct pollfd pfd = {.fd = c->pidfd, .events = POLLIN};
	int64_t status;
	int sig;
	ssize_t n;

	while ((n = read(c->parent[1], c->out + c->len,
			 sizeof(c->out) - 1 - c->len)) > 0)
		c->len += (size_t)n;
	c->out[c->len] = '\0';
	assert_int_equal(poll(&pfd, 1, 30000), 1);
	assert_int_equal(worker__spawn_exited(c->pid, &status, &sig), 1);
	/* Not reaped yet: a zombie, its group id still its own. */
	assert_int_equal(worker__spawn_exited(c->pid, &status, &sig), 1);
	assert_int_equal(kill(c->pid, 0), 0);
	worker__spawn_reap(c->pid);
	assert_int_equal(kill(c->pid, 0), -1);
	close(c->pidfd);
	worker__spawn_close(c->parent);
	return sig ? -sig : (int)status;
}

static void spawn__runs_the_program_with_its_argv_environment_and_folder(
	void **state)
{
	char *argv[] = {"sh", "-c", "printf '%s|%s|%s' \"$1\" \"$FOO\" \"$PWD\"",
			"sh", "one two", NULL};
	char *env[] = {"PATH=/usr/bin:/bin", "FOO=bar", NULL};
	struct child c;

	/* "sh" is found in the environment's PATH, as execvp finds it. */
	assert_int_equal(start(&c, argv, env, "/tmp", NULL), 0);
	assert_int_equal(finish(&c), 0);
	assert_string_equal(c.out, "one two|bar|/tmp");
}

static void spawn__reports_the_exit_status_and_the_killing_signal(void **state)
{
	char *exit3[] = {"/bin/sh", "-c", "exit 3", NULL};
	char *killed[] = {"/bin/sh", "-c", "kill -9 $$", NULL};
	struct child c;

	assert_int_equal(start(&c, exit3, NULL, NULL, NULL), 0);
	assert_int_equal(finish(&c), 3);
	assert_int_equal(start(&c, killed, NULL, NULL, NULL), 0);
	assert_int_equal(finish(&c), -SIGKILL);
}

static void spawn__what_fails_before_the_exec__is_an_error_and_nothing_runs(
	void **state)
{
	char *missing[] = {"/no/such/program", NULL};
	char *unknown[] = {"no-such-program-anywhere", NULL};
	char *sh[] = {"/bin/sh", "-c", "true", NULL};
	struct child c;
	int step = 0;

	assert_int_equal(start(&c, missing, NULL, NULL, &step), -ENOENT);
	assert_int_equal(step, WORKER__SPAWN_EXEC);
	assert_int_equal(c.pid, -1);
	assert_int_equal(c.pidfd, -1);
	worker__spawn_close(c.parent);
	assert_int_equal(start(&c, unknown, NULL, NULL, &step), -ENOENT);
	assert_int_equal(step, WORKER__SPAWN_EXEC);
	worker__spawn_close(c.parent);
	assert_int_equal(start(&c, sh, NULL, "/no/such/folder", &step), -ENOENT);
	assert_int_equal(step, WORKER__SPAWN_CWD);
	worker__spawn_close(c.parent);
	assert_string_equal(worker__spawn_step_name(WORKER__SPAWN_CWD),
			    "changing to its folder");
	/* The failed children were reaped: none is left to wait for. */
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
}

static void spawn__the_child_has_nothing_open_above_2(void **state)
{
	/* A descriptor the test "inherited" without close-on-exec, high
	 * and low. */
	int leak = open("/dev/null", O_RDONLY);
	char *argv[] = {"/bin/ls", "/proc/self/fd", NULL};
	struct child c;

	assert_true(leak >= 0);
	assert_int_equal(dup2(leak, 50), 50);
	assert_int_equal(start(&c, argv, NULL, NULL, NULL), 0);
	assert_int_equal(finish(&c), 0);
	/* 0, 1, 2 and the folder ls reads (3). */
	assert_string_equal(c.out, "0\n1\n2\n3\n");
	close(50);
	close(leak);
}

static void spawn__the_child_leads_its_own_session_and_group(void **state)
{
	char *argv[] = {"/bin/sleep", "30", NULL};
	struct child c;

	assert_int_equal(start(&c, argv, NULL, NULL, NULL), 0);
	assert_int_equal(getpgid(c.pid), c.pid);
	assert_int_equal(getsid(c.pid), c.pid);
	assert_true(getpgid(0) != c.pid);
	assert_int_equal(kill(-c.pid, SIGKILL), 0);
	assert_int_equal(finish(&c), -SIGKILL);
}

/* status_line returns the hex value of a /proc/PID/status line. */
static unsigned long long status_line(pid_t pid, const char *name)
{
	char path[64], line[256];
	unsigned long long v = ~0ull;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, name, strlen(name)) == 0)
			v = strtoull(line + strlen(name), NULL, 16);
	fclose(f);
	return v;
}

static void spawn__signals_are_at_their_defaults_and_none_is_blocked(
	void **state)
{
	char *argv[] = {"/bin/sleep", "30", NULL};
	struct sigaction ign = {.sa_handler = SIG_IGN}, old_pipe;
	sigset_t usr1, old_mask;
	struct child c;

	/* As berthd does: SIGPIPE ignored; and a blocked signal. */
	sigaction(SIGPIPE, &ign, &old_pipe);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, &old_mask);
	assert_int_equal(start(&c, argv, NULL, NULL, NULL), 0);
	pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
	sigaction(SIGPIPE, &old_pipe, NULL);
	/* Started means exec'd: the clone returns after the exec. */
	assert_int_equal(status_line(c.pid, "SigIgn:"), 0);
	assert_int_equal(status_line(c.pid, "SigBlk:"), 0);
	kill(c.pid, SIGKILL);
	assert_int_equal(finish(&c), -SIGKILL);
}

static void *spawn_and_leave(void *arg)
{
	char *argv[] = {"/bin/sleep", "30", NULL};
	struct child *c = arg;

	if (start(c, argv, NULL, NULL, NULL) != 0)
		c->pid = -1;
	return NULL;
}

static void spawn__the_child_dies_with_the_thread_that_started_it(void **state)
{
	struct child c;
	pthread_t t;

	/* The thread stands for berthd's loop thread: when it ends (when
	 * berthd dies), its tools are SIGKILLed. */
	assert_int_equal(pthread_create(&t, NULL, spawn_and_leave, &c), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(c.pid > 0);
	assert_int_equal(finish(&c), -SIGKILL);
}

static void spawn__a_script_without_a_first_line_runs_under_sh(void **state)
{
	char path[] = "/tmp/berth-spawn-XXXXXX";
	int fd = mkstemp(path);
	char *argv[] = {path, "arg", NULL};
	static const char script[] = "printf 'ran %s' \"$1\"\n";
	struct child c;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, script, sizeof(script) - 1),
			 (ssize_t)(sizeof(script) - 1));
	assert_int_equal(fchmod(fd, 0700), 0);
	close(fd);
	assert_int_equal(start(&c, argv, NULL, NULL, NULL), 0);
	assert_int_equal(finish(&c), 0);
	assert_string_equal(c.out, "ran arg");
	unlink(path);
}

/* ---- the spawner ------------------------------------------------------ */

/* A start through the spawner, and what its done callback saw. */
struct started {
	struct worker__spawn_req req;
	int done;             /* times done was called */
	bool on_loop_thread;  /* every call was on the thread running the loop */
	struct child c;       /* the process, for finish */
};

static pthread_t loop_thread;
static int ndone;

static void started_done(struct worker__spawn_req *req)
{
	struct started *st = req->data;

	st->done++;
	st->on_loop_thread = pthread_equal(pthread_self(), loop_thread);
	st->c.pid = req->pid;
	st->c.pidfd = req->pidfd;
	memcpy(st->c.parent, req->parent, sizeof(st->c.parent));
	ndone++;
}

static void start_with(struct worker__spawner *sp, struct started *st,
		       char *const *argv)
{
	memset(st, 0, sizeof(*st));
	st->req.s.argv = argv;
	st->req.s.env = env_default;
	st->req.done = started_done;
	st->req.data = st;
	atomic_init(&st->req.cancel, false);
	worker__spawner_submit(sp, &st->req);
}

static void noop_tick(uv_timer_t *h)
{
}

/* run_until_done runs loop until n starts are done, for at most 30 s. */
static void run_until_done(uv_loop_t *loop, int n)
{
	uv_timer_t tick;
	uint64_t end = uv_now(loop) + 30000;

	uv_timer_init(loop, &tick);
	/* A turn at least every 10 ms, whatever the spawner's handle (which
	 * keeps no loop alive) does. */
	uv_timer_start(&tick, noop_tick, 10, 10);
	while (ndone < n && uv_now(loop) < end)
		uv_run(loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&tick, NULL);
	uv_run(loop, UV_RUN_NOWAIT);
	assert_int_equal(ndone, n);
}

static bool spawner_closed_flag;

static void spawner_closed(void *arg)
{
	spawner_closed_flag = true;
}

/* Many starts at once: each is made once, on one of the spawner's
 * threads, and reported on the loop's thread with its pipes and pidfd;
 * the loop thread never waits for a child to exec. */
static void spawner__starts_each_request_once_and_reports_it_on_the_loop(
	void **state)
{
	static char *argv[] = {"/bin/sh", "-c", "read -r x; printf '%s' \"$x\"",
			       NULL};
	enum { N = 16 };
	struct started *st = calloc(N, sizeof(*st));
	struct worker__spawner *sp;
	uv_loop_t loop;

	assert_non_null(st);
	assert_int_equal(uv_loop_init(&loop), 0);
	loop_thread = pthread_self();
	ndone = 0;
	sp = worker__spawner_create(&loop, 2);
	assert_non_null(sp);
	for (int i = 0; i < N; i++)
		start_with(sp, &st[i], argv);
	run_until_done(&loop, N);
	for (int i = 0; i < N; i++) {
		assert_int_equal(st[i].req.rc, 0);
		assert_int_equal(st[i].done, 1);
		assert_true(st[i].on_loop_thread);
		assert_true(st[i].c.pid > 0 && st[i].c.pidfd > 2);
		for (int k = 0; k < 3; k++)
			assert_true(st[i].c.parent[k] > 2);
		assert_int_equal(write(st[i].c.parent[0], "hello\n", 6), 6);
		close(st[i].c.parent[0]);
		st[i].c.parent[0] = -1;
		assert_int_equal(finish(&st[i].c), 0);
		assert_string_equal(st[i].c.out, "hello");
	}
	spawner_closed_flag = false;
	worker__spawner_close(sp, spawner_closed, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_true(spawner_closed_flag);
	assert_int_equal(uv_loop_close(&loop), 0);
	free(st);
}

/* Closing the spawner ends its threads: a child they started that still
 * runs is SIGKILLed (PR_SET_PDEATHSIG, as when berthd dies), and a start
 * not begun yet is never made (-ECANCELED); each is reported once. */
static void spawner__closed__kills_its_children_and_makes_no_more(
	void **state)
{
	static char *sleep_argv[] = {"/bin/sleep", "30", NULL};
	enum { N = 64 };
	struct started *st = calloc(N + 1, sizeof(*st));
	struct worker__spawner *sp;
	uv_loop_t loop;
	int made = 0, cancelled = 0;

	assert_non_null(st);
	assert_int_equal(uv_loop_init(&loop), 0);
	loop_thread = pthread_self();
	ndone = 0;
	sp = worker__spawner_create(&loop, 1);
	assert_non_null(sp);
	start_with(sp, &st[N], sleep_argv);
	run_until_done(&loop, 1);
	assert_int_equal(st[N].req.rc, 0);
	/* Queued behind one another on one thread, and closed at once:
	 * most are never begun. */
	for (int i = 0; i < N; i++)
		start_with(sp, &st[i], sleep_argv);
	spawner_closed_flag = false;
	worker__spawner_close(sp, spawner_closed, NULL);
	/* Every request was reported by the close itself. */
	assert_int_equal(ndone, N + 1);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_true(spawner_closed_flag);
	assert_int_equal(uv_loop_close(&loop), 0);
	for (int i = 0; i < N; i++) {
		assert_int_equal(st[i].done, 1);
		if (st[i].req.rc == -ECANCELED) {
			cancelled++;
			assert_int_equal(st[i].c.pid, -1);
			assert_int_equal(st[i].c.parent[0], -1);
			continue;
		}
		assert_int_equal(st[i].req.rc, 0);
		made++;
		assert_int_equal(finish(&st[i].c), -SIGKILL);
	}
	assert_int_equal(made + cancelled, N);
	assert_true(cancelled > 0);
	/* The one started long before dies with the thread too. */
	assert_int_equal(finish(&st[N].c), -SIGKILL);
	free(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
			spawn__runs_the_program_with_its_argv_environment_and_folder),
		cmocka_unit_test(
			spawn__reports_the_exit_status_and_the_killing_signal),
		cmocka_unit_test(
			spawn__what_fails_before_the_exec__is_an_error_and_nothing_runs),
		cmocka_unit_test(spawn__the_child_has_nothing_open_above_2),
		cmocka_unit_test(spawn__the_child_leads_its_own_session_and_group),
		cmocka_unit_test(
			spawn__signals_are_at_their_defaults_and_none_is_blocked),
		cmocka_unit_test(
			spawn__the_child_dies_with_the_thread_that_started_it),
		cmocka_unit_test(
			spawn__a_script_without_a_first_line_runs_under_sh),
		cmocka_unit_test(
			spawner__starts_each_request_once_and_reports_it_on_the_loop),
		cmocka_unit_test(
			spawner__closed__kills_its_children_and_makes_no_more),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

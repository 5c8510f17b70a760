/*
 * test_spawn.c: worker__spawn_start (worker/spawn.c) with real programs:
 * argv, environment and folder; failures before the exec; nothing open
 * above 2 in the child; its own session and group; default signals; and
 * death with the thread that started it.
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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

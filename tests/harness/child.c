/*
 * child.c: child processes that die with the test that started them
 * (child.h).
 *
 * The child stays in the test's process group, as fork() leaves it. meson
 * runs each test in a session of its own and, when the test times out,
 * sends SIGTERM and then SIGKILL to that whole group; a Ctrl-C at a
 * terminal reaches the whole foreground group too. In the test's group a
 * berthd gets that SIGTERM and stops as it would under systemd; in a group
 * of its own it would escape both and lean on PR_SET_PDEATHSIG alone. The
 * tests signal their children by pid (harness_kill9, harness_stop, the
 * crash driver's kill -9), never by group, so a group of their own would
 * give them nothing.
 *
 * The signal is tied to the thread that forks, hence the main thread
 * only (child.h). The other designs were weighed: a thread of the harness
 * that did every fork and lived as long as the process would run in every
 * test program for the sake of none, as no test forks off its main
 * thread (the threads of tests/api test_events and tests/crash only call
 * berthd; tests/worker test_spawn's thread starts a tool through berthd's
 * own spawner, to test that very rule); a subreaper would adopt the
 * orphans but could not kill them once the test itself is dead. A clear
 * refusal names the mistake the day a test makes it.
 */
#include "tests/harness/child.h"

#include <errno.h>
#include <pty.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

/* on_main_thread returns whether the caller runs on the process's first
 * thread, whose id is the process id; when not, it says so on stderr,
 * naming what, and sets errno to EINVAL. */
static bool on_main_thread(const char *what)
{
	if (gettid() == getpid())
		return true;
	fprintf(stderr, "harness: %s on thread %d, not the main thread: its "
		"child would get SIGKILL when that thread ends "
		"(PR_SET_PDEATHSIG follows the thread that forks)\n",
		what, (int)gettid());
	errno = EINVAL;
	return false;
}

/*
 * die_with runs in the child, before anything else: it asks for SIGKILL
 * when the thread that forked it ends. SIGKILL rather than SIGTERM:
 * nobody is left to wait for an orderly stop, and a berthd with a job
 * running would outlive the test by its grace period. Should the parent
 * have died between the fork and the request, the signal would never
 * come: getppid() no longer names the pid recorded before the fork, and
 * the child kills itself as the signal would have. Only async-signal-safe
 * calls: the test process may have other threads (tests/crash), whose
 * locks the child's copy of the memory holds forever.
 */
static void die_with(pid_t parent)
{
	static const char msg[] = "harness: PR_SET_PDEATHSIG refused: the "
				  "child would outlive the test; not running "
				  "it\n";

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
		(void)!write(2, msg, sizeof(msg) - 1);
		_exit(127);
	}
	if (getppid() != parent)
		kill(getpid(), SIGKILL);
}

pid_t harness_fork(void)
{
	pid_t parent = getpid(), pid;

	if (!on_main_thread("harness_fork"))
		return -1;
	pid = fork();
	if (pid == 0)
		die_with(parent);
	return pid;
}

pid_t harness_forkpty(int *master)
{
	pid_t parent = getpid(), pid;

	if (!on_main_thread("harness_forkpty"))
		return -1;
	pid = forkpty(master, NULL, NULL, NULL);
	if (pid == 0)
		die_with(parent);
	return pid;
}

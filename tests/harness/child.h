/*
 * child.h: child processes that die with the test that started them.
 *
 * A test that fails leaves by cmocka's longjmp, by abort() or by meson's
 * timeout, and never reaches the code that would have stopped what it
 * started: a berthd left behind keeps its socket, its database and perhaps
 * a core long after the test ended. harness_fork and harness_forkpty fork
 * as fork() and forkpty() do, and the child asks the kernel for SIGKILL
 * when the test process dies (PR_SET_PDEATHSIG), however it dies: a
 * return from main, exit(), abort(), SIGKILL. Nothing else about the
 * child changes (child.c says why it stays in the test's process group).
 * Every process a test starts, berthd first (tests/harness/harness.c),
 * is forked by one of them.
 *
 * The request holds across exec, but the kernel clears it when the child
 * changes its user or group (setuid, setpriv --reuid): a child that does
 * so must end by itself, or ask again (setpriv --pdeathsig=KILL).
 *
 * Both must be called on the test process's main thread: the signal comes
 * when the *thread* that forked ends, not the process, so a child forked
 * on a helper thread would be killed as soon as that thread returned. On
 * another thread they fork nothing and return -1 with errno EINVAL, after
 * saying so on stderr.
 */
#ifndef BERTH_TESTS_HARNESS_CHILD_H
#define BERTH_TESTS_HARNESS_CHILD_H

#include <sys/types.h>

/* harness_fork returns as fork() does: the child's pid in the parent, 0
 * in the child, -1 with errno set when there is no child. */
pid_t harness_fork(void);
/* harness_forkpty is forkpty(master, NULL, NULL, NULL) with harness_fork's
 * request: the child runs on a new pseudo-terminal whose master side the
 * parent gets in *master (the caller closes it). */
pid_t harness_forkpty(int *master);

#endif

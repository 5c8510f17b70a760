/*
 * keeper.c: the process that kills what external tools left running when
 * berthd dies without a word (kill -9, a crash, the OOM killer).
 *
 * PR_SET_PDEATHSIG (spawn.c) kills a tool's own process with berthd, but
 * not what it started in its process group: a shell script's background
 * job, a program's helper. On SQLite the next start kills those
 * (orphans.c); on a shared PostgreSQL database another node may run the
 * job again long before this host's berthd comes back, if it ever does,
 * beside the old run's leftovers. So at start-up berthd forks a keeper: a
 * process of its own that holds the reading end of a pipe and nothing
 * else. berthd writes each tool's process group to the pipe when its
 * leader starts, and again, negated, once it reaped the leader (as it
 * records them for orphans.c). When berthd ends, however it ends, the
 * pipe's writing end closes with it; the keeper reads the end of file,
 * SIGKILLs every group still listed, and exits. A clean stop has stopped
 * its tools already and lists none.
 *
 * The keeper is forked before berthd starts a thread or opens its
 * database, and closes every descriptor but the pipe's, so it holds no
 * lock, socket or file of berthd's. It ignores the signals a terminal or
 * an operator sends the daemon's group (SIGINT, SIGTERM, SIGHUP, SIGQUIT),
 * so that it outlives berthd's own stop; a SIGKILL of the whole group
 * (systemd's stop of the unit's cgroup) takes it too, as it does the
 * tools. Its name in ps is "berthd-keeper".
 *
 * A record is 4 bytes, written whole (a pipe write of at most PIPE_BUF
 * bytes is atomic), from the loop thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "worker/internal.h"
#include "worker/worker.h"

/* The most groups the keeper lists at once: far above the runs berthd
 * allows at once (--workers). */
#define KEEPER_MAX (1 << 16)

static int keeper_fd = -1; /* the pipe's writing end, or -1 */

/* keeper_main is the keeper's life: list the groups berthd writes, and
 * kill those still listed at the end of the pipe. Only system calls: the
 * keeper is a fork of berthd. */
static void keeper_main(int fd)
{
	static pid_t groups[KEEPER_MAX];
	static const int ignored[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
	int32_t rec[256];
	size_t n = 0, have = 0;
	struct sigaction ign;

	memset(&ign, 0, sizeof ign);
	ign.sa_handler = SIG_IGN;
	for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
		sigaction(ignored[i], &ign, NULL);
	prctl(PR_SET_NAME, "berthd-keeper");
	for (;;) {
		ssize_t got = read(fd, (char *)rec + have, sizeof rec - have);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		have += (size_t)got;
		for (size_t i = 0; i < have / sizeof rec[0]; i++) {
			pid_t g = rec[i];

			if (g > 0 && n < KEEPER_MAX) {
				groups[n++] = g;
				continue;
			}
			for (size_t k = 0; k < n; k++)
				if (groups[k] == -g) {
					groups[k] = groups[--n];
					break;
				}
		}
		/* A record cut by the buffer's end (never, with whole
		 * writes; kept for the next read all the same). */
		memmove(rec, (char *)rec + have - have % sizeof rec[0],
			have % sizeof rec[0]);
		have %= sizeof rec[0];
	}
	for (size_t k = 0; k < n; k++)
		kill(-groups[k], SIGKILL);
	_exit(0);
}

int worker_keeper_start(void)
{
	int fds[2];
	pid_t pid;

	if (keeper_fd >= 0)
		return 0;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		int e = errno;

		close(fds[0]);
		close(fds[1]);
		return -e;
	}
	if (pid == 0) {
		/* Nothing of berthd's but the pipe's reading end, as 0. */
		if (dup2(fds[0], 0) < 0)
			_exit(1);
		if (syscall(SYS_close_range, 1U, ~0U, 0U) < 0)
			for (int i = 1; i < 1024; i++)
				close(i);
		keeper_main(0);
	}
	close(fds[0]);
	keeper_fd = fds[1];
	return 0;
}

void worker__keeper_note(pid_t group, bool reaped)
{
	int32_t rec = reaped ? -(int32_t)group : (int32_t)group;

	/* Nothing to do about a keeper that is gone: the store's record
	 * (orphans.c) is still there for the next start. */
	if (keeper_fd >= 0 && group > 0)
		(void)!write(keeper_fd, &rec, sizeof rec);
}

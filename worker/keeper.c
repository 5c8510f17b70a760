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
 *
 * A keeper that ends before berthd (the OOM killer, an operator's kill)
 * is reaped, logged and replaced (worker__keeper_watch): berthd keeps the
 * groups it listed, and writes them to the new keeper. The fork comes
 * from a process with threads then, which the keeper allows: from the
 * fork on it makes system calls only, and allocates nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log/log.h"
#include "worker/internal.h"
#include "worker/worker.h"

/* The most groups the keeper lists at once: far above the runs berthd
 * allows at once (--workers). */
#define KEEPER_MAX (1 << 16)

static int keeper_fd = -1; /* the pipe's writing end, or -1 */
static pid_t keeper_pid;
/* The groups the keeper lists, as berthd wrote them: what a new keeper is
 * told. Loop thread only. */
static pid_t *listed;
static size_t nlisted, caplisted;
/* The keeper's pidfd, readable once it ended, and its watch. */
static int keeper_pidfd = -1;
static uv_poll_t watch;
static bool watching;

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

/* fork_keeper starts a keeper; keeper_fd and keeper_pid are its. */
static int fork_keeper(void)
{
	int fds[2];
	pid_t pid;

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
	keeper_pid = pid;
	return 0;
}

int worker_keeper_start(void)
{
	return keeper_fd >= 0 ? 0 : fork_keeper();
}

/* list keeps berthd's copy of the keeper's list. A group it cannot keep
 * (out of memory) is still written to the keeper; only a new keeper
 * would miss it, and the store's record (orphans.c) has it. */
static void list(pid_t group, bool reaped)
{
	if (reaped) {
		for (size_t i = 0; i < nlisted; i++)
			if (listed[i] == group) {
				listed[i] = listed[--nlisted];
				break;
			}
		return;
	}
	if (nlisted == caplisted) {
		size_t cap = caplisted ? caplisted * 2 : 64;
		pid_t *p = realloc(listed, cap * sizeof(*p));

		if (!p)
			return;
		listed = p;
		caplisted = cap;
	}
	listed[nlisted++] = group;
}

void worker__keeper_note(pid_t group, bool reaped)
{
	int32_t rec = reaped ? -(int32_t)group : (int32_t)group;

	if (keeper_fd < 0 || group <= 0)
		return;
	list(group, reaped);
	/* A keeper that is gone fails the write (EPIPE): its watch replaces
	 * it, and tells the new one of the listed groups. */
	(void)!write(keeper_fd, &rec, sizeof rec);
}

static void watch_closed(uv_handle_t *h);

/* keeper_ended reaps a keeper that ended before berthd, and starts
 * another, which is told of every group the old one listed. */
static void keeper_ended(uv_poll_t *h, int status, int events)
{
	int wstatus = 0, rc;
	pid_t old = keeper_pid;
	char how[48];

	(void)status;
	(void)events;
	if (waitpid(old, &wstatus, WNOHANG) != old)
		return; /* not ended after all */
	if (WIFSIGNALED(wstatus))
		snprintf(how, sizeof how, "killed by signal %d",
			 WTERMSIG(wstatus));
	else
		snprintf(how, sizeof how, "exit status %d",
			 WEXITSTATUS(wstatus));
	close(keeper_fd);
	keeper_fd = -1;
	if ((rc = fork_keeper()) < 0) {
		log_error("the keeper (pid %d) ended (%s), and another cannot "
			  "be started (%s): should berthd die, what its tools "
			  "started runs on until its next start",
			  (int)old, how, strerror(-rc));
	} else {
		log_warn("the keeper (pid %d) ended (%s); keeper %d takes its "
			 "place, told of the %zu process group%s of tools "
			 "running",
			 (int)old, how, (int)keeper_pid, nlisted,
			 nlisted == 1 ? "" : "s");
		for (size_t i = 0; i < nlisted; i++) {
			int32_t rec = (int32_t)listed[i];

			(void)!write(keeper_fd, &rec, sizeof rec);
		}
	}
	/* The new keeper is watched once this watch is closed. */
	uv_close((uv_handle_t *)h, watch_closed);
}

/* watch_start watches the keeper: its pidfd becomes readable when it
 * ends. Returns 0, or a negative errno (no pidfd: Linux before 5.3). */
static int watch_start(uv_loop_t *loop)
{
	int fd, rc;

#ifdef SYS_pidfd_open
	fd = (int)syscall(SYS_pidfd_open, keeper_pid, 0);
#else
	fd = -1;
	errno = ENOSYS;
#endif
	if (fd < 0)
		return -errno;
	if ((rc = uv_poll_init(loop, &watch, fd)) < 0) {
		close(fd);
		return rc;
	}
	keeper_pidfd = fd;
	watching = true;
	uv_unref((uv_handle_t *)&watch);
	uv_poll_start(&watch, UV_READABLE, keeper_ended);
	return 0;
}

static uv_close_cb unwatch_cb;
static void *unwatch_data;
static bool unwatched;

static void watch_closed(uv_handle_t *h)
{
	close(keeper_pidfd);
	keeper_pidfd = -1;
	watching = false;
	if (unwatched) {
		h->data = unwatch_data;
		unwatch_cb(h);
		return;
	}
	if (keeper_fd >= 0 && watch_start(h->loop) < 0)
		log_warn("the keeper %d cannot be watched: should it end, "
			 "berthd would not replace it", (int)keeper_pid);
}

int worker__keeper_watch(uv_loop_t *loop)
{
	if (keeper_fd < 0 || watching || unwatched)
		return 0;
	return watch_start(loop);
}

bool worker__keeper_unwatch(uv_close_cb cb, void *data)
{
	if (!watching || unwatched)
		return false;
	unwatched = true;
	unwatch_cb = cb;
	unwatch_data = data;
	if (!uv_is_closing((uv_handle_t *)&watch))
		uv_close((uv_handle_t *)&watch, watch_closed);
	return true;
}

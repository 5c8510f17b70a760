/*
 * spawn.c: starting an external tool's process, in place of uv_spawn.
 *
 * uv_spawn (libuv 1.44) forks, which copies berthd's page tables for every
 * run, and runs nothing of ours in the child, so a tool could neither be
 * tied to berthd's life nor be kept from the descriptors berthd inherited.
 * Here the child is made with clone(CLONE_VM | CLONE_VFORK), as glibc's
 * posix_spawn makes it: it borrows berthd's memory on a stack of its own
 * while the calling thread waits, and between the clone and the exec it
 *
 *   - puts every signal back to its default disposition and unblocks them
 *     all (berthd ignores SIGPIPE, and a handler of berthd's must never
 *     run on berthd's memory in here: all signals are blocked in the
 *     calling thread from before the clone until the child has reset
 *     them);
 *   - starts a session, so its own process group (the group id is its
 *     pid), which a cancel, a timeout or a restart's recovery kills whole;
 *   - asks for SIGKILL when the thread that started it ends
 *     (PR_SET_PDEATHSIG): when berthd dies, even by kill -9, its tools die
 *     with it, and a restarted berthd never finds a tool of the last run
 *     still working on a job it runs again. The signal comes when the
 *     parent *thread* exits, which is why processes are started by the
 *     spawner's threads (below), which live until the worker has reaped
 *     every process. Should berthd have died before the request took
 *     hold, getppid() tells, and the child exits;
 *   - takes its three pipes as 0, 1 and 2 and closes every other
 *     descriptor (close_range), whether or not it was close-on-exec: a
 *     descriptor berthd inherited without the flag is not a tool's;
 *   - changes to its folder and execs, looking a bare name up in the
 *     PATH of its environment, as execvp does.
 *
 * What the child meets before the exec (a missing program, a folder that
 * is gone) it writes into the shared memory before it exits; the caller
 * returns it. The exit is learnt through a pidfd, which becomes readable
 * when the process ends (Linux 5.3).
 *
 * The clone returns only once the child has exec'd (or failed), and until
 * then the calling thread waits: some 0.26 ms a start on an idle machine,
 * 1.3 ms on average under a load of trivial tools on two busy cores, when
 * the child waits for a core before it gets to its exec. On the loop
 * thread that wait held up every client and every other job; the loop
 * spent more than half its time in it, and a trivial tool's rate stopped
 * at 450-550 jobs/s whatever the cores had free (docs/BENCHMARKS.md). So
 * the starts are made by the spawner: a few threads that take requests
 * from the loop, make each child's pipes just before its clone (pipes of
 * the starts still queued would be copied into every child's descriptor
 * table and closed again by it), start it, and hand the outcome back
 * through common/wakeup.h (a uv_async's wake-up spins in libuv 1.44 while
 * the sender is still in its write).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/wakeup.h"
#include "worker/internal.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

/* The child's stack: its frames, one path of PATH_MAX for the PATH
 * search, and glibc's calls. */
#define CHILD_STACK (64 * 1024)

/* The child shares berthd's memory, and the sanitizers' shadow of it: the
 * child's frames must not poison shadow memory that is berthd's (the
 * calling thread's, suspended), so its code is not instrumented. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHILD_CODE __attribute__((no_sanitize("address")))
#endif
#endif
#if !defined(CHILD_CODE) && defined(__SANITIZE_ADDRESS__)
#define CHILD_CODE __attribute__((no_sanitize_address))
#endif
#ifndef CHILD_CODE
#define CHILD_CODE
#endif

/* What the child reads, and the one thing it writes (err). */
struct child {
	const struct worker__spawn *s;
	pid_t parent;
	const char *path; /* the PATH of the child's environment */
	char **sh_argv;   /* argv for /bin/sh when a file is not an executable */
	size_t argc;
	volatile int err; /* errno of the step that failed, or 0 */
	volatile int step; /* enum worker__spawn_step, the step that failed */
};

CHILD_CODE static void child_fail(struct child *c, int step)
{
	c->err = errno ? errno : EINVAL;
	c->step = step;
	_exit(127);
}

/* close_from closes every descriptor from lo up, where the kernel lacks
 * close_range (before 5.9): the child's own /proc/self/fd is read with
 * getdents64, which needs no memory but the stack. */
CHILD_CODE static int close_from(int lo)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, (unsigned)lo, ~0u, 0u) == 0)
		return 0;
	if (errno != ENOSYS && errno != EINVAL)
		return -1;
#endif
	char buf[1024];
	int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (dir < 0)
		return -1;
	for (;;) {
		long n = syscall(SYS_getdents64, dir, buf, sizeof(buf));

		if (n <= 0)
			break;
		for (long off = 0; off < n;) {
			/* struct linux_dirent64: d_ino, d_off, d_reclen,
			 * d_type, d_name. */
			unsigned short reclen;
			const char *name = buf + off + 19;
			int fd = 0;

			memcpy(&reclen, buf + off + 16, sizeof(reclen));
			for (; *name >= '0' && *name <= '9'; name++)
				fd = fd * 10 + (*name - '0');
			if (*name == '\0' && fd >= lo && fd != dir)
				close(fd);
			off += reclen;
		}
	}
	close(dir);
	return 0;
}

/* child_exec execs file, looking a name without a slash up in PATH.
 * Returns only on failure, with errno set. */
CHILD_CODE static void child_exec(struct child *c)
{
	const struct worker__spawn *s = c->s;
	const char *file = s->argv[0];
	char buf[PATH_MAX];
	int saw_eacces = 0;

	if (strchr(file, '/') != NULL) {
		execve(file, s->argv, s->env);
		if (errno == ENOEXEC && c->sh_argv != NULL) {
			c->sh_argv[1] = (char *)file;
			execve("/bin/sh", c->sh_argv, s->env);
		}
		return;
	}
	for (const char *p = c->path;; p++) {
		const char *colon = strchr(p, ':');
		size_t dlen = colon != NULL ? (size_t)(colon - p) : strlen(p);
		size_t flen = strlen(file);

		/* An empty entry is the current folder, as in execvp. */
		if (dlen + flen + 2 <= sizeof(buf)) {
			memcpy(buf, p, dlen);
			if (dlen == 0)
				buf[dlen++] = '.';
			buf[dlen] = '/';
			memcpy(buf + dlen + 1, file, flen + 1);
			execve(buf, s->argv, s->env);
			if (errno == ENOEXEC && c->sh_argv != NULL) {
				c->sh_argv[1] = buf;
				execve("/bin/sh", c->sh_argv, s->env);
				return;
			}
			if (errno == EACCES)
				saw_eacces = 1;
			else if (errno != ENOENT && errno != ENOTDIR &&
				 errno != ELOOP && errno != ENAMETOOLONG)
				return;
		}
		if (colon == NULL)
			break;
		p = colon;
	}
	errno = saw_eacces ? EACCES : ENOENT;
}

CHILD_CODE static int child_main(void *arg)
{
	struct child *c = arg;
	const struct worker__spawn *s = c->s;
	struct sigaction dfl;
	sigset_t none;

	/* 1..31, as libuv does: the real-time signals above are glibc's
	 * own (and berthd sets no handler for the others). */
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (int sig = 1; sig < 32; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaction(sig, &dfl, NULL);
	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
		child_fail(c, WORKER__SPAWN_SIGNALS);

	if (setsid() < 0)
		child_fail(c, WORKER__SPAWN_SESSION);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		child_fail(c, WORKER__SPAWN_PDEATHSIG);
	/* berthd died before the request took hold: the signal will never
	 * come, and nobody is left to read the tool's output. */
	if (getppid() != c->parent) {
		errno = ESRCH;
		child_fail(c, WORKER__SPAWN_PDEATHSIG);
	}

	/* The pipes are above 2 (worker__spawn_start makes sure), so the
	 * dup2s cannot overwrite one another. */
	for (int i = 0; i < 3; i++)
		if (dup2(s->stdio[i], i) < 0)
			child_fail(c, WORKER__SPAWN_STDIO);
	if (close_from(3) < 0)
		child_fail(c, WORKER__SPAWN_DESCRIPTORS);
	if (s->cwd != NULL && chdir(s->cwd) < 0)
		child_fail(c, WORKER__SPAWN_CWD);
	child_exec(c);
	child_fail(c, WORKER__SPAWN_EXEC);
	return 127;
}

/* above_2 returns fd, or a close-on-exec copy of it above 2 (fd closed),
 * or -errno. */
static int above_2(int fd)
{
	int copy;

	if (fd > 2)
		return fd;
	copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	close(fd);
	return copy >= 0 ? copy : -errno;
}

static const char *env_path(char *const *env)
{
	for (; env != NULL && *env != NULL; env++)
		if (strncmp(*env, "PATH=", 5) == 0)
			return *env + 5;
	return "/usr/local/bin:/usr/bin:/bin";
}

void *worker__spawn_stack_new(void)
{
	void *stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);

	return stack == MAP_FAILED ? NULL : stack;
}

void worker__spawn_stack_free(void *stack)
{
	if (stack)
		munmap(stack, CHILD_STACK);
}

const char *worker__spawn_step_name(int step)
{
	switch (step) {
	case WORKER__SPAWN_SIGNALS:
		return "resetting its signals";
	case WORKER__SPAWN_SESSION:
		return "starting its session";
	case WORKER__SPAWN_PDEATHSIG:
		return "tying it to berthd's life";
	case WORKER__SPAWN_STDIO:
		return "connecting its stdin, stdout and stderr";
	case WORKER__SPAWN_DESCRIPTORS:
		return "closing berthd's descriptors";
	case WORKER__SPAWN_CWD:
		return "changing to its folder";
	case WORKER__SPAWN_EXEC:
		return "running the program";
	default:
		return "starting it";
	}
}

int worker__spawn_start(const struct worker__spawn *s, pid_t *pid, int *pidfd,
			int *step)
{
	struct child c = {.s = s, .parent = getpid(), .path = env_path(s->env)};
	sigset_t all, old;
	int stdio_ok = 0;
	void *stack;
	int fd = -1;
	pid_t p;

	*pid = -1;
	*pidfd = -1;
	if (step != NULL)
		*step = 0;
	for (int i = 0; i < 3; i++)
		stdio_ok += s->stdio[i] > 2;
	if (stdio_ok != 3 || s->argv == NULL || s->argv[0] == NULL)
		return -EINVAL;
	/* For a file that is not an executable (no #! line): /bin/sh runs
	 * it, as execvp would. */
	while (s->argv[c.argc] != NULL)
		c.argc++;
	c.sh_argv = calloc(c.argc + 2, sizeof(char *));
	if (c.sh_argv == NULL)
		return -ENOMEM;
	c.sh_argv[0] = (char *)"/bin/sh";
	for (size_t i = 1; i < c.argc; i++)
		c.sh_argv[i + 1] = s->argv[i];

	stack = s->stack ? s->stack : worker__spawn_stack_new();
	if (!stack) {
		free(c.sh_argv);
		return -ENOMEM;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* The stack grows down on every architecture Linux runs berth on
	 * but one (PA-RISC), which this does not support. */
	p = clone(child_main, (char *)stack + CHILD_STACK,
		  CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD, &c, &fd);
	if (p < 0 && errno == EINVAL) {
		/* A kernel before 5.2 has no CLONE_PIDFD. */
		p = clone(child_main, (char *)stack + CHILD_STACK,
			  CLONE_VM | CLONE_VFORK | SIGCHLD, &c);
		fd = -1;
	}
	int e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (stack != s->stack)
		worker__spawn_stack_free(stack);
	free(c.sh_argv);
	if (p < 0)
		return -e;
	if (c.err != 0) {
		/* It exited before the exec: reap it now. */
		while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
			;
		if (fd >= 0)
			close(fd);
		if (step != NULL)
			*step = c.step;
		return -c.err;
	}
#ifdef SYS_pidfd_open
	if (fd < 0)
		fd = (int)syscall(SYS_pidfd_open, p, 0);
#endif
	if (fd < 0) {
		/* No pidfd (Linux before 5.3): the exit could not be learnt. */
		kill(p, SIGKILL);
		while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
			;
		return -ENOSYS;
	}
	*pid = p;
	*pidfd = fd;
	return 0;
}

int worker__spawn_pipes(int parent[3], int child[3])
{
	int fds[2], e = 0;

	for (int i = 0; i < 3; i++)
		parent[i] = child[i] = -1;
	for (int i = 0; i < 3 && e == 0; i++) {
		if (pipe2(fds, O_CLOEXEC) < 0) {
			e = errno;
			break;
		}
		/* stdin: the child reads; stdout, stderr: it writes. */
		child[i] = above_2(i == 0 ? fds[0] : fds[1]);
		parent[i] = above_2(i == 0 ? fds[1] : fds[0]);
		if (child[i] < 0 || parent[i] < 0) {
			e = child[i] < 0 ? -child[i] : -parent[i];
			child[i] = child[i] < 0 ? -1 : child[i];
			parent[i] = parent[i] < 0 ? -1 : parent[i];
		}
	}
	if (e == 0)
		return 0;
	worker__spawn_close(parent);
	worker__spawn_close(child);
	return -e;
}

void worker__spawn_close(int fds[3])
{
	for (int i = 0; i < 3; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

int worker__spawn_exited(pid_t pid, int64_t *status, int *sig)
{
	siginfo_t si;

	*status = 0;
	*sig = 0;
	memset(&si, 0, sizeof(si));
	while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
		if (errno == EINTR)
			continue;
		/* Reaped elsewhere (by whoever embeds berth with SIGCHLD
		 * ignored): it is gone, its status unknown. */
		return errno == ECHILD ? 1 : -errno;
	}
	if (si.si_pid == 0)
		return 0;
	if (si.si_code == CLD_EXITED)
		*status = si.si_status;
	else
		*sig = si.si_status;
	return 1;
}

void worker__spawn_reap(pid_t pid)
{
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* ---- the spawner ------------------------------------------------------ */

struct worker__spawner {
	struct wakeup wake; /* the threads': starts are done */
	pthread_mutex_t mu;
	pthread_cond_t cond;
	/* Under mu: the requests for the threads, and those done for the
	 * loop, each in order. */
	struct worker__spawn_req *todo, **todo_tail;
	struct worker__spawn_req *done, **done_tail;
	bool stop;
	int nthreads;
	pthread_t *threads;
	void (*closed)(void *arg);
	void *closed_arg;
};

/* spawner_main takes requests until the spawner stops. Each thread has a
 * child stack of its own. */
static void *spawner_main(void *arg)
{
	struct worker__spawner *sp = arg;
	void *stack = worker__spawn_stack_new();

	pthread_mutex_lock(&sp->mu);
	for (;;) {
		struct worker__spawn_req *req = sp->todo;

		if (req == NULL) {
			if (sp->stop)
				break;
			pthread_cond_wait(&sp->cond, &sp->mu);
			continue;
		}
		sp->todo = req->next;
		if (sp->todo == NULL)
			sp->todo_tail = &sp->todo;
		atomic_store(&req->begun, true);
		pthread_mutex_unlock(&sp->mu);

		req->pid = -1;
		req->pidfd = -1;
		req->step = 0;
		for (int i = 0; i < 3; i++)
			req->parent[i] = req->s.stdio[i] = -1;
		if (atomic_load(&req->cancel))
			req->rc = -ECANCELED;
		else if (stack == NULL)
			req->rc = -ENOMEM;
		else
			req->rc = worker__spawn_pipes(req->parent,
						      req->s.stdio);
		if (req->rc == 0) {
			req->s.stack = stack;
			req->start_min = worker__boot_ticks();
			req->rc = worker__spawn_start(&req->s, &req->pid,
						      &req->pidfd, &req->step);
			req->start_max = worker__boot_ticks();
			worker__spawn_close(req->s.stdio);
			if (req->rc != 0)
				worker__spawn_close(req->parent);
		}

		pthread_mutex_lock(&sp->mu);
		req->next = NULL;
		*sp->done_tail = req;
		sp->done_tail = &req->next;
		/* Wake-ups coalesce: one for what piles up before the loop
		 * reads. */
		wakeup_send(&sp->wake);
	}
	pthread_mutex_unlock(&sp->mu);
	worker__spawn_stack_free(stack);
	return NULL;
}

/* deliver calls the done callback of every request done so far. */
static void deliver(struct worker__spawner *sp)
{
	struct worker__spawn_req *req, *next;

	pthread_mutex_lock(&sp->mu);
	req = sp->done;
	sp->done = NULL;
	sp->done_tail = &sp->done;
	pthread_mutex_unlock(&sp->mu);
	for (; req != NULL; req = next) {
		next = req->next;
		req->next = NULL;
		req->done(req);
	}
}

static void on_wake(struct wakeup *w)
{
	deliver(w->poll.data);
}

struct worker__spawner *worker__spawner_create(uv_loop_t *loop, int n)
{
	struct worker__spawner *sp = calloc(1, sizeof(*sp));
	sigset_t all, old;

	if (sp == NULL)
		return NULL;
	sp->threads = calloc((size_t)n, sizeof(*sp->threads));
	if (sp->threads == NULL || wakeup_init(loop, &sp->wake, on_wake) != 0) {
		free(sp->threads);
		free(sp);
		return NULL;
	}
	sp->wake.poll.data = sp;
	pthread_mutex_init(&sp->mu, NULL);
	pthread_cond_init(&sp->cond, NULL);
	sp->todo_tail = &sp->todo;
	sp->done_tail = &sp->done;
	/* Only a pending spawn keeps the loop alive (its process's
	 * handles), not the spawner. */
	uv_unref((uv_handle_t *)&sp->wake.poll);
	/* The threads take no signal of berthd's: they are the loop's to
	 * handle, and worker__spawn_start blocks them around its clone in
	 * any case. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int i = 0; i < n; i++)
		if (pthread_create(&sp->threads[sp->nthreads], NULL,
				   spawner_main, sp) == 0)
			sp->nthreads++;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (sp->nthreads == 0) {
		worker__spawner_close(sp, NULL, NULL);
		return NULL;
	}
	return sp;
}

void worker__spawner_submit(struct worker__spawner *sp,
			    struct worker__spawn_req *req)
{
	req->next = NULL;
	pthread_mutex_lock(&sp->mu);
	*sp->todo_tail = req;
	sp->todo_tail = &req->next;
	pthread_cond_signal(&sp->cond);
	pthread_mutex_unlock(&sp->mu);
}

static void spawner_closed(uv_handle_t *h)
{
	struct worker__spawner *sp = h->data;
	void (*closed)(void *arg) = sp->closed;
	void *arg = sp->closed_arg;

	pthread_mutex_destroy(&sp->mu);
	pthread_cond_destroy(&sp->cond);
	free(sp->threads);
	free(sp);
	if (closed != NULL)
		closed(arg);
}

void worker__spawner_close(struct worker__spawner *sp,
			   void (*closed)(void *arg), void *arg)
{
	pthread_mutex_lock(&sp->mu);
	sp->stop = true;
	/* What no thread began is not begun now. */
	for (struct worker__spawn_req *req = sp->todo; req != NULL;
	     req = req->next)
		atomic_store(&req->cancel, true);
	pthread_cond_broadcast(&sp->cond);
	pthread_mutex_unlock(&sp->mu);
	for (int i = 0; i < sp->nthreads; i++)
		pthread_join(sp->threads[i], NULL);
	deliver(sp);
	sp->closed = closed;
	sp->closed_arg = arg;
	wakeup_close(&sp->wake, spawner_closed);
}

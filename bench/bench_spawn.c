/*
 * bench_spawn: what starting an external tool's process costs, one run at
 * a time: libuv's uv_spawn (a fork, which copies the page tables of the
 * whole process) against worker__spawn_start (worker/spawn.c: a clone
 * that shares them, as posix_spawn does), each run started, exited and
 * reaped before the next.
 *
 *   bench_spawn [-n runs] [-m MiB] [-c COMMAND]
 *
 * -m touches a heap of that many MiB first (default 64), as a berthd with
 * a large cache or many clients has: a fork's cost grows with it. The
 * command (default `printf '{"output":{}}\n'`, the trivial tool of
 * bench/tools/bench_printf.json) runs under /bin/sh -c, its stdout to
 * /dev/null. Wall-clock microseconds per run, the process's own CPU and
 * its children's.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "worker/internal.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* cpu returns this process's CPU seconds (self) and its reaped
 * children's. */
static void cpu(double *self, double *children)
{
	struct rusage a, b;

	getrusage(RUSAGE_SELF, &a);
	getrusage(RUSAGE_CHILDREN, &b);
	*self = (double)a.ru_utime.tv_sec + (double)a.ru_utime.tv_usec / 1e6 +
		(double)a.ru_stime.tv_sec + (double)a.ru_stime.tv_usec / 1e6;
	*children = (double)b.ru_utime.tv_sec + (double)b.ru_utime.tv_usec / 1e6 +
		    (double)b.ru_stime.tv_sec + (double)b.ru_stime.tv_usec / 1e6;
}

static bool exited;

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
	exited = true;
	uv_close((uv_handle_t *)p, NULL);
}

static int run_uv(uv_loop_t *loop, char **argv, char **env)
{
	uv_process_t p;
	uv_process_options_t o = {0};
	uv_stdio_container_t io[3] = {{.flags = UV_IGNORE},
				      {.flags = UV_IGNORE},
				      {.flags = UV_IGNORE}};
	int rc;

	o.file = argv[0];
	o.args = argv;
	o.env = env;
	o.flags = UV_PROCESS_DETACHED;
	o.stdio = io;
	o.stdio_count = 3;
	o.exit_cb = on_exit_cb;
	exited = false;
	if ((rc = uv_spawn(loop, &p, &o)) != 0)
		return rc;
	while (!exited)
		uv_run(loop, UV_RUN_ONCE);
	uv_run(loop, UV_RUN_NOWAIT);
	return 0;
}

/* The time the caller spent inside worker__spawn_start: what a start
 * blocks the thread that makes it (berthd's loop) for, since the clone
 * returns only once the child has exec'd. */
static double in_start;

static int run_berth(char **argv, char **env, void *stack)
{
	struct worker__spawn s = {.argv = argv, .env = env, .stack = stack};
	int parent[3], child[3], fd, rc;
	struct pollfd pfd;
	pid_t pid;

	if ((rc = worker__spawn_pipes(parent, child)) != 0)
		return rc;
	memcpy(s.stdio, child, sizeof(s.stdio));
	double t = now();
	rc = worker__spawn_start(&s, &pid, &fd, NULL);
	in_start += now() - t;
	worker__spawn_close(child);
	worker__spawn_close(parent);
	if (rc != 0)
		return rc;
	pfd = (struct pollfd){.fd = fd, .events = POLLIN};
	while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
		;
	worker__spawn_reap(pid);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	const char *command = "printf '{\"output\":{}}\\n' >/dev/null";
	long runs = 1000, mib = 64;
	char *env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", NULL};
	char *args[4];
	double t0, t1, t2, s0, c0, s1, c1, s2, c2;
	void *stack;
	char *heap;
	int opt;

	while ((opt = getopt(argc, argv, "n:m:c:")) != -1) {
		switch (opt) {
		case 'n':
			runs = strtol(optarg, NULL, 10);
			break;
		case 'm':
			mib = strtol(optarg, NULL, 10);
			break;
		case 'c':
			command = optarg;
			break;
		default:
			fprintf(stderr, "usage: bench_spawn [-n runs] [-m MiB] "
				"[-c COMMAND]\n");
			return 2;
		}
	}
	if (runs <= 0 || mib < 0)
		return 2;
	args[0] = "/bin/sh";
	args[1] = "-c";
	args[2] = (char *)command;
	args[3] = NULL;
	heap = malloc((size_t)mib << 20);
	if (mib && !heap)
		return 1;
	if (heap)
		memset(heap, 1, (size_t)mib << 20);
	stack = worker__spawn_stack_new();
	if (!stack)
		return 1;

	cpu(&s0, &c0);
	t0 = now();
	for (long i = 0; i < runs; i++)
		if (run_uv(uv_default_loop(), args, env) != 0)
			return 1;
	t1 = now();
	cpu(&s1, &c1);
	for (long i = 0; i < runs; i++)
		if (run_berth(args, env, stack) != 0)
			return 1;
	t2 = now();
	cpu(&s2, &c2);

	printf("bench_spawn: %ld runs of /bin/sh -c '%s', heap %ld MiB; per "
	       "run: wall us, own CPU us, child CPU us (and, for\n"
	       "worker__spawn_start, the wall us the caller waited inside "
	       "it)\n",
	       runs, command, mib);
	printf("uv_spawn             %8.1f %8.1f %8.1f\n",
	       (t1 - t0) / (double)runs * 1e6, (s1 - s0) / (double)runs * 1e6,
	       (c1 - c0) / (double)runs * 1e6);
	printf("worker__spawn_start  %8.1f %8.1f %8.1f %8.1f\n",
	       (t2 - t1) / (double)runs * 1e6, (s2 - s1) / (double)runs * 1e6,
	       (c2 - c1) / (double)runs * 1e6, in_start / (double)runs * 1e6);
	worker__spawn_stack_free(stack);
	uv_loop_close(uv_default_loop());
	free(heap);
	return 0;
}

/*
 * bench_floor: the two costs of this machine that no daemon can go under,
 * measured without berth, so that docs/BENCHMARKS.md can say which part of
 * a latency is the machine's:
 *
 *   - a wake-up between two threads: one thread signals a condition
 *     variable the other sleeps on, which answers through an eventfd
 *     (what berthd's loop and writer threads do for each commit), timed
 *     back to back and after a pause;
 *   - a commit's fdatasync: N frames of 24 + 4,096 bytes appended to a
 *     file and synced, as SQLite's WAL writes a commit of N pages, timed
 *     back to back and after a pause;
 *   - what a process costs: the first touch of an anonymous page (a page
 *     fault, which a virtual machine may make many times dearer), and
 *     /bin/true started with posix_spawn and reaped, with the child's CPU
 *     (what every run of an external tool pays before its own work).
 *
 * The pause (default 5 ms, what an idle berthd sees between two jobs at
 * 200 jobs/s) is what separates the two rows of each: on a virtual machine
 * a vCPU or a virtual disk left idle answers more slowly.
 *
 *   bench_floor [-d DIR] [-n ROUNDS] [-p PAGES] [-g PAUSE_US]
 *
 * DIR (default .) holds the scratch file, which is deleted; it should be
 * on the disk of the database. Prints p50, p90 and p99 in microseconds.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <spawn.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void pause_us(long us)
{
	if (us > 0)
		nanosleep(&(struct timespec){us / 1000000, (us % 1000000) * 1000},
			  NULL);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void print_row(const char *what, long pause, uint64_t *ns, int n)
{
	qsort(ns, (size_t)n, sizeof(ns[0]), cmp_u64);
	printf("%-34s pause %5ld us: p50 %7.1f us  p90 %7.1f us  p99 %7.1f us\n",
	       what, pause, ns[n / 2] / 1e3, ns[n * 9 / 10] / 1e3,
	       ns[n * 99 / 100] / 1e3);
}

/* ---- a wake-up there and back ------------------------------------------ */

struct pingpong {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool work, stop;
	int efd;
};

static void *answer(void *arg)
{
	struct pingpong *p = arg;
	const uint64_t one = 1;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->work && !p->stop)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->stop)
			break;
		p->work = false;
		pthread_mutex_unlock(&p->mu);
		if (write(p->efd, &one, sizeof(one)) < 0)
			perror("bench_floor: eventfd");
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

static int wake_row(int rounds, long pause)
{
	struct pingpong p = {.mu = PTHREAD_MUTEX_INITIALIZER,
			     .cv = PTHREAD_COND_INITIALIZER};
	uint64_t *ns = calloc((size_t)rounds, sizeof(*ns));
	pthread_t t;

	p.efd = eventfd(0, EFD_CLOEXEC);
	if (ns == NULL || p.efd < 0 || pthread_create(&t, NULL, answer, &p) != 0) {
		perror("bench_floor: wake-up");
		free(ns);
		return -1;
	}
	for (int i = 0; i < rounds; i++) {
		uint64_t v;
		pause_us(pause);
		uint64_t t0 = now_ns();
		pthread_mutex_lock(&p.mu);
		p.work = true;
		pthread_mutex_unlock(&p.mu);
		pthread_cond_signal(&p.cv);
		if (read(p.efd, &v, sizeof(v)) < 0)
			perror("bench_floor: eventfd");
		ns[i] = now_ns() - t0;
	}
	pthread_mutex_lock(&p.mu);
	p.stop = true;
	pthread_mutex_unlock(&p.mu);
	pthread_cond_signal(&p.cv);
	pthread_join(t, NULL);
	close(p.efd);
	print_row("wake-up there and back", pause, ns, rounds);
	free(ns);
	return 0;
}

/* ---- a commit's fdatasync ---------------------------------------------- */

enum { FRAME_HDR = 24, PAGE = 4096, FILE_FRAMES = 1000 };

static int sync_row(const char *dir, int rounds, int pages, long pause)
{
	char path[4096];
	static char page[PAGE];
	uint64_t *ns = calloc((size_t)rounds, sizeof(*ns));
	off_t off = 0;

	snprintf(path, sizeof(path), "%s/bench_floor.%ld", dir, (long)getpid());
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (ns == NULL || fd < 0) {
		fprintf(stderr, "bench_floor: %s: %s\n", path, strerror(errno));
		free(ns);
		return -1;
	}
	memset(page, 0x5a, sizeof(page));
	/* The file is written once first, as a WAL that SQLite reuses from
	 * its start after a checkpoint: the syncs then change no size. */
	for (int i = 0; i < FILE_FRAMES; i++)
		if (pwrite(fd, page, PAGE, (off_t)i * (FRAME_HDR + PAGE)) < 0)
			break;
	fsync(fd);
	for (int i = 0; i < rounds; i++) {
		for (int p = 0; p < pages; p++) {
			if (off + FRAME_HDR + PAGE >
			    (off_t)FILE_FRAMES * (FRAME_HDR + PAGE))
				off = 0;
			if (pwrite(fd, page, FRAME_HDR, off) < 0 ||
			    pwrite(fd, page, PAGE, off + FRAME_HDR) < 0)
				perror("bench_floor: pwrite");
			off += FRAME_HDR + PAGE;
		}
		uint64_t t0 = now_ns();
		if (fdatasync(fd) != 0)
			perror("bench_floor: fdatasync");
		ns[i] = now_ns() - t0;
		pause_us(pause);
	}
	close(fd);
	unlink(path);
	char what[64];
	snprintf(what, sizeof(what), "fdatasync of %d frames", pages);
	print_row(what, pause, ns, rounds);
	free(ns);
	return 0;
}

/* ---- what a process costs --------------------------------------------- */

/* fault_row: the first touch of each page of a fresh anonymous mapping,
 * per page; ROUNDS mappings of 256 pages. */
static int fault_row(int rounds)
{
	enum { PAGES = 256 };
	uint64_t *ns = calloc((size_t)rounds, sizeof(*ns));
	long psz = sysconf(_SC_PAGESIZE);

	if (ns == NULL)
		return -1;
	for (int i = 0; i < rounds; i++) {
		volatile char *m = mmap(NULL, (size_t)psz * PAGES,
					PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED) {
			perror("bench_floor: mmap");
			free(ns);
			return -1;
		}
		uint64_t t0 = now_ns();
		for (int p = 0; p < PAGES; p++)
			m[(size_t)p * (size_t)psz] = 1;
		ns[i] = (now_ns() - t0) / PAGES;
		munmap((void *)m, (size_t)psz * PAGES);
	}
	print_row("first touch of a page", 0, ns, rounds);
	free(ns);
	return 0;
}

static uint64_t children_cpu_ns(void)
{
	struct rusage u;
	getrusage(RUSAGE_CHILDREN, &u);
	return ((uint64_t)u.ru_utime.tv_sec + (uint64_t)u.ru_stime.tv_sec) *
		       1000000000u +
	       ((uint64_t)u.ru_utime.tv_usec + (uint64_t)u.ru_stime.tv_usec) *
		       1000u;
}

/* spawn_row: /bin/true started and reaped, back to back; then its CPU
 * (the children's, over the rounds). */
static int spawn_row(int rounds)
{
	extern char **environ;
	char *argv[] = {"/bin/true", NULL};
	uint64_t *ns = calloc((size_t)rounds, sizeof(*ns));
	uint64_t cpu0 = children_cpu_ns();

	if (ns == NULL)
		return -1;
	for (int i = 0; i < rounds; i++) {
		pid_t pid;
		int st;
		uint64_t t0 = now_ns();
		int rc = posix_spawn(&pid, argv[0], NULL, NULL, argv, environ);
		if (rc != 0 || waitpid(pid, &st, 0) != pid) {
			fprintf(stderr, "bench_floor: /bin/true: %s\n",
				strerror(rc != 0 ? rc : errno));
			free(ns);
			return -1;
		}
		ns[i] = now_ns() - t0;
	}
	double cpu_us = (double)(children_cpu_ns() - cpu0) / 1e3 / rounds;
	print_row("/bin/true started and reaped", 0, ns, rounds);
	printf("%-34s %26s %7.1f us\n", "/bin/true: the child's CPU",
	       "mean", cpu_us);
	free(ns);
	return 0;
}

int main(int argc, char **argv)
{
	const char *dir = ".";
	int rounds = 400, pages = 8, c;
	long pause = 5000;

	while ((c = getopt(argc, argv, "d:n:p:g:h")) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 'n': rounds = atoi(optarg); break;
		case 'p': pages = atoi(optarg); break;
		case 'g': pause = atol(optarg); break;
		default:
			fputs("Usage: bench_floor [-d DIR] [-n ROUNDS] [-p PAGES] "
			      "[-g PAUSE_US]\n", stderr);
			return c == 'h' ? 0 : 2;
		}
	}
	if (rounds < 10 || pages < 1 || pause < 0) {
		fputs("bench_floor: -n must be at least 10, -p at least 1, -g "
		      "not negative\n", stderr);
		return 2;
	}
	if (wake_row(rounds, 0) || wake_row(rounds, pause) ||
	    sync_row(dir, rounds, pages, 0) || sync_row(dir, rounds, pages, pause) ||
	    fault_row(rounds) || spawn_row(rounds))
		return 1;
	return 0;
}

/*
 * wakeup.h: another thread wakes the loop thread, as uv_async_send does,
 * without making the loop thread spin.
 *
 * libuv 1.44 (Debian 12's) marks an async handle busy, writes to its
 * eventfd and only then marks it done; the loop thread, woken by that
 * write, spins until the sender has returned from the system call. On
 * this project's 2-vCPU test machine, with the store's writer waking the
 * loop after every commit, that spin was 19 % of the loop thread's perf
 * samples (docs/BENCHMARKS.md, run 11). Here the sender
 * publishes "woken" before it writes and the loop clears it before it
 * reads the queue, so neither side ever waits for the other: a wake-up is
 * one atomic exchange, and one write(2) when the loop was not already due
 * to run the callback.
 *
 * Like uv_async_t it coalesces: every wakeup_send is followed by at least
 * one run of the callback on the loop thread that begins after it, and
 * several sends may share one run. What the sender hands over (a queue
 * under a mutex) must be in place before wakeup_send.
 *
 * Header-only for the reason strf.h is: the store and the worker share it
 * and depend on nothing of each other.
 *
 * Ownership: the caller owns the struct wakeup (poll.data is the
 * caller's); wakeup_init opens its eventfd, wakeup_close closes the handle
 * and then the eventfd, and the struct must stay alive until the close
 * callback runs.
 */
#ifndef BERTH_COMMON_WAKEUP_H
#define BERTH_COMMON_WAKEUP_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <uv.h>

struct wakeup;
typedef void (*wakeup_fn)(struct wakeup *w);

struct wakeup {
	uv_poll_t poll; /* first: a uv_handle_t * of it is the wakeup */
	int fd;         /* the eventfd, nonblocking */
	atomic_bool due; /* a send since the callback last began */
	wakeup_fn cb;
	uv_close_cb close_cb;
};

static inline void wakeup__on_poll(uv_poll_t *h, int status, int events)
{
	struct wakeup *w = (struct wakeup *)h;
	uint64_t n;

	(void)status;
	(void)events;
	/* Empty the eventfd first, then clear due: a send after the clear
	 * writes again, so its work is never left without a callback. */
	while (read(w->fd, &n, sizeof(n)) < 0 && errno == EINTR)
		;
	atomic_store(&w->due, false);
	w->cb(w);
}

/* wakeup_init makes w a handle of loop that runs cb on the loop thread
 * after wakeup_send. Returns 0 or a negative errno. */
static inline int wakeup_init(uv_loop_t *loop, struct wakeup *w, wakeup_fn cb)
{
	w->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->fd < 0)
		return -errno;
	atomic_init(&w->due, false);
	w->cb = cb;
	w->close_cb = NULL;
	int rc = uv_poll_init(loop, &w->poll, w->fd);
	if (rc != 0) {
		/* A failed uv_poll_init leaves no handle behind. */
		close(w->fd);
		w->fd = -1;
		return rc;
	}
	/* It fails only when another handle polls the same descriptor,
	 * which a new eventfd cannot have. */
	(void)uv_poll_start(&w->poll, UV_READABLE, wakeup__on_poll);
	return 0;
}

/* wakeup_send runs w's callback soon, on the loop thread. Any thread. */
static inline void wakeup_send(struct wakeup *w)
{
	static const uint64_t one = 1;

	if (atomic_exchange(&w->due, true))
		return;
	/* EAGAIN: the counter is full, so the loop is woken anyway. */
	while (write(w->fd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

static inline void wakeup__on_closed(uv_handle_t *h)
{
	struct wakeup *w = (struct wakeup *)h;

	close(w->fd);
	w->fd = -1;
	if (w->close_cb != NULL)
		w->close_cb(h);
}

/* wakeup_close closes w on the loop thread; done, if not NULL, gets w's
 * handle once w may be freed. No wakeup_send may follow. */
static inline void wakeup_close(struct wakeup *w, uv_close_cb done)
{
	w->close_cb = done;
	uv_close((uv_handle_t *)&w->poll, wakeup__on_closed);
}

#endif

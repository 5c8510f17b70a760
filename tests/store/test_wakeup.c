/*
 * test_wakeup.c: common/wakeup.h, the store writer's way of waking the
 * loop thread. Real threads, a real loop and a real eventfd: every send is
 * followed by a callback that sees what was handed over, sends coalesce,
 * a send from inside the callback gets a callback of its own, and a close
 * releases the descriptor.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <uv.h>

#include "common/wakeup.h"

enum { ITEMS = 20000 };

/* A queue the producer fills under mu and the callback drains. */
struct box {
	struct wakeup w;
	uv_timer_t guard; /* fails the test instead of hanging it */
	pthread_mutex_t mu;
	long queued;   /* items handed over, under mu */
	long taken;    /* items the callbacks took */
	long calls;    /* callbacks run */
	long resend;   /* sends still to make from inside the callback */
	bool closed;
	bool timed_out;
};

static void on_guard(uv_timer_t *t)
{
	struct box *b = t->data;
	b->timed_out = true;
	uv_stop(t->loop);
}

static void on_wake(struct wakeup *w)
{
	struct box *b = w->poll.data;

	b->calls++;
	pthread_mutex_lock(&b->mu);
	b->taken = b->queued;
	pthread_mutex_unlock(&b->mu);
	if (b->resend > 0) {
		b->resend--;
		wakeup_send(w);
		return;
	}
	if (b->taken == ITEMS)
		uv_stop(w->poll.loop);
}

static void *produce(void *arg)
{
	struct box *b = arg;

	for (long i = 0; i < ITEMS; i++) {
		pthread_mutex_lock(&b->mu);
		b->queued++;
		pthread_mutex_unlock(&b->mu);
		wakeup_send(&b->w);
	}
	return NULL;
}

static void box_init(uv_loop_t *loop, struct box *b)
{
	memset(b, 0, sizeof(*b));
	pthread_mutex_init(&b->mu, NULL);
	assert_int_equal(wakeup_init(loop, &b->w, on_wake), 0);
	b->w.poll.data = b;
	uv_timer_init(loop, &b->guard);
	b->guard.data = b;
	uv_timer_start(&b->guard, on_guard, 60000, 0);
}

static void on_closed(uv_handle_t *h)
{
	struct box *b = h->data;
	b->closed = true;
}

static void box_close(uv_loop_t *loop, struct box *b)
{
	int fd = b->w.fd;

	wakeup_close(&b->w, on_closed);
	uv_close((uv_handle_t *)&b->guard, NULL);
	uv_run(loop, UV_RUN_DEFAULT);
	assert_true(b->closed);
	assert_int_equal(b->w.fd, -1);
	assert_int_equal(fcntl(fd, F_GETFD), -1);
	assert_int_equal(errno, EBADF);
	pthread_mutex_destroy(&b->mu);
}

static void every_item_a_thread_hands_over_reaches_a_callback(void **state)
{
	(void)state;
	uv_loop_t loop;
	struct box b;
	pthread_t t;

	uv_loop_init(&loop);
	box_init(&loop, &b);
	assert_int_equal(pthread_create(&t, NULL, produce, &b), 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	pthread_join(t, NULL);
	assert_false(b.timed_out);
	assert_int_equal(b.taken, ITEMS);
	/* Sends coalesce: never more callbacks than sends. */
	assert_true(b.calls >= 1 && b.calls <= ITEMS);
	box_close(&loop, &b);
	assert_int_equal(uv_loop_close(&loop), 0);
}

/* calls_after sends `sends` times before the loop runs, with every item
 * already handed over, and returns how many callbacks ran; each callback
 * sends again while `resend` is left. */
static long calls_after(int sends, long resend)
{
	uv_loop_t loop;
	struct box b;

	uv_loop_init(&loop);
	box_init(&loop, &b);
	b.queued = ITEMS;
	b.resend = resend;
	for (int i = 0; i < sends; i++)
		wakeup_send(&b.w);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_false(b.timed_out);
	box_close(&loop, &b);
	assert_int_equal(uv_loop_close(&loop), 0);
	return b.calls;
}

static void a_send_from_the_callback_runs_it_again(void **state)
{
	(void)state;
	assert_int_equal(calls_after(1, 3), 4);
}

static void sends_before_the_loop_runs_make_one_callback(void **state)
{
	(void)state;
	assert_int_equal(calls_after(100, 0), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_item_a_thread_hands_over_reaches_a_callback),
		cmocka_unit_test(a_send_from_the_callback_runs_it_again),
		cmocka_unit_test(sends_before_the_loop_runs_make_one_callback),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

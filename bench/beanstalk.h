/*
 * beanstalk.h: a tiny client of beanstalkd's text protocol, enough to load
 * it the way the benchmarks load berth: put, reserve, delete, use, watch.
 *
 * One struct beanstalk is one TCP connection to 127.0.0.1 (the benchmarks
 * stay on loopback), used by one thread. A put can be sent ahead of its
 * reply (beanstalk_put_send, then beanstalk_put_recv in the same order),
 * which is how a pipelined producer keeps several in flight; beanstalkd
 * answers a connection's commands in order.
 *
 * Errors are 0 or a negative errno-style code: -ETIMEDOUT, -ECONNRESET,
 * -EPROTO for a reply that is not the one expected (its first line is in
 * beanstalk_last_reply).
 */
#ifndef BERTH_BENCH_BEANSTALK_H
#define BERTH_BENCH_BEANSTALK_H

#include <stddef.h>
#include <stdint.h>

struct beanstalk;

/* beanstalk_connect connects to 127.0.0.1:port. Returns a new connection
 * or NULL with errno set. */
struct beanstalk *beanstalk_connect(int port);
void beanstalk_close(struct beanstalk *b);

/* beanstalk_fd returns the socket, for poll(): a reply is either whole in
 * the connection's buffer (beanstalk_put_recv with a time-out of 0 returns
 * it) or still to come on the socket. */
int beanstalk_fd(const struct beanstalk *b);

/* beanstalk_use makes puts go to tube; beanstalk_watch adds tube to the
 * reserve set and beanstalk_ignore removes one. Each waits for its reply. */
int beanstalk_use(struct beanstalk *b, const char *tube);
int beanstalk_watch(struct beanstalk *b, const char *tube);
int beanstalk_ignore(struct beanstalk *b, const char *tube);

/* beanstalk_put_send sends "put pri delay ttr len" and the body without
 * waiting; beanstalk_put_recv waits up to timeout_ms (<0: forever) for the
 * next put's reply and returns 0 with *id, or an error (a BURIED or
 * JOB_TOO_BIG reply is -EPROTO). */
int beanstalk_put_send(struct beanstalk *b, uint32_t pri, uint32_t delay,
		       uint32_t ttr, const void *body, size_t len);
int beanstalk_put_recv(struct beanstalk *b, int timeout_ms, uint64_t *id);

/* beanstalk_reserve waits up to timeout_s seconds on the server
 * (reserve-with-timeout) and returns 0 with *id and *len (the body is read
 * and dropped), or -ETIMEDOUT when no job came. */
int beanstalk_reserve(struct beanstalk *b, int timeout_s, uint64_t *id,
		      size_t *len);

/* beanstalk_delete deletes job id and waits for DELETED. */
int beanstalk_delete(struct beanstalk *b, uint64_t id);

/* beanstalk_last_reply returns the first line of the last reply read
 * (borrowed, valid until the next call), for error messages. */
const char *beanstalk_last_reply(const struct beanstalk *b);

#endif

/*
 * link_beanstalk.c: the beanstalkd target, loaded the way berth is. A
 * producer connection puts one job per round trip (or several in flight,
 * read back in order, as beanstalkd answers a connection); consumers
 * reserve a job, delete it, and note that it finished when DELETED comes
 * back, which is beanstalkd's "completed".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "beanstalk.h"
#include "loadgen.h"

struct beanstalk_link {
	struct beanstalk *b;
	size_t next_tag; /* the tag of the oldest put not yet answered */
	bool started;
};

/* The priority, delay and time-to-run of every put: a middle priority, no
 * delay, and a minute for a consumer to delete it. */
#define PUT_PRI 1024
#define PUT_DELAY 0
#define PUT_TTR 60

static void *beanstalk_open(struct loadgen_run *r, int index)
{
	struct beanstalk_link *l = calloc(1, sizeof *l);

	if (!l)
		return NULL;
	l->b = beanstalk_connect(r->o->port);
	if (!l->b) {
		fprintf(stderr, "berth-bench: connection %d: 127.0.0.1:%d: "
			"%s\n", index, r->o->port, strerror(errno));
		free(l);
		return NULL;
	}
	if (beanstalk_use(l->b, r->o->tube) < 0) {
		fprintf(stderr, "berth-bench: use %s: %s\n", r->o->tube,
			beanstalk_last_reply(l->b));
		beanstalk_close(l->b);
		free(l);
		return NULL;
	}
	return l;
}

static void beanstalk_link_close(void *p)
{
	struct beanstalk_link *l = p;

	beanstalk_close(l->b);
	free(l);
}

static int beanstalk_link_fd(void *p)
{
	return beanstalk_fd(((struct beanstalk_link *)p)->b);
}

/* beanstalk_send puts job tag. The producer sends tags in increasing
 * order and beanstalkd answers in order, so the reply to the oldest put
 * carries next_tag. */
static int beanstalk_send(void *p, size_t tag)
{
	struct beanstalk_link *l = p;
	char body[64];
	int n = snprintf(body, sizeof body, "{\"n\":%zu}", tag);

	if (!l->started) {
		l->next_tag = tag;
		l->started = true;
	}
	return beanstalk_put_send(l->b, PUT_PRI, PUT_DELAY, PUT_TTR, body,
				  (size_t)n);
}

static int beanstalk_recv(void *p, size_t *tag, char *id, bool *failed)
{
	struct beanstalk_link *l = p;
	uint64_t jid;
	int rc = beanstalk_put_recv(l->b, 0, &jid);

	if (rc == -ETIMEDOUT)
		return 0;
	*tag = l->next_tag++;
	*failed = rc < 0;
	if (rc == -EPROTO) {
		fprintf(stderr, "berth-bench: put: %s\n",
			beanstalk_last_reply(l->b));
		return 1;
	}
	if (rc < 0)
		return rc;
	snprintf(id, LOADGEN_ID_MAX, "%llu", (unsigned long long)jid);
	return 1;
}

static int beanstalk_consumers(const struct loadgen_opts *o)
{
	return o->consumers;
}

static void beanstalk_consume(struct loadgen_consumer *k)
{
	struct loadgen_run *r = k->run;
	struct beanstalk *b = beanstalk_connect(r->o->port);

	if (!b || beanstalk_watch(b, r->o->tube) < 0 ||
	    beanstalk_ignore(b, "default") < 0) {
		fprintf(stderr, "berth-bench: consumer %d: %s\n", k->index,
			b ? beanstalk_last_reply(b) : strerror(errno));
		k->err = -ECONNRESET;
		atomic_fetch_add(&r->consumers_ready, 1);
		beanstalk_close(b);
		return;
	}
	atomic_fetch_add(&r->consumers_ready, 1);
	while (!loadgen_consumer_should_stop(r)) {
		uint64_t jid;
		size_t len;
		char id[LOADGEN_ID_MAX];
		int rc = beanstalk_reserve(b, 1, &jid, &len);

		if (rc == -ETIMEDOUT)
			continue;
		if (rc == 0)
			rc = beanstalk_delete(b, jid);
		if (rc < 0) {
			fprintf(stderr, "berth-bench: consumer %d: %s (%s)\n",
				k->index, strerror(-rc),
				beanstalk_last_reply(b));
			k->err = rc;
			break;
		}
		snprintf(id, sizeof id, "%llu", (unsigned long long)jid);
		loadgen_record_done(k, id, stats_now());
		atomic_fetch_add(&r->finished, 1);
	}
	beanstalk_close(b);
}

const struct link_ops link_beanstalk = {
	.open = beanstalk_open,
	.close = beanstalk_link_close,
	.fd = beanstalk_link_fd,
	.send = beanstalk_send,
	.recv = beanstalk_recv,
	.consume = beanstalk_consume,
	.consumers = beanstalk_consumers,
};

/*
 * link_berth.c: the berth target. A producer connection sends jobs/submit
 * (or, in the ping scenario, ping) requests as raw lines with the job's index as the JSON-RPC id, so that
 * several can be in flight and answered in any order (PROTOCOL.md allows
 * both); with one in flight this is exactly a blocking call. The consumer
 * is one events/subscribe connection, of the event types it reads, that
 * watches every job reach its end
 * and, in the suspend and approve scenarios, answers it on the same
 * connection: jobs/resume on "suspended", jobs/approve on
 * "approval_requested".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "berth/client.h"
#include "jscan.h"
#include "loadgen.h"

struct berth_link {
	struct loadgen_run *run;
	struct berth_client *c;
};

static void *berth_open(struct loadgen_run *r, int index)
{
	struct berth_link *l = calloc(1, sizeof *l);

	if (!l)
		return NULL;
	l->run = r;
	l->c = berth_client_connect(r->o->socket);
	if (!l->c) {
		fprintf(stderr, "berth-bench: connection %d: %s: %s\n", index,
			r->o->socket, strerror(errno));
		free(l);
		return NULL;
	}
	return l;
}

static void berth_close(void *p)
{
	struct berth_link *l = p;

	berth_client_close(l->c);
	free(l);
}

static int berth_fd(void *p)
{
	return berth_client_fd(((struct berth_link *)p)->c);
}

static int berth_send(void *p, size_t tag)
{
	struct berth_link *l = p;
	char line[768];
	int n = l->run->o->scenario == SC_PING
		? snprintf(line, sizeof line,
			   "{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":"
			   "\"ping\"}", tag)
		: l->run->o->input
		? snprintf(line, sizeof line,
			   "{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":"
			   "\"jobs/submit\",\"params\":{\"tool\":\"%s\","
			   "\"input\":%s}}",
			   tag, l->run->o->tool, l->run->o->input)
		: snprintf(line, sizeof line,
			   "{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":"
			   "\"jobs/submit\",\"params\":{\"tool\":\"%s\","
			   "\"input\":{\"n\":%zu}}}",
			   tag, l->run->o->tool, tag);

	if (n < 0 || (size_t)n >= sizeof line)
		return -EINVAL;
	return berth_client_send_line(l->c, line, (size_t)n);
}

static int berth_recv(void *p, size_t *tag, char *id, bool *failed)
{
	struct berth_link *l = p;
	char *line = berth_client_read_line(l->c, 0);
	const char *v, *res;

	if (!line)
		return errno == ETIMEDOUT ? 0 : -ECONNRESET;
	v = jscan_member(line, "id");
	if (!v || *v < '0' || *v > '9') {
		fprintf(stderr, "berth-bench: unexpected line: %.200s\n", line);
		free(line);
		return -EPROTO;
	}
	*tag = (size_t)strtoull(v, NULL, 10);
	res = jscan_member(line, "result");
	if (l->run->o->scenario == SC_PING) {
		/* No job: the tag names the round trip. */
		*failed = !res;
		snprintf(id, LOADGEN_ID_MAX, "%zu", *tag);
	} else {
		*failed = !res || !jscan_string(jscan_member(res, "id"), id,
						LOADGEN_ID_MAX);
	}
	if (*failed && atomic_load(&l->run->failed) == 0)
		fprintf(stderr, "berth-bench: first error: %.300s\n", line);
	free(line);
	return 1;
}

static int berth_consumers(const struct loadgen_opts *o)
{
	return 1;
}

/* answer sends jobs/resume or jobs/approve for job id without waiting; the
 * reply is read (and an error counted) by the consumer's loop. */
static int answer(struct berth_client *c, const char *method,
		  const char *id, size_t rpcid)
{
	char line[256];
	int n = snprintf(line, sizeof line,
			 "{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":\"%s\","
			 "\"params\":{\"id\":\"%s\"%s}}",
			 rpcid, method, id,
			 strcmp(method, "jobs/resume") == 0 ?
				 ",\"resumeData\":{\"ok\":true}" : "");

	if (n < 0 || (size_t)n >= sizeof line)
		return -EINVAL;
	return berth_client_send_line(c, line, (size_t)n);
}

static bool is_failure(const char *type)
{
	static const char *const ends[] = {
		"failed", "timed_out", "cancelled", "expired", "declined",
	};

	for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++)
		if (jscan_is(type, ends[i]))
			return true;
	return false;
}

static void berth_consume(struct loadgen_consumer *k)
{
	struct loadgen_run *r = k->run;
	const struct loadgen_opts *o = r->o;
	const char *end = o->scenario == SC_FILL ? "suspended" : "completed";
	/* Only the types read below: a job's "started" (and, but where it
	 * is answered or ends the job, its "suspended") would be a line
	 * sent and read for nothing. */
	char subscribe[512];
	snprintf(subscribe, sizeof subscribe,
		 "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"events/subscribe\","
		 "\"params\":{\"types\":[\"created\",\"completed\",\"failed\","
		 "\"timed_out\",\"cancelled\",\"expired\",\"declined\"%s]}}",
		 o->scenario == SC_SUSPEND || o->scenario == SC_FILL
			 ? ",\"suspended\""
			 : o->scenario == SC_APPROVE ? ",\"approval_requested\"" : "");
	struct berth_client *c = berth_client_connect(o->socket);
	struct idmap mine = { 0 };
	size_t rpcid = 1;
	bool subscribed = false;

	if (!c || berth_client_send_line(c, subscribe, strlen(subscribe))) {
		fprintf(stderr, "berth-bench: subscribe: %s\n",
			strerror(errno));
		k->err = -ECONNRESET;
		atomic_fetch_add(&r->consumers_ready, 1);
		berth_client_close(c);
		return;
	}
	while (!loadgen_consumer_should_stop(r)) {
		char *line = berth_client_read_line(c, 100);
		const char *method, *params, *type;
		char id[LOADGEN_ID_MAX];
		uint64_t now = stats_now();

		if (!line) {
			if (errno == ETIMEDOUT)
				continue;
			fprintf(stderr, "berth-bench: the subscription "
				"closed\n");
			k->err = -ECONNRESET;
			break;
		}
		method = jscan_member(line, "method");
		if (!method) {
			/* A reply: to the subscription (id 0), or to a
			 * resume or an approval sent below. */
			if (jscan_member(line, "error")) {
				if (atomic_fetch_add(&r->failed, 1) == 0 ||
				    !subscribed)
					fprintf(stderr, "berth-bench: error "
						"reply: %.300s\n", line);
				if (!subscribed) {
					k->err = -EPROTO;
					free(line);
					break;
				}
			} else if (!subscribed) {
				subscribed = true;
				atomic_fetch_add(&r->consumers_ready, 1);
			}
			free(line);
			continue;
		}
		params = jscan_member(line, "params");
		type = params ? jscan_member(params, "type") : NULL;
		if (!jscan_is(method, "events/event") || !type ||
		    !jscan_string(jscan_member(params, "jobId"), id,
				  sizeof id)) {
			free(line);
			continue;
		}
		/* The run's jobs are those created since the subscription
		 * began (before the first submission): a job left by an
		 * earlier run that ends now is not counted. */
		if (jscan_is(type, "created")) {
			idmap_put(&mine, id, 0);
		} else if (!idmap_get(&mine, id, &(uint32_t){ 0 })) {
			/* not this run's */
		} else if (jscan_is(type, end)) {
			loadgen_record_done(k, id, now);
			atomic_fetch_add(&r->finished, 1);
		} else if (is_failure(type)) {
			if (atomic_fetch_add(&r->failed, 1) == 0)
				fprintf(stderr, "berth-bench: a job ended "
					"badly: %.300s\n", line);
			atomic_fetch_add(&r->finished, 1);
		} else if (o->scenario == SC_SUSPEND &&
			   jscan_is(type, "suspended")) {
			answer(c, "jobs/resume", id, rpcid++);
		} else if (o->scenario == SC_APPROVE &&
			   jscan_is(type, "approval_requested")) {
			answer(c, "jobs/approve", id, rpcid++);
		}
		free(line);
	}
	if (!subscribed)
		atomic_fetch_add(&r->consumers_ready, 1);
	idmap_free(&mine);
	berth_client_close(c);
}

const struct link_ops link_berth = {
	.open = berth_open,
	.close = berth_close,
	.fd = berth_fd,
	.send = berth_send,
	.recv = berth_recv,
	.consume = berth_consume,
	.consumers = berth_consumers,
};

/*
 * harness.h: a real berthd for integration tests.
 *
 * harness_start makes a temporary directory, starts the berthd named by
 * $BERTHD on DIR/berth.db and DIR/berth.sock with the example tools of
 * $BERTH_EXAMPLES (unless extra_args names --tools itself... both are
 * passed) and extra_args, and returns once berthd answers on the socket,
 * by when its --listen and --http sockets are open too. The tests'
 * meson.build sets BERTHD, BERTH (the CLI) and BERTH_EXAMPLES.
 */
#ifndef BERTH_TESTS_HARNESS_H
#define BERTH_TESTS_HARNESS_H

#include <stdbool.h>
#include <sys/types.h>

#include "berth/client.h"

struct harness {
	char dir[256];
	char db[320];
	char socket[320];
	char log[320];  /* berthd's stdout and stderr, appended */
	pid_t pid;      /* 0 when not running */
	const char *args[32]; /* extra args, copied pointers, NULL-ended */
	bool no_examples; /* do not pass --tools $BERTH_EXAMPLES */
	int start_status; /* wait status when berthd exited while starting */
};

/* harness_start returns 0, or -1 after printing why (berthd's log too). */
int harness_start(struct harness *h, const char *const *extra_args);
/* harness_restart starts berthd again on the same directory and args. */
int harness_restart(struct harness *h);
/* harness_kill9 sends SIGKILL and reaps berthd; returns 0 or -1. */
int harness_kill9(struct harness *h);
/* harness_stop sends SIGTERM, waits up to 30 s, and returns berthd's exit
 * status (or -1 if it had to be killed). */
int harness_stop(struct harness *h);
/* harness_cleanup stops berthd if running and removes the directory. */
void harness_cleanup(struct harness *h);
/* harness_free_port returns a TCP port on 127.0.0.1 that was free a
 * moment ago, for --listen and --http: one below the kernel's range of
 * connections' local ports, so that it stays free across a restart. */
int harness_free_port(void);
/* harness_connect returns a new client on the harness socket, or NULL. */
struct berth_client *harness_connect(struct harness *h);
/* harness_call calls method with params (stolen) and returns the result
 * (new reference), failing the cmocka test on an error reply unless
 * error is not NULL, in which case *error receives the error object. */
json_t *harness_call(struct berth_client *c, const char *method,
		     json_t *params, json_t **error);
/* harness_submit_held sends the jobs/submit line `submission` on a new
 * connection while this process holds the database's write lock, which
 * berthd's writer waits for (up to its busy timeout, 5 s), and lets it go
 * after hold_ms: the creation's commit is held up for real. It returns
 * the new job's id (malloc'd), failing the cmocka test when the
 * submission failed. */
char *harness_submit_held(struct harness *h, const char *submission,
			  int hold_ms);
/* harness_event_types writes the types of an events page's events (an
 * events/poll result), each followed by a space, into buf and returns it;
 * it fails the cmocka test when they do not fit in size. */
const char *harness_event_types(const json_t *page, char *buf, size_t size);

#endif

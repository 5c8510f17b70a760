/*
 * wait.h: long-poll waits (jobs/wait, events/poll). A wait is woken by the
 * store's listener on the very transition it waits for, never by polling,
 * and by its own timer when its time is up.
 */
#ifndef BERTH_API_WAIT_H
#define BERTH_API_WAIT_H

#include <jansson.h>

#include "api/conn.h"
#include "store/store.h"

/* The handlers of jobs/wait and events/poll. */
void api_m_jobs_wait(struct api_req *r, json_t *params);
void api_m_events_poll(struct api_req *r, json_t *params);

/* api_wait_on_event wakes the waits that ev (borrowed) satisfies. */
void api_wait_on_event(struct api *a, const struct store_event *ev);

/* api_wait_end_conn ends c's waits now, each answered as if its time were
 * up (c's client closed its side: conn.h). */
void api_wait_end_conn(struct api_conn *c);

/* api_wait_cancel_conn ends c's waits without an answer (c is closing). */
void api_wait_cancel_conn(struct api_conn *c);

#endif

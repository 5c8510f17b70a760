/*
 * sub.h: event subscriptions (events/subscribe, events/unsubscribe). A
 * subscription first replays the log from its since, then goes live: the
 * switch reads the log up to what the store's listener will deliver next,
 * so no event is missed or sent twice (each subscription remembers the
 * last seq it sent).
 */
#ifndef BERTH_API_SUB_H
#define BERTH_API_SUB_H

#include <jansson.h>

#include "api/conn.h"
#include "store/store.h"

void api_m_events_subscribe(struct api_req *r, json_t *params);
void api_m_events_unsubscribe(struct api_req *r, json_t *params);

/* api_sub_on_event sends ev (borrowed) to the live subscriptions that
 * want it. */
void api_sub_on_event(struct api *a, const struct store_event *ev);

/* api_sub_on_progress sends a live events/progress notification to the
 * subscriptions that asked for progress of that job. */
void api_sub_on_progress(struct api *a, const char *job_id,
			 const json_t *progress);

/* api_sub_resume goes on with the replays of c that stopped because its
 * replies were not being read fast enough. */
void api_sub_resume(struct api_conn *c);

/* api_sub_cancel_conn frees c's subscriptions (c is closing). */
void api_sub_cancel_conn(struct api_conn *c);

#endif

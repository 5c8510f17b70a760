/*
 * workers.h: the worker protocol's methods (docs/WORKERS.md) and the
 * requests berthd sends a worker process: the api's half of worker
 * processes, over worker/remote.c's registry and executor.
 */
#ifndef BERTH_API_WORKERS_H
#define BERTH_API_WORKERS_H

#include <jansson.h>

#include "api/conn.h"

/* The handlers of worker/register, worker/progress, worker/log,
 * worker/checkpoint, worker/drain and tools/forget. */
void api_m_worker_register(struct api_req *r, json_t *params);
void api_m_worker_progress(struct api_req *r, json_t *params);
void api_m_worker_log(struct api_req *r, json_t *params);
void api_m_worker_checkpoint(struct api_req *r, json_t *params);
void api_m_worker_drain(struct api_req *r, json_t *params);
void api_m_tools_forget(struct api_req *r, json_t *params);

/* api_workers_closed tells the worker that c, a worker process's
 * connection, is closing: its runs end by their tools' onInterrupt. */
void api_workers_closed(struct api_conn *c);

#endif

/*
 * methods.h: the method table. Every method of PROTOCOL.md (and, later,
 * MCP's, from api/mcp.c) is one row; conn.c looks the method up, checks
 * auth and params from the row, and only then calls the handler.
 */
#ifndef BERTH_API_METHODS_H
#define BERTH_API_METHODS_H

#include <jansson.h>

#include "api/conn.h"
#include "api/params.h"
#include "worker/worker.h"

/* A handler answers r exactly once, now or from a callback, with
 * api_reply or api_reply_error. params (borrowed, also r->params) has
 * passed the row's params check. */
typedef void (*api_handler_fn)(struct api_req *r, json_t *params);

enum {
	/* The method changes a job or a tool: its reply must leave only
	 * after the change is durable (see reply_after_commit in
	 * methods.c). */
	API_M_MUTATES = 1u << 0,
	/* The method may run before a TCP client has authenticated. */
	API_M_NOAUTH = 1u << 1,
};

/*
 * struct api_method is one row of the table:
 *   name     the JSON-RPC method name
 *   handler  answers the request (above)
 *   flags    API_M_*
 *   role     the role (common/role.h, BERTH_ROLE_*) a caller must hold;
 *            checked by conn.c's dispatch before params are looked at.
 *            0 is admin only, so that a row that forgets it gives away
 *            nothing; an API_M_NOAUTH method needs none
 *   params   the members params may have, checked before handler runs;
 *            NULL for a method that takes none
 */
struct api_method {
	const char *name;
	api_handler_fn handler;
	unsigned flags;
	unsigned role;
	const struct api_param *params;
};

/* api_method_find returns the row named name, or NULL. */
const struct api_method *api_method_find(const char *name);

/* api_reply_worker_error answers r with the JSON-RPC error of a failed
 * worker result (res->err is not WORKER_OK; res borrowed). */
void api_reply_worker_error(struct api_req *r, const struct worker_result *res);

/* api_reply_after_commit is the callback to hand every worker operation
 * (arg: the request): it answers with the changed Job, {} when the
 * operation changes no job, or the error. */
void api_reply_after_commit(void *arg, const struct worker_result *res);

/* api_reply_store_error answers r with the error of a negative store code
 * from a read: -ENOENT is -32011 with {id} (id borrowed), anything else
 * -32014 with {sqlite}. */
void api_reply_store_error(struct api_req *r, int rc, const char *id);

/* api_job_exists returns 0 when a job of that id is stored, else the
 * store's code (STORE_ENOTFOUND when there is none), for
 * api_reply_store_error. */
int api_job_exists(struct api *a, const char *id);

/* api_job_reply answers r with the Job of the job with that id as it is
 * now, in the raw view. */
void api_job_reply(struct api_req *r, const char *id);

#endif

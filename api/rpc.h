/*
 * rpc.h: JSON-RPC 2.0 messages: the error codes of PROTOCOL.md, building
 * replies, and telling requests, notifications and responses apart.
 */
#ifndef BERTH_API_RPC_H
#define BERTH_API_RPC_H

#include <jansson.h>

enum api_rpc_code {
	API_PARSE_ERROR = -32700,
	API_INVALID_REQUEST = -32600,
	API_METHOD_NOT_FOUND = -32601,
	API_INVALID_PARAMS = -32602,
	API_INTERNAL_ERROR = -32603,
	API_UNAUTHORIZED = -32010,
	API_NOT_FOUND = -32011,
	API_CONFLICT = -32012,
	API_OVERLOADED = -32013,
	API_STORAGE = -32014,
};

enum api_msg_kind {
	API_MSG_REQUEST = 0,  /* method and id: answer it */
	API_MSG_NOTIFICATION, /* method, no id: run it, answer nothing */
	API_MSG_RESPONSE,     /* result or error and an id, no method: the
				 client's answer to a request of ours */
	API_MSG_INVALID,      /* answer -32600 */
	API_MSG_BAD_PARAMS,   /* a request whose params is not an object:
				 answer -32602 */
};

/* api_rpc_classify returns the kind of msg (enum api_msg_kind), and sets
 * *why to a static sentence for the two error kinds. */
int api_rpc_classify(const json_t *msg, const char **why);

/* api_rpc_id returns msg's id when it is one JSON-RPC allows (a string, a
 * number or null), else NULL; borrowed. */
json_t *api_rpc_id(const json_t *msg);

/* api_rpc_result returns a new reply {"jsonrpc","id","result"}; id is
 * borrowed (NULL is written as null), result stolen. NULL when out of
 * memory. */
json_t *api_rpc_result(json_t *id, json_t *result);

/* api_rpc_error returns a new reply {"jsonrpc","id","error":{"code",
 * "message","data"?}}; id borrowed (NULL: null), data stolen (may be
 * NULL). NULL when out of memory. */
json_t *api_rpc_error(json_t *id, int code, const char *message,
		      json_t *data);

/* api_rpc_limit returns a new {"limit": n}, the data of a limit error. */
json_t *api_rpc_limit(json_int_t n);

/* A page of jobs/list or events/poll, and a step of a subscription's
 * replay, ends after the item that takes it past this many bytes (it
 * holds one item at least): a reply of a hundred inputs of 10 MiB would
 * otherwise be one line of a gigabyte, built whole and queued at once. */
#define API_PAGE_BYTES (8u * 1024 * 1024)

/* api_json_size returns about how many bytes v takes as JSON text (each
 * string counted as its bytes and quotes, escapes aside), stopping once
 * the count passes stop: what a page's budget needs, at a fraction of a
 * serialization's cost. */
size_t api_json_size(const json_t *v, size_t stop);

#endif

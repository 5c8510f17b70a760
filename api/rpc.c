/*
 * rpc.c: JSON-RPC 2.0 message shapes (rpc.h).
 */
#include "api/rpc.h"

#include <string.h>

json_t *api_rpc_id(const json_t *msg)
{
	json_t *id = json_object_get(msg, "id");

	if (id && (json_is_string(id) || json_is_number(id) || json_is_null(id)))
		return id;
	return NULL;
}

int api_rpc_classify(const json_t *msg, const char **why)
{
	json_t *method, *version, *id, *params;

	*why = NULL;
	if (!json_is_object(msg)) {
		*why = "a request must be a JSON object";
		return API_MSG_INVALID;
	}
	method = json_object_get(msg, "method");
	id = json_object_get(msg, "id");
	version = json_object_get(msg, "jsonrpc");
	if (!method) {
		if (id && api_rpc_id(msg) &&
		    (json_object_get(msg, "result") ||
		     json_object_get(msg, "error")))
			return API_MSG_RESPONSE;
		*why = "a request needs a \"method\"";
		return API_MSG_INVALID;
	}
	if (!json_is_string(version) ||
	    strcmp(json_string_value(version), "2.0") != 0) {
		*why = "\"jsonrpc\" must be \"2.0\"";
		return API_MSG_INVALID;
	}
	if (!json_is_string(method)) {
		*why = "\"method\" must be a string";
		return API_MSG_INVALID;
	}
	if (id && !api_rpc_id(msg)) {
		*why = "\"id\" must be a string, a number or null";
		return API_MSG_INVALID;
	}
	params = json_object_get(msg, "params");
	if (params && !json_is_object(params)) {
		*why = "\"params\" must be an object";
		return API_MSG_BAD_PARAMS;
	}
	return id ? API_MSG_REQUEST : API_MSG_NOTIFICATION;
}

json_t *api_rpc_result(json_t *id, json_t *result)
{
	if (!result)
		return NULL;
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id",
			 id ? id : json_null(), "result", result);
}

json_t *api_rpc_error(json_t *id, int code, const char *message,
		      json_t *data)
{
	json_t *err = json_pack("{s:i, s:s}", "code", code, "message",
				message ? message : "error");

	if (!err) {
		json_decref(data);
		return NULL;
	}
	if (data)
		json_object_set_new(err, "data", data);
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id",
			 id ? id : json_null(), "error", err);
}

json_t *api_rpc_limit(json_int_t n)
{
	return json_pack("{s:I}", "limit", n);
}

size_t api_json_size(const json_t *v, size_t stop)
{
	size_t n = 0, i;
	const char *key;
	json_t *item;

	switch (json_typeof(v)) {
	case JSON_OBJECT:
		n = 2;
		json_object_foreach((json_t *)v, key, item) {
			if (n > stop)
				break;
			n += strlen(key) + 4 + api_json_size(item, stop - n);
		}
		return n;
	case JSON_ARRAY:
		n = 2;
		json_array_foreach(v, i, item) {
			if (n > stop)
				break;
			n += 1 + api_json_size(item, stop - n);
		}
		return n;
	case JSON_STRING:
		return json_string_length(v) + 2;
	case JSON_INTEGER:
	case JSON_REAL:
		return 24;
	default:
		return 5;
	}
}

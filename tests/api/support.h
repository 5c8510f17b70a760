/*
 * support.h: helpers shared by the api's integration tests, on top of
 * tests/harness.
 */
#ifndef BERTH_TESTS_API_SUPPORT_H
#define BERTH_TESTS_API_SUPPORT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>

#include "tests/harness/harness.h"

/* support_start starts berthd with the api test tools ($BERTH_API_TOOLS)
 * and extra args (NULL-ended, may be NULL); fails the test on error. */
void support_start(struct harness *h, const char *const *extra);

/* support_connect connects to h, failing the test on error. */
struct berth_client *support_connect(struct harness *h);

/* call_ok calls method with params (stolen) and returns the result. */
json_t *call_ok(struct berth_client *c, const char *method, json_t *params);

/* call_err calls method with params (stolen), asserts an error with that
 * code, and returns the error object (new reference). */
json_t *call_err(struct berth_client *c, const char *method, json_t *params,
		 int code);

/* exchange sends one raw line and returns the parsed reply line. */
json_t *exchange(struct berth_client *c, const char *line);
/* assert_pings checks that c still answers: a ping with id id. */
void assert_pings(struct berth_client *c, int id);

/* submit submits tool with input (JSON text) and returns the Job. */
json_t *submit(struct berth_client *c, const char *tool, const char *input);

/* wait_for waits (jobs/wait) until the job is in status. */
json_t *wait_for(struct berth_client *c, const char *id, const char *status);

/* jstr returns the string member key of o, or "". */
const char *jstr(const json_t *o, const char *key);

/* error_code returns the code of an error object or reply. */
int error_code(const json_t *err);

/* support_now_ms returns a monotonic clock in milliseconds. */
int64_t support_now_ms(void);

/* raise_nofile lifts the soft limit on open files to the hard one and
 * returns it. */
long support_raise_nofile(void);

#endif

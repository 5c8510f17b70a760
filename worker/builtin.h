/*
 * builtin.h: the tools every berthd has, for tests and benchmarks.
 *
 *   noop   returns its input as its output
 *   sleep  {"ms"}: sleeps, reporting progress, and stops early when its
 *          abort flag turns true (berthd waits on a timer instead of
 *          calling execute: worker__builtin_is_sleep)
 *   fail   {"message", "retryable"}: fails with that message
 */
#ifndef BERTH_WORKER_BUILTIN_H
#define BERTH_WORKER_BUILTIN_H

#include <stdbool.h>
#include <stddef.h>

#include "berth/berth.h"

/* worker_builtin_tools returns the built-in tools (static; never freed)
 * and sets *n to their number. */
const struct berth_tool *const *worker_builtin_tools(size_t *n);

/* worker__builtin_is_sleep tells whether t is the built-in sleep, which
 * the worker runs on a timer of its loop rather than on a thread
 * (worker/exec.c): it only waits. */
bool worker__builtin_is_sleep(const struct berth_tool *t);

#endif

/*
 * builtin.h: the tools every berthd has, for tests and benchmarks.
 *
 *   noop   returns its input as its output
 *   sleep  {"ms"}: sleeps, reporting progress, and stops early when its
 *          abort flag turns true
 *   fail   {"message", "retryable"}: fails with that message
 */
#ifndef BERTH_WORKER_BUILTIN_H
#define BERTH_WORKER_BUILTIN_H

#include <stddef.h>

#include "berth/berth.h"

/* worker_builtin_tools returns the built-in tools (static; never freed)
 * and sets *n to their number. */
const struct berth_tool *const *worker_builtin_tools(size_t *n);

#endif

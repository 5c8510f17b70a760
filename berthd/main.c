/*
 * main.c: berthd is berth_main with the built-in tools (noop, sleep,
 * fail). A daemon with tools of its own in C is this same file with its
 * own table (include/berth/berth.h shows one).
 */
#include <stddef.h>

#include "berth/berth.h"
#include "worker/builtin.h"

int main(int argc, char **argv)
{
	size_t n;
	const struct berth_tool *const *tools = worker_builtin_tools(&n);

	return berth_main(argc, argv, tools, n);
}

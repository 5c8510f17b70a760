/*
 * berthd_bench.c: berthd-bench, berthd with the built-in tools and two
 * more for the benchmarks, written in C the way include/berth/berth.h
 * shows. The suspend and approve scenarios need tools that suspend and
 * that ask for approval; as external commands (bench/tools/) every run
 * costs a fork, an exec and a shell, which would be most of what those
 * scenarios measured. In C they cost what noop costs, so the figures are
 * berth's own.
 */
#include <stdlib.h>
#include <string.h>

#include "berth/berth.h"
#include "worker/builtin.h"

/* bench_suspend suspends on its first run and, resumed, completes with
 * the resume data as its output. */
static struct berth_outcome bench_suspend(const json_t *input,
					  struct berth_ctx *ctx, void *data)
{
	const json_t *resume = berth_ctx_resume_data(ctx);

	if (resume)
		return berth_output(json_pack("{s:O}", "resumed", resume));
	return berth_suspend(json_pack("{s:s}", "waitingFor", "resume"));
}

/* bench_approve runs only once approved, and returns its input. */
static struct berth_outcome bench_approve(const json_t *input,
					  struct berth_ctx *ctx, void *data)
{
	return berth_output(json_deep_copy(input));
}

static const struct berth_tool suspend_tool = {
	.id = "bench_suspend",
	.description = "Benchmark: suspends on its first run, completes "
		       "with the resume data when resumed",
	.suspend_schema = "{\"type\":\"object\"}",
	.resume_schema = "{\"type\":\"object\"}",
	.execute = bench_suspend,
};

static const struct berth_tool approve_tool = {
	.id = "bench_approve",
	.description = "Benchmark: needs approval, then returns its input",
	.require_approval = true,
	.execute = bench_approve,
};

int main(int argc, char **argv)
{
	size_t nbuiltin, n = 0;
	const struct berth_tool *const *builtin =
		worker_builtin_tools(&nbuiltin);
	const struct berth_tool **tools = calloc(nbuiltin + 2, sizeof *tools);
	int rc;

	if (!tools)
		return 1;
	for (size_t i = 0; i < nbuiltin; i++)
		tools[n++] = builtin[i];
	tools[n++] = &suspend_tool;
	tools[n++] = &approve_tool;
	rc = berth_main(argc, argv, tools, n);
	free(tools);
	return rc;
}

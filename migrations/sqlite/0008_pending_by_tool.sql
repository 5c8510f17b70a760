-- 0008_pending_by_tool: a claim reads the pending jobs tool by tool.
--
-- jobs_runnable held the pending jobs in the scheduler's order (priority,
-- run time, id), and a claim walked it from the start, passing over the
-- jobs of the tools it could take none of: a tool at its concurrency, the
-- C tools when every thread is busy, a worker process's tool while no
-- worker serves it. Every claim then read the whole backlog of such a
-- tool: with 196,000 jobs of one tool waiting for its two threads, a claim
-- read them all and berthd started 126 jobs a second at 87 % of a core
-- (docs/BENCHMARKS.md, "A claim's cost follows what it takes").
--
-- jobs_pending_tool holds the same jobs by tool first, so that a claim
-- reads each tool's first few (store/sqlite.c, do_claim), a priority at a
-- time, and seeks from one tool to the next and past the jobs not due. It is built anew: one read of the
-- pending jobs.
DROP INDEX jobs_runnable;
CREATE INDEX jobs_pending_tool ON jobs (tool, priority DESC, run_at, id)
	WHERE status = 0;

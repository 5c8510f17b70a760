-- 0005_lean_job_indexes: the indexes every job's row paid for and few
-- reads used, as SQLite's migrations 0005 and 0006 did.
--
-- A no-op job is inserted once, in its final state, with an entry in the
-- primary key, jobs_status, jobs_tool and jobs_finished: four of the ten
-- b-tree inserts its commit made (docs/POSTGRES.md, "What a job costs").
--
-- - jobs_finished served only the prune, which runs once an hour. A job's
--   id is a UUIDv7 made when it is created, so ids sort by creation time
--   and a job that finished before the cutoff was created before it: the
--   prune now walks the primary key up to the smallest id of the cutoff's
--   millisecond (store/pg.c, S_PRUNE).
-- - jobs_tool served listings by tool only: they walk the ids newest
--   first and stop once the page is full, as on SQLite.
-- - jobs_status keeps live, failed, cancelled and expired jobs, not
--   completed ones, most of the table: a listing of completed jobs walks
--   the ids. (The count by status reads the table, as it did.)
--
-- Dropping an index is immediate; the new jobs_status reads the table once.
DROP INDEX jobs_finished;
DROP INDEX jobs_tool;
DROP INDEX jobs_status;
CREATE INDEX jobs_status ON jobs (status, id) WHERE status <> 4;

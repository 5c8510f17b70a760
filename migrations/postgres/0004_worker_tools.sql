-- 0004_worker_tools: tools served by worker processes, as in
-- migrations/sqlite/0003_worker_tools.sql. Every node reads the stored
-- definitions at start; a node claims a worker tool's jobs only for the
-- worker processes connected to it.
CREATE TABLE worker_tools (
	name       TEXT PRIMARY KEY NOT NULL,
	definition TEXT NOT NULL,
	updated_at BIGINT NOT NULL
);

ALTER TABLE jobs ADD COLUMN views TEXT;

-- 0004_worker_tools: tools served by worker processes (docs/WORKERS.md).
--
-- worker_tools keeps each definition a worker registered, so that after a
-- restart its tool is listed, its submissions are checked and accepted,
-- and its approvals and resumes go on while no worker is connected. name
-- is the tool's id; definition is the JSON the worker sent (compact text);
-- updated_at is when it was last stored.
CREATE TABLE worker_tools (
	name       TEXT PRIMARY KEY NOT NULL,
	definition TEXT NOT NULL,
	updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- The views a worker's functions computed for a job's payloads (its
-- transform.display and transform.transcript, per stage), stored with the
-- transition they belong to, so that a read never calls into a worker; and
-- the stages whose views are still to come. NULL for other tools' jobs.
ALTER TABLE jobs ADD COLUMN views TEXT;

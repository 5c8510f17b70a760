-- 0001_init: everything a Job of PROTOCOL.md needs, the event log, job log
-- lines, durable tool state and the indexes the scheduler and listing use.
--
-- Conventions: times are INTEGER milliseconds since the Unix epoch, NULL when
-- absent; JSON values are compact text; a status or an event type is the
-- stable integer of enum store_status / enum store_event_type (store.h).

CREATE TABLE jobs (
	id              TEXT PRIMARY KEY NOT NULL,
	tool            TEXT NOT NULL,
	status          INTEGER NOT NULL CHECK (status BETWEEN 0 AND 9),
	input           TEXT,
	request_context TEXT,
	metadata        TEXT,
	run_id          TEXT,
	tool_call_id    TEXT,
	idempotency_key TEXT,
	priority        INTEGER NOT NULL DEFAULT 0,
	run_at          INTEGER NOT NULL,
	attempt         INTEGER NOT NULL DEFAULT 1,
	max_retries     INTEGER NOT NULL DEFAULT 0,
	timeout_ms      INTEGER,
	expires_at      INTEGER,
	ttl_ms          INTEGER,
	output          TEXT,
	model_output    TEXT,
	error           TEXT,
	suspend_payload TEXT,
	resume_data     TEXT,
	checkpoint      TEXT,
	approval_required INTEGER NOT NULL DEFAULT 0,
	decision        INTEGER NOT NULL DEFAULT 0 CHECK (decision BETWEEN 0 AND 2),
	reason          TEXT,
	decided_at      INTEGER,
	progress        TEXT,
	retry_of        TEXT,
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL,
	started_at      INTEGER,
	finished_at     INTEGER
);

-- The same idempotency key of one tool names one job.
CREATE UNIQUE INDEX jobs_idempotency ON jobs (tool, idempotency_key)
	WHERE idempotency_key IS NOT NULL;

-- The scheduler's claim: pending jobs by priority, then run time, then id
-- (and the tool, for the per-tool caps, so the scan needs no table row).
CREATE INDEX jobs_runnable ON jobs (priority DESC, run_at, id, tool)
	WHERE status = 0;

-- The scheduler's next wake-up: the earliest run time of a pending job.
CREATE INDEX jobs_pending_run_at ON jobs (run_at) WHERE status = 0;

-- The ttl timer: suspended or awaiting_approval jobs by expiry.
CREATE INDEX jobs_expiry ON jobs (expires_at)
	WHERE status IN (1, 3) AND expires_at IS NOT NULL;

-- Listing (newest first by id) by status and by run id; counting by status;
-- the recovery scan of running jobs. There is no index by tool: each index
-- costs about a seventh of a creation's work in the writer, and a listing
-- by tool walks the ids newest first, stopping once the page is full.
CREATE INDEX jobs_status ON jobs (status, id);
CREATE INDEX jobs_run_id ON jobs (run_id, id) WHERE run_id IS NOT NULL;

-- Pruning: terminal jobs by the time they finished.
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE status >= 4;

-- The event log. AUTOINCREMENT keeps seq from ever being reused, even after
-- the newest events were pruned. job_id names a job but is no foreign key:
-- a foreign key costs a lookup of the job on every append, the hottest
-- write there is, and the store deletes a job's events and log lines
-- itself when it prunes the job.
CREATE TABLE events (
	seq    INTEGER PRIMARY KEY AUTOINCREMENT,
	job_id TEXT NOT NULL,
	tool   TEXT NOT NULL,
	type   INTEGER NOT NULL CHECK (type BETWEEN 0 AND 12),
	status INTEGER NOT NULL CHECK (status BETWEEN 0 AND 9),
	at     INTEGER NOT NULL,
	data   TEXT
);
CREATE INDEX events_job ON events (job_id, seq);

-- A job's structured log lines and captured stderr; n is 1-based per job.
CREATE TABLE job_logs (
	job_id  TEXT NOT NULL,
	n       INTEGER NOT NULL,
	at      INTEGER NOT NULL,
	level   TEXT NOT NULL,
	message TEXT NOT NULL,
	data    TEXT,
	PRIMARY KEY (job_id, n)
) WITHOUT ROWID;

-- Durable tool state: paused tools start no job until unpaused.
CREATE TABLE tools (
	name   TEXT PRIMARY KEY NOT NULL,
	paused INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- 0001_init: the PostgreSQL schema, the same tables as migrations/sqlite/
-- 0001_init.sql plus what several nodes sharing one database need: a lease
-- on each running job and the event sequence counter.
--
-- Conventions as in SQLite: times are BIGINT milliseconds since the Unix
-- epoch, NULL when absent; JSON values are compact text (not jsonb, which
-- would reorder keys and cost a parse on every write); a status or an event
-- type is the stable integer of enum store_status / enum store_event_type.

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
	run_at          BIGINT NOT NULL,
	attempt         INTEGER NOT NULL DEFAULT 1,
	max_retries     INTEGER NOT NULL DEFAULT 0,
	timeout_ms      BIGINT,
	expires_at      BIGINT,
	ttl_ms          BIGINT,
	output          TEXT,
	model_output    TEXT,
	error           TEXT,
	suspend_payload TEXT,
	resume_data     TEXT,
	checkpoint      TEXT,
	approval_required INTEGER NOT NULL DEFAULT 0,
	decision        INTEGER NOT NULL DEFAULT 0 CHECK (decision BETWEEN 0 AND 2),
	reason          TEXT,
	decided_at      BIGINT,
	progress        TEXT,
	retry_of        TEXT,
	created_at      BIGINT NOT NULL,
	updated_at      BIGINT NOT NULL,
	started_at      BIGINT,
	finished_at     BIGINT,
	-- The lease of a running job: the node that claimed it and the time
	-- until which that node vouches for it. The owner renews it while the
	-- job runs; once it has passed, any other node recovers the job.
	-- NULL when the job is not running.
	lease_owner     TEXT,
	lease_until     BIGINT
);

-- The same idempotency key of one tool names one job.
CREATE UNIQUE INDEX jobs_idempotency ON jobs (tool, idempotency_key)
	WHERE idempotency_key IS NOT NULL;

-- The claim: pending jobs by priority, then run time, then id.
CREATE INDEX jobs_runnable ON jobs (priority DESC, run_at, id, tool)
	WHERE status = 0;

-- The scheduler's next wake-up: the earliest run time of a pending job.
CREATE INDEX jobs_pending_run_at ON jobs (run_at) WHERE status = 0;

-- The ttl timer: suspended or awaiting_approval jobs by expiry.
CREATE INDEX jobs_expiry ON jobs (expires_at)
	WHERE status IN (1, 3) AND expires_at IS NOT NULL;

-- Running jobs: counted per tool by the cluster-wide concurrency limits,
-- scanned by owner (restart recovery, lease renewal) and by lease (the
-- reaper).
CREATE INDEX jobs_running ON jobs (tool) WHERE status = 2;
CREATE INDEX jobs_lease ON jobs (lease_owner, lease_until) WHERE status = 2;

-- Listing (newest first by id) by status, by tool, by run id.
CREATE INDEX jobs_status ON jobs (status, id);
CREATE INDEX jobs_tool ON jobs (tool, id);
CREATE INDEX jobs_run_id ON jobs (run_id, id) WHERE run_id IS NOT NULL;

-- Pruning: terminal jobs by the time they finished.
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE status >= 4;

-- The event log. seq is not a sequence or an identity column: it is taken
-- from event_seq in the committing transaction, so that seqs become
-- visible in the order they were given out (docs/POSTGRES.md).
CREATE TABLE events (
	seq    BIGINT PRIMARY KEY NOT NULL,
	job_id TEXT NOT NULL,
	tool   TEXT NOT NULL,
	type   INTEGER NOT NULL CHECK (type BETWEEN 0 AND 12),
	status INTEGER NOT NULL CHECK (status BETWEEN 0 AND 9),
	at     BIGINT NOT NULL,
	data   TEXT
);
CREATE INDEX events_job ON events (job_id, seq);

-- The one row holding the last seq given out. A transaction that appends
-- events raises it by the number of its events just before it commits; the
-- row lock, held to the commit, makes seq ranges commit in seq order.
-- Pruning never lowers it, so seq values are never reused.
CREATE TABLE event_seq (
	one INTEGER PRIMARY KEY CHECK (one = 1),
	n   BIGINT NOT NULL
);
INSERT INTO event_seq (one, n) VALUES (1, 0);

-- A job's structured log lines and captured stderr; n is 1-based per job.
CREATE TABLE job_logs (
	job_id  TEXT NOT NULL,
	n       BIGINT NOT NULL,
	at      BIGINT NOT NULL,
	level   TEXT NOT NULL,
	message TEXT NOT NULL,
	data    TEXT,
	PRIMARY KEY (job_id, n)
);

-- Durable tool state: paused tools start no job until unpaused.
CREATE TABLE tools (
	name   TEXT PRIMARY KEY NOT NULL,
	paused INTEGER NOT NULL DEFAULT 0
);

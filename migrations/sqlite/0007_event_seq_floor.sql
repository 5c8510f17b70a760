-- 0007_event_seq_floor: seqs are kept from reuse by the prune, not by
-- AUTOINCREMENT.
--
-- AUTOINCREMENT made every INSERT into events read and rewrite the events
-- row of sqlite_sequence, and every commit that added events write that
-- table's page to the WAL: without it, callgrind of berthd's writer under
-- the e2e no-op load counts 58,300-59,200 instructions a job instead of
-- 62,400-63,200, and 6.8-7.0 WAL frames a commit instead of 7.8-8.0
-- (docs/BENCHMARKS.md, "After run 13"). Its one purpose was that a seq
-- never comes back once the newest events were pruned.
--
-- Without it SQLite gives a row the largest seq in the table plus one, which
-- is the next seq unless a prune deleted the newest events. So the prune
-- first raises event_seq_floor.n to the largest seq there is
-- (S_PRUNE_FLOOR), and the writer gives the first event it inserts after
-- such a prune (or after opening a database whose newest events were
-- pruned) the seq n + 1 itself, and the rows after it follow from there
-- (store/sqlite.c, flush_events). The last seq ever given out is the
-- larger of n and the largest seq in events.
--
-- The table is copied into one without AUTOINCREMENT, which takes a read
-- and a write of every event, a few seconds for millions of them, once.
CREATE TABLE event_seq_floor (n INTEGER NOT NULL);
INSERT INTO event_seq_floor
	SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0);

CREATE TABLE events_0007 (
	seq    INTEGER PRIMARY KEY,
	job_id TEXT NOT NULL,
	tool   TEXT NOT NULL,
	type   INTEGER NOT NULL CHECK (type BETWEEN 0 AND 12),
	status INTEGER NOT NULL CHECK (status BETWEEN 0 AND 9),
	at     INTEGER NOT NULL,
	data   TEXT,
	actor  TEXT,
	via    TEXT,
	client TEXT
);
INSERT INTO events_0007 (seq, job_id, tool, type, status, at, data, actor,
			 via, client)
	SELECT seq, job_id, tool, type, status, at, data, actor, via, client
	FROM events ORDER BY seq;
DROP TABLE events;
ALTER TABLE events_0007 RENAME TO events;
CREATE INDEX events_job ON events (job_id, seq);

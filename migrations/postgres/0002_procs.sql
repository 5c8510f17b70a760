-- 0002_procs: the process groups of external tools' runs, as in
-- migrations/sqlite/0002_procs.sql. node is the berthd node that started
-- the group: a node restarted under its name kills what it left running on
-- its host, and never touches another node's records (a pid names a
-- process on one machine only).
CREATE TABLE procs (
	node    TEXT NOT NULL,
	pid     BIGINT NOT NULL,
	job_id  TEXT NOT NULL,
	start_min BIGINT NOT NULL,
	start_max BIGINT NOT NULL,
	boot_id TEXT NOT NULL,
	PRIMARY KEY (node, pid)
);

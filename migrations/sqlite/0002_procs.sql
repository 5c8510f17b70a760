-- 0002_procs: the process groups of external tools' runs. The worker
-- records a group when its leader starts and deletes the record once the
-- leader was reaped, so that a berthd restarted after a crash finds the
-- groups its predecessor may have left running, and kills those that are
-- still alive and still the same processes (worker/orphans.c).
--
-- node is '' here: a SQLite database has one daemon. pid is the group's
-- leader, whose pid is the group id; its start time, in clock ticks after
-- boot as /proc/PID/stat (field 22) shows it, lies between start_min and
-- start_max (the clock read around its start), and boot_id is the boot it
-- counts from (/proc/sys/kernel/random/boot_id): a pid given to another
-- process, or a process of an earlier boot, never matches both.
CREATE TABLE procs (
	node    TEXT NOT NULL,
	pid     INTEGER NOT NULL,
	job_id  TEXT NOT NULL,
	start_min INTEGER NOT NULL,
	start_max INTEGER NOT NULL,
	boot_id TEXT NOT NULL,
	PRIMARY KEY (node, pid)
) WITHOUT ROWID;

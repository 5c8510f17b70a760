-- 0006_domains: the range checks of statuses, decisions and event types
-- move from CHECK constraints to domains.
--
-- PostgreSQL parses and plans a table's CHECK constraints anew in every
-- statement that inserts into it or updates it (ExecRelCheck reads each
-- constraint's stored text with stringToNode), and the writer's batch is a
-- few such statements: the jobs' INSERT, the events' and event_seq's
-- UPDATE. perf of the server's backends put that at about 6 % of their CPU
-- (docs/POSTGRES.md, "After run 13"). A domain's checks are planned once
-- per server process and kept (the type cache), and hold the same rules.
--
-- Changing a column's type to a domain with a check rewrites the table
-- (and rebuilds its indexes) while every node waits: once, a few seconds
-- for a million jobs.
CREATE DOMAIN berth_status AS INTEGER CHECK (VALUE BETWEEN 0 AND 9);
CREATE DOMAIN berth_decision AS INTEGER CHECK (VALUE BETWEEN 0 AND 2);
CREATE DOMAIN berth_event_type AS INTEGER CHECK (VALUE BETWEEN 0 AND 12);
CREATE DOMAIN berth_one AS INTEGER CHECK (VALUE = 1);

ALTER TABLE jobs
	DROP CONSTRAINT jobs_status_check,
	DROP CONSTRAINT jobs_decision_check,
	ALTER COLUMN status TYPE berth_status,
	ALTER COLUMN decision TYPE berth_decision;
ALTER TABLE events
	DROP CONSTRAINT events_type_check,
	DROP CONSTRAINT events_status_check,
	ALTER COLUMN type TYPE berth_event_type,
	ALTER COLUMN status TYPE berth_status;
ALTER TABLE event_seq
	DROP CONSTRAINT event_seq_one_check,
	ALTER COLUMN one TYPE berth_one;

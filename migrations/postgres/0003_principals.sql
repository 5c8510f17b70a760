-- 0003_principals: the audit of who did what, as in
-- migrations/sqlite/0003_principals.sql. Nullable columns without a
-- default: PostgreSQL adds them without rewriting the tables, and rows
-- stored before read as decided by "unknown".
ALTER TABLE jobs ADD COLUMN submitted_by TEXT;
ALTER TABLE jobs ADD COLUMN submitted_via TEXT;
ALTER TABLE jobs ADD COLUMN decided_by TEXT;
ALTER TABLE jobs ADD COLUMN decided_via TEXT;
ALTER TABLE jobs ADD COLUMN approvals TEXT;
ALTER TABLE jobs ADD COLUMN quorum INTEGER;

ALTER TABLE events ADD COLUMN actor TEXT;
ALTER TABLE events ADD COLUMN via TEXT;
ALTER TABLE events ADD COLUMN client TEXT;

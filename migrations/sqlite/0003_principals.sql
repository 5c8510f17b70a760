-- 0003_principals: the audit of who did what (docs/API.md, "Principals and
-- roles"). Every event records who caused it (actor: a principal's name,
-- or 'berthd' for berthd's own transitions) and the way it came (via:
-- socket, tcp, http, mcp, worker or berthd), with an MCP client's
-- {name, version} as JSON (client). A job records who submitted it, who
-- decided it, each approval of its quorum as a JSON array of {by, via,
-- at, note?, client?}, and the quorum (NULL: 1).
--
-- Rows stored before this migration keep NULLs, which read as decided (and
-- submitted, and caused) by "unknown". Adding columns without a default
-- rewrites no row, so the migration takes the same moment on a database of
-- a million jobs as on an empty one.
ALTER TABLE jobs ADD COLUMN submitted_by TEXT;
ALTER TABLE jobs ADD COLUMN submitted_via TEXT;
ALTER TABLE jobs ADD COLUMN decided_by TEXT;
ALTER TABLE jobs ADD COLUMN decided_via TEXT;
ALTER TABLE jobs ADD COLUMN approvals TEXT;
ALTER TABLE jobs ADD COLUMN quorum INTEGER;

ALTER TABLE events ADD COLUMN actor TEXT;
ALTER TABLE events ADD COLUMN via TEXT;
ALTER TABLE events ADD COLUMN client TEXT;

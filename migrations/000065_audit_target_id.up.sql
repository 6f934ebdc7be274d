-- DESIGN §1 lists target_type and target_id as separate filters of the audit log: a
-- target id alone (an execution's id, a tool's) is a filter of its own. No index served
-- it: (target_type, target_id, id) needs the type first (PostgreSQL 15 has no skip
-- scan), so a rare id read the whole index or walked the log by id. (target_id, id)
-- serves both, the type then checked on the few entries of that id (ids are UUIDs or
-- names), and it replaces the old index, so an append still updates as many indexes.
-- Partial, as the request id's is: an empty target_id is never a filter, and browse.go
-- adds target_id <> '' so the planner may use it (the browser is its only reader).
CREATE INDEX audit_log_target_id_idx ON audit_log (target_id, id) WHERE target_id <> '';
DROP INDEX audit_log_target_idx;

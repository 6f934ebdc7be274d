DROP TABLE IF EXISTS execution_retries;
DROP INDEX IF EXISTS executions_requester_pending_idx;
ALTER TABLE executions DROP COLUMN decision, DROP COLUMN decided_by, DROP COLUMN client, DROP COLUMN source;

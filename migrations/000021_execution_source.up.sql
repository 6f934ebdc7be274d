-- Issue #19: an execution says where it was asked from (the API, a page, or an MCP
-- client through /mcp, with the client's name and version), and who rejected or
-- cancelled it, so a call held at /mcp can tell its agent "Rejected by alice: …" after
-- the fact (toolwarden__await_execution), not only while it waits.
ALTER TABLE executions
    ADD COLUMN source text NOT NULL DEFAULT '',
    ADD COLUMN client text NOT NULL DEFAULT '',
    ADD COLUMN decided_by text NOT NULL DEFAULT '',
    ADD COLUMN decision text NOT NULL DEFAULT ''
        CHECK (decision IN ('', 'rejected', 'cancelled'));
CREATE INDEX executions_requester_pending_idx ON executions (requested_by, created_at DESC)
    WHERE status = 'awaiting_approval';

-- The single-use requestState of a 2026-07-28 client's retried call (services/gateway):
-- a state is claimed once, by its nonce, whichever replica the retry reaches.
CREATE TABLE execution_retries (
    nonce        text PRIMARY KEY,
    execution_id uuid NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX execution_retries_expires_idx ON execution_retries (expires_at);

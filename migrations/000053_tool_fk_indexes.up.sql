-- Deleting a server deletes its tools, and each tool deleted nulls or deletes the rows
-- that refer to it: without an index on the referring column, each was a scan of the
-- whole table (2,000 tools against 200,000 steps: two minutes holding the server's
-- locks). Every foreign key is indexed on its column (TestForeignKeysIndexed;
-- tool_test_cases is, by its UNIQUE (tool_id, name)).
CREATE INDEX tool_calls_tool_idx ON tool_calls (tool_id) WHERE tool_id IS NOT NULL;
CREATE INDEX usage_daily_tools_tool_idx ON usage_daily_tools (tool_id);
CREATE INDEX execution_retries_execution_idx ON execution_retries (execution_id);
CREATE INDEX executions_approved_by_idx ON executions (approved_by) WHERE approved_by IS NOT NULL;
CREATE INDEX executions_requested_token_idx ON executions (requested_token) WHERE requested_token IS NOT NULL;
CREATE INDEX grants_user_idx ON grants (user_id) WHERE user_id IS NOT NULL;

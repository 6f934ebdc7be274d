DROP INDEX IF EXISTS tool_calls_tool_idx;
DROP INDEX IF EXISTS usage_daily_tools_tool_idx;
DROP INDEX IF EXISTS execution_retries_execution_idx;
DROP INDEX IF EXISTS executions_approved_by_idx;
DROP INDEX IF EXISTS executions_requested_token_idx;
DROP INDEX IF EXISTS grants_user_idx;

DROP INDEX IF EXISTS tool_usage_logs_tool_user_time_idx;

DROP INDEX IF EXISTS tool_usage_logs_tool_ran_idx;

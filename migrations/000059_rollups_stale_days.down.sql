DROP TRIGGER usage_daily_tools_truncated ON usage_daily_tools;
DROP TRIGGER usage_daily_tools_deleted ON usage_daily_tools;
DROP FUNCTION usage_daily_tools_truncated();
DROP FUNCTION usage_daily_tools_deleted();
DROP INDEX usage_daily_done_stale_idx;
ALTER TABLE usage_daily_done DROP COLUMN stale;

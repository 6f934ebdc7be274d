DELETE FROM usage_daily_done;
TRUNCATE usage_daily_tools, usage_daily_actors;
ALTER TABLE usage_daily_tools ALTER COLUMN hist TYPE bigint[] USING '{}'::bigint[];
ALTER TABLE usage_daily_actors ALTER COLUMN hist TYPE bigint[] USING '{}'::bigint[];

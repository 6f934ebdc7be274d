-- Issue #22: a rollup's latency histogram is stored as its non-empty buckets in a bytea
-- (bucket number, then the count as a varint; services/analytics/hist.go) instead of a
-- 160-element bigint[]: a 30-day report reads about 2,000 rollups, and decoding their
-- arrays was the slowest part of it. Rollups are derived data: the hourly job rolls the
-- finished days again.
DELETE FROM usage_daily_done;
TRUNCATE usage_daily_tools, usage_daily_actors;
ALTER TABLE usage_daily_tools ALTER COLUMN hist TYPE bytea USING ''::bytea;
ALTER TABLE usage_daily_actors ALTER COLUMN hist TYPE bytea USING ''::bytea;

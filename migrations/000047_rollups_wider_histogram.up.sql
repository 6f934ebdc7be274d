-- Latency histograms reach about 11 days (256 buckets) instead of 4.4 minutes (160): the
-- finished days are rolled again by the hourly job, so a call that waited hours for a
-- person shows as hours in every period, not only in days rolled from now on.
DELETE FROM usage_daily_done;
TRUNCATE usage_daily_tools, usage_daily_actors;

-- Analytics count the calls that reached their tool (a usage row with a duration): a call
-- the router refused used to count as a call and a failure. Rollups are derived data, so
-- the finished days are rolled again under the new rule by the hourly job.
DELETE FROM usage_daily_done;
TRUNCATE usage_daily_tools, usage_daily_actors;

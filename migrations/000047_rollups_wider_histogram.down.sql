-- The rollups are rolled again by whichever rule the running version has.
DELETE FROM usage_daily_done;
TRUNCATE usage_daily_tools, usage_daily_actors;

DROP TABLE IF EXISTS usage_daily_done;
DROP TABLE IF EXISTS usage_daily_actors;
DROP TABLE IF EXISTS usage_daily_tools;

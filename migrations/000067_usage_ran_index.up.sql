-- The newest call of a tool that ran (usage.Summary's last_used, and analytics' unused
-- tools: no call that ran in 30 days) is read among its calls with a duration: a call
-- the router refused (invalid arguments, denied) never ran and has none. On
-- (tool_id, used_at DESC) PostgreSQL walked every refused call newer than that one
-- first: 300 ms a Usage tab view with 2 M refused calls on one tool. This index holds
-- the calls that ran only, so the newest is its first entry. The queries say
-- "duration_ms IS NOT NULL" as the predicate does, which the planner needs to use it.
-- Not CONCURRENTLY, as 60 and 65: every replica is stopped for an upgrade (deploy.md),
-- and a failed build leaves nothing behind to drop by hand.
CREATE INDEX tool_usage_logs_tool_ran_idx ON tool_usage_logs (tool_id, used_at DESC) WHERE duration_ms IS NOT NULL;

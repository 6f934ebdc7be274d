-- Rolled days whose rollups no longer agree are marked, not searched for. A deleted tool
-- (its server deleted) takes its usage_daily_tools rows along, but the people's rollups,
-- which name no tool, keep counting its calls: the day is stale until rolled again. The
-- hourly rollup job found such days by adding up both rollups of every day ever rolled,
-- every hour (its cost grew with the history); a trigger now marks the days of the rows
-- deleted, and rolling a day writes stale = false after its own delete and insert.
ALTER TABLE usage_daily_done ADD COLUMN stale boolean NOT NULL DEFAULT false;

-- The days already stale at upgrade, found once the old way: a day's calls per tool and
-- per person sum alike until one of its tools is deleted.
UPDATE usage_daily_done d SET stale = true
WHERE (SELECT coalesce(sum(calls), 0) FROM usage_daily_tools t WHERE t.day = d.day)
    <> (SELECT coalesce(sum(calls), 0) FROM usage_daily_actors a WHERE a.day = d.day);

-- The job and reports look up the few stale days among years of rolled ones.
CREATE INDEX usage_daily_done_stale_idx ON usage_daily_done (day) WHERE stale;

-- usage_daily_tools_deleted marks the rolled days of a statement's deleted rows stale.
-- Deleting a server deletes each of its tools' rows in a statement of its own, so its
-- query is planned at each call (EXECUTE): a plan kept from a first call of a handful
-- of rows would be kept for a rollup's thousands, and the reverse.
CREATE FUNCTION usage_daily_tools_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE 'UPDATE usage_daily_done d SET stale = true WHERE NOT d.stale AND d.day IN (SELECT day FROM gone)';
    RETURN NULL;
END
$$;

-- usage_daily_tools_truncated marks every rolled day stale: a TRUNCATE (mcp_tools ...
-- CASCADE, an owner's) takes every tool's rows and none of the people's.
CREATE FUNCTION usage_daily_tools_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE usage_daily_done SET stale = true WHERE NOT stale;
    RETURN NULL;
END
$$;

-- Both write the table of this schema, and no temporary table a session made with the
-- same name (pg_temp is searched first unless it is named, and last here).
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION usage_daily_tools_deleted() SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION usage_daily_tools_truncated() SET search_path = %I, pg_temp', current_schema());
END
$$;

CREATE TRIGGER usage_daily_tools_deleted AFTER DELETE ON usage_daily_tools
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION usage_daily_tools_deleted();
CREATE TRIGGER usage_daily_tools_truncated AFTER TRUNCATE ON usage_daily_tools
    FOR EACH STATEMENT EXECUTE FUNCTION usage_daily_tools_truncated();

-- Issue #22: daily rollups of tool_usage_logs for /analytics (services/analytics). A
-- finished day's calls are added up once, per tool and per actor, with a latency
-- histogram (160 buckets of an eighth of an octave, services/analytics/hist.go); a report reads
-- the rollups of the whole days in its period and the calls themselves only for the
-- rest (today, the period's first partial day). usage_daily_done lists the days rolled.
CREATE TABLE usage_daily_tools (
    day     date NOT NULL,
    tool_id uuid NOT NULL REFERENCES mcp_tools (id) ON DELETE CASCADE,
    calls   bigint NOT NULL,
    errors  bigint NOT NULL,
    hist    bigint[] NOT NULL,
    PRIMARY KEY (day, tool_id)
);
CREATE TABLE usage_daily_actors (
    day    date NOT NULL,
    actor  text NOT NULL,
    calls  bigint NOT NULL,
    errors bigint NOT NULL,
    hist   bigint[] NOT NULL,
    PRIMARY KEY (day, actor)
);
CREATE TABLE usage_daily_done (
    day       date PRIMARY KEY,
    rolled_at timestamptz NOT NULL
);

-- Tool management (seed 004 §3, §5, §6; issue #4): categories, tags, validations,
-- versioned configuration, usage logs, full-text search and the auto-enable policy.

CREATE TABLE tool_categories (
    id          uuid PRIMARY KEY,
    name        text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,47}$'),
    description text NOT NULL DEFAULT '',
    auto_enable boolean NOT NULL DEFAULT false, -- validated tools in it are enabled without a person
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE mcp_servers ADD COLUMN auto_enable boolean NOT NULL DEFAULT false;

ALTER TABLE mcp_tools
    ADD COLUMN category_id uuid REFERENCES tool_categories (id) ON DELETE SET NULL,
    ADD COLUMN risk_override text CHECK (risk_override IN ('low', 'medium', 'high')),
    ADD COLUMN timeout_ms integer CHECK (timeout_ms BETWEEN 100 AND 600000),
    ADD COLUMN configuration_version integer NOT NULL DEFAULT 0,
    -- The worst finding of the latest validation of the current definition (NULL: clean or
    -- not validated yet); critical and error keep the tool from being enabled.
    ADD COLUMN validation_worst text CHECK (validation_worst IN ('critical', 'error', 'warning', 'info')),
    -- Why an administrator enabled the tool despite blocking findings (NULL: no override).
    ADD COLUMN enable_override text,
    ADD COLUMN search tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('simple', replace(replace(name, '_', ' '), '-', ' ')), 'A') ||
        setweight(to_tsvector('english', title), 'B') ||
        setweight(to_tsvector('english', left(description, 4000)), 'C')) STORED;

CREATE INDEX mcp_tools_search_idx ON mcp_tools USING gin (search);
CREATE INDEX mcp_tools_server_idx ON mcp_tools (server_id, name);
CREATE INDEX mcp_tools_category_idx ON mcp_tools (category_id) WHERE category_id IS NOT NULL;
-- Keyset pagination of the tool list in its default order.
CREATE INDEX mcp_tools_name_id_idx ON mcp_tools (name, id);

CREATE TABLE tool_tags (
    tool_id    uuid NOT NULL REFERENCES mcp_tools (id) ON DELETE CASCADE,
    tag        text NOT NULL CHECK (tag ~ '^[a-z0-9][a-z0-9-]{0,31}$'),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tool_id, tag)
);

CREATE INDEX tool_tags_tag_idx ON tool_tags (tag, tool_id);

-- Every validation of a tool definition: the findings as services/schema reports them.
CREATE TABLE tool_validations (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tool_id         uuid NOT NULL REFERENCES mcp_tools (id) ON DELETE CASCADE,
    definition_hash text NOT NULL,
    validation_type text NOT NULL DEFAULT 'schema' CHECK (validation_type IN ('schema', 'test_run')),
    success         boolean NOT NULL, -- no critical or error finding
    worst           text CHECK (worst IN ('critical', 'error', 'warning', 'info')),
    findings        jsonb NOT NULL DEFAULT '[]',
    validated_by    text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX tool_validations_tool_idx ON tool_validations (tool_id, id DESC);

-- Every version of a tool's configuration; mcp_tools.configuration is the current one.
-- Secret values inside are ciphertexts (services/secrets).
CREATE TABLE tool_configurations (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tool_id       uuid NOT NULL REFERENCES mcp_tools (id) ON DELETE CASCADE,
    version       integer NOT NULL,
    configuration jsonb NOT NULL,
    actor         text NOT NULL,
    reason        text NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tool_id, version)
);

-- One row per tool call, written by the router (issue #5). Built for millions of rows:
-- the per-tool index serves the Usage and Logs tabs (newest first), BRIN on the
-- append-only time column serves time-range scans and pruning at almost no cost.
CREATE TABLE tool_usage_logs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tool_id      uuid NOT NULL REFERENCES mcp_tools (id) ON DELETE CASCADE,
    user_id      uuid,
    actor        text NOT NULL DEFAULT '',
    source       text NOT NULL DEFAULT '',   -- test_panel, api, execution, gateway
    used_at      timestamptz NOT NULL DEFAULT now(),
    duration_ms  real,
    success      boolean NOT NULL,
    error_code   text,
    request      jsonb NOT NULL DEFAULT '{}', -- redacted arguments
    response     jsonb,                       -- redacted, truncated result
    error        jsonb,
    metadata     jsonb NOT NULL DEFAULT '{}'
);

CREATE INDEX tool_usage_logs_tool_time_idx ON tool_usage_logs (tool_id, used_at DESC);
CREATE INDEX tool_usage_logs_time_brin ON tool_usage_logs USING brin (used_at);

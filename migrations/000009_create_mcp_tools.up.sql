-- Tools discovered on MCP servers (docs/architecture.md, State machines). A tool the server stops listing
-- is marked unavailable, never deleted, so its history, usage and approvals keep pointing
-- at it. definition holds the tool exactly as the server sent it; definition_hash pins it.
CREATE TABLE mcp_tools (
    id              uuid PRIMARY KEY,
    server_id       uuid NOT NULL REFERENCES mcp_servers (id) ON DELETE CASCADE,
    name            text NOT NULL,
    title           text NOT NULL DEFAULT '',
    description     text NOT NULL DEFAULT '',
    input_schema    jsonb NOT NULL DEFAULT '{}',
    output_schema   jsonb,
    annotations     jsonb,
    definition      jsonb NOT NULL,
    definition_hash text NOT NULL,
    version_major   integer NOT NULL DEFAULT 1,
    version_minor   integer NOT NULL DEFAULT 0,
    status          text NOT NULL DEFAULT 'discovered' CHECK (status IN (
                        'discovered', 'validating', 'validated', 'invalid', 'configured', 'testing',
                        'verified', 'failed', 'enabled', 'disabled', 'updating')),
    available       boolean NOT NULL DEFAULT true,
    configuration   jsonb NOT NULL DEFAULT '{}',
    metadata        jsonb NOT NULL DEFAULT '{}',
    first_seen      timestamptz NOT NULL DEFAULT now(),
    last_seen       timestamptz NOT NULL DEFAULT now(),
    last_used       timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (server_id, name)
);

CREATE INDEX mcp_tools_status_idx ON mcp_tools (status);

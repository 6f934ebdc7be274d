-- Every definition a tool has had (definition pinning, docs/architecture.md): the old version stays when the
-- server changes a tool, so diffs can be shown and pinned approvals can be checked.
CREATE TABLE tool_schemas (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tool_id         uuid NOT NULL REFERENCES mcp_tools (id) ON DELETE CASCADE,
    version_major   integer NOT NULL,
    version_minor   integer NOT NULL,
    definition_hash text NOT NULL,
    definition      jsonb NOT NULL,
    breaking        boolean NOT NULL DEFAULT false,
    changes         jsonb NOT NULL DEFAULT '[]',  -- what changed from the previous version
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tool_id, version_major, version_minor)
);

CREATE INDEX tool_schemas_hash_idx ON tool_schemas (tool_id, definition_hash);

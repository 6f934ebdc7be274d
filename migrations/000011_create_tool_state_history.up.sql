-- Every persistent tool state transition (docs/architecture.md, State machines), written in the transaction that
-- changes mcp_tools.status. from_status is NULL for a tool's first state.
CREATE TABLE tool_state_history (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tool_id     uuid NOT NULL REFERENCES mcp_tools (id) ON DELETE CASCADE,
    from_status text,
    to_status   text NOT NULL,
    reason      text NOT NULL DEFAULT '',
    actor       text NOT NULL DEFAULT '',
    metadata    jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX tool_state_history_tool_idx ON tool_state_history (tool_id, id DESC);

-- The router (issue #5): who may call which tool beyond what their role allows, a
-- per-tool call rate, and the test panel's saved test cases.

-- A row overrides the role for one user and one tool (seed 004 §3): can_use = false
-- takes a tool away from someone whose role may use tools; true lends one tool to
-- someone whose role may not.
CREATE TABLE user_tool_permissions (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id       uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    tool_id       uuid NOT NULL REFERENCES mcp_tools (id) ON DELETE CASCADE,
    can_use       boolean NOT NULL DEFAULT true,
    can_configure boolean NOT NULL DEFAULT false,
    can_share     boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, tool_id)
);
CREATE INDEX user_tool_permissions_tool_idx ON user_tool_permissions (tool_id);

-- Calls per minute for one tool across all callers; NULL means only the per-user limit.
ALTER TABLE mcp_tools ADD COLUMN rate_limit integer CHECK (rate_limit BETWEEN 1 AND 1000000);

-- Saved test cases of the test panel: arguments and what a passing run looks like.
CREATE TABLE tool_test_cases (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tool_id         uuid NOT NULL REFERENCES mcp_tools (id) ON DELETE CASCADE,
    name            text NOT NULL CHECK (length(name) BETWEEN 1 AND 120),
    arguments       jsonb NOT NULL DEFAULT '{}',
    expect          text NOT NULL DEFAULT 'success' CHECK (expect IN ('success', 'error')),
    expect_text     text NOT NULL DEFAULT '',   -- the output must contain this (empty: anything)
    created_by      text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    last_run_at     timestamptz,
    last_passed     boolean,
    last_duration_ms real,
    last_message    text NOT NULL DEFAULT '',
    UNIQUE (tool_id, name)
);

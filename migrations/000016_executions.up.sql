-- Executions (issue #6; docs/architecture.md, State machines): a plan of tool calls that runs only
-- after the right person approved exactly that plan, its steps, rollback and the
-- compensations administrators configure.

CREATE TABLE executions (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- Who asked: a user (through a page or their token).
    requested_by        uuid REFERENCES users (id) ON DELETE SET NULL,
    requester_name      text NOT NULL,
    requester_kind      text NOT NULL CHECK (requester_kind IN ('user', 'token', 'system')),
    requester_role      text NOT NULL DEFAULT '',   -- the role the steps run with
    prompt              text NOT NULL DEFAULT '',
    planner             text NOT NULL DEFAULT '',   -- "rules", "llm:<model>", "" for a given plan
    -- The plan as prepared (steps and rollback with tools, pins, arguments, risk) and
    -- the SHA-256 of its canonical form: an approval is bound to this hash.
    plan                jsonb NOT NULL,
    plan_hash           bytea NOT NULL,
    status              text NOT NULL CHECK (status IN ('planning', 'awaiting_approval', 'executing', 'success',
                            'failed', 'rolling_back', 'rolled_back', 'rollback_failed', 'cancelled', 'expired')),
    risk                text NOT NULL CHECK (risk IN ('low', 'medium', 'high')),
    risk_why            text NOT NULL DEFAULT '',
    confirmation_phrase text NOT NULL DEFAULT '',   -- HIGH only
    approval            text NOT NULL DEFAULT '' CHECK (approval IN ('', 'policy', 'confirm', 'phrase')),
    approved_by         uuid REFERENCES users (id) ON DELETE SET NULL,
    approver_name       text NOT NULL DEFAULT '',
    approved_at         timestamptz,
    approved_hash       bytea,                      -- the plan hash the approval was given for
    expires_at          timestamptz,                -- an approval not given by then expires
    reason              text NOT NULL DEFAULT '',   -- why it was rejected or cancelled
    error               text NOT NULL DEFAULT '',   -- why it (or its rollback) failed
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    started_at          timestamptz,
    finished_at         timestamptz
);
CREATE INDEX executions_created_idx ON executions (created_at DESC, id DESC);
CREATE INDEX executions_status_idx ON executions (status, created_at DESC);
CREATE INDEX executions_requested_by_idx ON executions (requested_by, created_at DESC);
CREATE INDEX executions_expiry_idx ON executions (expires_at) WHERE status = 'awaiting_approval';

-- One row per step, run or rollback, each with its own state (docs/architecture.md, State machines).
CREATE TABLE tool_calls (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    execution_id    uuid NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    phase           text NOT NULL CHECK (phase IN ('run', 'rollback')),
    position        integer NOT NULL CHECK (position >= 0),
    tool_id         uuid REFERENCES mcp_tools (id) ON DELETE SET NULL,
    tool_name       text NOT NULL,
    arguments       jsonb NOT NULL DEFAULT '{}',
    risk            text NOT NULL CHECK (risk IN ('low', 'medium', 'high')),
    -- For a rollback step: the position of the run step it undoes.
    undoes          integer,
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'running', 'succeeded', 'failed',
                        'interrupted', 'compensated', 'skipped')),
    call_id         uuid,                           -- the router's call id (usage log, events)
    result          jsonb,
    error           text NOT NULL DEFAULT '',
    started_at      timestamptz,
    finished_at     timestamptz,
    duration_ms     real,
    UNIQUE (execution_id, phase, position)
);
CREATE INDEX tool_calls_running_idx ON tool_calls (execution_id) WHERE status = 'running';

-- "Undo tool X with tool Y, mapping arguments": what a rollback runs for a completed
-- step of X when the plan brought no rollback of its own.
CREATE TABLE tool_compensations (
    tool_id         uuid PRIMARY KEY REFERENCES mcp_tools (id) ON DELETE CASCADE,
    undo_tool_id    uuid NOT NULL REFERENCES mcp_tools (id) ON DELETE CASCADE,
    -- undo argument name → {"from": "/pointer/in/the/step's/arguments"} or {"value": <json>}
    argument_map    jsonb NOT NULL DEFAULT '{}',
    updated_by      text NOT NULL DEFAULT '',
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- Settings administrators change at run time (approval expiry, separation of duties).
CREATE TABLE settings (
    key         text PRIMARY KEY,
    value       jsonb NOT NULL,
    updated_by  text NOT NULL DEFAULT '',
    updated_at  timestamptz NOT NULL DEFAULT now()
);

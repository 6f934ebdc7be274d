-- One row per tools/list sweep of a server (on connect, on demand, on list_changed, on
-- import), so the server page can show what each discovery found and why one failed.
CREATE TABLE discovery_runs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    server_id   uuid NOT NULL REFERENCES mcp_servers (id) ON DELETE CASCADE,
    trigger     text NOT NULL CHECK (trigger IN ('connect', 'manual', 'list_changed', 'import')),
    actor       text NOT NULL DEFAULT '',
    status      text NOT NULL CHECK (status IN ('succeeded', 'failed')),
    pages       integer NOT NULL DEFAULT 0,
    added       integer NOT NULL DEFAULT 0,
    updated     integer NOT NULL DEFAULT 0,
    unchanged   integer NOT NULL DEFAULT 0,
    removed     integer NOT NULL DEFAULT 0,
    error       text,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX discovery_runs_server_idx ON discovery_runs (server_id, id DESC);

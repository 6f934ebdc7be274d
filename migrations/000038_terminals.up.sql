-- Issue #23: a terminal (a PTY session or a background run_command of the built-in
-- terminal_operations) is a process of the replica that started it. Each terminal has
-- a row here from its start, so every replica can list it and send its requests to
-- the replica that runs it (services/builtin, terminal_store.go). ended_at: its
-- process ended (by itself, closed, or with its replica); gone_at: it left the list.
CREATE TABLE terminals (
    id              text PRIMARY KEY,
    replica_id      uuid NOT NULL,
    replica         text NOT NULL,
    kind            text NOT NULL CHECK (kind IN ('pty', 'command')),
    conversation_id text NOT NULL,
    owner_id        text NOT NULL DEFAULT '',
    owner_name      text NOT NULL DEFAULT '',
    dir             text NOT NULL,
    command         text NOT NULL DEFAULT '',
    cols            integer NOT NULL DEFAULT 0,
    rows            integer NOT NULL DEFAULT 0,
    started_at      timestamptz NOT NULL,
    ended_at        timestamptz,
    exit_code       integer,
    ended_reason    text NOT NULL DEFAULT '',
    gone_at         timestamptz
);

-- The live ones, found by the survivors' sweep and the list.
CREATE INDEX terminals_open ON terminals (replica_id) WHERE gone_at IS NULL;

-- Issue #23: several `serve` processes on one database. Each replica keeps a row here
-- while it runs (services/replicas): what it is called, where other replicas reach it,
-- and when it was last seen. A row not seen for a while is a replica that died.
CREATE TABLE replicas (
    id         uuid PRIMARY KEY,
    name       text NOT NULL,
    address    text NOT NULL DEFAULT '',
    host       text NOT NULL,
    pid        integer NOT NULL,
    version    text NOT NULL DEFAULT '',
    started_at timestamptz NOT NULL DEFAULT now(),
    seen_at    timestamptz NOT NULL DEFAULT now()
);

-- The replica that runs (or last ran) a phase of the execution: its name, shown, and
-- its id (a restarted replica keeps its name, not its id).
ALTER TABLE executions ADD COLUMN runner text NOT NULL DEFAULT '',
                       ADD COLUMN runner_id uuid;

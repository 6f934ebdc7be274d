-- Health-check history per server (seed 004: health checks), shown on the server page.
-- Rows are pruned by age, so the table stays small however long a server lives.
CREATE TABLE server_health (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    server_id  uuid NOT NULL REFERENCES mcp_servers (id) ON DELETE CASCADE,
    checked_at timestamptz NOT NULL DEFAULT now(),
    ok         boolean NOT NULL,
    latency_ms double precision,
    error      text
);

CREATE INDEX server_health_server_idx ON server_health (server_id, checked_at DESC);
CREATE INDEX server_health_checked_at_idx ON server_health (checked_at);

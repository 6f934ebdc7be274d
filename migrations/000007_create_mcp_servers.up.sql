-- MCP servers registered by admins (docs/api.md). Connection settings are
-- columns rather than one connection_config blob so the database enforces their rules.
-- env, headers and auth_token hold only ciphertexts (services/secrets, bound to the row id):
-- a database dump never contains a secret value.
CREATE TABLE mcp_servers (
    id                 uuid PRIMARY KEY,
    name               text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9-]{1,48}$'),
    description        text NOT NULL DEFAULT '',
    server_type        text NOT NULL CHECK (server_type IN ('stdio', 'sse', 'streamable_http')),
    command            text NOT NULL DEFAULT '',
    args               jsonb NOT NULL DEFAULT '[]',
    working_dir        text NOT NULL DEFAULT '',
    url                text NOT NULL DEFAULT '',
    env                jsonb NOT NULL DEFAULT '{}',  -- name -> ciphertext
    headers            jsonb NOT NULL DEFAULT '{}',  -- name -> ciphertext
    auth_type          text NOT NULL DEFAULT 'none' CHECK (auth_type IN ('none', 'bearer', 'header')),
    auth_header        text NOT NULL DEFAULT '',
    auth_token         text NOT NULL DEFAULT '',     -- ciphertext, '' when none
    timeout_ms         integer NOT NULL DEFAULT 30000 CHECK (timeout_ms BETWEEN 100 AND 600000),
    retries            integer NOT NULL DEFAULT 3 CHECK (retries BETWEEN 0 AND 10),
    health_interval_ms integer NOT NULL DEFAULT 30000 CHECK (health_interval_ms BETWEEN 100 AND 3600000),
    enabled            boolean NOT NULL DEFAULT true,
    trusted            boolean NOT NULL DEFAULT false,
    connection_status  text NOT NULL DEFAULT 'disconnected'
                       CHECK (connection_status IN ('connecting', 'connected', 'error', 'disconnected')),
    last_error         text,
    last_connected     timestamptz,
    status_changed_at  timestamptz NOT NULL DEFAULT now(),
    server_info        jsonb NOT NULL DEFAULT '{}',  -- name, version, protocol, capabilities, instructions
    resources          jsonb NOT NULL DEFAULT '[]',
    prompts            jsonb NOT NULL DEFAULT '[]',
    metadata           jsonb NOT NULL DEFAULT '{}',
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX mcp_servers_status_idx ON mcp_servers (connection_status);

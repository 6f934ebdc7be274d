-- Users, the people and agents that sign in. Roles are checked against the permission
-- table in services/auth; the CHECK keeps the database honest if code and data drift.
CREATE TABLE users (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    username      text NOT NULL,
    display_name  text NOT NULL DEFAULT '',
    role          text NOT NULL CHECK (role IN ('admin', 'tool_manager', 'tool_user', 'auditor', 'guest')),
    password_hash text NOT NULL,
    disabled_at   timestamptz,
    last_login_at timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT users_username_format CHECK (username ~ '^[a-z0-9][a-z0-9._-]{0,47}$')
);

CREATE UNIQUE INDEX users_username_key ON users (username);

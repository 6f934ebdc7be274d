-- API tokens for agents and scripts. The token is shown once; only its SHA-256 is kept
-- (tokens are 256-bit random, so a fast hash is enough). prefix lets people tell them apart.
CREATE TABLE api_tokens (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
    prefix       text NOT NULL,
    token_hash   bytea NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    expires_at   timestamptz,
    revoked_at   timestamptz
);

CREATE INDEX api_tokens_user_id_idx ON api_tokens (user_id);
-- One live token per name and user, so "ci" means one thing; revoked names can be reused.
CREATE UNIQUE INDEX api_tokens_user_name_live_key ON api_tokens (user_id, name) WHERE revoked_at IS NULL;

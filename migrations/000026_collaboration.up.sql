-- Issue #20: what the built-in tools keep in PostgreSQL. Grants are what a person
-- allowed through user_collaboration's authorize_operation (services/grants): one
-- conversation, one operation, optionally one target, for a while, once or until they
-- expire. Collaborations are user_collaboration's questions to a person and their
-- answers. Memories and todos are memory_operations' notes (services/memory), per user.
CREATE TABLE grants (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    conversation_id  text NOT NULL,
    operation        text NOT NULL,
    -- '' allows the operation on any target.
    target           text NOT NULL DEFAULT '',
    one_time         boolean NOT NULL,
    uses             integer NOT NULL DEFAULT 0,
    user_id          uuid REFERENCES users (id) ON DELETE SET NULL,
    user_name        text NOT NULL DEFAULT '',
    collaboration_id uuid,
    created_at       timestamptz NOT NULL,
    expires_at       timestamptz NOT NULL,
    consumed_at      timestamptz,
    revoked_at       timestamptz,
    revoked_by       text NOT NULL DEFAULT '',
    CONSTRAINT grants_expiry CHECK (expires_at > created_at)
);
CREATE INDEX grants_lookup ON grants (conversation_id, operation) WHERE revoked_at IS NULL;
CREATE INDEX grants_expires ON grants (expires_at);

CREATE TABLE collaborations (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id             uuid REFERENCES users (id) ON DELETE CASCADE,
    user_name           text NOT NULL DEFAULT '',
    conversation_id     text NOT NULL,
    call_id             text NOT NULL DEFAULT '',
    execution_id        text NOT NULL DEFAULT '',
    source              text NOT NULL DEFAULT '',
    prompt              text NOT NULL,
    authorize_operation text NOT NULL DEFAULT '',
    target              text NOT NULL DEFAULT '',
    -- The grant an approving answer creates: once only, and for how long.
    grant_one_time      boolean NOT NULL DEFAULT false,
    grant_ttl_seconds   integer NOT NULL DEFAULT 300 CHECK (grant_ttl_seconds > 0),
    status              text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'answered', 'declined', 'cancelled', 'expired')),
    response            text NOT NULL DEFAULT '',
    -- The answer approves (its words, or the Approve button).
    approved            boolean NOT NULL DEFAULT false,
    answered_by         text NOT NULL DEFAULT '',
    grant_id            uuid,
    created_at          timestamptz NOT NULL DEFAULT now(),
    answered_at         timestamptz,
    -- The waiting call's last sign of life: a pending question nobody waits for any
    -- more (its process ended) is cancelled by the prune.
    heartbeat_at        timestamptz
);
CREATE INDEX collaborations_pending ON collaborations (user_id, created_at) WHERE status = 'pending';

CREATE TABLE memories (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id         text NOT NULL,
    conversation_id text NOT NULL DEFAULT '',
    content         text NOT NULL CHECK (content <> ''),
    tags            text[] NOT NULL DEFAULT '{}',
    -- The tags (weight A) and the content (weight B), as services/memory writes them.
    search          tsvector NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memories_search ON memories USING gin (search);
CREATE INDEX memories_user ON memories (user_id, created_at DESC);

CREATE TABLE todos (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id         text NOT NULL,
    conversation_id text NOT NULL DEFAULT '',
    title           text NOT NULL CHECK (title <> ''),
    status          text NOT NULL DEFAULT 'not-started' CHECK (status IN ('not-started', 'in-progress', 'completed')),
    done_at         timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX todos_user ON todos (user_id, conversation_id, created_at);

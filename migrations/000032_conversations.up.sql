-- Issue #20: who a conversation belongs to. The first call in a conversation makes its
-- caller the owner; the built-in tools refuse a conversation another person owns, so a
-- conversation id (chosen by the client) never opens someone else's workspace, grants
-- or questions. dir is the conversation's workspace directory under the built-in root.
-- A person removed leaves the owner NULL: nobody may use the conversation again.
CREATE TABLE conversations (
    id         text PRIMARY KEY,
    dir        text NOT NULL UNIQUE,
    user_id    uuid REFERENCES users (id) ON DELETE SET NULL,
    user_name  text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX conversations_user ON conversations (user_id);

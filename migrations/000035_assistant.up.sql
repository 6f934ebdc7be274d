-- Issue #22: the assistant's conversations (state between messages: the last list, the
-- question asked, the guided set-up's step) and their messages, per person; and the
-- auto-enable preferences people state to it ("always enable new weather tools"),
-- applied when discovery validates a new tool.
CREATE TABLE assistant_conversations (
    user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    id         text NOT NULL,
    state      jsonb NOT NULL DEFAULT '{}',
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, id)
);

CREATE TABLE assistant_messages (
    id              bigserial PRIMARY KEY,
    user_id         uuid NOT NULL,
    conversation_id text NOT NULL,
    at              timestamptz NOT NULL DEFAULT now(),
    author          text NOT NULL CHECK (author IN ('person', 'assistant')),
    body            text NOT NULL,
    choices         jsonb NOT NULL DEFAULT '[]',
    actions         jsonb NOT NULL DEFAULT '[]',
    question        bigint NOT NULL DEFAULT 0, -- the question its choices answer (0: none)
    FOREIGN KEY (user_id, conversation_id) REFERENCES assistant_conversations (user_id, id) ON DELETE CASCADE
);
CREATE INDEX assistant_messages_conversation ON assistant_messages (user_id, conversation_id, id);

CREATE TABLE tool_auto_enable_preferences (
    id         uuid PRIMARY KEY,
    user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    words      text NOT NULL CHECK (words <> ''),
    sentence   text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, words)
);

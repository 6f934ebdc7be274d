-- Domain events (docs/architecture.md, Events and the websocket): written in the transaction of the change they describe,
-- announced with NOTIFY on commit, replayed to websocket clients that resume from an id.
-- ids are taken under the journal lock, so id order is commit order and a client that
-- resumes from id N misses nothing.
CREATE TABLE events (
    id         bigint PRIMARY KEY,
    topic      text NOT NULL,
    kind       text NOT NULL,
    payload    jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE SEQUENCE events_id_seq OWNED BY events.id;

CREATE INDEX events_topic_id_idx ON events (topic, id);
CREATE INDEX events_created_at_idx ON events (created_at);

-- Failed sign-ins, counted per account and per IP over a sliding window for throttling.
-- Kept in the database (not memory) so several replicas share the count.
CREATE TABLE login_failures (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    username text NOT NULL,
    ip       text NOT NULL,
    at       timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX login_failures_username_at_idx ON login_failures (username, at);
CREATE INDEX login_failures_ip_at_idx ON login_failures (ip, at);

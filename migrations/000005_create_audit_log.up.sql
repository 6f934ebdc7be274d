-- The append-only, hash-chained audit log (docs/security.md). Each row's hash covers the
-- previous row's hash and the row's own fields, so any edit breaks the chain from that
-- row on; `toolwarden audit verify` walks it. payload is json (not jsonb) so the exact
-- bytes that were hashed come back unchanged.
CREATE TABLE audit_log (
    id          bigint PRIMARY KEY,
    at          timestamptz NOT NULL,
    actor_kind  text NOT NULL CHECK (actor_kind IN ('user', 'token', 'system', 'anonymous')),
    actor_id    uuid,
    actor_name  text NOT NULL DEFAULT '',
    action      text NOT NULL,
    target_type text NOT NULL DEFAULT '',
    target_id   text NOT NULL DEFAULT '',
    target_name text NOT NULL DEFAULT '', -- what people call the target (a username), for display
    ip          text NOT NULL DEFAULT '',
    request_id  text NOT NULL DEFAULT '',
    payload     json NOT NULL DEFAULT '{}',
    prev_hash   bytea NOT NULL,
    hash        bytea NOT NULL
);

CREATE SEQUENCE audit_log_id_seq OWNED BY audit_log.id;

CREATE INDEX audit_log_at_idx ON audit_log (at);
CREATE INDEX audit_log_action_idx ON audit_log (action, id);
CREATE INDEX audit_log_actor_idx ON audit_log (actor_id, id);
CREATE INDEX audit_log_target_idx ON audit_log (target_type, target_id, id);

-- Refuse every change to written rows. Only a superuser or the owner disabling the
-- triggers can get around this, and verify catches what they change.
CREATE FUNCTION audit_log_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER audit_log_no_update BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_immutable();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_immutable();

REVOKE UPDATE, DELETE, TRUNCATE ON audit_log FROM PUBLIC;

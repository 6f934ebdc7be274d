-- Issue #23 (P1, P2): the free-text filter's index moves off the path of every call.
-- The full-text index of migration 27 was an expression index on audit_log, so each
-- append computed its entry's tsvector and inserted it into the GIN index, under the
-- journal lock, before the call it records could run: about half the time of a
-- 20-entry append, and, when the index's pending list filled, a cleanup of it by
-- whichever append came next (tens of milliseconds). The words of each entry are now
-- kept in a table of their own, filled behind the writes (audit.Log.IndexSearch, run a
-- few times a second and by every search before it reads, so a search still sees every
-- entry). Like audit_log, the application only ever adds to it.
CREATE TABLE audit_search (
    id  bigint PRIMARY KEY, -- the audit_log entry's id
    doc tsvector NOT NULL
);

INSERT INTO audit_search (id, doc)
    SELECT id, to_tsvector('simple'::regconfig, audit_search_text(actor_name, action, target_type, target_id, target_name, payload))
    FROM audit_log;

CREATE INDEX audit_search_doc_idx ON audit_search USING gin (doc);

DROP INDEX audit_log_search_idx;

REVOKE UPDATE, DELETE, TRUNCATE ON audit_search FROM toolwarden_app;

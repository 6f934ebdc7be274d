-- Issue #21: the audit browser (/audit, GET /api/v1/audit). Every filter of the page is
-- answered newest first, by keyset on id, from an index that ends in id, so a filtered
-- page costs the same at 10 M rows as at 1,000 (services/audit/browse.go). Rows of
-- audit_log are never changed: only indexes are added.

-- The group an action belongs to (the page's action filter: auth, servers, …). The same
-- mapping is audit.ActionGroup in Go (a test keeps the two equal); a change to it is a
-- new migration that replaces this function and reindexes audit_log_group_idx.
CREATE FUNCTION audit_action_group(action text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN action IN ('user.login', 'user.login_failed', 'user.logout', 'request.denied')
            OR action LIKE 'token.%' OR action LIKE 'session.%' THEN 'auth'
        WHEN action LIKE 'user.%' THEN 'users'
        WHEN action LIKE 'server.%' THEN 'servers'
        WHEN action IN ('tool.call', 'tool.call.refused', 'resource.read', 'prompt.get', 'terminal.input')
            OR action LIKE 'memory.%' OR action LIKE 'todo.%' THEN 'calls'
        WHEN action LIKE 'tool.%' OR action LIKE 'category.%' THEN 'tools'
        WHEN action IN ('execution.approve', 'execution.approve.refused', 'execution.reject')
            OR action LIKE 'grant.%' OR action LIKE 'collaboration.%' THEN 'approvals'
        WHEN action LIKE 'execution.%' THEN 'executions'
        WHEN action LIKE 'secret.%' OR action LIKE 'secrets.%' THEN 'secrets'
        WHEN action LIKE 'settings.%' THEN 'settings'
        WHEN action LIKE 'audit.%' THEN 'audit'
        ELSE 'other'
    END
$$;

-- The text the free-text filter (q) searches: who, what, the target and the payload.
-- It is searched by words through a full-text index ('simple': no stemming, no stop
-- words): a rare word is found from its own short posting list, where a trigram index
-- read the long lists of trigrams every entry has (" to", "too") and took about 100 ms
-- for one rare name in a million entries.
CREATE FUNCTION audit_search_text(actor_name text, action text, target_type text, target_id text,
                                  target_name text, payload json) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT actor_name || ' ' || action || ' ' || target_type || ' ' || target_id || ' ' || target_name || ' ' || payload::text
$$;

-- A time range is answered newest first by time from (at, id), which also serves what
-- the index on at alone did.
DROP INDEX audit_log_at_idx;
CREATE INDEX audit_log_at_id_idx ON audit_log (at, id);
CREATE INDEX audit_log_actor_name_idx ON audit_log (actor_name, id);
CREATE INDEX audit_log_group_idx ON audit_log (audit_action_group(action), id);
CREATE INDEX audit_log_target_type_idx ON audit_log (target_type, id);
CREATE INDEX audit_log_request_idx ON audit_log (request_id, id) WHERE request_id <> '';
CREATE INDEX audit_log_search_idx ON audit_log
    USING gin (to_tsvector('simple'::regconfig, audit_search_text(actor_name, action, target_type, target_id, target_name, payload)));

-- Saved views: a name and the query string of the page's filters, per person.
CREATE TABLE audit_views (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name       text NOT NULL CHECK (length(name) BETWEEN 1 AND 80),
    query      text NOT NULL CHECK (length(query) <= 2000),
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, name)
);

-- The outcome of each check of the chain run from the page or the API (the page's
-- "verified through entry N at time T", the same on every replica and after a restart).
CREATE TABLE audit_verifications (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    started_at       timestamptz NOT NULL,
    finished_at      timestamptz NOT NULL,
    started_by       text NOT NULL DEFAULT '',
    ok               boolean NOT NULL,
    checked          bigint NOT NULL,
    verified_through bigint NOT NULL,
    bad_id           bigint NOT NULL DEFAULT 0,
    reason           text NOT NULL DEFAULT ''
);

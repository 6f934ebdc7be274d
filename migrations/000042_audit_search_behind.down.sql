CREATE INDEX audit_log_search_idx ON audit_log
    USING gin (to_tsvector('simple'::regconfig, audit_search_text(actor_name, action, target_type, target_id, target_name, payload)));

DROP TABLE audit_search;

-- Issue #17: what an audit entry's action came to — success, failure (a wrong password)
-- or denied (refused: the actor may not do it) — so refused requests leave a trace and
-- auditors can filter on them (docs/api.md). Existing entries are successes; the hash
-- covers a result other than success, so those still verify.
ALTER TABLE audit_log ADD COLUMN result text NOT NULL DEFAULT 'success'
    CHECK (result IN ('success', 'failure', 'denied'));
CREATE INDEX audit_log_result_idx ON audit_log (result, id) WHERE result <> 'success';

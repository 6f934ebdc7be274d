CREATE INDEX audit_log_target_idx ON audit_log (target_type, target_id, id);
DROP INDEX audit_log_target_id_idx;

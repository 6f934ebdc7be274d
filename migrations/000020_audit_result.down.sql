-- The trigger refuses updates and deletes, not dropping a column; entries that were not
-- successes lose that part of what their hash covers, and no longer verify.
DROP INDEX audit_log_result_idx;
ALTER TABLE audit_log DROP COLUMN result;

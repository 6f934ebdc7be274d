DELETE FROM audit_verifications WHERE finished_at IS NULL;
ALTER TABLE audit_verifications
    DROP COLUMN total,
    DROP COLUMN progress_at,
    ALTER COLUMN finished_at SET NOT NULL;

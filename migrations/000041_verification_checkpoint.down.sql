ALTER TABLE audit_verifications DROP COLUMN checkpoint, DROP COLUMN checkpoint_id;

ALTER TABLE todos DROP COLUMN changed_at;

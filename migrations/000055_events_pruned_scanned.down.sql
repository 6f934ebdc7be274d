ALTER TABLE events_pruned DROP COLUMN IF EXISTS scanned_id;

ALTER TABLE replicas DROP COLUMN leaving_at;

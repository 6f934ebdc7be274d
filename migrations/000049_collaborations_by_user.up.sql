-- A person's questions of every status (GET /api/v1/collaborations without a status),
-- and the cascade when a user goes, found without reading every person's: the table
-- keeps one row per call of user_collaboration for good.
CREATE INDEX collaborations_user ON collaborations (user_id, created_at);

-- Issue #17: who may decide, and what an approval is bound to.
--
-- Separation of duties for high-risk plans becomes three-valued (approvals.high_separation:
-- auto, always, off); the old boolean's "on" is "always", and its "off" becomes the new
-- default "auto" (a different approver whenever another active person could approve).
INSERT INTO settings (key, value, updated_by, updated_at)
SELECT 'approvals.high_separation', '"always"', updated_by, updated_at
FROM settings WHERE key = 'executions.separate_high_approver' AND value = 'true'
ON CONFLICT (key) DO NOTHING;
DELETE FROM settings WHERE key = 'executions.separate_high_approver';

-- A MAC (keyed by the secret key, which the database does not hold) over the execution's
-- id and its plan, approval and rollback hashes: rewriting a plan and its hashes together
-- in the database is noticed before anything runs. NULL for plans made before it existed,
-- which are refused and must be planned again.
ALTER TABLE executions ADD COLUMN seal bytea;
-- The API token a plan was asked with: once it is revoked, the plan no longer runs.
ALTER TABLE executions ADD COLUMN requested_token uuid REFERENCES api_tokens (id) ON DELETE SET NULL;
-- The requester approved their own high-risk plan (nobody else could, or the setting is off).
ALTER TABLE executions ADD COLUMN self_approved boolean NOT NULL DEFAULT false;
-- The rollback as it was approved (its prepared steps) and the hash of its canonical
-- form, checked before each of its steps like the plan's.
ALTER TABLE executions ADD COLUMN rollback_plan jsonb;
ALTER TABLE executions ADD COLUMN rollback_hash bytea;

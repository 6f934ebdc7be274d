ALTER TABLE executions DROP COLUMN rollback_hash;
ALTER TABLE executions DROP COLUMN rollback_plan;
ALTER TABLE executions DROP COLUMN self_approved;
ALTER TABLE executions DROP COLUMN requested_token;
ALTER TABLE executions DROP COLUMN seal;
INSERT INTO settings (key, value, updated_by, updated_at)
SELECT 'executions.separate_high_approver', 'true', updated_by, updated_at
FROM settings WHERE key = 'approvals.high_separation' AND value = '"always"'
ON CONFLICT (key) DO NOTHING;
DELETE FROM settings WHERE key = 'approvals.high_separation';

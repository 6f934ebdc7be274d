ALTER TABLE executions DROP COLUMN runner, DROP COLUMN runner_id;
DROP TABLE replicas;

ALTER TABLE executions DROP COLUMN runner;
DROP TABLE replicas;

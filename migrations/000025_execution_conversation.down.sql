ALTER TABLE executions DROP COLUMN conversation_id;

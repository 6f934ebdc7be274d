-- Issue #20: an execution runs in an agent conversation (the built-in tools'
-- workspace is the conversation's); '' is the requester's own default one.
ALTER TABLE executions ADD COLUMN conversation_id text NOT NULL DEFAULT '';

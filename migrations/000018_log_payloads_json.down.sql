ALTER TABLE events ALTER COLUMN payload TYPE jsonb USING payload::jsonb;
ALTER TABLE tool_usage_logs
    ALTER COLUMN request TYPE jsonb USING request::jsonb,
    ALTER COLUMN response TYPE jsonb USING response::jsonb,
    ALTER COLUMN error TYPE jsonb USING error::jsonb,
    ALTER COLUMN metadata TYPE jsonb USING metadata::jsonb;

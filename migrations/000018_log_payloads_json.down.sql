-- json accepts \u0000 in strings and jsonb does not: such escapes are dropped.
ALTER TABLE events ALTER COLUMN payload TYPE jsonb USING replace(payload::text, '\u0000', '')::jsonb;
ALTER TABLE tool_usage_logs
    ALTER COLUMN request TYPE jsonb USING replace(request::text, '\u0000', '')::jsonb,
    ALTER COLUMN response TYPE jsonb USING replace(response::text, '\u0000', '')::jsonb,
    ALTER COLUMN error TYPE jsonb USING replace(error::text, '\u0000', '')::jsonb,
    ALTER COLUMN metadata TYPE jsonb USING replace(metadata::text, '\u0000', '')::jsonb;

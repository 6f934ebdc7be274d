-- A version whose definition the tool already had (a server flipping a tool between two
-- definitions) stores none: NULL reads the definition of the tool's row with the same
-- hash that stored it. The table is append-only, and one definition may take megabytes.
ALTER TABLE tool_schemas ALTER COLUMN definition DROP NOT NULL;

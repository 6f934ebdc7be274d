UPDATE tool_schemas s SET definition = (SELECT o.definition FROM tool_schemas o
	WHERE o.tool_id = s.tool_id AND o.definition_hash = s.definition_hash AND o.definition IS NOT NULL ORDER BY o.id LIMIT 1)
WHERE s.definition IS NULL;
ALTER TABLE tool_schemas ALTER COLUMN definition SET NOT NULL;

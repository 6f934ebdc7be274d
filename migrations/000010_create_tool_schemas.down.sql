DROP TABLE tool_schemas;

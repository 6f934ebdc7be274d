DROP TABLE tool_usage_logs;
DROP TABLE tool_configurations;
DROP TABLE tool_validations;
DROP TABLE tool_tags;
DROP INDEX mcp_tools_name_id_idx;
DROP INDEX mcp_tools_category_idx;
DROP INDEX mcp_tools_server_idx;
DROP INDEX mcp_tools_search_idx;
ALTER TABLE mcp_tools DROP COLUMN search, DROP COLUMN enable_override, DROP COLUMN validation_worst,
    DROP COLUMN configuration_version, DROP COLUMN timeout_ms, DROP COLUMN risk_override, DROP COLUMN category_id;
ALTER TABLE mcp_servers DROP COLUMN auto_enable;
DROP TABLE tool_categories;

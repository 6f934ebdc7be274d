DROP TABLE tool_test_cases;
ALTER TABLE mcp_tools DROP COLUMN rate_limit;
DROP TABLE user_tool_permissions;

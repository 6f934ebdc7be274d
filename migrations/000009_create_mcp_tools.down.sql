DROP TABLE mcp_tools;

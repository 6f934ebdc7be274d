CREATE INDEX mcp_tools_server_idx ON mcp_tools (server_id, name);
ALTER TABLE mcp_tools RESET (fillfactor);

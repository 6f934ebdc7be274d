-- Template servers cannot exist without their YAML: they go, with their tools.
DELETE FROM mcp_servers WHERE server_type = 'template';
ALTER TABLE mcp_servers DROP COLUMN template;
ALTER TABLE mcp_servers DROP CONSTRAINT mcp_servers_server_type_check,
    ADD CONSTRAINT mcp_servers_server_type_check CHECK (server_type IN ('stdio', 'sse', 'streamable_http'));

DROP TRIGGER mcp_servers_reserved_name ON mcp_servers;
DROP FUNCTION mcp_servers_reserved_name();

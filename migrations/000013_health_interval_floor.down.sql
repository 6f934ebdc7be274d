ALTER TABLE mcp_servers DROP CONSTRAINT mcp_servers_health_interval_ms_check,
    ADD CONSTRAINT mcp_servers_health_interval_ms_check CHECK (health_interval_ms BETWEEN 100 AND 3600000);

-- Health checks at most once a second per server: each one is a row in server_health.
UPDATE mcp_servers SET health_interval_ms = 1000 WHERE health_interval_ms < 1000;
ALTER TABLE mcp_servers DROP CONSTRAINT mcp_servers_health_interval_ms_check,
    ADD CONSTRAINT mcp_servers_health_interval_ms_check CHECK (health_interval_ms BETWEEN 1000 AND 3600000);

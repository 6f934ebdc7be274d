-- Issue #19: the server names toolwarden and builtin are kept for Toolwarden's own tools
-- (the MCP gateway's toolwarden__await_execution, …); a server of either name would have
-- its tools' qualified names collide with them. The registry refuses them when a server is
-- created, renamed or imported (the one validation point; toolname.Reserved holds the list
-- this trigger repeats), and this trigger refuses them for anything else that writes the
-- table. A server that already has such a name keeps it and keeps working: a migration
-- cannot tell a person, so Toolwarden does, on every start (a warning in its log) and on the
-- servers pages (a notice on that server) until it is renamed. The WARNING below reaches
-- only the database's own log.
CREATE FUNCTION mcp_servers_reserved_name() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.name IN ('toolwarden', 'builtin') AND (TG_OP = 'INSERT' OR NEW.name IS DISTINCT FROM OLD.name) THEN
        RAISE EXCEPTION 'the server name % is reserved for Toolwarden''s own tools; choose another', NEW.name
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER mcp_servers_reserved_name BEFORE INSERT OR UPDATE OF name ON mcp_servers
    FOR EACH ROW EXECUTE FUNCTION mcp_servers_reserved_name();

DO $$
DECLARE
    n text;
BEGIN
    FOR n IN SELECT name FROM mcp_servers WHERE name IN ('toolwarden', 'builtin') ORDER BY name LOOP
        RAISE WARNING 'the MCP server "%" has a name now reserved for Toolwarden''s own tools; rename it', n;
    END LOOP;
END
$$;

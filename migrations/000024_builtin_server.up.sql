-- Issue #20: the server builtin, Toolwarden's own tools (services/builtin), served
-- in-process. Toolwarden creates it at start; there is at most one, and it alone may
-- carry the reserved name builtin (a server that had that name before it was reserved
-- keeps it, and the built-in server then waits until it is renamed).
ALTER TABLE mcp_servers DROP CONSTRAINT mcp_servers_server_type_check,
    ADD CONSTRAINT mcp_servers_server_type_check
        CHECK (server_type IN ('stdio', 'sse', 'streamable_http', 'template', 'builtin'));
CREATE UNIQUE INDEX mcp_servers_one_builtin ON mcp_servers ((true)) WHERE server_type = 'builtin';

CREATE OR REPLACE FUNCTION mcp_servers_reserved_name() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.name IN ('toolwarden', 'builtin') AND (TG_OP = 'INSERT' OR NEW.name IS DISTINCT FROM OLD.name)
       AND NOT (NEW.name = 'builtin' AND NEW.server_type = 'builtin') THEN
        RAISE EXCEPTION 'the server name % is reserved for Toolwarden''s own tools; choose another', NEW.name
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;

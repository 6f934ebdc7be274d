DELETE FROM mcp_servers WHERE server_type = 'builtin';
DROP INDEX IF EXISTS mcp_servers_one_builtin;
CREATE OR REPLACE FUNCTION mcp_servers_reserved_name() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.name IN ('toolwarden', 'builtin') AND (TG_OP = 'INSERT' OR NEW.name IS DISTINCT FROM OLD.name) THEN
        RAISE EXCEPTION 'the server name % is reserved for Toolwarden''s own tools; choose another', NEW.name
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END
$$;
ALTER TABLE mcp_servers DROP CONSTRAINT mcp_servers_server_type_check,
    ADD CONSTRAINT mcp_servers_server_type_check
        CHECK (server_type IN ('stdio', 'sse', 'streamable_http', 'template'));

-- Discovery speed (docs/architecture.md, Performance; issue #23 P5). A discovery of
-- 5,000 new tools writes 25,000 rows naming a tool: three state-history rows, one
-- validation and one stored definition each. A foreign key checks every row on its own
-- (a query and a row lock per row, about a quarter of storing such a discovery); the
-- triggers below check a statement's rows at once. They lock the tools the rows name
-- FOR KEY SHARE, as the foreign key did, so a tool being deleted meanwhile either waits
-- for the insert or makes it fail, and a tool's deletion removes its rows, as ON DELETE
-- CASCADE did. Only these three tables, which discoveries fill, change; the others keep
-- their foreign keys.

-- tool_rows_check fails the statement when a row it wrote names no tool, with the
-- error a foreign key gives (SQLSTATE 23503, its constraint's name). Its queries are
-- planned at each call (EXECUTE): a plan kept from a connection's first call, made for
-- a discovery's thousands of rows, would scan every tool for one row, and the reverse.
CREATE FUNCTION tool_rows_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    wanted  bigint;
    locked  bigint;
    missing text;
BEGIN
    EXECUTE 'SELECT count(DISTINCT tool_id) FROM written' INTO wanted;
    EXECUTE 'SELECT count(*) FROM (SELECT 1 FROM mcp_tools t WHERE t.id IN (SELECT tool_id FROM written) FOR KEY SHARE OF t) l' INTO locked;
    IF locked <> wanted THEN
        EXECUTE 'SELECT w.tool_id::text FROM written w WHERE NOT EXISTS (SELECT 1 FROM mcp_tools t WHERE t.id = w.tool_id) LIMIT 1' INTO missing;
        RAISE foreign_key_violation USING
            MESSAGE = format('insert or update on table "%s" violates foreign key constraint "%s_tool_id_fkey"', TG_TABLE_NAME, TG_TABLE_NAME),
            DETAIL = format('Key (tool_id)=(%s) is not present in table "mcp_tools".', coalesce(missing, 'a tool deleted meanwhile')),
            TABLE = TG_TABLE_NAME, COLUMN = 'tool_id', CONSTRAINT = TG_TABLE_NAME || '_tool_id_fkey';
    END IF;
    RETURN NULL;
END
$$;

-- tool_rows_cascade removes the rows of deleted tools. It runs as the owner of the
-- tables (as a foreign key's cascade did): toolwarden_app may not delete from the
-- append-only ones. Only in READ COMMITTED, where each of its statements sees what
-- committed before it: a transaction reading one snapshot (REPEATABLE READ,
-- SERIALIZABLE) would miss a row written by an insert it waited for, and leave it
-- naming no tool, where a foreign key's cascade fails such a transaction. Toolwarden's
-- own connections always run in READ COMMITTED (services/db, NewPool).
CREATE FUNCTION tool_rows_cascade() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE feature_not_supported USING
            MESSAGE = format('tools may only be deleted in a READ COMMITTED transaction (this one is %s)', current_setting('transaction_isolation')),
            HINT = 'their state history, validations and definitions are removed with them, which needs each statement''s fresh snapshot';
    END IF;
    EXECUTE 'DELETE FROM tool_state_history h USING gone g WHERE h.tool_id = g.id';
    EXECUTE 'DELETE FROM tool_validations v USING gone g WHERE v.tool_id = g.id';
    EXECUTE 'DELETE FROM tool_schemas s USING gone g WHERE s.tool_id = g.id';
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION tool_rows_cascade() FROM PUBLIC;

-- tool_rows_truncate empties the three tables with mcp_tools (TRUNCATE ... CASCADE, an
-- owner's), as the foreign keys did.
CREATE FUNCTION tool_rows_truncate() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    TRUNCATE tool_state_history, tool_validations, tool_schemas;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION tool_rows_truncate() FROM PUBLIC;

-- All three read the tables of this schema, and no temporary table a session made with the
-- same name (pg_temp is searched first unless it is named, and last here).
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION tool_rows_check() SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION tool_rows_cascade() SET search_path = %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION tool_rows_truncate() SET search_path = %I, pg_temp', current_schema());
END
$$;

ALTER TABLE tool_state_history DROP CONSTRAINT tool_state_history_tool_id_fkey;
ALTER TABLE tool_validations DROP CONSTRAINT tool_validations_tool_id_fkey;
ALTER TABLE tool_schemas DROP CONSTRAINT tool_schemas_tool_id_fkey;

CREATE TRIGGER tool_state_history_tool_insert AFTER INSERT ON tool_state_history
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION tool_rows_check();
CREATE TRIGGER tool_state_history_tool_update AFTER UPDATE ON tool_state_history
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION tool_rows_check();
CREATE TRIGGER tool_validations_tool_insert AFTER INSERT ON tool_validations
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION tool_rows_check();
CREATE TRIGGER tool_validations_tool_update AFTER UPDATE ON tool_validations
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION tool_rows_check();
CREATE TRIGGER tool_schemas_tool_insert AFTER INSERT ON tool_schemas
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION tool_rows_check();
CREATE TRIGGER tool_schemas_tool_update AFTER UPDATE ON tool_schemas
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION tool_rows_check();
CREATE TRIGGER mcp_tools_rows_cascade AFTER DELETE ON mcp_tools
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION tool_rows_cascade();
CREATE TRIGGER mcp_tools_rows_truncate AFTER TRUNCATE ON mcp_tools
    FOR EACH STATEMENT EXECUTE FUNCTION tool_rows_truncate();

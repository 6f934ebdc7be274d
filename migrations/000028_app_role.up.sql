-- Issue #21: the application connects as a role that cannot rewrite history
-- (docs/security.md, The application's database role). Migrations run as the owner of
-- the tables; `serve` connects as a member of toolwarden_app, which may read and write
-- what the application writes, but may not UPDATE, DELETE or TRUNCATE the append-only
-- tables (the audit log, tool state history, stored tool definitions), may not change
-- schema_migrations, and, not owning the tables, cannot disable their triggers.
--
-- The role is cluster-wide and is created here when missing (the embedded cluster
-- creates it, with LOGIN, before migrating). An owner without CREATEROLE must have it
-- created first: CREATE ROLE toolwarden_app NOLOGIN;
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'toolwarden_app') THEN
        BEGIN
            CREATE ROLE toolwarden_app NOLOGIN;
        EXCEPTION
            WHEN duplicate_object THEN NULL; -- another database's migration made it meanwhile
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'the role toolwarden_app does not exist and % may not create it', current_user
                    USING HINT = 'as a role with CREATEROLE run: CREATE ROLE toolwarden_app NOLOGIN; then migrate again (docs/security.md)';
        END;
    END IF;
END
$$;

GRANT USAGE ON SCHEMA public TO toolwarden_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO toolwarden_app;
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO toolwarden_app;

-- Tables and sequences later migrations (and River's) create, as this same owner, get
-- the same privileges. A later append-only table revokes UPDATE and DELETE in its own
-- migration, as below.
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO toolwarden_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO toolwarden_app;

REVOKE UPDATE, DELETE, TRUNCATE ON audit_log, tool_state_history, tool_schemas FROM toolwarden_app;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON schema_migrations FROM toolwarden_app;

-- The SECURITY DEFINER functions (migrations 57 to 59) run as the tables' owner with this
-- schema on their search_path. Whoever may create objects in it could add a function or
-- operator that matches one of their calls more exactly than pg_catalog's (a
-- hashtextextended(text, integer)) and have it run as the owner: the application's role
-- would make itself superuser and rewrite the audit log. PostgreSQL 15 no longer lets
-- every role create in `public`; 14 does, and so does a database whose cluster was
-- upgraded from 14 or older (pg_upgrade keeps template1's privileges). An owner that does
-- not own the schema gets a warning here instead; serve then warns at every start
-- (db.RoleWarning) until the schema's owner runs these statements.
DO $$
BEGIN
    EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM PUBLIC', current_schema());
    EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM toolwarden_app', current_schema());
END
$$;

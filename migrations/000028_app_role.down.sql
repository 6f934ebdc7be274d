-- The role stays (it is cluster-wide; other databases may use it); this database's
-- grants to it go.
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON TABLES FROM toolwarden_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON SEQUENCES FROM toolwarden_app;
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM toolwarden_app;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM toolwarden_app;
REVOKE USAGE ON SCHEMA public FROM toolwarden_app;

-- Each replica runs its own session to a server and discovers it on its own. Under the
-- server's row lock the store took whichever list committed last, so a slow listing begun
-- before another's could replace the newer list with the older one. A listing now takes
-- a number from this sequence as it begins; the server keeps the number of the list
-- stored, and a list begun before it is not stored (registry.ErrDiscoveryOvertaken).
CREATE SEQUENCE discovery_listing_seq;
ALTER TABLE mcp_servers ADD COLUMN listing_seq bigint NOT NULL DEFAULT 0;

ALTER TABLE mcp_servers DROP COLUMN listing_seq;
DROP SEQUENCE discovery_listing_seq;

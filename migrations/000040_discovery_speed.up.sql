-- Discovery speed (docs/architecture.md, Performance; issue #23 P5).
--
-- Every discovery sets last_seen on each tool it lists unchanged. With pages packed full,
-- each of those updates put the new row version on another page and added an entry to
-- every index of mcp_tools (the full-text GIN index among them). Leaving room on each
-- page lets PostgreSQL keep the new version on the same page (a HOT update: no index
-- entries, a fraction of the WAL), since last_seen is in no index. Pages written from
-- now on keep the room; existing ones gain it as their rows move.
ALTER TABLE mcp_tools SET (fillfactor = 70);

-- The same columns as the index of UNIQUE (server_id, name), which serves the same
-- lookups: a second copy only costs every insert and update.
DROP INDEX mcp_tools_server_idx;

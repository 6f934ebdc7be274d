-- The compensations a server's tools give other servers' tools (its delete confirmation,
-- counted on every server row read) and the cascade when a tool is deleted, found
-- without reading every compensation.
CREATE INDEX tool_compensations_undo_tool_idx ON tool_compensations (undo_tool_id);

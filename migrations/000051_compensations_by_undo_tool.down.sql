DROP INDEX IF EXISTS tool_compensations_undo_tool_idx;

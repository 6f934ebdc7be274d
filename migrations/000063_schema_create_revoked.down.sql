-- Nothing to undo: whether PUBLIC could create in the schema before is not recorded, and
-- giving it back would reopen the hole the up migration closes.
SELECT 1;

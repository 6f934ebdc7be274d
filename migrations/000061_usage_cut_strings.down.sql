-- Nothing to undo: the text it dropped is not kept.
SELECT 1;

-- Nothing to undo: who claimed a conversation first is not kept.
SELECT 1;

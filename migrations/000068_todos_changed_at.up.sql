-- When a todo was last renamed or moved to another status: with created_at and done_at,
-- what keeps a conversation's list from the 90-day prune (services/memory TodosKept).
-- Before, a list whose items were only renamed or started stayed "unchanged" and could
-- be removed while in use. NULL for the rows before it: greatest() skips a NULL, so they
-- keep the times they had. Adding a nullable column without a default rewrites nothing.
ALTER TABLE todos ADD COLUMN changed_at timestamptz;

-- How far events.Prune has looked (by id): every event up to it is either pruned or
-- kept for good (an execution's), so a prune starts after it instead of reading the
-- whole kept history again. through_id is 0 while nothing was deleted.
ALTER TABLE events_pruned ADD COLUMN scanned_id bigint NOT NULL DEFAULT 0;

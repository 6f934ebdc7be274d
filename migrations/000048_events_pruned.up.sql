-- The newest event id events.Prune deleted (one row, once anything was pruned): a
-- websocket page resuming from a cursor below it missed events nobody can replay any
-- more, so it is told to reload instead of being sent what is left as if it were all.
-- Recorded, not derived from the ids left: ids have gaps (rolled-back publishes).
CREATE TABLE events_pruned (
    only_row   boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    through_id bigint NOT NULL
);

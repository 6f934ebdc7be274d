-- Every tool call writes two or three events, so each index on events is paid for on the
-- hot path. Nothing reads events by time yet; when old events are pruned by age, a BRIN
-- index (the table is append-only, so created_at follows id) serves that for almost
-- nothing instead of a B-tree entry per event.
DROP INDEX events_created_at_idx;
CREATE INDEX events_created_at_brin ON events USING brin (created_at);

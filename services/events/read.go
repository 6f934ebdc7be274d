package events

import "context"

// LatestID is the id of the newest event (0 when there is none): the cursor a page
// reads before its data, so that an event landing in between is replayed, not lost.
func (b *Bus) LatestID(ctx context.Context) (int64, error) { return LatestID(ctx, b.pool) }

// Since returns up to limit events after afterID on the given topics, oldest first.
func (b *Bus) Since(ctx context.Context, afterID int64, topics []string, limit int) ([]Event, error) {
	return Since(ctx, b.pool, afterID, topics, limit)
}

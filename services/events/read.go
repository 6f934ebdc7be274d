package events

import "context"

// LatestID is the id of the newest event (0 when there is none): the cursor a page
// reads before its data, so that an event landing in between is replayed, not lost.
func (b *Bus) LatestID(ctx context.Context) (int64, error) { return LatestID(ctx, b.pool) }

// Tail returns the newest limit events of topic up to event last, oldest first, and
// how many older ones there are.
func (b *Bus) Tail(ctx context.Context, topic string, last int64, limit int) ([]Event, int64, error) {
	return Tail(ctx, b.pool, topic, last, limit)
}

// Since returns up to limit events after afterID on the given topics, oldest first.
func (b *Bus) Since(ctx context.Context, afterID int64, topics []string, limit int) ([]Event, error) {
	return Since(ctx, b.pool, afterID, topics, limit)
}

// SinceAbout returns up to limit events of SessionsTopic after afterID about user userID.
func (b *Bus) SinceAbout(ctx context.Context, afterID int64, userID string, limit int) ([]Event, error) {
	return SinceAbout(ctx, b.pool, afterID, userID, limit)
}

// PrunedThrough is the newest event id pruned (0 when none): a cursor below it cannot be
// replayed everything it missed.
func (b *Bus) PrunedThrough(ctx context.Context) (int64, error) { return PrunedThrough(ctx, b.pool) }

// Package events publishes domain events (docs/architecture.md, Events and the websocket): a row in the events table written
// in the transaction of the change it describes, announced with NOTIFY on commit, and
// fanned out to subscribers by a Bus in every replica.
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
)

// Channel is the PostgreSQL NOTIFY channel that announces new event ids. A payload is
// the newest id, then, for events a Bus delivers itself, a space and that bus's origin.
const Channel = "tw_events"

// Event is one domain event.
type Event struct {
	ID        int64           `json:"id" db:"id"`
	Topic     string          `json:"topic" db:"topic"`
	Kind      string          `json:"kind" db:"kind"`
	Payload   json.RawMessage `json:"payload" db:"payload"`
	CreatedAt time.Time       `json:"created_at" db:"created_at"`
}

// Decode unmarshals the event's payload into v.
func (e Event) Decode(v any) error {
	if err := json.Unmarshal(e.Payload, v); err != nil {
		return fmt.Errorf("events: decode %s payload: %w", e.Kind, err)
	}
	return nil
}

// Publish records an event in tx. It takes the journal lock so that ids are handed out
// in commit order (see db.LockJournal), which needs a transaction to hold it until
// commit; call it late in the transaction. When tx was begun by db.WithTx on a Local,
// its buses deliver the event before WithTx returns.
func Publish(ctx context.Context, q pgx.Tx, topic, kind string, payload any) (int64, error) {
	raw, err := json.Marshal(payload)
	if err != nil {
		return 0, fmt.Errorf("events: marshal %s payload: %w", kind, err)
	}
	if err := db.LockJournal(ctx, q); err != nil {
		return 0, err
	}
	var id int64
	err = q.QueryRow(ctx, `/* events.Publish */
		WITH ins AS (
			INSERT INTO events (id, topic, kind, payload)
			VALUES (nextval('events_id_seq'), $1, $2, $3)
			RETURNING id
		)
		SELECT id, pg_notify('`+Channel+`', id::text) FROM ins`, topic, kind, raw).Scan(&id, nil)
	if err != nil {
		return 0, fmt.Errorf("events: publish %s on %s: %w", kind, topic, err)
	}
	db.AfterCommit(q, func(ctx context.Context, b db.TxBeginner) { syncLocal(ctx, b, id) })
	return id, nil
}

// Draft is an event to publish with PublishBatch.
type Draft struct {
	Topic, Kind string
	Payload     any
}

// PublishBatch records events in tx in order with one lock, one statement and one
// NOTIFY (the bus reads everything after the last id it saw, so one wake-up is enough).
// It returns the events as they will read once tx commits.
func PublishBatch(ctx context.Context, q pgx.Tx, drafts []Draft) ([]Event, error) {
	evs, _, err := publishBatch(ctx, q, drafts, "")
	return evs, err
}

// publishBatch is PublishBatch with the origin its NOTIFY carries after the id. It also
// returns the created_at of the event just before the first (nil when there is none).
func publishBatch(ctx context.Context, q pgx.Tx, drafts []Draft, origin string) ([]Event, *time.Time, error) {
	if len(drafts) == 0 {
		return nil, nil, nil
	}
	topics, kinds, payloads, err := Encode(drafts)
	if err != nil {
		return nil, nil, err
	}
	if err := db.LockJournal(ctx, q); err != nil {
		return nil, nil, err
	}
	sql, args := insertQuery(topics, kinds, payloads, origin)
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("events: publish %d events: %w", len(drafts), err)
	}
	evs := make([]Event, 0, len(drafts))
	var id int64
	var at time.Time
	var prevAt *time.Time
	_, err = pgx.ForEachRow(rows, []any{&id, &at, &prevAt}, func() error {
		i := len(evs)
		if i >= len(drafts) {
			return fmt.Errorf("events: publish returned more rows than events")
		}
		evs = append(evs, Event{ID: id, Topic: topics[i], Kind: kinds[i], Payload: json.RawMessage(payloads[i]), CreatedAt: at})
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("events: publish %d events: %w", len(drafts), err)
	}
	if origin == "" && len(evs) > 0 {
		last := evs[len(evs)-1].ID
		db.AfterCommit(q, func(ctx context.Context, b db.TxBeginner) { syncLocal(ctx, b, last) })
	}
	return evs, prevAt, nil
}

// insertQuery is PublishBatch's statement. It returns each event's id and created_at in
// the order of the drafts: ids are drawn after the sort, so they follow it. The third
// column is the created_at of the event before the first (Published.prevAt): under
// the journal lock the one before has committed (or rolled back, leaving a gap), so a
// statement's snapshot (read committed) sees it; one primary-key lookup.
func insertQuery(topics, kinds, payloads []string, origin string) (string, []any) {
	return `/* events.PublishBatch */
		WITH ins AS (
			INSERT INTO events (id, topic, kind, payload)
			SELECT nextval('events_id_seq'), d.topic, d.kind, d.payload::json
			FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS d(topic, kind, payload, n)
			ORDER BY d.n
			RETURNING id, created_at
		), announce AS (
			SELECT pg_notify('` + Channel + `', concat_ws(' ', max(id), nullif($4, ''))) FROM ins
		)
		SELECT id, created_at, (SELECT e.created_at FROM events e WHERE e.id = (SELECT min(id) FROM ins) - 1)
		FROM ins, announce ORDER BY id`, []any{topics, kinds, payloads, origin}
}

// Encode turns drafts into insertQuery's columns.
func Encode(drafts []Draft) (topics, kinds, payloads []string, err error) {
	topics, kinds, payloads = make([]string, len(drafts)), make([]string, len(drafts)), make([]string, len(drafts))
	for i, d := range drafts {
		raw, err := json.Marshal(d.Payload)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("events: marshal %s payload: %w", d.Kind, err)
		}
		topics[i], kinds[i], payloads[i] = d.Topic, d.Kind, string(raw)
	}
	return topics, kinds, payloads, nil
}

// Since returns up to limit events after id afterID on the given topics, oldest first.
// An empty topics list means every topic.
func Since(ctx context.Context, q db.Querier, afterID int64, topics []string, limit int) ([]Event, error) {
	// Every topic: the primary key from the cursor (the bus catching up).
	sql := `/* events.Since */
		SELECT id, topic, kind, payload, created_at FROM events
		WHERE id > $1 ORDER BY id LIMIT $2`
	args := []any{afterID, limit}
	if len(topics) > 0 {
		// Each topic is read through (topic, id) from the cursor, at most limit each, and
		// the reads merged: filtering the primary key by topic read every event after the
		// cursor until limit matched, the whole table when the topics' events lay before
		// it (a client picks its cursor). The topic is bounded, not compared equal: equal,
		// it is a constant in each loop, ordering by it too is ordering by id, and the
		// planner preferred the primary key filtered by topic (it counts the topic index's
		// reads from the table as random, and a topic's events as spread evenly). Ordered
		// by topic and id, only the topic index gives the order without a sort of every
		// event after the cursor. DISTINCT: a topic listed twice is read once.
		sql = `/* events.Since */
			SELECT e.id, e.topic, e.kind, e.payload, e.created_at
			FROM (SELECT DISTINCT unnest($2::text[]) AS topic) t,
			LATERAL (SELECT id, topic, kind, payload, created_at FROM events
				WHERE (events.topic, events.id) > (t.topic, $1) AND events.topic <= t.topic
				ORDER BY events.topic, events.id LIMIT $3) e
			ORDER BY e.id LIMIT $3`
		args = []any{afterID, topics, limit}
	}
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("events: since %d: %w", afterID, err)
	}
	evs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Event])
	if err != nil {
		return nil, fmt.Errorf("events: since %d: %w", afterID, err)
	}
	return evs, nil
}

// SessionsTopic is the topic SinceAbout reads, auth.SessionsTopic (auth publishes on it
// and imports this package): events_sessions_user_idx (migration 60) covers it alone.
const SessionsTopic = "sessions"

// SinceAbout returns up to limit events of SessionsTopic after afterID about user userID
// (their payload's user_id, as every kind of the topic has), oldest first.
func SinceAbout(ctx context.Context, q db.Querier, afterID int64, userID string, limit int) ([]Event, error) {
	// The topic and the expression are written as the index has them, so that every plan
	// of the statement (a generic one too) can use it: the payload is json, parsed anew
	// for each row a scan by topic alone reads, every sign-in of everyone since the cursor.
	rows, err := q.Query(ctx, `/* events.SinceAbout */
		SELECT id, topic, kind, payload, created_at FROM events
		WHERE topic = '`+SessionsTopic+`' AND (payload->>'user_id') = $2 AND id > $1
		ORDER BY id LIMIT $3`, afterID, userID, limit)
	if err != nil {
		return nil, fmt.Errorf("events: since %d about %s: %w", afterID, userID, err)
	}
	evs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Event])
	if err != nil {
		return nil, fmt.Errorf("events: since %d about %s: %w", afterID, userID, err)
	}
	return evs, nil
}

// Tail returns the newest limit events of topic up to event last (ids at most last),
// oldest first, and how many older ones the topic holds: the end of a log, whatever
// its length, in two index scans.
func Tail(ctx context.Context, q db.Querier, topic string, last int64, limit int) ([]Event, int64, error) {
	rows, err := q.Query(ctx, `/* events.Tail */
		SELECT id, topic, kind, payload, created_at FROM events
		WHERE topic = $1 AND id <= $2 ORDER BY id DESC LIMIT $3`, topic, last, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("events: tail of %s: %w", topic, err)
	}
	evs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Event])
	if err != nil {
		return nil, 0, fmt.Errorf("events: tail of %s: %w", topic, err)
	}
	slices.Reverse(evs)
	if len(evs) < limit {
		return evs, 0, nil
	}
	var older int64
	if err := q.QueryRow(ctx, `/* events.Tail.older */ SELECT count(*) FROM events WHERE topic = $1 AND id < $2`,
		topic, evs[0].ID).Scan(&older); err != nil {
		return nil, 0, fmt.Errorf("events: tail of %s: %w", topic, err)
	}
	return evs, older, nil
}

// LatestID is the id of the newest committed event (0 when there is none).
func LatestID(ctx context.Context, q db.Querier) (int64, error) {
	var id int64
	if err := q.QueryRow(ctx, `/* events.LatestID */ SELECT coalesce(max(id), 0) FROM events`).Scan(&id); err != nil {
		return 0, fmt.Errorf("events: latest id: %w", err)
	}
	return id, nil
}

// pruneBatch bounds how many events one statement of Prune reads.
const pruneBatch = 10_000

// Prune deletes the events created before before, except those on topics starting with
// one of keep (topics whose events are a record someone reads later, such as an
// execution's log) and the newest event (the cursor pages start from). Websocket
// clients only replay what they missed while away, so old events serve nobody, and
// every tool call writes two or three. It deletes in batches and returns how many.
// Each batch records the newest id it deleted in the same statement (PrunedThrough),
// so a client resuming from before it is told it cannot be replayed everything.
//
// Kept events are never read twice: a batch reads the next events in id order after
// events_pruned's scanned_id and moves it up to the first one it may not delete yet
// (too recent, or the newest), everything before being deleted or kept for good. An
// old event further on than a batch reaches waits for those before it to age. Runs at
// once are safe: each moves scanned_id only over events it read.
func Prune(ctx context.Context, q db.Querier, before time.Time, keep ...string) (int64, error) {
	if keep == nil {
		keep = []string{}
	}
	// The start is a parameter, not a subquery, so the planner knows the batch is a
	// short range of the primary key rather than a third of the table to sort.
	var from int64
	if err := q.QueryRow(ctx, `/* events.Prune.from */
		SELECT coalesce((SELECT scanned_id FROM events_pruned), 0)`).Scan(&from); err != nil {
		return 0, fmt.Errorf("events: prune: %w", err)
	}
	var total int64
	for {
		var n int64
		var done bool
		err := q.QueryRow(ctx, `/* events.Prune */
			WITH batch AS MATERIALIZED (
				SELECT id, created_at < $1 AND id < (SELECT max(id) FROM events) AS old,
					NOT EXISTS (SELECT 1 FROM unnest($2::text[]) AS k(prefix) WHERE starts_with(topic, k.prefix)) AS prunable
				FROM events WHERE id > $4 ORDER BY id LIMIT $3
			), span AS MATERIALIZED (
				SELECT min(id) FILTER (WHERE NOT old) AS stop,
					coalesce(min(id) FILTER (WHERE NOT old) - 1, max(id)) AS through FROM batch
			), gone AS (
				-- An array, so the rows are found by the primary key, not a scan to join with.
				DELETE FROM events WHERE id = ANY (ARRAY(SELECT id FROM batch WHERE old AND prunable))
				RETURNING id
			), mark AS (
				INSERT INTO events_pruned (through_id, scanned_id)
				SELECT coalesce((SELECT max(id) FROM gone), 0), greatest(through, $4) FROM span
				WHERE through > $4 OR EXISTS (SELECT 1 FROM gone)
				ON CONFLICT (only_row) DO UPDATE SET through_id = greatest(events_pruned.through_id, excluded.through_id),
					scanned_id = greatest(events_pruned.scanned_id, excluded.scanned_id)
			)
			SELECT (SELECT count(*) FROM gone), stop IS NOT NULL OR through IS NULL, greatest(through, $4) FROM span`,
			before, keep, pruneBatch, from).Scan(&n, &done, &from)
		if err != nil {
			return total, fmt.Errorf("events: prune: %w", err)
		}
		total += n
		if done {
			return total, nil
		}
	}
}

// PrunedThrough is the newest event id Prune ever deleted (0 when none): a client whose
// cursor is below it may have missed events that can no longer be replayed.
func PrunedThrough(ctx context.Context, q db.Querier) (int64, error) {
	var id int64
	if err := q.QueryRow(ctx, `/* events.PrunedThrough */
		SELECT coalesce((SELECT through_id FROM events_pruned), 0)`).Scan(&id); err != nil {
		return 0, fmt.Errorf("events: pruned through: %w", err)
	}
	return id, nil
}

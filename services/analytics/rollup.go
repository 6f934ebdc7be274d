package analytics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// rollupGrace is how long after a day ends its calls are rolled up: a call's record
// may commit a little after it ran (LOW calls' records commit asynchronously).
const rollupGrace = time.Hour

const day = 24 * time.Hour

// RollUp adds up the calls of every finished day not rolled up yet, oldest first, and
// returns how many days it rolled. It runs in one process (an app Once job); rolling a
// day again gives the same rows.
func (s *Service) RollUp(ctx context.Context, now time.Time) (int, error) {
	before := now.Add(-rollupGrace).UTC().Truncate(day) // days before this one are finished
	var from *time.Time
	if err := s.pool.QueryRow(ctx, `/* analytics.rollup.last */ SELECT max(day) + 1 FROM usage_daily_done`).Scan(&from); err != nil {
		return 0, fmt.Errorf("analytics: rollup: %w", err)
	}
	if from == nil {
		var first *time.Time
		if err := s.pool.QueryRow(ctx, `/* analytics.rollup.first */ SELECT min(used_at) FROM tool_usage_logs`).Scan(&first); err != nil {
			return 0, fmt.Errorf("analytics: rollup: %w", err)
		}
		if first == nil {
			return 0, nil
		}
		f := first.UTC().Truncate(day)
		from = &f
	}
	n := 0
	for d := from.UTC(); d.Before(before); d = d.Add(day) {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if err := s.rollDay(ctx, d); err != nil {
			return n, err
		}
		n++
	}
	// Then the rolled days that need it again: late records, a tool deleted (movedSQL).
	moved, err := movedDays(ctx, s.pool, before.Add(-rollAgainDays*day))
	if err != nil {
		return n, err
	}
	for _, d := range moved {
		if err := s.rollDay(ctx, d.UTC()); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// rollAgainDays is how many finished days are checked for records written late.
const rollAgainDays = 3

// movedSQL is the rolled days to roll again. A call is recorded when it ends, under the
// time it started: one that waited hours for a person (user_collaboration) lands in a
// day already rolled, so the days since $1 (the last rollAgainDays) whose record count
// moved are. So are the stale days: a deleted tool (its server deleted) takes its calls
// and its usage_daily_tools rows along, but the people's rollups, which name no tool,
// kept counting them. A trigger marks those days (migration 59), so that neither this
// hourly query nor a report adds up both rollups of every day ever rolled to find them.
const movedSQL = `/* analytics.rollup.moved */ SELECT d.day FROM usage_daily_done d WHERE d.stale
	UNION
	SELECT d.day FROM usage_daily_done d WHERE d.day >= $1 AND d.usage_rows IS DISTINCT FROM (SELECT count(*) FROM tool_usage_logs u
		WHERE u.used_at >= (d.day::timestamp AT TIME ZONE 'UTC') AND u.used_at < ((d.day + 1)::timestamp AT TIME ZONE 'UTC'))
	ORDER BY 1`

// movedDays returns the days of movedSQL, oldest first.
func movedDays(ctx context.Context, q querier, since time.Time) ([]time.Time, error) {
	rows, err := q.Query(ctx, movedSQL, since)
	if err != nil {
		return nil, fmt.Errorf("analytics: rollup: %w", err)
	}
	days, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return nil, fmt.Errorf("analytics: rollup: %w", err)
	}
	return days, nil
}

// group is calls added up: how many, how many failed, and their latencies.
type group struct {
	calls, errors int64
	h             hist
}

func (g *group) add(o *group) {
	g.calls += o.calls
	g.errors += o.errors
	g.h.add(&o.h)
}

// rawRow is one line of the raw calls grouped by day, tool, actor and bucket. tool and
// actor are the driver's bytes of the row, good only until the next row is read.
type rawRow struct {
	day         time.Time
	tool, actor []byte
	bucket      pgtype.Int4 // not Valid: no duration
	calls       int64
	errors      int64
}

// raw reads the calls in [from, to) grouped by day, tool, actor and latency bucket,
// handing each row to each as it arrives. Only calls that ran count: a call the router
// refused (no permission, no approval, bad arguments) has no duration, never reached
// the tool and is not its failure. The rows are not collected: days without rollups
// (rollups truncated by a migration, the job failing) may be a year of them, one row
// per day, tool, person and bucket, while what they add up to is a group per tool,
// person and day.
func raw(ctx context.Context, q querier, from, to time.Time, each func(x *rawRow) error) error {
	rows, err := q.Query(ctx, `/* analytics.raw */
		SELECT (used_at AT TIME ZONE 'UTC')::date, tool_id::text, actor, `+bucketSQL+`, count(*), count(*) FILTER (WHERE NOT success)
		FROM tool_usage_logs WHERE used_at >= $1 AND used_at < $2 AND duration_ms IS NOT NULL GROUP BY 1, 2, 3, 4`, from, to)
	if err != nil {
		return fmt.Errorf("analytics: calls: %w", err)
	}
	defer rows.Close()
	var x rawRow
	// One destination list for every row: Scan's variadic arguments were an allocation a row.
	into := []any{&x.day, (*pgtype.DriverBytes)(&x.tool), (*pgtype.DriverBytes)(&x.actor), &x.bucket, &x.calls, &x.errors}
	for rows.Next() {
		if err := rows.Scan(into...); err != nil {
			return fmt.Errorf("analytics: calls: %w", err)
		}
		if err := each(&x); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("analytics: calls: %w", err)
	}
	return nil
}

// addRaw adds x's calls to g.
func (g *group) addRaw(x *rawRow) {
	g.calls += x.calls
	g.errors += x.errors
	if x.bucket.Valid {
		g.h[x.bucket.Int32] += x.calls
	}
}

// groupOf is m's group for key, made when new; looking it up by a []byte key (the
// driver's own bytes of a row) allocates nothing.
func groupOf[K string | []byte](m map[string]*group, key K) *group {
	if g := m[string(key)]; g != nil {
		return g
	}
	g := &group{}
	m[string(key)] = g
	return g
}

// maxRollAgain bounds the stale days one report rolls again before it reads (newest
// first, a month's report all of them); it reads the rest from their calls, and later
// reports or the job roll them. A day of 17,000 calls rolls in about 20 ms, of 170,000
// in about 100 (BenchmarkRollDay), hardly more than reading it from the calls.
const maxRollAgain = 31

// rollAgain rolls again the days of stale (rolled days a report found stale) that still
// are once it holds rollLock, at most maxRollAgain of them. It does not wait for the
// lock: while the job or another report rolls, a report reads the stale days from their
// calls, as before there was a lock, rather than hold a connection in the lock's queue.
// It returns the days of stale whose rollups are right now, and how many it rolled.
func (s *Service) rollAgain(ctx context.Context, stale []time.Time) ([]time.Time, int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("analytics: rollup: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var locked bool
	if err := tx.QueryRow(ctx, `/* analytics.rollup.trylock */ `+tryRollLock).Scan(&locked); err != nil {
		return nil, 0, fmt.Errorf("analytics: rollup: %w", err)
	}
	if !locked {
		return nil, 0, nil
	}
	// Read again under the lock: another report or the job may have rolled them.
	rows, err := tx.Query(ctx, `/* analytics.rollup.stale */ SELECT d.day, d.stale FROM usage_daily_done d WHERE d.day = ANY($1)
		ORDER BY d.day DESC`, stale)
	if err != nil {
		return nil, 0, fmt.Errorf("analytics: rollup: %w", err)
	}
	type done struct {
		day   time.Time
		stale bool
	}
	days, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (done, error) {
		var x done
		err := r.Scan(&x.day, &x.stale)
		return x, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("analytics: rollup: %w", err)
	}
	var fresh []time.Time
	n := 0
	for _, x := range days {
		if x.stale {
			if n == maxRollAgain {
				continue
			}
			if err := rollDayIn(ctx, tx, x.day.UTC()); err != nil {
				return nil, 0, err
			}
			n++
		}
		fresh = append(fresh, x.day.UTC())
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, 0, fmt.Errorf("analytics: rollup: %w", err)
	}
	return fresh, n, nil
}

// rollLock is the advisory lock every roll of a day takes in its transaction: the job
// and reports rolling stale days (rollAgain) take turns, so none writes a day another
// is writing (two would insert the same rows).
const rollLock = `SELECT pg_advisory_xact_lock(hashtextextended('analytics.rollup', 0))`

// tryRollLock takes rollLock if it is free, saying whether it did.
const tryRollLock = `SELECT pg_try_advisory_xact_lock(hashtextextended('analytics.rollup', 0))`

// rollDay replaces day d's rollups with its calls added up.
func (s *Service) rollDay(ctx context.Context, d time.Time) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("analytics: rollup: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `/* analytics.rollup.lock */ `+rollLock); err != nil {
		return fmt.Errorf("analytics: rollup: %w", err)
	}
	if err := rollDayIn(ctx, tx, d); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("analytics: rollup %s: %w", d.Format(time.DateOnly), err)
	}
	return nil
}

// rollDayIn replaces day d's rollups in tx, which holds rollLock.
func rollDayIn(ctx context.Context, tx pgx.Tx, d time.Time) error {
	// Counted before they are read (each statement sees what committed before it): a
	// record that commits in between makes the next RollUp roll the day again, never
	// the other way round.
	var count int64
	if err := tx.QueryRow(ctx, `/* analytics.rollup.count */ SELECT count(*) FROM tool_usage_logs WHERE used_at >= $1 AND used_at < $2`,
		d, d.Add(day)).Scan(&count); err != nil {
		return fmt.Errorf("analytics: rollup %s: %w", d.Format(time.DateOnly), err)
	}
	tools, actors := map[string]*group{}, map[string]*group{}
	if err := raw(ctx, tx, d, d.Add(day), func(x *rawRow) error {
		groupOf(tools, x.tool).addRaw(x)
		groupOf(actors, x.actor).addRaw(x)
		return nil
	}); err != nil {
		return err
	}
	for _, q := range []string{`DELETE FROM usage_daily_tools WHERE day = $1`, `DELETE FROM usage_daily_actors WHERE day = $1`} {
		if _, err := tx.Exec(ctx, `/* analytics.rollup */ `+q, d); err != nil {
			return fmt.Errorf("analytics: rollup %s: %w", d.Format(time.DateOnly), err)
		}
	}
	for _, t := range []struct {
		table, col string
		m          map[string]*group
	}{{"usage_daily_tools", "tool_id", tools}, {"usage_daily_actors", "actor", actors}} {
		var batch [][]any
		for k, g := range t.m {
			batch = append(batch, []any{d, k, g.calls, g.errors, g.h.encode()})
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{t.table}, []string{"day", t.col, "calls", "errors", "hist"}, pgx.CopyFromRows(batch)); err != nil {
			return fmt.Errorf("analytics: rollup %s: %w", d.Format(time.DateOnly), err)
		}
	}
	// Last: the delete above marked the day stale (migration 59's trigger marks the days
	// of any rows deleted), and the rows now written are right.
	if _, err := tx.Exec(ctx, `/* analytics.rollup.done */ INSERT INTO usage_daily_done (day, rolled_at, usage_rows) VALUES ($1, now(), $2)
		ON CONFLICT (day) DO UPDATE SET rolled_at = now(), usage_rows = EXCLUDED.usage_rows, stale = false`, d, count); err != nil {
		return fmt.Errorf("analytics: rollup %s: %w", d.Format(time.DateOnly), err)
	}
	return nil
}

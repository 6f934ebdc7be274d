package analytics

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
)

// querier is what the shared readers run on: *pgxpool.Pool or pgx.Tx.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// rolledDays returns the whole days of [from, to) read from their rollups (rolled, and
// not stale: rollup.go, movedSQL) and those rolled but stale; the rest of [from, to) is
// read from the calls themselves.
func rolledDays(ctx context.Context, q querier, from, to time.Time) (rolled, stale []time.Time, err error) {
	rows, err := q.Query(ctx, `/* analytics.rolled */ SELECT d.day, d.stale FROM usage_daily_done d WHERE d.day >= $1 AND d.day < $2
		ORDER BY d.day`, from.Truncate(day), to)
	if err != nil {
		return nil, nil, fmt.Errorf("analytics: calls: %w", err)
	}
	type done struct {
		day   time.Time
		stale bool
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (done, error) {
		var x done
		err := r.Scan(&x.day, &x.stale)
		return x, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("analytics: calls: %w", err)
	}
	for _, x := range all {
		if d := x.day.UTC(); !d.Before(from) && !d.Add(day).After(to) {
			if x.stale {
				stale = append(stale, d)
			} else {
				rolled = append(rolled, d)
			}
		}
	}
	return rolled, stale, nil
}

// gapsAround is what of [from, to) lies outside the days (sorted, inside it).
func gapsAround(days []time.Time, from, to time.Time) [][2]time.Time {
	var gaps [][2]time.Time
	at := from
	for _, d := range days {
		if d.After(at) {
			gaps = append(gaps, [2]time.Time{at, d})
		}
		at = d.Add(day)
	}
	if at.Before(to) {
		gaps = append(gaps, [2]time.Time{at, to})
	}
	return gaps
}

// ToolSpan is one tool's calls (those that ran) in one interval of ToolSpans.
type ToolSpan struct {
	Calls, Errors int64
	// Percentiles and mean in milliseconds, nil without calls.
	P50MS, P95MS, AvgMS *float64
}

// ToolSpans adds up toolID's calls in each interval [edges[i], edges[i+1]) the way
// Report does, for the tool page's long periods: a whole rolled day that lies inside one
// interval from its rollup, the rest from the calls, so a month of a busy tool is not
// read call by call. Percentiles come from the latency histograms (hist.go), within a
// few percent of exact ones; so does the mean of a rolled day (its calls taken at their
// buckets' middles). edges must be increasing.
func ToolSpans(ctx context.Context, q querier, toolID string, edges []time.Time) ([]ToolSpan, error) {
	n := len(edges) - 1
	if n < 1 {
		return nil, errors.New("analytics: tool spans: need at least two edges")
	}
	from, to := edges[0].UTC(), edges[n].UTC()
	// in is the interval holding t.
	in := func(t time.Time) int { return sort.Search(n, func(i int) bool { return edges[i+1].After(t) }) }
	// Every rolled day is read from this tool's rollup row, stale or not: a day is stale
	// when another tool was deleted (movedSQL), which leaves this tool's row right, and
	// telling stale days apart added up every tool's and person's rollups of the period
	// on each view of one tool's page.
	rows, err := q.Query(ctx, `/* analytics.tool_days */ SELECT day FROM usage_daily_done WHERE day >= $1 AND day < $2 ORDER BY day`,
		from.Truncate(day), to)
	if err != nil {
		return nil, fmt.Errorf("analytics: tool calls: %w", err)
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return nil, fmt.Errorf("analytics: tool calls: %w", err)
	}
	// A day only partly inside [from, to), or that an edge cuts (bars shorter than a
	// day), is read from its calls.
	var rolled []time.Time
	for _, d := range all {
		if d = d.UTC(); !d.Before(from) && !d.Add(day).After(to) && !edges[in(d)+1].Before(d.Add(day)) {
			rolled = append(rolled, d)
		}
	}
	groups, sums := make([]group, n), make([]float64, n)
	for _, gp := range gapsAround(rolled, from, to) {
		rows, err := q.Query(ctx, `/* analytics.tool_raw */
			SELECT width_bucket(used_at, $4::timestamptz[]) - 1, `+bucketSQL+`, count(*), count(*) FILTER (WHERE NOT success), sum(duration_ms::float8)
			FROM tool_usage_logs WHERE tool_id = $1 AND used_at >= $2 AND used_at < $3 AND duration_ms IS NOT NULL GROUP BY 1, 2`,
			toolID, gp[0], gp[1], edges)
		if err != nil {
			return nil, fmt.Errorf("analytics: tool calls: %w", err)
		}
		for rows.Next() {
			var i, k int
			var calls, errs int64
			var sum float64
			if err := rows.Scan(&i, &k, &calls, &errs, &sum); err != nil {
				rows.Close()
				return nil, fmt.Errorf("analytics: tool calls: %w", err)
			}
			g := &groups[i]
			g.calls, g.errors, g.h[k] = g.calls+calls, g.errors+errs, g.h[k]+calls
			sums[i] += sum
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("analytics: tool calls: %w", err)
		}
	}
	if len(rolled) > 0 {
		rows, err := q.Query(ctx, `/* analytics.tool_rollups */ SELECT day, calls, errors, hist FROM usage_daily_tools
			WHERE tool_id = $1 AND day = ANY($2)`, toolID, rolled)
		if err != nil {
			return nil, fmt.Errorf("analytics: tool calls: %w", err)
		}
		for rows.Next() {
			var d time.Time
			var g group
			var b []byte
			if err := rows.Scan(&d, &g.calls, &g.errors, &b); err != nil {
				rows.Close()
				return nil, fmt.Errorf("analytics: tool calls: %w", err)
			}
			h, err := decodeHist(b)
			if err != nil {
				rows.Close()
				return nil, err
			}
			g.h = *h
			i := in(d.UTC())
			groups[i].add(&g)
			for k, c := range h {
				sums[i] += float64(c) * middle(k)
			}
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("analytics: tool calls: %w", err)
		}
	}
	out := make([]ToolSpan, n)
	for i := range groups {
		g := &groups[i]
		st := stats(g)
		out[i] = ToolSpan{Calls: g.calls, Errors: g.errors, P50MS: st.P50MS, P95MS: st.P95MS}
		if g.calls > 0 {
			avg := sums[i] / float64(g.calls)
			out[i].AvgMS = &avg
		}
	}
	return out, nil
}

package usage_test

import (
	"math"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/analytics"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/usage"
)

// histBucket is the rollup histogram bucket of a duration (services/analytics/hist.go).
func histBucket(ms float64) int { return int(math.Floor(8*math.Log2(max(ms, 0.25)))) + 16 }

// TestLongPeriodsReadRollups: 30 days of calls, rolled up, then the rolled days' raw
// rows deleted as retention would: the 30-day summary and series still count them,
// equal to the raw figures taken before, with percentiles in the exact value's bucket.
func TestLongPeriodsReadRollups(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	f := newFixture(t, pool)
	tool, other := f.tool(), f.tool()
	const day = 24 * time.Hour
	now := time.Now().UTC()
	to := now.Truncate(day).Add(day)
	from := to.Add(-30 * day)

	// Each day: 18 calls of 10 ms (i%3 of them failed) and 2 of 200 ms; the other tool's
	// calls must not count.
	for i := range 30 {
		d := from.Add(time.Duration(i) * day)
		var es []usage.Entry
		for j := range 20 {
			v := 10.0
			if j >= 18 {
				v = 200
			}
			es = append(es, usage.Entry{ToolID: tool, UsedAt: d.Add(time.Duration(j) * time.Minute), DurationMS: ms(v), Success: j >= i%3},
				usage.Entry{ToolID: other, UsedAt: d.Add(time.Duration(j) * time.Minute), DurationMS: ms(1), Success: false})
		}
		f.insert(es...)
	}
	// The Usage tab's 7 days end at the next 6-hour boundary.
	weekTo := now.Truncate(6 * time.Hour).Add(6 * time.Hour)
	week := weekTo.Add(-7 * day)
	want30, err := usage.Summary(f.ctx, pool, tool, from, to)
	if err != nil {
		t.Fatal(err)
	}
	want7, err := usage.Summary(f.ctx, pool, tool, week, weekTo)
	if err != nil {
		t.Fatal(err)
	}
	wantSeries, err := usage.Series(f.ctx, pool, tool, from, to, 30)
	if err != nil {
		t.Fatal(err)
	}
	if want30.Calls != 600 {
		t.Fatalf("raw 30-day calls %d, want 600", want30.Calls)
	}

	if n, err := analytics.New(pool).RollUp(f.ctx, now); err != nil || n < 28 {
		t.Fatalf("rollup: %d days, %v; want at least 28", n, err)
	}
	tag, err := pool.Exec(f.ctx, `DELETE FROM tool_usage_logs WHERE used_at < (SELECT max(day) + 1 FROM usage_daily_done)::timestamp AT TIME ZONE 'UTC'`)
	if err != nil || tag.RowsAffected() == 0 {
		t.Fatalf("delete the rolled days' calls: %v rows, %v", tag.RowsAffected(), err)
	}

	for _, c := range []struct {
		name     string
		from, to time.Time
		want     usage.Stats
		p50, p95 float64
	}{{"30d", from, to, want30, 10, 200}, {"7d", week, weekTo, want7, 10, 200}} {
		got, err := usage.Summary(f.ctx, pool, tool, c.from, c.to)
		if err != nil {
			t.Fatal(err)
		}
		if got.Calls != c.want.Calls || got.Failures != c.want.Failures || got.Successes != c.want.Successes || got.SuccessRate != c.want.SuccessRate {
			t.Errorf("%s: %d calls, %d failed, rate %v; want %d, %d, %v (the raw figures)", c.name, got.Calls, got.Failures, got.SuccessRate,
				c.want.Calls, c.want.Failures, c.want.SuccessRate)
		}
		if got.P50MS == nil || histBucket(*got.P50MS) != histBucket(c.p50) || got.P95MS == nil || histBucket(*got.P95MS) != histBucket(c.p95) {
			t.Errorf("%s: p50 %s, p95 %s; want in the buckets of %v and %v", c.name, fmtp(got.P50MS), fmtp(got.P95MS), c.p50, c.p95)
		}
		if got.AvgMS == nil || math.Abs(*got.AvgMS-*c.want.AvgMS) > 0.05**c.want.AvgMS {
			t.Errorf("%s: avg %s, want within 5%% of %v", c.name, fmtp(got.AvgMS), *c.want.AvgMS)
		}
		if got.LastUsed == nil || !got.LastUsed.Equal(*c.want.LastUsed) {
			t.Errorf("%s: last used %v, want %v", c.name, got.LastUsed, c.want.LastUsed)
		}
	}

	bs, err := usage.Series(f.ctx, pool, tool, from, to, 30)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != len(wantSeries) {
		t.Fatalf("series: %d buckets, want %d", len(bs), len(wantSeries))
	}
	for i, b := range bs {
		w := wantSeries[i]
		if !b.Start.Equal(w.Start) || !b.End.Equal(w.End) || b.Calls != w.Calls || b.Failures != w.Failures {
			t.Errorf("series bucket %d: %v–%v %d calls %d failed; want %v–%v %d, %d", i, b.Start, b.End, b.Calls, b.Failures,
				w.Start, w.End, w.Calls, w.Failures)
			continue
		}
		if b.P50MS == nil || histBucket(*b.P50MS) != histBucket(*w.P50MS) || b.P95MS == nil || histBucket(*b.P95MS) != histBucket(*w.P95MS) {
			t.Errorf("series bucket %d: p50 %s p95 %s; want in the buckets of %s and %s", i, fmtp(b.P50MS), fmtp(b.P95MS), fmtp(w.P50MS), fmtp(w.P95MS))
		}
	}
}

// A long period's average over calls not rolled up is summed in double precision: in
// single precision (the column's real) 2^24 + (2^24 + 2) is not 2^25 + 2, and the
// average of a tool whose calls add up past 2^24 ms drifted.
func TestLongPeriodAverageIsExact(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	f := newFixture(t, pool)
	tool := f.tool()
	to := time.Now().UTC()
	from := to.Add(-7 * 24 * time.Hour)
	// Both held exactly by a real, and in one latency bucket (summed together).
	f.insert(usage.Entry{ToolID: tool, UsedAt: to.Add(-2 * time.Minute), DurationMS: ms(1 << 24), Success: true},
		usage.Entry{ToolID: tool, UsedAt: to.Add(-time.Minute), DurationMS: ms(1<<24 + 2), Success: true})
	s, err := usage.Summary(f.ctx, pool, tool, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(1<<24 + 1); s.AvgMS == nil || math.Abs(*s.AvgMS-want) > 1e-6 {
		t.Fatalf("7-day average: %s, want %v", fmtp(s.AvgMS), want)
	}
}

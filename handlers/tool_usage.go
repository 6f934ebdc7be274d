package handlers

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
)

// usageRanges are the periods of the Usage tab and their bucket sizes. A period of days
// has a bar a day: a bar that cuts a day reads that day's calls one by one instead of
// its daily rollup (at 200,000 calls a day, a week of calls on every view).
var usageRanges = []usageRange{
	{"24h", "Last 24 hours", "hour", 24 * time.Hour, 24},
	{"7d", "Last 7 days", "day", 7 * 24 * time.Hour, 7},
	{"30d", "Last 30 days", "day", 30 * 24 * time.Hour, 30},
}

type usageRange struct {
	key, label, bucket string
	span               time.Duration
	buckets            int
}

func (h ToolPageHandler) toolUsage(ctx context.Context, it tools.Item, rng string) (*views.ToolUsage, error) {
	// No range is the first; one that is none of them is refused, as /analytics refuses
	// a bad period, not shown as another.
	i := slices.IndexFunc(usageRanges, func(x usageRange) bool { return x.key == rng })
	switch {
	case rng == "":
		i = 0
	case i < 0:
		return nil, verr.New("range", "must be 24h, 7d or 30d")
	}
	r := usageRanges[i]
	u := &views.ToolUsage{Range: r.key, RangeLabel: r.label, BucketLabel: r.bucket}
	for _, x := range usageRanges {
		u.Ranges = append(u.Ranges, views.ToolLink{Key: x.key, Label: strings.TrimPrefix(x.label, "Last "),
			URL: toolTabURL(it.ID, views.ToolTabUsage, url.Values{"range": {x.key}}), Selected: x.key == r.key})
	}
	// Whole buckets: the period ends at the next bucket boundary, so bars line up with
	// round hours and days.
	step := r.span / time.Duration(r.buckets)
	to := time.Now().UTC().Truncate(step).Add(step)
	from := to.Add(-r.span)
	st, err := h.Usage.Summary(ctx, it.ID, from, to)
	if err != nil {
		return nil, err
	}
	u.Calls, u.Failures, u.LastUsed = st.Calls, st.Failures, st.LastUsed
	if st.Calls == 0 {
		return u, nil
	}
	u.SuccessRate = percent(st.SuccessRate)
	u.P50, u.P95, u.Avg = msPtr(st.P50MS), msPtr(st.P95MS), msPtr(st.AvgMS)
	buckets, err := h.Usage.Series(ctx, it.ID, from, to, r.buckets)
	if err != nil {
		return nil, err
	}
	ok := views.ChartSeries{Label: "Succeeded", Class: "chart-bar-ok"}
	failed := views.ChartSeries{Label: "Failed", Class: "chart-bar-fail"}
	p50 := views.ChartSeries{Label: "p50", Class: "chart-line-p50"}
	p95 := views.ChartSeries{Label: "p95", Class: "chart-line-p95"}
	for _, b := range buckets {
		ok.Points = append(ok.Points, views.ChartPoint{T: b.Start, V: float64(b.Calls - b.Failures)})
		failed.Points = append(failed.Points, views.ChartPoint{T: b.Start, V: float64(b.Failures)})
		p50.Points = append(p50.Points, latencyPoint(b.Start, b.P50MS))
		p95.Points = append(p95.Points, latencyPoint(b.Start, b.P95MS))
		u.Series = append(u.Series, views.ToolUsagePoint{Label: b.Start.Format("Jan 2 15:04"), Calls: b.Calls, Failures: b.Failures,
			P50: msPtr(b.P50MS), P95: msPtr(b.P95MS)})
	}
	u.CallsChart = views.Chart{ID: "usage-calls", Title: "Calls per " + r.bucket, Unit: "calls", Series: []views.ChartSeries{ok, failed},
		From: from, To: to, Step: step, Stacked: true, Integer: true}
	u.LatencyChart = views.Chart{ID: "usage-latency", Title: "Latency", Unit: "ms", Series: []views.ChartSeries{p50, p95},
		From: from, To: to, Step: step, Empty: "No timed calls in this period"}
	return u, nil
}

func latencyPoint(t time.Time, v *float64) views.ChartPoint {
	if v == nil {
		return views.ChartPoint{T: t, Missing: true}
	}
	return views.ChartPoint{T: t, V: *v}
}

// percent shows a success rate to a tenth; below 100 it never rounds up to it: one
// failure in 2,000 calls is 99.9%, not 100% beside "1 failure".
func percent(r float64) string {
	p := r * 100
	if p == math.Trunc(p) {
		return fmt.Sprintf("%.0f%%", p)
	}
	return fmt.Sprintf("%.1f%%", min(p, 99.9))
}

// msPtr formats a latency in milliseconds; "—" when there is none.
func msPtr(v *float64) string {
	if v == nil {
		return "—"
	}
	switch ms := *v; {
	case ms >= 1000:
		return fmt.Sprintf("%.2f s", ms/1000)
	case ms < 10:
		return fmt.Sprintf("%.2f ms", ms)
	default:
		return fmt.Sprintf("%.0f ms", ms)
	}
}

// Logs.

const toolLogsPerPage = 50

// olderThan reads a tab's before parameter, the id of the last row of the page before
// (0 for the newest page); what names the rows.
func olderThan(before, what string) (int64, error) {
	if before == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(before, 10, 64)
	if err != nil || n < 0 {
		return 0, verr.New("before", "must be the id of "+what+" (from the Older link)")
	}
	return n, nil
}

// toolLogs is a page of the tool's calls, only those of the user with id *only when set.
func (h ToolPageHandler) toolLogs(ctx context.Context, it tools.Item, only *string, before string) (*views.ToolLogs, error) {
	beforeID, err := olderThan(before, "a call")
	if err != nil {
		return nil, err
	}
	logs, next, err := h.Usage.RecentOf(ctx, it.ID, only, beforeID, toolLogsPerPage)
	if err != nil {
		return nil, err
	}
	l := &views.ToolLogs{OnlyOwn: only != nil}
	if next > 0 {
		l.OlderURL = toolTabURL(it.ID, views.ToolTabLogs, url.Values{"before": {strconv.FormatInt(next, 10)}})
	}
	if beforeID > 0 {
		l.NewestURL = toolTabURL(it.ID, views.ToolTabLogs, nil)
	}
	for _, g := range logs {
		l.Rows = append(l.Rows, views.ToolLogRow{ID: g.ID, At: g.UsedAt, Actor: g.Actor, Source: g.Source, Duration: msPtr(g.DurationMS),
			Success: g.Success, ErrorCode: g.ErrorCode, Request: indentJSON(g.Request), Response: indentJSON(g.Response),
			Error: indentJSON(g.Error), Truncated: g.RequestTruncated || g.Truncated || g.ErrorTruncated})
	}
	return l, nil
}

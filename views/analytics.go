package views

import (
	"fmt"
	"math"

	"github.com/toolwarden/toolwarden/services/analytics"
)

// AnalyticsPage is /analytics: a period's report, its charts and the periods to pick.
type AnalyticsPage struct {
	Layout       Layout
	Report       *analytics.Report
	Days         int // the period in days; 0 for one given by from and to
	Ranges       []ToolLink
	CallsChart   Chart
	LatencyChart Chart
}

// msText is a latency for a table ("—" when none).
func msText(v *float64) string {
	if v == nil {
		return "—"
	}
	if *v >= 1000 {
		return fmt.Sprintf("%.2f s", *v/1000)
	}
	return fmt.Sprintf("%.1f ms", *v)
}

// secondsText is an approval wait for a table.
func secondsText(v *float64) string {
	if v == nil {
		return "—"
	}
	switch s := *v; {
	case s >= 3600:
		return fmt.Sprintf("%.1f h", s/3600)
	case s >= 60:
		return fmt.Sprintf("%.1f min", s/60)
	default:
		return fmt.Sprintf("%.0f s", math.Round(s))
	}
}

func rateText(r float64) string { return fmt.Sprintf("%.1f%%", r*100) }

// recommendationTitle names a recommendation's kind.
func recommendationTitle(kind string) string {
	switch kind {
	case "unused":
		return "Unused"
	case "failing":
		return "Failing"
	case "raise_risk":
		return "Raise risk?"
	case "lower_risk":
		return "Lower risk?"
	}
	return kind
}

func periodText(p AnalyticsPage) string {
	if p.Days > 0 {
		return fmt.Sprintf("the last %d days", p.Days)
	}
	return p.Report.From.Format("2006-01-02 15:04") + " to " + p.Report.To.Format("2006-01-02 15:04") + " UTC"
}

// approvals, waitP50 and waitP95 read a row's approval waits (none when it has none).
func approvals(r analytics.Row) int64 {
	if r.Waits == nil {
		return 0
	}
	return r.Approvals
}

func waitP50(r analytics.Row) *float64 {
	if r.Waits == nil {
		return nil
	}
	return r.P50S
}

func waitP95(r analytics.Row) *float64 {
	if r.Waits == nil {
		return nil
	}
	return r.P95S
}

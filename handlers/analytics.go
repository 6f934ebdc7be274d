package handlers

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/toolwarden/toolwarden/services/analytics"
	"github.com/toolwarden/toolwarden/services/verr"
	"github.com/toolwarden/toolwarden/views"
)

// AnalyticsHandler serves /analytics and GET /api/v1/analytics: what the calls and
// approvals of a period add up to, and the recommendations drawn from them. One report
// per person and two in the process run at once (analytics.Service.ReportBy refuses
// more: 429).
type AnalyticsHandler struct {
	*Shell
	Analytics *analytics.Service
}

// analyticsRanges are the page's periods, in days.
var analyticsRanges = []int{7, 30, 90}

// period reads ?days=N (1–366, default 30) or ?from=&to= (RFC 3339).
func analyticsPeriod(q url.Values, now time.Time) (analytics.Period, int, error) {
	var e verr.Error
	if q.Get("from") != "" || q.Get("to") != "" {
		from, err1 := time.Parse(time.RFC3339, q.Get("from"))
		to, err2 := time.Parse(time.RFC3339, q.Get("to"))
		if err1 != nil {
			e.Add("from", "must be a time such as 2026-11-01T00:00:00Z")
		}
		if err2 != nil {
			e.Add("to", "must be a time such as 2026-11-28T00:00:00Z")
		}
		if err := e.Err(); err != nil {
			return analytics.Period{}, 0, err
		}
		p := analytics.Period{From: from, To: to}
		return p, 0, p.Check()
	}
	days := 30
	if s := q.Get("days"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 366 {
			e.Add("days", "must be a number of days from 1 to 366")
			return analytics.Period{}, 0, e.Err()
		}
		days = n
	}
	return analytics.LastDays(now, days), days, nil
}

// API answers GET /api/v1/analytics.
func (h AnalyticsHandler) API(c echo.Context) error {
	now := time.Now()
	p, _, err := analyticsPeriod(c.QueryParams(), now)
	if err != nil {
		return err
	}
	r, err := h.Analytics.ReportBy(c.Request().Context(), ActorOf(c), p, now)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

// Page renders /analytics.
func (h AnalyticsHandler) Page(c echo.Context) error {
	now := time.Now()
	p, days, err := analyticsPeriod(c.QueryParams(), now)
	if err != nil {
		return err
	}
	r, err := h.Analytics.ReportBy(c.Request().Context(), ActorOf(c), p, now)
	if err != nil {
		return err
	}
	page := views.AnalyticsPage{Layout: h.layout(c, "Analytics"), Report: r, Days: days}
	for _, d := range analyticsRanges {
		page.Ranges = append(page.Ranges, views.ToolLink{Key: strconv.Itoa(d), Label: strconv.Itoa(d) + " days",
			URL: "/analytics?days=" + strconv.Itoa(d), Selected: d == days})
	}
	ok := views.ChartSeries{Label: "Succeeded", Class: "chart-bar-ok"}
	failed := views.ChartSeries{Label: "Failed", Class: "chart-bar-fail"}
	p50 := views.ChartSeries{Label: "p50", Class: "chart-line-p50"}
	p95 := views.ChartSeries{Label: "p95", Class: "chart-line-p95"}
	for _, d := range r.Days {
		t, _ := time.Parse(time.DateOnly, d.Key)
		ok.Points = append(ok.Points, views.ChartPoint{T: t, V: float64(d.Calls - d.Errors)})
		failed.Points = append(failed.Points, views.ChartPoint{T: t, V: float64(d.Errors)})
		p50.Points = append(p50.Points, latencyPoint(t, d.P50MS))
		p95.Points = append(p95.Points, latencyPoint(t, d.P95MS))
	}
	from := r.From.Truncate(24 * time.Hour)
	page.CallsChart = views.Chart{ID: "analytics-calls", Title: "Calls per day", Unit: "calls", Series: []views.ChartSeries{ok, failed},
		From: from, To: r.To, Step: 24 * time.Hour, Stacked: true, Integer: true, Empty: "No calls in this period"}
	page.LatencyChart = views.Chart{ID: "analytics-latency", Title: "Latency per day", Unit: "ms", Series: []views.ChartSeries{p50, p95},
		From: from, To: r.To, Step: 24 * time.Hour, Empty: "No timed calls in this period"}
	return render(c, http.StatusOK, views.Analytics(page))
}

package views

import (
	"bytes"
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
)

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi  float64
		target  int
		integer bool
		want    []float64
	}{
		{0, 100, 5, false, []float64{0, 20, 40, 60, 80, 100}},
		{0, 87, 5, false, []float64{0, 20, 40, 60, 80, 100}},
		{0, 1234, 5, false, []float64{0, 500, 1000, 1500}},
		{0, 0.7, 5, false, []float64{0, 0.2, 0.4, 0.6, 0.8}},
		{0, 0.3, 3, false, []float64{0, 0.1, 0.2, 0.3}},
		{0, 3, 5, true, []float64{0, 1, 2, 3}}, // counts: no 0.5 steps
		{0, 0, 5, true, []float64{0, 1}},       // no data range
		{0, 0, 5, false, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{5, 5, 5, false, []float64{5, 5.2, 5.4, 5.6, 5.8, 6}},
		{-3, 7, 5, false, []float64{-4, -2, 0, 2, 4, 6, 8}},
		{0, 1, 1, false, []float64{0, 1}},
		{0, 95000, 4, true, []float64{0, 50000, 100000}},
		{0, math.NaN(), 5, false, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
	} {
		got := NiceTicks(c.lo, c.hi, c.target, c.integer)
		if !slices.Equal(got, c.want) {
			t.Errorf("NiceTicks(%v, %v, %d, %v) = %v, want %v", c.lo, c.hi, c.target, c.integer, got, c.want)
		}
		// Invariants: they cover the range, steps are equal.
		if len(got) < 2 || got[0] > c.lo || (!math.IsNaN(c.hi) && got[len(got)-1] < c.hi) {
			t.Errorf("NiceTicks(%v, %v) = %v does not cover the range", c.lo, c.hi, got)
		}
	}
}

func TestTickLabels(t *testing.T) {
	for _, c := range []struct {
		v, step, top float64
		unit         string
		want         string
	}{
		{0, 20, 100, "ms", "0"},
		{40, 20, 100, "ms", "40 ms"},
		{0.4, 0.2, 1, "ms", "0.4 ms"},
		{1500, 500, 1500, "ms", "1.5 s"},
		{500, 500, 1500, "ms", "0.5 s"},
		{0, 500, 1500, "ms", "0"},
		{2000, 1000, 5000, "ms", "2 s"},
		{5000, 5000, 20000, "calls", "5k"},
		{3, 1, 5, "calls", "3"},
	} {
		if got := tickLabel(c.v, c.step, c.top, c.unit); got != c.want {
			t.Errorf("tickLabel(%v, %v, %v, %q) = %q, want %q", c.v, c.step, c.top, c.unit, got, c.want)
		}
	}
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{
		{12.345, "ms", "12.3 ms"},
		{0.5, "ms", "0.5 ms"},
		{1234, "ms", "1.23 s"},
		{123456, "ms", "123 s"},
		{1, "calls", "1 call"},
		{12345, "calls", "12,345 calls"},
		{0.001234, "", "0.001"},
		{7, "req/s", "7 req/s"},
	} {
		if got := FormatChartValue(c.v, c.unit); got != c.want {
			t.Errorf("FormatChartValue(%v, %q) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
}

func TestTimeTicks(t *testing.T) {
	from := time.Date(2025, 3, 1, 10, 7, 13, 0, time.UTC)
	ticks, step := TimeTicks(from, from.Add(time.Hour), 6, nil)
	if step != 15*time.Minute {
		t.Errorf("an hour: step %v, want 15m", step)
	}
	want := []string{"10:15", "10:30", "10:45", "11:00"}
	var got []string
	for _, tk := range ticks {
		got = append(got, tk.Format("15:04"))
	}
	if !slices.Equal(got, want) {
		t.Errorf("an hour: ticks %v, want %v", got, want)
	}

	// A week: whole days at local midnight.
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no tzdata:", err)
	}
	ticks, step = TimeTicks(from, from.Add(7*24*time.Hour), 6, paris)
	if step != 2*24*time.Hour || len(ticks) == 0 {
		t.Fatalf("a week: step %v, %d ticks", step, len(ticks))
	}
	for _, tk := range ticks {
		if tk.Hour() != 0 || tk.Minute() != 0 || tk.Location() != paris || tk.Before(from) {
			t.Errorf("a week: tick %v is not a local midnight in the period", tk)
		}
	}
	// Never more than asked, for any span.
	for _, span := range []time.Duration{time.Second, 90 * time.Second, 7 * time.Hour, 30 * time.Hour, 400 * 24 * time.Hour} {
		ticks, _ := TimeTicks(from, from.Add(span), 6, nil)
		if len(ticks) > 6 {
			t.Errorf("span %v: %d ticks", span, len(ticks))
		}
	}
	if ticks, _ := TimeTicks(from, from, 6, nil); len(ticks) != 1 {
		t.Errorf("empty span: %d ticks", len(ticks))
	}
}

func buckets(from time.Time, step time.Duration, vals ...float64) []ChartPoint {
	var pts []ChartPoint
	for i, v := range vals {
		p := ChartPoint{T: from.Add(time.Duration(i) * step), V: v}
		if math.IsNaN(v) {
			p = ChartPoint{T: p.T, Missing: true}
		}
		pts = append(pts, p)
	}
	return pts
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func TestLineGeometryScalesAndBreaksAtGaps(t *testing.T) {
	from := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	gap := math.NaN()
	c := Chart{Title: "Latency", Unit: "ms", From: from, To: from.Add(60 * time.Minute), Step: 10 * time.Minute,
		Series: []ChartSeries{
			{Label: "p50", Class: "chart-line-p50", Points: buckets(from, 10*time.Minute, 10, 20, gap, 40, gap, 80)},
			{Label: "p95", Points: buckets(from, 10*time.Minute, 30, 90, gap, gap, gap, gap)},
		}}
	g := LineGeometry(c)
	if g.Empty || g.ID != "chart-latency" {
		t.Fatalf("empty %v, id %q", g.Empty, g.ID)
	}
	// y: 0..100 in ticks of 20; x: the hour over the plot's width.
	if len(g.YTicks) != 6 || g.YTicks[0].Label != "0" || g.YTicks[5].Label != "100 ms" {
		t.Errorf("y ticks %+v", g.YTicks)
	}
	bottom, top := g.Plot.Y+g.Plot.H, g.Plot.Y
	if !near(g.YTicks[0].Pos, bottom) || !near(g.YTicks[5].Pos, top) {
		t.Errorf("y ticks span %v..%v, want %v..%v", g.YTicks[0].Pos, g.YTicks[5].Pos, bottom, top)
	}
	p50 := g.Lines[0]
	if p50.Class != "chart-line-p50" || g.Lines[1].Class != "chart-series-2" {
		t.Errorf("classes %q %q", p50.Class, g.Lines[1].Class)
	}
	// 10, 20 | 40 | 80: three segments (two of one point), four dots.
	if len(p50.Segments) != 3 || len(p50.Segments[0]) != 2 || len(p50.Segments[1]) != 1 || len(p50.Dots) != 4 {
		t.Fatalf("p50 segments %v, %d dots", p50.Segments, len(p50.Dots))
	}
	if p50.Dots[0].Alone || p50.Dots[1].Alone || !p50.Dots[2].Alone || !p50.Dots[3].Alone || p50.Dense {
		t.Errorf("lone dots / dense: %+v, dense %v", p50.Dots, p50.Dense)
	}
	first, last := p50.Segments[0][0], p50.Segments[2][0]
	if !near(first.X, g.Plot.X) || !near(first.Y, bottom-0.1*g.Plot.H) {
		t.Errorf("10 ms at 10:00 drawn at %+v", first)
	}
	if !near(last.X, g.Plot.X+g.Plot.W*50/60) || !near(last.Y, bottom-0.8*g.Plot.H) {
		t.Errorf("80 ms at 10:50 drawn at %+v", last)
	}
	if tip := p50.Dots[3].Tip; tip != "p50: 80 ms at Mar 1 10:50 UTC" {
		t.Errorf("tooltip %q", tip)
	}
	if len(g.XTicks) == 0 || g.XTicks[0].Label != "10:00" || !near(g.XTicks[0].Pos, g.Plot.X) {
		t.Errorf("x ticks %+v", g.XTicks)
	}
	if !strings.Contains(g.Summary, "p50: 4 of 6 points with data, lowest 10 ms, highest 80 ms, latest 80 ms") {
		t.Errorf("summary %q", g.Summary)
	}
}

func TestLineGeometryEmptyAndSinglePoint(t *testing.T) {
	from := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	for name, c := range map[string]Chart{
		"no series":      {Title: "Latency", From: from, To: from.Add(time.Hour)},
		"all missing":    {Title: "Latency", Series: []ChartSeries{{Label: "p50", Points: buckets(from, time.Minute, math.NaN(), math.NaN())}}},
		"no points":      {Title: "Latency", Series: []ChartSeries{{Label: "p50"}}},
		"nothing at all": {},
	} {
		g := LineGeometry(c)
		if !g.Empty || g.EmptyText != "No calls in this period" || len(g.Lines) != 0 || len(g.YTicks) != 0 {
			t.Errorf("%s: empty %v %q, %d lines, %d y ticks", name, g.Empty, g.EmptyText, len(g.Lines), len(g.YTicks))
		}
		if !strings.Contains(g.Summary, "No calls in this period") {
			t.Errorf("%s: summary %q", name, g.Summary)
		}
	}
	if g := LineGeometry(Chart{Empty: "Nothing yet"}); g.EmptyText != "Nothing yet" {
		t.Errorf("custom empty text %q", g.EmptyText)
	}

	// One point, no period: centred, one dot, a one-point segment.
	g := LineGeometry(Chart{Title: "Latency", Unit: "ms", Series: []ChartSeries{{Label: "p50", Points: []ChartPoint{{T: from, V: 42}}}}})
	if g.Empty || len(g.Lines) != 1 || len(g.Lines[0].Dots) != 1 || len(g.Lines[0].Segments) != 1 {
		t.Fatalf("single point: %+v", g)
	}
	d := g.Lines[0].Dots[0]
	if !near(d.X, g.Plot.X+g.Plot.W/2) || d.Y <= g.Plot.Y || d.Y >= g.Plot.Y+g.Plot.H {
		t.Errorf("single point at %+v, plot %+v", d, g.Plot)
	}
	// Many points: the dots hide until hovered.
	many := make([]float64, chartDenseDots+1)
	if g := LineGeometry(Chart{Series: []ChartSeries{{Points: buckets(from, time.Minute, many...)}}}); !g.Lines[0].Dense {
		t.Errorf("%d points: not dense", len(many))
	}
	// All zeros is data (calls that took no time), drawn on the baseline.
	g = LineGeometry(Chart{Series: []ChartSeries{{Points: buckets(from, time.Minute, 0, 0)}}})
	if g.Empty || !near(g.Lines[0].Dots[0].Y, g.Plot.Y+g.Plot.H) {
		t.Errorf("zeros: empty %v, dots %+v", g.Empty, g.Lines[0].Dots)
	}
}

func TestBarGeometry(t *testing.T) {
	from := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	step := 15 * time.Minute
	ok := ChartSeries{Label: "Succeeded", Class: "chart-bar-ok", Points: buckets(from, step, 3, 0, 5, 1)}
	failed := ChartSeries{Label: "Failed", Class: "chart-bar-fail", Points: buckets(from, step, 1, 0, 0, 2)}
	c := Chart{Title: "Calls", Unit: "calls", Integer: true, Stacked: true, Series: []ChartSeries{ok, failed}}

	g := BarGeometry(c)
	// Domain inferred: 10:00 to 11:00 (last bucket plus its step); four slots of 15 min.
	slot := g.Plot.W / 4
	if len(g.Bars) != 5 { // 3+1, -, 5, 1+2: zero values draw nothing
		t.Fatalf("%d bars: %+v", len(g.Bars), g.Bars)
	}
	y0 := g.Plot.Y + g.Plot.H
	top := g.YTicks[len(g.YTicks)-1]
	if len(g.YTicks) != 6 || top.Label != "5" { // 0..5 for the tallest stack, 5 at 10:30
		t.Errorf("y ticks %+v", g.YTicks)
	}
	unit := g.Plot.H / 5
	b0, b1 := g.Bars[0], g.Bars[1] // 10:00: ok 3 at the bottom, failed 1 on top
	if b0.Class != "chart-bar-ok" || b1.Class != "chart-bar-fail" {
		t.Errorf("stack order %q, %q", b0.Class, b1.Class)
	}
	if !near(b0.Y+b0.H, y0) || !near(b0.H, 3*unit) || !near(b1.Y+b1.H, b0.Y) || !near(b1.H, unit) {
		t.Errorf("stack at 10:00: %+v %+v (unit %v)", b0, b1, unit)
	}
	if b0.X < g.Plot.X || b0.X+b0.W > g.Plot.X+slot || b0.W < slot/2 {
		t.Errorf("bar at 10:00 spans %v..%v, slot %v..%v", b0.X, b0.X+b0.W, g.Plot.X, g.Plot.X+slot)
	}
	if g.Bars[2].X < g.Plot.X+2*slot || g.Bars[2].X+g.Bars[2].W > g.Plot.X+3*slot {
		t.Errorf("bar at 10:30 outside its slot: %+v", g.Bars[2])
	}
	if tip := b1.Tip; tip != "Failed: 1 call, Mar 1 10:00–10:15 UTC" {
		t.Errorf("tooltip %q", tip)
	}
	if !strings.Contains(g.Summary, "Succeeded: 9 calls in all, at most 5 calls (Mar 1 10:30 UTC)") || !strings.Contains(g.Summary, "Failed: 3 calls in all") {
		t.Errorf("summary %q", g.Summary)
	}
	for _, tk := range g.YTicks {
		if strings.Contains(tk.Label, ".") {
			t.Errorf("count axis has a fractional tick %q", tk.Label)
		}
	}

	// Side by side: two thinner bars in one slot, each from the baseline.
	c.Stacked = false
	g = BarGeometry(c)
	a, b := g.Bars[0], g.Bars[1]
	if !near(a.Y+a.H, y0) || !near(b.Y+b.H, y0) || !near(a.X+a.W, b.X) || !near(a.W, b.W) {
		t.Errorf("side by side: %+v %+v", a, b)
	}

	// No calls: the empty state, even with a period and zero-valued buckets.
	g = BarGeometry(Chart{Title: "Calls", From: from, To: from.Add(time.Hour), Series: []ChartSeries{{Label: "Calls", Points: buckets(from, step, 0, 0, 0, 0)}}})
	if !g.Empty || len(g.Bars) != 0 || len(g.XTicks) == 0 {
		t.Errorf("no calls: empty %v, %d bars, %d x ticks", g.Empty, len(g.Bars), len(g.XTicks))
	}
	// One bucket alone gets the whole width (less padding).
	g = BarGeometry(Chart{Series: []ChartSeries{{Points: []ChartPoint{{T: from, V: 2}}}}})
	if len(g.Bars) != 1 || g.Bars[0].W < g.Plot.W/2 {
		t.Errorf("single bar: %+v", g.Bars)
	}
}

func TestChartsRender(t *testing.T) {
	from := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	evil := `<script>alert(1)</script>`
	c := Chart{ID: "lat", Title: "Latency " + evil, Unit: "ms", From: from, To: from.Add(time.Hour), Step: 10 * time.Minute,
		Series: []ChartSeries{{Label: "p50 " + evil, Class: "chart-line-p50", Points: buckets(from, 10*time.Minute, 10, 20, math.NaN(), 40)}}}
	var buf bytes.Buffer
	if err := LineChart(c).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	if strings.Contains(html, "<script>") {
		t.Fatalf("unescaped text in the chart:\n%s", html)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(html))
	if err != nil {
		t.Fatal(err)
	}
	svg := doc.Find("figure#lat.chart.chart-kind-line svg.chart-svg")
	if svg.Length() != 1 {
		t.Fatalf("no svg:\n%s", html)
	}
	if role, _ := svg.Attr("role"); role != "img" {
		t.Errorf("role %q", role)
	}
	if by, _ := svg.Attr("aria-labelledby"); by != "lat-title lat-desc" {
		t.Errorf("aria-labelledby %q", by)
	}
	if vb, _ := svg.Attr("viewBox"); vb != "0 0 640 240" {
		t.Errorf("viewBox %q", vb)
	}
	if w, _ := svg.Attr("width"); w != "100%" {
		t.Errorf("width %q", w)
	}
	if got := svg.Find("title#lat-title").Text(); got != "Latency "+evil {
		t.Errorf("title %q", got)
	}
	if svg.Find("desc#lat-desc").Text() == "" {
		t.Error("no description")
	}
	if n := svg.Find("g.chart-line-p50 polyline.chart-line").Length(); n != 2 {
		t.Errorf("%d polylines, want 2 (a gap at 10:20)", n)
	}
	if n := svg.Find("circle.chart-point > title").Length(); n != 3 {
		t.Errorf("%d dot tooltips, want 3", n)
	}
	if n := svg.Find("circle.chart-point-alone").Length(); n != 1 {
		t.Errorf("%d lone dots, want 1 (40 ms at 10:30)", n)
	}
	if n := svg.Find("g.chart-axis-y text").Length(); n < 3 {
		t.Errorf("%d y labels", n)
	}
	if n := svg.Find("g.chart-axis-x text").Length(); n < 3 {
		t.Errorf("%d x labels", n)
	}
	if got := doc.Find(".chart-legend li").Text(); got != "p50 "+evil {
		t.Errorf("legend %q", got)
	}

	buf.Reset()
	if err := BarChart(Chart{ID: "calls", Title: "Calls", From: from, To: from.Add(time.Hour)}).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	doc, _ = goquery.NewDocumentFromReader(strings.NewReader(buf.String()))
	if got := doc.Find("svg [data-testid=chart-empty]").Text(); got != "No calls in this period" {
		t.Errorf("empty state %q in\n%s", got, buf.String())
	}
	if doc.Find("figure.chart-is-empty").Length() != 1 || doc.Find("rect.chart-bar").Length() != 0 || doc.Find(".chart-legend").Length() != 0 {
		t.Errorf("empty bar chart:\n%s", buf.String())
	}
}

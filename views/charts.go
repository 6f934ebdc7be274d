package views

// Server-rendered SVG charts (a tool's Usage tab). The geometry is computed here, in
// pure Go, and charts.templ only draws it: no JavaScript, no I/O, every text escaped.

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ChartPoint is one value at one time. Missing marks a gap (no data at T): a line
// breaks there and a bar is left out.
type ChartPoint struct {
	T       time.Time
	V       float64
	Missing bool
}

// ChartSeries is one line, or one colour of bars. Class picks its colour
// (chart-line-p50, chart-line-p95, chart-bar-ok, chart-bar-fail, or chart-series-1..4;
// empty: chart-series-N by position).
type ChartSeries struct {
	Label  string
	Class  string
	Points []ChartPoint
}

// Chart is the view model of LineChart and BarChart.
type Chart struct {
	// ID prefixes the element ids; it must be unique on the page (default: from Title).
	ID    string
	Title string
	// Unit of the values: "ms" (shown as ms or s), "calls", or "" for plain numbers.
	Unit   string
	Series []ChartSeries
	// From and To are the x axis; zero: the span of the points (plus one Step for bars).
	From, To time.Time
	// Step is the width of one bucket: bars are drawn over [T, T+Step). Zero: the
	// smallest distance between points, else (To-From)/points.
	Step time.Duration
	// Stacked stacks the bar series on each other (calls = ok + failed) instead of
	// drawing them side by side.
	Stacked bool
	// Integer: the values are counts, so the y ticks are whole numbers.
	Integer bool
	// Empty is the text shown when there is no data (default "No calls in this period").
	Empty string
	// Location of the time labels (default UTC).
	Location *time.Location
}

// The drawing area, in viewBox units; the SVG scales to its container's width.
const (
	chartW      = 640.0
	chartH      = 240.0
	chartLeft   = 60.0
	chartRight  = 14.0
	chartTop    = 12.0
	chartBottom = 30.0
	// chartYTicks and chartXTicks are how many ticks the axes aim for.
	chartYTicks = 5
	chartXTicks = 6
)

// ChartRect is a rectangle in viewBox units.
type ChartRect struct{ X, Y, W, H float64 }

// ChartTick is one labelled position on an axis (Pos is y on the y axis, x on the x axis).
type ChartTick struct {
	Pos   float64
	Label string
}

// ChartXY is a position in viewBox units.
type ChartXY struct{ X, Y float64 }

// ChartDot is a data point with its tooltip. Alone: it has no neighbour to draw a
// line to, so its dot is all that shows it.
type ChartDot struct {
	X, Y  float64
	Tip   string
	Alone bool
}

// ChartLine is one series of a line chart: polylines between the gaps, and its dots.
// Dense: too many dots to show them all; they appear under the pointer (the lone ones
// always do).
type ChartLine struct {
	Label, Class string
	Segments     [][]ChartXY
	Dots         []ChartDot
	Dense        bool
}

// chartDenseDots is the number of dots above which a line hides them.
const chartDenseDots = 40

// ChartBar is one bar (or one segment of a stacked bar).
type ChartBar struct {
	X, Y, W, H float64
	Class, Tip string
}

// ChartLegendItem is one entry of the legend.
type ChartLegendItem struct{ Label, Class string }

// ChartGeometry is everything the templates draw, in viewBox units.
type ChartGeometry struct {
	ID        string
	ViewBox   string
	Plot      ChartRect
	YTicks    []ChartTick
	XTicks    []ChartTick
	Lines     []ChartLine
	Bars      []ChartBar
	Legend    []ChartLegendItem
	Empty     bool
	EmptyText string
	// Summary describes the data in words, for screen readers (<desc>).
	Summary string
}

// chartID is c.ID, or one made from the title.
func (c Chart) chartID() string {
	if c.ID != "" {
		return c.ID
	}
	var b strings.Builder
	b.WriteString("chart")
	dash := true
	for _, r := range strings.ToLower(c.Title) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		} else {
			dash = true
		}
	}
	return b.String()
}

func (c Chart) loc() *time.Location {
	if c.Location == nil {
		return time.UTC
	}
	return c.Location
}

func (c Chart) emptyText() string {
	if c.Empty == "" {
		return "No calls in this period"
	}
	return c.Empty
}

func seriesClass(s ChartSeries, i int) string {
	if s.Class != "" {
		return s.Class
	}
	return fmt.Sprintf("chart-series-%d", i%4+1)
}

// step is the bucket width: c.Step, else the smallest gap between distinct times,
// else the period over the number of points, else a minute.
func (c Chart) step(times []time.Time) time.Duration {
	if c.Step > 0 {
		return c.Step
	}
	var best time.Duration
	for i := 1; i < len(times); i++ {
		if d := times[i].Sub(times[i-1]); d > 0 && (best == 0 || d < best) {
			best = d
		}
	}
	if best > 0 {
		return best
	}
	if !c.From.IsZero() && c.To.After(c.From) && len(times) > 0 {
		return c.To.Sub(c.From) / time.Duration(len(times))
	}
	return time.Minute
}

// times lists the distinct instants of all series, oldest first.
func (c Chart) times() []time.Time {
	seen := map[int64]bool{}
	var ts []time.Time
	for _, s := range c.Series {
		for _, p := range s.Points {
			if k := p.T.UnixNano(); !seen[k] {
				seen[k] = true
				ts = append(ts, p.T)
			}
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	return ts
}

// domain is the x axis: From/To when set, else the points' span (widened by one step
// for bars, and around a lone instant so it sits in the middle).
func (c Chart) domain(times []time.Time, step time.Duration, bars bool) (time.Time, time.Time) {
	from, to := c.From, c.To
	if from.IsZero() && len(times) > 0 {
		from = times[0]
	}
	if to.IsZero() && len(times) > 0 {
		to = times[len(times)-1]
		if bars {
			to = to.Add(step)
		}
	}
	if !to.After(from) {
		if from.IsZero() {
			from = time.Unix(0, 0)
		}
		from, to = from.Add(-step/2), from.Add(step-step/2)
		if !to.After(from) {
			to = from.Add(time.Minute)
		}
	}
	return from, to
}

// base is what both chart kinds share: plot area, x ticks, legend.
func (c Chart) base(from, to time.Time) ChartGeometry {
	g := ChartGeometry{
		ID:        c.chartID(),
		ViewBox:   fmt.Sprintf("0 0 %g %g", chartW, chartH),
		Plot:      ChartRect{X: chartLeft, Y: chartTop, W: chartW - chartLeft - chartRight, H: chartH - chartTop - chartBottom},
		EmptyText: c.emptyText(),
	}
	ticks, step := TimeTicks(from, to, chartXTicks, c.loc())
	span := to.Sub(from)
	for _, t := range ticks {
		g.XTicks = append(g.XTicks, ChartTick{Pos: g.xAt(t, from, to), Label: timeLabel(t, step, span)})
	}
	for i, s := range c.Series {
		g.Legend = append(g.Legend, ChartLegendItem{Label: s.Label, Class: seriesClass(s, i)})
	}
	return g
}

func (g *ChartGeometry) xAt(t, from, to time.Time) float64 {
	return g.Plot.X + float64(t.Sub(from))/float64(to.Sub(from))*g.Plot.W
}

// yAxis sets the y ticks for values up to hi and returns the value → y mapping.
func (g *ChartGeometry) yAxis(lo, hi float64, integer bool, unit string) func(float64) float64 {
	vals := NiceTicks(lo, hi, chartYTicks, integer)
	bottom, top := vals[0], vals[len(vals)-1]
	y := func(v float64) float64 { return g.Plot.Y + g.Plot.H - (v-bottom)/(top-bottom)*g.Plot.H }
	step := 1.0
	if len(vals) > 1 {
		step = vals[1] - vals[0]
	}
	for _, v := range vals {
		g.YTicks = append(g.YTicks, ChartTick{Pos: y(v), Label: tickLabel(v, step, top, unit)})
	}
	return y
}

func (c Chart) stamp(t time.Time) string { return t.In(c.loc()).Format("Jan 2 15:04 MST") }

// span formats a bucket: "Mar 1 10:00–10:10 UTC", or with both days when it crosses
// midnight.
func (c Chart) span(from, to time.Time) string {
	from, to = from.In(c.loc()), to.In(c.loc())
	if from.YearDay() == to.YearDay() && from.Year() == to.Year() {
		return from.Format("Jan 2 15:04") + "–" + to.Format("15:04 MST")
	}
	return from.Format("Jan 2 15:04") + " – " + to.Format("Jan 2 15:04 MST")
}

func usable(p ChartPoint) bool { return !p.Missing && !math.IsNaN(p.V) && !math.IsInf(p.V, 0) }

// chartNum formats a coordinate for an SVG attribute.
func chartNum(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

// chartPoints is a polyline's points attribute.
func chartPoints(seg []ChartXY) string {
	var b strings.Builder
	for i, p := range seg {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(chartNum(p.X))
		b.WriteByte(',')
		b.WriteString(chartNum(p.Y))
	}
	return b.String()
}

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

// NiceTicks returns round tick values (steps of 1, 2 or 5 times a power of ten, whole
// numbers when integer) that cover [lo, hi] with about target intervals. The first
// and last ticks are the axis's ends. An empty range becomes [lo, lo+1].
func NiceTicks(lo, hi float64, target int, integer bool) []float64 {
	if math.IsNaN(lo) || math.IsInf(lo, 0) {
		lo = 0
	}
	if math.IsNaN(hi) || math.IsInf(hi, 0) {
		hi = lo
	}
	if hi < lo {
		lo, hi = hi, lo
	}
	if hi == lo {
		hi = lo + 1
	}
	target = max(target, 1)
	step := niceStep((hi - lo) / float64(target))
	if integer && step < 1 {
		step = 1
	}
	first := math.Floor(lo/step+1e-9) * step
	n := int(math.Ceil((hi-first)/step - 1e-9))
	ticks := make([]float64, 0, n+1)
	for k := 0; k <= n; k++ {
		// first + k*step, rounded to the step's precision so 0.1+0.2 prints as 0.3.
		ticks = append(ticks, roundTo(first+float64(k)*step, step))
	}
	return ticks
}

// niceStep rounds raw up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch norm := raw / mag; {
	case norm <= 1+1e-9:
		return mag
	case norm <= 2+1e-9:
		return 2 * mag
	case norm <= 5+1e-9:
		return 5 * mag
	}
	return 10 * mag
}

func roundTo(v, step float64) float64 {
	d := stepDecimals(step)
	p := math.Pow(10, float64(d))
	r := math.Round(v*p) / p
	if r == 0 {
		return 0 // no "-0"
	}
	return r
}

// stepDecimals is how many decimals tell ticks step apart.
func stepDecimals(step float64) int {
	if step <= 0 || step >= 1 {
		return 0
	}
	return int(math.Ceil(-math.Log10(step) - 1e-9))
}

// timeSteps are the x tick intervals, smallest first.
var timeSteps = []time.Duration{
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 2 * 24 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour, 30 * 24 * time.Hour,
	90 * 24 * time.Hour, 365 * 24 * time.Hour,
}

// TimeTicks returns round instants in [from, to] (on the minute, the hour, midnight in
// loc, ...) at most max apart in count, and the interval between them.
func TimeTicks(from, to time.Time, maxTicks int, loc *time.Location) ([]time.Time, time.Duration) {
	if loc == nil {
		loc = time.UTC
	}
	if !to.After(from) {
		return []time.Time{from.In(loc)}, 0
	}
	maxTicks = max(maxTicks, 2)
	span := to.Sub(from)
	step := timeSteps[len(timeSteps)-1]
	for _, s := range timeSteps {
		if int64(span/s) < int64(maxTicks) {
			step = s
			break
		}
	}
	from, to = from.In(loc), to.In(loc)
	var ticks []time.Time
	if step < 24*time.Hour {
		// Whole multiples of step since local midnight.
		midnight := time.Date(from.Year(), from.Month(), from.Day(), 0, 0, 0, 0, loc)
		k := (from.Sub(midnight) + step - 1) / step
		for t := midnight.Add(k * step); !t.After(to); t = t.Add(step) {
			ticks = append(ticks, t)
		}
	} else {
		days := int(step / (24 * time.Hour))
		t := time.Date(from.Year(), from.Month(), from.Day(), 0, 0, 0, 0, loc)
		if t.Before(from) {
			t = t.AddDate(0, 0, 1)
		}
		for ; !t.After(to); t = t.AddDate(0, 0, days) {
			ticks = append(ticks, t)
		}
	}
	return ticks, step
}

// timeLabel formats an x tick: the finer the step, the more of the clock it shows;
// a period of more than a day names the day.
func timeLabel(t time.Time, step, span time.Duration) string {
	switch {
	case step >= 24*time.Hour:
		return t.Format("Jan 2")
	case step < time.Minute:
		return t.Format("15:04:05")
	case span > 24*time.Hour:
		return t.Format("Jan 2 15:04")
	case t.Hour() == 0 && t.Minute() == 0 && span >= 6*time.Hour:
		return t.Format("Jan 2") // midnight: the day changes here
	}
	return t.Format("15:04")
}

// FormatChartValue formats a value for a tooltip or the summary: ms below a second,
// then seconds; counts with thousands separators; three significant digits otherwise.
func FormatChartValue(v float64, unit string) string {
	switch unit {
	case "ms":
		if math.Abs(v) >= 1000 {
			return sig(v/1000) + " s"
		}
		return sig(v) + " ms"
	case "calls":
		if math.Round(v) == 1 {
			return "1 call"
		}
		return thousands(int64(math.Round(v))) + " calls"
	case "":
		return sig(v)
	}
	return sig(v) + " " + unit
}

// sig formats v with three significant digits, at most three decimals, no trailing zeros.
func sig(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return "0"
	}
	if math.Abs(v) >= 100 {
		return thousands(int64(math.Round(v)))
	}
	d := min(max(2-int(math.Floor(math.Log10(math.Abs(v)))), 0), 3)
	return trimZeros(strconv.FormatFloat(v, 'f', d, 64))
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		return "0"
	}
	return s
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// tickLabel formats a y tick with as many decimals as the step needs; a millisecond
// axis that reaches a second is labelled in seconds throughout.
func tickLabel(v, step, top float64, unit string) string {
	if unit == "ms" && top >= 1000 {
		if v == 0 {
			return "0"
		}
		return trimZeros(strconv.FormatFloat(v/1000, 'f', stepDecimals(step/1000), 64)) + " s"
	}
	if step >= 1000 && math.Abs(v) >= 1000 && unit != "ms" {
		return trimZeros(strconv.FormatFloat(v/1000, 'f', stepDecimals(step/1000), 64)) + "k"
	}
	s := trimZeros(strconv.FormatFloat(v, 'f', stepDecimals(step), 64))
	if unit == "ms" && v != 0 {
		return s + " ms"
	}
	return s
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

// LineGeometry lays out a line chart: one polyline per run of points without a gap
// (a lone point shows as its dot), y from 0 to a round number above the largest value.
func LineGeometry(c Chart) ChartGeometry {
	times := c.times()
	step := c.step(times)
	from, to := c.domain(times, step, false)
	g := c.base(from, to)
	hi, lo, has := 0.0, 0.0, false
	for _, s := range c.Series {
		for _, p := range s.Points {
			if usable(p) {
				hi, lo, has = max(hi, p.V), min(lo, p.V), true
			}
		}
	}
	if !has {
		g.Empty = true
		g.Summary = fmt.Sprintf("%s from %s to %s: %s.", c.Title, c.stamp(from), c.stamp(to), g.EmptyText)
		return g
	}
	y := g.yAxis(lo, hi, c.Integer, c.Unit)
	var summary []string
	for i, s := range c.Series {
		line := ChartLine{Label: s.Label, Class: seriesClass(s, i)}
		pts := append([]ChartPoint(nil), s.Points...)
		sort.SliceStable(pts, func(a, b int) bool { return pts[a].T.Before(pts[b].T) })
		var seg []ChartXY
		var smin, smax, last float64
		n := 0
		for _, p := range pts {
			if !usable(p) || p.T.Before(from) || p.T.After(to) {
				if len(seg) > 0 {
					line.Segments = append(line.Segments, seg)
					seg = nil
				}
				continue
			}
			xy := ChartXY{X: g.xAt(p.T, from, to), Y: y(p.V)}
			seg = append(seg, xy)
			label := s.Label
			if label != "" {
				label += ": "
			}
			line.Dots = append(line.Dots, ChartDot{X: xy.X, Y: xy.Y, Tip: label + FormatChartValue(p.V, c.Unit) + " at " + c.stamp(p.T)})
			if n == 0 || p.V < smin {
				smin = p.V
			}
			if n == 0 || p.V > smax {
				smax = p.V
			}
			last = p.V
			n++
		}
		if len(seg) > 0 {
			line.Segments = append(line.Segments, seg)
		}
		// A dot is alone when its segment has no other point.
		d := 0
		for _, sg := range line.Segments {
			if len(sg) == 1 {
				line.Dots[d].Alone = true
			}
			d += len(sg)
		}
		line.Dense = len(line.Dots) > chartDenseDots
		g.Lines = append(g.Lines, line)
		if n > 0 {
			summary = append(summary, fmt.Sprintf("%s: %d of %d points with data, lowest %s, highest %s, latest %s",
				s.Label, n, len(pts), FormatChartValue(smin, c.Unit), FormatChartValue(smax, c.Unit), FormatChartValue(last, c.Unit)))
		} else {
			summary = append(summary, s.Label+": no data")
		}
	}
	g.Summary = fmt.Sprintf("%s from %s to %s. %s.", c.Title, c.stamp(from), c.stamp(to), strings.Join(summary, "; "))
	return g
}

// BarGeometry lays out a bar chart: one slot per bucket [T, T+Step), the series
// stacked (Stacked) or side by side, y from 0 to a round number above the tallest.
// Zero and missing values draw no bar.
func BarGeometry(c Chart) ChartGeometry {
	times := c.times()
	step := c.step(times)
	from, to := c.domain(times, step, true)
	g := c.base(from, to)
	// value[s][t] by instant.
	vals := make([]map[int64]float64, len(c.Series))
	totals := map[int64]float64{}
	hi := 0.0
	for i, s := range c.Series {
		vals[i] = map[int64]float64{}
		for _, p := range s.Points {
			if !usable(p) || p.V <= 0 {
				continue
			}
			k := p.T.UnixNano()
			vals[i][k] += p.V
			totals[k] += p.V
			if !c.Stacked {
				hi = max(hi, vals[i][k])
			}
		}
	}
	if c.Stacked {
		for _, v := range totals {
			hi = max(hi, v)
		}
	}
	if hi <= 0 {
		g.Empty = true
		g.Summary = fmt.Sprintf("%s from %s to %s: %s.", c.Title, c.stamp(from), c.stamp(to), g.EmptyText)
		return g
	}
	y := g.yAxis(0, hi, c.Integer, c.Unit)
	n := float64(len(c.Series))
	for _, t := range times {
		if t.Before(from) || !t.Before(to) {
			continue
		}
		x0, x1 := g.xAt(t, from, to), g.xAt(minTime(t.Add(step), to), from, to)
		pad := (x1 - x0) * 0.12
		if x1-x0 < 3 {
			pad = 0
		}
		x0, x1 = x0+pad, x1-pad
		k := t.UnixNano()
		when := c.span(t, t.Add(step))
		acc := 0.0
		for i, s := range c.Series {
			v, ok := vals[i][k]
			if !ok {
				continue
			}
			label := s.Label
			if label != "" {
				label += ": "
			}
			bar := ChartBar{Class: seriesClass(s, i), Tip: label + FormatChartValue(v, c.Unit) + ", " + when}
			if c.Stacked {
				bar.X, bar.W = x0, x1-x0
				bar.Y = y(acc + v)
				bar.H = y(acc) - bar.Y
				acc += v
			} else {
				w := (x1 - x0) / n
				bar.X, bar.W = x0+float64(i)*w, w
				bar.Y = y(v)
				bar.H = y(0) - bar.Y
			}
			g.Bars = append(g.Bars, bar)
		}
	}
	var summary []string
	for i, s := range c.Series {
		var total, peak float64
		var peakAt time.Time
		for _, t := range times {
			v := vals[i][t.UnixNano()]
			total += v
			if v > peak {
				peak, peakAt = v, t
			}
		}
		if peak > 0 {
			summary = append(summary, fmt.Sprintf("%s: %s in all, at most %s (%s)", s.Label,
				FormatChartValue(total, c.Unit), FormatChartValue(peak, c.Unit), c.stamp(peakAt)))
		} else {
			summary = append(summary, fmt.Sprintf("%s: none", s.Label))
		}
	}
	g.Summary = fmt.Sprintf("%s from %s to %s. %s.", c.Title, c.stamp(from), c.stamp(to), strings.Join(summary, "; "))
	return g
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

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

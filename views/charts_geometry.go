package views

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

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

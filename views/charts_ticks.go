package views

import (
	"math"
	"strconv"
	"strings"
	"time"
)

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

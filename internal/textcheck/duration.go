package textcheck

import (
	"strconv"
	"time"
)

// DurationWords says a limit or a wait as people say it: "30 seconds", "1 minute",
// "1.5 seconds".
func DurationWords(d time.Duration) string {
	unit, n := "second", d.Seconds()
	if d >= time.Minute && d%time.Minute == 0 {
		unit, n = "minute", d.Minutes()
	}
	if n != 1 {
		unit += "s"
	}
	return strconv.FormatFloat(n, 'f', -1, 64) + " " + unit
}

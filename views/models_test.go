package views

import (
	"testing"
	"time"
)

// Times read in whole units, days to the nearest: a token made to last 7 days expires
// "in 7d" (it read "in 6d" a moment after its creation).
func TestShortDurations(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * time.Second:              "30s",
		90 * time.Minute:              "1h",
		47 * time.Hour:                "47h",
		7*24*time.Hour - time.Second:  "7d",
		6*24*time.Hour + 13*time.Hour: "7d",
		6*24*time.Hour + 11*time.Hour: "6d",
		90 * 24 * time.Hour:           "90d",
	} {
		if got := short(d); got != want {
			t.Errorf("short(%s) = %q, want %q", d, got, want)
		}
	}
}

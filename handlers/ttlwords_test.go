package handlers

import (
	"testing"
	"time"
)

// The tokens page says the default lifetime as it is: 60 hours is not "2 days".
func TestTTLWords(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		30 * 24 * time.Hour: "30 days", 48 * time.Hour: "2 days", 60 * time.Hour: "60 hours", 36 * time.Hour: "36 hours",
		24 * time.Hour: "24 hours", time.Hour: "1 hour", 90 * time.Minute: "1h30m0s",
	} {
		if got := ttlWords(d); got != want {
			t.Errorf("%s: got %q, want %q", d, got, want)
		}
	}
}

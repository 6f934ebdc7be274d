package main

import (
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/auth"
)

func TestTokenDefaultTTL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"": auth.DefaultTokenTTL, "0": 0, "90d": 90 * 24 * time.Hour, "720h": 720 * time.Hour, "1d": 24 * time.Hour} {
		if got, err := tokenDefaultTTL(in); err != nil || got != want {
			t.Errorf("tokenDefaultTTL(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"-1d", "forever", "3651d", "-5h", "d"} {
		if _, err := tokenDefaultTTL(bad); err == nil {
			t.Errorf("tokenDefaultTTL(%q): no error", bad)
		}
	}
}

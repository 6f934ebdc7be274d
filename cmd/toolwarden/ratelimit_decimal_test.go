package main

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// --rate-limit and TOOLWARDEN_RATE_LIMIT are decimal: a leading zero is not octal (0600
// is 600, not 384) and 0x10 is refused, not taken for 16.
func TestRateLimitDecimal(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int // 0: refused
	}{{"0600", 600}, {"600", 600}, {"-1", -1}, {"0x10", 0}, {"0b11", 0}, {"0o17", 0}, {"1_000", 0}} {
		t.Run(tc.value, func(t *testing.T) {
			var rate int
			fs := newFlagSet("serve", io.Discard)
			rateLimitFlag(fs, &rate)
			err := fs.Parse([]string{"--rate-limit", tc.value})
			if tc.want == 0 {
				if err == nil || !strings.Contains(err.Error(), "whole number") {
					t.Errorf("--rate-limit %s: got %d, %v; want it refused as not a whole number", tc.value, rate, err)
				}
			} else if err != nil || rate != tc.want {
				t.Errorf("--rate-limit %s: got %d, %v; want %d", tc.value, rate, err, tc.want)
			}
			rate = 0
			fs = newFlagSet("serve", io.Discard)
			rateLimitFlag(fs, &rate)
			if err := fs.Parse(nil); err != nil || rate != 1200 {
				t.Fatalf("no flag: got %d, %v; want the default 1200", rate, err)
			}
			err = envFlags(fs, func(k string) (string, bool) { return tc.value, k == "TOOLWARDEN_RATE_LIMIT" })
			if tc.want == 0 {
				if err == nil || !strings.Contains(err.Error(), "TOOLWARDEN_RATE_LIMIT") {
					t.Errorf("TOOLWARDEN_RATE_LIMIT=%s: got %d, %v; want it refused, naming the variable", tc.value, rate, err)
				}
			} else if err != nil || rate != tc.want {
				t.Errorf("TOOLWARDEN_RATE_LIMIT=%s: got %d, %v; want %d", tc.value, rate, err, tc.want)
			}
		})
	}
}

// serve refuses TOOLWARDEN_RATE_LIMIT=0x10 and --rate-limit 0x10 before it starts.
func TestServeRateLimitNotHex(t *testing.T) {
	t.Setenv("TOOLWARDEN_RATE_LIMIT", "0x10")
	_, stderr, err := runCmd(t, "", "serve", "--template-max-timeout", "soon", "--data-dir", t.TempDir())
	if !errors.Is(err, errUsage) || !strings.Contains(stderr, "TOOLWARDEN_RATE_LIMIT") || !strings.Contains(stderr, `"0x10"`) {
		t.Errorf("TOOLWARDEN_RATE_LIMIT=0x10: got %v\n%s\nwant a usage error naming the variable and the value", err, stderr)
	}
	_, stderr, err = runCmd(t, "", "serve", "--rate-limit", "0x10", "--template-max-timeout", "soon", "--data-dir", t.TempDir())
	if !errors.Is(err, errUsage) || !strings.Contains(stderr, "rate-limit") || !strings.Contains(stderr, `"0x10"`) {
		t.Errorf("--rate-limit 0x10: got %v\n%s\nwant a usage error naming the flag and the value", err, stderr)
	}
}

package main

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// --log-level (and TOOLWARDEN_LOG_LEVEL) takes debug, info, warn or error, in any case;
// anything else is a usage error naming the value, for every command, instead of info
// taken in silence. Empty counts as unset.
func TestLogLevelRefused(t *testing.T) {
	want := `--log-level: "verbose" is not one of debug, info, warn, error (TOOLWARDEN_LOG_LEVEL too)`
	// A later flag of serve is wrong, and the others' database leads nowhere: a command
	// that took the level would fail on those, not start.
	nowhere := "postgres://toolwarden@127.0.0.1:1/none?connect_timeout=1"
	for _, args := range [][]string{
		{"serve", "--log-level", "verbose", "--template-max-timeout", "soon", "--data-dir", t.TempDir()},
		{"migrate", "status", "--log-level", "verbose", "--data-dir", t.TempDir(), "--database-url", nowhere},
		{"audit", "verify", "--log-level", "verbose", "--data-dir", t.TempDir(), "--database-url", nowhere},
	} {
		if _, stderr, err := runCmd(t, "", args...); !errors.Is(err, errUsage) || !strings.Contains(stderr, want) {
			t.Errorf("%q: got %v\n%s\nwant a usage error saying %q", args, err, stderr, want)
		}
	}
	t.Setenv("TOOLWARDEN_LOG_LEVEL", "verbose")
	if _, stderr, err := runCmd(t, "", "serve", "--template-max-timeout", "soon", "--data-dir", t.TempDir()); !errors.Is(err, errUsage) || !strings.Contains(stderr, want) {
		t.Errorf("TOOLWARDEN_LOG_LEVEL=verbose: got %v\n%s\nwant a usage error saying %q", err, stderr, want)
	}

	for value, level := range map[string]string{"WARN": "warn", " debug ": "debug", "error": "error", "": "info", "Info": "info"} {
		var c config
		fs := newFlagSet("serve", io.Discard)
		commonFlags(fs, &c)
		if err := parse(fs, []string{"--log-level", value}); err != nil || c.LogLevel != level {
			t.Errorf("--log-level %q: got %q, %v; want %q", value, c.LogLevel, err, level)
		}
	}
}

// --rate-limit below -1 is refused as 0 is, instead of taken for no limit: -1 is how
// to say that.
func TestRateLimitBelowMinusOne(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ value, want string }{
		{"-5", "--rate-limit: -5 is not a limit"},
		{"-2", "--rate-limit: -2 is not a limit"},
		// Accepted: serve goes on to the later flag it refuses.
		{"-1", "--template-max-timeout"},
		{"600", "--template-max-timeout"},
	} {
		_, stderr, err := runCmd(t, "", "serve", "--rate-limit", tc.value, "--template-max-timeout", "soon", "--data-dir", t.TempDir())
		if !errors.Is(err, errUsage) || !strings.Contains(stderr, tc.want) || (tc.value == "-1" || tc.value == "600") && strings.Contains(stderr, "rate-limit") {
			t.Errorf("--rate-limit %s: got %v\n%s\nwant a usage error saying %q", tc.value, err, stderr, tc.want)
		}
	}
}

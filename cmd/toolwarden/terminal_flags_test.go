package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The terminals' limits: a count that is not a positive integer, or an idle time that is
// not 0 (never) or a duration of at least 1s, is a usage error naming the flag, before
// anything starts; from the environment too.
func TestTerminalLimitFlags(t *testing.T) {
	for _, tt := range []struct{ flag, value string }{
		{"terminals-per-person", "0"}, {"terminals-per-person", "many"},
		{"terminals-max", "-5"}, {"terminals-max", "1.5"},
		{"terminal-idle", "-1m"}, {"terminal-idle", "soon"}, {"terminal-idle", "30"},
	} {
		// A bad --template-max-timeout too: were the value let through, serve would
		// still stop before it starts.
		_, stderr, err := runCmd(t, "", "serve", "--template-max-timeout", "soon", "--data-dir", t.TempDir(), "--"+tt.flag, tt.value)
		if !errors.Is(err, errUsage) || !strings.Contains(stderr, "--"+tt.flag+":") || !strings.Contains(stderr, tt.value) {
			t.Errorf("serve --%s %s: %v\n%s\nwant a usage error naming the flag and the value", tt.flag, tt.value, err, stderr)
		}
	}
	t.Setenv("TOOLWARDEN_TERMINALS_PER_PERSON", "0")
	_, stderr, err := runCmd(t, "", "serve", "--template-max-timeout", "soon", "--data-dir", t.TempDir())
	if !errors.Is(err, errUsage) || !strings.Contains(stderr, "--terminals-per-person:") || !strings.Contains(stderr, "TOOLWARDEN_TERMINALS_PER_PERSON") {
		t.Errorf("TOOLWARDEN_TERMINALS_PER_PERSON=0: %v\n%s\nwant a usage error naming the flag and the variable", err, stderr)
	}

	lim, err := terminalLimits("4", "100", "0")
	if err != nil || lim.perPerson != 4 || lim.max != 100 || lim.idle >= 0 {
		t.Errorf("4, 100, 0: %+v %v; want the counts, and a negative idle time (never)", lim, err)
	}
	if lim, err := terminalLimits("16", "256", "2h"); err != nil || lim.idle != 2*time.Hour {
		t.Errorf("2h: %+v %v", lim, err)
	}
}

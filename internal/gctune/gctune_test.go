package gctune

import (
	"runtime/debug"
	"testing"
)

func TestLimit(t *testing.T) {
	for _, tc := range []struct {
		live, other uint64
		want        int64
	}{
		{0, 0, 128 << 20},
		{40 << 20, 0, 128 << 20},
		{100 << 20, 0, 300 << 20},
		{100 << 20, 160 << 20, 460 << 20}, // 20,000 goroutines' stacks count too
		{1 << 30, 0, 3 << 30},
	} {
		if got := Limit(tc.live, tc.other); got != tc.want {
			t.Errorf("Limit(%d MiB live, %d MiB other) = %d MiB, want %d MiB", tc.live>>20, tc.other>>20, got>>20, tc.want>>20)
		}
	}
}

func TestStartHonoursTheEnvironment(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		if Start(func(k string) string { return map[string]string{env: "200"}[k] }) {
			t.Fatalf("with %s set: applied, want the runtime left alone", env)
		}
		if got := debug.SetGCPercent(100); got != 100 {
			t.Fatalf("with %s set: GOGC became %d", env, got)
		}
	}
	if !Start(func(string) string { return "" }) {
		t.Fatal("without GOGC or GOMEMLIMIT: not applied")
	}
	if got := debug.SetGCPercent(100); got != percent {
		t.Fatalf("GOGC: got %d, want %d", got, percent)
	}
	if got := debug.SetMemoryLimit(-1); got < Limit(0, 0) {
		t.Fatalf("memory limit: got %d, want at least %d", got, Limit(0, 0))
	}
}

// Free memory goes back once a burst is over: not while busy, not when there is little,
// and once per burst.
func TestGiveBack(t *testing.T) {
	const mib = 1 << 20
	returned := true
	for i, step := range []struct {
		allocated, retained uint64
		release             bool
	}{
		{0, 100 * mib, false},       // idle since the start: nothing was used
		{50 * mib, 80 * mib, false}, // a burst
		{200 * mib, 90 * mib, false},
		{1 * mib, 90 * mib, true},  // idle: give it back
		{1 * mib, 90 * mib, false}, // and only once
		{0, 2 * mib, false},
		{30 * mib, 40 * mib, false}, // the next burst
		{0, 8 * mib, false},         // over, but little left free
		{0, 20 * mib, true},         // more became free
	} {
		var release bool
		release, returned = GiveBack(step.allocated, step.retained, returned)
		if release != step.release {
			t.Errorf("second %d (%d MiB allocated, %d MiB free): release %v, want %v", i, step.allocated/mib, step.retained/mib, release, step.release)
		}
	}
}

package gctune

import (
	"runtime/debug"
	"testing"
	"time"
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

// Free memory goes back once a burst is over and the process stayed idle a few seconds:
// not while busy, not when there is little, once per burst and at most once every
// giveBackEvery.
func TestGiveBack(t *testing.T) {
	const mib = 1 << 20
	g := giver{returned: true}
	now := time.Unix(0, 0)
	for i, step := range []struct {
		allocated, retained uint64
		release             bool
	}{
		{0, 100 * mib, false},       // idle since the start: nothing was used
		{50 * mib, 80 * mib, false}, // a burst
		{200 * mib, 90 * mib, false},
		{0, 90 * mib, false}, // idle 1 s
		{0, 90 * mib, false}, // 2 s
		{0, 90 * mib, true},  // 3 s: give it back
		{0, 90 * mib, false}, // and only once
		{0, 2 * mib, false},
		{30 * mib, 40 * mib, false}, // a light load near the threshold: busy,
		{0, 40 * mib, false},        // idle,
		{30 * mib, 40 * mib, false}, // busy,
		{0, 40 * mib, false},        // idle: never three idle seconds in a row
		{0, 40 * mib, false},
		{0, 40 * mib, false}, // three now, but the last release was 8 s ago
	} {
		now = now.Add(time.Second)
		if got := g.tick(now, step.allocated, step.retained); got != step.release {
			t.Errorf("second %d (%d MiB allocated, %d MiB free): release %v, want %v", i, step.allocated/mib, step.retained/mib, got, step.release)
		}
	}
	// Half a minute after the last release, the next idle spell gives back again, if
	// there is enough to give.
	now = now.Add(giveBackEvery)
	if !g.tick(now, 0, 40*mib) {
		t.Error("no release half a minute later")
	}
	g.tick(now.Add(time.Second), 50*mib, 10*mib)
	for k := 2; k <= 5; k++ {
		if g.tick(now.Add(time.Duration(k)*time.Second), 0, 10*mib) {
			t.Error("released 10 MiB (less than worth it)")
		}
	}
}

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

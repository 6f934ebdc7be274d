package web

import (
	"context"
	"testing"
	"time"
)

// Keys wait for the answer of a check begun after the last event that made one due: a
// check already reading when an event came answers for what was before it only.
func TestTypingGateWaitsForACheckAfterTheEvent(t *testing.T) {
	t.Parallel()
	g := newTypingGate()
	waits := func() bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		return !g.wait(ctx)
	}
	if !waits() {
		t.Fatal("keys went before the first check")
	}
	if !g.check(func() bool { return true }) || waits() {
		t.Fatal("keys wait after the first check said yes")
	}
	// An event comes while a check reads: its yes does not answer for the event.
	if !g.check(func() bool { g.due(); return true }) || !waits() {
		t.Fatal("a check begun before an event let keys go")
	}
	if !g.check(func() bool { return true }) || waits() {
		t.Fatal("keys wait after the check that followed the event said yes")
	}
	g.due()
	if g.check(func() bool { return false }) || g.wait(context.Background()) {
		t.Fatal("keys go after a check said no")
	}
}

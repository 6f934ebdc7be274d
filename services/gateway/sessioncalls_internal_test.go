package gateway

import (
	"context"
	"testing"
)

// Ending a session cancels only its owner's requests in it, and those its owner sends
// while the session is being closed; nothing stays in the maps once the requests and
// the ending are done.
func TestSessionCallsEnd(t *testing.T) {
	var s sessionCalls
	bg := context.Background()
	mine, doneMine := s.add(bg, "s1", "tina")
	other, doneOther := s.add(bg, "s2", "tina")

	ended := s.end("s1", "otto") // another user's DELETE of tina's session
	if mine.Err() != nil {
		t.Fatal("another user's DELETE cancelled tina's request")
	}
	ended()

	ended = s.end("s1", "tina")
	if mine.Err() == nil {
		t.Fatal("the owner's DELETE did not cancel the session's request")
	}
	if other.Err() != nil {
		t.Fatal("ending one session cancelled a request of another")
	}
	late, doneLate := s.add(bg, "s1", "tina")
	if late.Err() == nil {
		t.Fatal("a request that came while the session was being closed was not cancelled")
	}
	ended()
	doneMine()
	doneOther()
	doneLate()
	if len(s.byID) != 0 || len(s.ending) != 0 {
		t.Fatalf("left behind: %d sessions, %d endings", len(s.byID), len(s.ending))
	}
}

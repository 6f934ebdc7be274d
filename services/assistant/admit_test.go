package assistant

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/fault"
)

// Turns are bounded per person and per replica; a released turn is free again.
func TestTurnsBounded(t *testing.T) {
	t.Parallel()
	s := New(nil, nil, nil, nil, nil, nil, nil)
	who := func(id string) *auth.Principal { return &auth.Principal{User: auth.User{ID: id}} }
	ctx := context.Background()
	var releases []func()
	for range MaxTurnsPerPerson {
		r, err := s.admit(ctx, who("ann"))
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, r)
	}
	if _, err := s.admit(ctx, who("ann")); !fault.Is(err, fault.KindRateLimited) {
		t.Fatalf("a third turn of one person: %v, want rate limited", err)
	}
	for i := MaxTurnsPerPerson; i < MaxTurns; i++ {
		r, err := s.admit(ctx, who(fmt.Sprint("p", i)))
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, r)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := s.admit(short, who("bob")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a turn past the replica's bound: %v, want it to wait", err)
	}
	for _, r := range releases {
		r()
	}
	r, err := s.admit(ctx, who("ann"))
	if err != nil {
		t.Fatalf("after every turn ended: %v", err)
	}
	r()
	if len(s.busy) != 0 || len(s.turns) != 0 {
		t.Fatalf("left: busy %v, turns %d", s.busy, len(s.turns))
	}
}

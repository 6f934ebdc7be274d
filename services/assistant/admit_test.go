package assistant

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/auth"
)

// Turns are bounded per person and per replica (a turn past either waits); a released
// turn is free again.
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
	waiting, cancel0 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel0()
	if _, err := s.admit(waiting, who("ann")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a third turn of one person: %v, want it to wait", err)
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
	for who, mine := range s.busy {
		if len(mine) != 0 {
			t.Fatalf("%s keeps %d turns", who, len(mine))
		}
	}
	if len(s.turns) != 0 {
		t.Fatalf("the replica keeps %d turns", len(s.turns))
	}
}

// A replica answers fewer turns at once on a small pool: each turn holds a connection
// while its acts take another, so MaxTurns on a pool of 8 would take every connection
// and wait for a ninth.
func TestTurnsFollowThePool(t *testing.T) {
	t.Parallel()
	for conns, want := range map[int]int{4: 1, 8: 2, 16: 4, 32: MaxTurns, 100: MaxTurns} {
		cfg, err := pgxpool.ParseConfig(fmt.Sprintf("postgres://u@127.0.0.1:1/db?pool_max_conns=%d", conns))
		if err != nil {
			t.Fatal(err)
		}
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg) // connects lazily: nothing listens there
		if err != nil {
			t.Fatal(err)
		}
		s := New(pool, nil, nil, nil, nil, nil, nil)
		if got := cap(s.turns); got != want {
			t.Errorf("a pool of %d: %d turns at once, want %d", conns, got, want)
		}
		// Model readings take at most half the turns, so the built-in reading's still run.
		if got := cap(s.readings); got != max(1, want/2) {
			t.Errorf("a pool of %d: %d model readings at once, want %d", conns, got, max(1, want/2))
		}
		pool.Close()
	}
}

package audit

import (
	"context"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// A refusal let through whose entry fails took the count of those held back before it:
// it is given back, and the next entry counts it, for callers not signed in (the pool)
// and for a signed-in actor alike.
func TestDeniedWithheldCountGivenBackWhenItsEntryFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	d := newTestDenials(t, pool, &DenialOptions{PerActor: 2, Total: 600, now: clock.Now, quiet: time.Hour})
	dave := Actor{Kind: ActorUser, ID: "00000000-0000-0000-0000-00000000000d", Name: "dave", IP: "192.0.2.1"}
	record := func(a Actor) error {
		return d.Record(ctx, Denial{Actor: a, Method: "GET", Route: "/api/v1/users", Path: "/api/v1/users", Status: 403,
			Code: "forbidden", Reason: "needs users.manage"})
	}
	for range 5 {
		if err := record(dave); err != nil { // 2 written, 3 held back
			t.Fatal(err)
		}
	}
	floodAnonymous(t, d, 0, 700) // 600 written, 100 pooled
	clock.Add(time.Minute)
	unblock := blockEntries(t, pool, "NEW.actor_kind <> 'system'")
	if err := record(dave); err == nil {
		t.Fatal("dave's refusal, its entry blocked, said nothing")
	}
	if err := record(Actor{Kind: ActorAnonymous, IP: "203.0.113.9"}); err == nil {
		t.Fatal("the anonymous refusal, its entry blocked, said nothing")
	}
	unblock()
	if err := record(dave); err != nil {
		t.Fatal(err)
	}
	floodAnonymous(t, d, 700, 1)
	var daves, anons int
	if err := pool.QueryRow(ctx, `SELECT
		coalesce(sum((payload->>'withheld_before')::int) FILTER (WHERE actor_kind = 'user'), 0),
		coalesce(sum((payload->>'withheld_before')::int) FILTER (WHERE actor_kind = 'anonymous'), 0)
		FROM audit_log WHERE action = 'request.denied'`).Scan(&daves, &anons); err != nil {
		t.Fatal(err)
	}
	if daves != 3 || anons != 100 {
		t.Fatalf("withheld_before counts dave's %d and callers not signed in %d, want 3 and 100 (the failed entries' counts given back)", daves, anons)
	}
	if n, _ := systemDenied(t, pool); n != 0 {
		t.Fatalf("%d system entries, want none: entries let through counted them", n)
	}
}

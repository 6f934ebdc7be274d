package audit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// deniedTotals are the request.denied entries (of actor kind, "" for all) and the
// refusals their withheld_before count.
func deniedTotals(t *testing.T, pool *pgxpool.Pool, kind string) (entries, withheld int) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), `SELECT count(*), coalesce(sum((payload->>'withheld_before')::int), 0)
		FROM audit_log WHERE action = 'request.denied' AND ($1 = '' OR actor_kind = $1)`, kind).Scan(&entries, &withheld); err != nil {
		t.Fatal(err)
	}
	return entries, withheld
}

// A flood of refused requests from addresses that never come back (a bad bearer token
// from a new IPv6 address each time) stops adding entries at the limit for callers
// not signed in, and every refusal held back is still counted: the next entry of any
// such caller says how many were. Those Total holds back leave no limiter behind.
func TestDeniedFloodFromRotatingAddressesIsCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	d := newTestDenials(t, pool, &DenialOptions{now: clock.Now}) // the defaults: 20 per address, 600 for all
	deny := func(i int) {
		t.Helper()
		err := d.Record(ctx, Denial{Actor: Actor{Kind: ActorAnonymous, IP: fmt.Sprintf("2001:db8:%x:%x::1", i>>16, i&0xffff)},
			Method: "GET", Route: "/api/v1/tools", Path: "/api/v1/tools", Status: 401, Code: "unauthenticated", Reason: "invalid token"})
		if err != nil {
			t.Fatalf("refusal %d: %v", i, err)
		}
	}
	const flood = 10_600
	for i := range flood {
		deny(i)
	}
	if entries, _ := deniedTotals(t, pool, ""); entries != 600 {
		t.Fatalf("%d refusals from as many addresses at once: %d entries, want the limit for all, 600", flood, entries)
	}
	d.pooled.lim.mu.Lock()
	keys := len(d.pooled.lim.keys)
	d.pooled.lim.mu.Unlock()
	if keys != 600 {
		t.Errorf("the limiter remembers %d addresses, want only the 600 let through", keys)
	}
	// A minute on, the next refusal from yet another address is written and counts
	// those held back before it.
	clock.Add(time.Minute)
	deny(flood)
	entries, withheld := deniedTotals(t, pool, "")
	if entries+withheld != flood+1 || withheld != flood-600 {
		t.Fatalf("%d refusals: %d entries and %d counted as held back, want %d held back and %d in all",
			flood+1, entries, withheld, flood-600, flood+1)
	}
}

// When the limiter's memory of callers starts over, what the callers it forgets had
// held back is not left to the server's log: one entry of the system's counts it.
func TestDeniedForgottenCallersAreCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	d := newTestDenials(t, pool, &DenialOptions{PerActor: 2, Total: 1000, maxKeys: 5, now: clock.Now})
	deny := func(a Actor) {
		t.Helper()
		if err := d.Record(ctx, Denial{Actor: a, Method: "GET", Route: "/api/v1/users", Path: "/api/v1/users", Status: 403,
			Code: "forbidden", Reason: "needs users.manage"}); err != nil {
			t.Fatal(err)
		}
	}
	dave := Actor{Kind: ActorUser, ID: "00000000-0000-0000-0000-00000000000d", Name: "dave", IP: "192.0.2.1"}
	for range 5 {
		deny(dave) // 2 written, 3 held back
	}
	for i := range 5 { // new addresses fill the memory and start it over
		deny(Actor{Kind: ActorAnonymous, IP: fmt.Sprintf("192.0.2.%d", 10+i)})
	}
	var daves, system, forgotten int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE actor_name = 'dave'), count(*) FILTER (WHERE actor_kind = 'system'),
		coalesce(sum((payload->>'withheld_before')::int) FILTER (WHERE actor_kind = 'system'), 0)
		FROM audit_log WHERE action = 'request.denied'`).Scan(&daves, &system, &forgotten); err != nil {
		t.Fatal(err)
	}
	if daves != 2 || system != 1 || forgotten != 3 {
		t.Fatalf("5 refusals of dave, 2 written, then the memory started over: %d of dave's entries, %d of the system's counting %d; "+
			"want 2, and 1 counting 3", daves, system, forgotten)
	}
}

// forgetfulDenials is a Denials whose limiter remembers 5 callers, after dave's 5
// refusals (2 written, 3 held back) and those of 4 callers not signed in: the next
// caller makes it start over, forgetting dave's 3. Its quiet interval is an hour, so that
// its quiet flush, which would count dave's 3 as his, runs only when the test fires it.
func forgetfulDenials(t *testing.T) (*pgxpool.Pool, *Denials, func(Actor) error) {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.New(t)
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	d := newTestDenials(t, pool, &DenialOptions{PerActor: 2, Total: 1000, maxKeys: 5, now: clock.Now, quiet: time.Hour})
	record := func(a Actor) error {
		return d.Record(ctx, Denial{Actor: a, Method: "GET", Route: "/api/v1/users", Path: "/api/v1/users", Status: 403,
			Code: "forbidden", Reason: "needs users.manage"})
	}
	dave := Actor{Kind: ActorUser, ID: "00000000-0000-0000-0000-00000000000d", Name: "dave", IP: "192.0.2.1"}
	for range 5 {
		if err := record(dave); err != nil { // 2 written, 3 held back
			t.Fatal(err)
		}
	}
	for i := range 4 {
		if err := record(Actor{Kind: ActorAnonymous, IP: fmt.Sprintf("192.0.2.%d", 10+i)}); err != nil {
			t.Fatal(err)
		}
	}
	return pool, d, record
}

// The entry that counts forgotten callers' refusals, when it cannot be written, is
// written by a later Record (its count kept), and the refusal that found it failing is
// still recorded itself.
func TestDeniedForgottenCountKeptWhenItsEntryFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _, record := forgetfulDenials(t)
	// This one fills the memory: it starts over, and the system's entry fails.
	unblock := blockEntries(t, pool, "NEW.actor_kind = 'system'")
	if err := record(Actor{Kind: ActorAnonymous, IP: "192.0.2.20"}); err == nil {
		t.Fatal("a Record whose forgotten callers' entry failed said nothing")
	}
	unblock()
	if err := record(Actor{Kind: ActorAnonymous, IP: "192.0.2.21"}); err != nil {
		t.Fatal(err)
	}
	var system, forgotten, anon int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE actor_kind = 'system'),
		coalesce(sum((payload->>'withheld_before')::int) FILTER (WHERE actor_kind = 'system'), 0),
		count(*) FILTER (WHERE actor_kind = 'anonymous')
		FROM audit_log WHERE action = 'request.denied'`).Scan(&system, &forgotten, &anon); err != nil {
		t.Fatal(err)
	}
	if system != 1 || forgotten != 3 || anon != 6 {
		t.Fatalf("%d system entries counting %d, %d anonymous ones; want 1 counting 3, and all 6 anonymous refusals", system, forgotten, anon)
	}
}

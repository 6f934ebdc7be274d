package audit

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
)

// newTestDenials is NewDenials closed when the test ends, before its database goes:
// its quiet timer would otherwise write to a closed pool.
func newTestDenials(t *testing.T, pool *pgxpool.Pool, opts *DenialOptions) *Denials {
	t.Helper()
	d := NewDenials(pool, opts)
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return d
}

// floodAnonymous records n refusals of callers not signed in, each from an address of
// its own (from address first on).
func floodAnonymous(t *testing.T, d *Denials, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		err := d.Record(context.Background(), Denial{Actor: Actor{Kind: ActorAnonymous, IP: fmt.Sprintf("2001:db8:%x:%x::1", i>>16, i&0xffff)},
			Method: "GET", Route: "/api/v1/tools", Path: "/api/v1/tools", Status: 401, Code: "unauthenticated", Reason: "invalid token"})
		if err != nil {
			t.Fatalf("refusal %d: %v", i, err)
		}
	}
}

// systemDenied is the system's request.denied entries and the refusals they count.
func systemDenied(t *testing.T, pool *pgxpool.Pool) (entries, withheld int) {
	t.Helper()
	return deniedTotals(t, pool, ActorSystem)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, within time.Duration, cond func() bool) bool {
	t.Helper()
	for end := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// A flood of refusals from callers not signed in that stops leaves no refusal of
// theirs to count those held back: after the quiet interval an entry of the system's
// does, once, and the next refusal let through counts none of them again.
func TestDeniedPooledCountWrittenWhenFloodStops(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	const quiet = 100 * time.Millisecond
	d := newTestDenials(t, pool, &DenialOptions{now: clock.Now, quiet: quiet}) // 600 for all callers not signed in
	floodAnonymous(t, d, 0, 700)
	stopped := time.Now()
	if !waitFor(t, 10*time.Second, func() bool { n, _ := systemDenied(t, pool); return n > 0 }) {
		t.Fatal("a flood of 700 refusals stopped, 100 held back: no entry counts them")
	}
	t.Logf("counted %v after the flood stopped (quiet interval %v)", time.Since(stopped).Round(time.Millisecond), quiet)
	time.Sleep(3 * quiet) // time for a second, wrong, entry to show
	if n, withheld := systemDenied(t, pool); n != 1 || withheld != 100 {
		t.Fatalf("%d system entries counting %d refusals, want 1 counting the 100 held back", n, withheld)
	}
	clock.Add(time.Minute)
	floodAnonymous(t, d, 700, 1)
	if entries, withheld := deniedTotals(t, pool, ""); entries != 602 || withheld != 100 {
		t.Fatalf("701 refusals: %d entries counting %d held back, want 602 (600, the system's, the last) counting 100", entries, withheld)
	}
}

// While refusals are let through, each counts those pooled before it: the quiet flush
// then finds nothing of its own to write, and writes nothing.
func TestDeniedPooledCountNotWrittenTwice(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	const quiet = time.Second
	d := newTestDenials(t, pool, &DenialOptions{now: clock.Now, quiet: quiet})
	floodAnonymous(t, d, 0, 700)
	clock.Add(time.Minute)
	floodAnonymous(t, d, 700, 1) // counts the 100 held back, well before the interval ends
	time.Sleep(2*quiet + quiet/2)
	if n, _ := systemDenied(t, pool); n != 0 {
		t.Fatalf("%d system entries after a refusal let through counted those held back, want none", n)
	}
	if entries, withheld := deniedTotals(t, pool, ""); entries != 601 || withheld != 100 {
		t.Fatalf("701 refusals: %d entries counting %d, want 601 counting 100", entries, withheld)
	}
	d.pooled.mu.Lock()
	armed := d.pooled.timer != nil
	d.pooled.mu.Unlock()
	if armed {
		t.Error("the quiet timer is still armed with nothing held back")
	}
}

// On shutdown, what is pooled is written at once, however long the quiet interval.
func TestDeniedPooledCountWrittenOnClose(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	d := NewDenials(pool, &DenialOptions{now: clock.Now, quiet: time.Hour})
	floodAnonymous(t, d, 0, 700)
	if n, _ := systemDenied(t, pool); n != 0 {
		t.Fatalf("%d system entries before the quiet interval or Close", n)
	}
	for range 2 { // a second Close writes nothing more
		if err := d.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n, withheld := systemDenied(t, pool); n != 1 || withheld != 100 {
		t.Fatalf("after Close: %d system entries counting %d, want 1 counting the 100 held back", n, withheld)
	}
	d.pooled.mu.Lock()
	armed := d.pooled.timer != nil
	d.pooled.mu.Unlock()
	if armed {
		t.Error("the quiet timer is still armed after Close")
	}
}

// blockEntries makes every audit entry of an actor kind cond picks (a SQL condition on
// NEW) fail until the returned func is called.
func blockEntries(t *testing.T, pool *pgxpool.Pool, cond string) (unblock func()) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE FUNCTION no_entries() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF `+cond+` THEN RAISE EXCEPTION 'no such entries now'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER no_entries BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION no_entries()`); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := pool.Exec(ctx, `DROP TRIGGER no_entries ON audit_log; DROP FUNCTION no_entries()`); err != nil {
			t.Fatal(err)
		}
	}
}

// The quiet flush's entry, when it cannot be written, is tried again after another
// interval, its count kept, though no refusal comes.
func TestDeniedPooledCountRetriedWhenItsEntryFails(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	logs := &testkit.SyncBuffer{}
	d := newTestDenials(t, pool, &DenialOptions{now: clock.Now, quiet: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	unblock := blockEntries(t, pool, "NEW.actor_kind = 'system'")
	floodAnonymous(t, d, 0, 700)
	if !waitFor(t, 10*time.Second, func() bool { return strings.Contains(logs.String(), "no such entries now") }) {
		t.Fatalf("the quiet flush did not try (and fail) to write its entry; logged:\n%s", logs.String())
	}
	unblock()
	if !waitFor(t, 10*time.Second, func() bool { n, _ := systemDenied(t, pool); return n > 0 }) {
		t.Fatal("the quiet flush's entry failed once and was not tried again")
	}
	if n, withheld := systemDenied(t, pool); n != 1 || withheld != 100 {
		t.Fatalf("%d system entries counting %d, want 1 counting the 100 held back", n, withheld)
	}
}

// The entry counting forgotten callers' refusals, when it fails, is tried again by the
// quiet flush when no later Record comes.
func TestDeniedForgottenCountRetriedWithoutARecord(t *testing.T) {
	t.Parallel()
	pool, d, record := forgetfulDenials(t)
	unblock := blockEntries(t, pool, "NEW.actor_kind = 'system'")
	if err := record(Actor{Kind: ActorAnonymous, IP: "192.0.2.20"}); err == nil { // the memory starts over
		t.Fatal("a Record whose forgotten callers' entry failed said nothing")
	}
	fireQuiet(t, d.pooled) // fails too
	unblock()
	fireQuiet(t, d.pooled)
	if n, _ := systemDenied(t, pool); n == 0 {
		t.Fatal("the forgotten callers' count, its entry failed, was not written without a later Record")
	}
	if n, withheld := systemDenied(t, pool); n != 1 || withheld != 3 {
		t.Fatalf("%d system entries counting %d, want 1 counting dave's 3", n, withheld)
	}
}

// While a flood goes on, the refusals let through count those pooled: the quiet flush
// that finds one did since it was armed writes nothing and waits another interval, so
// a flood adds no system entries; the interval after the flood's last entry, it writes.
func TestDeniedQuietFlushWaitsWhileRefusalsAreCounted(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	d := newTestDenials(t, pool, &DenialOptions{now: clock.Now, quiet: time.Hour}) // the test fires it
	fire := func() { t.Helper(); fireQuiet(t, d.pooled) }
	floodAnonymous(t, d, 0, 700) // 600 written, 100 pooled: the timer is armed
	clock.Add(time.Second)       // 10 more may be written
	floodAnonymous(t, d, 700, 15)
	fire() // the first of the 10 counted the 100; the 5 pooled since are younger than the interval
	if n, _ := systemDenied(t, pool); n != 0 {
		t.Fatalf("%d system entries while refusals let through counted those pooled, want none", n)
	}
	fire() // a whole interval with none let through
	if n, withheld := systemDenied(t, pool); n != 1 || withheld != 5 {
		t.Fatalf("%d system entries counting %d, want 1 counting the 5 pooled after the last refusal let through", n, withheld)
	}
	if entries, withheld := deniedTotals(t, pool, ""); entries != 611 || withheld != 105 {
		t.Fatalf("715 refusals: %d entries counting %d held back, want 611 (610 and the system's) counting 105", entries, withheld)
	}
}

// fireQuiet fires p's quiet timer now, failing the test if it is not armed.
func fireQuiet(t *testing.T, p *PooledLimiter) {
	t.Helper()
	p.mu.Lock()
	if p.timer == nil {
		p.mu.Unlock()
		t.Fatal("the quiet timer is not armed with entries held back")
	}
	p.timer.Stop()
	p.mu.Unlock()
	p.flushQuiet()
}

// userDenied is the request.denied entries of actor id and the refusals they count.
func userDenied(t *testing.T, pool *pgxpool.Pool, id string) (entries, withheld int) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), `SELECT count(*), coalesce(sum((payload->>'withheld_before')::int), 0)
		FROM audit_log WHERE action = 'request.denied' AND actor_id = $1`, id).Scan(&entries, &withheld); err != nil {
		t.Fatal(err)
	}
	return entries, withheld
}

// A signed-in caller's refusals held back, when no later refusal of theirs comes to
// count them, are counted by an entry under their name after the quiet interval, once;
// while their refusals keep coming, none is written.
func TestDeniedSignedInCountWrittenWhenTheyStop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	d := newTestDenials(t, pool, &DenialOptions{PerActor: 2, now: clock.Now, quiet: time.Hour}) // the test fires it
	dave := Actor{Kind: ActorToken, ID: "00000000-0000-0000-0000-00000000000d", Name: "dave", IP: "192.0.2.1",
		TokenID: "00000000-0000-0000-0000-0000000000e1", TokenName: "ci", RequestID: "req-1"}
	refuse := func(n int) {
		t.Helper()
		for range n {
			if err := d.Record(ctx, Denial{Actor: dave, Method: "GET", Route: "/api/v1/users", Path: "/api/v1/users",
				Status: 403, Code: "forbidden", Reason: "needs users.manage"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	refuse(5) // 2 written, 3 held back: the timer is armed
	fireQuiet(t, d.pooled)
	// The last two were held back after the timer was armed: dave may still be going.
	if n, withheld := userDenied(t, pool, dave.ID); n != 2 || withheld != 0 {
		t.Fatalf("dave's refusals held back in the quiet interval: %d entries counting %d, want 2 counting none", n, withheld)
	}
	refuse(1) // still going: held back
	fireQuiet(t, d.pooled)
	if n, _ := userDenied(t, pool, dave.ID); n != 2 {
		t.Fatalf("%d entries of dave's while his refusals kept coming, want 2", n)
	}
	fireQuiet(t, d.pooled) // a whole interval with none of his
	if n, withheld := userDenied(t, pool, dave.ID); n != 3 || withheld != 4 {
		t.Fatalf("after a quiet interval: %d entries of dave's counting %d, want 3 counting the 4 held back", n, withheld)
	}
	var kind, name, token, ip, reqID string
	if err := pool.QueryRow(ctx, `SELECT actor_kind, actor_name, payload->>'token_name', coalesce(ip::text, ''), coalesce(request_id, '')
		FROM audit_log WHERE action = 'request.denied' AND actor_id = $1 AND payload->>'withheld_before' IS NOT NULL`, dave.ID).
		Scan(&kind, &name, &token, &ip, &reqID); err != nil {
		t.Fatal(err)
	}
	if kind != ActorToken || name != "dave" || token != "ci" || ip != "" || reqID != "" {
		t.Errorf("the count's entry: actor %s %q token %q, ip %q, request %q; want dave's token ci, no address or request of one refusal's",
			kind, name, token, ip, reqID)
	}
	if n, _ := systemDenied(t, pool); n != 0 {
		t.Errorf("%d system entries, want none: dave's count is his", n)
	}
	d.pooled.mu.Lock()
	armed := d.pooled.timer != nil
	d.pooled.mu.Unlock()
	if armed {
		t.Error("the quiet timer is still armed with nothing held back")
	}
	clock.Add(time.Minute)
	refuse(1)
	if n, withheld := userDenied(t, pool, dave.ID); n != 4 || withheld != 4 {
		t.Fatalf("dave's next refusal: %d entries counting %d, want 4 counting 4 (none counted twice)", n, withheld)
	}
}

// On shutdown, a signed-in caller's refusals held back are written at once, and when
// that entry fails, the quiet flush writes it later with the count kept.
func TestDeniedSignedInCountWrittenOnCloseAndRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	d := NewDenials(pool, &DenialOptions{PerActor: 2, now: clock.Now, quiet: time.Hour})
	dave := Actor{Kind: ActorUser, ID: "00000000-0000-0000-0000-00000000000d", Name: "dave"}
	for range 5 {
		if err := d.Record(ctx, Denial{Actor: dave, Method: "GET", Route: "/api/v1/users", Path: "/api/v1/users",
			Status: 403, Code: "forbidden", Reason: "needs users.manage"}); err != nil {
			t.Fatal(err)
		}
	}
	unblock := blockEntries(t, pool, "NEW.payload->>'withheld_before' IS NOT NULL")
	fireQuiet(t, d.pooled) // armed before the last two: not quiet yet
	fireQuiet(t, d.pooled) // quiet: written, and it fails
	if n, _ := userDenied(t, pool, dave.ID); n != 2 {
		t.Fatalf("%d entries of dave's with the count's entry failing, want 2", n)
	}
	unblock()
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n, withheld := userDenied(t, pool, dave.ID); n != 3 || withheld != 3 {
		t.Fatalf("after Close: %d entries of dave's counting %d, want 3 counting the 3 held back", n, withheld)
	}
}

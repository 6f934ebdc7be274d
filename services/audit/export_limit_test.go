package audit_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/fault"
)

// stalledClient takes nothing until release is closed, as a client that stopped
// reading; blocked is closed when the export first writes to it.
type stalledClient struct {
	blocked, release chan struct{}
	once, unblock    sync.Once
	buf              bytes.Buffer
}

func newStalledClient() *stalledClient {
	return &stalledClient{blocked: make(chan struct{}), release: make(chan struct{})}
}

// resume lets the client read on.
func (s *stalledClient) resume() { s.unblock.Do(func() { close(s.release) }) }

func (s *stalledClient) Write(p []byte) (int, error) {
	s.once.Do(func() { close(s.blocked) })
	<-s.release
	return s.buf.Write(p)
}

// exportEntries counts the audit.export entries: one per export that started.
func exportEntries(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'audit.export'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// An export waiting for its client to take the next bytes holds no database
// connection: the pool is shared with the audit of every tool call, and slow
// downloads would take all of it.
func TestExportHoldsNoConnectionWhileWriting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	appendN(t, pool, 2500) // more than one batch
	l := audit.NewLog(pool)
	t.Cleanup(l.Close)
	base := pool.Stat().AcquiredConns()

	w := newStalledClient()
	done := make(chan error, 1)
	go func() {
		done <- l.Export(ctx, audit.Actor{Kind: audit.ActorUser, ID: aliceID, Name: "carol"}, audit.Filter{}, audit.FormatJSONL, w)
	}()
	<-w.blocked
	acquired := pool.Stat().AcquiredConns()
	w.resume()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if acquired != base {
		t.Fatalf("while the export waited on its client, %d pool connections were in use (%d before it): want none held", acquired, base)
	}
	// Every entry, the export's own included, newest first.
	lines := strings.Split(strings.TrimSpace(w.buf.String()), "\n")
	if len(lines) != 2501 || !strings.Contains(lines[0], `"action":"audit.export"`) || !strings.Contains(lines[2500], `"id":1,`) {
		t.Fatalf("export: %d lines, first %.80s, last %.80s; want 2501, the export's entry first", len(lines), lines[0], lines[len(lines)-1])
	}
}

// One export at a time per person (their tokens are them) and 3 in the process; a
// refused one starts nothing and is not recorded as an export.
func TestExportLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	appendN(t, pool, 1500)
	l := audit.NewLog(pool)
	t.Cleanup(l.Close)
	person := func(id, name string) audit.Actor {
		return audit.Actor{Kind: audit.ActorUser, ID: "00000000-0000-0000-0000-0000000000" + id, Name: name}
	}
	alice, bob, carol, dave := person("a1", "alice"), person("b1", "bob"), person("c1", "carol"), person("d1", "dave")
	aliceToken := alice
	aliceToken.Kind, aliceToken.TokenID, aliceToken.TokenName = audit.ActorToken, "tok-1", "ci"

	// start begins an export by a that stays running (its client stalled) until stop.
	start := func(a audit.Actor) (stop func()) {
		w := newStalledClient()
		t.Cleanup(w.resume) // on failure too: the pool is closed after
		done := make(chan error, 1)
		go func() { done <- l.Export(ctx, a, audit.Filter{}, audit.FormatCSV, w) }()
		select {
		case <-w.blocked:
		case err := <-done:
			t.Fatalf("export by %s: ended before writing: %v", a.Name, err)
		}
		return func() {
			w.resume()
			if err := <-done; err != nil {
				t.Errorf("export by %s: %v", a.Name, err)
			}
		}
	}
	refused := func(a audit.Actor, want string) {
		t.Helper()
		var buf bytes.Buffer
		err := l.Export(ctx, a, audit.Filter{}, audit.FormatJSONL, &buf)
		f, ok := fault.As(err)
		if !ok || f.Kind != fault.KindRateLimited || f.RetryAfter <= 0 || !strings.Contains(err.Error(), want) || buf.Len() != 0 {
			t.Fatalf("export by %s (%s): got %v (wrote %d bytes); want refused as rate limited with a wait, saying %q", a.Name, a.Kind, err, buf.Len(), want)
		}
	}
	completes := func(a audit.Actor) {
		t.Helper()
		var buf bytes.Buffer
		if err := l.Export(ctx, a, audit.Filter{}, audit.FormatJSONL, &buf); err != nil || buf.Len() == 0 {
			t.Fatalf("export by %s: %v (%d bytes); want it to run", a.Name, err, buf.Len())
		}
	}

	stopAlice := start(alice)
	refused(alice, "an export of yours is already running")
	refused(aliceToken, "an export of yours is already running")
	completes(bob) // someone else's runs meanwhile
	stopBob, stopCarol := start(bob), start(carol)
	refused(dave, "3 exports are running")
	if n := exportEntries(t, pool); n != 4 {
		t.Fatalf("%d audit.export entries; want 4 (alice, bob twice, carol): a refused export is not recorded", n)
	}
	stopAlice()
	completes(aliceToken) // the first has ended: she may export again
	stopBob()
	stopCarol()
	completes(dave)
}

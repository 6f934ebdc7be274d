package registry_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
)

// A discovery chosen as a deadlock's victim runs again instead of failing: here a
// transaction holds a changed tool's row while the discovery waits for it, then asks
// for the servers the discovery holds.
func TestApplyDiscoveryRetriesDeadlock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("dl"))
	f.discover(sv.ID, discovery("connect", threeTools()...))
	echo := f.toolsByName(sv.ID)["echo"]
	ctx, cancel := context.WithTimeout(f.ctx, 2*time.Minute)
	defer cancel()

	other, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback(context.Background()) }()
	// The discovery's session finds the deadlock (after the default second); this one
	// looks much later, so it is never the victim.
	testkit.Exec(t, other, `SET LOCAL deadlock_timeout = '30s'`)
	testkit.Exec(t, other, `SELECT 1 FROM mcp_tools WHERE id = $1 FOR UPDATE`, echo.ID)

	changed := threeTools()
	changed[0].Description = "Echoes a message back"
	type result struct {
		changed []string
		err     error
	}
	done := make(chan result, 1)
	go func() {
		res, err := f.reg.ApplyDiscovery(ctx, sv.ID, discovery("manual", changed...))
		done <- result{res.Changed, err}
	}()
	// Wait until the discovery, holding the server's row, waits for the tool's.
	for testkit.Count(t, f.pool, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%registry.ApplyDiscovery.definitions%'`) == 0 {
		select {
		case r := <-done:
			t.Fatalf("the discovery ended (%v, %v) without waiting for the locked tool", r.changed, r.err)
		case <-time.After(5 * time.Millisecond): // poll interval, not a wait for an outcome
		}
	}
	// The table, not the row: a waiting table lock is granted as the discovery's attempt
	// ends, before its next attempt can take the row again (a row lock would be a race).
	if _, err := other.Exec(ctx, `LOCK TABLE mcp_servers IN EXCLUSIVE MODE`); err != nil {
		t.Fatalf("the other transaction was the deadlock's victim (it asked too late): %v", err)
	}
	if err := other.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("discovery: %v, want it run again after the deadlock", r.err)
	}
	if len(r.changed) != 1 || r.changed[0] != "echo" {
		t.Errorf("changed %v, want [echo]", r.changed)
	}
	if got := f.toolsByName(sv.ID)["echo"]; got.Description != "Echoes a message back" || got.Version() != "1.1" {
		t.Errorf("echo: got description %q version %s, want the new definition at 1.1", got.Description, got.Version())
	}
	if n := f.count(`SELECT count(*) FROM discovery_runs WHERE server_id = $1 AND status = 'succeeded'`, sv.ID); n != 2 {
		t.Errorf("got %d succeeded runs, want 2 (the first discovery and this one, once)", n)
	}
}

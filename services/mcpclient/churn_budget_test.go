package mcpclient

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/secrets"
)

// A server that flips its tools, whether it announces each flip or reconnects after it,
// has at most churnBudget discoveries that change something within churnWindow: past
// it automatic discoveries wait (said on the server's page), while a person's Discover
// still runs. The short spacing (ChurnRuns) is turned off, so only the budget holds.
func TestChurnBudget(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	key, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New(pool, keys, nil)
	mgr := New(reg, &Options{Debounce: 20 * time.Millisecond, ChurnRuns: 1 << 20, BackoffInitial: 50 * time.Millisecond,
		BackoffMax: 300 * time.Millisecond, BreakerFailures: 50, BreakerCooldown: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = mgr.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	testkit.WaitFor(t, 5*time.Second, mgr.Running, "manager did not start")

	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "flip"})
	sv, err := reg.CreateServer(ctx, audit.System, registry.Spec{Name: "flip", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	mgr.Refresh(ctx, sv.ID)
	runs := func() []registry.DiscoveryRun {
		rs, err := reg.DiscoveryRuns(ctx, sv.ID, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	changing := func() (n int) {
		for _, r := range runs() {
			if r.Status == "succeeded" && r.Added+r.Updated+r.Removed > 0 {
				n++
			}
		}
		return n
	}
	testkit.WaitFor(t, 30*time.Second, func() bool { return changing() == 1 }, "the connect discovery did not run")
	mgr.mu.Lock()
	c := mgr.conns[sv.ID]
	mgr.mu.Unlock()
	// held: the pending discovery waits (for the budget here), requests joining it.
	held := func(trigger string) bool {
		c.debounceMu.Lock()
		defer c.debounceMu.Unlock()
		return c.debounce != nil && c.churnHeld && c.debounceTrig == trigger
	}
	flips := 0
	flip := func() {
		flips++
		hs.Server().SetTool(mcptest.ToolSpec{Name: "flip", Description: []string{"A", "B"}[flips%2], InputSchema: json.RawMessage(`{"type":"object"}`)})
	}

	// Announced flips: each discovered at once until the budget is spent.
	for range 3 * churnBudget {
		before := len(runs())
		flip()
		testkit.WaitFor(t, 30*time.Second, func() bool { return len(runs()) > before || held("list_changed") }, "the flip was not discovered")
		if held("list_changed") {
			break
		}
	}
	if n := changing(); n > churnBudget {
		t.Errorf("%d discoveries changed tools after %d announced flips, want at most %d", n, flips, churnBudget)
	}

	// Flips behind reconnects: the connect discovery counts too.
	for range 3 {
		before := len(runs())
		flip()
		c.mu.Lock()
		s := c.sess
		c.mu.Unlock()
		if s != nil {
			_ = s.cs.Close()
		}
		testkit.WaitFor(t, 30*time.Second, func() bool {
			c.mu.Lock()
			again := c.sess != nil && c.sess != s
			c.mu.Unlock()
			return len(runs()) > before || again && held("connect")
		}, "the reconnect was not discovered")
	}
	if n := changing(); n > churnBudget {
		t.Fatalf("%d discoveries changed tools after %d flips, some behind reconnects, want at most %d", n, flips, churnBudget)
	}
	// The server's page says why, once.
	var said int
	for _, r := range runs() {
		if r.Status == "failed" && r.Error != nil && strings.Contains(*r.Error, "not run yet") && strings.Contains(*r.Error, "Discover runs one now") {
			said++
		}
	}
	if said != 1 {
		t.Errorf("%d runs on the server's page say discovery waits, want 1: %+v", said, runs()[0])
	}

	// A person's Discover runs past the budget.
	testkit.WaitFor(t, 30*time.Second, func() bool { _, err := c.live(); return err == nil }, "did not reconnect")
	hs.Server().SetTool(mcptest.ToolSpec{Name: "flip", Description: "C", InputSchema: json.RawMessage(`{"type":"object"}`)})
	if res, err := mgr.Discover(ctx, sv.ID, audit.Actor{Name: "alice"}); err != nil || res.Updated != 1 {
		t.Fatalf("Discover past the budget: %+v (%v), want the flipped tool updated", res, err)
	}

	// An hour on, the oldest changes leave the window: the next reconnect is discovered.
	c.debounceMu.Lock()
	for i := range c.spent {
		c.spent[i] = c.spent[i].Add(-churnWindow)
	}
	c.debounceMu.Unlock()
	want := changing() + 1
	flip()
	c.mu.Lock()
	s := c.sess
	c.mu.Unlock()
	_ = s.cs.Close()
	testkit.WaitFor(t, 30*time.Second, func() bool { return changing() == want }, "the reconnect an hour on was not discovered")
}

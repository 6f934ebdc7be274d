package router_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
)

// A stdio server that crashes with calls in flight opens its call circuit (five
// failures in a row, an hour's cooldown here); once the server is back, the circuit is
// closed again and the next call goes through at once, not an hour later.
func TestCrashWithCallsInFlightClosesCircuitOnReconnect(t *testing.T) {
	t.Parallel()
	// The session comes back after 5 s, so the open circuit can be seen first (the
	// failed calls' records must all be in before the reconnect replaces the breaker,
	// which under -race on a busy machine took longer than a second).
	e := startWith(t, &router.Options{BreakerFailures: 5, BreakerCooldown: time.Hour}, func(o *mcpclient.Options) {
		o.BackoffInitial, o.BackoffMax = 5*time.Second, 5*time.Second
	})
	control := filepath.Join(t.TempDir(), "control")
	cmd, args, envm := mcptest.StdioCommand(&mcptest.Options{Name: "crashy"}, control)
	sv := e.register(registry.Spec{Name: "crashy", Type: registry.TypeStdio, Command: cmd, Args: args, Env: envm,
		Enabled: true, HealthIntervalMS: 60_000}, "sleep", "echo")
	if b := e.r.Breaker(sv.ID); b.State != router.CircuitClosed {
		t.Fatalf("before any call: got %+v, want closed", b)
	}
	ctl := mcptest.WaitControl(t, control)
	if err := os.Remove(control); err != nil {
		t.Fatal(err)
	}
	const inFlight = 6
	var wg sync.WaitGroup
	errs := make(chan error, inFlight)
	for range inFlight {
		wg.Go(func() {
			_, err := e.call("crashy__sleep", `{"ms":30000}`)
			errs <- err
		})
	}
	// In flight at the server, not only counted active by the router: a call still on
	// its way when the server dies fails before the circuit sees it (not connected).
	testkit.WaitFor(t, 10*time.Second, func() bool {
		n, err := ctl.Sleeping()
		return err == nil && n == inFlight
	}, "the calls never got in flight")
	if err := ctl.Die(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if codeOf(err) != router.CodeUpstream {
			t.Fatalf("a call in flight when the server crashed: got %v, want upstream_error", err)
		}
	}
	b := e.r.Breaker(sv.ID)
	if b.State != router.CircuitOpen || b.Until.Before(time.Now().Add(50*time.Minute)) {
		t.Fatalf("after %d failed calls: got %+v, want open for an hour", inFlight, b)
	}
	// A call now is refused without being sent (paused, or the server not connected yet),
	// or, having waited for the restarted server, runs on the new session (whose connect
	// closed the circuit, checked below); it never fails on the dead one.
	if _, err := e.call("crashy__echo", `{"message":"x"}`); err != nil &&
		!strings.Contains(err.Error(), "paused") && !strings.Contains(err.Error(), "not connected") {
		t.Fatalf("a call with the circuit open: got %v, want it refused as paused or not connected, or run once the server is back", err)
	}
	// The supervisor restarts the process; the connect closes the circuit.
	mcptest.WaitControl(t, control)
	testkit.WaitFor(t, 20*time.Second, func() bool {
		_, err := e.mgr.Session(sv.ID)
		return err == nil
	}, "the server never came back")
	if b := e.r.Breaker(sv.ID); b.State != router.CircuitClosed || b.Failures != 0 {
		t.Fatalf("after the reconnect: got %+v, want closed with no failures", b)
	}
	res, err := e.call("crashy__echo", `{"message":"back"}`)
	if err != nil || router.TextOf(res.Content) != "Echo: back" {
		t.Fatalf("first call after the reconnect: got %v, %v; want Echo: back", res, err)
	}
	found := false
	for _, b := range e.r.Breakers() {
		if b.ServerID == sv.ID && b.Server == "crashy" && b.State == router.CircuitClosed {
			found = true
		}
	}
	if !found {
		t.Fatalf("Breakers: got %+v, want crashy closed", e.r.Breakers())
	}
}

// A server's call circuit follows the server: renamed, it carries the new name; deleted,
// it is gone from Breakers (and so from /metrics).
func TestBreakerFollowsItsServer(t *testing.T) {
	t.Parallel()
	e := startWith(t, &router.Options{BreakerFailures: 1, BreakerCooldown: time.Hour}, nil)
	hs := e.server("brk", true, "sleep")
	serverID := e.tool("brk__sleep").ServerID
	errc := make(chan error, 1)
	go func() {
		_, err := e.call("brk__sleep", `{"ms":5000}`)
		errc <- err
	}()
	testkit.WaitFor(t, 20*time.Second, func() bool { return hs.Server().Sleeping() == 1 }, "the call never reached the server")
	hs.Stop()
	if err := <-errc; codeOf(err) != router.CodeUpstream {
		t.Fatalf("a call whose server died: got %v, want upstream_error", err)
	}
	entry := func() (router.BreakerState, bool) {
		for _, b := range e.r.Breakers() {
			if b.ServerID == serverID {
				return b, true
			}
		}
		return router.BreakerState{}, false
	}
	if b, ok := entry(); !ok || b.State != router.CircuitOpen || b.Server != "brk" {
		t.Fatalf("after the failed call: got %+v (listed %v), want brk open", b, ok)
	}
	name := "brk-renamed"
	if _, err := e.reg.UpdateServer(e.ctx, audit.System, serverID, registry.Patch{Name: &name}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, func() bool {
		b, ok := entry()
		return ok && b.Server == name && b.State == router.CircuitOpen
	}, "the circuit never took the server's new name")
	if err := e.reg.DeleteServer(e.ctx, audit.System, serverID); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, func() bool {
		_, ok := entry()
		return !ok
	}, "the deleted server's circuit is still listed")
}

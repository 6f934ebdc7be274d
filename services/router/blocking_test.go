package router_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/grants"
	"github.com/toolwarden/toolwarden/services/router"
)

// A call that waits for a person (router.Blocking) does not go through its server's
// circuit: with the built-in circuit half-open, a user_collaboration call waiting for
// its answer does not take the one trial slot, so the next built-in call is the trial,
// succeeds and closes the circuit.
func TestBlockingCallBypassesCircuit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := apptest.Start(t, &apptest.Options{Builtin: true, Config: func(c *app.Config) {
		c.Router = router.Options{BreakerFailures: 1, BreakerCooldown: 100 * time.Millisecond}
	}})
	a.Enable(t, "builtin__user_collaboration")
	serverID := a.Enable(t, "builtin__think").ServerID
	alice := a.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	actor := audit.Actor{Kind: audit.ActorUser, ID: alice.ID, Name: "alice"}

	router.TripBreaker(a.Router, serverID, "builtin")
	testkit.WaitFor(t, 10*time.Second, func() bool { return a.Router.Breaker(serverID).State == router.CircuitHalfOpen },
		"the built-in circuit never half-opened")

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := a.Router.Call(cctx, router.Call{Tool: "builtin__user_collaboration", Arguments: json.RawMessage(`{"prompt":"Still there?"}`),
			Actor: actor, Role: auth.RoleToolUser, Source: router.SourceAPI, ConversationID: "conv-breaker"})
		done <- err
	}()
	testkit.WaitFor(t, 15*time.Second, func() bool {
		qs, err := a.Grants.Collaborations(ctx, alice.ID, grants.StatusPending)
		return err == nil && len(qs) == 1
	}, "the question never waited")

	res, err := a.Router.Call(ctx, router.Call{Tool: "builtin__think", Arguments: json.RawMessage(`{"thought":"trial"}`),
		Actor: actor, Role: auth.RoleToolUser, Source: router.SourceAPI})
	if err != nil || res.IsError {
		t.Fatalf("a built-in call while a question waits, the circuit half-open: got %+v, %v; want it run as the trial", res, err)
	}
	if b := a.Router.Breaker(serverID); b.State != router.CircuitClosed {
		t.Fatalf("after the trial call succeeded: got %+v, want closed", b)
	}
	cancel()
	if err := <-done; codeOf(err) != router.CodeCancelled {
		t.Fatalf("the question's call, its caller gone: got %v, want cancelled", err)
	}
	// The blocking call's end counted neither way.
	if b := a.Router.Breaker(serverID); b.State != router.CircuitClosed || b.Failures != 0 {
		t.Fatalf("after the blocking call ended: got %+v, want closed with no failures", b)
	}
}

package gateway_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
)

// awaitingOf waits for user uid's execution of tool awaiting approval.
func (e *holdEnv) awaitingOf(t *testing.T, uid, tool string) *executions.Execution {
	t.Helper()
	var found *executions.Execution
	webtest.WaitFor(t, 10*time.Second, func() bool {
		page, err := e.srv.Executions.List(context.Background(), executions.Query{RequestedBy: uid,
			Status: []executions.Status{executions.AwaitingApproval}})
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range page.Items {
			if ex.Plan.Steps[0].Tool == tool {
				found = &ex
				return true
			}
		}
		return false
	}, "no execution of "+tool+" awaits approval")
	return found
}

// ended waits for a call that must end without its result.
func ended(t *testing.T, what string, ch <-chan callOutcome) {
	t.Helper()
	select {
	case o := <-ch:
		if o.err == nil {
			t.Fatalf("%s: answered %+v %q after its credential ended; want an error", what, o.res, text(o.res))
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: still under way after its credential ended", what)
	}
}

// A call under way over streamable HTTP (a LOW call blocked in the upstream, a call
// held for approval) ends when its credential does: its token revoked, its user
// disabled, or its user's role losing a permission. The client gets an error, not the
// result; the upstream call is cancelled and the held execution withdrawn. A call on
// another token of the same user runs on. In both protocol eras, and over the legacy
// SSE transport (whose calls are answered on its stream, not on their POSTs).
func TestEndedCredentialEndsCallsUnderWay(t *testing.T) {
	t.Parallel()
	e, lt := sessionEndEnv(t)
	ctx := context.Background()
	changes := map[string]func(t *testing.T, uid, tokenID string){
		"revoked": func(t *testing.T, uid, tokenID string) {
			if _, err := e.srv.Auth.RevokeToken(ctx, audit.System, tokenID, uid); err != nil {
				t.Fatal(err)
			}
		},
		"disabled": func(t *testing.T, uid, _ string) {
			disabled := true
			if _, err := e.srv.Auth.UpdateUser(ctx, audit.System, uid, auth.UserChange{Disabled: &disabled}); err != nil {
				t.Fatal(err)
			}
		},
		"role lost": func(t *testing.T, uid, _ string) {
			if _, err := e.srv.Auth.SetRole(ctx, audit.System, uid, auth.RoleAuditor); err != nil {
				t.Fatal(err)
			}
		},
	}
	n := 0
	for _, change := range []string{"revoked", "disabled", "role lost"} {
		for _, era := range append(slices.Clone(eras), "sse") {
			t.Run(change+" "+era, func(t *testing.T) {
				n++
				name := "user" + string(rune('a'+n))
				u := e.srv.CreateUser(t, name, auth.RoleToolUser, password)
				tok, info, err := e.srv.Auth.CreateToken(ctx, audit.System, u.ID, auth.NewToken{Name: "agent"})
				if err != nil {
					t.Fatal(err)
				}
				cs := connectEra(t, e.srv, tok, era)
				running := call(ctx, cs, "lt__sleep", map[string]any{"ms": 60000}, "")
				held := call(ctx, cs, "ut__echo", map[string]any{"message": "for " + name}, "")
				ex := e.awaitingOf(t, u.ID, "ut__echo")
				webtest.WaitFor(t, 10*time.Second, func() bool { return lt.Sleeping() == 1 }, "the LOW sleep never reached the upstream")

				var kept <-chan callOutcome
				if change == "revoked" {
					other := connectEra(t, e.srv, e.srv.Token(t, name), era)
					kept = call(ctx, other, "lt__sleep", map[string]any{"ms": 2500}, "")
					webtest.WaitFor(t, 10*time.Second, func() bool { return lt.Sleeping() == 2 }, "the other token's sleep never reached the upstream")
				}

				changes[change](t, u.ID, info.ID)
				ended(t, "the LOW call", running)
				ended(t, "the held call", held)
				webtest.WaitFor(t, 10*time.Second, func() bool {
					cur, err := e.srv.Executions.Get(ctx, ex.ID)
					return err == nil && cur.Status == executions.Cancelled && cur.Reason == "cancelled by the client"
				}, "the held execution was not withdrawn")
				if kept != nil {
					if res := wait(t, kept); res.IsError || !strings.Contains(text(res), "slept") {
						t.Fatalf("the call on the token still valid: %+v %q", res, text(res))
					}
				}
				webtest.WaitFor(t, 10*time.Second, func() bool { return lt.Sleeping() == 0 }, "the LOW call was not cancelled upstream")
			})
		}
	}
}

// connectEra is mustConnect, or connectSSE for era "sse".
func connectEra(t *testing.T, srv *webtest.Server, token, era string) *mcp.ClientSession {
	t.Helper()
	if era != "sse" {
		return mustConnect(t, srv, token, era)
	}
	cs, err := connectSSE(t, srv, token)
	if err != nil {
		t.Fatalf("connect over SSE: %v", err)
	}
	return cs
}

// A role change that takes nothing away leaves the calls under way alone.
func TestRoleGainedKeepsCallsUnderWay(t *testing.T) {
	t.Parallel()
	e, lt := sessionEndEnv(t)
	ctx := context.Background()
	cs := mustConnect(t, e.srv, e.token, eras[0])
	running := call(ctx, cs, "lt__sleep", map[string]any{"ms": 2500}, "")
	webtest.WaitFor(t, 10*time.Second, func() bool { return lt.Sleeping() == 1 }, "the LOW sleep never reached the upstream")
	if _, err := e.srv.Auth.SetRole(ctx, audit.System, e.tina.ID, auth.RoleToolManager); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, running); res.IsError || !strings.Contains(text(res), "slept") {
		t.Fatalf("a call under way across a promotion: %+v %q", res, text(res))
	}
}

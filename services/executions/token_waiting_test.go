package executions_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/risk"
)

// An API token's plans are capped at DefaultMaxWaiting by Create itself, whatever route
// asked (none passes MaxWaiting but /mcp): the 21st is refused as a 409
// too_many_waiting, nothing stored; the person's own plans are not capped, and count
// with the token's.
func TestTokenWaitingCapInCreate(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.server("mt", true, "add")
	e.setRisk("mt__add", risk.Medium)
	alice := e.user("alice", auth.RoleToolUser)
	plan := func(i int) executions.Input {
		return executions.Input{Plan: &executions.Request{Steps: []executions.RequestStep{step("mt__add", fmt.Sprintf(`{"a":%d,"b":1}`, i))}}}
	}
	// Five of the person's own, then the token's up to the cap.
	for i := range 5 {
		if _, err := e.svc.Create(e.ctx, alice, plan(i)); err != nil {
			t.Fatalf("alice's plan %d: %v", i, err)
		}
	}
	for i := 5; i < executions.DefaultMaxWaiting; i++ {
		if _, err := e.svc.Create(e.ctx, token(alice), plan(i)); err != nil {
			t.Fatalf("the token's plan %d: %v", i, err)
		}
	}
	_, err := e.svc.Create(e.ctx, token(alice), plan(99))
	var tw *executions.TooManyWaitingError
	if !errors.As(err, &tw) || tw.Waiting != executions.DefaultMaxWaiting {
		t.Fatalf("the token's plan past %d waiting: got %v, want a TooManyWaitingError", executions.DefaultMaxWaiting, err)
	}
	if f, ok := fault.As(err); !ok || f.Kind != fault.KindConflict || f.Code != executions.CodeTooManyWaiting {
		t.Fatalf("the refusal as the web layer sees it: %+v, want a conflict coded %s", f, executions.CodeTooManyWaiting)
	}
	if n := e.count(`SELECT count(*) FROM executions WHERE requester_name = 'alice'`); n != executions.DefaultMaxWaiting {
		t.Fatalf("%d executions stored, want %d (the refused one not)", n, executions.DefaultMaxWaiting)
	}
	// The person, signed in, is not capped.
	if _, err := e.svc.Create(e.ctx, alice, plan(100)); err != nil {
		t.Fatalf("alice's own plan beside %d waiting: %v", executions.DefaultMaxWaiting, err)
	}
	// A cap given (as /mcp's) is kept, not replaced by the default.
	_, err = e.svc.Create(e.ctx, token(alice), executions.Input{Source: executions.SourceMCP, MaxWaiting: 1,
		Plan: plan(101).Plan})
	if err != nil {
		t.Fatalf("the first call through /mcp: %v", err)
	}
	if _, err = e.svc.Create(e.ctx, token(alice), executions.Input{Source: executions.SourceMCP, MaxWaiting: 1,
		Plan: plan(102).Plan}); !errors.As(err, &tw) {
		t.Fatalf("a second call through /mcp with MaxWaiting 1: got %v, want a TooManyWaitingError", err)
	}
}

// A settings patch of no field writes and audits nothing: it is what is in force.
func TestPatchSettingsEmpty(t *testing.T) {
	t.Parallel()
	e := start(t)
	want, err := e.svc.Settings(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.svc.PatchSettings(e.ctx, admin, executions.SettingsPatch{})
	if err != nil || got != want {
		t.Fatalf("an empty patch: got %+v, %v; want %+v", got, err, want)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'settings.executions'`); n != 0 {
		t.Errorf("an empty patch wrote %d settings.executions audit rows, want 0", n)
	}
	if n := e.count(`SELECT count(*) FROM settings WHERE key = 'executions.approval_ttl_seconds'`); n != 0 {
		t.Errorf("an empty patch stored the TTL")
	}
}

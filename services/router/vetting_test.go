package router_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/router"
)

// TestVettingOnlyBeforeFirstEnable: a tool manager's test run of a high-risk tool
// nobody has enabled yet needs nobody else (it is how the tool is vetted), but one of
// a tool that was enabled before does, disabled now or back in validation: disabling a
// tool must not be a way round separation of duties. With separation set to always, the
// vetting run needs another person too.
func TestVettingOnlyBeforeFirstEnable(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := e.server("v", true, "echo")
	e.tool("v__add")
	// probe was enabled; then its definition changed, and it awaits enabling again.
	hs.Server().SetTool(mcptest.ToolSpec{Name: "probe", Description: "Probes the service for the tests.", Reply: "probed"})
	before := e.enable("v__probe")
	hs.Server().SetTool(mcptest.ToolSpec{Name: "probe", Description: "Probes the service for the tests, now deeper.", Reply: "probed"})
	testkit.WaitFor(t, 30*time.Second, func() bool {
		tg, err := e.tools.Target(e.ctx, "v__probe")
		return err == nil && tg.DefinitionHash != before.DefinitionHash && tg.Status == "validated"
	}, "v__probe's new definition was never validated")
	for _, name := range []string{"v__echo", "v__add", "v__probe"} {
		e.app.SetRisk(t, name, risk.High)
	}
	if outs, err := e.tools.SetEnabled(e.ctx, admin, []string{e.tool("v__echo").ID}, false, "test", false); err != nil || outs[0].Err() != nil {
		t.Fatalf("disable: %v %v", err, outs)
	}
	// Another person who may approve, signed in once: separation (auto) then applies.
	other := e.app.CreateUser(t, "other", auth.RoleAdmin, "a long enough password 2")
	if _, err := e.pool.Exec(e.ctx, `UPDATE users SET last_login_at = now() WHERE id = $1`, other.ID); err != nil {
		t.Fatal(err)
	}
	u := e.app.CreateUser(t, "mgr", auth.RoleToolManager, "a long enough password 1")
	mgr := audit.Actor{Kind: audit.ActorUser, ID: u.ID, Name: u.Username}
	test := func(tool, args string) (*router.Result, error) {
		return e.r.Call(e.ctx, router.Call{Tool: tool, Arguments: json.RawMessage(args), Actor: mgr, Role: auth.RoleToolManager,
			Source: router.SourceTestPanel, Test: true, Approval: router.Approval{Confirmed: true, Phrase: tool}})
	}

	for _, c := range []struct{ tool, args, what string }{
		{"v__echo", `{"message":"x"}`, "a disabled tool"},
		{"v__probe", `{}`, "a tool enabled before its definition changed"},
	} {
		_, err := test(c.tool, c.args)
		var re *router.Error
		if !errors.As(err, &re) || re.Code != router.CodeApprovalRequired || re.Details.(router.ApprovalNeeded).Needs != "approver" {
			t.Fatalf("test run of %s: got %v, want approval_required needing another approver", c.what, err)
		}
	}
	res, err := test("v__add", `{"a":1,"b":2}`)
	if err != nil || res.IsError {
		t.Fatalf("test run of a tool never enabled: %v %v", res, err)
	}
	e.flush()
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND target_name = 'v__add'
		AND payload->>'vetting' = 'true' AND payload->>'self_approved' = 'true'`); n != 1 {
		t.Errorf("%d vetting runs of v__add audited, want 1", n)
	}
	if err := db.WithTx(e.ctx, e.pool, func(tx pgx.Tx) error {
		return decide.SetSeparation(e.ctx, tx, decide.SeparationAlways, "test")
	}); err != nil {
		t.Fatal(err)
	}
	_, err = test("v__add", `{"a":1,"b":2}`)
	var re *router.Error
	if !errors.As(err, &re) || re.Code != router.CodeApprovalRequired || re.Details.(router.ApprovalNeeded).Needs != "approver" {
		t.Fatalf("test run of a tool never enabled, separation always: got %v, want approval_required needing another approver", err)
	}
}

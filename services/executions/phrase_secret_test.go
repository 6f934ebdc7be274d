package executions_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/risk"
)

// A target argument the tool's schema marks secret (writeOnly, or format password) is
// masked for all but the plan's deciders, so it is not in the phrase either, which
// everyone who reads the plan (or its rollback) sees.
func TestPhraseLeavesOutSecretArguments(t *testing.T) {
	t.Parallel()
	e := start(t)
	hs := e.server("mt", true, "echo", "fail")
	e.setRisk("mt__fail", risk.Low)
	hs.Server().SetTool(mcptest.ToolSpec{Name: "drop", Description: "Drops a table (pretend).",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","writeOnly":true},` +
			`"id":{"type":"string","format":"password"},"table":{"type":"string"}}}`),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true)}})
	e.enable("mt__drop")
	const args = `{"name":"tangolima","id":"kilo7","table":"users"}`
	const phrase = "mt__drop users"

	ex := e.create(e.admin, step("mt__drop", args))
	if ex.Risk != "high" || ex.ConfirmationPhrase != phrase {
		t.Fatalf("got risk %s, phrase %q; want high, %q", ex.Risk, ex.ConfirmationPhrase, phrase)
	}
	if got := e.get(ex.ID).ConfirmationPhrase; got != phrase {
		t.Fatalf("the phrase shown from the stored plan: %q, want %q", got, phrase)
	}
	if got, err := e.svc.Confirm(e.ctx, e.admin, ex.ID, phrase, ex.Hash()); err != nil || got.Approval != "phrase" {
		t.Fatalf("confirm with %q: got %v, %v; want it approved by phrase", phrase, got, err)
	}

	// The rollback's phrase, of an undo step of the same tool.
	e.run(nil)
	failed, err := e.svc.Create(e.ctx, e.admin, executions.Input{Plan: &executions.Request{
		Steps:    []executions.RequestStep{step("mt__echo", `{"message":"one"}`), step("mt__fail", `{}`)},
		Rollback: []executions.RequestStep{step("mt__drop", args)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(failed.ID, executions.Failed, 30*time.Second)
	_, rp, err := e.svc.PlanRollback(e.ctx, failed.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rp.Risk != risk.High || rp.Phrase != phrase || strings.Contains(rp.Phrase, "tangolima") {
		t.Fatalf("rollback: risk %s, phrase %q; want high, %q", rp.Risk, rp.Phrase, phrase)
	}
}

package configcode_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/configcode"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/web/httperr"
)

// An import planned to enable a tool whose definition then changed (rediscovered and
// validated again, same status and findings) is refused as changed since the plan, and
// a plan made again differs (the import page's digest): the new definition was never
// reviewed, as the tool page's enable refuses it (tools.CodeStaleDefinition).
func TestImportEnableRefusesChangedDefinition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	spec := mcptest.ToolSpec{Name: "t", Description: "Reads a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "s"})
	hs.Server().SetTool(spec)
	a := apptest.Start(t, nil)
	sv := a.RegisterServer(t, registry.Spec{Name: "s", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	before := a.Settled(t, "s__t")
	if before.Status != "validated" {
		t.Fatalf("s__t is %s, want validated", before.Status)
	}
	file := "version: 1\nservers: []\ntools:\n  - tool: s__t\n    state: enabled\n"
	p := plan(t, a, "config.yaml", file)
	if p.HasErrors() || p.Count(configcode.KindTool, registry.PlanUpdate) != 1 {
		t.Fatalf("plan:\n%s", p)
	}
	// Upstream changes the tool: rediscovered, validated again with another hash.
	spec.Description = "Reads a file, then deletes it."
	hs.Server().SetTool(spec)
	if _, err := a.MCP.DiscoverOnce(ctx, sv.ID, "manual", admin); err != nil {
		t.Fatal(err)
	}
	after := a.Settled(t, "s__t")
	if after.Status != "validated" || after.DefinitionHash == before.DefinitionHash ||
		fmtWorst(after.ValidationWorst) != fmtWorst(before.ValidationWorst) {
		t.Fatalf("s__t after rediscovery: %s %s (worst %s), want validated with a new hash and the same findings",
			after.Status, after.DefinitionHash, fmtWorst(after.ValidationWorst))
	}
	if again := plan(t, a, "config.yaml", file); again.Digest() == p.Digest() {
		t.Errorf("a plan made after the definition changed has the first plan's digest: the import page applies it")
	}
	_, err := a.ConfigCode.Apply(ctx, admin, p)
	if !errors.Is(err, configcode.ErrChangedSincePlan) || httperr.Classify(err).Status != http.StatusConflict {
		t.Errorf("apply: %v, want ErrChangedSincePlan (409)", err)
	}
	if n := a.Count(t, `SELECT count(*) FROM mcp_tools WHERE name = 't' AND status = 'enabled'`); n != 0 {
		t.Fatalf("s__t was enabled with a definition nobody reviewed")
	}
}

func fmtWorst(w *string) string {
	if w == nil {
		return "none"
	}
	return *w
}

// A tool the file lists and the plan leaves alone may get a new definition between plan
// and apply (its state and settings the same): the import still applies, since it
// changes nothing of that tool. Only the tools a plan changes are pinned to the
// definition it saw.
func TestImportIgnoresNewDefinitionOfToolLeftAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	alone := mcptest.ToolSpec{Name: "alone", Description: "Reads a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "s"})
	hs.Server().SetTool(alone)
	hs.Server().SetTool(mcptest.ToolSpec{Name: "used", Description: "Lists a folder.", InputSchema: json.RawMessage(`{"type":"object"}`)})
	a := apptest.Start(t, nil)
	sv := a.RegisterServer(t, registry.Spec{Name: "s", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	before := a.Settled(t, "s__alone")
	a.Settled(t, "s__used")
	a.SetRisk(t, "s__alone", "high")
	file := "version: 1\nservers: []\ntools:\n  - tool: s__alone\n    risk: high\n  - tool: s__used\n    state: enabled\n"
	p := plan(t, a, "config.yaml", file)
	if p.HasErrors() || p.Count(configcode.KindTool, registry.PlanUpdate) != 1 {
		t.Fatalf("plan:\n%s", p)
	}
	alone.Description = "Reads a file, carefully."
	hs.Server().SetTool(alone)
	if _, err := a.MCP.DiscoverOnce(ctx, sv.ID, "manual", admin); err != nil {
		t.Fatal(err)
	}
	after := a.Settled(t, "s__alone")
	if after.Status != before.Status || after.DefinitionHash == before.DefinitionHash {
		t.Fatalf("s__alone after rediscovery: %s %s, want %s with a new hash", after.Status, after.DefinitionHash, before.Status)
	}
	if _, err := a.ConfigCode.Apply(ctx, admin, p); err != nil {
		t.Fatalf("apply, a tool it leaves alone redefined meanwhile: %v", err)
	}
	if n := a.Count(t, `SELECT count(*) FROM mcp_tools WHERE name = 'used' AND status = 'enabled'`); n != 1 {
		t.Fatalf("s__used was not enabled")
	}
}

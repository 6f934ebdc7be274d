package tools_test

import (
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/services/toolstate"
)

// TestRemovedParameterLeavesTheConfiguration: a parameter the tool's definition no
// longer has is dropped when a flat configuration sets another one, rather than
// refusing every change for a setting nobody can make any more.
func TestRemovedParameterLeavesTheConfiguration(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("files", true)
	id := f.tool(toolSpec{server: srv, name: "list", status: "enabled",
		schema: `{"type":"object","properties":{"path_prefix":{"type":"string"},"api_key":{"type":"string"},"units":{"type":"string"}}}`})
	f.update(id, tools.Patch{Params: map[string]tools.ParamInput{
		"path_prefix": {Mode: tools.ModeFixed, Value: json.RawMessage(`"/safe"`)},
		"api_key":     {Mode: tools.ModeFixed, Value: json.RawMessage(`"sk-secret-value-1234"`)},
	}})

	// The upstream renames path_prefix to root and drops api_key.
	in := json.RawMessage(`{"type":"object","properties":{"root":{"type":"string"},"units":{"type":"string"}}}`)
	desc := "Lists the files under the root given and says what each holds."
	raw, _ := json.Marshal(map[string]any{"name": "list", "description": desc, "inputSchema": in})
	err := db.WithTx(f.ctx, f.pool, func(tx pgx.Tx) error {
		_, err := tools.StoreDiscovery(f.ctx, tx, srv, tools.DiscoveryWrite{Actor: "system", Relisted: []tools.Relisted{{
			ID: id, Name: "list", VersionMajor: 2, VersionMinor: 0, Status: toolstate.Updating, Was: toolstate.Enabled,
			Definition: &tools.Definition{Description: desc, InputSchema: in, Raw: raw, Hash: "hash-list-2"}}}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	params, merge, err := tools.ParamInputs(json.RawMessage(`{"units":"metric"}`))
	if err != nil || !merge {
		t.Fatalf("flat configuration: %v %v", merge, err)
	}
	if _, err := f.svc.Update(f.ctx, bob, id, tools.Patch{Params: params, MergeParams: true}); err != nil {
		t.Fatalf("setting units after path_prefix went: %v", err)
	}
	cfg, err := f.svc.Configuration(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Params) != 1 || string(cfg.Params["units"].Value) != `"metric"` {
		t.Fatalf("configuration %v, want only units", cfg.Params)
	}
	// Naming a parameter the tool no longer has is still refused.
	params, _, _ = tools.ParamInputs(json.RawMessage(`{"path_prefix":"/other"}`))
	_, err = f.svc.Update(f.ctx, bob, id, tools.Patch{Params: params, MergeParams: true})
	wantFields(t, err, "params.path_prefix")
}

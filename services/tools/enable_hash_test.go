package tools_test

import (
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/fault"
	"github.com/toolwarden/toolwarden/services/tools"
)

// An enable tied to the definition the person saw is refused once the definition has
// changed (a stale fault, nothing written), goes through with the current hash, and a
// disable is never refused for it.
func TestSetEnabledSeenDefinition(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.toolIn("deploy", "validated")
	seen := f.get(id).DefinitionHash
	// Rediscovery changed the definition after the page was opened.
	f.exec(`UPDATE mcp_tools SET definition_hash = 'hash-deploy-2', description = 'Deploys and then deletes the old build.' WHERE id = $1`, id)

	out, err := f.svc.SetEnabledSeen(f.ctx, alice, id, true, "", false, seen)
	if err != nil {
		t.Fatal(err)
	}
	fe, _ := fault.As(out[0].Err())
	if fe == nil || fe.Kind != fault.KindStale || fe.Code != tools.CodeStaleDefinition ||
		!strings.Contains(out[0].Error, "changed since you opened it") {
		t.Fatalf("enable with the old hash: outcome %+v (fault %+v), want a stale_definition fault", out[0], fe)
	}
	if d, ok := fe.Details.(tools.StaleDefinition); !ok || d.Current != "hash-deploy-2" {
		t.Errorf("details %+v, want the current hash", fe.Details)
	}
	if s := f.status(id); s != "validated" || len(f.history(id)) != 0 ||
		f.count(`SELECT count(*) FROM audit_log WHERE action = 'tool.enable' AND target_id = $1`, id) != 0 {
		t.Fatalf("the refused enable changed the tool: %s, history %v", s, f.history(id))
	}

	// An override does not get past it either.
	out, err = f.svc.SetEnabledSeen(f.ctx, alice, id, true, "known finding", true, seen)
	if err != nil || !fault.Is(out[0].Err(), fault.KindStale) || f.status(id) != "validated" {
		t.Fatalf("override with the old hash: %+v, %v; status %s", out, err, f.status(id))
	}

	// With the hash of the definition it has now, it is enabled.
	out, err = f.svc.SetEnabledSeen(f.ctx, alice, id, true, "", false, "hash-deploy-2")
	if err != nil || out[0].Err() != nil || f.status(id) != "enabled" {
		t.Fatalf("enable with the current hash: %+v, %v; status %s", out, err, f.status(id))
	}

	// A disable with an old hash still disables.
	out, err = f.svc.SetEnabledSeen(f.ctx, alice, id, false, "", false, seen)
	if err != nil || out[0].Err() != nil || f.status(id) != "disabled" {
		t.Fatalf("disable with the old hash: %+v, %v; status %s", out, err, f.status(id))
	}
}

package handlers

import (
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
)

// An import that updates or (pruning) deletes servers is refused for a caller who may
// create servers but not edit or delete them, naming each: only creating was checked.
// No role has server.create without the other two, so this is checked here.
func TestDenyImportNeedsEditAndDelete(t *testing.T) {
	t.Parallel()
	plan := func() *registry.Plan {
		return &registry.Plan{File: "servers.yaml", Items: []registry.PlanItem{
			{Action: registry.PlanCreate, Name: "new"}, {Action: registry.PlanUpdate, Name: "changed"},
			{Action: registry.PlanUnchanged, Name: "same"}, {Action: registry.PlanDelete, Name: "gone"}}}
	}
	createOnly := func(p auth.Permission) bool { return p != auth.PermServerEdit && p != auth.PermServerDelete }
	p := plan()
	denied := denyImport(createOnly, p)
	slices.Sort(denied)
	if !slices.Equal(denied, []string{"changed", "gone"}) || len(p.Errors) != 2 {
		t.Fatalf("denied %q, errors %v: want changed and gone refused", denied, p.Errors)
	}
	for _, e := range p.Errors {
		if want := map[string]string{"changed": "edit servers", "gone": "delete servers"}[e.Server]; !strings.Contains(e.Message, want) {
			t.Errorf("error %s: want it to say it needs to %s", e, want)
		}
	}
	// Nor may they change stdio commands: the servers refused before are still named.
	noCommands := func(p auth.Permission) bool { return createOnly(p) && p != auth.PermServerCommand }
	p = plan()
	denied = denyImport(noCommands, p)
	slices.Sort(denied)
	if !slices.Equal(denied, []string{"changed", "gone"}) || len(p.Errors) != 2 {
		t.Fatalf("without server.command too: denied %q, errors %v; want changed and gone refused", denied, p.Errors)
	}
	// Allowed everything: nothing refused.
	if p := plan(); len(denyImport(func(auth.Permission) bool { return true }, p)) != 0 || p.HasErrors() {
		t.Errorf("an administrator's import is refused: %v", p.Errors)
	}
}

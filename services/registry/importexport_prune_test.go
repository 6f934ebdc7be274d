package registry_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// keepAOnly is a file listing server a alone: with prune, every other server goes.
const keepAOnly = `version: 1
servers:
  - name: a
    type: stdio
    description: local files
    command: npx
    args: [-y, '@example/server']
    env:
      API_KEY: null
    enabled: true
`

func (f *fixture) planAs(actor audit.Actor, data string) *registry.Plan {
	f.t.Helper()
	cfg, err := registry.ParseConfig("servers.yaml", []byte(data), registry.ParseOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	plan, err := f.reg.PlanImport(f.ctx, cfg, registry.ImportOptions{Prune: true, CompareSecrets: true, Actor: actor})
	if err != nil {
		f.t.Fatal(err)
	}
	return plan
}

// A server an import prunes takes along, as deleting it on its page does, the
// compensations of other servers' tools that its tools undo and the per-user rules on
// its tools: the plan names each (its text, its JSON, and so the page), and the result
// names the tools left without their undo step.
func TestPrunePlanSaysWhatGoesWithTheServer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var bob string
	if err := f.pool.QueryRow(f.ctx, `INSERT INTO users (username, role, password_hash) VALUES ('bob', 'tool_user', 'x') RETURNING id::text`).Scan(&bob); err != nil {
		t.Fatal(err)
	}
	a, b := f.create(stdioSpec("a")), f.create(stdioSpec("b"))
	f.discover(a.ID, discovery("connect", threeTools()...))
	f.discover(b.ID, discovery("connect", threeTools()...))
	at, bt := f.toolsByName(a.ID), f.toolsByName(b.ID)
	f.exec(`INSERT INTO tool_compensations (tool_id, undo_tool_id, argument_map) VALUES ($1, $2, '{}')`, at["echo"].ID, bt["add"].ID)
	f.exec(`INSERT INTO user_tool_permissions (user_id, tool_id, can_use) VALUES ($1, $2, true), ($1, $3, false)`,
		bob, bt["echo"].ID, bt["ping"].ID)

	plan := f.planAs(audit.System, keepAOnly)
	if plan.HasErrors() || plan.Count(registry.PlanDelete) != 1 {
		t.Fatalf("plan:\n%s", plan)
	}
	i := slices.IndexFunc(plan.Items, func(it registry.PlanItem) bool { return it.Action == registry.PlanDelete })
	del := plan.Items[i]
	if want := []registry.LostUndo{{Tool: "a__echo", Undo: "b__add"}}; !slices.Equal(del.LostUndo, want) {
		t.Errorf("lost undo %v, want %v", del.LostUndo, want)
	}
	if want := []registry.RemovedRule{{Tool: "b__echo", User: "bob", CanUse: true}, {Tool: "b__ping", User: "bob"}}; !slices.Equal(del.Rules, want) {
		t.Errorf("rules %v, want %v", del.Rules, want)
	}
	text := plan.String()
	for _, want := range []string{
		"- delete b (stdio)\n    removes the compensation of a__echo: its undo tool b__add goes with this server",
		"    removes the per-user rule on b__echo granting it to bob\n",
		"    removes the per-user rule on b__ping refusing it to bob\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the plan lacks %q:\n%s", want, text)
		}
	}
	js, _ := json.Marshal(plan)
	if !strings.Contains(string(js), `"lost_undo":[{"tool":"a__echo","undo":"b__add"}]`) {
		t.Errorf("the plan's JSON does not name the compensation lost: %s", js)
	}
	// A compensation set to undo with b's tool after the preview is another plan.
	before := plan.Digest()
	f.exec(`INSERT INTO tool_compensations (tool_id, undo_tool_id, argument_map) VALUES ($1, $2, '{}')`, at["add"].ID, bt["ping"].ID)
	if f.planAs(audit.System, keepAOnly).Digest() == before {
		t.Errorf("the digest did not change with a compensation the deletion removes")
	}
	f.exec(`DELETE FROM tool_compensations WHERE tool_id = $1`, at["add"].ID)

	res, err := f.reg.ApplyImport(f.ctx, audit.System, plan)
	if err != nil || len(res.Deleted) != 1 {
		t.Fatalf("import: %+v, %v; want b deleted", res, err)
	}
	if !slices.Equal(res.LostUndo, []string{"a__echo"}) {
		t.Errorf("result lost undo %v, want [a__echo]", res.LostUndo)
	}
	if s := res.String(); !strings.Contains(s, "1 tool of another server lost the undo step a deleted server's tool gave it (a__echo)") {
		t.Errorf("result %q does not say a__echo lost its undo step", s)
	}
}

// A plan pruning a server whose tools have per-user refusals is an error for whoever
// may not lift them (a tool manager, any API token), as applying would refuse it: a
// clean plan must apply. An administrator signed in, or the system, plans it clean.
func TestPrunePlanRefusesWhatApplyWouldRefuse(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	as := f.roleActors()
	f.create(stdioSpec("a"))
	gone := f.create(stdioSpec("gone"))
	f.discover(gone.ID, discovery("connect", threeTools()...))
	f.exec(`INSERT INTO user_tool_permissions (user_id, tool_id, can_use) VALUES ($1, $2, false)`, as("", "bob").ID, f.toolsByName(gone.ID)["echo"].ID)

	for _, tc := range []struct {
		who   string
		actor audit.Actor
		say   string // "" for a clean plan
	}{
		{"tool manager", as(audit.ActorUser, "mgr"), "only an administrator"},
		{"admin's token", as(audit.ActorToken, "boss"), "sign in"},
		{"admin", as(audit.ActorUser, "boss"), ""},
		{"system", audit.System, ""},
	} {
		plan := f.planAs(tc.actor, keepAOnly)
		if tc.say == "" {
			if plan.HasErrors() {
				t.Errorf("%s: plan has errors:\n%s", tc.who, plan)
			}
			continue
		}
		if len(plan.Errors) != 1 || plan.Errors[0].Server != "gone" || !strings.Contains(plan.Errors[0].Message, "bob on gone__echo") ||
			!strings.Contains(plan.Errors[0].Message, tc.say) {
			t.Errorf("%s: plan errors %v, want one on gone naming bob's refusal and saying %q", tc.who, plan.Errors, tc.say)
		}
		if _, err := f.reg.ApplyImport(f.ctx, tc.actor, plan); err == nil {
			t.Errorf("%s: the plan with errors applied", tc.who)
		}
	}
	if n := f.count(`SELECT count(*) FROM mcp_servers WHERE id = $1`, gone.ID); n != 1 {
		t.Fatalf("gone deleted by a refused plan")
	}
}

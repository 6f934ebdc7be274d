package configcode_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/configcode"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/registry"
)

// A file whose tool keeps its compensation on a server the file prunes: the plan says
// the compensation goes with that server (not "there is no tool", which reads as if
// the stored one stayed), the servers' part names it under the deletion, and the
// result names the tool left without its undo step.
func TestPruneSaysCompensationGoesWithServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hs := liveServer(t)
	a := apptest.Start(t, nil)
	a.RegisterServer(t, registry.Spec{Name: "ev", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	other := mcptest.StartHTTP(t, &mcptest.Options{Name: "other"})
	a.RegisterServer(t, registry.Spec{Name: "other", Type: registry.TypeStreamableHTTP, URL: other.URL(), Enabled: true})
	a.Settled(t, "ev__echo")
	a.Settled(t, "other__add")
	if err := a.Executions.SetCompensation(ctx, admin, "ev__echo", "other__add", map[string]executions.MappedArgument{}); err != nil {
		t.Fatal(err)
	}
	file := "version: 1\nservers:\n  - name: ev\n    type: streamable_http\n    url: " + hs.URL() + "\n    enabled: true\n" +
		"tools:\n  - tool: ev__echo\n    compensation: {undo: other__add, arguments: {}}\n"
	p, err := a.ConfigCode.Plan(ctx, parse(t, "config.yaml", file, false), configcode.ImportOptions{Prune: true, CompareSecrets: true, Actor: admin})
	if err != nil {
		t.Fatal(err)
	}
	if p.HasErrors() {
		t.Fatalf("plan:\n%s", p)
	}
	text := p.String()
	for _, want := range []string{
		`tools.ev__echo.compensation.undo: server other is deleted by this import (prune), and its tool "other__add" with it: ` +
			"the compensation was not applied, and the stored one (undo other__add) goes with the server: the tool is left without one",
		"- delete other (streamable_http)\n    removes the compensation of ev__echo: its undo tool other__add goes with this server",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the plan lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "there is no tool") {
		t.Errorf("the plan says the undo tool does not exist:\n%s", text)
	}
	res, err := a.ConfigCode.Apply(ctx, admin, p)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Servers.LostUndo, []string{"ev__echo"}) || !strings.Contains(res.String(), "lost the undo step") {
		t.Errorf("result %s (lost undo %v), want ev__echo named", res, res.Servers.LostUndo)
	}
	if n := a.Count(t, `SELECT count(*) FROM tool_compensations`); n != 0 {
		t.Errorf("%d compensations left, want 0", n)
	}
}

// The plan carries who will apply it: pruning a server whose tools have a per-user
// refusal is an error of a tool manager's plan (applying would refuse it), not of an
// administrator's.
func TestPrunePlanChecksRefusalsForItsActor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hs := liveServer(t)
	a := apptest.Start(t, nil)
	a.RegisterServer(t, registry.Spec{Name: "ev", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	mgr := a.CreateUser(t, "mgr", auth.RoleToolManager, "mgr-password-1234")
	a.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-123")
	a.Settled(t, "ev__echo")
	no := false
	if err := a.Tools.SetPermission(ctx, admin, a.ToolID(t, "ev__echo"), "bob", &no); err != nil {
		t.Fatal(err)
	}
	file := "version: 1\nservers: []\n"
	for _, tc := range []struct {
		who   string
		actor audit.Actor
		error bool
	}{
		{"tool manager", audit.Actor{Kind: audit.ActorUser, ID: mgr.ID, Name: "mgr"}, true},
		{"system", admin, false},
	} {
		p, err := a.ConfigCode.Plan(ctx, parse(t, "config.yaml", file, false), configcode.ImportOptions{Prune: true, Actor: tc.actor})
		if err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprint(p.Errors)
		if has := strings.Contains(got, "bob on ev__echo"); has != tc.error {
			t.Errorf("%s: plan errors %s; want an error naming bob's refusal: %v", tc.who, got, tc.error)
		}
	}
}

// The transaction applying the tools of the servers an import discovered rolls back
// whole when its summary's audit entry fails (as when its commit fails): the result
// does not report those tools as changed, only as not applied.
func TestPendingRollbackLeavesNothingChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "x"})
	a := apptest.Start(t, nil)
	// The second transaction's summary is the config.import entry without server changes.
	if _, err := a.Owner.Exec(ctx, `
		CREATE FUNCTION fail_pending_summary() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
			IF NEW.action = 'config.import' AND NEW.payload->>'server_changes' = '0' THEN
				RAISE EXCEPTION 'test: the summary cannot be written';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER fail_pending_summary BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION fail_pending_summary();`); err != nil {
		t.Fatal(err)
	}
	file := "version: 1\nservers:\n  - name: x\n    type: streamable_http\n    url: " + hs.URL() + "\n    enabled: true\n" +
		"categories:\n  - name: utilities\n    description: Small helpers\n" +
		"tools:\n  - tool: x__echo\n    risk: high\n"
	p := plan(t, a, "config.yaml", file)
	if p.HasErrors() || p.Count(configcode.KindTool, configcode.ActionPending) != 1 {
		t.Fatalf("plan:\n%s", p)
	}
	res, err := a.ConfigCode.Apply(ctx, admin, p)
	if !errors.Is(err, configcode.ErrPartial) || !strings.Contains(err.Error(), "the summary cannot be written") {
		t.Fatalf("apply: %v; want a partial import failing at the summary", err)
	}
	if !slices.Equal(res.Changed, []string{"category utilities"}) {
		t.Errorf("changed %q, want only the first transaction's category", res.Changed)
	}
	if got := fmt.Sprint(res.Unapplied); !strings.Contains(got, "tools.x__echo: the import stopped after discovering server x") {
		t.Errorf("not applied: %s", got)
	}
	if n := a.Count(t, `SELECT count(*) FROM mcp_tools WHERE name = 'echo' AND risk_override IS NOT NULL`); n != 0 {
		t.Errorf("x__echo's risk was set (%d rows)", n)
	}
}

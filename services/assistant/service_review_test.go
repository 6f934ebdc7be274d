package assistant_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/toolname"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

// "Enable the first one" enables the tool as the list showed it: a definition
// rediscovered since is refused as stale, as the pages refuse it.
func TestEnableFromListIsOfTheDefinitionShown(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "g1"})
	sv := a.RegisterServer(t, registry.Spec{Name: "g1", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	a.ToolID(t, toolname.Join("g1", "echo")) // discovered
	c := newChat(t, a)
	r := c.say("show me the tools on g1")
	if len(r.Choices) < 2 {
		t.Fatalf("the tools on g1: %q %+v", r.Reply, r.Choices)
	}
	nameAt := func(i int) string {
		l := strings.TrimPrefix(r.Choices[i].Label, strings.Split(r.Choices[i].Label, " ")[0]+" ")
		return strings.Split(l, " on ")[0]
	}
	first, second := a.ToolID(t, toolname.Join("g1", nameAt(0))), a.ToolID(t, toolname.Join("g1", nameAt(1)))
	// Rediscovered with another definition after the list was shown.
	if _, err := a.Pool.Exec(t.Context(), `UPDATE mcp_tools SET definition_hash = 'changed-since' WHERE id = $1`, first); err != nil {
		t.Fatal(err)
	}
	status := func(id string) string {
		var s string
		if err := a.Pool.QueryRow(t.Context(), `SELECT status FROM mcp_tools WHERE id = $1`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	r = c.say("enable the first one")
	if status(first) == "enabled" || !strings.Contains(r.Reply, "changed since") {
		t.Errorf("enable the first one, its definition changed since the list: %s, reply %q; want it refused as stale", status(first), r.Reply)
	}
	r = c.say("enable the second one")
	if status(second) != "enabled" {
		t.Errorf("enable the second one (unchanged): %s, reply %q", status(second), r.Reply)
	}
	_ = sv
}

// A yes to run medium-risk test cases runs the cases it was asked for: a case added
// between the question and the yes makes it ask again, running nothing.
func TestTestCasesYesIsForTheCasesAsked(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := apptest.Start(t, &apptest.Options{Builtin: true})
	id := a.Enable(t, "builtin__file_operations").ID
	a.SetRisk(t, "builtin__file_operations", "low")
	addCase := func(name, args string) {
		t.Helper()
		if _, err := a.Tools.SaveTestCase(ctx, audit.System, id, tools.TestCase{Name: name, Arguments: json.RawMessage(args), Expect: tools.ExpectSuccess}); err != nil {
			t.Fatal(err)
		}
	}
	addCase("read", `{"operation":"read_file","filePath":"a.txt"}`)
	addCase("write", `{"operation":"create_file","filePath":"a.txt","content":"x"}`)
	c := newChat(t, a)
	if r := c.say("test file_operations"); !strings.Contains(r.Reply, "needs your confirmation") {
		t.Fatalf("test file_operations: %q", r.Reply)
	}
	addCase("write2", `{"operation":"create_file","filePath":"b.txt","content":"y"}`)
	r := c.say("yes")
	if strings.Contains(r.Reply, "passed") || !strings.Contains(r.Reply, "changed since you said yes") {
		t.Errorf("yes after a case was added: %q; want nothing run and the question asked again", r.Reply)
	}
	if r = c.say("yes"); !strings.Contains(r.Reply, "of 3 test cases passed") {
		t.Errorf("yes to the cases as they are: %q", r.Reply)
	}
}

type downModel struct{}

func (downModel) Chat(context.Context, string, string) (string, error) {
	return "", errors.New("connection refused")
}

// A model that does not answer is logged and the person is told, not "I didn't
// understand" alone; a refusal whose audit fails is logged.
func TestFailuresLogged(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	a.Assistant.SetModel(downModel{})
	c := newChat(t, a)
	if r := c.say("frobnicate the quux widgets"); !strings.Contains(r.Reply, "language model") || !strings.Contains(r.Reply, "unavailable") {
		t.Errorf("with the model down: %q; want it said", r.Reply)
	}
	if !strings.Contains(a.Logs.String(), "the language model did not answer") {
		t.Errorf("the model's failure was not logged")
	}

	// The audit log refuses the refusal's entry.
	if _, err := a.Owner.Exec(t.Context(), `CREATE FUNCTION no_refusals() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.action = 'assistant.refused' THEN RAISE EXCEPTION 'no refusals today'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER no_refusals BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION no_refusals()`); err != nil {
		t.Fatal(err)
	}
	a.CreateUser(t, "gina", auth.RoleGuest, "correct-horse-battery-9")
	guest, err := a.Auth.GetUserByName(t.Context(), "gina")
	if err != nil {
		t.Fatal(err)
	}
	g := &chat{t: t, a: a, p: &auth.Principal{User: guest, Kind: audit.ActorUser}}
	g.say("add a new MCP server at https://example.com/mcp")
	if !strings.Contains(a.Logs.String(), "a refusal could not be audited") {
		t.Errorf("the refusal's failed audit was not logged")
	}
}

// A configure whose tool's stored settings cannot be read keeps its values out, as a
// secret's: the check fails closed.
func TestStoredSecretCheckFailsClosed(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "g2"})
	a.RegisterServer(t, registry.Spec{Name: "g2", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	id := a.ToolID(t, toolname.Join("g2", "echo"))
	c := newChat(t, a)
	c.say("show me all tools") // the catalogue is read (and kept) with echo in it
	// Gone from under the kept catalogue: its settings cannot be read.
	if _, err := a.Pool.Exec(t.Context(), `DELETE FROM mcp_tools WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	const value = "plainvalue7731"
	r := c.say("set message to " + value + " for echo on g2")
	if n := a.Count(t, `SELECT count(*) FROM assistant_messages WHERE body LIKE '%`+value+`%'`); n != 0 {
		t.Errorf("the value was kept in %d messages (reply %q)", n, r.Reply)
	}
}

// A run of test cases that stops part way (the server stopped answering) records the
// cases that ran and says so, as the test panel does, instead of "did not run".
func TestTestCasesStoppedPartWay(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := apptest.Start(t, nil)
	a.LiveServer(t, "hs", true, "sleep")
	a.SetRisk(t, "hs__sleep", "low")
	tl, err := a.Tools.Target(ctx, "hs__sleep")
	if err != nil {
		t.Fatal(err)
	}
	half := 500
	if _, err := a.Tools.Update(ctx, audit.System, tl.ID, tools.Patch{TimeoutMS: &half}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"one", "two", "three", "four"} {
		if _, err := a.Tools.SaveTestCase(ctx, audit.System, tl.ID, tools.TestCase{Name: name, Arguments: json.RawMessage(`{"ms":60000}`)}); err != nil {
			t.Fatal(err)
		}
	}
	r := newChat(t, a).say("test sleep")
	if !strings.Contains(r.Reply, "2 of 4 cases ran") || strings.Contains(r.Reply, "did not run") {
		t.Errorf("test sleep: %q; want it to say 2 of 4 cases ran", r.Reply)
	}
	cs, err := a.Tools.TestCases(ctx, tl.ID)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, tc := range cs {
		if tc.LastRunAt != nil {
			ran++
		}
	}
	if ran != 2 {
		t.Errorf("%d cases recorded as run, want the 2 that ran", ran)
	}
}

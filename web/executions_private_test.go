package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/risk"
)

// A built-in step's result holds its requester's notes (or files, command output,
// answers): its execution's page, live updates, log and API show it to the requester
// and to auditors, as the tool's Logs tab does, and withhold it from every other person
// who may see executions. A memory list showed alice's notes to every tool user.
func TestBuiltinStepResultsPrivate(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__memory_operations")
	srv.App.SetRisk(t, "builtin__memory_operations", risk.Low)
	const secret = "the vault opens with 4711-privately"
	srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-12")
	srv.CreateUser(t, "carol", auth.RoleAuditor, "carol-password-1")
	alice := svClient{t: t, srv: srv, c: srv.Login(t, "alice", "alice-password-1")}
	bob := svClient{t: t, srv: srv, c: srv.Login(t, "bob", "bob-password-12")}
	carol := svClient{t: t, srv: srv, c: srv.Login(t, "carol", "carol-password-1")}

	alice.json(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "builtin__memory_operations",
		"arguments": map[string]any{"operation": "store", "content": secret}}, 200, nil)
	cursor := lastEventID(t, srv)
	var ex apiExec
	alice.json(http.MethodPost, "/api/v1/executions", plan(step("builtin__memory_operations.list", map[string]any{})), 201, &ex)
	waitExec(t, alice, ex.ID, "success")

	type stepOut struct {
		Result   json.RawMessage `json:"result"`
		Withheld bool            `json:"result_withheld"`
	}
	apiSteps := func(c svClient) []stepOut {
		var out struct {
			Steps []stepOut `json:"steps"`
		}
		c.json(http.MethodGet, "/api/v1/executions/"+ex.ID, nil, 200, &out)
		return out.Steps
	}
	for _, who := range []struct {
		name string
		c    svClient
		sees bool
	}{{"alice (the requester)", alice, true}, {"carol (an auditor)", carol, true}, {"bob (another tool user)", bob, false}} {
		steps := apiSteps(who.c)
		if len(steps) != 1 {
			t.Fatalf("%s: the API shows %d steps, want 1", who.name, len(steps))
		}
		if got := strings.Contains(string(steps[0].Result), secret); got != who.sees || steps[0].Withheld == who.sees {
			t.Errorf("%s: the API's list result shows the note %v (withheld %v), want shown %v", who.name, got, steps[0].Withheld, who.sees)
		}
		for _, path := range []string{"/executions/" + ex.ID, "/executions/" + ex.ID + "/results"} {
			html := pageHTML(t, who.c, path)
			if got := strings.Contains(html, "4711-privately"); got != who.sees {
				t.Errorf("%s: %s shows the note's text %v, want %v", who.name, path, got, who.sees)
			}
			if withheld := strings.Contains(html, `data-testid="result-withheld"`); withheld == who.sees {
				t.Errorf("%s: %s says the result is withheld: %v", who.name, path, withheld)
			}
		}
	}

	// The live fragments are rendered once for everyone: they carry no built-in result
	// (nor its summary in the log), but a loader asking for the panels as the viewer.
	conn := wsDial(t, srv, bob.c, []string{"execution:" + ex.ID}, cursor)
	liveAsksForResults(t, conn, ex.ID, "success", "4711")
}

// A built-in step that fails keeps what the tool said out of the step's and the
// execution's error, which every viewer reads (a command's output, a file's name or
// contents): the requester reads it in the step's result.
func TestFailedBuiltinStepErrorPrivate(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	srv.App.Enable(t, "builtin__file_operations")
	srv.App.SetRisk(t, "builtin__file_operations", risk.Low)
	srv.CreateUser(t, "alice", auth.RoleToolUser, "alice-password-1")
	srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-12")
	alice := svClient{t: t, srv: srv, c: srv.Login(t, "alice", "alice-password-1")}
	bob := svClient{t: t, srv: srv, c: srv.Login(t, "bob", "bob-password-12")}
	body := plan(step("builtin__file_operations.read_file", map[string]any{"filePath": "payroll-2027-cuts.txt"}))
	body["conversation_id"] = "conv-priv"
	var ex apiExec
	alice.json(http.MethodPost, "/api/v1/executions", body, 201, &ex)
	got := waitExec(t, bob, ex.ID, "failed")
	if strings.Contains(got.Error, "cuts") || len(got.Steps) != 1 || strings.Contains(got.Steps[0].Error, "cuts") ||
		!strings.Contains(got.Steps[0].Error, "in the step's result") {
		t.Errorf("to another viewer the failure reads %q, the step's %+v; want nothing the tool said", got.Error, got.Steps)
	}
	// The page: its arguments name the file (they are the plan's), its errors do not.
	d := page(t, srv.Get(t, bob.c, "/executions/"+ex.ID))
	if got := d.Find("[data-testid=step-error], [data-testid=result-error], [data-testid=execution-error]").Text(); strings.Contains(got, "cuts") {
		t.Errorf("the page's errors show what the tool said to another viewer: %q", got)
	}
	res := srv.Get(t, bob.c, "/executions")
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if strings.Contains(string(b), "cuts") {
		t.Error("the history shows what the tool said to another viewer")
	}
	mine := waitExec(t, alice, ex.ID, "failed")
	if !strings.Contains(string(mine.Steps[0].Result), "payroll-2027-cuts") {
		t.Errorf("the requester's result: %s", mine.Steps[0].Result)
	}
}

// A plan's prompt is shown to every viewer (the API, the history): a credential typed
// into it is masked there, as in the plan's arguments.
func TestExecutionPromptMasked(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	srv.App.SetRisk(t, "mt__echo", risk.Medium) // waits for a confirm: nothing runs
	admin := svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}
	const token = "ghp_Q8d2Lm4Zt7Xw1Vb9Kc3Nf6Hj0Rp5Sy2Ua8Ee"
	var ex struct {
		ID     string `json:"id"`
		Prompt string `json:"prompt"`
	}
	admin.json(http.MethodPost, "/api/v1/executions", map[string]any{"prompt": `call mt__echo message="` + token + `"`}, 201, &ex)
	if strings.Contains(ex.Prompt, token) || !strings.Contains(ex.Prompt, "mt__echo") {
		t.Errorf("the prompt as the API answers it: %q", ex.Prompt)
	}
	// Nor is it found by a search for a piece of it (each answer would tell the next
	// character).
	var found struct {
		Items []struct{ ID string } `json:"items"`
	}
	admin.json(http.MethodGet, "/api/v1/executions?q="+token[:8], nil, 200, &found)
	if len(found.Items) != 0 {
		t.Errorf("a search for a piece of the token finds the execution")
	}
	res := srv.Get(t, admin.c, "/executions")
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if strings.Contains(string(b), token) {
		i := strings.Index(string(b), token)
		t.Errorf("the history shows the token typed into a prompt: %s", string(b)[max(0, i-300):i+50])
	}
}

// pageHTML is the page at path as c gets it, which must be 200.
func pageHTML(t *testing.T, c svClient, path string) string {
	t.Helper()
	res := c.srv.Get(t, c.c, path)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, res.StatusCode)
	}
	return string(b)
}

package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/services/auth"
)

// The Compensation tab of the tool page (/tools/:id/compensation): the compensation that undoes
// a tool's completed step when an execution fails.

// cpForm is the compensation form: the undo tool and rows of name, from, value.
func cpForm(undo string, rows ...[3]string) url.Values {
	f := url.Values{"undo_tool": {undo}}
	for _, r := range rows {
		f.Add("arg_name", r[0])
		f.Add("arg_from", r[1])
		f.Add("arg_value", r[2])
	}
	return f
}

// cpShown reads the compensation the tab shows: argument → "from:/x" or "value:…".
func cpShown(doc *goquery.Document) map[string]string {
	out := map[string]string{}
	doc.Find("[data-testid=compensation-argument]").Each(func(_ int, s *goquery.Selection) {
		if f := s.AttrOr("data-from", ""); f != "" {
			out[s.AttrOr("data-name", "")] = "from:" + f
		} else {
			out[s.AttrOr("data-name", "")] = "value:" + s.AttrOr("data-value", "")
		}
	})
	return out
}

func TestCompensationTab(t *testing.T) {
	t.Parallel()
	e := xlStart(t)
	ctx := context.Background()
	id := toolID(t, e.srv, "xl__write-note")
	path := "/tools/" + id + "/compensation"

	// The tab is in the strip of every tab of the page, and selected on its own page.
	doc := e.get(t, auth.RoleAdmin, "/tools/"+id, http.StatusOK)
	if got := doc.Find("[data-testid=tab-compensation]").AttrOr("href", ""); got != path {
		t.Errorf("overview: the Compensation tab links to %q, want %s", got, path)
	}
	doc = e.get(t, auth.RoleAdmin, path, http.StatusOK)
	if doc.Find("[data-testid=tab-compensation][aria-selected=true]").Length() != 1 || doc.Find("[data-testid=panel-compensation]").Length() != 1 {
		t.Error("compensation page: the Compensation tab is not the selected one")
	}
	if doc.Find("[data-testid=no-compensation]").Length() != 1 || doc.Find("[data-testid=compensation-form]").Length() != 1 {
		t.Error("compensation page: want 'no compensation' and the form")
	}
	var suggested []string
	doc.Find("#undo-tools option").Each(func(_ int, s *goquery.Selection) { suggested = append(suggested, s.AttrOr("value", "")) })
	if !strings.Contains(strings.Join(suggested, " "), "xl__echo") || strings.Contains(strings.Join(suggested, " "), "xl__write-note") {
		t.Errorf("undo tool suggestions %v: want the server's other tools, not the tool itself", suggested)
	}
	if got := doc.Find("[data-testid=argmap-pointer-list]").Text(); got != "/text" {
		t.Errorf("pointer hint %q, want the tool's argument /text", got)
	}

	// Save: undo write-note with echo, message from the step.
	res := e.srv.PostForm(t, e.clients[auth.RoleAdmin], path, cpForm("xl__echo", [3]string{"message", "/text", ""},
		[3]string{"", "", ""}))
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != path {
		t.Fatalf("save: got %d to %q, want 303 to %s", res.StatusCode, res.Header.Get("Location"), path)
	}
	comp, err := e.srv.Executions.CompensationOf(ctx, id)
	if err != nil || comp == nil || comp.UndoToolID != toolID(t, e.srv, "xl__echo") || len(comp.ArgumentMap) != 1 ||
		comp.ArgumentMap["message"].From != "/text" {
		t.Fatalf("stored compensation %+v (%v), want xl__echo with message from /text", comp, err)
	}
	doc = e.get(t, auth.RoleAdmin, path, http.StatusOK)
	if got := doc.Find("[data-testid=compensation-undo-tool]").Text(); got != "xl__echo" {
		t.Errorf("shown undo tool %q, want xl__echo", got)
	}
	if got := cpShown(doc); got["message"] != "from:/text" || len(got) != 1 {
		t.Errorf("shown arguments %v", got)
	}
	if doc.Find("[data-testid=flash]").Length() != 1 {
		t.Error("save: no flash")
	}
	// The form starts from what is in force.
	if got := doc.Find("[data-testid=undo-tool]").AttrOr("value", ""); got != "xl__echo" {
		t.Errorf("form undo tool %q, want xl__echo", got)
	}
	if got := doc.Find("#argmap-rows [data-testid=argmap-row]").Length(); got != 1 {
		t.Errorf("form: %d argument rows, want the 1 in force", got)
	}

	// Bad input: 422, the error next to its field, the input kept, nothing changed.
	for _, tc := range []struct {
		name  string
		form  url.Values
		field string
		says  string
	}{
		{"unknown undo tool", cpForm("nope__nothing", [3]string{"message", "/text", ""}), "undo_tool", "no tool"},
		{"itself", cpForm("xl__write-note"), "undo_tool", "cannot undo itself"},
		{"arguments without a tool", cpForm("", [3]string{"message", "/text", ""}), "undo_tool", "pick the tool"},
		{"value not JSON", cpForm("xl__echo", [3]string{"note", "", "undone"}), "/argument_map/note", "must be JSON"},
		{"value with a NUL", cpForm("xl__echo", [3]string{"message", "", `"a\u0000b"`}), "/argument_map/message", "contains a NUL"},
		{"both", cpForm("xl__echo", [3]string{"message", "/text", `"x"`}), "/argument_map/message", "not both"},
		{"pointer", cpForm("xl__echo", [3]string{"message", "text", ""}), "/argument_map/message", "JSON pointer"},
		{"twice", cpForm("xl__echo", [3]string{"message", "/text", ""}, [3]string{"message", "", `"x"`}), "/argument_map/message", "twice"},
		{"no name", cpForm("xl__echo", [3]string{"", "/text", ""}), "/argument_map", "needs a name"},
		// What would otherwise show only in a rollback: an argument the undo tool does not
		// take, a pointer at no argument of the undone step.
		{"unknown argument", cpForm("xl__echo", [3]string{"note", "", `"x"`}), "/argument_map/note", "takes no argument \"note\" (it takes message)"},
		{"pointer at nothing", cpForm("xl__echo", [3]string{"message", "/nope", ""}), "/argument_map/message", "points at no argument of the undone step (its arguments: text)"},
	} {
		res := e.srv.PostForm(t, e.clients[auth.RoleAdmin], path, tc.form)
		doc := page(t, res)
		if res.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("%s: got %d, want 422", tc.name, res.StatusCode)
		}
		if got := doc.Find(`[data-testid="error-` + tc.field + `"]`).Text(); !strings.Contains(got, tc.says) {
			t.Errorf("%s: error next to %s is %q, want it to say %q", tc.name, tc.field, got, tc.says)
		}
		if got := doc.Find("[data-testid=undo-tool]").AttrOr("value", ""); got != tc.form.Get("undo_tool") {
			t.Errorf("%s: the form shows undo tool %q, want the input %q kept", tc.name, got, tc.form.Get("undo_tool"))
		}
		if want := len(tc.form["arg_name"]); want > 0 {
			if got := doc.Find("#argmap-rows [data-testid=arg-name]").Length(); got != want {
				t.Errorf("%s: %d rows shown, want the %d sent", tc.name, got, want)
			}
			if got := doc.Find("#argmap-rows [data-testid=arg-value]").First().AttrOr("value", ""); got != tc.form["arg_value"][0] {
				t.Errorf("%s: first value %q, want %q kept", tc.name, got, tc.form["arg_value"][0])
			}
		}
		if doc.Find("[data-testid=compensation-errors]").Length() != 1 {
			t.Errorf("%s: no error summary", tc.name)
		}
	}
	if c, _ := e.srv.Executions.CompensationOf(ctx, id); c == nil || len(c.ArgumentMap) != 1 {
		t.Errorf("refused input changed the compensation: %+v", c)
	}

	// Who: tool users and auditors read it, cannot change it; guests cannot see it.
	for _, r := range []auth.Role{auth.RoleToolUser, auth.RoleAuditor} {
		doc := e.get(t, r, path, http.StatusOK)
		if doc.Find("[data-testid=compensation-read-only]").Length() != 1 || doc.Find("[data-testid=compensation-form]").Length() != 0 {
			t.Errorf("%s: want the compensation read-only, without a form", r)
		}
		if got := cpShown(doc); got["message"] != "from:/text" {
			t.Errorf("%s: shown arguments %v", r, got)
		}
		res := e.srv.PostForm(t, e.clients[r], path, cpForm("xl__add"))
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("POST as %s: got %d, want 403", r, res.StatusCode)
		}
	}
	// The refusal names what the role lacks, so the person knows what to ask for.
	if doc := e.get(t, auth.RoleGuest, path, http.StatusForbidden); !strings.Contains(doc.Text(), "needs the tool.inspect permission") {
		t.Errorf("guest refused: %q, want it to name tool.inspect", strings.Join(strings.Fields(doc.Find("main").Text()), " "))
	}
	if doc := e.get(t, auth.RoleGuest, "/tools/"+id, http.StatusOK); doc.Find("[data-testid=tab-compensation]").Length() != 0 {
		t.Error("guest: the Compensation tab is offered")
	}
	if c, _ := e.srv.Executions.CompensationOf(ctx, id); c == nil || c.UndoToolID != toolID(t, e.srv, "xl__echo") {
		t.Errorf("refused requests changed the compensation: %+v", c)
	}

	// Tool managers configure tools: they may change it. Then remove it.
	res = e.srv.PostForm(t, e.clients[auth.RoleToolManager], path, cpForm("xl__add", [3]string{"a", "", "1"}, [3]string{"b", "", "2"}))
	res.Body.Close()
	c, _ := e.srv.Executions.CompensationOf(ctx, id)
	if res.StatusCode != http.StatusSeeOther || c == nil || c.UndoToolID != toolID(t, e.srv, "xl__add") ||
		string(c.ArgumentMap["a"].Value) != "1" {
		t.Fatalf("tool manager: got %d, compensation %+v", res.StatusCode, c)
	}
	res = e.srv.PostForm(t, e.clients[auth.RoleAdmin], path, url.Values{"undo_tool": {""}, "remove": {"true"}})
	res.Body.Close()
	if c, _ := e.srv.Executions.CompensationOf(ctx, id); res.StatusCode != http.StatusSeeOther || c != nil {
		t.Errorf("remove: got %d, compensation %+v, want none", res.StatusCode, c)
	}
	doc = e.get(t, auth.RoleAdmin, path, http.StatusOK)
	if doc.Find("[data-testid=no-compensation]").Length() != 1 || !strings.Contains(doc.Find("[data-testid=flash]").Text(), "removed") {
		t.Error("after remove: want 'no compensation' and a flash saying so")
	}
	var audited int
	if err := e.srv.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'tool.compensation' AND target_id = $1
		AND target_name = 'xl__write-note'`, id).Scan(&audited); err != nil || audited != 3 {
		t.Errorf("audit: %d tool.compensation rows naming xl__write-note (%v), want 3 (set, changed, removed)", audited, err)
	}
}

package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// "Remove" on an array item removes that item from the form as sent when the form has
// an error, also where the item's pointer and its inputs' path differ: in a map whose
// row keys are digits (row 0 has the key "1") and in a choice's variant.
func TestTestPanelRemoveItemByPath(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "lists", InputSchema: json.RawMessage(`{"type":"object","properties":{
		"m":{"type":"object","additionalProperties":{"type":"array","items":{"type":"string"}}},
		"p":{"oneOf":[{"type":"string"},{"type":"object","properties":{"xs":{"type":"array","items":{"type":"string"}}},"required":["xs"]}]},
		"n":{"type":"number"}}}`)})
	srv.RegisterServer(t, registry.Spec{Name: "mt", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true, Trusted: true}, "lists")
	c := srv.Login(t, "admin", webtest.AdminPassword)
	id := toolID(t, srv, "mt__lists")

	sent := url.Values{"mode": {"form"}, "_action": {"run"}, "arg/n": {"not a number"},
		"arg/m": {"2"}, "arg/m/0/~key": {"1"}, "arg/m/0": {"2"}, "arg/m/0/0": {"a"}, "arg/m/0/1": {"b"},
		"arg/m/1/~key": {"0"}, "arg/m/1": {"2"}, "arg/m/1/0": {"c"}, "arg/m/1/1": {"d"},
		"arg/p/~v": {"1"}, "arg/p/~v1/xs": {"2"}, "arg/p/~v1/xs/0": {"x"}, "arg/p/~v1/xs/1": {"y"}}
	ws := testPost(t, srv, c, id, sent)
	if !strings.Contains(ws.Text(), "is not a number") {
		t.Fatal("the form has no error to keep")
	}
	rowRemove := ws.Find(`[data-testid="array-remove-/m/0/0"]`).AttrOr("value", "")
	varRemove := ws.Find(`[data-testid="array-remove-/p/~v1/xs/0"]`).AttrOr("value", "")
	if rowRemove == "" || varRemove == "" {
		t.Fatalf("no Remove buttons for /m/0/0 (%q) and /p/~v1/xs/0 (%q)", rowRemove, varRemove)
	}
	values := func(names ...string) string {
		var out []string
		for _, n := range names {
			out = append(out, ws.Find(`input[name="`+n+`"]`).AttrOr("value", "-"))
		}
		return strings.Join(out, ",")
	}
	sent.Del("_action")
	sent.Set("_edit", rowRemove)
	ws = testPost(t, srv, c, id, sent)
	if got := values("arg/m/0/~key", "arg/m/0/0", "arg/m/0/1", "arg/m/1/0", "arg/m/1/1"); got != "1,b,-,c,d" {
		t.Errorf("Remove (%s) on row 0's item a: the form shows %s, want 1,b,-,c,d", rowRemove, got)
	}
	sent.Set("_edit", varRemove)
	ws = testPost(t, srv, c, id, sent)
	if got := values("arg/p/~v1/xs/0", "arg/p/~v1/xs/1"); got != "y,-" || strings.Contains(ws.Text(), "edit rows") {
		t.Errorf("Remove (%s) on the variant's item x: the form shows %s (%q), want y", varRemove, got, ws.Find(".error").Text())
	}
	// Without an error the item goes from the arguments, found by its inputs' path too.
	sent.Del("arg/n")
	sent.Set("_edit", rowRemove)
	ws = testPost(t, srv, c, id, sent)
	keyOf := func(row string) string { return ws.Find(`input[name="arg/m/`+row+`/~key"]`).AttrOr("value", "") }
	for _, row := range []string{"0", "1"} {
		items := values("arg/m/"+row+"/0", "arg/m/"+row+"/1")
		if want := map[string]string{"1": "b,-", "0": "c,d"}[keyOf(row)]; items != want {
			t.Errorf("Remove (%s) without errors: row %s (key %q) holds %s, want %s", rowRemove, row, keyOf(row), items, want)
		}
	}
}

// JSON typed into the pages with a NUL or a lone surrogate escape is refused as bad
// input naming where it is, with the text kept, not a 500 when it reaches the database.
func TestPlanAndTestPanelRefuseBadJSONText(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	srv.LiveServer(t, "mt", true, "echo")
	id := toolID(t, srv, "mt__echo")

	plan := `{"steps":[{"tool":"mt__echo","arguments":{"message":"a\u0000b"}}]}`
	res := srv.PostForm(t, admin, "/executions/new", url.Values{"mode": {"plan"}, "plan": {plan}})
	doc := page(t, res)
	field := doc.Find(`[data-testid=execution-field-errors] li[data-path='/steps/0/arguments/message']`)
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(field.Text(), "NUL") || doc.Find("textarea[data-testid=plan-json]").Text() != plan {
		t.Errorf("plan with \\u0000: got %d, field error %q, text %q; want 422 naming /steps/0/arguments/message, the text kept",
			res.StatusCode, field.Text(), doc.Find("textarea[data-testid=plan-json]").Text())
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM executions`); n != 0 {
		t.Errorf("%d executions stored", n)
	}

	ws := testPost(t, srv, admin, id, url.Values{"mode": {"json"}, "_action": {"run"}, "arguments_json": {`{"message": "\udc00"}`}})
	if got := ws.Find(`[data-testid=json-errors]`).Text(); !strings.Contains(got, "/message") || !strings.Contains(got, "surrogate") {
		t.Errorf("JSON editor with a lone surrogate: errors %q, want /message named", got)
	}
	if ws.Find(`[data-testid="test-result"]`).Length() != 0 {
		t.Error("arguments with a lone surrogate were run")
	}
}

// "Ask for approval" shows what the plan refuses at the arguments' own fields, as Run
// does, not under the plan's /steps/0/arguments pointers.
func TestTestPanelRequestErrorsAtFields(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	srv.LiveServer(t, "mt", true, "echo")
	id := toolID(t, srv, "mt__echo")
	ws := testPost(t, srv, admin, id, url.Values{"mode": {"form"}, "_action": {"request"}})
	if got := ws.Find(`[data-testid="error-/message"]`).Text(); got == "" {
		t.Errorf("Ask for approval without the required message: no error at /message; the panel says %q", ws.Find(".error").Text())
	}
}

// A query string the server cannot read (a bad % escape) is refused with 400 naming
// the query, on a test panel's POST with no form body too, which met the parse error
// as a 500.
func TestBadQueryEscapeRefused(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	c := srv.Login(t, "admin", webtest.AdminPassword)
	id := toolID(t, srv, "mt__echo")
	for _, r := range []struct{ method, path string }{
		{http.MethodPost, "/tools/" + id + "/test?a=%zz"},
		{http.MethodGet, "/tools?q=%zz"},
		{http.MethodGet, "/api/v1/tools?q=%zz"},
	} {
		req, _ := http.NewRequest(r.method, srv.URL+r.path, strings.NewReader("x"))
		req.Header.Set("Content-Type", "text/plain")
		req.Header.Set("Origin", srv.URL)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "query") {
			t.Errorf("%s %s: %d %.200s, want 400 naming the query", r.method, r.path, res.StatusCode, b)
		}
	}
}

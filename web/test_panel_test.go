package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"

	"github.com/toolwarden/toolwarden/web/webtest"
)

// testPost posts the workspace as htmx does and returns the workspace it answers with.
func testPost(t *testing.T, srv *webtest.Server, c *http.Client, id string, form url.Values) *goquery.Document {
	t.Helper()
	res := srv.PostFormHeaders(t, c, "/tools/"+id+"/test", form, map[string]string{"HX-Request": "true"})
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST test: got %d", res.StatusCode)
	}
	return page(t, res)
}

// hxGet fetches path as htmx does.
func hxGet(t *testing.T, srv *webtest.Server, c *http.Client, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("HX-Request", "true")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The test panel: a form from the schema, runs with results, field errors from the
// router, form/JSON switching that keeps input, approvals, progress, saved cases and
// verification.
func TestTestPanel(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "mt", true, "echo", "write-note", "sleep")
	c := srv.Login(t, "admin", webtest.AdminPassword)
	echo := toolID(t, srv, "mt__echo")

	doc := page(t, srv.Get(t, c, "/tools/"+echo+"/test"))
	if doc.Find(`[data-testid="tab-test"][aria-selected="true"]`).Length() != 1 {
		t.Fatal("the Test tab is not selected")
	}
	in := doc.Find(`[data-testid="test-workspace"] input[name="arg/message"]`)
	if in.Length() != 1 {
		t.Fatal("no input for the message parameter")
	}
	if _, ok := in.Attr("required"); !ok {
		t.Error("the required parameter's input is not marked required")
	}

	// Run: the result with status, timing and output.
	ws := testPost(t, srv, c, echo, url.Values{"mode": {"form"}, "_action": {"run"}, "arg/message": {"hello"}})
	if got := ws.Find(`[data-testid="test-result"]`).AttrOr("data-status", ""); got != "success" {
		t.Fatalf("status: got %q, want success: %s", got, ws.Find("#test-result").Text())
	}
	if !strings.Contains(ws.Find(`[data-testid="output-0"]`).Text(), "Echo: hello") || ws.Find(`[data-testid="result-duration"]`).Length() != 1 {
		t.Fatal("output or duration missing")
	}
	if ws.Find(`input[name="arg/message"]`).AttrOr("value", "") != "hello" {
		t.Error("the run lost the input")
	}

	// Missing argument: the router's error next to the field, and only there.
	ws = testPost(t, srv, c, echo, url.Values{"mode": {"form"}, "_action": {"run"}})
	if !strings.Contains(ws.Find(`[data-testid="field-/message"]`).Text(), "required") {
		t.Fatalf("no error next to the field: %s", ws.Find(`[data-testid="test-form"]`).Text())
	}
	if n := strings.Count(ws.Find("#test-workspace").Text(), "is required"); n != 1 {
		t.Errorf("form mode: \"is required\" shown %d times, want once: %s", n, ws.Find("#test-workspace").Text())
	}
	// The same in the JSON editor: under the editor, not again in the result panel.
	ws = testPost(t, srv, c, echo, url.Values{"mode": {"json"}, "_action": {"run"}, "arguments_json": {"{}"}})
	if got := ws.Find(`[data-testid="json-errors"]`).Text(); !strings.Contains(got, "/message") || !strings.Contains(got, "is required") {
		t.Errorf("JSON mode: the editor's errors read %q, want /message is required", got)
	}
	if n := strings.Count(ws.Find("#test-workspace").Text(), "is required"); n != 1 {
		t.Errorf("JSON mode: \"is required\" shown %d times, want once: %s", n, ws.Find("#test-workspace").Text())
	}
	if ws.Find(`[data-testid="test-result"]`).AttrOr("data-status", "") != "failed" || ws.Find(`[data-testid="result-error"]`).Length() != 1 {
		t.Error("JSON mode: the result panel does not say the run failed")
	}

	// Form → JSON → form keeps the input.
	ws = testPost(t, srv, c, echo, url.Values{"mode": {"form"}, "_action": {"mode:json"}, "arg/message": {"kept"}})
	text := ws.Find(`[data-testid="arguments-json"]`).Text()
	if !strings.Contains(text, `"message": "kept"`) {
		t.Fatalf("JSON editor: got %q", text)
	}
	ws = testPost(t, srv, c, echo, url.Values{"mode": {"json"}, "_action": {"mode:form"}, "arguments_json": {`{"message":"back"}`}})
	if ws.Find(`input[name="arg/message"]`).AttrOr("value", "") != "back" {
		t.Fatal("switching back to the form lost the input")
	}
	ws = testPost(t, srv, c, echo, url.Values{"mode": {"json"}, "_action": {"mode:form"}, "arguments_json": {`{"message":`}})
	if ws.Find(`[data-testid="json-errors"]`).Length() != 1 || ws.Find(`[data-testid="arguments-json"]`).Text() != `{"message":` {
		t.Fatal("bad JSON: want the editor kept with its text and an error")
	}

	// HIGH: the typed phrase is checked by the server.
	note := toolID(t, srv, "mt__write-note")
	ws = testPost(t, srv, c, note, url.Values{"mode": {"form"}, "_action": {"run"}, "arg/text": {"x"}, "phrase": {"nope"}})
	if ws.Find(`[data-testid="danger-zone"]`).Length() != 1 || !strings.Contains(ws.Find(`[data-testid="result-error"]`).Text(), "mt__write-note") {
		t.Fatalf("wrong phrase: got %s", ws.Find(`[data-testid="test-result"]`).Text())
	}
	ws = testPost(t, srv, c, note, url.Values{"mode": {"form"}, "_action": {"run"}, "arg/text": {"x"}, "phrase": {"mt__write-note"}})
	if got := ws.Find(`[data-testid="test-result"]`).AttrOr("data-status", ""); got != "success" {
		t.Fatalf("right phrase: got %q", got)
	}

	// The workspace goes through htmx only: its swaps settle (and so bind the new form)
	// at once, and htmx disables Run while its request is in flight.
	form := ws.Find(`[data-testid="test-run-form"]`)
	if got := form.AttrOr("hx-swap", ""); !strings.Contains(got, "settle:0ms") {
		t.Errorf("the workspace form swaps with %q, want settle:0ms", got)
	}
	if sel := form.AttrOr("hx-disabled-elt", ""); sel == "" || form.Find(strings.TrimPrefix(sel, "find ")).AttrOr("data-testid", "") != "run-test" {
		t.Errorf("the workspace form's hx-disabled-elt %q does not name the Run button", sel)
	}

	// A long call shows progress and is followed by polling until it ends; Run is
	// disabled meanwhile and comes back with the result.
	sleep := toolID(t, srv, "mt__sleep")
	ws = testPost(t, srv, c, sleep, url.Values{"mode": {"form"}, "_action": {"run"}, "arg/ms": {"2500"}})
	poll := ws.Find(`[data-testid="test-running"]`).AttrOr("hx-get", "")
	if poll == "" {
		t.Fatal("a long call did not show the running panel")
	}
	run := ws.Find(`[data-testid="run-test"]`)
	if _, disabled := run.Attr("disabled"); !disabled || run.AttrOr("aria-busy", "") != "true" {
		t.Error("while the call runs, the Run button is not disabled and busy")
	}
	sawProgress := ws.Find(`[data-testid="test-progress"]`).Length() > 0
	deadline := time.Now().Add(20 * time.Second)
	for {
		res := srv.Get(t, c, poll)
		d := page(t, res)
		sawProgress = sawProgress || d.Find(`[data-testid="test-progress"]`).Length() > 0
		if d.Find(`[data-testid="test-result"]`).AttrOr("data-status", "") == "success" {
			back := d.Find(`#test-run-actions[hx-swap-oob="true"] [data-testid="run-test"]`)
			if _, disabled := back.Attr("disabled"); back.Length() != 1 || disabled || back.AttrOr("aria-busy", "") != "" {
				t.Error("the poll's answer with the result does not bring the Run button back enabled")
			}
			break
		}
		if d.Find(`#test-run-actions`).Length() != 0 {
			t.Error("a poll answer while the call runs replaces the Run button")
		}
		if d.Find(`[data-testid="test-running"]`).Length() != 1 || time.Now().After(deadline) {
			t.Fatalf("poll: got %s", d.Text())
		}
	}
	if !sawProgress {
		t.Error("no progress was shown while the call ran")
	}
	// A run that is not kept (the server restarted): the panel is told it ended, with Run
	// back, rather than an error htmx would not show; outside htmx it is a 404.
	gone := "/tools/" + sleep + "/test/runs/" + uuid.NewString()
	res := srv.Get(t, c, gone)
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("GET an unknown run: got %d, want 404", res.StatusCode)
	}
	for _, hx := range []*http.Response{
		hxGet(t, srv, c, gone),
		srv.PostFormHeaders(t, c, gone+"/cancel", url.Values{}, map[string]string{"HX-Request": "true"}),
	} {
		if hx.StatusCode != http.StatusOK {
			t.Fatalf("htmx asks about an unknown run: got %d, want 200", hx.StatusCode)
		}
		d := page(t, hx)
		if d.Find(`[data-testid="test-result"]`).AttrOr("data-status", "") != "failed" || !strings.Contains(d.Find(`[data-testid="result-error"]`).Text(), "no longer kept") ||
			d.Find(`#test-run-actions[hx-swap-oob="true"] [data-testid="run-test"]:not([disabled])`).Length() != 1 {
			t.Errorf("htmx asks about an unknown run: got %s", d.Text())
		}
	}

	// Saved cases; running them all verifies a tool that is not enabled yet.
	add := toolID(t, srv, "mt__add")
	for name, v := range map[string]url.Values{
		"sum": {"arg/a": {"2"}, "arg/b": {"3"}, "expect_text": {"5"}},
		"big": {"arg/a": {"20"}, "arg/b": {"22"}, "expect_text": {"42"}},
	} {
		v.Set("mode", "form")
		v.Set("_action", "save")
		v.Set("case_name", name)
		v.Set("expect", "success")
		ws = testPost(t, srv, c, add, v)
		if !strings.Contains(ws.Find(`[data-testid="test-notice"]`).Text(), name) {
			t.Fatalf("save %s: got %s", name, ws.Text())
		}
	}
	res = srv.PostForm(t, c, "/tools/"+add+"/test/cases/run", url.Values{})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("run all: got %d", res.StatusCode)
	}
	doc = page(t, srv.Get(t, c, "/tools/"+add+"/test"))
	if got := doc.Find(`[data-testid="case-outcome"] .badge.ok`).Length(); got != 2 {
		t.Fatalf("passed cases shown: got %d, want 2: %s", got, doc.Find(`[data-testid="test-cases"]`).Text())
	}
	if st, _ := srv.Tools.Get(t.Context(), add); st.Status != "verified" {
		t.Fatalf("after every case passed: got status %s, want verified", st.Status)
	}
}

package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"
	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/decide"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/web"
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

	// A long call shows its running panel, which follows the run's topic over the
	// websocket (TestTestPanelLive); Run is disabled meanwhile. Asked directly (the
	// fallback of a page without a socket), the run answers with its state, and the
	// result brings Run back.
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
	deadline := time.Now().Add(20 * time.Second)
	for {
		d := page(t, hxGet(t, srv, c, poll))
		if d.Find(`[data-testid="test-result"]`).AttrOr("data-status", "") == "success" {
			back := d.Find(`#test-run-actions[hx-swap-oob="true"] [data-testid="run-test"]`)
			if _, disabled := back.Attr("disabled"); back.Length() != 1 || disabled || back.AttrOr("aria-busy", "") != "" {
				t.Error("the answer with the result does not bring the Run button back enabled")
			}
			break
		}
		if d.Find(`#test-run-actions`).Length() != 0 {
			t.Error("an answer while the call runs replaces the Run button")
		}
		if d.Find(`[data-testid="test-running"]`).Length() != 1 || time.Now().After(deadline) {
			t.Fatalf("poll: got %s", d.Text())
		}
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
	// A case without a name: the error is said once, at the name, and the form keeps it open.
	ws = testPost(t, srv, c, add, url.Values{"mode": {"form"}, "_action": {"save"}, "arg/a": {"1"}, "arg/b": {"1"}, "case_name": {" "}})
	if ws.Find(`details.save-case[open] .has-error #case-name`).Length() != 1 ||
		strings.Count(ws.Text(), "name the case") != 1 || strings.Contains(ws.Text(), "case_name") {
		t.Errorf("a case without a name: want its error once, at the name field: %s", ws.Find("#test-workspace").Text())
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

// startSleep runs sleep for ms from the test panel as htmx does and returns its running
// panel's run: the call id, its websocket topic and the event id the panel reflects.
func startSleep(t *testing.T, srv *webtest.Server, c *http.Client, sleep string, ms int) (id, topic string, since int64) {
	t.Helper()
	ws := testPost(t, srv, c, sleep, url.Values{"mode": {"form"}, "_action": {"run"}, "arg/ms": {strconv.Itoa(ms)}})
	panel := ws.Find(`[data-testid="test-running"]`)
	topic = panel.AttrOr("data-live-topic", "")
	id, ok := strings.CutPrefix(topic, "testrun:")
	id, _, _ = strings.Cut(id, "@") // then the replica that holds it
	if panel.Length() != 1 || !ok {
		t.Fatalf("a %d ms call: no running panel with its topic: %s", ms, ws.Find("#test-workspace").Text())
	}
	progress := panel.Find("#test-run-" + id)
	since, err := strconv.ParseInt(progress.AttrOr("data-live-since", ""), 10, 64)
	if progress.Length() != 1 || err != nil || since <= 0 {
		t.Fatalf("the running panel has no progress of its run with the event id it reflects: %v", err)
	}
	return id, topic, since
}

// wsNext reads the next message within d and parses it as htmx does (inside a
// template); false when none came in time.
func wsNext(t *testing.T, conn *websocket.Conn, d time.Duration) (*goquery.Document, string, bool) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(d))
	_, msg, err := conn.ReadMessage()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil, "", false
	}
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader("<template>" + string(msg) + "</template>"))
	if err != nil {
		t.Fatal(err)
	}
	return doc, string(msg), true
}

// runParts finds the parts of a test run's fragment: its progress (replacing the one
// of its running panel) and its result (replacing that panel, only where it is).
func runParts(frag *goquery.Document, id string) (progress, result *goquery.Selection) {
	return frag.Find(`template > #test-run-` + id + `[hx-swap-oob="true"]`),
		frag.Find(`template > #test-result[hx-swap-oob="true"][data-live-if="test-run-` + id + `"]`)
}

var sleptRE = regexp.MustCompile(`slept (\d) of 5`)

// A long call's progress and then its result reach the page as fragments pushed for
// the run's own topic, rendered by the server: from the event id the running panel
// reflects, whenever the socket subscribes (a page that subscribes after the call
// ended still gets its result), and never progress after the result.
func TestTestPanelLive(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "mt", true, "sleep")
	c := srv.Login(t, "admin", webtest.AdminPassword)
	sleep := toolID(t, srv, "mt__sleep")

	id, topic, since := startSleep(t, srv, c, sleep, 3000)
	conn := wsDial(t, srv, c, []string{topic}, since)
	var steps []int
	var result *goquery.Document
	for result == nil {
		frag, raw, ok := wsNext(t, conn, 20*time.Second)
		if !ok {
			t.Fatalf("no result pushed in 20 s (progress seen: %v)", steps)
		}
		progress, res := runParts(frag, id)
		switch {
		case res.Length() == 1:
			if progress.Length() != 0 {
				t.Errorf("a fragment with both the progress and the result: %s", raw)
			}
			result = frag
		case progress.Length() == 1:
			if !strings.Contains(progress.Text(), "Running…") {
				t.Errorf("a progress part without the running status: %s", raw)
			}
			if m := sleptRE.FindStringSubmatch(progress.Find(`[data-testid="test-progress-message"]`).Text()); m != nil {
				n, _ := strconv.Atoi(m[1])
				if len(steps) > 0 && n < steps[len(steps)-1] {
					t.Errorf("progress went back from %d to %d of 5", steps[len(steps)-1], n)
				}
				if progress.Find(`progress[data-testid="test-progress"]`).AttrOr("value", "") != strconv.Itoa(n*20) {
					t.Errorf("step %d of 5 without its progress bar at %d%%: %s", n, n*20, raw)
				}
				steps = append(steps, n)
			}
		default:
			t.Fatalf("a fragment of the run's topic with neither its progress nor its result: %s", raw)
		}
	}
	if len(steps) == 0 {
		t.Error("no progress of the call was pushed before its result")
	}
	r := result.Find("template > #test-result")
	if r.AttrOr("data-status", "") != "success" || strings.TrimSpace(r.Find(`[data-testid="output-0"]`).Text()) != "slept" ||
		r.Find(`[data-testid="result-duration"]`).Length() != 1 {
		t.Fatalf("the pushed result: %s", goquery.NewDocumentFromNode(r.Nodes[0]).Text())
	}
	back := result.Find(`template > #test-run-actions[hx-swap-oob="true"][data-live-if="test-run-` + id + `"] [data-testid="run-test"]`)
	if _, disabled := back.Attr("disabled"); back.Length() != 1 || disabled || back.AttrOr("aria-busy", "") != "" {
		t.Error("the pushed result does not bring the Run button back enabled")
	}
	// The run's own end follows the call's events; nothing after the result is progress.
	for {
		frag, raw, ok := wsNext(t, conn, time.Second)
		if !ok {
			break
		}
		if progress, _ := runParts(frag, id); progress.Length() != 0 {
			t.Fatalf("progress pushed after the result: %s", raw)
		}
	}

	// A page that subscribes after the call ended is replayed its events from the id its
	// panel reflects (each as it was pushed: rendered once for every socket), ending
	// with the result, and no progress after it.
	late := wsDial(t, srv, c, []string{topic}, since)
	sawResult := false
	for {
		frag, raw, ok := wsNext(t, late, time.Second)
		if !ok {
			break
		}
		progress, res := runParts(frag, id)
		switch {
		case res.Length() == 1 && res.AttrOr("data-status", "") == "success":
			sawResult = true
		case progress.Length() == 1 && !sawResult:
		default:
			t.Fatalf("replayed to a late subscriber (after the result: %v): %s", sawResult, raw)
		}
	}
	if !sawResult {
		t.Fatal("a late subscriber did not get the run's result")
	}
}

// A run's topic is its owner's alone: another user (an administrator too) cannot
// follow it, nor ask about it.
func TestTestPanelRunTopicOwner(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "mt", true, "sleep")
	c := srv.Login(t, "admin", webtest.AdminPassword)
	srv.CreateUser(t, "other", auth.RoleAdmin, "other-password-123")
	oc := srv.Login(t, "other", "other-password-123")
	sleep := toolID(t, srv, "mt__sleep")

	id, topic, since := startSleep(t, srv, c, sleep, 2500)
	alone := wsDial(t, srv, oc, []string{topic}, since)
	_ = alone.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, msg, err := alone.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseNormalClosure {
		t.Fatalf("another user subscribing to the run's topic alone: got %q, %v; want the socket closed, nothing to subscribe to", msg, err)
	}
	// With a topic they may follow: that one only, and the page is told which it refused
	// (its run panel would otherwise wait for the topic instead of asking).
	mixed := wsDial(t, srv, oc, []string{"tools", topic}, since)
	frag, raw, ok := wsNext(t, mixed, 10*time.Second)
	if !ok {
		t.Fatal("another user subscribing to tools and the run's topic: no message, want #ws-refused first")
	}
	if got, _ := frag.Find(`template > #ws-refused`).Attr("data-topics"); got != topic {
		t.Fatalf("another user's first message: got %q, want #ws-refused naming %s", raw, topic)
	}
	own := wsDial(t, srv, c, []string{topic}, since)
	for done := false; !done; {
		frag, _, ok := wsNext(t, own, 20*time.Second)
		if !ok {
			t.Fatal("the owner got no result")
		}
		_, res := runParts(frag, id)
		done = res.Length() == 1
	}
	for {
		_, raw, ok := wsNext(t, mixed, time.Second)
		if !ok {
			break
		}
		if strings.Contains(raw, "test-run-"+id) || strings.Contains(raw, "test-result") {
			t.Fatalf("another user got a fragment of the run: %s", raw)
		}
	}
	for _, res := range []*http.Response{
		srv.Get(t, oc, "/tools/"+sleep+"/test/runs/"+id),
		srv.PostForm(t, oc, "/tools/"+sleep+"/test/runs/"+id+"/cancel", url.Values{}),
	} {
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("another user asks about the run (%s): got %d, want 404", res.Request.URL.Path, res.StatusCode)
		}
	}
}

// The caller went away: a run whose page's socket stopped following it is cancelled
// once the grace period has passed; one whose socket came back within it runs on.
func TestTestPanelRunWatched(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	const grace = time.Second
	runs := web.RunsOf(srv.Web)
	runs.SetGrace(grace)
	liveServer(t, srv, "mt", true, "sleep")
	c := srv.Login(t, "admin", webtest.AdminPassword)
	sleep := toolID(t, srv, "mt__sleep")
	firstFragment := func(conn *websocket.Conn) {
		t.Helper()
		if _, _, ok := wsNext(t, conn, 10*time.Second); !ok {
			t.Fatal("nothing pushed for the run")
		}
	}

	// Still watched, across a reconnect shorter than the grace: it runs to its end,
	// well after the grace.
	id, topic, since := startSleep(t, srv, c, sleep, 4000)
	conn := wsDial(t, srv, c, []string{topic}, since)
	firstFragment(conn)
	conn.Close()
	time.Sleep(grace / 4)
	conn = wsDial(t, srv, c, []string{topic}, since)
	var result *goquery.Selection
	for result == nil || result.Length() == 0 {
		frag, _, ok := wsNext(t, conn, 20*time.Second)
		if !ok {
			t.Fatal("no result pushed for the watched run")
		}
		_, result = runParts(frag, id)
	}
	if got := result.AttrOr("data-status", ""); got != "success" {
		t.Fatalf("the watched run ended %s, want success: %s", got, result.Text())
	}

	// Its socket closed for good: cancelled after the grace, long before it would end.
	id, topic, since = startSleep(t, srv, c, sleep, 6000)
	conn = wsDial(t, srv, c, []string{topic}, since)
	firstFragment(conn)
	conn.Close()
	closed := time.Now()
	run, ok := runs.Lookup(id)
	if !ok {
		t.Fatal("the run is not kept")
	}
	if !run.Wait(3 * time.Second) {
		t.Fatal("the run was not cancelled after its watcher left")
	}
	if d := time.Since(closed); d < grace-100*time.Millisecond {
		t.Errorf("the run ended %v after its watcher left, before the grace of %v", d, grace)
	}
	_, _, err, _ := run.State()
	var re *router.Error
	if !errors.As(err, &re) || re.Code != router.CodeCancelled {
		t.Fatalf("the abandoned run ended with %v, want cancelled", err)
	}
}

// A parameter the tool's configuration fixes is not asked in the test panel (its form,
// the required mark): the workspace says it is set, and a run uses the fixed value.
// Before, the form asked for it as required and the router refused any value typed.
func TestTestPanelFixedParameter(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "mt", true, "echo")
	c := srv.Login(t, "admin", webtest.AdminPassword)
	echo := toolID(t, srv, "mt__echo")
	if _, err := srv.Tools.Update(context.Background(), audit.System, echo, tools.Patch{Reason: "test",
		Params: map[string]tools.ParamInput{"message": {Mode: tools.ModeFixed, Value: json.RawMessage(`"from the configuration"`)}}}); err != nil {
		t.Fatal(err)
	}
	doc := page(t, srv.Get(t, c, "/tools/"+echo+"/test"))
	if n := doc.Find(`[data-testid="test-workspace"] [name="arg/message"]`).Length(); n != 0 {
		t.Fatalf("the form asks for the fixed parameter (%d inputs)", n)
	}
	if got := doc.Find(`[data-testid="test-fixed"]`).Text(); !strings.Contains(got, "message") || !strings.Contains(got, `"from the configuration"`) {
		t.Fatalf("the workspace does not say what is fixed: %q", got)
	}
	ws := testPost(t, srv, c, echo, url.Values{"mode": {"form"}, "_action": {"run"}})
	if got := ws.Find(`[data-testid="test-result"]`).AttrOr("data-status", ""); got != "success" {
		t.Fatalf("status: got %q, want success: %s", got, ws.Find("#test-result").Text())
	}
	if out := ws.Find(`[data-testid="output-0"]`).Text(); !strings.Contains(out, "Echo: from the configuration") {
		t.Fatalf("the run did not use the fixed value: %q", out)
	}
	// A guest (no tool.inspect) learns that the parameter is set, not its value.
	srv.CreateUser(t, "gus", auth.RoleGuest, "gus-password-1234")
	gus := srv.Login(t, "gus", "gus-password-1234")
	gdoc := page(t, srv.Get(t, gus, "/tools/"+echo+"/test"))
	got := gdoc.Find(`[data-testid="test-fixed"]`).Text()
	if !strings.Contains(got, "message") || strings.Contains(got, "from the configuration") {
		t.Fatalf("a guest's panel says %q: want the name without the value", got)
	}
	// A guest may not use the tool: Run is off and says why, before a refused run does.
	if gdoc.Find(`[data-testid="run-test"][disabled]`).Length() != 1 || !strings.Contains(gdoc.Text(), "You may not use this tool") {
		t.Fatalf("a guest's Run: %s", gdoc.Find(`#test-run-actions`).Text())
	}
	// Allowed this tool by a rule of their own, they may.
	yes := true
	if err := srv.Tools.SetPermission(context.Background(), audit.System, echo, "gus", &yes); err != nil {
		t.Fatal(err)
	}
	gdoc = page(t, srv.Get(t, gus, "/tools/"+echo+"/test"))
	if gdoc.Find(`[data-testid="run-test"]:not([disabled])`).Length() != 1 {
		t.Fatalf("a guest allowed the tool: Run is still off: %s", gdoc.Find(`#test-run-actions`).Text())
	}
}

// Run on a medium-risk tool with the confirm box left empty: the panel says so at the
// box (marked invalid, where the focus goes) instead of showing a failed run; ticked,
// the call runs.
func TestTestPanelConfirmLeftEmpty(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "mt", false, "echo", "write-note") // untrusted: echo is medium, write-note high
	c := srv.Login(t, "admin", webtest.AdminPassword)
	echo := toolID(t, srv, "mt__echo")
	ws := testPost(t, srv, c, echo, url.Values{"mode": {"form"}, "_action": {"run"}, "arg/message": {"hi"}})
	box := ws.Find(`[data-testid="confirm-check"]`)
	if box.AttrOr("aria-invalid", "") != "true" || !strings.Contains(ws.Find(`[data-testid="confirm-error"]`).Text(), "Tick this box") {
		t.Fatalf("the empty confirm box is not marked: %q", strings.Join(strings.Fields(ws.Find(`[data-testid="confirm-zone"]`).Text()), " "))
	}
	if ws.Find(`[data-testid="test-result"]`).Length() != 0 {
		t.Errorf("a failed run is shown besides: %q", ws.Find(`[data-testid="test-result"]`).Text())
	}
	if ws.Find(`input[name="arg/message"]`).AttrOr("value", "") != "hi" {
		t.Error("the arguments were lost")
	}
	ws = testPost(t, srv, c, echo, url.Values{"mode": {"form"}, "_action": {"run"}, "arg/message": {"hi"}, "confirm": {"1"}})
	if got := ws.Find(`[data-testid="test-result"]`).AttrOr("data-status", ""); got != "success" {
		t.Fatalf("ticked: status %q: %s", got, ws.Find("#test-result").Text())
	}
	// High risk (admin alone may approve their own run): no phrase is said at the phrase
	// field; a wrong one keeps the router's reason as the run's result.
	note := toolID(t, srv, "mt__write-note")
	ws = testPost(t, srv, c, note, url.Values{"mode": {"form"}, "_action": {"run"}, "arg/text": {"x"}})
	if ws.Find(`[data-testid="confirm-phrase"]`).AttrOr("aria-invalid", "") != "true" ||
		!strings.Contains(ws.Find(`[data-testid="confirm-error"]`).Text(), "Type the phrase") || ws.Find(`[data-testid="test-result"]`).Length() != 0 {
		t.Fatalf("no phrase: %q", strings.Join(strings.Fields(ws.Find(`[data-testid="danger-zone"]`).Text()), " "))
	}
	ws = testPost(t, srv, c, note, url.Values{"mode": {"form"}, "_action": {"run"}, "arg/text": {"x"}, "phrase": {"wrong"}})
	if ws.Find(`[data-testid="confirm-error"]`).Length() != 0 || ws.Find(`[data-testid="test-result"]`).AttrOr("data-status", "") != "failed" {
		t.Fatalf("a wrong phrase: want the router's refusal as the result, got %q", strings.Join(strings.Fields(ws.Find(`[data-testid="test-workspace"]`).Text()), " "))
	}
}

// The result a run pushes brings Run back as the person may use it now: a rule of
// their own that denies them the tool, set while the run went on, turns it off and
// says why (as the page would).
func TestTestPanelLiveResultKeepsThePersonsRule(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "mt", true, "sleep")
	srv.CreateUser(t, "tess", auth.RoleToolUser, "tess-password-123")
	c := srv.Login(t, "tess", "tess-password-123")
	sleep := toolID(t, srv, "mt__sleep")

	id, topic, since := startSleep(t, srv, c, sleep, 5000)
	conn := wsDial(t, srv, c, []string{topic}, since)
	no := false
	if err := srv.Tools.SetPermission(context.Background(), audit.System, sleep, "tess", &no); err != nil {
		t.Fatal(err)
	}
	// The rule reaches the router through the bus, well before the run ends.
	var tess string
	if err := srv.Pool.QueryRow(context.Background(), `SELECT id FROM users WHERE username = 'tess'`).Scan(&tess); err != nil {
		t.Fatal(err)
	}
	webtest.WaitFor(t, 4*time.Second, func() bool {
		ok, err := srv.Router.MayUse(context.Background(), audit.Actor{Kind: audit.ActorUser, ID: tess, Name: "tess"}, auth.RoleToolUser, sleep)
		return err == nil && !ok
	}, "the router never saw tess's rule")
	for {
		frag, raw, ok := wsNext(t, conn, 20*time.Second)
		if !ok {
			t.Fatal("no result pushed in 20 s")
		}
		if _, res := runParts(frag, id); res.Length() == 0 {
			continue
		}
		back := frag.Find(`template > #test-run-actions [data-testid="run-test"]`)
		if _, disabled := back.Attr("disabled"); back.Length() != 1 || !disabled || !strings.Contains(frag.Text(), "You may not use this tool") {
			t.Fatalf("the pushed result offers Run to a person denied the tool: %s", raw)
		}
		return
	}
}

// The test panel rates each call as the router will: the workspace's from its
// arguments with the tool's configured values, each saved case's from its own. A tool
// user who may not approve their own high call may run a saved read of file_operations
// but not its write, and Run all is not offered; a change of the arguments renders the
// approval part again only when it changes (204 otherwise), and keeps Run off while a
// run goes on. An administrator's Run all over a medium and a high case asks for both
// the box and the phrase.
func TestTestPanelRatesEachCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	tg := srv.App.Enable(t, "builtin__file_operations") // high as a whole
	id := tg.ID
	srv.CreateUser(t, "tina", auth.RoleToolUser, "tina-password-123")
	tina := srv.Login(t, "tina", "tina-password-123")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	for name, args := range map[string]string{"read": `{"operation":"read_file","filePath":"a.txt"}`,
		"write": `{"operation":"create_file","filePath":"a.txt","content":"x"}`} {
		if _, err := srv.Tools.SaveTestCase(ctx, audit.System, id, tools.TestCase{Name: name, Arguments: json.RawMessage(args), Expect: "success"}); err != nil {
			t.Fatal(err)
		}
	}
	caseRow := func(doc *goquery.Document, name string) *goquery.Selection {
		return doc.Find(`[data-testid="test-cases"] tr`).FilterFunction(func(_ int, s *goquery.Selection) bool {
			return strings.TrimSpace(s.Find("td").First().Text()) == name
		})
	}
	doc := page(t, srv.Get(t, tina, "/tools/"+id+"/test"))
	if r := caseRow(doc, "read"); r.Find(`[data-testid="case-run"]`).Length() != 1 || r.Find(`[name="phrase"]`).Length() != 0 {
		t.Errorf("tina's read case: %q", r.Text())
	}
	if r := caseRow(doc, "write"); r.Find(`[data-testid="case-run"]`).Length() != 0 || !strings.Contains(r.Find(`[data-testid="case-cannot-run"]`).Text(), "Another person must approve") {
		t.Errorf("tina's write case: %q", r.Text())
	}
	if doc.Find(`[data-testid="run-all-form"]`).Length() != 0 || doc.Find(`[data-testid="run-all-withheld"]`).Length() != 1 {
		t.Error("Run all is offered over a case tina may not run, or its absence is not explained")
	}

	// A change of the arguments: rated again; nothing sent when nothing changes.
	shown := doc.Find(`[name="_approval_shown"]`).AttrOr("value", "")
	risk := func(form url.Values) *http.Response {
		t.Helper()
		return srv.PostFormHeaders(t, tina, "/tools/"+id+"/test/risk", form, map[string]string{"HX-Request": "true"})
	}
	if res := risk(url.Values{"mode": {"json"}, "arguments_json": {`{}`}, "_approval_shown": {shown}}); res.StatusCode != http.StatusNoContent {
		t.Errorf("unchanged: got %d, want 204", res.StatusCode)
	}
	res := risk(url.Values{"mode": {"json"}, "arguments_json": {`{"operation":"read_file","filePath":"a.txt"}`}, "_approval_shown": {shown}})
	frag := page(t, res)
	if res.StatusCode != http.StatusOK || frag.Find(`#test-approval`).AttrOr("data-risk", "") != "low" ||
		frag.Find(`#test-run-actions [data-testid="run-test"]:not([disabled])`).Length() != 1 {
		t.Errorf("a read: %d %q %s", res.StatusCode, frag.Find(`#test-approval`).AttrOr("data-risk", ""), frag.Find(`#test-run-actions`).Text())
	}

	// An operation the configuration fixes is rated with the arguments.
	if _, err := srv.Tools.Update(ctx, audit.System, id, tools.Patch{Reason: "test",
		Params: map[string]tools.ParamInput{"operation": {Mode: tools.ModeFixed, Value: json.RawMessage(`"read_file"`)}}}); err != nil {
		t.Fatal(err)
	}
	doc = page(t, srv.Get(t, tina, "/tools/"+id+"/test"))
	if got := doc.Find(`#test-approval`).AttrOr("data-risk", ""); got != "low" || doc.Find(`[data-testid="run-test"][disabled]`).Length() != 0 {
		t.Errorf("with the operation fixed to read_file: risk %q, Run %s", got, doc.Find(`#test-run-actions`).Text())
	}
	if _, err := srv.Tools.Update(ctx, audit.System, id, tools.Patch{Reason: "test", Params: map[string]tools.ParamInput{}}); err != nil {
		t.Fatal(err)
	}

	// An administrator's level: a write is medium, a delete high; Run all asks for both
	// (of an administrator who may approve their own high call).
	srv.App.SetRisk(t, "builtin__file_operations", "low")
	if err := srv.Executions.SetSettings(ctx, audit.System, executions.Settings{ApprovalTTL: time.Hour, HighSeparation: decide.SeparationOff}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Tools.SaveTestCase(ctx, audit.System, id, tools.TestCase{Name: "delete",
		Arguments: json.RawMessage(`{"operation":"delete_file","filePath":"a.txt"}`), Expect: "success"}); err != nil {
		t.Fatal(err)
	}
	doc = page(t, srv.Get(t, admin, "/tools/"+id+"/test"))
	all := doc.Find(`[data-testid="run-all-form"]`)
	if all.Find(`[name="confirm"]`).Length() != 1 || all.Find(`[name="phrase"]`).Length() != 1 {
		t.Errorf("Run all over a medium and a high case: %q; the cases: %q", all.Text(), doc.Find(`[data-testid="test-cases"]`).Text())
	}
}

// While a run goes on, what renders the workspace again keeps it: a change of the
// arguments keeps Run off (and its answer is dropped if the run ends first), a switch
// to JSON keeps the running panel; the workspace names the run (_run), and a run that
// is not the caller's is not shown.
func TestTestPanelKeepsTheRunningRun(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "mt", true, "sleep")
	c := srv.Login(t, "admin", webtest.AdminPassword)
	sleep := toolID(t, srv, "mt__sleep")
	id, _, _ := startSleep(t, srv, c, sleep, 5000)

	res := srv.PostFormHeaders(t, c, "/tools/"+sleep+"/test/risk", url.Values{"mode": {"form"}, "arg/ms": {"10"}, "_run": {id}},
		map[string]string{"HX-Request": "true"})
	frag := page(t, res)
	acts := frag.Find(`#test-run-actions`)
	if res.StatusCode != http.StatusOK || acts.Find(`[data-testid="run-test"][disabled][aria-busy="true"]`).Length() != 1 ||
		acts.AttrOr("data-live-if", "") != "test-run-"+id || acts.Find(`[name="_run"]`).AttrOr("value", "") != id {
		t.Fatalf("a change while the run goes on: %d %q %s", res.StatusCode, acts.AttrOr("data-live-if", ""), acts.Text())
	}
	ws := testPost(t, srv, c, sleep, url.Values{"mode": {"form"}, "_action": {"mode:json"}, "arg/ms": {"10"}, "_run": {id}})
	if ws.Find(`[data-testid="test-running"]`).Length() != 1 || ws.Find(`[data-testid="run-test"][disabled]`).Length() != 1 {
		t.Fatalf("a switch to JSON while the run goes on lost it: %s", ws.Find("#test-workspace").Text())
	}
	// Another person naming the run sees nothing of it.
	srv.CreateUser(t, "tom", auth.RoleToolManager, "tom-password-123")
	tom := srv.Login(t, "tom", "tom-password-123")
	ws = testPost(t, srv, tom, sleep, url.Values{"mode": {"form"}, "_action": {"mode:json"}, "arg/ms": {"10"}, "_run": {id}})
	if ws.Find(`[data-testid="test-running"]`).Length() != 0 {
		t.Fatal("another person's workspace shows the run")
	}
}

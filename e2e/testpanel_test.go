package e2e

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// enabledLiveTools registers hs with srv as server name (streamable HTTP, trusted),
// waits until each named tool has been discovered and validated, enables it, and
// returns the tools' ids by name.
func enabledLiveTools(t *testing.T, srv *webtest.Server, hs *mcptest.HTTPServer, name string, enable ...string) map[string]string {
	t.Helper()
	ctx := context.Background()
	sv, err := srv.Registry.CreateServer(ctx, audit.System, registry.Spec{Name: name, Type: registry.TypeStreamableHTTP,
		URL: hs.URL(), Enabled: true, Trusted: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.MCP.Refresh(ctx, sv.ID)
	ids := map[string]string{}
	for _, n := range enable {
		deadline := time.Now().Add(20 * time.Second)
		for {
			tg, err := srv.Tools.Target(ctx, name+"__"+n)
			if err == nil && tg.Status == "validated" {
				ids[n] = tg.ID
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("tool %s__%s was not discovered and validated in 20 s (last error: %v)", name, n, err)
			}
			time.Sleep(20 * time.Millisecond) // poll interval
		}
		outs, err := srv.Tools.SetEnabled(ctx, audit.System, []string{ids[n]}, true, "e2e test panel", false)
		if err != nil || outs[0].Err() != nil {
			t.Fatalf("enable %s__%s: %v %v", name, n, err, outs)
		}
	}
	return ids
}

// panelWatch runs in every document before its own scripts. It keeps the answers that
// htmx is swapping in and has not settled yet (htmx binds swapped-in content when it
// settles; the panel's swaps settle at once, other swaps of the page may not), counts
// the panel's htmx requests and the swaps of its workspace, counts the browser's
// refusals of an invalid form, and records the running panel's progress after each
// message of the websocket (with the event id it reflects, and the one its panel had
// when the workspace was swapped in). On a page opened with ?nosocket its websocket
// never connects.
const panelWatch = `window.__unsettled = new Set(); window.__panelRequests = 0; window.__workspaceSwaps = 0; window.__invalid = 0;
document.addEventListener("htmx:beforeSwap", e => { if (e.detail.shouldSwap) window.__unsettled.add(e.detail.xhr); });
document.addEventListener("htmx:afterSettle", e => window.__unsettled.delete(e.detail.xhr));
document.addEventListener("htmx:afterSwap", e => { if (e.detail.target?.id === "test-workspace") window.__workspaceSwaps++; });
document.addEventListener("htmx:beforeRequest", e => {
	// Not the refresh of the approval part that a change of an argument asks for.
	if (e.detail.elt.closest("#test-workspace, #test-result") && e.detail.elt.id !== "test-args") window.__panelRequests++;
});
document.addEventListener("invalid", () => window.__invalid++, true);
if (new URLSearchParams(location.search).has("nosocket")) {
	window.WebSocket = class { constructor() { this.readyState = 0; } send() {} close() {} addEventListener() {} };
}
window.__panelSince = ""; window.__pushedSince = []; window.__pushedSteps = [];
document.addEventListener("htmx:afterSwap", e => {
	if (e.detail.target?.id === "test-workspace") window.__panelSince = document.querySelector("[data-live-since]")?.dataset.liveSince ?? "";
});
document.addEventListener("htmx:wsAfterMessage", () => {
	const p = document.querySelector("[data-testid=test-running] [data-live-since]");
	if (!p) return;
	window.__pushedSince.push(p.dataset.liveSince);
	const m = p.querySelector("[data-testid=test-progress-message]");
	if (m) window.__pushedSteps.push(m.textContent.trim());
});`

// runNetwork is what the browser sent and received about test runs: requests to a
// run's endpoint other than its Cancel (the running panel's fallback poll), and the
// websocket's frames.
type runNetwork struct {
	mu       sync.Mutex
	asked    []string
	sent     []string // the subscriptions
	received []string // the frames with a test run's parts
}

// watchNetwork starts recording the browser's traffic about test runs.
func watchNetwork(b *browser) *runNetwork {
	b.t.Helper()
	n := &runNetwork{}
	if err := chromedp.Listen(b.ctx, func(ev any) {
		n.mu.Lock()
		defer n.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			if strings.Contains(e.Request.URL, "/test/runs/") && !strings.Contains(e.Request.URL, "/cancel") {
				n.asked = append(n.asked, e.Request.Method+" "+e.Request.URL)
			}
		case *network.EventWebSocketFrameSent:
			n.sent = append(n.sent, string(e.Response.PayloadData))
		case *network.EventWebSocketFrameReceived:
			if p := string(e.Response.PayloadData); strings.Contains(p, `"test-run-`) {
				n.received = append(n.received, p)
			}
		}
	}); err != nil {
		b.t.Fatalf("listen to the browser: %v", err)
	}
	if _, err := chromedp.Call(b.ctx, network.Enable, network.EnableParams{}); err != nil {
		b.t.Fatalf("enable the network domain: %v", err)
	}
	return n
}

func (n *runNetwork) asks() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.asked)
}

// check fails the test unless the page subscribed its socket to run id's topic and
// received the run's progress and then its result over it, and never asked the server
// how the run was.
func (n *runNetwork) check(t *testing.T, what, id string) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.asked) > 0 {
		t.Errorf("%s: %d requests to a run's endpoint while the socket was up, want none: %v", what, len(n.asked), n.asked)
	}
	if !slices.ContainsFunc(n.sent, func(m string) bool { return strings.Contains(m, `"testrun:`+id+`@`) }) {
		t.Errorf("%s: the socket never subscribed to the run's topic: %v", what, n.sent)
	}
	progress, result := -1, -1
	for i, m := range n.received {
		if strings.Contains(m, `id="test-run-`+id+`"`) && result < 0 {
			progress = i
		}
		if strings.Contains(m, `data-live-if="test-run-`+id+`"`) && strings.Contains(m, `data-status="success"`) && result < 0 {
			result = i
		}
	}
	if progress < 0 || result < 0 {
		t.Errorf("%s: pushed over the socket: progress %v, result %v; want both, the progress first (%d frames)", what,
			progress >= 0, result >= 0, len(n.received))
	}
}

// runButton is a script expression for the workspace's Run button.
const runButton = `document.querySelector("[data-testid=run-test]")`

// settled waits until the element sel names is visible and every htmx swap has
// settled, so what was swapped in is bound and ready for clicks.
func (b *browser) settled(what, sel string) {
	b.t.Helper()
	b.do(what, chromedp.WaitVisible(chromedp.CSS(sel)))
	b.waitJS(what+" (settled)", `window.__unsettled.size === 0`)
}

// runEnabled fails the test unless the Run button is enabled and not marked busy.
func (b *browser) runEnabled(when string) {
	b.t.Helper()
	if got := eval[string](b, `(r => (r.disabled ? "disabled" : "enabled") + ", aria-busy=" + r.getAttribute("aria-busy"))(`+runButton+`)`); got != "enabled, aria-busy=null" {
		b.t.Errorf("%s the Run button is %s, want it enabled and not busy", when, got)
	}
}

// runTest clicks Run (after steps, which fill the form) and waits for a result panel
// that was not on the page before; it fails the test, showing the panel, unless its
// status is want.
func (b *browser) runTest(what, want string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	b.do("mark the old result", chromedp.Evaluate[chromedp.Void](
		`document.querySelectorAll("#test-result").forEach(r => r.__stale = true)`))
	b.do(what, append(steps, chromedp.Click(chromedp.CSS(`[data-testid=run-test]`)))...)
	b.waitJS(what+": a new result", `(r => !!r && !r.__stale)(document.querySelector("[data-testid=test-result]"))`)
	b.settled(what, `[data-testid=test-result]`)
	if got := eval[string](b, `document.querySelector("[data-testid=test-result]").dataset.status`); got != want {
		b.t.Fatalf("%s: result status %q, want %q; the panel reads: %s", what, got, want,
			strings.Join(strings.Fields(eval[string](b, `document.querySelector("#test-workspace").textContent`)), " "))
	}
}

// TestTestPanel drives the tool test panel in chromium, signed in as admin: a run from
// the generated form with its result, the browser's own required check, the JSON editor
// and the round trip back to the form, array items, a long call that shows progress and
// then its result without a reload, and a high-risk tool run with its typed phrase.
func TestTestPanel(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)

	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	hs.Server().SetTool(mcptest.ToolSpec{
		Name:        "tags",
		Description: "Takes a list of tags and replies ok.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"},"description":"The tags to apply."}}}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	})
	ids := enabledLiveTools(t, srv, hs, "mt", "echo", "tags", "sleep", "write-note")

	b := newBrowser(t)
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: panelWatch}); err != nil {
		t.Fatalf("install the page watcher: %v", err)
	}
	b.login(srv, "admin", webtest.AdminPassword)

	// 1. From the tool's page to the Test tab, and a run from the generated form.
	b.do("open echo's page", chromedp.Navigate(srv.URL+"/tools/"+ids["echo"]),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=tool-head][data-status=enabled]`)))
	b.do("open the Test tab", chromedp.Click(chromedp.CSS(`[data-testid=tab-test]`)))
	b.settled("the Test tab", `[data-testid=test-workspace] [data-testid=test-result-empty]`)
	if got := eval[string](b, `document.querySelector("[data-testid=tab-test]").getAttribute("aria-selected")`); got != "true" {
		t.Fatalf("Test tab aria-selected = %q, want true", got)
	}
	msg := `input[name="arg/message"]`
	b.runTest("run echo", "success", chromedp.SendKeys(chromedp.CSS(msg), "hello from chromium"))
	if got := eval[string](b, `document.querySelector("[data-testid=result-status]").textContent.trim()`); !strings.Contains(got, "Success") {
		t.Errorf("result status reads %q, want Success", got)
	}
	if got := eval[string](b, `document.querySelector("[data-testid=result-duration]")?.textContent.trim() ?? ""`); !strings.HasSuffix(got, " ms") {
		t.Errorf("response time reads %q, want a duration in ms", got)
	}
	if got := eval[string](b, `document.querySelector("[data-testid=output-0]").textContent.trim()`); got != "Echo: hello from chromium" {
		t.Errorf("output: got %q, want %q", got, "Echo: hello from chromium")
	}
	if got := eval[string](b, `document.querySelector('`+msg+`').value`); got != "hello from chromium" {
		t.Errorf("after the run the message input holds %q, want what was typed", got)
	}

	// 2. The required field empty: the browser refuses to send the form.
	b.do("mark the page", chromedp.Evaluate[chromedp.Void](`window.__noReload = 1`))
	b.do("empty the message and run",
		// SetValue cannot set "" (chromedp drops the empty argument), so as a script.
		chromedp.Evaluate[chromedp.Void](`(el => { el.value = ""; el.dispatchEvent(new Event("input", {bubbles: true})) })(document.querySelector('`+msg+`'))`),
		chromedp.Click(chromedp.CSS(`[data-testid=run-test]`)))
	b.waitJS("the browser flags the empty required input", `window.__invalid > 0`)
	if !eval[bool](b, `document.querySelector('`+msg+`').validity.valueMissing`) {
		t.Error("the empty message input is not valueMissing")
	}
	// Clicks are handled in order, so had the Run been sent, its request would be
	// counted before the mode switch's.
	b.do("type again and switch to JSON",
		chromedp.SendKeys(chromedp.CSS(msg), "typed in the form"),
		chromedp.Click(chromedp.CSS(`[data-testid=mode-json]`)))
	b.settled("the JSON editor", `[data-testid=arguments-json]`)
	if n := eval[int](b, `window.__panelRequests`); n != 2 {
		t.Errorf("%d panel requests after the run, the refused run and the switch to JSON, want 2: the browser let the empty required field through", n)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(eval[string](b, `document.querySelector("[data-testid=arguments-json]").value`)), &args); err != nil {
		t.Fatalf("the JSON editor does not hold JSON: %v", err)
	}
	if want := map[string]any{"message": "typed in the form"}; !reflect.DeepEqual(args, want) {
		t.Fatalf("JSON editor: got %v, want %v", args, want)
	}
	if got := eval[string](b, `document.querySelector("[data-testid=mode-json]").getAttribute("aria-pressed")`); got != "true" {
		t.Errorf("JSON button aria-pressed = %q, want true", got)
	}
	b.runTest("run {} from the JSON editor", "failed",
		chromedp.SetValue(chromedp.CSS(`[data-testid=arguments-json]`), "{}"))
	shown := eval[string](b, `(document.querySelector("[data-testid=json-errors]")?.textContent ?? "") + " | " +
		(document.querySelector("[data-testid=result-error]")?.textContent ?? "")`)
	if !strings.Contains(shown, "is required") || !strings.Contains(shown, "message") {
		t.Errorf("after running {}, the page shows %q; want the server's \"message is required\"", strings.Join(strings.Fields(shown), " "))
	}
	if got := eval[string](b, `document.querySelector("[data-testid=arguments-json]").value.trim()`); got != "{}" {
		t.Errorf("after the failed run the JSON editor holds %q, want {}", got)
	}
	// The refusal is shown once, under the JSON editor, not again in the result panel.
	if n := eval[int](b, `document.querySelector("#test-workspace").textContent.split("is required").length - 1`); n != 1 {
		t.Errorf("after running {}, \"is required\" appears %d times in the workspace, want once: %s", n,
			strings.Join(strings.Fields(eval[string](b, `document.querySelector("#test-workspace").textContent`)), " "))
	}
	if got := eval[string](b, `document.querySelector("[data-testid=arguments-json]").closest(".field").querySelector("[data-testid=json-errors]")?.textContent ?? ""`); !strings.Contains(got, "/message") || !strings.Contains(got, "is required") {
		t.Errorf("the JSON editor's errors read %q, want /message is required", strings.Join(strings.Fields(got), " "))
	}
	b.runEnabled("after a refused run")
	b.do("back to the form with new JSON",
		chromedp.SetValue(chromedp.CSS(`[data-testid=arguments-json]`), `{"message":"round trip"}`),
		chromedp.Click(chromedp.CSS(`[data-testid=mode-form]`)))
	b.settled("the form again", msg)
	if got := eval[string](b, `document.querySelector('`+msg+`').value`); got != "round trip" {
		t.Errorf("after JSON → form the message input holds %q, want %q", got, "round trip")
	}
	if v := eval[int](b, `window.__noReload ?? -1`); v != 1 {
		t.Fatal("the runs and mode switches reloaded the page; they should swap the workspace")
	}
	b.checkConsole()

	// 3. An array parameter: two items added with "Add item", filled, and run.
	b.do("open tags' test panel", chromedp.Navigate(srv.URL+"/tools/"+ids["tags"]+"/test"))
	b.settled("tags' test panel", `[data-testid="array-add-/tags"]`)
	b.do("add the first item", chromedp.Click(chromedp.CSS(`[data-testid="array-add-/tags"]`)))
	b.settled("the first item", `input[name="arg/tags/0"]`)
	b.do("fill the first item", chromedp.SendKeys(chromedp.CSS(`input[name="arg/tags/0"]`), "red"),
		chromedp.Click(chromedp.CSS(`[data-testid="array-add-/tags"]`)))
	b.settled("the second item", `input[name="arg/tags/1"]`)
	b.do("fill the second item", chromedp.SendKeys(chromedp.CSS(`input[name="arg/tags/1"]`), "green"))
	if got := eval[string](b, `document.querySelector('input[name="arg/tags/0"]').value`); got != "red" {
		t.Errorf("adding the second item changed the first to %q, want red", got)
	}
	b.runTest("run tags", "success")
	if got := eval[string](b, `document.querySelector("[data-testid=output-0]").textContent.trim()`); got != "ok" {
		t.Errorf("tags output: got %q, want ok", got)
	}
	// What was sent is what the JSON editor shows: the same decoding of the form.
	b.do("look at the arguments as JSON", chromedp.Click(chromedp.CSS(`[data-testid=mode-json]`)))
	b.settled("the JSON editor", `[data-testid=arguments-json]`)
	args = nil
	if err := json.Unmarshal([]byte(eval[string](b, `document.querySelector("[data-testid=arguments-json]").value`)), &args); err != nil {
		t.Fatalf("the JSON editor does not hold JSON: %v", err)
	}
	if want := map[string]any{"tags": []any{"red", "green"}}; !reflect.DeepEqual(args, want) {
		t.Errorf("tags arguments: got %v, want %v", args, want)
	}

	// 4. A long call: the running panel, whose progress and then result the server
	// pushes over the page's websocket (the run's own topic), in place, while nothing
	// asks the server how the run is (the panel's fallback poll) as the socket is up.
	net := watchNetwork(b)
	b.do("open sleep's test panel", chromedp.Navigate(srv.URL+"/tools/"+ids["sleep"]+"/test"))
	b.settled("sleep's test panel", `input[name="arg/ms"]`)
	b.waitJS("the page is live", `document.querySelector("#live-status")?.dataset.state === "open"`)
	b.do("mark the page", chromedp.Evaluate[chromedp.Void](`window.__noReload = 4; document.querySelector("[data-testid=test-run-form]").__old = true`))
	b.runEnabled("before the run")
	b.do("start a 4 s sleep",
		chromedp.SendKeys(chromedp.CSS(`input[name="arg/ms"]`), "4000"),
		chromedp.Click(chromedp.CSS(`[data-testid=run-test]`)))
	// The answer takes 1.5 s (the server waits that long before it shows progress).
	b.waitJS("Run is disabled and busy while the request is in flight",
		`(r => r.disabled && r.getAttribute("aria-busy") === "true" && r.closest("form").__old === true)(`+runButton+`)`)
	// Meanwhile the last result is dimmed at once: it is not this run's.
	b.waitJS("the last result is dimmed while the request is in flight",
		`document.querySelector("[data-testid=test-run-form]").__old === true && Number(getComputedStyle(document.querySelector(".test-result-area")).opacity) < 0.6`)
	b.do("wait for the running panel",
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=test-running][aria-busy=true] [data-testid=test-run-progress]`)))
	topic := eval[string](b, `document.querySelector("[data-testid=test-running]")?.dataset.liveTopic ?? ""`)
	runID, ok := strings.CutPrefix(topic, "testrun:")
	runID, _, _ = strings.Cut(runID, "@") // then the replica that holds it
	if !ok {
		t.Fatalf("the running panel follows %q, want a test run's topic", topic)
	}
	if !eval[bool](b, `(r => r.disabled && r.getAttribute("aria-busy") === "true" && !r.closest("form").__old)(`+runButton+`)`) {
		t.Error("while the running panel is shown, the Run button is not disabled and busy")
	}
	b.waitJS("the pushed progress replaces the panel's", `window.__pushedSince.some(s => s !== window.__panelSince)`)
	screenshot(t, b, "test-panel-running.png")
	b.waitJS("the result replaces the running panel", `!!document.querySelector("[data-testid=test-result]")`)
	b.settled("the result", `[data-testid=test-result]`)
	b.runEnabled("after the long call's result")
	if got := eval[string](b, `document.querySelector("[data-testid=test-result]").dataset.status`); got != "success" {
		t.Fatalf("sleep: result status %q, want success: %s", got, eval[string](b, `document.querySelector("#test-result").textContent`))
	}
	if eval[bool](b, `!!document.querySelector("[data-testid=test-running]")`) {
		t.Error("the running panel is still there next to the result")
	}
	if got := eval[string](b, `document.querySelector("[data-testid=output-0]").textContent.trim()`); got != "slept" {
		t.Errorf("sleep output: got %q, want slept", got)
	}
	if v := eval[int](b, `window.__noReload ?? -1`); v != 4 {
		t.Fatal("the page was reloaded while the call ran; the result should replace the running panel in place")
	}
	if st := eval[string](b, `document.querySelector("#live-status").dataset.state`); st != "open" {
		t.Errorf("#live-status is %q after the run, want open", st)
	}
	// The page showed the steps in order, each pushed over the socket.
	var steps []int
	for _, m := range eval[[]string](b, `window.__pushedSteps`) {
		if n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(m, "slept "), " of 5")); err == nil {
			if len(steps) > 0 && n < steps[len(steps)-1] {
				t.Errorf("the progress went back: %v", eval[[]string](b, `window.__pushedSteps`))
			}
			steps = append(steps, n)
		}
	}
	if len(steps) == 0 {
		t.Errorf("no progress step was shown from a pushed fragment: %v", eval[[]string](b, `window.__pushedSteps`))
	}
	net.check(t, "the long call", runID)

	// A long call cancelled: Run stays disabled until the cancelled result is in.
	// A long call cancelled: Run stays disabled until the cancelled result is in.
	b.do("start a 20 s sleep",
		chromedp.SetValue(chromedp.CSS(`input[name="arg/ms"]`), "20000"),
		chromedp.Click(chromedp.CSS(`[data-testid=run-test]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=test-running] [data-testid=cancel-test]`)))
	if !eval[bool](b, runButton+`.disabled`) {
		t.Error("while a call runs, the Run button is enabled")
	}
	b.do("cancel it", chromedp.Click(chromedp.CSS(`[data-testid=cancel-test]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=test-result][data-status=cancelled]`)))
	b.settled("the cancelled result", `[data-testid=test-result]`)
	b.runEnabled("after the call was cancelled")
	if v := eval[int](b, `window.__noReload ?? -1`); v != 4 {
		t.Fatal("cancelling the call reloaded the page")
	}
	if n := len(net.asks()); n != 0 {
		t.Errorf("%d requests to a run's endpoint while the socket was up, want none: %v", n, net.asks())
	}

	// Without a websocket (one that never connects, as behind a proxy that holds it),
	// the running panel falls back to asking the server, and still ends with the result.
	b.do("open sleep's test panel without a websocket", chromedp.Navigate(srv.URL+"/tools/"+ids["sleep"]+"/test?nosocket=1"))
	b.settled("sleep's test panel", `input[name="arg/ms"]`)
	b.do("start a 2.5 s sleep",
		chromedp.SetValue(chromedp.CSS(`input[name="arg/ms"]`), "2500"),
		chromedp.Click(chromedp.CSS(`[data-testid=run-test]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=test-running]`)))
	b.waitJS("the result replaces the running panel without a socket", `!!document.querySelector("[data-testid=test-result]")`)
	b.settled("the result without a socket", `[data-testid=test-result]`)
	if got := eval[string](b, `document.querySelector("[data-testid=test-result]").dataset.status`); got != "success" {
		t.Errorf("without a socket the result is %q, want success", got)
	}
	b.runEnabled("after the result without a socket")
	if len(net.asks()) == 0 {
		t.Error("without a socket the running panel never asked the server how the run was")
	}

	// 5. Run clicked again at once after a result was swapped in (in the next task, before
	// htmx's default settle delay would have passed): still through htmx, no reload.
	b.do("open echo's test panel", chromedp.Navigate(srv.URL+"/tools/"+ids["echo"]+"/test"))
	b.settled("echo's test panel", msg)
	b.do("arm a click right after the next swap", chromedp.Evaluate[chromedp.Void](`window.__noReload = 5;
		window.__panelRequests = 0; window.__workspaceSwaps = 0;
		document.addEventListener("htmx:afterSwap", e => {
			if (e.detail.target?.id === "test-workspace" && window.__workspaceSwaps === 1) setTimeout(() => `+runButton+`.click(), 0);
		})`))
	b.do("run echo", chromedp.SendKeys(chromedp.CSS(msg), "twice"), chromedp.Click(chromedp.CSS(`[data-testid=run-test]`)))
	// A submit without htmx navigates, which ends the poll with an error: then look at
	// the page it went to.
	_, err := chromedp.Run(b.ctx, chromedp.Poll[bool](`window.__noReload !== 5 || window.__workspaceSwaps >= 2`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil {
		b.do("wait for the page after the second click", chromedp.WaitReady(chromedp.CSS(`[data-testid=test-workspace]`)))
	}
	if v := eval[int](b, `window.__noReload ?? -1`); v != 5 {
		t.Fatal("a click on Run right after a result was swapped in reloaded the page; it should go through htmx")
	}
	if err != nil {
		t.Fatalf("waiting for the second run's result: %v", err)
	}
	b.settled("the second result", `[data-testid=test-result]`)
	if n := eval[int](b, `window.__panelRequests`); n != 2 {
		t.Errorf("%d panel requests for two runs, want 2", n)
	}
	if got := eval[string](b, `document.querySelector("[data-testid=output-0]")?.textContent.trim() ?? ""`); got != "Echo: twice" {
		t.Errorf("after the second run the output is %q, want %q", got, "Echo: twice")
	}
	b.runEnabled("after the second run")

	// 6. High risk: the danger zone asks for the tool's name typed out.
	b.do("open write-note's test panel", chromedp.Navigate(srv.URL+"/tools/"+ids["write-note"]+"/test"))
	b.settled("write-note's test panel", `[data-testid=danger-zone] [data-testid=confirm-phrase]`)
	if got := eval[string](b, `document.querySelector("label[for=confirm-phrase] code").textContent`); got != "mt__write-note" {
		t.Errorf("the danger zone asks for %q, want mt__write-note", got)
	}
	b.runTest("run write-note with the phrase", "success",
		chromedp.SendKeys(chromedp.CSS(`textarea[name="arg/text"]`), "a note from chromium"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=confirm-phrase]`), "mt__write-note"))
	if got := eval[string](b, `document.querySelector("[data-testid=output-0]").textContent.trim()`); got != "ok" {
		t.Errorf("write-note output: got %q, want ok", got)
	}

	b.checkConsole()
	screenshot(t, b, "test-panel.png")
}

// TestBrowserAskForApproval: a tool user who may not run a high-risk tool alone (another
// person could approve) sees why in the test panel and asks for approval with one
// click, landing on the plan that waits for someone else; no console errors.
func TestBrowserAskForApproval(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	ids := enabledLiveTools(t, srv, hs, "mt", "write-note")
	srv.CreateUser(t, "tina", "tool_user", "tina-password-123")
	srv.Login(t, "admin", webtest.AdminPassword) // the other person who could approve
	b := newBrowser(t)
	b.login(srv, "tina", "tina-password-123")
	b.do("open the test panel", chromedp.Navigate(srv.URL+"/tools/"+ids["write-note"]+"/test"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=needs-approver]`)))
	if got := eval[string](b, `document.querySelector("[data-testid=needs-approver]").textContent`); !strings.Contains(got, "different person") {
		t.Errorf("the danger zone says %q, want why another person must approve", got)
	}
	if eval[bool](b, `!!document.querySelector("[data-testid=confirm-phrase]")`) {
		t.Error("the danger zone still asks for the phrase the user may not use")
	}
	b.do("fill in the note", chromedp.SendKeys(chromedp.CSS(`#test-workspace textarea`), "a note"))
	screenshot(t, b, "ask-for-approval.png")
	b.do("ask for approval", chromedp.Click(chromedp.CSS(`[data-testid=request-approval]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=execution-head]`)))
	if loc := eval[string](b, `location.pathname`); !strings.HasPrefix(loc, "/executions/") {
		t.Errorf("after asking for approval the page is %s, want the new plan's", loc)
	}
	if got := eval[string](b, `document.querySelector("[data-testid=execution-head]").dataset.status`); got != "awaiting_approval" {
		t.Errorf("the plan's status is %q, want awaiting_approval", got)
	}
	screenshot(t, b, "asked-for-approval.png")
	b.checkConsole()
}

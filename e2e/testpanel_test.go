package e2e

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/web/webtest"
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

// panelWatch runs in every document before its own scripts. htmx binds swapped-in
// content only when it settles, a moment after the swap: a click on a button before
// that submits the form natively and reloads the page, so the test waits until no swap
// is unsettled. It also counts the panel's htmx requests and the browser's refusals
// of an invalid form.
const panelWatch = `window.__swapping = 0; window.__panelRequests = 0; window.__invalid = 0;
document.addEventListener("htmx:beforeSwap", () => window.__swapping++);
document.addEventListener("htmx:afterSettle", () => window.__swapping--);
document.addEventListener("htmx:beforeRequest", e => {
	if (e.detail.elt.closest("#test-workspace, #test-result")) window.__panelRequests++;
});
document.addEventListener("invalid", () => window.__invalid++, true);`

// settled waits until the element sel names is visible and every htmx swap has
// settled, so what was swapped in is bound and ready for clicks.
func (b *browser) settled(what, sel string) {
	b.t.Helper()
	b.do(what, chromedp.WaitVisible(chromedp.CSS(sel)))
	b.waitJS(what+" (settled)", `window.__swapping === 0`)
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

	// 4. A long call: the running panel with progress, then the result, in place.
	b.do("open sleep's test panel", chromedp.Navigate(srv.URL+"/tools/"+ids["sleep"]+"/test"))
	b.settled("sleep's test panel", `input[name="arg/ms"]`)
	b.do("mark the page", chromedp.Evaluate[chromedp.Void](`window.__noReload = 4`))
	b.do("start a 2.5 s sleep",
		chromedp.SendKeys(chromedp.CSS(`input[name="arg/ms"]`), "2500"),
		chromedp.Click(chromedp.CSS(`[data-testid=run-test]`)),
		// The panel polls itself away within a second or so: one selector checks it all.
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=test-running][aria-busy=true] [data-testid=test-progress]`)))
	screenshot(t, b, "test-panel-running.png")
	b.waitJS("the result replaces the running panel", `!!document.querySelector("[data-testid=test-result]")`)
	b.settled("the result", `[data-testid=test-result]`)
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

	// 5. High risk: the danger zone asks for the tool's name typed out.
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

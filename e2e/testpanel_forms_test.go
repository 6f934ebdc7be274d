package e2e

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
)

// TestTestPanelFormEditors drives the test panel's editors for what one input per
// value cannot express (issue #22) in chromium, on the in-repo server's tool shapes,
// which answers with the arguments it received: a oneOf picked from the keyboard
// (only the chosen variant shows), a nullable field set to null, and a map given two
// rows with "Add entry"; the run sends exactly those arguments. Then the same form on
// a phone's width fits without scrolling sideways.
func TestTestPanelFormEditors(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt", Shapes: true})
	ids := enabledLiveTools(t, srv, hs, "mt", "shapes")

	b := newBrowser(t)
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: panelWatch}); err != nil {
		t.Fatalf("install the page watcher: %v", err)
	}
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open shapes' test panel", chromedp.Navigate(srv.URL+"/tools/"+ids["shapes"]+"/test"))
	b.settled("shapes' test panel", `select[name="arg/shape/~v"]`)

	visible := func(sel string) bool {
		t.Helper()
		return eval[bool](b, `(e => !!e && e.checkVisibility())(document.querySelector('`+sel+`'))`)
	}
	disabled := func(sel string) bool {
		t.Helper()
		return eval[bool](b, `document.querySelector('`+sel+`').disabled`)
	}
	const (
		picker = `select[name="arg/shape/~v"]`
		radius = `input[name="arg/shape/~v0/radius"]`
		width  = `input[name="arg/shape/~v1/width"]`
		height = `input[name="arg/shape/~v1/height"]`
		label  = `input[name="arg/label"]`
		null   = `input[name="arg/label/~null"]`
	)
	if !visible(radius) || visible(width) || !disabled(width) {
		t.Fatal("before a pick: want the first variant (Circle) shown and the second hidden and disabled")
	}
	if got := eval[string](b, `document.querySelector('label[for="'+document.querySelector('`+picker+`').id+'"]')?.textContent ?? ""`); got != "Variant of shape" {
		t.Errorf("the picker's label reads %q, want \"Variant of shape\"", got)
	}

	// 1. The oneOf: the second variant picked from the keyboard, its fields filled.
	b.do("pick the second shape with the keyboard", chromedp.Focus(chromedp.CSS(picker)), chromedp.KeyEvent(kb.ArrowDown))
	b.waitJS("the rect variant shows", `document.querySelector('`+picker+`').value === "1" && document.querySelector('`+width+`').checkVisibility()`)
	if visible(radius) || !disabled(radius) {
		t.Error("after picking rect, the circle's radius is still shown or enabled")
	}
	b.do("fill the rect", chromedp.SendKeys(chromedp.CSS(width), "2"), chromedp.SendKeys(chromedp.CSS(height), "3"))

	// 2. A nullable field set to null: its text input is read-only (and kept).
	b.do("type a label, then set it to null", chromedp.SendKeys(chromedp.CSS(label), "not sent"), chromedp.Click(chromedp.CSS(null)))
	b.waitJS("the label input is read-only", `document.querySelector('`+label+`').readOnly`)

	// 3. A map with two rows, each added with "Add entry" (the form posts and comes back).
	add := `[data-testid="map-add-/tags"]`
	b.do("add a first row", chromedp.Click(chromedp.CSS(add)))
	b.settled("the first row", `input[name="arg/tags/0/~key"]`)
	b.do("fill the first row", chromedp.SendKeys(chromedp.CSS(`input[name="arg/tags/0/~key"]`), "a"),
		chromedp.SendKeys(chromedp.CSS(`input[name="arg/tags/0"]`), "1"),
		chromedp.Click(chromedp.CSS(add)))
	b.settled("the second row", `input[name="arg/tags/1/~key"]`)
	b.do("fill the second row", chromedp.SendKeys(chromedp.CSS(`input[name="arg/tags/1/~key"]`), "b"),
		chromedp.SendKeys(chromedp.CSS(`input[name="arg/tags/1"]`), "2"))
	// Adding rows kept everything else as it was.
	if got := eval[string](b, `document.querySelector('`+picker+`').value + " " + document.querySelector('`+width+`').value + " " +
		document.querySelector('`+null+`').checked + " " + document.querySelector('`+label+`').value + " " +
		document.querySelector('input[name="arg/tags/0/~key"]').value`); got != "1 2 true not sent a" {
		t.Errorf("after adding rows the picker, width, null box, label and first key read %q, want \"1 2 true not sent a\"", got)
	}
	if visible(radius) || !eval[bool](b, `document.querySelector('`+label+`').readOnly`) {
		t.Error("after the form came back, the hidden variant is shown or the null label editable again")
	}
	// Unticking null makes the label editable again.
	b.do("untick null", chromedp.Click(chromedp.CSS(null)))
	b.waitJS("the label is editable", `!document.querySelector('`+label+`').readOnly`)
	b.do("tick null again", chromedp.Click(chromedp.CSS(null)))

	b.runTest("run shapes", "success")
	var got map[string]any
	out := eval[string](b, `document.querySelector("[data-testid=output-0]").textContent.trim()`)
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("the tool's answer %q is not JSON: %v", out, err)
	}
	want := map[string]any{
		"shape": map[string]any{"kind": "rect", "width": 2.0, "height": 3.0},
		"label": nil,
		"tags":  map[string]any{"a": "1", "b": "2"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the tool received %v, want %v", got, want)
	}

	screenshot(t, b, "test-panel-form-editors.png")

	// 4. A phone's width: the rows and variants wrap instead of overflowing.
	b.do("emulate a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulatePortrait))
	b.waitJS("the narrow layout", `window.innerWidth === 390`)
	if w := eval[string](b, `(f => f.scrollWidth > f.clientWidth ? f.scrollWidth + " > " + f.clientWidth : "")(document.querySelector("[data-testid=test-form]"))`); w != "" {
		t.Errorf("the test form scrolls sideways on a phone (scroll width %s client width)", w)
	}
	screenshot(t, b, "test-panel-form-editors-phone.png")
	b.checkConsole()
}

package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// TestBrowserTemplateServer writes a YAML template server in chromium: a mistake is
// shown under the YAML box at its line, with what was typed kept; the corrected
// template saves, connects, and its tool is discovered live.
func TestBrowserTemplateServer(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)

	const broken = "tools:\n" +
		"  - name: shout\n" +
		"    description: Print a text in capitals\n" +
		"    input_schema: {type: object, properties: {text: {type: string}}, required: [text]}\n" +
		"    command: {argv: [\"printf\", \"%s\", \"{txt}\"]}\n"
	b.do("open the form", chromedp.Navigate(srv.URL+"/servers/new"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=server-form]`)))
	b.do("choose a template server",
		chromedp.SendKeys(chromedp.ID("name"), "words"),
		chromedp.SetValue(chromedp.ID("type"), "template"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("type").dispatchEvent(new Event("change", {bubbles: true}))`),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=template-yaml]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid=template-yaml]`), broken),
		chromedp.Click(chromedp.CSS(`[data-testid=save-server]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=error-template]`)))
	msg := eval[string](b, `document.querySelector("[data-testid=error-template]").textContent`)
	if !strings.Contains(msg, "line 5") || !strings.Contains(msg, "{txt}") {
		t.Fatalf("the template's error reads %q, want the line and the unknown placeholder", msg)
	}
	if got := eval[string](b, `document.querySelector("[data-testid=template-yaml]").value`); got != broken {
		t.Fatalf("the YAML box lost what was typed: %q", got)
	}
	if eval[string](b, `document.querySelector("[data-testid=template-yaml]").getAttribute("aria-invalid") ?? ""`) != "true" {
		t.Error("the YAML box is not marked invalid")
	}

	b.do("correct and save",
		chromedp.SetValue(chromedp.CSS(`[data-testid=template-yaml]`), strings.Replace(broken, "{txt}", "{text}", 1)),
		chromedp.Click(chromedp.CSS(`[data-testid=save-server]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=server-head]`)))
	b.waitJS("the template server connects", `document.querySelector("[data-testid=server-head]").dataset.status === "connected"`)
	b.waitJS("its tool is discovered", `document.querySelector("[data-testid=server-tools]").dataset.count === "1"`)
	if got := eval[string](b, `document.querySelector("[data-testid=server-template]")?.textContent ?? ""`); !strings.Contains(got, "{text}") {
		t.Errorf("the server page shows the template as %q", got)
	}
	b.checkConsole("status of 422") // the refused save
}

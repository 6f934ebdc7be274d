package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// TestBrowserAddStdioServer adds a stdio server through the form (with environment
// variables, one of them a secret canary), tests the connection before saving, saves,
// and watches the server page go connected and list its tools live, without a reload.
func TestBrowserAddStdioServer(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)

	const canary = "canary-browser-7731"
	cmd, args, env := mcptest.StdioCommand(&mcptest.Options{Name: "browser"}, "")
	env["API_TOKEN"] = canary
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	slices.Sort(names)

	b.do("open the server list", chromedp.Navigate(srv.URL+"/servers"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=no-servers]`)))
	b.do("open the form", chromedp.Click(chromedp.CSS(`[data-testid=add-server]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=server-form]`)))
	if eval[bool](b, `!document.querySelector("[data-for-type=sse\\ streamable_http]").hidden`) {
		t.Fatal("the HTTP fields are shown for a stdio server")
	}
	b.do("fill name and command",
		chromedp.SendKeys(chromedp.ID("name"), "browser"),
		chromedp.SendKeys(chromedp.ID("command"), cmd),
		chromedp.SendKeys(chromedp.ID("args"), strings.Join(args, "\n")),
		chromedp.Click(chromedp.CSS(`details.advanced > summary`)),
	)
	for i, k := range names {
		b.do("add variable "+k, chromedp.Click(chromedp.CSS(`[data-testid=add-env]`)))
		row := `#env-rows .secret-row:nth-child(` + itoa(i+1) + `)`
		b.do("fill variable "+k,
			chromedp.SendKeys(chromedp.CSS(row+` input[name=env_name]`), k),
			chromedp.SendKeys(chromedp.CSS(row+` input[name=env_value]`), env[k]),
		)
	}

	b.do("test the connection", chromedp.Click(chromedp.CSS(`[data-testid=test-connection]`)))
	b.waitJS("the test reports a connection", `!!document.querySelector("[data-testid=test-ok]")`)
	// The result replaced the whole panel, not only the status that polled for it.
	if !eval[bool](b, `document.querySelectorAll("#test-result").length === 1 && !document.querySelector("[data-testid=test-cancel]") && !document.querySelector("[data-testid=test-running]")`) {
		t.Fatalf("the result sits inside the running panel: %s", eval[string](b, `document.getElementById("test-result").outerHTML`))
	}
	if txt := eval[string](b, `document.querySelector("[data-testid=test-ok]").textContent`); !strings.Contains(txt, "5 tools") {
		t.Fatalf("test result %q does not report the 5 tools", strings.Join(strings.Fields(txt), " "))
	}
	// The test kept what was typed (it replaced only the result panel).
	if v := eval[string](b, `document.getElementById("name").value`); v != "browser" {
		t.Fatalf("after the test, name is %q", v)
	}
	b.do("mark the page", chromedp.Evaluate[chromedp.Void](`window.__beforeSave = 1`))
	b.do("save", chromedp.Click(chromedp.CSS(`[data-testid=save-server]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=server-head]`)))
	b.do("mark the detail page", chromedp.Evaluate[chromedp.Void](`window.__noReload = 42`))
	// The server may have connected before the page was rendered; then it starts
	// connected and there is no toast to see.
	initial := eval[string](b, `document.querySelector("[data-testid=server-head]").dataset.status`)
	b.waitJS("the server goes connected live", `document.querySelector("[data-testid=server-head]").dataset.status === "connected"`)
	b.waitJS("its tools are listed live", `document.querySelector("[data-testid=server-tools]").dataset.count === "5"`)
	// Each tool leads to its page (the rows came live: the links too).
	if n := eval[int](b, `[...document.querySelectorAll("[data-testid=server-tools] a[data-testid=tool-link]")].filter(a => /^\/tools\/[0-9a-f-]{36}$/.test(a.getAttribute("href"))).length`); n != 5 {
		t.Fatalf("links from the server's tools to their pages: %d, want 5", n)
	}
	if initial != "connected" {
		b.waitJS("a toast says it connected",
			`[...document.querySelectorAll("[data-testid=toast]")].some(t => t.textContent.includes("browser connected"))`)
	}
	if v := eval[int](b, `window.__noReload ?? -1`); v != 42 {
		t.Fatal("the server page was reloaded; the updates should arrive over the websocket")
	}
	b.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`[data-testid=stderr]`)))
	if txt := eval[string](b, `document.querySelector("[data-testid=stderr]").textContent`); !strings.Contains(txt, "mcptest: browser started") {
		t.Fatalf("stderr panel %q lacks the server's start line", txt)
	}
	html := eval[string](b, `document.documentElement.outerHTML`)
	if strings.Contains(html, canary) {
		t.Fatal("the secret env value appears in the server page")
	}
	screenshot(t, b, "server.png")

	b.do("open the list", chromedp.Navigate(srv.URL+"/servers"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=server-card][data-server=browser]`)))
	card := eval[string](b, `document.querySelector("[data-testid=server-card][data-server=browser]").textContent`)
	if !strings.Contains(card, "5 tools") || !strings.Contains(card, "Connected") {
		t.Fatalf("card %q should say Connected and 5 tools", strings.Join(strings.Fields(card), " "))
	}
	b.do("edit", chromedp.Navigate(srv.URL+"/servers"), chromedp.Click(chromedp.CSS(`[data-testid=server-card] summary`)),
		chromedp.Click(chromedp.CSS(`[data-testid=server-card] .menu-items a[href$="/edit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=server-form]`)))
	html = eval[string](b, `document.documentElement.outerHTML`)
	if strings.Contains(html, canary) {
		t.Fatal("the secret env value appears in the edit form")
	}
	if !strings.Contains(html, "API_TOKEN") {
		t.Fatal("the edit form does not list the stored variable names")
	}
	screenshot(t, b, "server-edit.png")
	b.do("back to the list", chromedp.Navigate(srv.URL+"/servers"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=server-card][data-status=connected]`)))
	screenshot(t, b, "servers.png")
	b.checkConsole()
}

func itoa(i int) string { return strconv.Itoa(i) }

// screenshot saves the page to TOOLWARDEN_SCREENSHOT_DIR when it is set.
func screenshot(t *testing.T, b *browser, name string) {
	t.Helper()
	dir := os.Getenv("TOOLWARDEN_SCREENSHOT_DIR")
	if dir == "" {
		return
	}
	shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), shot, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserServerInfoLive: a server's page open before its first connection fills
// its "Server" panel (name, version, last connected, capabilities) when the server
// connects, without a reload.
func TestBrowserServerInfoLive(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	ctx := context.Background()
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "infotest"})
	sv, err := srv.Registry.CreateServer(ctx, audit.System, registry.Spec{Name: "info", Type: registry.TypeStreamableHTTP, URL: hs.URL()})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the server's page", chromedp.Navigate(srv.URL+"/servers/"+sv.ID),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=server-head]`)))
	if got := eval[string](b, `document.getElementById("server-info-panel-`+sv.ID+`").textContent`); !strings.Contains(got, "Not connected yet") {
		t.Fatalf("before the first connection the panel says %q", got)
	}
	b.waitJS("the page's live connection is open", `document.querySelector("#live-status")?.dataset.state === "open"`)
	if _, err := srv.Registry.SetEnabled(ctx, audit.System, sv.ID, true); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the panel shows what the server said", `(document.querySelector("#server-info-panel-`+sv.ID+` [data-testid=server-info]")?.textContent || "").includes("infotest")`)
	if got := eval[string](b, `document.getElementById("server-info-panel-`+sv.ID+`").textContent`); !strings.Contains(got, "Last connected") {
		t.Errorf("the panel lacks the last connection: %q", got)
	}
	b.checkConsole()
}

// TestBrowserFormErrorTakesFocus: a form sent back with errors puts the focus on its
// first invalid field (the server form's name here), so a keyboard user lands where
// the fix goes; a failed sign-in puts it on the password, the username being kept.
func TestBrowserFormErrorTakesFocus(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.do("a wrong password", chromedp.Navigate(srv.URL+"/login"), chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), "admin"), chromedp.SendKeys(chromedp.ID("password"), "not-the-password"),
		chromedp.Click(chromedp.CSS(`[data-testid=login-submit]`)))
	b.waitAfterNavigation("the sign-in page says so", `document.querySelector("[data-testid=login-error]")`)
	if id := eval[string](b, `document.activeElement.id`); id != "password" {
		t.Errorf("after a failed sign-in the focus is on %q, want the password", id)
	}
	b.checkConsole("status of 401") // the refused sign-in, as expected
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("a server with a bad name", chromedp.Navigate(srv.URL+"/servers/new"), chromedp.WaitVisible(chromedp.ID("name")),
		chromedp.SetValue(chromedp.ID("name"), "Bad Name"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("name").removeAttribute("pattern")`),
		chromedp.Submit(chromedp.ID("name")))
	b.waitAfterNavigation("the form comes back with the error", `document.querySelector("#name[aria-invalid=true]")`)
	if id := eval[string](b, `document.activeElement.id`); id != "name" {
		t.Errorf("after the server refused the form the focus is on %q, want the invalid name", id)
	}
	b.checkConsole("status of 422") // the refused form, as expected
}

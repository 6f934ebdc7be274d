package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

// TestBrowserToolLifecycle searches the tool list as a person types, narrows it with a
// filter, opens a tool, saves a configuration, disables and enables the tool, and reads
// both moves on the History tab — in chromium, with no console errors or CSP violations.
func TestBrowserToolLifecycle(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	ctx := context.Background()

	// A live server (the in-repo MCP test server over streamable HTTP) and a second one
	// whose tools are stored directly, so the list has something to filter out.
	mcpSrv := mcptest.StartHTTP(t, &mcptest.Options{Name: "live"})
	live, err := srv.Registry.CreateServer(ctx, audit.System, registry.Spec{Name: "live", Type: registry.TypeStreamableHTTP,
		URL: mcpSrv.URL(), Enabled: true, Trusted: true})
	if err != nil {
		t.Fatal(err)
	}
	other, err := srv.Registry.CreateServer(ctx, audit.System, registry.Spec{Name: "other", Type: registry.TypeStreamableHTTP,
		URL: "http://127.0.0.1:9/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	schema := json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"The text to repeat."}},"required":["text"]}`)
	if _, err := srv.Registry.ApplyDiscovery(ctx, other.ID, registry.Discovery{Trigger: "manual", Actor: audit.System,
		StartedAt: time.Now(), Pages: 1, Tools: []registry.ToolDef{
			{Name: "echo_twice", Description: "Echoes the text twice, for callers who like repetition.", InputSchema: schema},
			{Name: "search_docs", Description: "Searches the documentation for a phrase.", InputSchema: schema},
		}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := srv.Tools.Count(ctx, tools.Query{Server: live.ID})
		if err != nil {
			t.Fatal(err)
		}
		if n == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the live server's 5 tools were not discovered in 20 s (have %d)", n)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}

	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the tool list", chromedp.Navigate(srv.URL+"/tools"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=tool-cards]`)))
	if n := eval[int](b, `document.querySelectorAll("[data-testid=tool-card]").length`); n != 7 {
		t.Fatalf("the list shows %d tools, want 7", n)
	}
	screenshot(t, b, "tool-list.png")
	b.do("mark the page", chromedp.Evaluate[chromedp.Void](`window.__noReload = 7`))

	// Search as you type: results come from the server, the page is not reloaded.
	b.do("type a search", chromedp.SendKeys(chromedp.ID("tool-q"), "ech"))
	b.waitJS("the search narrows the list to the two echo tools",
		`[...document.querySelectorAll("[data-testid=tool-card]")].map(c => c.dataset.tool).sort().join() === "live__echo,other__echo_twice"`)
	b.waitJS("the address bar keeps the search", `location.search.includes("q=ech")`)

	// A filter narrows it further.
	b.do("filter by server", chromedp.SetValue(chromedp.ID("tool-server"), "live"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("tool-server").dispatchEvent(new Event("change", {bubbles: true}))`))
	b.waitJS("only the live server's echo is left",
		`[...document.querySelectorAll("[data-testid=tool-card]")].map(c => c.dataset.tool).join() === "live__echo"`)
	if v := eval[int](b, `window.__noReload ?? -1`); v != 7 {
		t.Fatal("searching reloaded the page; results should be swapped in place")
	}
	b.checkConsole()
	// Leaving the search box fires its change event; the list must not be fetched again
	// (a second swap under the pointer ate the click on a result card).
	b.do("count list requests", chromedp.Evaluate[chromedp.Void](
		`window.__listReqs = 0; document.addEventListener("htmx:beforeRequest", () => window.__listReqs++)`))
	b.do("leave the search box", chromedp.Evaluate[chromedp.Void](`document.getElementById("tool-q").blur()`))
	if n := eval[int](b, `window.__listReqs`); n != 0 {
		t.Fatalf("leaving the search box fetched the list %d more times", n)
	}

	// Open the tool and configure it: a default for its parameter, a tag.
	b.do("open the tool", chromedp.Click(chromedp.CSS(`[data-tool="live__echo"] [data-testid=tool-link]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=tool-head]`)))
	if st := eval[string](b, `document.querySelector("[data-testid=tool-head]").dataset.status`); st != "validated" {
		t.Fatalf("echo is %q, want validated", st)
	}
	b.do("open the Configuration tab", chromedp.Click(chromedp.CSS(`[data-testid=tab-configuration]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=config-form]`)))
	param := `[data-testid=config-param][data-param="message"]`
	b.do("set a default message",
		chromedp.SetValue(chromedp.CSS(param+` [data-testid=param-mode]`), "default"),
		chromedp.SendKeys(chromedp.CSS(param+` [data-testid=param-value]`), "hello from the browser"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=cfg-tags]`), "demo, greetings"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=cfg-reason]`), "friendlier default"),
		chromedp.Click(chromedp.CSS(`[data-testid=config-save]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=flash]`)))
	screenshot(t, b, "tool-configuration.png")
	b.waitJS("version 1 is listed", `!!document.querySelector("[data-testid=config-version-row][data-version='1']")`)
	if v := eval[string](b, `document.querySelector("[data-testid=config-param][data-param=message] [data-testid=param-value]").value`); v != "hello from the browser" {
		t.Fatalf("after saving, the form shows %q", v)
	}
	it, err := srv.Tools.Get(ctx, eval[string](b, `document.querySelector("[data-testid=tool-head]").id.replace("tool-head-", "")`))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := srv.Tools.Configuration(ctx, it.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st := cfg.Params["message"]; st.Mode != tools.ModeDefault || string(st.Value) != `"hello from the browser"` || it.Status != "configured" {
		t.Fatalf("stored: %+v, status %s", cfg.Params, it.Status)
	}

	// Enable (testing skipped), disable, enable again with the head's toggle.
	toggle := func(want string) {
		t.Helper()
		b.do("toggle to "+want, chromedp.Click(chromedp.CSS(`[data-testid=tool-enable-toggle]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid=tool-head][data-status=`+want+`]`)))
	}
	toggle("enabled")
	toggle("disabled")
	toggle("enabled")

	b.do("open the History tab", chromedp.Click(chromedp.CSS(`[data-testid=tab-history]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=history]`)))
	moves := eval[[]string](b, `[...document.querySelectorAll("[data-testid=history-row]")].map(r => r.dataset.from + ">" + r.dataset.to)`)
	want := []string{"disabled>enabled", "enabled>disabled", "configured>enabled", "validated>configured"}
	if len(moves) < len(want) {
		t.Fatalf("history: %v, want it to start with %v", moves, want)
	}
	for i, w := range want {
		if moves[i] != w {
			t.Fatalf("history: %v, want it to start with %v", moves, want)
		}
	}
	if txt := eval[string](b, `document.querySelector("[data-testid=history]").textContent`); !strings.Contains(txt, "admin") {
		t.Fatalf("history does not name the actor: %q", txt)
	}
	b.checkConsole()
	screenshot(t, b, "tool-history.png")
}

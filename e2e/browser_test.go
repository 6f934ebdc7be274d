// Package e2e drives a complete Toolwarden server end to end: a real headless
// chromium through chromedp, and the websocket protocol from Go (docs/architecture.md, Testing).
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/views"
)

func TestMain(m *testing.M) {
	wsClientsMain() // BenchmarkTransitionReachesDOM's websocket clients are this binary too
	mcptest.Main()  // stdio MCP servers in these tests are this binary, re-executed
	dbtest.Main(runThenCloseChromium{m})
}

// runThenCloseChromium runs the tests, then stops the chromium they shared.
type runThenCloseChromium struct{ m *testing.M }

func (r runThenCloseChromium) Run() int {
	code := r.m.Run()
	chromium.close()
	return code
}

// browserTimeout bounds each browser test as a whole, its tab's start included.
const browserTimeout = 90 * time.Second

// chromium is the one chromium process of this test binary: each browser test gets a
// browser context of its own in it (cookies, storage and cache of its own, as a fresh
// profile would give), which costs a fraction of a second of CPU where starting a
// chromium for each test cost several.
var chromium sharedChromium

type sharedChromium struct {
	mu     sync.Mutex
	ctx    context.Context // the browser's first tab, parent of the tests' contexts
	cancel func()          // stops the browser and waits for it to exit
	dir    string          // its profile and TMPDIR, removed once it has exited
}

// get returns the running browser, starting it (again, if it died) when there is none.
func (c *sharedChromium) get(t *testing.T) context.Context {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx != nil && c.ctx.Err() == nil {
		return c.ctx
	}
	c.stopLocked()
	dir, err := os.MkdirTemp("", "twchromium-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	opts := chromiumOptions(t)
	// A start can fail on a loaded machine (chromium's launcher script or its first
	// handshake timing out): tried three times before the test fails.
	tryThrice(t, "start chromium", func() error {
		profile, err := os.MkdirTemp(dir, "profile-")
		if err != nil {
			t.Fatal(err)
		}
		// Chromium leaves a folder in TMPDIR behind on every start: ours is removed
		// with the browser.
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
			append(opts, chromedp.UserDataDir(profile), chromedp.Env("TMPDIR="+dir))...)
		first, cancelStart := chromedp.NewContext(allocCtx)
		// Once: a second call would wait for a browser slot the first took.
		cancelFirst := sync.OnceFunc(cancelStart)
		// The browser lives as long as the context its first action gets: first itself,
		// stopped here only when the start takes too long.
		started := make(chan error, 1)
		go func() { started <- chromedp.Do(first) }() // starts the browser and opens its first tab
		select {
		case err = <-started:
		case <-time.After(browserTimeout):
			cancelFirst()
			err = <-started
		}
		if err != nil {
			cancelFirst()
			cancelAlloc()
			return err
		}
		c.ctx = first
		c.cancel = func() { cancelFirst(); cancelAlloc() } // the latter waits for the browser to exit
		return nil
	})
	return c.ctx
}

// tryThrice runs start until it succeeds, three times at most, and fails the test
// with what the last attempt said.
func tryThrice(t *testing.T, what string, start func() error) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		err := start()
		if err == nil {
			return
		}
		if attempt == 3 {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s (attempt %d): %v; trying again", what, attempt, err)
		time.Sleep(time.Second)
	}
}

func (c *sharedChromium) stopLocked() {
	if c.cancel != nil {
		c.cancel()
		c.ctx, c.cancel = nil, nil
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
		c.dir = ""
	}
}

func (c *sharedChromium) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopLocked()
}

// reportProblems is injected into every document before its own scripts: CSP
// violations become console errors, which the console watcher collects.
const reportProblems = `document.addEventListener("securitypolicyviolation", function (e) {
	console.error("CSP violation: " + e.violatedDirective + " blocked " + (e.blockedURI || "inline") +
		" at " + e.sourceFile + ":" + e.lineNumber);
});`

// chromiumOptions are the flags chromium runs with (docs/architecture.md, Testing), for
// the tests' shared browser and the benchmarks' own.
func chromiumOptions(t testing.TB) []chromedp.ExecAllocatorOption {
	return append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.WindowSize(1280, 900),
	)
}

// chromiumPath finds the Debian chromium binary.
func chromiumPath(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	const p = "/usr/bin/chromium"
	if _, err := os.Stat(p); err == nil {
		return p
	}
	t.Fatal("chromium not found on PATH nor at /usr/bin/chromium: install the Debian package `chromium` " +
		"(apt-get install chromium, or `make setup-test`)")
	return ""
}

// browser is one test's tab, in a browser context of its own in the shared chromium, and
// what its console reported.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	problems []string
	flushed  map[string]chan struct{}
	flushSeq int
}

// newBrowser opens a tab for the test in a browser context of its own, in the shared
// chromium (the flags docs/architecture.md, Testing, names), and starts watching its
// console for errors, exceptions and CSP violations.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	var ctx context.Context
	tryThrice(t, "open a tab in chromium", func() error {
		tab, cancelTab := chromedp.NewContext(chromium.get(t), chromedp.WithNewBrowserContext())
		// The tab lives as long as the context its first action gets (chromedp.NewContext):
		// this one, which bounds the test's use of it.
		bounded, cancelBounded := context.WithTimeout(tab, browserTimeout)
		// Each test's tab is a window of its own; headless chromium gives each window
		// the focus (TestBrowserEachTestsPageHasTheFocus checks that it still does).
		if err := chromedp.Do(bounded); err != nil { // creates the browser context, and the tab in it
			cancelBounded()
			cancelTab()
			// A browser context made for a tab that did not open is not disposed with it.
			if c := chromedp.FromContext(tab); c != nil && c.Browser != nil && c.BrowserContextID != "" {
				dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, _ = cdp.Call(dctx, c.Browser, target.DisposeBrowserContext, target.DisposeBrowserContextParams{BrowserContextID: c.BrowserContextID})
				cancel()
			}
			return err
		}
		t.Cleanup(cancelTab) // closes the tab and its browser context, and waits for that
		t.Cleanup(cancelBounded)
		ctx = bounded
		return nil
	})

	b := &browser{t: t, ctx: ctx, flushed: map[string]chan struct{}{}}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: reportProblems}); err != nil {
		t.Fatalf("install the CSP violation reporter: %v", err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			if ch, ok := b.flushed[m.Text]; ok {
				close(ch)
				delete(b.flushed, m.Text)
			} else if m.Type == chromedp.ConsoleError || m.IsException() {
				where := m.URL
				if where != "" {
					where = fmt.Sprintf(" (%s:%d)", where, m.Line+1)
				}
				b.problems = append(b.problems, m.String()+where)
			}
			b.mu.Unlock()
		}
	}()
	return b
}

// do runs actions in the tab and fails the test on an error.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS polls until the expression is truthy in the page (what names it in failures).
func (b *browser) waitJS(what, expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		// What the page showed, so that a failure in CI says why.
		shown, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.pathname + location.search + "\n" + document.body.innerText.slice(0, 3000)`))
		b.t.Fatalf("waiting until %s: %v; the page showed:\n%s", what, err, shown)
	}
}

// checkConsole fails the test if the page logged errors, threw, or violated the CSP.
// A marker message is logged first, so everything before it has been seen. expected
// are messages the test caused on purpose (a form answered 422 logs a failed load);
// each must have been logged.
func (b *browser) checkConsole(expected ...string) {
	b.t.Helper()
	b.mu.Lock()
	b.flushSeq++
	marker := "e2e-console-flush-" + strconv.Itoa(b.flushSeq)
	ch := make(chan struct{})
	b.flushed[marker] = ch
	b.mu.Unlock()
	b.do("log the console marker", chromedp.Evaluate[chromedp.Void](`console.debug(`+strconv.Quote(marker)+`)`))
	select {
	case <-ch:
	case <-b.ctx.Done():
		b.t.Fatalf("console marker never arrived: %v", b.ctx.Err())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, want := range expected {
		i := slices.IndexFunc(b.problems, func(p string) bool { return strings.Contains(p, want) })
		if i < 0 {
			b.t.Fatalf("the page did not log %q", want)
		}
		b.problems = slices.Delete(b.problems, i, i+1)
	}
	if len(b.problems) > 0 {
		b.t.Fatalf("the page reported %d console error(s), exception(s) or CSP violation(s):\n  %s",
			len(b.problems), strings.Join(b.problems, "\n  "))
	}
}

// login signs in through the form, starting from the dashboard URL (which must send
// a signed-out browser to /login), and waits for the dashboard.
func (b *browser) login(srv *webtest.Server, username, password string) {
	b.t.Helper()
	b.do("open the dashboard", chromedp.Navigate(srv.URL+"/"))
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		b.t.Fatal(err)
	}
	if !strings.HasPrefix(loc, srv.URL+"/login") {
		b.t.Fatalf("signed out, / went to %s; want the sign-in page %s/login", loc, srv.URL)
	}
	b.do("sign in",
		chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), username),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.CSS(`[data-testid=login-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=system-status]`)),
	)
}

// TestBrowserDashboardLive signs in as admin in chromium and checks that changes made
// elsewhere (another user signing in) reach the open dashboard over the websocket,
// without a reload, and that the page logs no errors or CSP violations.
func TestBrowserDashboardLive(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)

	b.waitJS(`#live-status is data-state="open"`,
		`document.querySelector("#live-status")?.dataset.state === "open"`)
	rows := eval[int](b, `document.querySelectorAll("[data-testid=activity-row]").length`)
	if rows == 0 {
		t.Fatal("the dashboard shows no activity rows; admin's own sign-in should be there")
	}
	if !eval[bool](b, `!!document.querySelector("[data-testid=signed-in-user][data-username=admin]")`) {
		t.Fatal("admin is not listed under Signed in now")
	}
	if eval[bool](b, `!!document.querySelector("[data-testid=signed-in-user][data-username=bob]")`) {
		t.Fatal("bob is listed as signed in before he signed in")
	}
	cursor := eval[string](b, `document.getElementById("ws-cursor").dataset.lastEventId`)
	before, err := strconv.ParseInt(cursor, 10, 64)
	if err != nil {
		t.Fatalf("ws-cursor data-last-event-id %q: %v", cursor, err)
	}
	b.do("mark the page", chromedp.Evaluate[chromedp.Void](`window.__noReload = 42`))

	// A change on the server, made elsewhere: bob signs in over HTTP.
	srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-1234")
	srv.Login(t, "bob", "bob-password-1234")

	b.do("wait for bob under Signed in now",
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=signed-in-user][data-username=bob]`)))
	b.waitJS(`a toast says "bob signed in"`,
		`[...document.querySelectorAll("[data-testid=toast]")].some(t => t.textContent.includes("bob signed in"))`)
	b.waitJS(`a new activity row with user.login is on top`,
		`document.querySelectorAll("[data-testid=activity-row]").length > `+strconv.Itoa(rows)+
			` && document.querySelector("[data-testid=activity-row]").textContent.includes("user.login")`)
	top := eval[string](b, `document.querySelector("[data-testid=activity-row]").textContent`)
	if !strings.Contains(top, "bob") {
		t.Errorf("the newest activity row %q does not name bob", strings.Join(strings.Fields(top), " "))
	}

	if v := eval[int](b, `window.__noReload ?? -1`); v != 42 {
		t.Fatalf("window.__noReload = %d, want 42: the page was reloaded", v)
	}
	cursor = eval[string](b, `document.getElementById("ws-cursor").dataset.lastEventId`)
	after, err := strconv.ParseInt(cursor, 10, 64)
	if err != nil {
		t.Fatalf("ws-cursor data-last-event-id %q: %v", cursor, err)
	}
	if after <= before {
		t.Fatalf("ws-cursor data-last-event-id went from %d to %d, want it to increase", before, after)
	}
	if st := eval[string](b, `document.querySelector("#live-status").dataset.state`); st != "open" {
		t.Errorf("#live-status is %q after the updates, want open", st)
	}

	// Bursts of entries arrive several to a message (web/ws.go); every one shows, in
	// order, and the list keeps its newest views.ActivityKeep rows.
	for batch := range 2 {
		entries := make([]audit.Entry, 10)
		for i := range entries {
			entries[i] = audit.Entry{Actor: audit.System, Action: "test.burst", TargetType: "test",
				TargetID: "burst-" + strconv.Itoa(batch*10+i)}
		}
		if err := db.WithTx(context.Background(), srv.Pool, func(tx pgx.Tx) error {
			_, err := audit.AppendBatch(context.Background(), tx, entries)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	b.waitJS("the burst's last entry is the top activity row",
		`document.querySelector("[data-testid=activity-row]").textContent.includes("burst-19")`)
	got := eval[string](b, `[...document.querySelectorAll("[data-testid=activity-row]")].map(r => r.textContent.match(/burst-\d+/)?.[0] ?? "other").join(" ")`)
	var want []string
	for i := 19; i > 19-views.ActivityKeep; i-- {
		want = append(want, "burst-"+strconv.Itoa(i))
	}
	if got != strings.Join(want, " ") {
		t.Errorf("activity rows %q, want the newest %d in order: %q", got, views.ActivityKeep, strings.Join(want, " "))
	}

	// Quality 100 is what makes FullScreenshot encode a PNG; below it gives a JPEG.
	shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(t.TempDir(), "dashboard.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(shot))
	if dir := os.Getenv("TOOLWARDEN_SCREENSHOT_DIR"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		keep := filepath.Join(dir, "dashboard.png")
		if err := os.WriteFile(keep, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot kept: %s", keep)
	}

	b.checkConsole()
}

// TestBrowserMobileNav checks the narrow layout: the navigation is folded behind the
// Menu button, which opens it with a click and closes it from the keyboard.
func TestBrowserMobileNav(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	b := newBrowser(t)
	b.do("emulate a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulatePortrait))
	b.login(srv, "admin", webtest.AdminPassword)

	if w := eval[int](b, `window.innerWidth`); w != 390 {
		t.Fatalf("viewport width %d, want 390", w)
	}
	b.do("the Menu button is visible", chromedp.WaitVisible(chromedp.CSS(`[data-nav-toggle]`)))
	if eval[bool](b, `document.getElementById("app-nav").checkVisibility()`) {
		t.Fatal("#app-nav is visible on a phone before the Menu button is pressed")
	}
	if got := eval[string](b, `document.querySelector("[data-nav-toggle]").getAttribute("aria-expanded")`); got != "false" {
		t.Fatalf("Menu aria-expanded = %q before opening, want false", got)
	}

	b.do("open the menu",
		chromedp.Click(chromedp.CSS(`[data-nav-toggle]`)),
		chromedp.WaitVisible(chromedp.ID("app-nav")),
	)
	if got := eval[string](b, `document.querySelector("[data-nav-toggle]").getAttribute("aria-expanded")`); got != "true" {
		t.Fatalf("Menu aria-expanded = %q after opening, want true", got)
	}
	if !eval[bool](b, `[...document.querySelectorAll("#app-nav a")].some(a => a.checkVisibility() && a.getAttribute("href") === "/")`) {
		t.Fatal("the opened menu shows no visible Dashboard link")
	}

	// Keyboard: Enter on the focused button closes it again.
	b.do("close the menu with the keyboard",
		chromedp.Focus(chromedp.CSS(`[data-nav-toggle]`)),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitNotVisible(chromedp.ID("app-nav")),
	)
	if got := eval[string](b, `document.querySelector("[data-nav-toggle]").getAttribute("aria-expanded")`); got != "false" {
		t.Fatalf("Menu aria-expanded = %q after closing, want false", got)
	}

	// Escape closes it too, and the focus goes back to the Menu button.
	b.do("open the menu again and press Escape",
		chromedp.Click(chromedp.CSS(`[data-nav-toggle]`)),
		chromedp.WaitVisible(chromedp.ID("app-nav")),
		chromedp.KeyEvent(kb.Escape),
		chromedp.WaitNotVisible(chromedp.ID("app-nav")),
	)
	if !eval[bool](b, `document.activeElement === document.querySelector("[data-nav-toggle]")`) {
		t.Fatal("after Escape the focus is not on the Menu button")
	}

	b.checkConsole()
}

// TestBrowserNarrowPagesDoNotScrollSideways: on a 375 px phone, pages with long
// unbreakable text (the audit page's checkpoint and key, the tokens table's hidden
// header, a stdio server's long arguments) fit the screen's width.
func TestBrowserNarrowPagesDoNotScrollSideways(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	ctx := context.Background()
	long := "/work/toolwarden/node_modules/@modelcontextprotocol/server-everything/dist/index.js-" + strings.Repeat("x", 60)
	sv, err := srv.Registry.CreateServer(ctx, audit.System, registry.Spec{Name: "longargs", Type: registry.TypeStdio,
		Command: "node", Args: []string{long, "stdio"}})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := srv.Auth.GetUserByName(ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := srv.Auth.CreateToken(ctx, audit.System, admin.ID, auth.NewToken{Name: "phone token"}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	b.do("emulate a phone", chromedp.EmulateViewport(375, 812, chromedp.EmulatePortrait))
	b.login(srv, "admin", webtest.AdminPassword)
	for _, path := range []string{"/audit", "/tokens", "/servers/" + sv.ID, "/tools", "/users", "/grants", "/terminals"} {
		b.do("open "+path, chromedp.Navigate(srv.URL+path), chromedp.WaitReady("main"))
		if w := eval[int](b, `document.documentElement.scrollWidth`); w > 375 {
			wide := eval[string](b, `[...document.querySelectorAll("main *")].filter(e => e.getBoundingClientRect().right > 376).slice(0, 3).map(e => e.tagName + "." + e.className).join(", ")`)
			t.Errorf("%s is %d px wide on a 375 px screen (beyond the edge: %s)", path, w, wide)
		}
		// The page starts right under the header: a short page's hidden navigation row
		// took the spare height and pushed the heading down.
		if gap := eval[int](b, `Math.round(document.querySelector("main h1, main h2").getBoundingClientRect().top - document.querySelector("header").getBoundingClientRect().bottom)`); gap > 60 {
			t.Errorf("%s: the heading starts %d px under the header on a 375 px screen", path, gap)
		}
	}
	b.checkConsole()
}

// TestBrowserMenusClose: a server card's Actions menu closes with Escape (focus back
// on its button), when another menu opens and when a click lands elsewhere.
func TestBrowserMenusClose(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	ctx := context.Background()
	var ids []string
	for _, name := range []string{"one", "two"} {
		sv, err := srv.Registry.CreateServer(ctx, audit.System, registry.Spec{Name: name, Type: registry.TypeStreamableHTTP,
			URL: "http://127.0.0.1:9/mcp"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sv.ID)
	}
	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the servers", chromedp.Navigate(srv.URL+"/servers"), chromedp.WaitVisible(chromedp.ID("server-menu-"+ids[0])))
	open := func(i int) bool { return eval[bool](b, `document.getElementById("server-menu-`+ids[i]+`").open`) }
	b.do("open the first menu", chromedp.Click(chromedp.CSS(`#server-menu-`+ids[0]+` > summary`)))
	if !open(0) {
		t.Fatal("the first menu did not open")
	}
	b.do("press Escape", chromedp.KeyEvent(kb.Escape))
	if open(0) || !eval[bool](b, `document.activeElement === document.querySelector("#server-menu-`+ids[0]+` > summary")`) {
		t.Fatal("Escape left the menu open or the focus elsewhere than its button")
	}
	b.do("open both menus in turn", chromedp.Click(chromedp.CSS(`#server-menu-`+ids[0]+` > summary`)),
		chromedp.Click(chromedp.CSS(`#server-menu-`+ids[1]+` > summary`)))
	if open(0) || !open(1) {
		t.Fatalf("after opening the second menu: first open %v, second open %v; want only the second", open(0), open(1))
	}
	b.do("click elsewhere", chromedp.Click(chromedp.CSS(`main h1`)))
	if open(1) {
		t.Fatal("a click elsewhere left the menu open")
	}
	// Delete asks first; Cancel in that dialog keeps the menu open and gives the focus
	// back to Delete.
	del := `#server-menu-` + ids[0] + ` form[action$="/delete"] button`
	b.do("open the menu and ask to delete", chromedp.Click(chromedp.CSS(`#server-menu-`+ids[0]+` > summary`)),
		chromedp.Click(chromedp.CSS(del)), chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		chromedp.Click(chromedp.CSS(`#confirm-dialog [data-dialog-close]`)), chromedp.WaitNotVisible(chromedp.ID("confirm-dialog")))
	if !open(0) || !eval[bool](b, `document.activeElement === document.querySelector(`+strconv.Quote(del)+`)`) {
		t.Fatalf("after Cancel: menu open %v, focus on %q; want the menu open and the focus on Delete", open(0),
			eval[string](b, `document.activeElement.outerHTML.slice(0, 80)`))
	}
	b.checkConsole()
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
)

// execDocCounter runs in every document before its own scripts: it numbers the
// documents the tab has loaded (window.__docNo), so a test can tell exactly how many
// navigations a click caused and that live updates caused none.
const execDocCounter = `try {
	window.__docNo = Number(sessionStorage.getItem("e2e-doc-no") || 0) + 1;
	sessionStorage.setItem("e2e-doc-no", String(window.__docNo));
} catch (e) {}`

// execWatch records, on every change of the page, what the execution page shows: the
// execution's status, the run's and the rollback's step statuses and the progress
// shown in the stepper (window.__seen, one entry per distinct state, oldest first).
// Only elements without an id are read: htmx keeps the old attributes of a swapped
// element with an id until it settles. The texts of toasts shown are kept in
// window.__toasts (a toast removes itself after six seconds, which a loaded machine
// can take to get to the check).
const execWatch = `window.__seen = []; window.__toasts = []; (() => {
	const all = sel => [...document.querySelectorAll(sel)];
	const snap = () => {
		const s = {
			status: document.querySelector("[data-testid=execution-status]")?.dataset.status ?? "",
			steps: all("[data-testid=step]").map(e => e.dataset.status),
			rollback: all("[data-testid=rollback-step]").map(e => e.dataset.status),
			progress: all("[data-testid=step-progress]").map(e => e.textContent.trim()),
		};
		const k = JSON.stringify(s);
		if (window.__lastSeen !== k) { window.__lastSeen = k; window.__seen.push(s); }
		all("[data-testid=toast]").forEach(t => { const x = t.textContent; if (!window.__toasts.includes(x)) window.__toasts.push(x); });
	};
	snap();
	new MutationObserver(snap).observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true});
})()`

// execSnapshot is one entry of window.__seen.
type execSnapshot struct {
	Status   string   `json:"status"`
	Steps    []string `json:"steps"`
	Rollback []string `json:"rollback"`
	Progress []string `json:"progress"`
}

func (s execSnapshot) String() string {
	return fmt.Sprintf("%s steps=%v rollback=%v progress=%q", s.Status, s.Steps, s.Rollback, s.Progress)
}

// execLogLine is one line of the live log as the page shows it.
type execLogLine struct {
	Kind    string `json:"kind"`
	EventID int64  `json:"id"`
	Text    string `json:"text"`
}

// execStepRank orders step statuses: a live page may only move a step forward.
var execStepRank = map[string]int{"pending": 0, "running": 1, "succeeded": 2, "failed": 2, "skipped": 2, "interrupted": 2, "compensated": 3}

// execStatusRank orders execution statuses the same way.
var execStatusRank = map[string]int{"planning": 0, "awaiting_approval": 1, "executing": 2, "success": 3, "failed": 3,
	"cancelled": 3, "expired": 3, "rolling_back": 4, "rolled_back": 5, "rollback_failed": 5}

// newExecBrowser is newBrowser with the document counter installed.
func newExecBrowser(t *testing.T) *browser {
	t.Helper()
	b := newBrowser(t)
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: execDocCounter}); err != nil {
		t.Fatalf("install the document counter: %v", err)
	}
	return b
}

// execDocNo is the number of the document the tab shows.
func (b *browser) execDocNo() int {
	b.t.Helper()
	return eval[int](b, `window.__docNo ?? 0`)
}

// execWaitDoc waits until the tab has loaded its document number n (a form post and
// its redirect being one navigation) and that document is complete. It fails at once
// when the tab went further than n.
func (b *browser) execWaitDoc(what string, n int) {
	b.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		// Evaluating while the tab navigates may fail or wait for the new document:
		// each try is bounded, and failures are tried again.
		ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.readyState === "complete" ? (window.__docNo ?? 0) : -1`))
		cancel()
		if err == nil && got == n {
			return
		}
		if err == nil && got > n {
			b.t.Fatalf("%s: the tab is at document %d, want %d: more navigations than expected", what, got, n)
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: document %d was not loaded in 20 s (last: %d, %v)", what, n, got, err)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// execWatchPage marks the document (marker survives only while there is no reload)
// and starts recording what the execution page shows.
func (b *browser) execWatchPage(marker string) {
	b.t.Helper()
	b.do("mark the page and watch it", chromedp.Evaluate[chromedp.Void](
		`window.__noReload = `+jsString(marker)+`; `+execWatch))
}

// execNoReload fails the test unless the tab still shows document n with marker.
func (b *browser) execNoReload(when string, n int, marker string) {
	b.t.Helper()
	if got := b.execDocNo(); got != n {
		b.t.Fatalf("%s: the tab is at document %d, want %d: the page navigated instead of updating live", when, got, n)
	}
	if got := eval[string](b, `String(window.__noReload ?? "")`); got != marker {
		b.t.Fatalf("%s: window.__noReload = %q, want %q: the page was reloaded", when, got, marker)
	}
}

// execSeen returns what the watcher recorded and fails the test if a step or the
// execution ever went back to an earlier status.
func (b *browser) execSeen() []execSnapshot {
	b.t.Helper()
	seen := eval[[]execSnapshot](b, `window.__seen`)
	for i := 1; i < len(seen); i++ {
		prev, cur := seen[i-1], seen[i]
		back := execStatusRank[cur.Status] < execStatusRank[prev.Status]
		for _, list := range [][2][]string{{prev.Steps, cur.Steps}, {prev.Rollback, cur.Rollback}} {
			if len(list[0]) != len(list[1]) {
				back = back || len(list[1]) < len(list[0])
				continue
			}
			for j := range list[0] {
				back = back || execStepRank[list[1][j]] < execStepRank[list[0][j]]
			}
		}
		if back {
			b.t.Errorf("the live page went backwards: from %v to %v (all: %v)", prev, cur, seen)
		}
	}
	return seen
}

// execLog is the live log's lines, in page order.
func (b *browser) execLog() []execLogLine {
	b.t.Helper()
	return eval[[]execLogLine](b, `[...document.querySelectorAll("[data-testid=log-panel] [data-testid=log-line]")].map(l =>
		({kind: l.dataset.kind, id: Number(l.dataset.eventId), text: l.querySelector(".log-text").textContent.trim()}))`)
}

// execCheckLog fails the test unless every line is there once, in event order, and
// the kinds want appear (each as often as listed, at least).
func (b *browser) execCheckLog(lines []execLogLine, want ...string) {
	b.t.Helper()
	count := map[string]int{}
	for i, l := range lines {
		count[l.Kind]++
		if i > 0 && l.EventID <= lines[i-1].EventID {
			b.t.Errorf("log line %d (%s, event %d) follows event %d: lines repeated or out of order", i, l.Kind, l.EventID, lines[i-1].EventID)
		}
	}
	need := map[string]int{}
	for _, k := range want {
		need[k]++
	}
	for k, n := range need {
		if count[k] < n {
			b.t.Errorf("the log has %d %s line(s), want at least %d; the log: %v", count[k], k, n, lines)
		}
	}
}

// execWaitLog waits until the live log has the kinds want (each as often as listed,
// at least): the router records a call's events on its own, so they may arrive after
// the execution's own event that ends it.
func (b *browser) execWaitLog(what string, want ...string) {
	b.t.Helper()
	need := map[string]int{}
	for _, k := range want {
		need[k]++
	}
	q, _ := json.Marshal(need)
	b.waitJS(what, `(need => {
		const have = {};
		document.querySelectorAll("[data-testid=log-panel] [data-testid=log-line]").forEach(l => have[l.dataset.kind] = (have[l.dataset.kind] || 0) + 1);
		return Object.entries(need).every(([k, n]) => (have[k] || 0) >= n);
	})(`+string(q)+`)`)
}

// execEndsWith fails the test unless the log's last line is of kind want: a line that
// says the execution (or its rollback) finished must follow every line of its calls,
// as it does on the page after a reload (both are in event order).
func (b *browser) execEndsWith(lines []execLogLine, want string) {
	b.t.Helper()
	if len(lines) == 0 {
		b.t.Errorf("the log is empty, want it to end with %s", want)
		return
	}
	last := lines[len(lines)-1]
	if last.Kind == want {
		return
	}
	at := slices.IndexFunc(lines, func(l execLogLine) bool { return l.Kind == want })
	var after []string
	if at >= 0 {
		for _, l := range lines[at+1:] {
			after = append(after, l.Text)
		}
	}
	b.t.Errorf("the live log does not end with its %s line: %d line(s) of the calls come after it, "+
		"so the log says it finished before its steps did: %q", want, len(after), after)
}

// execReloadLog reloads the page (document n+1) and fails the test unless the stored
// log it shows is the one the page built live: the same events, in the same order.
func (b *browser) execReloadLog(live []execLogLine, n int) {
	b.t.Helper()
	b.do("reload the page", chromedp.Reload())
	b.execWaitDoc("the reloaded page", n+1)
	stored := b.execLog()
	ids := func(ls []execLogLine) []int64 {
		out := make([]int64, len(ls))
		for i, l := range ls {
			out[i] = l.EventID
		}
		return out
	}
	if !slices.Equal(ids(live), ids(stored)) {
		b.t.Errorf("the log built live differs from the stored log:\n live:   %v\n stored: %v", live, stored)
	}
}

// execText is the whitespace-folded text of the first element sel names ("" if none).
func (b *browser) execText(sel string) string {
	b.t.Helper()
	return strings.Join(strings.Fields(eval[string](b, `document.querySelector(`+jsString(sel)+`)?.textContent ?? ""`)), " ")
}

// execStatuses is the data-status of every element testid names, in page order.
func (b *browser) execStatuses(testid string) []string {
	b.t.Helper()
	return eval[[]string](b, `[...document.querySelectorAll("[data-testid=`+testid+`]")].map(e => e.dataset.status)`)
}

func jsString(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// execPreviewStep is one step of the ActionPreview as the page shows it.
type execPreviewStep struct {
	Tool      string `json:"tool"`
	Risk      string `json:"risk"`
	Badge     string `json:"badge"`
	BadgeText string `json:"badgeText"`
	Visible   bool   `json:"visible"`
	Arguments string `json:"args"`
	Undo      string `json:"undo"`
	UndoText  string `json:"undoText"`
}

func (b *browser) execPreview(testid string) []execPreviewStep {
	b.t.Helper()
	return eval[[]execPreviewStep](b, `[...document.querySelectorAll("[data-testid=`+testid+`]")].map(s => {
		const badge = s.querySelector("[data-testid=risk-badge]");
		const undo = s.querySelector("[data-testid=step-undo]");
		return {tool: s.dataset.tool, risk: s.dataset.risk, badge: badge?.dataset.risk ?? "",
			badgeText: badge?.textContent.trim() ?? "", visible: !!badge && badge.checkVisibility(),
			args: s.querySelector("[data-testid=step-arguments]")?.textContent ?? "",
			undo: undo?.dataset.undo ?? "", undoText: undo ? undo.textContent.replace(/\s+/g, " ").trim() : ""};
	})`)
}

// execArgs decodes a preview step's arguments.
func execArgs(t *testing.T, st execPreviewStep) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(st.Arguments), &m); err != nil {
		t.Fatalf("the arguments of %s are not JSON: %q: %v", st.Tool, st.Arguments, err)
	}
	return m
}

// execTypePhrase types into the DangerZone's input (after clearing it) and reports
// whether its button is enabled and the input's aria-invalid.
func (b *browser) execTypePhrase(input, button, text string, clear bool) (enabled bool, invalid string) {
	b.t.Helper()
	if clear {
		b.do("clear the phrase", chromedp.Evaluate[chromedp.Void](`(el => { el.value = ""; el.dispatchEvent(new Event("input", {bubbles: true})) })(document.querySelector(`+jsString(input)+`))`))
	}
	b.do("type "+text, chromedp.SendKeys(chromedp.CSS(input), text))
	return eval[bool](b, `!document.querySelector(`+jsString(button)+`).disabled`),
		eval[string](b, `document.querySelector(`+jsString(input)+`).getAttribute("aria-invalid") ?? ""`)
}

var execPageURL = regexp.MustCompile(`/executions/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// execLanded checks that a plan was stored and the tab shows its page; it returns the
// execution's id.
func (b *browser) execLanded(srv *webtest.Server) string {
	b.t.Helper()
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		b.t.Fatal(err)
	}
	if !strings.HasPrefix(loc, srv.URL) || !execPageURL.MatchString(loc) {
		b.t.Fatalf("after planning the tab is at %s, want an execution's page; the page reads: %s", loc, b.execText("main"))
	}
	id := eval[string](b, `document.querySelector("[data-testid=execution-page]")?.dataset.executionId ?? ""`)
	if !strings.HasSuffix(loc, "/executions/"+id) {
		b.t.Fatalf("the page at %s is for execution %q", loc, id)
	}
	return id
}

// TestBrowserExecutionFlow drives a high-risk plan in chromium, signed in as admin: a
// prompt planned into two steps, the ActionPreview with the steps' risks, the
// DangerZone's typed phrase (the button unlocks only on the exact phrase), and then,
// without a reload, the stepper, the live log with the sleep's progress, the results
// and the success.
func TestBrowserExecutionFlow(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	enabledLiveTools(t, srv, hs, "mt", "sleep", "write-note")

	b := newExecBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)

	// 1. The prompt.
	b.do("open the new execution page", chromedp.Navigate(srv.URL+"/executions/new"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=prompt]`)))
	hints := eval[[]string](b, `[...document.querySelectorAll("[data-testid=tool-hints] code")].map(c => c.textContent.trim())`)
	if !slices.Contains(hints, "mt__sleep") || !slices.Contains(hints, "mt__write-note") {
		t.Errorf("the tools you can use: %v, want mt__sleep and mt__write-note", hints)
	}
	doc := b.execDocNo()
	const prompt = `call mt__sleep ms=5000 then call mt__write-note text="hello"`
	b.do("write the prompt and plan it",
		chromedp.SendKeys(chromedp.CSS(`[data-testid=prompt]`), prompt),
		chromedp.Click(chromedp.CSS(`[data-testid=submit-prompt]`)))
	doc++
	b.execWaitDoc("the execution's page after planning", doc)
	b.execLanded(srv)

	// 2. Awaiting approval: the preview, the DangerZone, nothing run yet.
	if got := eval[string](b, `document.querySelector("[data-testid=execution-status]")?.dataset.status ?? ""`); got != "awaiting_approval" {
		t.Fatalf("a high-risk plan's status is %q, want awaiting_approval; the page reads: %s", got, b.execText("main"))
	}
	if got := eval[string](b, `document.querySelector("[data-testid=execution-head] [data-testid=risk-badge]")?.dataset.risk ?? ""`); got != "high" {
		t.Errorf("the execution's risk badge is %q, want high", got)
	}
	if got := b.execText(`[data-testid=flash]`); !strings.Contains(got, "high risk") {
		t.Errorf("after planning the flash reads %q, want it to say the plan is high risk", got)
	}
	preview := b.execPreview("preview-step")
	if len(preview) != 2 {
		t.Fatalf("the ActionPreview shows %d steps, want 2: %+v", len(preview), preview)
	}
	for i, want := range []struct{ tool, risk, label string }{{"mt__sleep", "low", "low"}, {"mt__write-note", "high", "high"}} {
		st := preview[i]
		if st.Tool != want.tool || st.Risk != want.risk || st.Badge != want.risk || !st.Visible ||
			!strings.Contains(strings.ToLower(st.BadgeText), want.label) {
			t.Errorf("preview step %d: %+v, want %s with a visible %s risk badge", i+1, st, want.tool, want.risk)
		}
	}
	if a := execArgs(t, preview[0]); a["ms"] != float64(5000) {
		t.Errorf("preview of mt__sleep: arguments %v, want ms 5000", a)
	}
	if a := execArgs(t, preview[1]); a["text"] != "hello" {
		t.Errorf("preview of mt__write-note: arguments %v, want text hello", a)
	}
	b.do("the DangerZone is shown", chromedp.WaitVisible(chromedp.CSS(`[data-testid=danger-zone] [data-testid=danger-input]`)))
	screenshot(t, b, "execution-awaiting.png")
	if eval[bool](b, `!!document.querySelector("[data-testid=confirm-open]")`) {
		t.Error("a high-risk plan offers the medium-risk confirm dialog")
	}
	zone := eval[[]string](b, `[...document.querySelectorAll("[data-testid=danger-zone] .exec-brief li")].map(li =>
		li.querySelector("code").textContent + ":" + (li.querySelector("[data-testid=risk-badge]")?.dataset.risk ?? ""))`)
	if want := []string{"mt__sleep:low", "mt__write-note:high"}; !slices.Equal(zone, want) {
		t.Errorf("the DangerZone lists %v, want %v", zone, want)
	}
	phrase := eval[string](b, `document.querySelector("[data-testid=danger-phrase]").textContent`)
	if phrase != "mt__write-note" {
		t.Errorf("the DangerZone asks for %q, want mt__write-note (the first high-risk step's tool)", phrase)
	}
	if phrase == "" {
		t.Fatal("the DangerZone shows no phrase")
	}
	if !eval[bool](b, `document.querySelector("[data-testid=danger-confirm]").disabled`) {
		t.Error("the DangerZone's button is enabled before anything was typed")
	}
	if got := b.execStatuses("step"); !slices.Equal(got, []string{"pending", "pending"}) {
		t.Errorf("before approval the stepper shows %v, want pending, pending", got)
	}
	if got := eval[int](b, `document.querySelectorAll("[data-testid=step-result]").length`); got != 0 {
		t.Errorf("before approval %d step results are shown", got)
	}
	b.execCheckLog(b.execLog(), "plan.created", "approval.requested")

	const input, button = `[data-testid=danger-input]`, `[data-testid=danger-confirm]`
	if on, inv := b.execTypePhrase(input, button, strings.ToUpper(phrase), false); on || inv != "true" {
		t.Errorf("with %q typed the button is enabled=%v and aria-invalid=%q, want disabled and true", strings.ToUpper(phrase), on, inv)
	}
	if on, inv := b.execTypePhrase(input, button, phrase[:len(phrase)-1], true); on || inv != "true" {
		t.Errorf("with %q typed the button is enabled=%v and aria-invalid=%q, want disabled and true", phrase[:len(phrase)-1], on, inv)
	}
	if on, inv := b.execTypePhrase(input, button, phrase[len(phrase)-1:], false); !on || inv != "false" {
		t.Fatalf("with the exact phrase typed the button is enabled=%v and aria-invalid=%q, want enabled and false", on, inv)
	}
	if b.execDocNo() != doc {
		t.Fatal("typing the phrase navigated")
	}

	// 3. Approve: one navigation (the post and its redirect back), then live only.
	b.do("approve", chromedp.Click(chromedp.CSS(button)))
	doc++
	b.execWaitDoc("the execution's page after approving", doc)
	b.execWatchPage("flow")
	b.execLanded(srv)
	first := eval[execSnapshot](b, `window.__seen[0]`)
	if first.Status != "executing" {
		t.Fatalf("right after approving the page shows %v, want executing (is the sleep too short?)", first)
	}
	if got := b.execText(`[data-testid=flash]`); !strings.Contains(got, "Approved") {
		t.Errorf("after approving the flash reads %q", got)
	}
	if eval[bool](b, `!!document.querySelector("[data-testid=danger-zone]")`) {
		t.Error("the DangerZone is still shown once the plan was approved")
	}
	b.waitJS("the page is live", `document.querySelector("#live-status")?.dataset.state === "open"`)

	b.waitJS("the sleep runs with its progress in the stepper, the note waits",
		`(s => s?.dataset.status === "running" && s.getAttribute("aria-current") === "step" &&
			/slept [1-5] of 5 · [0-9]+%/.test(s.querySelector("[data-testid=step-progress]")?.textContent ?? "") &&
			document.querySelector("[data-testid=step][data-position='1']")?.dataset.status === "pending")(
			document.querySelector("[data-testid=step][data-position='0']"))`)
	b.waitJS("a progress line of the sleep in the log",
		`[...document.querySelectorAll("[data-testid=log-panel] [data-testid=log-line][data-kind='tool.output']")].some(l => /mt__sleep: slept [1-5] of 5/.test(l.textContent))`)
	b.waitJS("the execution succeeds",
		`document.querySelector("[data-testid=execution-status]")?.dataset.status === "success"`)
	b.execNoReload("after the run", doc, "flow")

	// 4. The outcome, as pushed live.
	if got := b.execStatuses("step"); !slices.Equal(got, []string{"succeeded", "succeeded"}) {
		t.Errorf("after the run the stepper shows %v, want succeeded, succeeded", got)
	}
	if got := b.execText(`[data-testid=stepper-count]`); got != "2 of 2 steps done" {
		t.Errorf("the stepper's count reads %q, want 2 of 2 steps done", got)
	}
	if n := eval[int](b, `document.querySelectorAll("[data-testid=step] [data-testid=step-duration]").length`); n != 2 {
		t.Errorf("%d finished steps show a duration, want 2", n)
	}
	results := eval[[]string](b, `[...document.querySelectorAll("[data-testid=step-result]")].map(r =>
		r.dataset.status + ":" + (r.querySelector("[data-testid=output-0]")?.textContent.trim() ?? "") + ":" + r.checkVisibility())`)
	if want := []string{"succeeded:slept:true", "succeeded:ok:true"}; !slices.Equal(results, want) {
		t.Errorf("the step results read %v, want %v", results, want)
	}
	if got := b.execText(`[data-testid=outcome]`); got != "Every step succeeded." {
		t.Errorf("the outcome reads %q", got)
	}
	if got := b.execText(`[data-testid=execution-approval]`); !strings.Contains(got, "admin") {
		t.Errorf("the approval reads %q, want it to name admin", got)
	}
	b.waitJS("a toast says the execution finished", `window.__toasts.some(t => t.includes("every step succeeded"))`)
	screenshot(t, b, "execution-success.png")
	if !eval[bool](b, `document.querySelector("[data-testid=rollback-panel]").hidden`) {
		t.Errorf("a successful execution shows a rollback panel: %s", b.execText(`[data-testid=rollback-panel]`))
	}
	if eval[bool](b, `!!document.querySelector("[data-testid=cancel-execution]")`) {
		t.Error("a finished execution still offers to cancel it")
	}

	logKinds := []string{"plan.created", "approval.requested", "approval.granted", "tool.started", "tool.started",
		"tool.output", "tool.completed", "tool.completed", "execution.success"}
	b.execWaitLog("every step's lines in the log", logKinds...)
	lines := b.execLog()
	b.execCheckLog(lines, logKinds...)
	b.execEndsWith(lines, "execution.success")
	texts := make([]string, len(lines))
	for i, l := range lines {
		texts[i] = l.Text
	}
	all := strings.Join(texts, "\n")
	t.Logf("the log:\n%s", all)
	for _, want := range []string{"Approved by admin with the typed phrase", "mt__sleep completed", "mt__write-note completed",
		"Finished: every step succeeded"} {
		if !strings.Contains(all, want) {
			t.Errorf("the log has no line with %q:\n%s", want, all)
		}
	}
	if !regexp.MustCompile(`mt__sleep: slept [1-5] of 5 \([1-5] of 5\)`).MatchString(all) {
		t.Errorf("the log has no progress line of the sleep:\n%s", all)
	}

	// 5. What the page went through, live.
	seen := b.execSeen()
	sawRunning, sawProgress := false, false
	for _, s := range seen {
		if s.Status == "executing" && slices.Equal(s.Steps, []string{"running", "pending"}) {
			sawRunning = true
			sawProgress = sawProgress || len(s.Progress) == 1
		}
	}
	if !sawRunning || !sawProgress {
		t.Errorf("the page never showed the sleep running with its progress and the note pending: %v", seen)
	}
	if last := seen[len(seen)-1]; last.Status != "success" || !slices.Equal(last.Steps, []string{"succeeded", "succeeded"}) || len(last.Progress) != 0 {
		t.Errorf("the page's last state is %v", last)
	}
	t.Logf("the page showed: %v", seen)
	screenshot(t, b, "execution-success.png")

	b.execNoReload("at the end", doc, "flow")
	b.execReloadLog(lines, doc)
	b.checkConsole()
}

// TestBrowserExecutionRollback drives a plan given as JSON that fails: the DangerZone,
// then, without a reload, the failed step and its error, the RollbackPanel arriving
// live with the undo steps; the rollback started from it, and then, live again, the
// rollback's steps, the completed steps shown undone and the rolled_back status.
func TestBrowserExecutionRollback(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	enabledLiveTools(t, srv, hs, "mt", "echo", "sleep", "fail")

	b := newExecBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)

	// 1. The plan as JSON: echo and sleep (LOW on a trusted server) then fail (HIGH, no
	// annotations); each of the first two has its undo step, the sleep's slow enough
	// to watch the rollback run.
	b.do("open the new execution page", chromedp.Navigate(srv.URL+"/executions/new"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=prompt]`)))
	if eval[bool](b, `document.querySelector("[data-testid=plan-json]").checkVisibility()`) {
		t.Error("the JSON editor is open before it was asked for")
	}
	const plan = `{"steps": [
  {"tool": "mt__echo", "arguments": {"message": "one"}},
  {"tool": "mt__sleep", "arguments": {"ms": 2500}},
  {"tool": "mt__fail", "arguments": {"message": "boom"}}],
 "rollback": [
  {"tool": "mt__echo", "arguments": {"message": "undo one"}},
  {"tool": "mt__sleep", "arguments": {"ms": 2500}}]}`
	b.do("open the JSON editor", chromedp.Click(chromedp.CSS(`.exec-plan-editor > summary`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=plan-json]`)))
	doc := b.execDocNo()
	b.do("give the plan", chromedp.SetValue(chromedp.CSS(`[data-testid=plan-json]`), plan),
		chromedp.Click(chromedp.CSS(`[data-testid=submit-plan]`)))
	doc++
	b.execWaitDoc("the execution's page after planning", doc)
	b.execLanded(srv)

	if got := eval[string](b, `document.querySelector("[data-testid=execution-status]")?.dataset.status ?? ""`); got != "awaiting_approval" {
		t.Fatalf("the plan's status is %q, want awaiting_approval; the page reads: %s", got, b.execText("main"))
	}
	preview := b.execPreview("preview-step")
	type want struct{ tool, risk, undo, undoTool string }
	wants := []want{{"mt__echo", "low", "step", "mt__echo"}, {"mt__sleep", "low", "step", "mt__sleep"}, {"mt__fail", "high", "none", ""}}
	if len(preview) != len(wants) {
		t.Fatalf("the ActionPreview shows %d steps, want %d: %+v", len(preview), len(wants), preview)
	}
	for i, w := range wants {
		st := preview[i]
		if st.Tool != w.tool || st.Risk != w.risk || st.Badge != w.risk || !st.Visible || st.Undo != w.undo ||
			!strings.Contains(st.UndoText, w.undoTool) {
			t.Errorf("preview step %d: %+v, want %s, a visible %s risk badge and undo %s %s", i+1, st, w.tool, w.risk, w.undo, w.undoTool)
		}
	}
	if !strings.Contains(preview[0].UndoText, "undo one") {
		t.Errorf("the first step's undo reads %q, want its arguments", preview[0].UndoText)
	}
	phrase := eval[string](b, `document.querySelector("[data-testid=danger-phrase]")?.textContent ?? ""`)
	if phrase != "mt__fail" {
		t.Fatalf("the DangerZone asks for %q, want mt__fail", phrase)
	}
	const input, button = `[data-testid=danger-input]`, `[data-testid=danger-confirm]`
	if on, _ := b.execTypePhrase(input, button, "mt__echo", false); on {
		t.Error("with mt__echo typed the DangerZone's button is enabled")
	}
	if on, _ := b.execTypePhrase(input, button, phrase, true); !on {
		t.Fatal("with the exact phrase typed the DangerZone's button stays disabled")
	}

	// 2. Approve (one navigation), then the failure and the RollbackPanel, live.
	b.do("approve", chromedp.Click(chromedp.CSS(button)))
	doc++
	b.execWaitDoc("the execution's page after approving", doc)
	b.execWatchPage("run")
	if first := eval[execSnapshot](b, `window.__seen[0]`); first.Status != "executing" {
		t.Fatalf("right after approving the page shows %v, want executing (is the sleep too short?)", first)
	}
	if !eval[bool](b, `document.querySelector("[data-testid=rollback-panel]").hidden`) {
		t.Fatalf("while the plan runs a rollback panel is shown: %s", b.execText(`[data-testid=rollback-panel]`))
	}
	b.waitJS("the page is live", `document.querySelector("#live-status")?.dataset.state === "open"`)
	b.waitJS("the execution fails",
		`document.querySelector("[data-testid=execution-status]")?.dataset.status === "failed"`)
	b.waitJS("the RollbackPanel arrives",
		`(p => !!p && !p.hidden && p.checkVisibility() && !!p.querySelector("[data-testid=rollback-button]"))(document.querySelector("[data-testid=rollback-panel]"))`)
	b.execNoReload("after the failure", doc, "run")

	if got := b.execStatuses("step"); !slices.Equal(got, []string{"succeeded", "succeeded", "failed"}) {
		t.Errorf("after the failure the stepper shows %v, want succeeded, succeeded, failed", got)
	}
	if got := b.execText(`[data-testid=step][data-status=failed] [data-testid=step-error]`); !strings.Contains(got, "boom") {
		t.Errorf("the failed step's error reads %q, want it to say boom", got)
	}
	if got := b.execText(`[data-testid=step][data-status=failed] [data-testid=step-status]`); got != "Failed" {
		t.Errorf("the failed step's status reads %q, want Failed", got)
	}
	if got := b.execText(`[data-testid=step-result][data-status=failed] [data-testid=result-error]`); !strings.Contains(got, "boom") {
		t.Errorf("the failed step's result reads %q, want the error with boom", got)
	}
	if got := b.execText(`[data-testid=outcome]`); !strings.Contains(got, "mt__fail") || !strings.Contains(got, "boom") {
		t.Errorf("the outcome reads %q, want the failed step and its error", got)
	}
	// The status can read failed before the execution.failed event (which brings the
	// toast) arrives: every fragment shows the execution as stored.
	b.waitJS("a toast says the execution failed", `window.__toasts.some(t => t.includes("failed") && t.includes("boom"))`)
	screenshot(t, b, "execution-failed.png")
	if got := eval[string](b, `document.querySelector("[data-testid=rollback-panel]").dataset.risk ?? ""`); got != "low" {
		t.Errorf("the rollback's risk is %q, want low (echo and sleep on a trusted server)", got)
	}
	undo := b.execPreview("rollback-plan-step")
	if len(undo) != 2 || undo[0].Tool != "mt__sleep" || undo[1].Tool != "mt__echo" || undo[0].Risk != "low" || undo[1].Risk != "low" {
		t.Fatalf("the RollbackPanel lists %+v, want the sleep's undo then the echo's (last completed first), both low", undo)
	}
	if a := execArgs(t, undo[1]); a["message"] != "undo one" {
		t.Errorf("the echo's undo step has arguments %v, want message \"undo one\"", a)
	}
	for _, absent := range []string{"rollback-confirm", "rollback-phrase-input", "rollback-problems", "rollback-nothing"} {
		if eval[bool](b, `!!document.querySelector("[data-testid=rollback-panel] [data-testid=`+absent+`]")`) {
			t.Errorf("a low-risk rollback of fully covered steps shows %s: %s", absent, b.execText(`[data-testid=rollback-panel]`))
		}
	}
	// The failed step's tool ran and answered with its own error: it may have done part
	// of its work, which no undo covers, and the panel says so.
	if got := b.execText(`[data-testid=rollback-panel] [data-testid=rollback-missing]`); !strings.Contains(got, "mt__fail") ||
		!strings.Contains(got, "may have taken effect") {
		t.Errorf("the rollback panel's steps not undone read %q, want the failed mt__fail step named as one that may have taken effect", got)
	}
	if !eval[bool](b, `(r => !r.disabled && r.checkVisibility())(document.querySelector("[data-testid=rollback-button]"))`) {
		t.Fatal("the Roll back button is not enabled and visible")
	}
	runKinds := []string{"approval.granted", "tool.started", "tool.started", "tool.started", "tool.completed", "tool.completed",
		"tool.completed", "execution.failed"}
	b.execWaitLog("every step's lines in the log", runKinds...)
	runLines := b.execLog()
	b.execCheckLog(runLines, runKinds...)
	b.execEndsWith(runLines, "execution.failed")
	runSeen := b.execSeen()
	t.Logf("the page showed: %v", runSeen)
	screenshot(t, b, "execution-failed.png")

	// 3. Roll back (one navigation), then the rollback, live.
	b.do("roll back", chromedp.Click(chromedp.CSS(`[data-testid=rollback-button]`)))
	doc++
	b.execWaitDoc("the execution's page after rolling back", doc)
	b.execWatchPage("rollback")
	if first := eval[execSnapshot](b, `window.__seen[0]`); first.Status != "rolling_back" {
		t.Fatalf("right after starting the rollback the page shows %v, want rolling_back (is the sleep too short?)", first)
	}
	if got := b.execText(`[data-testid=flash]`); !strings.Contains(got, "Rollback started") {
		t.Errorf("after rolling back the flash reads %q", got)
	}
	b.waitJS("the page is live", `document.querySelector("#live-status")?.dataset.state === "open"`)
	b.waitJS("the sleep's undo runs",
		`document.querySelector("[data-testid=rollback-step]")?.dataset.status === "running"`)
	b.waitJS("the execution is rolled back",
		`document.querySelector("[data-testid=execution-status]")?.dataset.status === "rolled_back"`)
	b.execNoReload("after the rollback", doc, "rollback")

	if got := b.execStatuses("rollback-step"); !slices.Equal(got, []string{"succeeded", "succeeded"}) {
		t.Errorf("the rollback's steps are %v, want succeeded, succeeded", got)
	}
	if got := b.execStatuses("step"); !slices.Equal(got, []string{"compensated", "compensated", "failed"}) {
		t.Errorf("after the rollback the stepper shows %v, want compensated, compensated, failed", got)
	}
	if got := b.execText(`[data-testid=step][data-position='0'] [data-testid=step-status]`); got != "Undone" {
		t.Errorf("the first step's status reads %q, want Undone", got)
	}
	rb := eval[[]string](b, `[...document.querySelectorAll("[data-testid=rollback-result]")].map(r =>
		r.dataset.status + ":" + (r.querySelector("[data-testid=output-0]")?.textContent.trim() ?? ""))`)
	slices.Sort(rb)
	if want := []string{"succeeded:Echo: undo one", "succeeded:slept"}; !slices.Equal(rb, want) {
		t.Errorf("the rollback's results read %v, want %v", rb, want)
	}
	if got := b.execText(`[data-testid=outcome]`); !strings.Contains(got, "undone") {
		t.Errorf("the outcome reads %q, want it to say the steps were undone", got)
	}
	if eval[bool](b, `!!document.querySelector("[data-testid=rollback-button]")`) {
		t.Error("a rolled back execution still offers to roll back")
	}
	// Every fragment shows the execution as stored, so the status can read rolled back
	// before the rollback.completed event (which brings the toast) arrives.
	b.waitJS("a toast says the execution was rolled back",
		`window.__toasts.some(t => t.includes("rolled back"))`)
	// Three calls ran before the rollback, and two undo steps in it.
	rbKinds := []string{"execution.failed", "rollback.started", "tool.started", "tool.started", "tool.started",
		"tool.started", "tool.started", "tool.completed", "tool.completed", "tool.completed", "tool.completed",
		"tool.completed", "rollback.completed"}
	b.execWaitLog("the rollback's lines in the log", rbKinds...)
	lines := b.execLog()
	b.execCheckLog(lines, rbKinds...)
	b.execEndsWith(lines, "rollback.completed")
	if i, j := slices.IndexFunc(lines, func(l execLogLine) bool { return l.Kind == "rollback.started" }),
		slices.IndexFunc(lines, func(l execLogLine) bool { return l.Kind == "execution.failed" }); i < j {
		t.Errorf("the log says the rollback started (line %d) before the execution failed (line %d)", i+1, j+1)
	}
	texts := make([]string, len(lines))
	for i, l := range lines {
		texts[i] = l.Text
	}
	all := strings.Join(texts, "\n")
	t.Logf("the log:\n%s", all)
	if !strings.Contains(all, "Rollback started: 2 undo steps") || !strings.Contains(all, "Rolled back") {
		t.Errorf("the log does not tell the rollback:\n%s", all)
	}

	seen := b.execSeen()
	sawUndo := false
	for _, s := range seen {
		sawUndo = sawUndo || (s.Status == "rolling_back" && len(s.Rollback) > 0 && s.Rollback[0] == "running")
	}
	if !sawUndo {
		t.Errorf("the page never showed the rollback running: %v", seen)
	}
	if last := seen[len(seen)-1]; last.Status != "rolled_back" {
		t.Errorf("the page's last state is %v", last)
	}
	t.Logf("the page showed: %v", seen)
	screenshot(t, b, "execution-rolled-back.png")

	b.execNoReload("at the end", doc, "rollback")
	b.execReloadLog(lines, doc)
	b.checkConsole()
}

// A plan is posted once however fast "Plan it" is clicked again: a double click made
// two executions, and a LOW one ran twice.
func TestBrowserPlanPostedOnce(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	enabledLiveTools(t, srv, hs, "mt", "echo")
	b := newExecBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the new execution page", chromedp.Navigate(srv.URL+"/executions/new"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=prompt]`)))
	doc := b.execDocNo()
	b.do("write the prompt", chromedp.SendKeys(chromedp.CSS(`[data-testid=prompt]`), `call mt__echo message="once"`))
	// Two clicks 80 ms apart, the second while the first post is on its way.
	_ = eval[bool](b, `(() => { const btn = document.querySelector("[data-testid=submit-prompt]");
		btn.click(); setTimeout(() => btn.click(), 80); return true; })()`)
	b.execWaitDoc("the execution's page after planning", doc+1)
	time.Sleep(500 * time.Millisecond) // a second post, had there been one, is in by now
	if n := srv.App.Count(t, `SELECT count(*) FROM executions WHERE prompt LIKE '%once%'`); n != 1 {
		t.Fatalf("executions after a double click: %d, want 1", n)
	}
}

package e2e

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
)

// An open execution page's live log keeps its newest 1,000 lines: the log
// appends, so a live message drops the oldest lines (from the start), never the
// ones it just added.
func TestBrowserExecutionLogKeepsNewest(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	enabledLiveTools(t, srv, hs, "mt", "sleep", "write-note")
	b := newExecBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the new execution page", chromedp.Navigate(srv.URL+"/executions/new"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=prompt]`)))
	doc := b.execDocNo()
	b.do("plan a high-risk execution",
		chromedp.SendKeys(chromedp.CSS(`[data-testid=prompt]`), `call mt__sleep ms=10 then call mt__write-note text="keep"`),
		chromedp.Click(chromedp.CSS(`[data-testid=submit-prompt]`)))
	b.execWaitDoc("the execution's page", doc+1)
	id := b.execLanded(srv)
	b.waitJS("the page is live", `document.querySelector("[data-live-label]")?.textContent === "Live"`)

	// 1,005 lines as live messages append them, after the page's own.
	const fake = 1005
	own := eval[int](b, `document.querySelector("ol.exec-log").children.length`)
	if eval[bool](b, `!document.querySelector("[data-testid=log-omitted]").hidden`) {
		t.Fatal("a fresh page's log says lines are not shown")
	}
	_ = eval[bool](b, `(() => { const log = document.querySelector("ol.exec-log");
		for (let i = 0; i < `+strconv.Itoa(fake)+`; i++) {
			const li = document.createElement("li");
			li.dataset.eventId = "fake-" + i; li.dataset.fake = String(i); li.textContent = "line " + i;
			log.append(li);
		}
		return true; })()`)

	// A reader scrolled up to line 500 keeps it where it was as the oldest lines go.
	const at = `(() => { const log = document.querySelector("ol.exec-log");
		return log.querySelector("[data-fake='500']").getBoundingClientRect().top - log.getBoundingClientRect().top; })()`
	_ = eval[bool](b, `(() => { const log = document.querySelector("ol.exec-log");
		log.scrollTop = log.querySelector("[data-fake='500']").offsetTop - log.firstElementChild.offsetTop; return true; })()`)
	before := eval[float64](b, at)

	// The run's events arrive as live messages, each appending its line.
	hash := eval[string](b, `document.querySelector("input[name=plan_hash]")?.value ?? ""`)
	c := srv.Login(t, "admin", webtest.AdminPassword)
	res := srv.PostForm(t, c, "/executions/"+id+"/confirm", url.Values{"phrase": {"mt__write-note"}, "plan_hash": {hash}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("confirm: HTTP %d", res.StatusCode)
	}
	b.waitJS("the execution ends", `document.querySelector("[data-testid=execution-status]")?.dataset.status === "success"`)
	b.waitJS("its last line is in", `document.querySelector("ol.exec-log")?.lastElementChild?.dataset.kind === "execution.success"`)

	type logState struct {
		Lines     int    `json:"lines"`
		FirstFake string `json:"firstFake"`
		LastFake  bool   `json:"lastFake"`
		Real      int    `json:"real"`
		Original  bool   `json:"original"`
	}
	got := eval[logState](b, `(() => { const log = document.querySelector("ol.exec-log");
		const fakes = log.querySelectorAll(":scope > [data-fake]");
		return {lines: log.children.length, firstFake: fakes[0]?.dataset.fake ?? "", lastFake: !!log.querySelector("[data-fake='`+strconv.Itoa(fake-1)+`']"),
			real: log.querySelectorAll(":scope > [data-kind]").length, original: !!log.querySelector("[data-kind='plan.created']")}; })()`)
	if got.Lines != 1000 || got.Original || got.FirstFake == "0" || !got.LastFake || got.Real == 0 {
		t.Fatalf("after the run the log holds %+v; want 1000 lines, the oldest (the plan's, the first added) gone and the newest kept", got)
	}
	if after := eval[float64](b, at); after < before-2 || after > before+2 {
		t.Errorf("line 500 moved from %.0f px to %.0f px below the log's top as older lines went", before, after)
	}
	type note struct {
		Hidden bool   `json:"hidden"`
		Count  string `json:"count"`
		Text   string `json:"text"`
	}
	gone := own + fake + got.Real - 1000
	n := eval[note](b, `(() => { const n = document.querySelector("[data-testid=log-omitted]");
		return {hidden: n.hidden, count: n.dataset.count, text: n.textContent}; })()`)
	if want := strconv.Itoa(gone) + " earlier lines are not shown."; n.Hidden || n.Count != strconv.Itoa(gone) || n.Text != want {
		t.Errorf("the log's note is %+v, want it shown saying %q", n, want)
	}
}

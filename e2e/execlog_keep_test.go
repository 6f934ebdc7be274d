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
	_ = eval[bool](b, `(() => { const log = document.querySelector("ol.exec-log");
		for (let i = 0; i < `+strconv.Itoa(fake)+`; i++) {
			const li = document.createElement("li");
			li.dataset.eventId = "fake-" + i; li.dataset.fake = String(i); li.textContent = "line " + i;
			log.append(li);
		}
		return true; })()`)

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
}

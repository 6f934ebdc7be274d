package e2e

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// TestBrowserExecutionHistoryKeepsAPage: the execution history's first page adds every
// new execution on top as it is created, and keeps a page's worth of rows (its size,
// ?limit=): a page left open used to grow without end.
func TestBrowserExecutionHistoryKeepsAPage(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "write-note")
	api := webtest.API{T: t, Srv: srv, Bearer: srv.Token(t, "admin")}

	b := newBrowser(t)
	b.login(srv, "admin", webtest.AdminPassword)
	b.do("open the history, two a page", chromedp.Navigate(srv.URL+"/executions?limit=2"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=execution-filters]`)))
	b.waitJS("the page is live", `document.querySelector("[data-live-label]")?.textContent === "Live"`)
	if got := eval[string](b, `document.getElementById("execution-rows")?.dataset.keep ?? "none"`); got != "2" {
		t.Errorf("the live rows keep %s, want 2 (the page's size)", got)
	}

	body := map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": "mt__write-note", "arguments": map[string]any{"text": "x"}}}}}
	var made []string
	for range 3 {
		var ex struct {
			ID string `json:"id"`
		}
		api.JSON(http.MethodPost, "/api/v1/executions", body, http.StatusCreated, &ex)
		made = append(made, ex.ID)
		b.waitJS("the new execution's row", `!!document.getElementById("execution-row-`+ex.ID+`")`)
	}
	if got := eval[string](b, `[...document.querySelectorAll("#execution-rows > tr")].map(r => r.dataset.executionId).join(",")`); got != made[2]+","+made[1] {
		t.Errorf("rows after three new executions: %s, want the newest two %s,%s", got, made[2], made[1])
	}
	b.checkConsole()
}

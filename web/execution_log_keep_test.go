package web_test

import (
	"net/http"
	"testing"
)

// The live log appends lines as the execution runs: the page bounds it to as many
// lines as a reload shows (handlers' execLogShown, 1,000), dropping the oldest
// (app.js trimLive, from the start), so a page left open does not grow without end.
func TestExecutionLogKeepsNewest(t *testing.T) {
	t.Parallel()
	e := xpStart(t)
	id := e.createPlan(t, e.ann, `{"steps":[{"tool":"mt__echo","arguments":{"message":"keep"}}]}`)
	doc := e.show(t, e.ann, id, http.StatusOK)
	log := doc.Find("ol#exec-log-lines-" + id + "[data-testid=log-panel]")
	if log.Length() != 1 || log.AttrOr("data-keep", "") != "1000" || log.AttrOr("data-keep-from", "") != "start" {
		t.Fatalf("the live log: data-keep %q, data-keep-from %q; want 1000 and start",
			log.AttrOr("data-keep", ""), log.AttrOr("data-keep-from", ""))
	}
}

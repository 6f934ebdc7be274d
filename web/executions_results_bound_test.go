package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// An execution whose steps return large results (of characters HTML escapes, "<>)
// shows each step's result shortened on its page and in the live fragments, both
// bounded, and later steps' results not at all; each says where the full result is. Every result was sent in full: 20 steps of 200 KiB made a 17 MB
// page and as large a fragment for every event.
func TestExecutionPageBoundsLargeResults(t *testing.T) {
	t.Parallel()
	const (
		stepShown = 64 << 10 // a step's result in the page, escaped
		allShown  = 1 << 20  // all of them
		slack     = 16 << 10 // the markup around them
	)
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt", Big: true})
	registerServer(t, srv, registry.Spec{Name: "mt", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true, Trusted: true}, "big")
	line := strings.Repeat(`"<>`, 33) + "\n" // 100 bytes, 433 escaped
	admin := svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}
	cursor := lastEventID(t, srv)
	var steps []map[string]any
	for range 20 {
		steps = append(steps, step("mt__big", map[string]any{"bytes": 2000 * len(line), "unit": line}))
	}
	body := plan(steps...)
	var ex apiExec
	admin.json(http.MethodPost, "/api/v1/executions", body, 201, &ex)
	// Waited for in the database: each GET of this execution carries 4 MB of results.
	webtest.WaitFor(t, 2*time.Minute, func() bool {
		return srv.App.Count(t, `SELECT count(*) FROM executions WHERE id = $1 AND status = 'success'`, ex.ID) == 1
	}, "the execution of 20 large reads did not succeed")
	done := waitExec(t, admin, ex.ID, "success")
	if len(done.Steps) != 20 || len(done.Steps[0].Result) < 200<<10 {
		t.Fatalf("the API does not keep the full results: %d steps, the first's %d bytes", len(done.Steps), len(done.Steps[0].Result))
	}

	// check looks at the results section of a page or fragment.
	check := func(what string, doc *goquery.Document) {
		t.Helper()
		sec := doc.Find("#exec-results-" + ex.ID)
		if sec.Length() != 1 {
			t.Fatalf("%s: no results section", what)
		}
		html, _ := goquery.OuterHtml(sec)
		if len(html) > allShown+slack {
			t.Errorf("%s: the results are %d KiB, over %d KiB", what, len(html)>>10, (allShown+slack)>>10)
		}
		var shortened, omitted int
		sec.Find("[data-testid=step-result]").Each(func(i int, s *goquery.Selection) {
			h, _ := goquery.OuterHtml(s)
			if len(h) > stepShown+slack {
				t.Errorf("%s: step %d's result is %d KiB, over %d KiB", what, i, len(h)>>10, (stepShown+slack)>>10)
			}
			note := s.Find("[data-testid=result-shortened]").Text()
			switch {
			case strings.Contains(note, "shortened:"):
				shortened++
			case strings.Contains(note, "too large to show here"):
				omitted++
			default:
				t.Errorf("%s: step %d's result says nothing of being cut: %q", what, i, note)
			}
			if note != "" && !strings.Contains(note, "GET /api/v1/executions/"+ex.ID) {
				t.Errorf("%s: step %d's note does not say where the full result is: %q", what, i, note)
			}
		})
		if shortened == 0 || omitted == 0 || shortened+omitted != 20 {
			t.Errorf("%s: %d results shortened and %d left out, want some of each of 20", what, shortened, omitted)
		}
	}
	res := srv.Get(t, admin.c, "/executions/"+ex.ID)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET the page: %d", res.StatusCode)
	}
	check("the page", page(t, res))

	// A replay from before the plan was made would hold every event's fragment at once
	// (one socket: 20 steps' events of about 1 MiB each, and 17 MB each before): past
	// wsReplayBytes the page is asked to reload instead.
	conn := wsDial(t, srv, admin.c, []string{"execution:" + ex.ID}, cursor)
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute)) // renders of 4 MB of results each, slow under load
	if _, msg, err := conn.ReadMessage(); err != nil || !strings.Contains(string(msg), "missed too many live updates") {
		t.Errorf("a replay of every event of the execution: %v, first message %.300s", err, msg)
	}
	conn.Close()

	// The last event's fragment, as the socket sends it.
	var success int64
	if err := srv.Pool.QueryRow(context.Background(), `SELECT max(id) FROM events WHERE topic = $1 AND kind = 'execution.success'`,
		"execution:"+ex.ID).Scan(&success); err != nil {
		t.Fatal(err)
	}
	conn = wsDial(t, srv, admin.c, []string{"execution:" + ex.ID}, success-1)
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute)) // renders of 4 MB of results each, slow under load
	_, msg, err := conn.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	if len(msg) > allShown+4*slack {
		t.Errorf("the last live fragment is %d KiB", len(msg)>>10)
	}
	last, err := goquery.NewDocumentFromReader(strings.NewReader(string(msg)))
	if err != nil {
		t.Fatal(err)
	}
	if last.Find("[data-testid=log-line][data-kind='execution.success']").Length() != 1 {
		t.Fatalf("the fragment sent is not the execution's success: %.300s", msg)
	}
	check("the last fragment", last)
}

package web_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// A tool's title and description are the server's to choose and are stored whole; the
// pages show a bounded part of them, and a server's page a bounded number of its tools.
func TestToolTextAndServerToolsBounded(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)

	// 100 KB of description and 2 KB of title, in two-byte runes.
	wordy := mcptest.StartHTTP(t, &mcptest.Options{Name: "wordy"})
	wordy.Server().SetTool(mcptest.ToolSpec{Name: "long", Title: strings.Repeat("т", 1000), Description: strings.Repeat("ж", 50_000)})
	srv.RegisterServer(t, registry.Spec{Name: "wordy", Type: registry.TypeStreamableHTTP, URL: wordy.URL(), Enabled: true, Trusted: true})
	tg := srv.App.Settled(t, "wordy__long")
	id := tg.ID

	// 145 generated tools and the 5 default ones.
	many := mcptest.StartHTTP(t, &mcptest.Options{Name: "many", Generated: 145})
	srv.RegisterServer(t, registry.Spec{Name: "many", Type: registry.TypeStreamableHTTP, URL: many.URL(), Enabled: true, Trusted: true})
	var manyID string
	webtest.WaitFor(t, 30*time.Second, func() bool {
		var n int
		if err := srv.Pool.QueryRow(t.Context(), `SELECT s.id, count(t.id) FROM mcp_servers s JOIN mcp_tools t ON t.server_id = s.id
			WHERE s.name = 'many' GROUP BY s.id`).Scan(&manyID, &n); err != nil {
			return false
		}
		return n == 150
	}, "server many never listed 150 tools")

	get := func(path string) string {
		t.Helper()
		resp := srv.Get(t, admin, path)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		return string(b)
	}
	atMost := func(where, text, r string, max int) {
		t.Helper()
		if n := strings.Count(text, r); n == 0 || n > max {
			t.Errorf("%s shows %d %q, want 1 to %d", where, n, r, max)
		}
	}

	list := get("/tools?server=wordy")
	atMost("the /tools card's description", list, "ж", 2000)
	atMost("the /tools card's title", list, "т", 200)

	page := get("/tools/" + id)
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	head, _ := doc.Find(`[data-testid="tool-head"]`).Html()
	atMost("the tool page's head", head, "т", 200)
	desc := doc.Find(`[data-testid="tool-description"]`).Text()
	atMost("the tool page's description", desc, "ж", 20_000)
	if !strings.Contains(page, "Description cut: 50000 characters") {
		t.Errorf("the tool page does not say its description was cut")
	}
	// Validation findings quote a few dozen characters of it too.
	atMost("the tool page", page, "ж", 20_100)

	sv := get("/servers/" + tg.ServerID)
	atMost("the server page's tool row", sv, "ж", 2000)

	sv = get("/servers/" + manyID)
	doc, err = goquery.NewDocumentFromReader(strings.NewReader(sv))
	if err != nil {
		t.Fatal(err)
	}
	if n := doc.Find(`[data-testid="tool-row"]`).Length(); n != 100 {
		t.Errorf("the server page lists %d tools, want 100", n)
	}
	all := doc.Find(`a[data-testid="server-tools-all"]`)
	if href, _ := all.Attr("href"); href != "/tools?server="+manyID || !strings.Contains(all.Text(), "All 150 tools") {
		t.Errorf("the server page's link to the rest is %q (%q), want /tools?server=%s, All 150 tools", href, all.Text(), manyID)
	}
}

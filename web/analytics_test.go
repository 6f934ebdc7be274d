package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// /analytics and GET /api/v1/analytics after real calls through the router: the
// answer has the shape docs/api.md gives, the page shows the tools and charts, bad
// periods are refused naming the field, and an auditor may read it.
func TestAnalytics(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	liveServer(t, srv, "mt", true, "echo", "fail")
	api := svClient{t: t, srv: srv, bearer: svToken(t, srv, "admin")}
	for range 3 {
		api.json(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "mt__echo", "arguments": map[string]any{"message": "hi"}}, 200, nil)
	}
	api.do(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "mt__fail", "arguments": map[string]any{}})

	var r struct {
		Total struct {
			Calls, Errors int64
		} `json:"total"`
		TopTools []struct {
			Key, Name     string
			Calls, Errors int64
			P50MS         *float64 `json:"p50_ms"`
		} `json:"top_tools"`
		Days []struct{ Key string } `json:"days"`
	}
	webtest.WaitFor(t, 10*time.Second, func() bool { // LOW calls' records commit asynchronously
		api.json(http.MethodGet, "/api/v1/analytics?days=7", nil, 200, &r)
		return r.Total.Calls == 4
	}, "the calls in the analytics")
	if r.Total.Errors != 1 || len(r.TopTools) != 2 || r.TopTools[0].Name != "mt__echo" || r.TopTools[0].Calls != 3 ||
		r.TopTools[0].P50MS == nil || len(r.Days) != 7 {
		t.Fatalf("analytics: %+v", r)
	}
	for _, c := range []struct{ query, field string }{{"days=0", "days"}, {"days=x", "days"}, {"from=yesterday&to=2026-01-01T00:00:00Z", "from"},
		{"from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z", "to"}} {
		if status, raw := api.do(http.MethodGet, "/api/v1/analytics?"+c.query, nil); status != 400 || !strings.Contains(string(raw), `"path":"`+c.field+`"`) {
			t.Errorf("?%s: %d %s, want 400 naming %s", c.query, status, raw, c.field)
		}
	}

	srv.CreateUser(t, "audrey", auth.RoleAuditor, "audrey-password-1")
	page := body(t, srv.Get(t, srv.Login(t, "audrey", "audrey-password-1"), "/analytics?days=30"))
	for _, want := range []string{`data-testid="analytics-tools"`, "mt__<wbr>echo", `data-testid="analytics-calls-chart"`, "<svg", `aria-current="true" data-testid="range-30"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

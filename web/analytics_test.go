package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// /analytics and GET /api/v1/analytics after real calls through the router: the
// answer has the shape docs/api.md gives, the page shows the tools and charts, bad
// periods are refused naming the field, and an auditor may read it.
func TestAnalytics(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	api := someCalls(t, srv)
	// A plan admin asks for with a token and approves in a browser session: an
	// approval wait for server un, for admin and for today.
	admin := svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}
	var ex apiExec
	api.json(http.MethodPost, "/api/v1/executions", plan(step("un__echo", map[string]any{"message": "m"})), 201, &ex)
	if ex.Status != "awaiting_approval" {
		t.Fatalf("the plan: %+v", ex)
	}
	admin.json(http.MethodPost, "/api/v1/executions/"+ex.ID+"/confirm", map[string]any{"plan_hash": ex.PlanHash}, 200, nil)
	waitExec(t, api, ex.ID, "success")

	var r struct {
		Total struct {
			Calls, Errors int64
		} `json:"total"`
		TopTools []struct {
			Key, Name     string
			Calls, Errors int64
			P50MS         *float64 `json:"p50_ms"`
		} `json:"top_tools"`
		Servers []groupRow `json:"servers"`
		Users   []groupRow `json:"users"`
		Days    []groupRow `json:"days"`
	}
	webtest.WaitFor(t, 10*time.Second, func() bool { // LOW calls' records commit asynchronously
		api.json(http.MethodGet, "/api/v1/analytics?days=7", nil, 200, &r)
		return r.Total.Calls == 5
	}, "the calls in the analytics")
	if r.Total.Errors != 1 || len(r.TopTools) != 3 || r.TopTools[0].Name != "mt__echo" || r.TopTools[0].Calls != 3 ||
		r.TopTools[0].P50MS == nil || len(r.Days) != 7 {
		t.Fatalf("analytics: %+v", r)
	}
	// Every server, user and day row has its approval waits: one approval (so p50 =
	// p95) for un, admin and today; none (null) for mt and the other days.
	one := func(what string, g groupRow) {
		t.Helper()
		if g.Approvals == nil || *g.Approvals != 1 || g.P50 == nil || g.P95 == nil || *g.P50 != *g.P95 || *g.P50 < 0 || *g.P50 > 60 {
			t.Errorf("%s: %s", what, g)
		}
	}
	none := func(what string, g groupRow) {
		t.Helper()
		if g.Approvals == nil || *g.Approvals != 0 || g.P50 != nil || g.P95 != nil || !g.has50 || !g.has95 {
			t.Errorf("%s: %s, want 0 approvals and null waits", what, g)
		}
	}
	bySrv := map[string]groupRow{}
	for _, g := range r.Servers {
		bySrv[g.Name] = g
	}
	if len(r.Servers) != 2 || len(r.Users) != 1 || r.Users[0].Name != "admin" {
		t.Fatalf("servers %v users %v", r.Servers, r.Users)
	}
	one("server un", bySrv["un"])
	none("server mt", bySrv["mt"])
	one("user admin", r.Users[0])
	one("today", r.Days[6])
	for _, d := range r.Days[:6] {
		none("day "+d.Name, d)
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
	// The servers, people and days tables show approvals and waits; un's one approval.
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ table, name, approvals string }{{"analytics-servers", "un", "1"}, {"analytics-servers", "mt", "0"},
		{"analytics-users", "admin", "1"}, {"analytics-days", r.Days[6].Name, "1"}, {"analytics-days", r.Days[0].Name, "0"}} {
		tr := doc.Find(`[data-testid="` + c.table + `"] tbody tr`).FilterFunction(func(_ int, s *goquery.Selection) bool {
			return strings.TrimSpace(s.Find("td").First().Text()) == c.name
		})
		if tr.Length() != 1 || strings.TrimSpace(tr.Find(`[data-testid="approvals"]`).Text()) != c.approvals ||
			(c.approvals == "1") == (strings.TrimSpace(tr.Find(`[data-testid="wait-p50"]`).Text()) == "—") {
			t.Errorf("%s row %s: %q, want %s approvals", c.table, c.name, strings.Join(strings.Fields(tr.Text()), " "), c.approvals)
		}
	}
	if doc.Find(`[data-testid="analytics-tools"] [data-testid="approvals"]`).Length() != 0 {
		t.Error("the tools table has approval columns; a tool's waits are in the approval wait table")
	}
}

// groupRow is a server's, user's or day's row of GET /api/v1/analytics with its
// approval waits; has50 and has95 say the fields were there (null counts).
type groupRow struct {
	Key, Name    string
	Calls        int64
	Approvals    *int64
	P50, P95     *float64
	has50, has95 bool
}

func (g *groupRow) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	var v struct {
		Key, Name string
		Calls     int64
		Approvals *int64   `json:"approvals"`
		P50       *float64 `json:"approval_p50_seconds"`
		P95       *float64 `json:"approval_p95_seconds"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	_, g.has50 = raw["approval_p50_seconds"]
	_, g.has95 = raw["approval_p95_seconds"]
	g.Key, g.Name, g.Calls, g.Approvals, g.P50, g.P95 = v.Key, v.Name, v.Calls, v.Approvals, v.P50, v.P95
	return nil
}

func (g groupRow) String() string {
	f := func(p *float64) string {
		if p == nil {
			return "null"
		}
		return strconv.FormatFloat(*p, 'g', -1, 64)
	}
	a := "absent"
	if g.Approvals != nil {
		a = strconv.FormatInt(*g.Approvals, 10)
	}
	return fmt.Sprintf("%s (%d calls): approvals %s, p50 %s, p95 %s", g.Name, g.Calls, a, f(g.P50), f(g.P95))
}

// someCalls registers a trusted server mt (echo, fail) and an untrusted un (its echo is
// MEDIUM) and makes, with admin's token, three calls of mt__echo, one of mt__fail (an
// error result: a call that ran and failed) and one of un__echo, which the router
// refuses (MEDIUM, no approval: it never ran). It returns the token's client.
func someCalls(t *testing.T, srv *webtest.Server) svClient {
	t.Helper()
	liveServer(t, srv, "mt", true, "echo", "fail")
	liveServer(t, srv, "un", false, "echo")
	api := svClient{t: t, srv: srv, bearer: svToken(t, srv, "admin")}
	for range 3 {
		api.json(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "mt__echo", "arguments": map[string]any{"message": "hi"}}, 200, nil)
	}
	// fail has no annotations (MEDIUM); made LOW so the token may call it.
	api.json(http.MethodPatch, "/api/v1/tools/"+toolID(t, srv, "mt__fail"), map[string]any{"risk": "low"}, 200, nil)
	api.json(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "mt__fail", "arguments": map[string]any{}}, 200, nil)
	if status, raw := api.do(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "un__echo", "arguments": map[string]any{"message": "m"}}); status != 403 {
		t.Fatalf("un__echo without approval: %d %s", status, raw)
	}
	return api
}

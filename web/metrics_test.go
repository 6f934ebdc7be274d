package web_test

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// /metrics needs a caller allowed to read metrics: an API token (a scraper) or a
// session of an administrator or auditor. Nobody else gets it, and a scraper without
// credentials gets 401, not the sign-in page.
func TestMetricsNeedsAToken(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	const pw = "metrics-password-1"
	for _, r := range []auth.Role{auth.RoleAuditor, auth.RoleToolManager, auth.RoleToolUser, auth.RoleGuest} {
		srv.CreateUser(t, "m-"+strings.ReplaceAll(string(r), "_", "-"), r, pw)
	}
	get := func(bearer string, c *http.Client) (int, string, http.Header) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		if c == nil {
			c = srv.Client(t)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b), res.Header
	}
	st, body, h := get("", nil)
	if st != http.StatusUnauthorized || strings.Contains(body, "toolwarden_http") || !strings.Contains(h.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("anonymous: %d %q %v", st, body, h)
	}
	if st, _, _ := get("tw_not-a-real-token", nil); st != http.StatusUnauthorized {
		t.Fatalf("unknown token: %d", st)
	}
	for _, tc := range []struct {
		user string
		want int
	}{{"admin", 200}, {"m-auditor", 200}, {"m-tool-manager", 403}, {"m-tool-user", 403}, {"m-guest", 403}} {
		tok := srv.Token(t, tc.user)
		st, body, _ := get(tok, nil)
		if st != tc.want {
			t.Errorf("%s's token: %d, want %d", tc.user, st, tc.want)
		}
		if (st == 200) != strings.Contains(body, "toolwarden_http_requests_total") {
			t.Errorf("%s's token: body %.100q", tc.user, body)
		}
	}
	if st, _, _ := get("", srv.Login(t, "m-auditor", pw)); st != 200 {
		t.Errorf("auditor's session: %d", st)
	}
	if st, _, _ := get("", srv.Login(t, "m-tool-user", pw)); st != 403 {
		t.Errorf("tool user's session: %d", st)
	}
}

// The method label takes only the standard methods: Go's server accepts any token as a
// method, before anyone is authenticated, and each new label value would add series
// that stay forever (an anonymous client could grow the memory and /metrics at will).
func TestMetricsMethodLabelBounded(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	c := srv.Client(t)
	for i := range 50 {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		req, err := http.NewRequest("X"+strconv.Itoa(i)+hex.EncodeToString(b), srv.URL+"/api/v1/tools", nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+srv.Token(t, "admin"))
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %.200s", res.StatusCode, body)
	}
	allowed := map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true,
		"OPTIONS": true, "CONNECT": true, "TRACE": true, "OTHER": true}
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`method="([^"]*)"`).FindAllStringSubmatch(string(body), -1) {
		seen[m[1]] = true
	}
	for m := range seen {
		if !allowed[m] {
			t.Errorf("the method label has %q, want only the standard methods and OTHER", m)
		}
	}
	if !seen["OTHER"] {
		t.Errorf("no method=\"OTHER\" series after 50 requests of unknown methods: %v", seen)
	}
}

// /metrics counts tool calls by server and outcome (a success, the tool's own error
// result, a refusal by its code), times the calls their server saw, and says how many
// executions wait for approval. A call naming no tool is not counted: its name is the
// caller's, and would make a series of its own.
func TestMetricsToolCalls(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	api := someCalls(t, srv)
	if status, raw := api.do(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "mt__echo", "arguments": map[string]any{"message": 5}}); status != 400 {
		t.Fatalf("mt__echo with a number: %d %s", status, raw)
	}
	if status, raw := api.do(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "zz-made-up__x", "arguments": map[string]any{}}); status != 404 {
		t.Fatalf("a tool that does not exist: %d %s", status, raw)
	}
	var ex apiExec
	api.json(http.MethodPost, "/api/v1/executions", plan(step("un__echo", map[string]any{"message": "m"})), 201, &ex)

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+svToken(t, srv, "admin"))
	res, err := srv.Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	body := string(b)
	for _, want := range []string{
		`toolwarden_tool_calls_total{outcome="success",server="mt"} 3`,
		`toolwarden_tool_calls_total{outcome="tool_error",server="mt"} 1`,
		`toolwarden_tool_calls_total{outcome="invalid_arguments",server="mt"} 1`,
		`toolwarden_tool_call_duration_seconds_count{server="mt"} 4`,
		`toolwarden_executions{status="awaiting_approval"} 1`,
		`toolwarden_executions{status="executing"} 0`,
		`toolwarden_http_request_duration_seconds_bucket{method="POST",route="/api/v1/tools/call",le="60"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if !regexp.MustCompile(`toolwarden_tool_calls_total\{outcome="(forbidden|approval_required)",server="un"\} 1`).MatchString(body) {
		t.Errorf("/metrics does not count the refused MEDIUM call:\n%s", grepLines(body, "toolwarden_tool_calls_total"))
	}
	if strings.Contains(body, "zz-made-up") {
		t.Error("/metrics has a series for a tool name that names no tool")
	}
}

func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A database that does not count the executions within 2 s (a lock, an outage) leaves
// that metric out of the scrape; every other metric is served (before, the scrape
// failed whole, 500, just when the database was in trouble).
func TestMetricsWithoutTheExecutionsCount(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	tok := svToken(t, srv, "admin")
	scrape := func() (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := srv.Client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if st, body := scrape(); st != 200 || !strings.Contains(body, `toolwarden_executions{status="awaiting_approval"} 0`) {
		t.Fatalf("a scrape: %d %.300q", st, body)
	}
	ctx := t.Context()
	tx, err := srv.Owner.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE executions IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	st, body := scrape()
	if st != 200 || !strings.Contains(body, "toolwarden_http_requests_total") || strings.Contains(body, "toolwarden_executions{") {
		t.Fatalf("a scrape with the executions locked: %d, http metrics %v, executions %v", st,
			strings.Contains(body, "toolwarden_http_requests_total"), strings.Contains(body, "toolwarden_executions{"))
	}
}

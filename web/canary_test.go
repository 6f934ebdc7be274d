package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/web"
)

// canaryBearer adds an API token to every request of a real MCP client.
type canaryBearer struct{ token string }

func (b canaryBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// exportRE finds the audit page's export links.
var exportRE = regexp.MustCompile(`href="([^"]*/api/v1/audit/export[^"]*)"`)

// canaryRefused are the GET routes an administrator's session is refused on purpose
// in TestCanaryNeverLeaves, with the status each answers; every other GET route of the
// table must answer 200 there, so a leak cannot hide behind an error page.
var canaryRefused = map[string]int{
	"/login":                            http.StatusSeeOther,         // signed in already: to the dashboard
	"/favicon.ico":                      http.StatusMovedPermanently, // to the static icon
	"/terminals/:id":                    http.StatusNotFound,         // no terminal here (no built-in server); it holds no canary
	"/internal/v1/testruns/:call":       http.StatusForbidden,        // replicas only (a signed hop)
	"/internal/v1/testruns/:call/watch": http.StatusForbidden,
	"/internal/v1/testruns/:call/parts": http.StatusForbidden,
	"/api/v1/audit/export":              http.StatusBadRequest, // without its format (fetched with each as well)
}

// TestCanaryNeverLeaves saves secret values on a server (a header and its bearer
// token) and on two tools' configurations (a default, a fixed value), uses them
// (calls whose result or error echoes the configured secret: the API, a real MCP
// client session on /mcp (tools/list and tools/call), the test panel, plans that
// succeed, fail, and fail and are rolled back; a connection test of the server), then
// fetches every GET route of the route table as an administrator with real ids (every
// audit entry's page and API detail, both audit export formats and the page's export
// links, the test runs' pages, the rollback plan), requiring 200 except for the
// refusals listed in canaryRefused; the websocket's replay of every topic; what
// `toolwarden export` writes; the audit rows, the events and everything the app
// logged: no secret value appears anywhere.
func TestCanaryNeverLeaves(t *testing.T) {
	t.Parallel()
	const (
		headerVal = "canary-hdr-7Qx2Lm9Pz4Rt8Vb3"
		tokenVal  = "canary-tok-Zr5Kp8Wq2Nf6Jc1Y"
		toolVal   = "sk-canaryTOOL0w9e8r7t6y5u4i3o2p1"
	)
	canaries := []string{headerVal, tokenVal, toolVal, "canary-hdr", "canary-tok", "canaryTOOL"}
	up := httptest.NewServer(mcptest.New(&mcptest.Options{Name: "canary"}).Handler())
	t.Cleanup(up.Close)
	srv := webtest.Start(t, nil)
	ctx := context.Background()
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	api := webtest.API{T: t, Srv: srv, C: admin}
	bearer := srv.Token(t, "admin")
	tok := webtest.API{T: t, Srv: srv, Bearer: bearer}
	check := func(where, text string) {
		t.Helper()
		for _, c := range canaries {
			if i := strings.Index(text, c); i >= 0 {
				t.Errorf("%s: the secret %q appears: …%s…", where, c, text[max(0, i-80):min(len(text), i+60)])
			}
		}
	}
	masked := func(where, text string) {
		t.Helper()
		if !strings.Contains(text, "***") {
			t.Errorf("%s does not show the masked default: %.600s", where, text)
		}
	}

	sv := srv.App.RegisterServer(t, registry.Spec{Name: "canary", Type: registry.TypeStreamableHTTP, URL: up.URL + "/mcp", Enabled: true,
		Trusted: true, Headers: map[string]string{"X-Api-Key": headerVal}, AuthType: registry.AuthBearer, AuthToken: tokenVal}, "echo", "fail")
	toolID := srv.ToolID(t, "canary__echo")
	var cur struct {
		Version int `json:"configuration_version"`
	}
	raw := mustDo(t, api, http.MethodGet, "/api/v1/tools/"+toolID, nil, http.StatusOK)
	decodeInto(t, raw, &cur)
	raw = mustDo(t, api, http.MethodPatch, "/api/v1/tools/"+toolID, map[string]any{"configuration": map[string]any{"defaults": map[string]any{"message": toolVal}},
		"configuration_version": cur.Version, "reason": "canary"}, http.StatusOK)
	check("PATCH /api/v1/tools/:id", string(raw))
	// The call uses the configured secret; the server echoes it; the answer is masked.
	raw = mustDo(t, tok, http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "canary__echo", "arguments": map[string]any{}}, http.StatusOK)
	check("POST /api/v1/tools/call", string(raw))
	masked("the API call's result", string(raw))

	// A real MCP client on /mcp with the token: the list (schemas, defaults) and a call
	// that echoes the configured secret.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "canary-test", Version: "1.0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: srv.URL + web.MCPPath, HTTPClient: &http.Client{Transport: canaryBearer{bearer}}}, nil)
	if err != nil {
		t.Fatalf("MCP connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("MCP tools/list: %v", err)
	}
	raw, _ = json.Marshal(list)
	check("MCP tools/list", string(raw))
	if !strings.Contains(string(raw), `"canary__echo"`) {
		t.Fatalf("MCP tools/list does not list canary__echo: %.600s", raw)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "canary__echo", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("MCP tools/call canary__echo: %v", err)
	}
	raw, _ = json.Marshal(res)
	check("MCP tools/call", string(raw))
	if res.IsError {
		t.Fatalf("MCP tools/call canary__echo failed: %s", raw)
	}
	masked("the MCP call's result", string(raw))

	// The test panel runs the tool with its defaults; its run is fetched with the routes.
	resp := srv.PostFormHeaders(t, admin, "/tools/"+toolID+"/test", url.Values{"mode": {"form"}, "_action": {"run"}}, map[string]string{"HX-Request": "true"})
	frag := bodyString(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /tools/:id/test: %d %.600s", resp.StatusCode, frag)
	}
	check("POST /tools/:id/test", frag)
	masked("the test panel's result", frag)
	// It ended at once, so its answer is the result; the event of its end (recorded
	// with the call, a moment later) names the run on its topic.
	var panelRun string
	webtest.WaitFor(t, 10*time.Second, func() bool {
		return srv.Pool.QueryRow(ctx, `SELECT split_part(substr(topic, length('testrun:') + 1), '@', 1) FROM events
			WHERE topic LIKE 'testrun:%' ORDER BY id DESC LIMIT 1`).Scan(&panelRun) == nil
	}, "the test panel's run published nothing")
	// A connection test of the saved server (its stored header and token), as the edit
	// page's Test connection sends it; its progress page is fetched with the routes.
	form := browserForm(t, page(t, srv.Get(t, admin, "/servers/"+sv.ID+"/edit")))
	resp = srv.PostFormHeaders(t, admin, "/servers/"+sv.ID+"/test", form, map[string]string{"HX-Request": "true"})
	frag = bodyString(t, resp)
	check("POST /servers/:id/test", frag)
	testRun := testRunURL.FindStringSubmatch(frag)
	if resp.StatusCode != http.StatusOK || testRun == nil {
		t.Fatalf("POST /servers/:id/test: %d, want a running test: %.600s", resp.StatusCode, frag)
	}
	serverRun := strings.TrimPrefix(strings.SplitN(testRun[1], "?", 2)[0], "/servers/test/runs/")
	check("the connection test's result", settleTest(t, srv, admin, frag))

	// Plans with the tool, so execution pages have something to show: one that
	// succeeds, and two that fail after it, whose rollback plan undoes the echo with
	// the fail tool (its compensation), whose message is fixed to the secret.
	raw = mustDo(t, api, http.MethodPut, "/api/v1/tools/"+toolID+"/compensation", map[string]any{"undo_tool": "canary__fail",
		"argument_map": map[string]any{}}, http.StatusOK)
	check("PUT /api/v1/tools/:id/compensation", string(raw))
	failID := srv.ToolID(t, "canary__fail")
	// The fail tool's message is fixed to the secret too: its error (the message) is
	// what the failed step, its call and the rollback's reasons report.
	mustDo(t, api, http.MethodPatch, "/api/v1/tools/"+failID, map[string]any{"risk": "low", "reason": "canary: plans run at once",
		"configuration": map[string]any{"fixed": map[string]any{"message": toolVal}}}, http.StatusOK)
	admin2 := svClient{t: t, srv: srv, c: admin}
	var execIDs []string
	for _, steps := range [][]string{{"canary__echo"}, {"canary__echo", "canary__fail"}, {"canary__echo", "canary__fail"}} {
		var ex struct {
			ID string `json:"id"`
		}
		var plan []any
		for _, s := range steps {
			plan = append(plan, map[string]any{"tool": s, "arguments": map[string]any{}})
		}
		raw = mustDo(t, tok, http.MethodPost, "/api/v1/executions", map[string]any{"plan": map[string]any{"steps": plan}}, http.StatusCreated)
		decodeInto(t, raw, &ex)
		check("POST /api/v1/executions", string(raw))
		execIDs = append(execIDs, ex.ID)
	}
	waitExec(t, admin2, execIDs[0], "success")
	waitExec(t, admin2, execIDs[1], "failed")
	waitExec(t, admin2, execIDs[2], "failed")
	// The third is rolled back (by a person): its undo step, the fail tool with its
	// fixed secret, fails in turn.
	var rb struct {
		Hash string `json:"rollback_hash"`
	}
	raw = mustDo(t, api, http.MethodGet, "/api/v1/executions/"+execIDs[2]+"/rollback", nil, http.StatusOK)
	decodeInto(t, raw, &rb)
	raw = mustDo(t, api, http.MethodPost, "/api/v1/executions/"+execIDs[2]+"/rollback", map[string]any{"rollback_hash": rb.Hash}, http.StatusOK)
	check("POST /api/v1/executions/:id/rollback", string(raw))
	waitExec(t, admin2, execIDs[2], "rollback_failed")

	// Every audit entry, for the entry pages (payload, before and after): the tools'
	// configurations and their calls among them.
	var auditIDs, actions []string
	rows, err := srv.Pool.Query(ctx, `SELECT id, action FROM audit_log ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var a string
		if err := rows.Scan(&id, &a); err != nil {
			t.Fatal(err)
		}
		auditIDs = append(auditIDs, strconv.FormatInt(id, 10))
		if !slices.Contains(actions, a) {
			actions = append(actions, a)
		}
	}
	rows.Close()
	for _, a := range []string{"tool.configure", "tool.call", "tool.call.failed", "tool.compensation", "server.create", "server.test",
		"execution.failed", "execution.rollback"} {
		if !slices.Contains(actions, a) {
			t.Errorf("no %s audit entry to show (actions: %v)", a, actions)
		}
	}
	var configured string // the echo's configuration: its entry shows the default masked
	if err := srv.Pool.QueryRow(ctx, `SELECT id::text FROM audit_log WHERE action = 'tool.configure' AND target_id = $1
		ORDER BY id DESC LIMIT 1`, toolID).Scan(&configured); err != nil {
		t.Fatal(err)
	}
	var adminID string
	if err := srv.Pool.QueryRow(ctx, `SELECT id::text FROM users WHERE username = 'admin'`).Scan(&adminID); err != nil {
		t.Fatal(err)
	}

	// Every GET route, with real ids.
	type target struct {
		path string
		hx   bool // as htmx asks
		want int
	}
	ids := func(route string) []string {
		switch {
		case strings.Contains(route, "/audit/:id"):
			return auditIDs
		case strings.Contains(route, "/servers/:id"):
			return []string{sv.ID}
		case strings.Contains(route, "/tools/:id"):
			return []string{toolID}
		case strings.HasSuffix(route, "/executions/:id/rollback"):
			return execIDs[1:2] // only a failed execution (not rolled back) has a rollback plan
		case strings.Contains(route, "/executions/:id"):
			return execIDs
		case strings.Contains(route, "/users/:id"):
			return []string{adminID}
		}
		return []string{fakeID} // a refusal listed in canaryRefused, or an error below
	}
	var targets []target
	for _, r := range srv.Web.Routes() {
		if r.Method != http.MethodGet || web.BearerOnly(r.Path) || strings.HasSuffix(r.Path, "/ws") {
			continue // /mcp: the client session above; the websockets: below
		}
		want, refused := canaryRefused[r.Path]
		if !refused {
			want = http.StatusOK
		}
		for _, id := range ids(r.Path) {
			path := strings.NewReplacer(":id", id, ":call", panelRun, ":run", serverRun).Replace(r.Path)
			if strings.HasPrefix(r.Path, "/internal/") {
				path = strings.ReplaceAll(r.Path, ":call", fakeID)
			}
			if strings.Contains(path, ":") {
				t.Errorf("GET %s: no value for its parameter here; add one", r.Path)
			}
			switch r.Path {
			case "/tools/:id":
				targets = append(targets, target{path: path + "?tab=configuration", want: 200}, target{path: path + "?tab=history", want: 200})
			case "/audit/new", "/audit/verify":
				// Fragments of the audit page: without htmx they send one to the page.
				targets = append(targets, target{path: path, hx: true, want: 200})
				continue
			case "/api/v1/audit/export":
				targets = append(targets, target{path: path + "?format=csv", want: 200}, target{path: path + "?format=jsonl", want: 200})
			case "/audit", "/api/v1/audit":
				targets = append(targets, target{path: path + "?q=canary", want: 200},
					target{path: path + "?action=tool.configure", want: 200})
			}
			targets = append(targets, target{path: path, want: want})
		}
	}
	fetch := func(tg target) (int, string) {
		t.Helper()
		var res *http.Response
		if tg.hx {
			res = hxGet(t, srv, admin, tg.path)
		} else {
			res = srv.Get(t, admin, tg.path)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		check("GET "+tg.path, string(b))
		if res.StatusCode != tg.want {
			t.Errorf("GET %s: %d, want %d: %.300s", tg.path, res.StatusCode, tg.want, b)
		}
		return res.StatusCode, string(b)
	}
	ok := 0
	var exports []string
	for _, tg := range targets {
		status, body := fetch(tg)
		if status == http.StatusOK {
			ok++
		}
		if status == http.StatusOK && strings.HasSuffix(tg.path, "/audit/"+configured) && !strings.Contains(body, "********") {
			t.Errorf("GET %s: the configuration entry does not show the masked default: %.600s", tg.path, body)
		}
		if tg.path == "/audit" {
			for _, m := range exportRE.FindAllStringSubmatch(body, -1) {
				exports = append(exports, strings.ReplaceAll(m[1], "&amp;", "&"))
			}
		}
	}
	// The audit page's own export links.
	if len(exports) != 2 {
		t.Errorf("the audit page links %d exports, want CSV and JSON Lines: %v", len(exports), exports)
	}
	for _, e := range exports {
		if status, _ := fetch(target{path: e, want: 200}); status == http.StatusOK {
			ok++
		}
	}
	// Every route answered: a route added without an id to fill in shows up as an error
	// above; this guards the walk itself.
	if min := 70 + 2*len(auditIDs); ok < min {
		t.Fatalf("only %d pages answered 200, want at least %d", ok, min)
	}

	// The websocket, replaying every event of every topic from the start.
	var topics []string
	rows, err = srv.Pool.Query(ctx, `SELECT DISTINCT topic FROM events`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tp string
		if err := rows.Scan(&tp); err != nil {
			t.Fatal(err)
		}
		topics = append(topics, tp)
	}
	rows.Close()
	for _, tp := range []string{"servers", "tools", "audit", "executions", "calls", "sessions"} {
		if !slices.Contains(topics, tp) {
			topics = append(topics, tp)
		}
	}
	conn := wsDial(t, srv, admin, topics, 0)
	frames := 0
	for {
		// The replay is sent at once, then it is quiet; its first frame may wait on the
		// renders of every event under load.
		wait := 2 * time.Second
		if frames == 0 {
			wait = 30 * time.Second
		}
		_ = conn.SetReadDeadline(time.Now().Add(wait))
		_, msg, err := conn.ReadMessage()
		if err != nil {
			break
		}
		frames++
		check("websocket frame", string(msg))
	}
	if frames == 0 {
		t.Error("the websocket replayed nothing")
	}

	// What `toolwarden export` writes.
	data, err := registry.New(srv.Pool, nil, nil).Export(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("toolwarden export", string(data))

	// The audit log, the events, and everything logged.
	for what, q := range map[string]string{"audit row": `SELECT t::text FROM audit_log t`, "event": `SELECT t::text FROM events t`,
		"usage row": `SELECT t::text FROM tool_usage_logs t`} {
		rows, err := srv.Pool.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			check(what, s)
			n++
		}
		rows.Close()
		if n == 0 && what != "usage row" {
			t.Errorf("no %s to look at", what)
		}
	}
	for _, source := range []string{"api", "mcp", "test_panel", "execution"} {
		if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND payload->>'source' = $1`, source); n == 0 {
			t.Errorf("no call from %s audited", source)
		}
	}
	check("the app's log", srv.Logs.String())
	t.Logf("%d pages fetched with 200 (%d audit entries), %d websocket frames of %d topics", ok, len(auditIDs), frames, len(topics))
}

func mustDo(t *testing.T, a webtest.API, method, path string, body any, want int) []byte {
	t.Helper()
	st, raw := a.Do(method, path, body)
	if st != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, st, raw, want)
	}
	return raw
}

func decodeInto(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
}

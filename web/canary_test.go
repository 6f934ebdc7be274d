package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/web"
)

// TestCanaryNeverLeaves saves secret values on a server (a header and its bearer
// token) and on a tool's configuration, uses them (a call whose result echoes the
// configured secret), then fetches every GET route of the route table as an
// administrator (ids substituted), the JSON API, the websocket's replay of every
// event, the export (page, API and what `toolwarden export` writes), the audit rows,
// the events and everything the app logged: no secret value appears anywhere.
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
	tok := webtest.API{T: t, Srv: srv, Bearer: srv.Token(t, "admin")}
	check := func(where, text string) {
		t.Helper()
		for _, c := range canaries {
			if i := strings.Index(text, c); i >= 0 {
				t.Errorf("%s: the secret %q appears: …%s…", where, c, text[max(0, i-80):min(len(text), i+60)])
			}
		}
	}

	sv := srv.App.RegisterServer(t, registry.Spec{Name: "canary", Type: registry.TypeStreamableHTTP, URL: up.URL + "/mcp", Enabled: true,
		Trusted: true, Headers: map[string]string{"X-Api-Key": headerVal}, AuthType: registry.AuthBearer, AuthToken: tokenVal}, "echo")
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
	if !strings.Contains(string(raw), "***") {
		t.Errorf("the call's result does not show the masked default: %s", raw)
	}
	// A plan with the tool, so execution pages have something to show.
	var ex struct {
		ID string `json:"id"`
	}
	raw = mustDo(t, tok, http.MethodPost, "/api/v1/executions", map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": "canary__echo", "arguments": map[string]any{}}}}}, http.StatusCreated)
	decodeInto(t, raw, &ex)
	check("POST /api/v1/executions", string(raw))

	// Every GET route, with the ids of what was just made.
	fetched := 0
	for _, r := range srv.Web.Routes() {
		if r.Method != http.MethodGet || web.BearerOnly(r.Path) || strings.HasSuffix(r.Path, "/ws") {
			continue
		}
		path := r.Path
		switch {
		case strings.Contains(path, "/servers/:id"):
			path = strings.Replace(path, ":id", sv.ID, 1)
		case strings.Contains(path, "/tools/:id"):
			path = strings.Replace(path, ":id", toolID, 1)
		case strings.Contains(path, "/executions/:id"):
			path = strings.Replace(path, ":id", ex.ID, 1)
		}
		path = strings.NewReplacer(":id", fakeID, ":call", fakeID, ":case", fakeID).Replace(path)
		for _, q := range []string{"", "?tab=configuration", "?tab=history"} {
			if q != "" && !strings.HasPrefix(r.Path, "/tools/:id") {
				continue
			}
			res := srv.Get(t, admin, path+q)
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode >= 500 {
				t.Errorf("GET %s: %d", path+q, res.StatusCode)
			}
			check("GET "+path+q, string(b))
			fetched++
		}
	}
	if fetched < 40 {
		t.Fatalf("fetched only %d pages", fetched)
	}

	// The websocket, replaying every event from the start.
	conn := wsDial(t, srv, admin, []string{"servers", "tools", "audit", "executions", "calls", "sessions"}, 0)
	frames := 0
	for {
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second)) // the replay is sent at once; then it is quiet
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
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'tool.call'`); n == 0 {
		t.Error("the call was not audited")
	}
	check("the app's log", srv.Logs.String())
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

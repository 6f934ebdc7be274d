package web_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
)

// liveServer registers an mcptest server over streamable HTTP, waits for its tools
// and enables the named ones.
func liveServer(t testing.TB, srv *webtest.Server, name string, trusted bool, enable ...string) *mcptest.HTTPServer {
	t.Helper()
	return srv.LiveServer(t, name, trusted, enable...)
}

// registerServer registers spec, connects it and enables the named tools once validated.
func registerServer(t testing.TB, srv *webtest.Server, spec registry.Spec, enable ...string) {
	t.Helper()
	srv.RegisterServer(t, spec, enable...)
}

type callErr struct {
	Error struct {
		Code    string          `json:"code"`
		Message string          `json:"message"`
		Details json.RawMessage `json:"details"`
	} `json:"error"`
}

// POST /api/v1/tools/call answers with the shape docs/api.md gives and error codes.
func TestAPIToolCall(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Router: &router.Options{UserRate: 600}})
	hs := liveServer(t, srv, "mt", true, "echo", "write-note", "sleep")
	api := svClient{t: t, srv: srv, bearer: svToken(t, srv, "admin")}

	var ok struct {
		Content []struct {
			Type, Text string
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structured_content"`
		IsError           bool            `json:"is_error"`
		DurationMS        float64         `json:"duration_ms"`
		CallID            string          `json:"call_id"`
	}
	api.json(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "mt__echo", "arguments": map[string]any{"message": "hi"}}, 200, &ok)
	if len(ok.Content) != 1 || ok.Content[0].Text != "Echo: hi" || ok.IsError || ok.DurationMS <= 0 || ok.CallID == "" {
		t.Fatalf("echo: got %+v", ok)
	}

	srv.CreateUser(t, "gina", auth.RoleGuest, "correct horse battery")
	guest := svClient{t: t, srv: srv, bearer: svToken(t, srv, "gina")}
	api.json(http.MethodPatch, "/api/v1/tools/"+toolID(t, srv, "mt__sleep"), map[string]any{"timeout_ms": 200, "rate_limit": 600}, 200, nil)
	if status, raw := api.do(http.MethodPatch, "/api/v1/tools/"+toolID(t, srv, "mt__sleep"), map[string]any{"rate_limit": -5}); status != 400 || !strings.Contains(string(raw), `"path":"rate_limit"`) {
		t.Fatalf("bad rate_limit: got %d %s, want 400 naming rate_limit", status, raw)
	}

	for _, tc := range []struct {
		name   string
		client svClient
		body   any
		status int
		code   string
		detail string
	}{
		{"wrong type", api, map[string]any{"tool": "mt__echo", "arguments": map[string]any{"message": 5}}, 400, "invalid_arguments", `"path":"/message"`},
		{"missing", api, map[string]any{"tool": "mt__echo", "arguments": map[string]any{}}, 400, "invalid_arguments", `"kind":"missing"`},
		{"not a JSON body", api, `{"tool":`, 400, "invalid_input", ""},
		{"unknown tool", api, map[string]any{"tool": "mt__nope"}, 404, "tool_not_found", ""},
		{"not enabled", api, map[string]any{"tool": "mt__fail"}, 403, "tool_disabled", ""},
		{"guest", guest, map[string]any{"tool": "mt__echo", "arguments": map[string]any{"message": "x"}}, 403, "forbidden", ""},
		{"high risk", api, map[string]any{"tool": "mt__write-note", "arguments": map[string]any{"text": "x"}}, 403, "approval_required", `"executions":"/api/v1/executions"`},
		{"timeout", api, map[string]any{"tool": "mt__sleep", "arguments": map[string]any{"ms": 5000}}, 504, "timeout", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, raw := tc.client.do(http.MethodPost, "/api/v1/tools/call", tc.body)
			var e callErr
			if err := json.Unmarshal(raw, &e); err != nil || status != tc.status || e.Error.Code != tc.code {
				t.Fatalf("got %d %s, want %d %s", status, raw, tc.status, tc.code)
			}
			if !strings.Contains(string(e.Error.Details), tc.detail) || e.Error.Message == "" {
				t.Fatalf("got details %s, want %s and a message", e.Error.Details, tc.detail)
			}
		})
	}

	// Disabling answers once the router knows: the very next call is refused, and served
	// again right after the enable.
	echo := toolID(t, srv, "mt__echo")
	for _, on := range []bool{false, true} {
		action, status, code := "/disable", 403, "tool_disabled"
		if on {
			action, status, code = "/enable", 200, ""
		}
		api.json(http.MethodPost, "/api/v1/tools/"+echo+action, map[string]any{"reason": "test"}, 200, nil)
		got, raw := api.do(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "mt__echo", "arguments": map[string]any{"message": "x"}})
		var e callErr
		_ = json.Unmarshal(raw, &e)
		if got != status || e.Error.Code != code {
			t.Fatalf("the call right after %s: got %d %s, want %d %s", action, got, raw, status, code)
		}
	}

	// A burst past the user's limit (600 a minute, 60 at once): 429 with Retry-After.
	// The calls go 30 at a time, so that a loaded machine's slow calls still outrun the
	// refill of 10 a second (one after the other, they did not).
	var (
		mu      sync.Mutex
		limited *http.Response
		wg      sync.WaitGroup
	)
	calls := make(chan struct{}, 300)
	for range cap(calls) {
		calls <- struct{}{}
	}
	close(calls)
	for range 30 {
		wg.Go(func() {
			for range calls {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/tools/call", bytes.NewReader([]byte(`{"tool":"mt__echo","arguments":{"message":"x"}}`)))
				req.Header.Set("Authorization", "Bearer "+api.bearer)
				req.Header.Set("Content-Type", "application/json")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				res.Body.Close()
				mu.Lock()
				done := limited != nil
				if res.StatusCode == http.StatusTooManyRequests && !done {
					limited, done = res, true
				}
				mu.Unlock()
				if done {
					return
				}
			}
		})
	}
	wg.Wait()
	if limited == nil {
		t.Fatal("300 quick calls, 30 at a time, were never limited at 600 a minute")
	}
	if n, err := strconv.Atoi(limited.Header.Get("Retry-After")); err != nil || n < 1 {
		t.Fatalf("Retry-After: got %q, want whole seconds", limited.Header.Get("Retry-After"))
	}

	// The server goes away: a clear 502 naming it.
	hs.Stop()
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, raw := api.do(http.MethodPost, "/api/v1/tools/call", map[string]any{"tool": "mt__echo", "arguments": map[string]any{"message": "x"}})
		var e callErr
		_ = json.Unmarshal(raw, &e)
		if status == 502 && e.Error.Code == "upstream_error" && strings.Contains(e.Error.Message, "mt") {
			break
		}
		if status != 429 && status != 200 || time.Now().After(deadline) {
			t.Fatalf("after the server stopped: got %d %s, want 502 upstream_error", status, raw)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func toolID(t testing.TB, srv *webtest.Server, qualified string) string {
	t.Helper()
	return srv.ToolID(t, qualified)
}

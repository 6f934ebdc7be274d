package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db/dbtest"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/tools"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const password = "correct horse battery"

// The protocol eras /mcp serves: a stateful session, and the stateless protocol.
var eras = []string{"2025-11-25", "2026-07-28"}

// bearer adds the API token to every request of a real MCP client.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// connect opens a go-sdk client session to /mcp with token, at protocol version.
func connect(t *testing.T, srv *webtest.Server, token, version string) (*mcp.ClientSession, error) {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}}
	c := mcp.NewClient(&mcp.Implementation{Name: "gateway-test", Version: "1.0"}, nil)
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func mustConnect(t *testing.T, srv *webtest.Server, token, version string) *mcp.ClientSession {
	t.Helper()
	cs, err := connect(t, srv, token, version)
	if err != nil {
		t.Fatalf("connect at %s: %v", version, err)
	}
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("negotiated %s, want %s", got, version)
	}
	return cs
}

func names(t *testing.T, cs *mcp.ClientSession) ([]string, map[string]*mcp.Tool) {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := cs.InitializeResult().ProtocolVersion; v >= "2026-07-28" && res.CacheScope != "private" {
		t.Fatalf("tools/list at %s: cache scope %q, want private (each person's own list)", v, res.CacheScope)
	}
	var ns []string
	by := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		ns = append(ns, tl.Name)
		by[tl.Name] = tl
	}
	return ns, by
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// A token's user sees exactly the enabled tools they may use, by qualified name, in
// order, as stored, then the gateway's own; a LOW call returns the upstream's real
// result and is recorded as an mcp call with the client's name; bad arguments and
// unknown or forbidden tools are refused the MCP way. In both protocol eras. (Risky
// calls: hold_test.go.)
func TestToolsThroughGateway(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo", "add", "write-note") // fail and sleep stay not enabled
	srv.LiveServer(t, "other", true, "echo")
	srv.LiveServer(t, "ut", false, "echo") // untrusted: its read-only echo is MEDIUM
	tina := srv.CreateUser(t, "tina", auth.RoleToolUser, password)
	srv.CreateUser(t, "gina", auth.RoleGuest, password)
	no, yes := false, true
	if err := srv.Tools.SetPermission(ctx, audit.System, srv.ToolID(t, "other__echo"), "tina", &no); err != nil {
		t.Fatal(err)
	}
	if err := srv.Tools.SetPermission(ctx, audit.System, srv.ToolID(t, "mt__echo"), "gina", &yes); err != nil {
		t.Fatal(err)
	}
	tinaToken, ginaToken := srv.Token(t, "tina"), srv.Token(t, "gina")

	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			cs := mustConnect(t, srv, tinaToken, era)
			got, by := names(t, cs)
			if want := []string{"mt__add", "mt__echo", "mt__write-note", "ut__echo", "toolwarden__await_execution",
				"toolwarden__list_pending"}; !slices.Equal(got, want) {
				t.Fatalf("tina's tools: got %v, want %v", got, want)
			}
			echo := by["mt__echo"]
			if echo.Description != "Echoes back the message." || echo.Annotations == nil || !echo.Annotations.ReadOnlyHint ||
				echo.Annotations.Title != "Echo" || !strings.Contains(string(mustJSON(t, echo.InputSchema)), `"message"`) {
				t.Fatalf("mt__echo is not as stored: %+v %+v", echo, echo.Annotations)
			}
			if by["mt__add"].OutputSchema == nil {
				t.Fatal("mt__add lost its output schema")
			}
			guest := mustConnect(t, srv, ginaToken, era)
			if got, _ := names(t, guest); !slices.Equal(got, []string{"mt__echo", "toolwarden__await_execution", "toolwarden__list_pending"}) {
				t.Fatalf("gina's tools: got %v, want only the one she was allowed", got)
			}

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mt__echo", Arguments: map[string]any{"message": "hi " + era}})
			if err != nil || res.IsError || text(res) != "Echo: hi "+era {
				t.Fatalf("echo: %v %+v", err, res)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "mt__add", Arguments: map[string]any{"a": 2, "b": 3}})
			if err != nil || res.IsError || !strings.Contains(string(mustJSON(t, res.StructuredContent)), `"sum":5`) {
				t.Fatalf("add: %v %+v", err, res)
			}

			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "mt__echo", Arguments: map[string]any{"message": 5}})
			if err != nil || !res.IsError || !strings.Contains(text(res), "- message:") {
				t.Fatalf("a wrong type: got %v %+v, want an isError result naming message", err, res)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "mt__echo", Arguments: map[string]any{}})
			if err != nil || !res.IsError || !strings.Contains(text(res), "- message:") {
				t.Fatalf("a missing argument: got %v %+v, want an isError result naming message", err, res)
			}
			// Unknown, denied to her and disabled alike: the list hides the last two, and so
			// does the answer (it named them, and their server, to anyone guessing names).
			for _, name := range []string{"mt__nope", "other__echo", "mt__fail", "fail"} {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name})
				if err == nil {
					t.Fatalf("%s: got %+v, want a JSON-RPC error", name, res)
				}
				if !strings.Contains(err.Error(), fmt.Sprintf("unknown tool %q", name)) || strings.Contains(err.Error(), "mt__fail") && name != "mt__fail" {
					t.Errorf("%s: %v, want the answer an unknown tool gets", name, err)
				}
			}

			// Recorded as gateway calls of tina's token, in the session's conversation
			// (stateful sessions have an id).
			if err := srv.Router.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if n := srv.App.Count(t, `SELECT count(*) FROM tool_usage_logs WHERE source = 'mcp' AND user_id = $1
				AND success AND request::text LIKE $2`, tina.ID, "%hi "+era+"%"); n != 1 {
				t.Fatalf("usage rows of the echo call: %d, want 1", n)
			}
			conv := cs.ID()
			if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND actor_kind = 'token'
				AND actor_id = $1 AND payload->>'source' = 'mcp' AND coalesce(payload->>'conversation_id', '') = $2
				AND payload->>'client' = 'gateway-test 1.0' AND payload::text LIKE $3`, tina.ID, conv, "%hi "+era+"%"); n != 1 {
				t.Fatalf("audit rows of the echo call (conversation %q): %d, want 1", conv, n)
			}
			if era == eras[0] && conv == "" {
				t.Fatal("a stateful session has no id")
			}
		})
	}
}

// A parameter the tool's configuration fixes is not offered to MCP clients (the router
// adds its value and refuses another): tools/list leaves it out of the input schema and
// its required list, and a call without it runs with the fixed value.
func TestGatewayLeavesOutFixedParameters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "add")
	add := srv.ToolID(t, "mt__add")
	if _, err := srv.Tools.Update(ctx, audit.System, add, tools.Patch{Params: map[string]tools.ParamInput{
		"b": {Mode: tools.ModeFixed, Value: json.RawMessage("40")}}}); err != nil {
		t.Fatal(err)
	}
	srv.CreateUser(t, "tina", auth.RoleToolUser, password)
	token := srv.Token(t, "tina")
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			cs := mustConnect(t, srv, token, era)
			_, by := names(t, cs)
			var schema struct {
				Properties map[string]any `json:"properties"`
				Required   []string       `json:"required"`
			}
			if err := json.Unmarshal(mustJSON(t, by["mt__add"].InputSchema), &schema); err != nil {
				t.Fatal(err)
			}
			if _, ok := schema.Properties["b"]; ok || slices.Contains(schema.Required, "b") || schema.Properties["a"] == nil ||
				!slices.Contains(schema.Required, "a") {
				t.Fatalf("mt__add's schema: got %+v, want a without the fixed b", schema)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mt__add", Arguments: map[string]any{"a": 2}})
			if err != nil || res.IsError || !strings.Contains(string(mustJSON(t, res.StructuredContent)), `"sum":42`) {
				t.Fatalf("add without the fixed b: %v %+v", err, res)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// post sends an initialize to /mcp with c, adding headers.
func post(t *testing.T, srv *webtest.Server, c *http.Client, headers map[string]string) (*http.Response, string) {
	t.Helper()
	return send(t, srv, c, http.MethodPost, initialize, headers)
}

// send makes one request to /mcp as an MCP client would (JSON, accepting a stream).
func send(t *testing.T, srv *webtest.Server, c *http.Client, method, body string, headers map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if h, ok := headers["Host"]; ok {
		req.Host = h
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") && method == http.MethodGet {
		res.Body.Close() // a session's stream: it stays open
		return res, ""
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(out)
}

// Only an API token opens /mcp: none, a revoked one and a session cookie alone get
// 401 with WWW-Authenticate (never the sign-in page); a revoked token fails the next
// request of a session already open.
func TestGatewayAuthentication(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	u := srv.CreateUser(t, "tina", auth.RoleToolUser, password)

	unauthorized := func(label string, res *http.Response, body string) {
		t.Helper()
		if res.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("%s: got %d (WWW-Authenticate %q) %s, want 401 with a Bearer challenge", label, res.StatusCode,
				res.Header.Get("WWW-Authenticate"), body)
		}
	}
	res, body := post(t, srv, srv.Client(t), nil)
	unauthorized("no token", res, body)
	res, body = post(t, srv, srv.Client(t), map[string]string{"Authorization": "Bearer tw_nonsense"})
	unauthorized("an unknown token", res, body)
	res, body = post(t, srv, srv.Login(t, "tina", password), nil)
	unauthorized("a session cookie alone", res, body)
	for _, era := range eras {
		if _, err := connect(t, srv, "", era); err == nil {
			t.Fatalf("%s: a client without a token connected", era)
		}
	}

	for _, era := range eras {
		tok, info, err := srv.Auth.CreateToken(ctx, audit.System, u.ID, auth.NewToken{Name: "agent " + era})
		if err != nil {
			t.Fatal(err)
		}
		res, body = post(t, srv, srv.Client(t), map[string]string{"Authorization": "Bearer " + tok})
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: initialize with a token: got %d %s", era, res.StatusCode, body)
		}
		cs := mustConnect(t, srv, tok, era)
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mt__echo", Arguments: map[string]any{"message": "x"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Auth.RevokeToken(ctx, audit.System, info.ID, u.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mt__echo", Arguments: map[string]any{"message": "x"}}); err == nil {
			t.Fatalf("%s: a call with a revoked token went through", era)
		}
		res, body = post(t, srv, srv.Client(t), map[string]string{"Authorization": "Bearer " + tok})
		unauthorized(era+": a revoked token", res, body)
	}
}

// What MCP clients do over HTTP passes Toolwarden's own middleware: a POST without
// Origin, a session's GET stream, its DELETE. A browser's cross-site POST and a
// rebound host name are refused.
func TestGatewayTransport(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	token := map[string]string{"Authorization": "Bearer " + srv.Token(t, "admin")}
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{}
		for k, v := range token {
			h[k] = v
		}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	c := srv.Client(t)
	res, body := post(t, srv, c, token)
	session := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: got %d (session %q) %s", res.StatusCode, session, body)
	}
	in := with(map[string]string{"Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"})
	if res, body := send(t, srv, c, http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, in); res.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: got %d %s", res.StatusCode, body)
	}
	if res, body := send(t, srv, c, http.MethodGet, "", in); res.StatusCode != http.StatusOK ||
		!strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("the session's GET stream: got %d %q %s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	if res, body := send(t, srv, c, http.MethodDelete, "", in); res.StatusCode/100 != 2 {
		t.Fatalf("DELETE of the session: got %d %s", res.StatusCode, body)
	}
	if res, _ := send(t, srv, c, http.MethodPost, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, in); res.StatusCode != http.StatusNotFound {
		t.Fatalf("a request of the deleted session: got %d, want 404", res.StatusCode)
	}

	if res, body := post(t, srv, c, with(map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"})); res.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-site POST: got %d %s, want 403", res.StatusCode, body)
	}
	if res, body := post(t, srv, c, with(map[string]string{"Host": "evil.example"})); res.StatusCode != http.StatusForbidden {
		t.Fatalf("a rebound host name on a loopback address: got %d %s, want 403", res.StatusCode, body)
	}
}

// Stopping ends a session's GET stream (it would otherwise hold the HTTP server's
// drain until its deadline).
func TestShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	token := "Bearer " + srv.Token(t, "admin")
	res, body := post(t, srv, srv.Client(t), map[string]string{"Authorization": token})
	session := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: got %d %s", res.StatusCode, body)
	}
	h := map[string]string{"Authorization": token, "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}
	send(t, srv, srv.Client(t), http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", err, stream)
	}
	defer stream.Body.Close()
	ended := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, stream.Body); close(ended) }()
	srv.Web.Shutdown()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the GET stream outlived Shutdown")
	}
}

// A client that gives a progress token hears the upstream's progress through the
// gateway, in both eras.
func TestProgressReachesTheClient(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "sleep")
	token := srv.Token(t, "admin")
	for _, era := range eras {
		var mu sync.Mutex
		var got []string
		c := mcp.NewClient(&mcp.Implementation{Name: "progress-test", Version: "1.0"}, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				got = append(got, r.Params.Message)
				mu.Unlock()
			}})
		tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}}
		cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: era})
		if err != nil {
			t.Fatal(err)
		}
		p := &mcp.CallToolParams{Name: "mt__sleep", Arguments: map[string]any{"ms": 50}}
		p.SetProgressToken("p-" + era)
		res, err := cs.CallTool(context.Background(), p)
		_ = cs.Close()
		if err != nil || res.IsError || text(res) != "slept" {
			t.Fatalf("%s: sleep: %v %+v", era, err, res)
		}
		webtest.WaitFor(t, 5*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) > 0
		}, era+": no progress reached the client")
	}
}

// The caller's API token never reaches an upstream server: Toolwarden connects to
// upstreams with their own credentials only.
func TestTokenNotForwarded(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	var mu sync.Mutex
	var seen []string
	up := mcptest.New(&mcptest.Options{Name: "rec"}).Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		mu.Lock()
		for k, vs := range r.Header {
			seen = append(seen, k+": "+strings.Join(vs, ","))
		}
		seen = append(seen, string(body))
		mu.Unlock()
		up.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	srv.RegisterServer(t, registry.Spec{Name: "rec", Type: registry.TypeStreamableHTTP, URL: hs.URL + "/mcp", Enabled: true,
		Trusted: true}, "echo")
	token := srv.Token(t, "admin")
	cs := mustConnect(t, srv, token, eras[0])
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "rec__echo", Arguments: map[string]any{"message": "x"}})
	if err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	secret := strings.TrimPrefix(token, "tw_")
	for _, s := range seen {
		if strings.Contains(s, secret) {
			t.Fatalf("the upstream saw the caller's token: %s", s)
		}
	}
	if len(seen) == 0 {
		t.Fatal("the upstream saw nothing")
	}
}

// The client's name and version are the client's to choose, of any length, and every
// call's audit and usage rows keep them: what is kept is bounded, in both eras (a
// stateless request brings them anew each time).
func TestClientNameBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	token := srv.Token(t, "admin")
	name := "huge-client-" + strings.Repeat("é", 50<<10) // 100 KB
	for _, era := range eras {
		tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: strings.Repeat("9", 10<<10)}, nil).
			Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: era})
		if err != nil {
			t.Fatalf("%s: connect: %v", era, err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mt__echo", Arguments: map[string]any{"message": "big " + era}})
		_ = cs.Close()
		if err != nil || res.IsError {
			t.Fatalf("%s: echo: %v %+v", era, err, res)
		}
		if err := srv.Router.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		var client string
		if err := srv.Pool.QueryRow(ctx, `SELECT payload->>'client' FROM audit_log WHERE action = 'tool.call'
			AND payload::text LIKE $1`, "%big "+era+"%").Scan(&client); err != nil {
			t.Fatalf("%s: the call's audit row: %v", era, err)
		}
		if n := utf8.RuneCountInString(client); n > 200 || !utf8.ValidString(client) || !strings.HasPrefix(client, "huge-client-é") {
			t.Fatalf("%s: the audit row's client is %d characters (%.40q…), want the name's start, at most 200", era, n, client)
		}
	}
}

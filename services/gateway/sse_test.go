package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/gateway"
)

// connectSSE opens a go-sdk client session over the legacy SSE transport with token.
func connectSSE(t *testing.T, srv *webtest.Server, token string) (*mcp.ClientSession, error) {
	t.Helper()
	tr := &mcp.SSEClientTransport{Endpoint: srv.URL + "/sse", HTTPClient: &http.Client{Transport: bearer{token}}}
	c := mcp.NewClient(&mcp.Implementation{Name: "sse-test", Version: "1.0"}, nil)
	cs, err := c.Connect(context.Background(), tr, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// A real SSE client lists the token's user's tools and calls a LOW one through the
// router, recorded as a gateway call of that token in the session's conversation; a
// revoked token fails the session's next request.
func TestSSEToolsThroughGateway(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo", "add")
	tina := srv.CreateUser(t, "tina", auth.RoleToolUser, password)
	srv.CreateUser(t, "gina", auth.RoleGuest, password)
	yes := true
	if err := srv.Tools.SetPermission(ctx, audit.System, srv.ToolID(t, "mt__echo"), "gina", &yes); err != nil {
		t.Fatal(err)
	}
	tok, info, err := srv.Auth.CreateToken(ctx, audit.System, tina.ID, auth.NewToken{Name: "sse agent"})
	if err != nil {
		t.Fatal(err)
	}

	cs, err := connectSSE(t, srv, tok)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := names(t, cs); !slices.Equal(got, []string{"mt__add", "mt__echo", gateway.AwaitTool, gateway.PendingTool}) {
		t.Fatalf("tina's tools over SSE: got %v", got)
	}
	guest, err := connectSSE(t, srv, srv.Token(t, "gina"))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := names(t, guest); !slices.Equal(got, []string{"mt__echo", gateway.AwaitTool, gateway.PendingTool}) {
		t.Fatalf("gina's tools over SSE: got %v, want only the one she was allowed", got)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mt__echo", Arguments: map[string]any{"message": "hi sse"}})
	if err != nil || res.IsError || text(res) != "Echo: hi sse" {
		t.Fatalf("echo over SSE: %v %+v", err, res)
	}
	if err := srv.Router.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'tool.call' AND actor_kind = 'token'
		AND actor_id = $1 AND payload->>'source' = 'mcp' AND coalesce(payload->>'conversation_id', '') <> ''
		AND payload::text LIKE '%hi sse%'`, tina.ID); n != 1 {
		t.Fatalf("audit rows of the SSE echo call with a conversation: %d, want 1", n)
	}

	if _, err := srv.Auth.RevokeToken(ctx, audit.System, info.ID, tina.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mt__echo", Arguments: map[string]any{"message": "x"}}); err == nil {
		t.Fatal("a call with a revoked token went through the SSE session")
	}
}

// sseStream is a raw GET /sse: its response and the endpoint its first event named.
type sseStream struct {
	res      *http.Response
	endpoint string
	events   *bufio.Reader
}

func openSSE(t *testing.T, srv *webtest.Server, headers map[string]string) *sseStream {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if h, ok := headers["Host"]; ok {
		req.Host = h
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	s := &sseStream{res: res}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		return s
	}
	s.events = bufio.NewReader(res.Body)
	for {
		line, err := s.events.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the endpoint event: %v", err)
		}
		if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			s.endpoint = d
			return s
		}
	}
}

func postSSE(t *testing.T, srv *webtest.Server, endpoint, body string, headers map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if h, ok := headers["Host"]; ok {
		req.Host = h
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(out)
}

// Only an API token opens an SSE session (401 with a Bearer challenge otherwise); the
// session's endpoint is under /messages/ and takes only the token that opened it
// (another user's token, or another token of the same user, is refused); a session
// cookie is no credential; a rebound host name is refused.
func TestSSEAuthentication(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.CreateUser(t, "tina", auth.RoleToolUser, password)
	ginaUser := srv.CreateUser(t, "gina", auth.RoleToolUser, password)
	tina, gina := "Bearer "+srv.Token(t, "tina"), "Bearer "+srv.Token(t, "gina")

	unauthorized := func(label string, res *http.Response) {
		t.Helper()
		if res.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("%s: got %d (WWW-Authenticate %q), want 401 with a Bearer challenge", label, res.StatusCode, res.Header.Get("WWW-Authenticate"))
		}
	}
	unauthorized("GET /sse without a token", openSSE(t, srv, nil).res)
	unauthorized("GET /sse with an unknown token", openSSE(t, srv, map[string]string{"Authorization": "Bearer tw_nonsense"}).res)
	if _, err := connectSSE(t, srv, ""); err == nil {
		t.Fatal("an SSE client without a token connected")
	}
	cookie := srv.Login(t, "tina", password)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/sse", nil)
	res, err := cookie.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	unauthorized("GET /sse with a session cookie alone", res)
	if s := openSSE(t, srv, map[string]string{"Authorization": tina, "Host": "evil.example"}); s.res.StatusCode != http.StatusForbidden {
		t.Fatalf("GET /sse with a rebound host name on a loopback address: got %d, want 403", s.res.StatusCode)
	}

	s := openSSE(t, srv, map[string]string{"Authorization": tina})
	if s.res.StatusCode != http.StatusOK || !strings.HasPrefix(s.res.Header.Get("Content-Type"), "text/event-stream") ||
		!strings.HasPrefix(s.endpoint, "/messages/?sessionid=") {
		t.Fatalf("GET /sse: got %d %q, endpoint %q", s.res.StatusCode, s.res.Header.Get("Content-Type"), s.endpoint)
	}
	const ping = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	res, body := postSSE(t, srv, s.endpoint, ping, nil)
	unauthorized("POST without a token", res)
	res, body = postSSE(t, srv, s.endpoint, ping, map[string]string{"Authorization": gina})
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "opened with another API token") {
		t.Fatalf("another user's token on the session's endpoint: got %d %s, want 403", res.StatusCode, body)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM audit_log WHERE action = 'request.denied' AND result = 'denied'
		AND actor_kind = 'token' AND actor_id = $1 AND target_id LIKE '%/messages/%'`, ginaUser.ID); n != 1 {
		t.Fatalf("audited refusals of gina's post: %d, want 1", n)
	}
	res, body = postSSE(t, srv, s.endpoint, ping, map[string]string{"Authorization": "Bearer " + srv.Token(t, "tina")})
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("another token of the same user on the session's endpoint: got %d %s, want 403", res.StatusCode, body)
	}
	res, body = postSSE(t, srv, "/messages/?sessionid=NOSUCHSESSION", ping, map[string]string{"Authorization": tina})
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown session: got %d %s, want 404", res.StatusCode, body)
	}
	res, body = postSSE(t, srv, s.endpoint, ping, map[string]string{"Authorization": tina, "Host": "evil.example"})
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("a POST with a rebound host name: got %d %s, want 403", res.StatusCode, body)
	}
	res, body = postSSE(t, srv, s.endpoint, ping, map[string]string{"Authorization": tina, "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"})
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-site POST: got %d %s, want 403", res.StatusCode, body)
	}
	res, body = postSSE(t, srv, s.endpoint, ping, map[string]string{"Authorization": tina})
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("the session's own token: got %d %s, want 202", res.StatusCode, body)
	}
	// The answer comes on the stream (a ping is answered before initialization).
	for {
		line, err := s.events.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the ping's answer: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			if !strings.Contains(line, `"id":1`) || !strings.Contains(line, `"result"`) {
				t.Fatalf("the ping's answer: %s", line)
			}
			break
		}
	}
}

// Closing the gateway ends the SSE streams, and a stream opened afterwards is refused.
func TestShutdownEndsSSEStreams(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	token := "Bearer " + srv.Token(t, "admin")
	s := openSSE(t, srv, map[string]string{"Authorization": token})
	if s.res.StatusCode != http.StatusOK {
		t.Fatalf("GET /sse: %d", s.res.StatusCode)
	}
	ended := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, s.events); close(ended) }()
	srv.Web.Shutdown()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the SSE stream outlived Shutdown")
	}
	if res, _ := postSSE(t, srv, s.endpoint, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Authorization": token}); res.StatusCode != http.StatusNotFound {
		t.Fatalf("a POST to the ended session: got %d, want 404", res.StatusCode)
	}
	if after := openSSE(t, srv, map[string]string{"Authorization": token}); after.res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("GET /sse after Shutdown: got %d, want 503", after.res.StatusCode)
	}
}

// Revoking a token ends the streams it opened (an SSE session's, a stateful /mcp
// session's GET stream) at once, and leaves another token's streams open.
func TestRevokedTokenEndsStreams(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	u := srv.CreateUser(t, "tina", auth.RoleToolUser, password)
	tok, info, err := srv.Auth.CreateToken(ctx, audit.System, u.ID, auth.NewToken{Name: "streams"})
	if err != nil {
		t.Fatal(err)
	}
	other := "Bearer " + srv.Token(t, "tina")
	ends := func(body io.Reader) <-chan struct{} {
		ch := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, body); close(ch) }()
		return ch
	}
	sse := openSSE(t, srv, map[string]string{"Authorization": "Bearer " + tok})
	kept := openSSE(t, srv, map[string]string{"Authorization": other})
	res, body := post(t, srv, srv.Client(t), map[string]string{"Authorization": "Bearer " + tok})
	session := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != http.StatusOK || session == "" || sse.res.StatusCode != http.StatusOK {
		t.Fatalf("open: %d %s; sse %d", res.StatusCode, body, sse.res.StatusCode)
	}
	h := map[string]string{"Authorization": "Bearer " + tok, "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}
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
	sseEnded, getEnded, keptEnded := ends(sse.events), ends(stream.Body), ends(kept.events)

	if _, err := srv.Auth.RevokeToken(ctx, audit.System, info.ID, u.ID); err != nil {
		t.Fatal(err)
	}
	for what, ch := range map[string]<-chan struct{}{"the SSE stream": sseEnded, "the GET stream": getEnded} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s outlived its revoked token", what)
		}
	}
	select {
	case <-keptEnded:
		t.Fatal("another token's SSE stream ended too")
	case <-time.After(300 * time.Millisecond):
	}
}

// A stream outlives the time a request's body may take: an SSE session that stays open
// well past it still answers (Go would cancel the request's context at an http.Server
// ReadTimeout, and end the stream), while a body that trickles is cut at that time.
func TestStreamsOutliveTheBodyTimeout(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{BodyReadTimeout: time.Second})
	srv.LiveServer(t, "mt", true, "echo")
	srv.CreateUser(t, "tina", auth.RoleToolUser, password)
	tok := srv.Token(t, "tina")
	cs, err := connectSSE(t, srv, tok)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mt__echo", Arguments: map[string]any{"message": "still here"}})
	if err != nil || res.IsError || text(res) != "Echo: still here" {
		t.Fatalf("a call 2.5 s into an SSE session, the body timeout 1 s: %v %+v", err, res)
	}

	// A body that stops halfway is answered with an error within about the timeout.
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /api/v1/tools/call HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"name\":", tok)
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		got.Body.Close()
	}
	if err == nil && got.StatusCode < 400 || time.Since(start) > 10*time.Second {
		t.Fatalf("a body that stopped: %v %v after %s, want an error at about 1 s", got, err, time.Since(start))
	}
}

// A token that expires ends the streams it opened when it does: expiry publishes
// nothing, so the stream keeps its own time.
func TestExpiringTokenEndsStreams(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	u := srv.CreateUser(t, "tina", auth.RoleToolUser, password)
	tok, info, err := srv.Auth.CreateToken(ctx, audit.System, u.ID, auth.NewToken{Name: "short"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Pool.Exec(ctx, `UPDATE api_tokens SET expires_at = now() + interval '2 seconds' WHERE id = $1`, info.ID); err != nil {
		t.Fatal(err)
	}
	sse := openSSE(t, srv, map[string]string{"Authorization": "Bearer " + tok})
	if sse.res.StatusCode != http.StatusOK {
		t.Fatalf("open: %d", sse.res.StatusCode)
	}
	ended := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, sse.events); close(ended) }()
	select {
	case <-ended:
	case <-time.After(15 * time.Second):
		t.Fatal("the SSE stream outlived its token's expiry")
	}
}

package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/gateway"
)

// One person holds at most MaxSessions stateful sessions at once: the next initialize
// is refused with what to do, whichever token or transport it comes by, another
// person is not affected, a session ended frees its place, and stateless 2026-07-28
// requests are not counted.
func TestSessionsPerUser(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Gateway: &gateway.Options{MaxSessions: 2}})
	srv.CreateUser(t, "alice", auth.RoleToolUser, password)
	srv.CreateUser(t, "bob", auth.RoleToolUser, password)
	alice, alice2, bob := srv.Token(t, "alice"), srv.Token(t, "alice"), srv.Token(t, "bob")

	first := mustConnect(t, srv, alice, "2025-11-25")
	mustConnect(t, srv, alice2, "2025-11-25") // another token of the same person
	_, err := connect(t, srv, alice, "2025-11-25")
	if err == nil || !strings.Contains(err.Error(), "too many MCP sessions") || !strings.Contains(err.Error(), "alice has 2 open") {
		t.Fatalf("a third session: %v", err)
	}
	if _, err := connectSSE(t, srv, alice); err == nil {
		t.Fatal("an SSE session past the limit was accepted")
	}
	mustConnect(t, srv, bob, "2025-11-25")
	mustConnect(t, srv, alice, "2026-07-28") // stateless: nothing held

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	webtest.WaitFor(t, 10*time.Second, func() bool {
		cs, err := connect(t, srv, alice, "2025-11-25")
		if err == nil {
			_ = cs.Close()
		}
		return err == nil
	}, "an ended session does not free its place")
}

// A 2026-07-28 subscriptions/listen stream counts against the same limit while it is
// open (one past it is refused, so its client hears no list_changed), and ends once
// its token is revoked, which frees its place.
func TestListenStreamsPerUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Gateway: &gateway.Options{MaxSessions: 1}})
	srv.LiveServer(t, "mt", true, "echo")
	alice := srv.CreateUser(t, "alice", auth.RoleToolUser, password)
	first, info, err := srv.Auth.CreateToken(ctx, audit.System, alice.ID, auth.NewToken{Name: "first"})
	if err != nil {
		t.Fatal(err)
	}
	second := srv.Token(t, "alice")
	listen := func(token string) chan struct{} {
		heard := make(chan struct{}, 10)
		tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}}
		c := mcp.NewClient(&mcp.Implementation{Name: "listen-test", Version: "1"}, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { heard <- struct{}{} }})
		cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return heard
	}
	wait := func(heard chan struct{}, what string) {
		t.Helper()
		select {
		case <-heard:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s heard no list_changed", what)
		}
	}
	a := listen(first)
	time.Sleep(300 * time.Millisecond) // the first listen is open before the second asks
	b := listen(second)
	srv.App.Enable(t, "mt__add")
	wait(a, "the first listen")
	select {
	case <-b:
		t.Fatal("a listen past the limit was kept open")
	case <-time.After(time.Second):
	}

	if _, err := srv.Auth.RevokeToken(ctx, audit.System, info.ID, alice.ID); err != nil {
		t.Fatal(err)
	}
	// The revocation reaches the stream through the bus: each try opens a listen and
	// changes the list once.
	for i, tool := range []string{"mt__sleep", "mt__fail", "mt__write-note"} {
		time.Sleep(time.Second)
		c := listen(second)
		time.Sleep(300 * time.Millisecond)
		srv.App.Enable(t, tool)
		select {
		case <-c:
			return
		case <-time.After(3 * time.Second):
			t.Logf("try %d: not heard", i+1)
		}
	}
	t.Fatal("the revoked token's listen did not end and free its place")
}

// An SSE stream counts from its opening, before any initialize: streams that never
// initialize cannot go past the limit, and one that ends frees its place.
func TestSSEStreamsCountFromTheirOpening(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Gateway: &gateway.Options{MaxSessions: 2}})
	srv.CreateUser(t, "alice", auth.RoleToolUser, password)
	token := srv.Token(t, "alice")
	open := func() (*http.Response, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/sse", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cancel(); res.Body.Close() })
		return res, cancel
	}
	first, end := open()
	second, _ := open()
	if first.StatusCode != http.StatusOK || second.StatusCode != http.StatusOK {
		t.Fatalf("two streams: %d %d", first.StatusCode, second.StatusCode)
	}
	if third, _ := open(); third.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a third stream that never initialized: %d, want 429", third.StatusCode)
	}
	end()
	webtest.WaitFor(t, 10*time.Second, func() bool {
		res, cancel := open()
		defer cancel()
		return res.StatusCode == http.StatusOK
	}, "an ended stream does not free its place")
	// An initialize over its stream is not counted a second time: with one stream open,
	// one session fits and a second does not. The probe's stream above ends a moment
	// after it is cancelled, so the session may have to wait for its place.
	webtest.WaitFor(t, 10*time.Second, func() bool {
		_, err := connectSSE(t, srv, token)
		return err == nil
	}, "a session within the limit was refused")
	if _, err := connectSSE(t, srv, token); err == nil {
		t.Fatal("an SSE session past the limit was accepted")
	}
}

// An initialize sent again on a live session counts no second session: the person's
// place is still one, their next session is admitted, and the session itself is not
// closed as one past the limit (each resend took a place until the session ended).
func TestInitializeAgainCountsNoSession(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Gateway: &gateway.Options{MaxSessions: 2}})
	srv.CreateUser(t, "alice", auth.RoleToolUser, password)
	alice := srv.Token(t, "alice")
	cs := mustConnect(t, srv, alice, "2025-11-25")
	for range 3 {
		send(t, srv, &http.Client{Transport: bearer{alice}}, http.MethodPost,
			`{"jsonrpc":"2.0","id":99,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"again","version":"1"}}}`,
			map[string]string{"Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25"})
	}
	mustConnect(t, srv, alice, "2025-11-25") // the second of two places
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Errorf("the session that was sent initialize again: %v", err)
	}
}

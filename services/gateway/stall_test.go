//go:build unix

package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/gateway"
)

// A JSON-RPC batch to /mcp is refused before anything of it runs, even on a stateful
// session whose POST names no protocol version (the SDK would take it for 2025-03-26
// and run every request of the batch at once): 400 with a JSON-RPC error, and the
// batch's calls never reach the upstream.
func TestBatchRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	tina := srv.CreateUser(t, "tina", auth.RoleToolUser, password)
	token := map[string]string{"Authorization": "Bearer " + srv.Token(t, "tina")}
	c := srv.Client(t)
	res, body := post(t, srv, c, token)
	session := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: got %d (session %q) %s", res.StatusCode, session, body)
	}
	in := map[string]string{"Authorization": token["Authorization"], "Mcp-Session-Id": session}
	if res, body := send(t, srv, c, http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, in); res.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: got %d %s", res.StatusCode, body)
	}
	var calls []string
	for i := range 3 {
		calls = append(calls, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"mt__echo","arguments":{"message":"batched %d"}}}`, i+2, i))
	}
	batch := "[" + strings.Join(calls, ",") + "]"
	for _, b := range []string{batch, " \r\n\t" + batch} {
		res, body := send(t, srv, c, http.MethodPost, b, in)
		var msg struct {
			JSONRPC string `json:"jsonrpc"`
			Error   *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if res.StatusCode != http.StatusBadRequest || json.Unmarshal([]byte(body), &msg) != nil || msg.JSONRPC != "2.0" ||
			msg.Error == nil || !strings.Contains(msg.Error.Message, "batch") {
			t.Fatalf("a batch: got %d %s, want 400 with a JSON-RPC error about batches", res.StatusCode, body)
		}
	}
	if err := srv.Router.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := srv.App.Count(t, `SELECT count(*) FROM tool_usage_logs WHERE user_id = $1 AND request::text LIKE '%batched%'`, tina.ID); n != 0 {
		t.Fatalf("%d calls of the refused batch reached the upstream", n)
	}
	// The session still serves a single request.
	if res, body := send(t, srv, c, http.MethodPost, calls[0], in); res.StatusCode != http.StatusOK || !strings.Contains(body, "Echo: batched 0") {
		t.Fatalf("a single call after the batch: got %d %s", res.StatusCode, body)
	}
}

// stalledSSE opens GET /sse over a raw TCP connection with a tiny receive buffer,
// reads up to the endpoint event and never reads again. It returns the endpoint.
func stalledSSE(t *testing.T, srv *webtest.Server, token string) (string, net.Conn) {
	t.Helper()
	u, _ := url.Parse(srv.URL)
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024)
		}); err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET /sse HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n", u.Host, token)
	r := bufio.NewReaderSize(conn, 16)
	status, err := r.ReadString('\n')
	if err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("GET /sse: %q %v", status, err)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the endpoint event: %v", err)
		}
		if ep, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			return ep, conn
		}
	}
}

// An SSE client that stops reading neither stops list_changed for everyone else nor
// keeps its session slot: its stream's writes time out, the SDK drops the session and
// its user may open a new one.
func TestStalledStreamReleased(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Gateway: &gateway.Options{WriteTimeout: time.Second, MaxSessions: 1}})
	srv.LiveServer(t, "mt", true, "echo")
	srv.CreateUser(t, "stella", auth.RoleToolUser, password)
	stella := srv.Token(t, "stella")

	// The stalled session first, so the SDK notifies it before the good client.
	endpoint, _ := stalledSSE(t, srv, stella)
	init := `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"stalled","version":"1"}}}`
	hdr := map[string]string{"Authorization": "Bearer " + stella}
	for _, m := range []string{init, `{"jsonrpc":"2.0","method":"notifications/initialized"}`} {
		if res, body := postSSE(t, srv, endpoint, m, hdr); res.StatusCode != http.StatusAccepted {
			t.Fatalf("posting %s: got %d %s", m, res.StatusCode, body)
		}
	}
	changed := make(chan struct{}, 10)
	c := mcp.NewClient(&mcp.Implementation{Name: "good", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{srv.Token(t, "admin")}}}, &mcp.ClientSessionOptions{ProtocolVersion: eras[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	// Pings whose ids are large: their answers (about 10 MB) fill the stalled
	// client's receive buffer and the server's send buffer.
	big := strings.Repeat("x", 512<<10)
	for i := range 20 {
		ping := fmt.Sprintf(`{"jsonrpc":"2.0","id":"%d-%s","method":"ping"}`, i, big)
		res, body := postSSE(t, srv, endpoint, ping, hdr)
		if res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusBadRequest && strings.Contains(string(body), "session closed") {
			break // the session already ended (gone, or closing): its stream timed out
		}
		if res.StatusCode != http.StatusAccepted {
			t.Fatalf("ping %d: got %d %.200s", i, res.StatusCode, body)
		}
	}

	srv.App.Enable(t, "mt__add")
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no list_changed reached the good client while another client's stream was stalled")
	}

	// The stalled stream's slot comes back: stella may open a stream again.
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := openSSE(t, srv, hdr)
		if s.res.StatusCode == http.StatusOK {
			s.res.Body.Close()
			break
		}
		s.res.Body.Close()
		if s.res.StatusCode != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("a new stream after the stalled one: got %d, want 200 once its slot is released", s.res.StatusCode)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

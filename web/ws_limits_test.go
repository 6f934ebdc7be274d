package web_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/web"
)

// deflateDialer negotiates permessage-deflate, as browsers do.
var deflateDialer = websocket.Dialer{EnableCompression: true, HandshakeTimeout: 10 * time.Second}

// padded is a message of fields plus a pad of n bytes that compresses to almost nothing.
func padded(fields map[string]any, n int) map[string]any {
	fields["pad"] = strings.Repeat("a", n)
	return fields
}

// wantTooBig reads conn until it closes, failing if saw reports that the server acted
// on the message (or on a timeout) instead of closing with 1009.
func wantTooBig(t *testing.T, conn *websocket.Conn, saw func(kind int, msg []byte) bool) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		kind, msg, err := conn.ReadMessage()
		if err == nil {
			if saw(kind, msg) {
				t.Fatalf("the server acted on a message past its limit once decompressed: %.200s", msg)
			}
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseMessageTooBig {
			t.Fatalf("after a message past the limit once decompressed: %v; want close 1009", err)
		}
		return
	}
}

// /ws's read limit holds on what a message decompresses to, not on its compressed
// bytes: a subscription of 256 KiB compressed to a few hundred bytes closes the socket
// with 1009 before anything is subscribed.
func TestSocketLimitHoldsDecompressed(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	conn, _, err := deflateDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", wsHeader(srv, admin))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.WriteJSON(padded(map[string]any{"subscribe": []string{audit.Topic, tools.Topic}, "last_id": 0}, 256<<10)); err != nil {
		t.Fatal(err)
	}
	srv.Login(t, "admin", webtest.AdminPassword) // an audit event the subscription would send
	wantTooBig(t, conn, func(int, []byte) bool { return true })
}

// A terminal socket's read limit holds on what a message decompresses to: input of
// 1 MiB compressed to about a KiB closes the socket with 1009 before anything is typed.
func TestTerminalSocketLimitHoldsDecompressed(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	term := aliceTerminal(t, srv)
	ac := srv.Login(t, "alice", "alice-password-1")
	conn, _, err := deflateDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/terminals/"+term.ID+"/ws?from=0", wsHeader(srv, ac))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.WriteJSON(padded(map[string]any{"type": "input", "data": "echo BIG-$((6*7))\r"}, 1<<20)); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	wantTooBig(t, conn, func(kind int, msg []byte) bool {
		if kind == websocket.BinaryMessage {
			out.Write(msg)
		}
		return strings.Contains(out.String(), "BIG-42")
	})
}

// One person's open sockets (/ws and terminals together) are bounded: past the cap the
// handshake is refused with 429 before it upgrades; a socket closed frees its place;
// another person is not affected.
func TestSocketsBoundedPerPerson(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	term := aliceTerminal(t, srv)
	ac := srv.Login(t, "alice", "alice-password-1")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	base := "ws" + strings.TrimPrefix(srv.URL, "http")
	latest := lastEventID(t, srv)

	var conns []*websocket.Conn
	termConn, _ := termDial(t, srv, ac, term.ID, 0)
	conns = append(conns, termConn)
	for len(conns) < web.WSPerPerson {
		conns = append(conns, wsDial(t, srv, ac, []string{tools.Topic}, latest))
	}
	refused := func(path string) {
		t.Helper()
		conn, res, err := websocket.DefaultDialer.Dial(base+path, wsHeader(srv, ac))
		if err == nil {
			conn.Close()
			t.Fatalf("socket %d of one person (%s) was accepted; want 429 past %d", web.WSPerPerson+1, path, web.WSPerPerson)
		}
		if res == nil || res.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("socket past the cap (%s): %v %v; want 429", path, err, res)
		}
		// The dialer keeps only the first KiB of the answer: the page's message is read
		// whole from a plain request, refused before any upgrade as well.
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = wsHeader(srv, ac)
		res, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if b, _ := io.ReadAll(res.Body); res.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), "too many open") {
			t.Fatalf("the refusal (HTTP %d) does not say why: %s", res.StatusCode, b)
		}
	}
	refused("/ws")
	refused("/terminals/" + term.ID + "/ws?from=0")

	// Another person still connects.
	wsDial(t, srv, admin, []string{tools.Topic}, latest)

	// A closed socket frees its place once the server notices the close.
	conns[len(conns)-1].Close()
	for attempt := 0; ; attempt++ {
		conn, res, err := websocket.DefaultDialer.Dial(base+"/ws", wsHeader(srv, ac))
		if err == nil {
			conn.Close()
			break
		}
		if res == nil || res.StatusCode != http.StatusTooManyRequests || attempt == 200 {
			t.Fatalf("after closing a socket, attempt %d: %v (HTTP %d)", attempt, err, statusOf(res))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// statusOf is res's status, 0 without a response.
func statusOf(res *http.Response) int {
	if res == nil {
		return 0
	}
	return res.StatusCode
}

// Everyone's sockets together are bounded on a process (each holds a buffer of events
// and goroutines): past the bound a socket is refused with 503 before its upgrade, and
// one that closes makes room again.
func TestSocketsBoundedPerProcess(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{SocketsPerProcess: 2})
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
	var open []*websocket.Conn
	for range 2 {
		conn, _, err := deflateDialer.Dial(url, wsHeader(srv, admin))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		open = append(open, conn)
	}
	_, res, err := deflateDialer.Dial(url, wsHeader(srv, admin))
	if err == nil || res == nil || res.StatusCode != http.StatusServiceUnavailable {
		code := 0
		if res != nil {
			code = res.StatusCode
		}
		t.Fatalf("a third socket past a bound of 2: %v, status %d; want 503", err, code)
	}
	if b, _ := io.ReadAll(res.Body); !strings.Contains(string(b), "as many live connections as it takes") {
		t.Errorf("the refusal says %q", b)
	}
	open[0].Close()
	webtest.WaitFor(t, 10*time.Second, func() bool {
		conn, _, err := deflateDialer.Dial(url, wsHeader(srv, admin))
		if err == nil {
			conn.Close()
		}
		return err == nil
	}, "a socket closed made no room")
}

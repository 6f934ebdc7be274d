package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// A terminal's socket this replica forwards to the replica that runs the terminal is
// one of its live websocket connections (toolwarden_websocket_connections, the
// dashboard's count) while it is open, and when this replica shuts down its browser is
// told 1012 (restarting) as every other socket is, and reconnects: it was admitted and
// counted against its person's sockets, but neither counted nor told.
func TestForwardedTerminalSocketCountedAndClosedAtShutdown(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	scraper := "Bearer " + srv.Token(t, "admin")
	// The owner answers the socket and sends the terminal's output now and then.
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		go func() {
			for {
				if _, _, err := conn.ReadMessage(); err != nil {
					return
				}
			}
		}()
		_ = conn.WriteJSON(map[string]any{"type": "hello", "at": 0})
		for {
			time.Sleep(20 * time.Millisecond)
			if conn.WriteMessage(websocket.BinaryMessage, []byte("output\r\n")) != nil {
				return
			}
		}
	}))
	defer owner.Close()
	otherReplica(t, srv, "owner", owner.URL, "term-fwd")
	gauge := regexp.MustCompile(`(?m)^toolwarden_websocket_connections (\d+)$`)
	live := func() string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		req.Header.Set("Authorization", scraper)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		m := gauge.FindSubmatch(b)
		if m == nil {
			t.Fatalf("/metrics has no websocket gauge: %d %.300s", res.StatusCode, b)
		}
		return string(m[1])
	}
	if n := live(); n != "0" {
		t.Fatalf("live sockets before any: %s", n)
	}

	conn, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/terminals/term-fwd/ws", wsHeader(srv, admin))
	if err != nil {
		status := 0
		if res != nil {
			status = res.StatusCode
		}
		t.Fatalf("dial the forwarded terminal: %v (HTTP %d)", err, status)
	}
	defer conn.Close()
	var hello struct{ Type string }
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := conn.ReadJSON(&hello); err != nil || hello.Type != "hello" {
		t.Fatalf("the owner's hello through this replica: %v %+v", err, hello)
	}
	if n := live(); n != "1" {
		t.Fatalf("toolwarden_websocket_connections with a forwarded terminal socket open: %s, want 1", n)
	}
	if b := body(t, srv.Get(t, admin, "/")); !strings.Contains(b, "1 other live connection") {
		t.Errorf("the dashboard does not count the forwarded socket")
	}

	srv.Web.Shutdown()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err = conn.ReadMessage(); err != nil {
			break
		}
	}
	if !websocket.IsCloseError(err, 1012) {
		t.Fatalf("the forwarded socket at shutdown: %v, want close 1012 (restarting)", err)
	}
}

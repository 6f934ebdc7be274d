package web

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/handlers"
)

// A forwarded websocket is one of this replica's live sockets while it is open, and a
// shutdown tells its browser 1012 (restarting) as it tells the hub's own sockets: the
// close frame goes between two of the owner's frames, never inside one, while the
// owner streams large messages in many frames each (fragmented, and each cut across
// the proxy's copies), so the browser reads every message it got whole, then the close.
func TestForwardedSocketCountedAndToldOfRestart(t *testing.T) {
	t.Parallel()
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Small write buffers: each message goes out as many frames.
		conn, err := (&websocket.Upgrader{WriteBufferSize: 1500}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		go func() { // answers the browser's close
			for {
				if _, _, err := conn.ReadMessage(); err != nil {
					return
				}
			}
		}()
		for i := 0; ; i++ {
			msg := bytes.Repeat([]byte{byte('a' + i%26)}, 70_000+i%5000)
			if conn.WriteMessage(websocket.BinaryMessage, msg) != nil {
				return
			}
			if i%7 == 0 { // control frames in between too
				_ = conn.WriteControl(websocket.PingMessage, []byte("p"), time.Now().Add(time.Second))
			}
		}
	}))
	defer owner.Close()
	target, _ := url.Parse(owner.URL)
	h := newHub(&handlers.Deps{}, nil, slog.New(slog.DiscardHandler))
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) }}
		proxy.ServeHTTP(forwardedSocket{ResponseWriter: w, hub: h}, r)
	}))
	defer front.Close()

	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(front.URL, "http")+"/terminals/t/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	read := make(chan error, 1)
	var got atomic.Int64
	go func() {
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				read <- err
				return
			}
			if len(msg) < 70_000 || bytes.Count(msg, msg[:1]) != len(msg) {
				read <- errCorrupt
				return
			}
			got.Add(1)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for got.Load() < 20 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got.Load() < 20 {
		t.Fatalf("the browser read %d messages through the proxy", got.Load())
	}
	if n := h.count(); n != 1 {
		t.Fatalf("live sockets with one forwarded: %d, want 1", n)
	}

	h.shutdown()
	select {
	case err := <-read:
		if !websocket.IsCloseError(err, closeServiceRestart) {
			t.Fatalf("the forwarded socket ended with %v after %d messages, want close 1012", err, got.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the forwarded socket was not closed at shutdown")
	}
	for end := time.Now().Add(10 * time.Second); h.count() != 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := h.count(); n != 0 {
		t.Fatalf("live sockets after the forwarded one closed: %d", n)
	}
}

var errCorrupt = errors.New("a message came through cut or mixed")

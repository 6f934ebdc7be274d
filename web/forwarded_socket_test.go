package web

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// A forwarded websocket ends on this replica as soon as the owner ends it, whether or
// not the browser says anything: the reverse proxy half-closed the browser's side and
// waited for a browser that may never speak, holding the handler, two goroutines and
// the connection for good.
func TestForwardedSocketEndsWithTheOwner(t *testing.T) {
	t.Parallel()
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseMessageTooBig, "too big"), time.Now().Add(time.Second))
		conn.Close()
	}))
	defer owner.Close()
	target, _ := url.Parse(owner.URL)
	ended := make(chan struct{})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(ended)
		proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) }}
		proxy.ServeHTTP(forwardedSocket{ResponseWriter: w}, r)
	}))
	defer front.Close()

	// A client that upgrades and then says nothing, ever.
	conn, err := net.Dial("tcp", strings.TrimPrefix(front.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade through the front: %v %v", res, err)
	}
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the front still holds the socket 20 s after the owner closed it")
	}
}

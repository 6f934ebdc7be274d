package web_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// A socket that falls behind by more than the terminal keeps (1 MiB) is told what it
// missed, before the output that follows: a "skipped" message from the index it had
// reached to the one the output goes on from, so the client's count of bytes stays the
// terminal's index (a page reconnects from it).
func TestTerminalSocketSaysWhatItSkipped(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	term := aliceTerminal(t, srv)
	ac := srv.Login(t, "alice", "alice-password-1")

	// A small receive buffer, set before connecting: the server's writes block once its
	// send buffer (at most tcp_wmem's maximum) and this one are full.
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, NetDialContext: (&net.Dialer{
		Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10)
			})
			return errors.Join(err, serr)
		}}).DialContext}
	_, _, start := term.Output(math.MaxInt64)
	conn, _, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/terminals/"+term.ID+"/ws?from="+strconv.FormatInt(start, 10), wsHeader(srv, ac))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var hello struct {
		Type string
		At   int64
	}
	if err := conn.ReadJSON(&hello); err != nil || hello.Type != "hello" {
		t.Fatalf("hello: %v %+v", err, hello)
	}

	// More output than the socket's buffers, the message being written and the terminal's
	// buffer hold, while the test does not read: some of it cannot reach the socket.
	sndMax := int64(4 << 20)
	if f := strings.Fields(readFile("/proc/sys/net/ipv4/tcp_wmem")); len(f) == 3 {
		if n, err := strconv.ParseInt(f[2], 10, 64); err == nil {
			sndMax = n
		}
	}
	size := sndMax + 4<<20
	if err := conn.WriteJSON(map[string]any{"type": "input", "data": fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x; echo; echo END-$((6*7)); exit\r", size)}); err != nil {
		t.Fatal(err)
	}
	webtest.WaitFor(t, 60*time.Second, func() bool {
		select {
		case <-term.Done():
			return true
		default:
			return false
		}
	}, "the command's end")

	next, skips := hello.At, 0
	var tail []byte
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	for done := false; !done; {
		kind, b, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("read at %d: %v", next, err)
		}
		if kind == websocket.BinaryMessage {
			next += int64(len(b))
			tail = append(tail, b...)
			tail = tail[max(0, len(tail)-4096):]
			continue
		}
		var m struct {
			Type     string
			From, At int64
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		switch m.Type {
		case "skipped":
			if m.From != next || m.At <= m.From {
				t.Fatalf("skipped %d..%d, the output read reached %d", m.From, m.At, next)
			}
			skips++
			next = m.At
		case "exit":
			done = true
		}
	}
	_, _, end := term.Output(math.MaxInt64)
	if skips == 0 || next != end {
		t.Fatalf("%d skipped messages; the output read plus the skipped bytes reach %d, the terminal's output %d (wrote %d bytes from %d)", skips, next, end, size, start)
	}
	if !bytes.Contains(tail, []byte("END-42")) {
		t.Fatalf("the last output read: %q", tail)
	}
}

func readFile(name string) string {
	b, _ := os.ReadFile(name)
	return string(b)
}

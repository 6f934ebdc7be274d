package app_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app"
	"github.com/toolwarden/toolwarden/app/apptest"
	"github.com/toolwarden/toolwarden/services/audit/audittest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// Stopping does not wait for a request still running when the HTTP drain ends: its
// connection is closed, which ends it (an audit export to a client that stopped reading
// held its database connection, and the pool's close waited for it, as long as the
// download stall allows).
func TestStopEndsRequestsLeftAfterTheDrain(t *testing.T) {
	t.Parallel()
	a := apptest.Start(t, &apptest.Options{NoStart: true, Config: func(c *app.Config) { c.DownloadStall = 10 * time.Minute }})
	bg := context.Background()
	if err := audittest.LoadLarge(bg, a.Pool); err != nil {
		t.Fatal(err)
	}
	a.CreateUser(t, "audra", auth.RoleAuditor, "correct horse battery staple")
	token := a.Token(t, "audra")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	ready := make(chan struct{})
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx, ln, func() { close(ready) }) }()
	<-ready

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /api/v1/audit/export?format=jsonl HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", ln.Addr(), token)
	// Read the status line, then nothing more.
	rd := bufio.NewReaderSize(conn, 256)
	status, err := rd.ReadString('\n')
	if err != nil || !strings.Contains(status, "200") {
		t.Fatalf("the export's status: %q, %v", status, err)
	}
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(2 * time.Minute): // the drain is 10 s
		t.Fatal("the app did not stop while an export to a stalled client ran")
	}
	// Stopped, the app has cut the export off: reading on gets what was sent before, not
	// the whole export, which would mean it went on after the app stopped (holding a
	// database connection, which the pool's close waits for).
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	var rest tailWriter
	n, err := io.Copy(&rest, rd)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the export's connection is still open after the app stopped (%d bytes read after it)", n)
	}
	if strings.HasSuffix(string(rest.tail), "\r\n0\r\n\r\n") {
		t.Fatalf("the whole export (%d bytes more) was sent after the app stopped", n)
	}
}

// tailWriter keeps the last 64 bytes written to it.
type tailWriter struct{ tail []byte }

func (w *tailWriter) Write(b []byte) (int, error) {
	w.tail = append(w.tail, b...)
	if len(w.tail) > 64 {
		w.tail = w.tail[len(w.tail)-64:]
	}
	return len(b), nil
}

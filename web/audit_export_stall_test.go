package web_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit/audittest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// An export whose client stops reading ends once a write has waited the download stall
// time, cut off as a failed export, instead of holding its export slot for as
// long as the client keeps the connection open.
func TestAuditExportClientStalls(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{DownloadStall: 500 * time.Millisecond})
	ctx := context.Background()
	if err := audittest.LoadLarge(ctx, srv.Pool); err != nil {
		t.Fatal(err)
	}
	srv.CreateUser(t, "audra", auth.RoleAuditor, "correct horse battery staple")
	stalledExport(t, srv, srv.Token(t, "audra"))
	webtest.WaitFor(t, 60*time.Second, func() bool {
		return strings.Contains(srv.Logs.String(), "handlers: audit export cut off")
	}, "the export whose client stopped reading was not cut off")
}

// stalledExport starts an export as token's person over a connection that reads its
// status line and then nothing more (closed at the end of the test, or by the caller).
func stalledExport(t *testing.T, srv *webtest.Server, token string) net.Conn {
	t.Helper()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	fmt.Fprintf(conn, "GET /api/v1/audit/export?format=jsonl HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", u.Host, token)
	if status, err := bufio.NewReaderSize(conn, 256).ReadString('\n'); err != nil || !strings.Contains(status, "200") {
		t.Fatalf("the export's status: %q, %v", status, err)
	}
	return conn
}

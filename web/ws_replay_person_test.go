package web_test

import (
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/web"
)

// One person's replays together hold at most their share of the process's budget: their
// slow sockets (a session's and a token's) past it are asked to reload, while another
// person replaying meanwhile is not; and the share is let go of once they end.
func TestReplaysHoldAPersonsShare(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	srv.App.SetRisk(t, "mt__echo", risk.Low)
	const pw = "replay-password-123"
	ada := srv.CreateUser(t, "ada", auth.RoleAdmin, pw)
	srv.CreateUser(t, "bob", auth.RoleAdmin, pw)
	adaC, bobC := srv.Login(t, "ada", pw), srv.Login(t, "bob", pw)
	admin := svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}
	cursor := lastEventID(t, srv)
	// Escaped 5 times its size on the page: one fragment of about 17 MB, more than a
	// socket's buffers take from a client that reads nothing (slowDial).
	var ex apiExec
	admin.json(http.MethodPost, "/api/v1/executions", plan(step("mt__echo", map[string]any{"message": strings.Repeat("'", 3_500_000)})), 201, &ex)
	waitExec(t, admin, ex.ID, "success")
	topics := []string{"execution:" + ex.ID}

	// replayed reads a whole replay: the bytes it held, and its largest fragment.
	replayed := func(conn *websocket.Conn) (total, largest int) {
		t.Helper()
		// Generous: rendering and compressing a 17 MB fragment under the race detector, on
		// a machine running other packages' tests, took over 30 s once.
		deadline := time.Now().Add(120 * time.Second)
		for {
			_ = conn.SetReadDeadline(deadline)
			_, msg, err := conn.ReadMessage()
			if err != nil {
				t.Fatalf("replay: %v", err)
			}
			if strings.Contains(string(msg), "missed too many live updates") {
				t.Fatalf("a replay within every bound was asked to reload")
			}
			total, largest = total+len(msg), max(largest, len(msg))
			doc, err := goquery.NewDocumentFromReader(strings.NewReader("<template>" + string(msg) + "</template>"))
			if err != nil {
				t.Fatal(err)
			}
			if doc.Find("[data-testid=log-line][data-kind='execution.success']").Length() == 1 {
				return total, largest
			}
		}
	}
	one, largest := replayed(wsDial(t, srv, adaC, topics, cursor))
	if largest < 12<<20 {
		t.Fatalf("the replay's largest fragment is %d bytes: too small to stall a socket", largest)
	}
	webtest.WaitFor(t, 10*time.Second, func() bool { return web.ReplayHeldBy(srv.App.Web, ada.ID) == 0 }, "ada's replay let go")

	// One replay fits in a person's share, two that are not read do not.
	web.SetReplayPersonShare(srv.App.Web, int64(one+one/2))
	slowDial(t, srv, wsHeader(srv, adaC), topics, cursor)
	webtest.WaitFor(t, 10*time.Second, func() bool { return web.ReplayHeldBy(srv.App.Web, ada.ID) > int64(one/2) },
		"ada's unread replay holds its large fragment")
	h := http.Header{}
	h.Set("Authorization", "Bearer "+srv.Token(t, "ada"))
	second := slowDial(t, srv, h, topics, cursor)
	other := wsDial(t, srv, bobC, topics, cursor)
	_ = second.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, msg, err := second.ReadMessage(); err != nil || !strings.Contains(string(msg), "missed too many live updates") {
		t.Errorf("ada's token replaying past her share: %v, first message %.300s", err, msg)
	}
	replayed(other) // bob's replay, meanwhile, is whole

	webtest.WaitFor(t, 30*time.Second, func() bool {
		return web.ReplayHeldBy(srv.App.Web, ada.ID) == 0 && web.ReplayHeld(srv.App.Web) == 0
	}, "ada's replays let go once they end")
	replayed(wsDial(t, srv, adaC, topics, cursor))
}

// slowDial opens /ws as wsDial does, with a receive buffer small enough that a client
// that reads nothing soon stalls what the server writes to it.
func slowDial(t *testing.T, srv *webtest.Server, h http.Header, topics []string, lastID int64) *websocket.Conn {
	t.Helper()
	nd := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	return wsDialWith(t, srv, &websocket.Dialer{NetDialContext: nd.DialContext, HandshakeTimeout: 10 * time.Second}, h, topics, lastID)
}

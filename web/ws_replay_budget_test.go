package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/web"
)

// What all replays hold rendered and not yet sent is bounded for the process, not only
// per socket (a person's 64 sockets each held 32 MiB for as long as their client read
// slowly): past it a page is asked to reload; and a replay lets go of each fragment
// once it is sent.
func TestReplaysShareOneBudget(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	srv.App.SetRisk(t, "mt__echo", risk.Low)
	admin := svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}
	cursor := lastEventID(t, srv)
	var ex apiExec
	admin.json(http.MethodPost, "/api/v1/executions", plan(step("mt__echo", map[string]any{"message": "hi"})), 201, &ex)
	waitExec(t, admin, ex.ID, "success")

	web.SetReplayBudget(srv.App.Web, 1)
	conn := wsDial(t, srv, admin.c, []string{"execution:" + ex.ID}, cursor)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, msg, err := conn.ReadMessage(); err != nil || !strings.Contains(string(msg), "missed too many live updates") {
		t.Errorf("a replay past the process's budget: %v, first message %.300s", err, msg)
	}
	conn.Close()
	webtest.WaitFor(t, 10*time.Second, func() bool { return web.ReplayHeld(srv.App.Web) == 0 }, "the refused replay's fragments let go")

	web.SetReplayBudget(srv.App.Web, 256<<20)
	conn = wsDial(t, srv, admin.c, []string{"execution:" + ex.ID}, cursor)
	wsUntil(t, conn, "the replayed success", func(d *goquery.Document) bool {
		return d.Find("[data-testid=log-line][data-kind='execution.success']").Length() == 1
	})
	webtest.WaitFor(t, 10*time.Second, func() bool { return web.ReplayHeld(srv.App.Web) == 0 }, "the sent replay's fragments let go")
}

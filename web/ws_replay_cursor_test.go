package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/services/executions"
	"github.com/toolwarden/toolwarden/services/risk"
)

// A page following only an execution's topic, which the retention keeps whole, is
// replayed what it missed however old its cursor: it was told to reload because other
// topics' events after its cursor were pruned.
func TestOldCursorOnAnExecutionIsReplayed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	srv.App.SetRisk(t, "mt__echo", risk.Low)
	admin := svClient{t: t, srv: srv, c: srv.Login(t, "admin", webtest.AdminPassword)}
	cursor := lastEventID(t, srv)
	var ex apiExec
	admin.json(http.MethodPost, "/api/v1/executions", plan(step("mt__echo", map[string]any{"message": "hi"})), 201, &ex)
	waitExec(t, admin, ex.ID, "success")

	// Everything since the cursor ages past the retention and is pruned as the app
	// prunes it: the execution's events stay, the others (the executions list's) go.
	testkit.Exec(t, srv.Pool, `UPDATE events SET created_at = now() - interval '8 days' WHERE id > $1`, cursor)
	if _, err := events.Prune(ctx, srv.Pool, time.Now().Add(-7*24*time.Hour), executions.TopicOf("")); err != nil {
		t.Fatal(err)
	}
	if through, err := events.PrunedThrough(ctx, srv.Pool); err != nil || through <= cursor {
		t.Fatalf("pruned through %d (%v), want past the cursor %d", through, err, cursor)
	}

	conn := wsDial(t, srv, admin.c, []string{executions.TopicOf(ex.ID)}, cursor)
	wsUntil(t, conn, "the replayed success", func(d *goquery.Document) bool {
		if html, _ := d.Html(); strings.Contains(html, "missed too many") {
			t.Fatalf("a page on an execution, whose events are all kept, was told to reload: %.300s", html)
		}
		return d.Find("[data-testid=log-line][data-kind='execution.success']").Length() == 1
	})
}

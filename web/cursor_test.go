package web_test

import (
	"strconv"
	"testing"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// Every page that follows topics over the websocket carries the cursor it was read at:
// a page at cursor 0 made its socket replay the whole history (on /grants and
// /terminals, toasts of approvals asked for long ago).
func TestEveryLivePageHasACursor(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "mt", true, "echo")
	srv.CreateUser(t, "tess", auth.RoleToolUser, "tess-password-123")
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	for _, path := range []string{"/", "/servers", "/tools", "/executions", "/terminals", "/approvals", "/analytics", "/grants",
		"/audit", "/users", "/tokens", "/settings/executions", "/assistant", "/tools/" + srv.ToolID(t, "mt__echo")} {
		doc := page(t, srv.Get(t, admin, path))
		topics, live := doc.Find(`[ws-connect]`).Attr("data-topics")
		if !live || topics == "" {
			continue
		}
		cursor, err := strconv.ParseInt(doc.Find(`#ws-cursor`).AttrOr("data-last-event-id", ""), 10, 64)
		if err != nil || cursor <= 0 {
			t.Errorf("%s follows %q from cursor %q, want the newest event id", path, topics, doc.Find(`#ws-cursor`).AttrOr("data-last-event-id", ""))
		}
	}
}

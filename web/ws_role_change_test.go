package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/tools"
	"github.com/toolwarden/toolwarden/web"
)

// An admin demoted to tool_manager, on a page following a topic both roles may follow,
// loses the socket (1012, the page reloads): the page shows the admin's controls.
// The same for a promotion: the page shows fewer controls than the role has.
func TestSocketClosesOnAnyRoleChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	u := srv.CreateUser(t, "adm", auth.RoleAdmin, "adm-password-12345")
	c := srv.Login(t, "adm", "adm-password-12345")
	conn := wsDial(t, srv, c, []string{tools.Topic}, lastEventID(t, srv))
	// Authenticated as an admin by the handshake: the change is seen by the socket's
	// first check or by the event about it, whichever comes after it.
	if _, err := srv.Auth.SetRole(ctx, audit.System, u.ID, auth.RoleToolManager); err != nil {
		t.Fatal(err)
	}
	wsClosedWith(t, conn, websocket.CloseServiceRestart, 10*time.Second, "after the admin was made tool_manager")

	c = srv.Login(t, "adm", "adm-password-12345")
	conn = wsDial(t, srv, c, []string{tools.Topic}, lastEventID(t, srv))
	if _, err := srv.Auth.SetRole(ctx, audit.System, u.ID, auth.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	wsClosedWith(t, conn, websocket.CloseServiceRestart, 10*time.Second, "after the tool_manager was made admin")
}

// A terminal's socket learns whom a sessions-topic event is about from the hub's shared
// decoder (as /ws does), not by decoding the event itself under the bus's lock: a
// hundred open terminals decode each event once.
func TestTerminalSocketSharesTheSessionDecoder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	term := aliceTerminal(t, srv)
	termDial(t, srv, srv.Login(t, "alice", "alice-password-1"), term.ID, 0)
	termDial(t, srv, srv.Login(t, "alice", "alice-password-1"), term.ID, 0)
	before := web.SessionUsersKept(srv.App.Web)
	bob := srv.CreateUser(t, "bob", auth.RoleToolUser, "bob-password-12345")
	if _, err := srv.Auth.SetDisabled(ctx, audit.System, bob.ID, true); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for web.SessionUsersKept(srv.App.Web) == before {
		if time.Now().After(deadline) {
			t.Fatal("the terminals' watch did not use the hub's decoder for an event about bob")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

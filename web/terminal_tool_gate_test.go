package web_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/builtin"
)

// Keys typed on a terminal's page reach the shell past the router: disabling the
// terminal tool stops them as it stops an agent's send_input. An open socket is closed
// at once, not at its next check of the session (an hour here; the page reconnects
// read-only), a new one is read-only, and so is the page.
func TestTerminalTypingNeedsTheTool(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true, SessionRecheck: time.Hour})
	term := aliceTerminal(t, srv)
	alice := srv.Login(t, "alice", "alice-password-1")
	conn, hello := termDial(t, srv, alice, term.ID, 0)
	if hello["readOnly"] != false {
		t.Fatalf("alice's socket with the tool enabled: hello %v, want her typing", hello)
	}
	if _, err := srv.App.Tools.SetEnabled(context.Background(), audit.System, []string{srv.ToolID(t, builtin.TerminalToolName)}, false, "test", true); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := conn.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) && ce.Code == 1012 {
			break
		}
		if err != nil {
			t.Fatalf("alice's open socket after the tool was disabled: %v, want it closed to reconnect (1012)", err)
		}
	}
	if _, hello := termDial(t, srv, alice, term.ID, 0); hello["readOnly"] != true {
		t.Errorf("alice's socket with the tool disabled: hello %v, want read-only", hello)
	}
	if d := page(t, srv.Get(t, alice, "/terminals/"+term.ID)); d.Find(`[data-testid=terminal][data-readonly=true]`).Length() != 1 {
		t.Error("alice's page with the tool disabled: want it read-only")
	}
}

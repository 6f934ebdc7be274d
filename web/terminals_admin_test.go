package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// An administrator types into a terminal someone else owns (handlers.TerminalAccess),
// the line audited under the administrator's name, though not with an API token; a tool manager, who may use tools
// but neither owns the terminal nor is an administrator, cannot open its socket at all.
func TestTerminalAdminTypesIntoOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	term := aliceTerminal(t, srv)
	srv.CreateUser(t, "ada", auth.RoleAdmin, "ada-password-123")
	srv.CreateUser(t, "tom", auth.RoleToolManager, "tom-password-123")
	adc := srv.Login(t, "ada", "ada-password-123")
	tc := srv.Login(t, "tom", "tom-password-123")

	if b := body(t, srv.Get(t, adc, "/terminals/"+term.ID)); !strings.Contains(b, `data-readonly="false"`) {
		t.Fatalf("the administrator's page of alice's terminal is read-only:\n%s", b)
	}
	conn, hello := termDial(t, srv, adc, term.ID, 0)
	if hello["readOnly"] != false {
		t.Fatalf("the administrator's hello: %v", hello)
	}
	_ = conn.WriteJSON(map[string]any{"type": "input", "data": "echo admin-$((40+2))\r"})
	readUntil(t, conn, "admin-42")
	if data, _, _ := term.Output(0); !strings.Contains(string(data), "admin-42") {
		t.Fatalf("the terminal's own output lacks the administrator's command: %q", data)
	}
	webtest.WaitFor(t, 5*time.Second, func() bool {
		var n int
		if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'terminal.input' AND target_id = $1
			AND actor_name = 'ada' AND payload->>'input' = 'echo admin-$((40+2))'`, term.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}, "the administrator's line audited under their name")

	// The administrator's API token sees the terminal but types nothing: keys an agent
	// sends go through the router (send_input), where the risk of the command is judged.
	th := http.Header{}
	th.Set("Authorization", "Bearer "+srv.Token(t, "ada"))
	aconn, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/terminals/"+term.ID+"/ws?from=0", th)
	if err != nil {
		t.Fatalf("the token's socket: %v (%v)", err, res)
	}
	defer aconn.Close()
	var thello map[string]any
	if err := aconn.ReadJSON(&thello); err != nil || thello["readOnly"] != true {
		t.Fatalf("the token's hello: %v %v, want read-only", err, thello)
	}
	_ = aconn.WriteJSON(map[string]any{"type": "input", "data": "echo TOKEN-TYPED\r"})
	readNotice(t, aconn, "read-only")
	if data, _, _ := term.Output(0); strings.Contains(string(data), "TOKEN-TYPED") {
		t.Fatal("an API token typed into the terminal")
	}

	// The tool manager: the page and the socket answer 404, as for a terminal that
	// does not exist, and nothing they could send reaches it.
	if res := srv.Get(t, tc, "/terminals/"+term.ID); res.StatusCode != http.StatusNotFound {
		t.Fatalf("the tool manager opens alice's terminal: %d", res.StatusCode)
	}
	h := wsHeader(srv, tc)
	tconn, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/terminals/"+term.ID+"/ws?from=0", h)
	if err == nil {
		_ = tconn.WriteJSON(map[string]any{"type": "input", "data": "echo MANAGER-TYPED\r"})
		time.Sleep(300 * time.Millisecond)
		tconn.Close()
		t.Fatal("the tool manager opened alice's terminal's socket")
	}
	if res == nil || res.StatusCode != http.StatusNotFound {
		t.Fatalf("the tool manager's socket: %v, want HTTP 404", err)
	}
	if data, _, _ := term.Output(0); strings.Contains(string(data), "MANAGER-TYPED") {
		t.Fatal("the tool manager typed into the terminal")
	}
}

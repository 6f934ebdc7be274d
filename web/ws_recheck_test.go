package web_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// A person disabled between the socket's handshake and its subscription (an event the
// replay of a page without the sessions topic leaves out) is signed out at once, not
// at the next periodic check.
func TestSocketChecksThePersonWhenItSubscribes(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	u := srv.CreateUser(t, "aud", auth.RoleAuditor, "aud-password-12345")
	c := srv.Login(t, "aud", "aud-password-12345")
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", wsHeader(srv, c))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := srv.Auth.SetDisabled(t.Context(), audit.System, u.ID, true); err != nil {
		t.Fatal(err)
	}
	if err := conn.WriteJSON(map[string]any{"subscribe": []string{"audit"}, "last_id": 0}); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, msg, err := conn.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) && ce.Code == 4401 {
			return
		}
		if err != nil {
			t.Fatalf("after the person was disabled: %v %s; want close 4401 at once", err, msg)
		}
	}
}

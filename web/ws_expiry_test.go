package web_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/app/webtest"
)

// wsClosedWithin reads conn until it closes, failing unless it closes with code within d.
func wsClosedWithin(t *testing.T, conn *websocket.Conn, d time.Duration, code int, what string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(d))
	for {
		_, _, err := conn.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) && ce.Code == code {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v; want close %d within %s", what, err, code, d)
		}
	}
}

// A socket whose token or session ends by itself closes then (4401), not at the next
// periodic check (30 s here): an expiry publishes nothing a socket would hear, and a
// terminal's socket took keys until that check.
func TestSocketsCloseWhenTheirCredentialExpires(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	term := aliceTerminal(t, srv) // alice, a tool user, and her terminal
	ctx := t.Context()

	t.Run("token", func(t *testing.T) {
		token := srv.Token(t, "admin")
		if _, err := srv.Pool.Exec(ctx, `UPDATE api_tokens SET expires_at = now() + interval '3 seconds'
			WHERE user_id = (SELECT id FROM users WHERE username = 'admin')`); err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set("Authorization", "Bearer "+token)
		conn := wsDialWith(t, srv, websocket.DefaultDialer, h, []string{"executions"}, lastEventID(t, srv))
		wsClosedWithin(t, conn, 15*time.Second, 4401, "a token's /ws after the token expired")
	})

	t.Run("session", func(t *testing.T) {
		c := srv.Login(t, "alice", "alice-password-1")
		expireSoon(t, srv, "alice")
		conn := wsDial(t, srv, c, []string{"executions"}, lastEventID(t, srv))
		wsClosedWithin(t, conn, 15*time.Second, 4401, "a session's /ws after the session expired")
	})

	t.Run("terminal", func(t *testing.T) {
		c := srv.Login(t, "alice", "alice-password-1")
		expireSoon(t, srv, "alice")
		conn, _ := termDial(t, srv, c, term.ID, 0)
		termClosed(t, conn, 15*time.Second, 4401, "a terminal's socket after its session expired")
	})
}

// expireSoon makes the sessions of username end in three seconds.
func expireSoon(t *testing.T, srv *webtest.Server, username string) {
	t.Helper()
	if _, err := srv.Pool.Exec(t.Context(), `UPDATE sessions SET expires_at = now() + interval '3 seconds'
		WHERE user_id = (SELECT id FROM users WHERE username = $1)`, username); err != nil {
		t.Fatal(err)
	}
}

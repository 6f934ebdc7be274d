package web_test

import (
	"errors"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
)

// A person typing in a terminal's websocket is not idle: their keys keep the session
// from its idle timeout, which before only page loads refreshed (the socket was closed
// "session ended" after IdleTimeout of typing, 4 hours by default, here 3 s). Once
// the keys stop, the session does reach it and the socket closes.
func TestTerminalTypingKeepsTheSession(t *testing.T) {
	t.Parallel()
	const idle = 3 * time.Second
	srv := webtest.Start(t, &webtest.Options{Builtin: true, SessionRecheck: 200 * time.Millisecond,
		Auth: &auth.Options{IdleTimeout: idle}})
	term := aliceTerminal(t, srv)
	conn, _ := termDial(t, srv, srv.Login(t, "alice", "alice-password-1"), term.ID, 0)
	closed := make(chan error, 1)
	go func() {
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				closed <- err
				return
			}
		}
	}()

	// Typing for three idle timeouts, a key every 200 ms.
	start := time.Now()
	for time.Since(start) < 3*idle {
		select {
		case err := <-closed:
			t.Fatalf("the socket closed after %s of typing: %v; want it open while alice types", time.Since(start).Round(time.Millisecond), err)
		default:
		}
		if err := conn.WriteJSON(map[string]any{"type": "input", "data": " "}); err != nil {
			t.Fatalf("typing after %s: %v", time.Since(start).Round(time.Millisecond), err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Alice stops: the session goes idle and the socket is closed as signed out.
	stopped := time.Now()
	select {
	case err := <-closed:
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != 4401 {
			t.Fatalf("once alice stopped typing: %v; want close 4401", err)
		}
		if d := time.Since(stopped); d < idle/2 {
			t.Errorf("closed %s after the last key, want about the idle timeout (%s)", d, idle)
		}
	case <-time.After(3 * idle):
		t.Fatalf("the socket was still open %s after the last key, want it closed at the idle timeout (%s)", 3*idle, idle)
	}
}

package web_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/uuid"
	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/db"
	"github.com/toolwarden/toolwarden/services/events"
	"github.com/toolwarden/toolwarden/web"
)

// wsClosedWith reads conn until it closes, and fails unless it closes with code within
// d (the session's periodic check is 30 s away).
func wsClosedWith(t *testing.T, conn *websocket.Conn, code int, d time.Duration, what string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(d))
	for {
		_, msg, err := conn.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) && ce.Code == code {
			return
		}
		if err != nil {
			t.Fatalf("%s: the socket ended with %v (last message %.200s), want close %d within %s", what, err, msg, code, d)
		}
	}
}

// A person signing in again on the same browser ends the session the browser had: the
// pages and terminals still on it end at once (4401), as after Logout, not at their next
// periodic check: the old cookie may be a copy in someone else's hands.
func TestSignInAgainEndsTheOldSessionsSockets(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.CreateUser(t, "aud", auth.RoleAuditor, "aud-password-12345")
	cursor := lastEventID(t, srv)
	c := srv.Login(t, "aud", "aud-password-12345")
	conn := wsDial(t, srv, c, []string{auth.SessionsTopic}, cursor)
	// The sign-in replayed: the socket is subscribed and checked.
	wsUntil(t, conn, "the sign-in replayed", func(*goquery.Document) bool { return true })

	res := srv.PostForm(t, c, "/login", url.Values{"username": {"aud"}, "password": {"aud-password-12345"}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("signing in again: %d", res.StatusCode)
	}
	wsClosedWith(t, conn, 4401, 10*time.Second, "the socket of the session the new sign-in ended")
}

// When the first check of the session, once the socket is subscribed, cannot be made
// (here the sessions table is away), the socket closes with 1013 to authenticate again,
// rather than stream under its handshake's principal until the periodic check.
func TestSocketsFirstCheckFailingClosesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	srv.CreateUser(t, "aud", auth.RoleAuditor, "aud-password-12345")
	c := srv.Login(t, "aud", "aud-password-12345")
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", wsHeader(srv, c))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := srv.Owner.Exec(ctx, `ALTER TABLE sessions RENAME TO sessions_away`); err != nil {
		t.Fatal(err)
	}
	back := func() { _, _ = srv.Owner.Exec(ctx, `ALTER TABLE IF EXISTS sessions_away RENAME TO sessions`) }
	defer back()
	if err := conn.WriteJSON(map[string]any{"subscribe": []string{auth.SessionsTopic}, "last_id": lastEventID(t, srv)}); err != nil {
		t.Fatal(err)
	}
	wsClosedWith(t, conn, 1013, 10*time.Second, "a socket whose first check failed")
	back()
}

// A replay of many events about the person checks the session once, not once per event
// (a query each, one after another, outside the replay's slot), and still before
// whatever follows the first of them.
func TestReplayChecksThePersonOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	u := srv.CreateUser(t, "aud", auth.RoleAuditor, "aud-password-12345")
	c := srv.Login(t, "aud", "aud-password-12345")
	cursor := lastEventID(t, srv)
	const n = 200
	err := db.WithTx(ctx, srv.Pool, func(tx pgx.Tx) error {
		for range n {
			if _, err := events.UserChanged.Publish(ctx, tx, auth.SessionsTopic, events.Session{UserID: u.ID, Username: u.Username, Reason: "account changed"}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	newest := lastEventID(t, srv)
	before := web.SessionRechecks(srv.App.Web)
	conn := wsDial(t, srv, c, []string{auth.SessionsTopic}, cursor)
	wsUntil(t, conn, "the last replayed event", func(d *goquery.Document) bool {
		return d.Find(fmt.Sprintf("#ws-cursor[data-last-event-id='%d']", newest)).Length() == 1
	})
	// The first check once subscribed, and one before the replayed events about the person.
	if got := web.SessionRechecks(srv.App.Web) - before; got > 2 {
		t.Fatalf("a replay of %d events about the person checked the session %d times, want at most 2", n, got)
	}
}

// A websocket is this site's only when its Origin has the scheme the client reached the
// site by as well as its host: behind a trusted proxy saying https, an http page (which
// anyone on the network can serve) is refused. Without a trusted proxy, plain HTTP may
// have come through a proxy that ended TLS, and an https page of the host is accepted.
func TestWebsocketOriginScheme(t *testing.T) {
	t.Parallel()
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}
	proxied := webtest.Start(t, &webtest.Options{TrustedProxies: loopback})
	ck, _ := signIn(t, proxied, proxied.Client(t), proxied.URL, map[string]string{"X-Forwarded-Proto": "https"})
	if ck[hostSession] == nil {
		t.Fatalf("sign-in over https behind the proxy: cookies %v", ck)
	}
	host := strings.TrimPrefix(proxied.URL, "http://")
	dial := func(srv *webtest.Server, h http.Header) int {
		t.Helper()
		conn, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", h)
		if err == nil {
			conn.Close()
		}
		if res == nil {
			t.Fatalf("dial: %v", err)
		}
		return res.StatusCode
	}
	for _, tc := range []struct {
		origin string
		want   int
	}{
		{"http://" + host, http.StatusForbidden},
		{"https://" + host, http.StatusSwitchingProtocols},
		{"https://elsewhere.example", http.StatusForbidden},
	} {
		h := http.Header{}
		h.Set("Cookie", hostSession+"="+ck[hostSession].Value)
		h.Set("X-Forwarded-Proto", "https")
		h.Set("Origin", tc.origin)
		if got := dial(proxied, h); got != tc.want {
			t.Errorf("behind a trusted proxy saying https, Origin %s: %d, want %d", tc.origin, got, tc.want)
		}
	}

	plain := webtest.Start(t, nil)
	c := plain.Login(t, "admin", webtest.AdminPassword)
	host = strings.TrimPrefix(plain.URL, "http://")
	for _, tc := range []struct {
		origin string
		want   int
	}{
		{"http://" + host, http.StatusSwitchingProtocols},
		{"https://" + host, http.StatusSwitchingProtocols},
		{"http://elsewhere.example", http.StatusForbidden},
	} {
		h := wsHeader(plain, c)
		h.Set("Origin", tc.origin)
		if got := dial(plain, h); got != tc.want {
			t.Errorf("plain HTTP, Origin %s: %d, want %d", tc.origin, got, tc.want)
		}
	}
}

// A handshake from another site's page for a terminal another replica runs is refused
// before it is forwarded: it takes nothing of the person's allowance of forwarded
// requests (a burst of 20), which a page of theirs then still has.
func TestForwardedTerminalRefusesAnotherOriginFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, &webtest.Options{Builtin: true})
	admin := srv.Login(t, "admin", webtest.AdminPassword)
	loop := uuid.NewString()
	if _, err := srv.Pool.Exec(ctx, `INSERT INTO replicas (id, name, address, host, pid) VALUES ($1, 'loop', $2, 'h', 1)`, loop, srv.URL); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Pool.Exec(ctx, `INSERT INTO terminals (id, replica_id, replica, kind, conversation_id, dir, started_at)
		VALUES ('term-loop', $1, 'loop', 'pty', 'conv-x', '/tmp', now())`, loop); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		h := wsHeader(srv, admin)
		h.Set("Origin", "https://elsewhere.example")
		conn, res, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/terminals/term-loop/ws", h)
		if err == nil {
			conn.Close()
		}
		if res == nil || res.StatusCode != http.StatusForbidden {
			status := 0
			if res != nil {
				status = res.StatusCode
			}
			t.Fatalf("cross-origin handshake %d for a forwarded terminal: %d (%v), want 403", i+1, status, err)
		}
	}
	// The page is forwarded (its replica's address leads back here: 502), not 429.
	res := srv.Get(t, admin, "/terminals/term-loop")
	res.Body.Close()
	if res.StatusCode != http.StatusBadGateway {
		t.Fatalf("the person's own page after the refused handshakes: %d, want it forwarded (502)", res.StatusCode)
	}
}

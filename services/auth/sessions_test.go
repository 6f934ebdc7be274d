package auth_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/fault"
)

func TestLoginStartsSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)

	before := time.Now()
	// Usernames are matched as typed by people: trimmed, any case.
	s := f.loginReq(auth.LoginRequest{Username: "  Alice ", Password: testPassword, IP: "192.0.2.1", UserAgent: "Firefox", RequestID: "r-42"})
	if !strings.HasPrefix(s.Token, "tws_") {
		t.Errorf("session token: got %q, want prefix tws_", s.Token)
	}
	if s.User.ID != alice.ID || s.User.LastLoginAt == nil {
		t.Errorf("session user: got %+v, want alice with last_login_at set", s.User)
	}
	if ttl := s.ExpiresAt.Sub(before); ttl < 23*time.Hour || ttl > 25*time.Hour {
		t.Errorf("session lifetime: got %s, want the default 24h", ttl)
	}
	p := f.mustAuth(s.Token, alice)
	if !bytes.Equal(p.SessionID, sha(s.Token)) || p.TokenID != "" {
		t.Errorf("principal: got session id %x, token id %q; want sha256 of the cookie and no token id", p.SessionID, p.TokenID)
	}
	if p.User.Role != auth.RoleToolUser || p.User.Username != "alice" {
		t.Errorf("principal user: got %+v, want alice the tool_user", p.User)
	}

	a := f.oneAudit("user.login")
	if a.ActorKind != audit.ActorUser || a.ActorID != alice.ID || a.TargetID != alice.ID || a.Payload["username"] != "alice" || a.Payload["user_agent"] != "Firefox" {
		t.Errorf("user.login audit: got %+v, want alice as actor and target", a)
	}
	ev := f.events("session.started")
	if len(ev) != 1 || ev[0].Topic != auth.SessionsTopic || ev[0].Payload.UserID != alice.ID || ev[0].Payload.Username != "alice" {
		t.Errorf("session.started events: got %+v, want one on %q for alice", ev, auth.SessionsTopic)
	}
	var ip, ua string
	if err := f.pool.QueryRow(f.ctx, `SELECT ip, user_agent FROM sessions`).Scan(&ip, &ua); err != nil {
		t.Fatal(err)
	}
	if ip != "192.0.2.1" || ua != "Firefox" {
		t.Errorf("session row: got ip %q, user agent %q; want 192.0.2.1, Firefox", ip, ua)
	}
	f.verifyAudit(2) // user.create, user.login
}

func TestLoginRotatesSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)

	first := f.login("alice", testPassword)
	f.mustAuth(first.Token, alice)
	second := f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "192.0.2.1", OldSession: first.Token})
	if second.Token == first.Token {
		t.Fatalf("second login: got the same token %q, want a new one", first.Token)
	}
	f.mustNotAuth(first.Token, "the session passed as OldSession")
	f.mustAuth(second.Token, alice)
	if n := f.count(`SELECT count(*) FROM sessions`); n != 1 {
		t.Fatalf("sessions after rotation: got %d, want 1", n)
	}
	// Announced, so pages and terminal sockets still on it end at once.
	again := auth.SessionEvent{UserID: alice.ID, Username: "alice", Reason: "signed in again"}
	if ev := f.events("session.ended"); len(ev) != 1 || ev[0].Payload != again {
		t.Fatalf("session.ended events after signing in again: %+v, want one", ev)
	}

	// Without OldSession, a second sign-in (another browser) keeps the first session.
	third := f.login("alice", testPassword)
	f.mustAuth(second.Token, alice)
	f.mustAuth(third.Token, alice)

	// A failed sign-in does not end the old session.
	if _, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: "wrong password!", OldSession: third.Token}); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Fatalf("wrong password: got %v, want ErrInvalidCredentials", err)
	}
	f.mustAuth(third.Token, alice)

	// Another person signing in on the same browser signs alice out: audited and
	// announced, so her open pages end.
	f.createUser("bob", auth.RoleToolUser)
	f.loginReq(auth.LoginRequest{Username: "bob", Password: testPassword, IP: "192.0.2.9", OldSession: third.Token})
	f.mustNotAuth(third.Token, "alice's session after bob signed in on her browser")
	ev := f.events("session.ended")
	want := auth.SessionEvent{UserID: alice.ID, Username: "alice", Reason: "another person signed in on the same browser"}
	if len(ev) != 2 || ev[1].Payload != want {
		t.Fatalf("session.ended events: %+v, want the one of signing in again, then one for alice signed out by bob", ev)
	}
	if n := f.count(`SELECT count(*) FROM audit_log WHERE action = 'user.logout' AND actor_id = $1::uuid AND target_id = $1::text`, alice.ID); n != 1 {
		t.Fatalf("alice's sign-out audit rows: %d, want 1", n)
	}
}

func TestSessionTokenNotStored(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.createUser("alice", auth.RoleToolUser)
	s := f.login("alice", testPassword)

	var hash []byte
	var row string
	if err := f.pool.QueryRow(f.ctx, `SELECT token_hash, s::text FROM sessions s`).Scan(&hash, &row); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(hash, sha(s.Token)) {
		t.Errorf("token_hash: got %x, want sha256 of the token %x", hash, sha(s.Token))
	}
	secret := strings.TrimPrefix(s.Token, "tws_")
	for _, needle := range []string{s.Token, secret, hex.EncodeToString([]byte(s.Token))} {
		if strings.Contains(row, needle) {
			t.Errorf("sessions row %q contains the token (%q)", row, needle)
		}
	}
	// Nor does anything else the sign-in wrote.
	for _, table := range []string{"audit_log", "events", "users"} {
		if n := f.count(fmt.Sprintf(`SELECT count(*) FROM %s x WHERE strpos(x::text, $1) > 0`, table), secret); n != 0 {
			t.Errorf("%s: got %d rows containing the session token, want 0", table, n)
		}
	}
}

func TestAuthenticateRejects(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)
	live := f.login("alice", testPassword)
	expired := f.login("alice", testPassword)
	idle := f.login("alice", testPassword)
	f.exec(`UPDATE sessions SET expires_at = now() - interval '1 second' WHERE token_hash = $1`, sha(expired.Token))
	f.exec(`UPDATE sessions SET last_seen_at = now() - interval '5 hours' WHERE token_hash = $1`, sha(idle.Token))

	tok, _, err := f.svc.CreateToken(f.ctx, actorOf(alice), alice.ID, auth.NewToken{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, token string }{
		{"empty", ""},
		{"prefix only", "tws_"},
		{"unknown", "tws_" + strings.Repeat("A", 43)},
		{"no prefix", strings.TrimPrefix(live.Token, "tws_")},
		{"api token", tok},
		{"expired", expired.Token},
		{"idle for 5h (idle timeout 4h)", idle.Token},
		{"with trailing space", live.Token + " "},
	} {
		f.mustNotAuth(tc.token, tc.name)
	}
	f.mustAuth(live.Token, alice)
	// A session cookie is not an API token either.
	f.mustNotAuthToken(live.Token, "session cookie used as an API token")
}

func TestAuthenticateRefreshesIdleClock(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)
	s := f.login("alice", testPassword)
	f.exec(`UPDATE sessions SET last_seen_at = now() - interval '3 hours'`)
	f.mustAuth(s.Token, alice)
	if n := f.count(`SELECT count(*) FROM sessions WHERE last_seen_at > now() - interval '1 minute'`); n != 1 {
		t.Fatalf("sessions seen in the last minute after Authenticate: got %d, want 1", n)
	}
	// Still alive 3h later: the idle timeout counts from the last use, not sign-in.
	f.exec(`UPDATE sessions SET last_seen_at = last_seen_at - interval '3 hours', created_at = created_at - interval '6 hours'`)
	f.mustAuth(s.Token, alice)
}

func TestSessionOptions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Options{SessionTTL: time.Hour, IdleTimeout: 10 * time.Minute})
	alice := f.createUser("alice", auth.RoleToolUser)
	before := time.Now()
	s := f.login("alice", testPassword)
	if ttl := s.ExpiresAt.Sub(before); ttl < 59*time.Minute || ttl > 61*time.Minute {
		t.Errorf("session lifetime: got %s, want 1h", ttl)
	}
	f.exec(`UPDATE sessions SET last_seen_at = now() - interval '9 minutes'`)
	f.mustAuth(s.Token, alice)
	f.exec(`UPDATE sessions SET last_seen_at = now() - interval '11 minutes'`)
	f.mustNotAuth(s.Token, "idle for 11 minutes with a 10 minute idle timeout")
}

func TestLogout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)
	s := f.login("alice", testPassword)
	other := f.login("alice", testPassword)
	p := f.mustAuth(s.Token, alice)

	if err := f.svc.Logout(f.ctx, p, p.Actor("192.0.2.1", "r-7")); err != nil {
		t.Fatalf("Logout: %v", err)
	}
	f.mustNotAuth(s.Token, "after logout")
	f.mustAuth(other.Token, alice) // only that session ended

	a := f.oneAudit("user.logout")
	if a.ActorKind != audit.ActorUser || a.ActorID != alice.ID || a.TargetType != "user" || a.TargetID != alice.ID || a.Payload["username"] != "alice" {
		t.Errorf("user.logout audit: got %+v, want alice as actor and target", a)
	}
	ev := f.events("session.ended")
	want := auth.SessionEvent{UserID: alice.ID, Username: "alice", Reason: "signed out"}
	if len(ev) != 1 || ev[0].Topic != auth.SessionsTopic || ev[0].Payload != want {
		t.Errorf("session.ended events: got %+v, want one on %q with %+v", ev, auth.SessionsTopic, want)
	}

	// Logging out twice is harmless and not audited again.
	if err := f.svc.Logout(f.ctx, p, p.Actor("", "")); err != nil {
		t.Fatalf("second Logout: got %v, want nil", err)
	}
	if got := len(f.audits("user.logout")); got != 1 {
		t.Errorf("user.logout audit rows after a second logout: got %d, want 1", got)
	}
	if got := len(f.events("session.ended")); got != 1 {
		t.Errorf("session.ended events after a second logout: got %d, want 1", got)
	}

	// Nobody, or an API token, has no session to end.
	for _, tc := range []struct {
		name string
		p    *auth.Principal
	}{
		{"nil principal", nil},
		{"token principal", &auth.Principal{User: alice, Kind: audit.ActorToken, TokenID: "x"}},
	} {
		if err := f.svc.Logout(f.ctx, tc.p, audit.Actor{}); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Errorf("Logout(%s): got %v, want ErrUnauthenticated", tc.name, err)
		}
	}
	f.verifyAudit(4) // user.create, 2× user.login, user.logout
}

func TestLoginFailures(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)
	bob := f.createUser("bob", auth.RoleToolUser)
	if _, err := f.svc.SetDisabled(f.ctx, audit.System, bob.ID, true); err != nil {
		t.Fatal(err)
	}
	// A name that is nobody's is not kept as typed (it may be a password typed into the
	// name's box): its length and a keyed tag are (unknown_name_test.go).
	const typedPassword, typedToken = "Winter!2026-Tulip", "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
	unknown := func(n int) string { return fmt.Sprintf("(unknown name %s, %d characters)", "%s", n) }
	for _, tc := range []struct {
		name, username, password string
		wantReason, wantTarget   string
		wantName                 string // as kept; "" for username; a %s for the tag
	}{
		{"wrong password", "alice", "not the password", "wrong password", alice.ID, ""},
		{"empty password", "alice", "", "wrong password", alice.ID, ""},
		{"unknown user", "mallory", testPassword, "unknown user", unknown(7), unknown(7)},
		{"disabled user", "bob", testPassword, "user disabled", bob.ID, ""},
		{"password as name", typedPassword, testPassword, "unknown user", unknown(17), unknown(17)},
		{"token as name", typedToken, testPassword, "unknown user", unknown(40), unknown(40)},
	} {
		if tc.wantName == "" {
			tc.wantName = tc.username
		}
		_, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: tc.username, Password: tc.password, IP: "198.51.100.9", RequestID: tc.name})
		if !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Errorf("%s: got %v, want ErrInvalidCredentials", tc.name, err)
			continue
		}
		var a *auditRow
		for _, r := range f.audits("user.login_failed") {
			if r.RequestID == tc.name {
				a = &r
			}
		}
		if a == nil {
			t.Errorf("%s: no user.login_failed audit row", tc.name)
			continue
		}
		if strings.Contains(tc.wantName, "%s") {
			var tag string
			if _, err := fmt.Sscanf(a.ActorName, "(unknown name %8s", &tag); err == nil {
				tc.wantName, tc.wantTarget = fmt.Sprintf(tc.wantName, tag), fmt.Sprintf(tc.wantTarget, tag)
			}
		}
		if a.Payload["reason"] != tc.wantReason || a.Payload["username"] != tc.wantName || a.TargetID != tc.wantTarget || a.ActorKind != audit.ActorAnonymous ||
			a.ActorName != tc.wantName {
			t.Errorf("%s: got audit %+v, want reason %q, target %q, anonymous actor", tc.name, a, tc.wantReason, tc.wantTarget)
		}
		if strings.Contains(a.Raw, testPassword) || (tc.password != "" && strings.Contains(a.Raw, tc.password)) || strings.Contains(a.Raw, "mallory") ||
			strings.Contains(strings.ToLower(a.Raw), strings.ToLower(typedPassword)) || strings.Contains(strings.ToLower(a.Raw), strings.ToLower(typedToken)) {
			t.Errorf("%s: audit row contains the password: %s", tc.name, a.Raw)
		}
	}
	if got := f.count(`SELECT count(*) FROM login_failures WHERE ip = '198.51.100.9'`); got != 6 {
		t.Errorf("login_failures: got %d, want 6", got)
	}
	if got := f.count(`SELECT count(*) FROM sessions`); got != 0 {
		t.Errorf("sessions after failed logins: got %d, want 0", got)
	}
	f.verifyAudit(-1)
}

// throttled returns the throttle of err of scope, or fails the test.
func throttled(t *testing.T, err error, scope string) auth.Throttle {
	t.Helper()
	te, ok := auth.ThrottleOf(err)
	if !ok || !fault.Is(err, fault.KindRateLimited) {
		t.Fatalf("got %v (%T), want a throttled sign-in", err, err)
	}
	if te.Scope != scope {
		t.Fatalf("throttled: got scope %q, want %q", te.Scope, scope)
	}
	if te.RetryAfter <= 0 || te.RetryAfter > 15*time.Minute {
		t.Fatalf("throttled: got RetryAfter %s, want within (0, 15m]", te.RetryAfter)
	}
	return te
}

// Failed guesses slow down the address they come from for that account, never the
// account's owner signing in from elsewhere (issue #17, finding 7).
func TestThrottlePerAccount(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Options{MaxAccountFailures: 3, MaxIPFailures: 5})
	alice := f.createUser("alice", auth.RoleToolUser)
	f.createUser("bob", auth.RoleToolUser)

	for i := range 3 {
		_, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: fmt.Sprintf("guess number %d", i), IP: "203.0.113.1"})
		if !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("wrong password %d: got %v, want ErrInvalidCredentials", i+1, err)
		}
	}
	// The right password no longer helps from the guessing address...
	_, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: testPassword, IP: "203.0.113.1"})
	throttled(t, err, "account from this address")
	// ...but the owner from their own address signs in: the attacker cannot lock them out.
	f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "203.0.113.99"})
	// And that success does not forgive the guessing address.
	_, err = f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: testPassword, IP: "203.0.113.1"})
	throttled(t, err, "account from this address")
	// Another account from another address is not affected.
	f.loginReq(auth.LoginRequest{Username: "bob", Password: testPassword, IP: "203.0.113.2"})

	// Throttled attempts are neither audited (the failures before them were) nor
	// counted as further failures.
	if got := f.count(`SELECT count(*) FROM login_failures WHERE username = 'alice'`); got != 3 {
		t.Errorf("login_failures for alice: got %d, want 3", got)
	}
	var reasons []string
	for _, a := range f.audits("user.login_failed") {
		reasons = append(reasons, fmt.Sprint(a.Payload["reason"]))
		if a.Payload["reason"] == "wrong password" && a.TargetID != alice.ID {
			t.Errorf("wrong password audit: got target %q, want alice's id", a.TargetID)
		}
	}
	if got, want := strings.Join(reasons, ","), "wrong password,wrong password,wrong password"; got != want {
		t.Errorf("user.login_failed reasons: got %s, want %s", got, want)
	}

	// Once the failures leave the window, alice may sign in again.
	f.exec(`UPDATE login_failures SET at = now() - interval '16 minutes'`)
	f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "203.0.113.1"})
	f.verifyAudit(-1)
}

func TestThrottleRetryAfter(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Options{MaxAccountFailures: 1, ThrottleWindow: 10 * time.Minute})
	if _, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "ghost", Password: "whatever it is", IP: "203.0.113.1"}); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Fatalf("unknown user: got %v, want ErrInvalidCredentials", err)
	}
	// The oldest failure was 4 minutes ago: about 6 minutes to wait.
	f.exec(`UPDATE login_failures SET at = now() - interval '4 minutes'`)
	_, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "ghost", Password: "whatever it is", IP: "203.0.113.1"})
	te := throttled(t, err, "account from this address")
	if te.RetryAfter < 5*time.Minute || te.RetryAfter > 6*time.Minute+time.Second {
		t.Errorf("RetryAfter: got %s, want about 6m", te.RetryAfter)
	}
}

func TestThrottlePerAddress(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Options{MaxAccountFailures: 3, MaxIPFailures: 5})
	f.createUser("alice", auth.RoleToolUser)

	// Five different (unknown) usernames from one address: no account reaches 3.
	for i := range 5 {
		_, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: fmt.Sprintf("user%d", i), Password: "some password", IP: "203.0.113.7"})
		if !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("attempt %d: got %v, want ErrInvalidCredentials", i+1, err)
		}
	}
	_, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: testPassword, IP: "203.0.113.7"})
	throttled(t, err, "address")
	// The same account from another address is fine.
	f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "203.0.113.8"})

	var reasons []string
	for _, a := range f.audits("user.login_failed") {
		reasons = append(reasons, fmt.Sprint(a.Payload["reason"], "/", a.Payload["scope"]))
	}
	want := strings.TrimSuffix(strings.Repeat("unknown user/<nil>,", 5), ",")
	if got := strings.Join(reasons, ","); got != want {
		t.Errorf("user.login_failed reasons: got %s, want %s", got, want)
	}
}

func TestSuccessClearsAccountFailures(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Options{MaxAccountFailures: 3, MaxIPFailures: 50})
	f.createUser("alice", auth.RoleToolUser)
	fail := func() {
		t.Helper()
		if _, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: "not it at all", IP: "203.0.113.3"}); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("wrong password: got %v, want ErrInvalidCredentials", err)
		}
	}
	fail()
	fail()
	f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "203.0.113.3"})
	if got := f.count(`SELECT count(*) FROM login_failures WHERE username = 'alice'`); got != 0 {
		t.Fatalf("login_failures for alice after success: got %d, want 0", got)
	}
	// Two more failures would be four in the window had success not cleared them.
	fail()
	fail()
	f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "203.0.113.3"})
}

func TestThrottleConcurrent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Options{MaxAccountFailures: 3, MaxIPFailures: 100})
	f.createUser("alice", auth.RoleToolUser)

	const n = 10
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: fmt.Sprintf("guess %d of many", i), IP: "203.0.113.10"})
		})
	}
	wg.Wait()
	var invalid, throttledN int
	for i, err := range errs {
		te, isThrottled := auth.ThrottleOf(err)
		switch {
		case errors.Is(err, auth.ErrInvalidCredentials):
			invalid++
		case isThrottled && te.Scope == "account from this address":
			throttledN++
		default:
			t.Errorf("attempt %d: got %v, want ErrInvalidCredentials or an account ThrottledError", i, err)
		}
	}
	if got := f.count(`SELECT count(*) FROM login_failures WHERE username = 'alice'`); got > 3 {
		t.Errorf("login_failures for alice after %d parallel guesses: got %d, want at most 3", n, got)
	}
	if invalid != 3 || throttledN != n-3 {
		t.Errorf("results: got %d wrong-password and %d throttled, want 3 and %d", invalid, throttledN, n-3)
	}
	f.verifyAudit(1 + 3) // alice's creation and the three counted failures
}

func TestActiveUsers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)
	bob := f.createUser("bob", auth.RoleAuditor)
	f.createUser("carol", auth.RoleGuest) // never signs in

	active := func() map[string]auth.ActiveUser {
		t.Helper()
		list, err := f.svc.ActiveUsers(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]auth.ActiveUser{}
		for _, a := range list {
			m[a.Username] = a
		}
		return m
	}
	if got := active(); len(got) != 0 {
		t.Fatalf("active users before any login: got %v, want none", got)
	}
	f.login("alice", testPassword)
	f.login("alice", testPassword)
	bs := f.login("bob", testPassword)

	got := active()
	if len(got) != 2 {
		t.Fatalf("active users: got %v, want alice and bob", got)
	}
	if a := got["alice"]; a.UserID != alice.ID || a.Sessions != 2 || a.Role != auth.RoleToolUser || a.LastSeenAt.IsZero() {
		t.Errorf("alice: got %+v, want 2 sessions as tool_user", a)
	}
	if b := got["bob"]; b.UserID != bob.ID || b.Sessions != 1 || b.Role != auth.RoleAuditor {
		t.Errorf("bob: got %+v, want 1 session as auditor", b)
	}

	p := f.mustAuth(bs.Token, bob)
	if err := f.svc.Logout(f.ctx, p, p.Actor("", "")); err != nil {
		t.Fatal(err)
	}
	got = active()
	if _, ok := got["bob"]; ok || len(got) != 1 {
		t.Errorf("active users after bob logged out: got %v, want only alice", got)
	}

	// Idle and expired sessions do not count.
	f.exec(`UPDATE sessions SET last_seen_at = now() - interval '5 hours'`)
	if got := active(); len(got) != 0 {
		t.Errorf("active users with only idle sessions: got %v, want none", got)
	}
}

func TestPrune(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)
	live := f.login("alice", testPassword)
	idle := f.login("alice", testPassword)
	expired := f.login("alice", testPassword)
	f.exec(`UPDATE sessions SET last_seen_at = now() - interval '5 hours' WHERE token_hash = $1`, sha(idle.Token))
	f.exec(`UPDATE sessions SET expires_at = now() - interval '1 minute' WHERE token_hash = $1`, sha(expired.Token))
	f.exec(`INSERT INTO login_failures (username, ip, at) VALUES
		('old', '203.0.113.1', now() - interval '20 minutes'), ('recent', '203.0.113.1', now() - interval '1 minute')`)

	if err := f.svc.Prune(f.ctx); err != nil {
		t.Fatalf("Prune: %v", err)
	}
	for _, tc := range []struct {
		name  string
		token string
		want  int
	}{
		{"live", live.Token, 1},
		{"idle", idle.Token, 0},
		{"expired", expired.Token, 0},
	} {
		if got := f.count(`SELECT count(*) FROM sessions WHERE token_hash = $1`, sha(tc.token)); got != tc.want {
			t.Errorf("%s session rows after Prune: got %d, want %d", tc.name, got, tc.want)
		}
	}
	f.mustAuth(live.Token, alice)
	var left []string
	rows, err := f.pool.Query(f.ctx, `SELECT username FROM login_failures ORDER BY username`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			t.Fatal(err)
		}
		left = append(left, u)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if got := strings.Join(left, ","); got != "recent" {
		t.Errorf("login_failures after Prune: got %q, want only the recent one", got)
	}
}

func TestLoginTruncatesUserAgent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.createUser("alice", auth.RoleToolUser)
	f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, UserAgent: strings.Repeat("Mozilla/5.0 ", 40)})
	if n := f.count(`SELECT length(user_agent) FROM sessions`); n != 300 {
		t.Errorf("stored user agent: got %d characters, want 300", n)
	}
	if ua, _ := f.oneAudit("user.login").Payload["user_agent"].(string); len(ua) != 300 {
		t.Errorf("audited user agent: got %d characters, want 300", len(ua))
	}
}

func TestStillValid(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	root := f.createUser("root", auth.RoleAdmin)
	alice := f.createUser("alice", auth.RoleToolUser)
	s := f.login("alice", testPassword)
	plain, tok := f.createToken(alice, "ci")
	sp := f.mustAuth(s.Token, alice)
	tp := f.mustAuthToken(plain, alice)
	check := func(what string, p *auth.Principal, want bool) {
		t.Helper()
		if got := f.svc.StillValid(f.ctx, p); got != want {
			t.Errorf("StillValid(%s): got %v, want %v", what, got, want)
		}
	}
	check("nil", nil, false)
	check("session", sp, true)
	check("token", tp, true)

	// Disabling alice ends both, for good: re-enabling brings back neither (the token
	// was revoked with the disable).
	if _, err := f.svc.SetDisabled(f.ctx, actorOf(root), alice.ID, true); err != nil {
		t.Fatal(err)
	}
	check("session of a disabled user", sp, false)
	check("token of a disabled user", tp, false)
	if _, err := f.svc.SetDisabled(f.ctx, actorOf(root), alice.ID, false); err != nil {
		t.Fatal(err)
	}
	check("ended session after re-enabling", sp, false)
	check("token revoked by the disable, after re-enabling", tp, false)
	if n := f.count(`SELECT count(*) FROM api_tokens WHERE id = $1 AND revoked_at IS NOT NULL`, tok.ID); n != 1 {
		t.Errorf("alice's token after the disable: not revoked, want revoked")
	}

	plain2, tok2 := f.createToken(alice, "ci-2")
	tp2 := f.mustAuthToken(plain2, alice)
	check("new token after re-enabling", tp2, true)
	if _, err := f.svc.RevokeToken(f.ctx, actorOf(alice), tok2.ID, alice.ID); err != nil {
		t.Fatal(err)
	}
	check("revoked token", tp2, false)

	s2 := f.login("alice", testPassword)
	sp2 := f.mustAuth(s2.Token, alice)
	f.exec(`UPDATE sessions SET last_seen_at = now() - interval '5 hours'`)
	check("idle session", sp2, false)
	f.exec(`UPDATE sessions SET last_seen_at = now(), expires_at = now() - interval '1 second'`)
	check("expired session", sp2, false)
}

// Failures from one IPv6 network (/64) count together: its owner has billions of
// addresses to guess from.
func TestThrottleIPv6Network(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Options{MaxAccountFailures: 3, MaxIPFailures: 50})
	f.createUser("alice", auth.RoleToolUser)
	for i := range 3 {
		ip := fmt.Sprintf("2001:db8:1:2::%x", i+1)
		if _, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: "not the password", IP: ip}); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("guess from %s: got %v", ip, err)
		}
	}
	_, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: testPassword, IP: "2001:db8:1:2::ffff"})
	throttled(t, err, "account from this address")
	f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "2001:db8:1:3::1"}) // another network
}

// A sign-in under way while a password reset commits gets no session that outlives the
// reset: the reset deletes the user's sessions, and one made with the old password
// after that would survive it.
func TestLoginRacingAReset(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)
	hash, err := auth.HashPassword("a brand new password 42")
	if err != nil {
		t.Fatal(err)
	}
	// The reset, as ResetPassword makes it: the row locked first.
	tx, err := f.pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(f.ctx)
	if _, err := tx.Exec(f.ctx, `SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, alice.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: testPassword, IP: "192.0.2.1"})
		done <- err
	}()
	// The sign-in waits on the reset's lock (wherever it takes it) before the reset commits.
	testkit.WaitForLockWait(t, f.pool, "auth.")
	if _, err := tx.Exec(f.ctx, `UPDATE users SET password_hash = $2 WHERE id = $1`, alice.ID, hash); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(f.ctx, `DELETE FROM sessions WHERE user_id = $1`, alice.ID); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Errorf("a sign-in with the old password racing the reset: got %v, want invalid credentials", err)
	}
	var left int
	if err := f.pool.QueryRow(f.ctx, `SELECT count(*) FROM sessions WHERE user_id = $1`, alice.ID).Scan(&left); err != nil || left != 0 {
		t.Errorf("sessions left after the reset: %d (%v), want none", left, err)
	}
}

// A password change whose session ended before the change took the user's row (a
// disable or reset committed meanwhile) is refused.
func TestPasswordChangeOfAnEndedSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)
	s := f.login("alice", testPassword)
	p := f.mustAuth(s.Token, alice)
	if _, err := f.pool.Exec(f.ctx, `DELETE FROM sessions WHERE user_id = $1`, alice.ID); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.ChangePassword(f.ctx, audit.Actor{Kind: audit.ActorUser, ID: alice.ID}, p, testPassword, "a brand new password 42")
	if !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("change through an ended session: got %v, want unauthenticated", err)
	}
	f.login("alice", testPassword) // unchanged
}

// Changing one's password ends the session it came from too and starts a new one in
// its place: a copy of the old cookie (a stolen one) must not outlive the change.
func TestPasswordChangeRenewsTheSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	alice := f.createUser("alice", auth.RoleToolUser)
	bob := f.createUser("bob", auth.RoleToolUser)
	here := f.login("alice", testPassword)
	elsewhere := f.login("alice", testPassword)
	theirs := f.login("bob", testPassword)
	p := f.mustAuth(here.Token, alice)

	before := time.Now()
	s, err := f.svc.ChangePassword(f.ctx, audit.Actor{Kind: audit.ActorUser, ID: alice.ID, IP: "198.51.100.4"}, p, testPassword, "a brand new password 42")
	if err != nil {
		t.Fatalf("change password: %v", err)
	}
	f.mustNotAuth(here.Token, "the session the change came from, under its old token")
	f.mustNotAuth(elsewhere.Token, "another session of the person")
	f.mustAuth(theirs.Token, bob)
	if !strings.HasPrefix(s.Token, "tws_") || s.Token == here.Token {
		t.Fatalf("new session token %q: want a new tws_ token", s.Token)
	}
	if ttl := s.ExpiresAt.Sub(before); ttl < 23*time.Hour || ttl > 25*time.Hour {
		t.Errorf("new session lifetime: got %s, want the default 24h, as at sign-in", ttl)
	}
	np := f.mustAuth(s.Token, alice)
	if bytes.Equal(np.SessionID, p.SessionID) {
		t.Errorf("new session has the old session's id")
	}
	var ip, ua string
	if err := f.pool.QueryRow(f.ctx, `SELECT ip, user_agent FROM sessions WHERE user_id = $1`, alice.ID).Scan(&ip, &ua); err != nil {
		t.Fatalf("alice's one session: %v", err)
	}
	if ip != "198.51.100.4" || ua != "test" {
		t.Errorf("new session row: got ip %q, user agent %q; want the change's address and the browser's agent", ip, ua)
	}
	if ev := f.events("session.ended"); len(ev) != 1 || ev[0].Payload.UserID != alice.ID || ev[0].Payload.Reason != "password changed" {
		t.Errorf("session.ended events: got %+v, want one for alice, password changed", ev)
	}
	if a := f.oneAudit("user.password_change"); a.Payload["other_sessions_ended"] != float64(1) {
		t.Errorf("audit payload %v: want other_sessions_ended 1", a.Payload)
	}
	// The new session is a session like any other: the next change renews it again,
	// and with no other session to end, the old id still ends.
	s2, err := f.svc.ChangePassword(f.ctx, audit.Actor{Kind: audit.ActorUser, ID: alice.ID}, np, "a brand new password 42", "another new password 43")
	if err != nil {
		t.Fatalf("second change: %v", err)
	}
	f.mustNotAuth(s.Token, "the session renewed by the first change, after the second")
	f.mustAuth(s2.Token, alice)
	f.login("alice", "another new password 43")
}

// A password change with the right current password forgives the failures recorded
// from its address, as a sign-in does: the owner's typos of the old password must not
// count against the new one.
func TestPasswordChangeForgivesTheAddressFailures(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Options{MaxAccountFailures: 3, MaxIPFailures: 50})
	alice := f.createUser("alice", auth.RoleToolUser)
	p := f.mustAuth(f.login("alice", testPassword).Token, alice)
	actor := audit.Actor{Kind: audit.ActorUser, ID: alice.ID, IP: "198.51.100.7"}
	for range 2 {
		if _, err := f.svc.ChangePassword(f.ctx, actor, p, "not the password", "a brand new password 42"); err == nil {
			t.Fatal("change with a wrong current password: accepted")
		}
	}
	if _, err := f.svc.ChangePassword(f.ctx, actor, p, testPassword, "a brand new password 42"); err != nil {
		t.Fatalf("change password: %v", err)
	}
	for range 2 {
		if _, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: "a typo", IP: "198.51.100.7"}); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("wrong sign-in: got %v", err)
		}
	}
	// Two failures since the change: under the limit of three.
	f.loginReq(auth.LoginRequest{Username: "alice", Password: "a brand new password 42", IP: "198.51.100.7"})
}

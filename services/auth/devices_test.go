package auth_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/audit"
	"github.com/toolwarden/toolwarden/services/auth"
)

// guessFrom fails a sign-in to username from the i-th of many IPv6 networks.
func (f *fixture) guessFrom(username string, i int) error {
	f.t.Helper()
	_, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: username, Password: fmt.Sprintf("guess number %d", i),
		IP: fmt.Sprintf("2001:db8:%x:%x::1", i>>16, i&0xffff)})
	return err
}

// Guesses at one account spread over many addresses (a /48's networks, a botnet) stop
// at MaxAccountFailuresAnywhere: past it, a sign-in without one of the account's device
// cookies is refused without its password being checked, the right one too. The
// owner's browser, which signed in before, still signs in; other accounts are not
// touched; reaching the limit is audited once.
func TestThrottleAcrossAddresses(t *testing.T) {
	t.Parallel()
	const limit = 6
	f := newFixture(t, &auth.Options{MaxAccountFailures: 3, MaxIPFailures: 50, MaxAccountFailuresAnywhere: limit})
	alice := f.createUser("alice", auth.RoleToolUser)
	f.createUser("bob", auth.RoleToolUser)

	// The owner's browser signed in yesterday: it holds a device cookie.
	home := f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "192.0.2.50"})
	if !strings.HasPrefix(home.Device, "twd_") {
		t.Fatalf("device cookie: got %q, want a twd_ token", home.Device)
	}
	// Bob's browser holds one of bob's.
	bobs := f.loginReq(auth.LoginRequest{Username: "bob", Password: testPassword, IP: "192.0.2.60"})

	for i := range limit {
		if err := f.guessFrom("alice", i); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("guess %d: got %v, want ErrInvalidCredentials", i+1, err)
		}
	}
	// Every further guess, from yet another network, is refused unchecked and not counted.
	for i := limit; i < limit+5; i++ {
		throttled(t, f.guessFrom("alice", i), auth.ScopeAccount)
	}
	if n := f.count(`SELECT count(*) FROM login_failures WHERE username = 'alice'`); n != limit {
		t.Errorf("alice's failures: got %d, want %d (refused guesses are not counted)", n, limit)
	}
	// The right password from a new address is refused too, while the window lasts: the
	// refusal says nothing of the password. The message says what still works.
	_, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: testPassword, IP: "198.51.100.200"})
	te := throttled(t, err, auth.ScopeAccount)
	if msg := err.Error(); !strings.Contains(msg, "from a browser that has signed in to it before") || !strings.Contains(msg, "UTC") {
		t.Errorf("message: %q, want it to name a browser that signed in before and the time", msg)
	}
	if te.RetryAfter < 14*time.Minute {
		t.Errorf("RetryAfter: %s, want about the window (15m)", te.RetryAfter)
	}
	// So is a sign-in bringing bob's device cookie: it is not one of alice's.
	_, err = f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: testPassword, IP: "198.51.100.201", Device: bobs.Device})
	throttled(t, err, auth.ScopeAccount)
	// And one with a made-up cookie.
	_, err = f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: testPassword, IP: "198.51.100.202", Device: "twd_made-up"})
	throttled(t, err, auth.ScopeAccount)

	// The owner's browser signs in, from a new address too, and keeps its cookie.
	again := f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "198.51.100.203", Device: home.Device})
	if again.Device != home.Device {
		t.Errorf("device cookie after signing in with it: got %q, want the same one renewed", again.Device)
	}
	f.mustAuth(again.Token, alice)
	// A wrong password from it is checked (and counted), not refused unchecked.
	if _, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: "a typo of mine", IP: "198.51.100.203", Device: home.Device}); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Errorf("wrong password with the device cookie: got %v, want ErrInvalidCredentials", err)
	}
	// Another account is not affected, from a network that guessed at alice too.
	f.loginReq(auth.LoginRequest{Username: "bob", Password: testPassword, IP: "2001:db8:0:1::1"})

	// Reaching the limit was audited once, for alice, by the system; the refused
	// attempts were not.
	var notices []auditRow
	for _, a := range f.audits("user.login_failed") {
		if a.Payload["scope"] == auth.ScopeAccount {
			notices = append(notices, a)
		}
	}
	if len(notices) != 1 || notices[0].TargetID != alice.ID || notices[0].ActorKind != audit.ActorSystem ||
		notices[0].Payload["failures"] != float64(limit) || notices[0].Payload["addresses"] != float64(limit) {
		t.Errorf("account throttle audit entries: got %+v, want one for alice with %d failures from %d addresses", notices, limit, limit)
	}
	if len(notices) > 0 && audit.ActionGroup(notices[0].Action) != "auth" {
		got := audit.ActionGroup(notices[0].Action)
		t.Errorf("the entry's action group: %q, want auth", got)
	}
	if n := len(f.audits("user.login_failed")); n != limit+1+1 {
		t.Errorf("user.login_failed entries: got %d, want %d guesses, the owner's typo and the one notice", n, limit+2)
	}

	// The account stays at the limit (the owner's typo added one): a failure that keeps
	// it there within the window is not audited as reaching it again.
	f.exec(`DELETE FROM login_failures WHERE username = 'alice' AND ip = '198.51.100.203'`)
	f.exec(`UPDATE login_failures SET at = now() - interval '16 minutes' WHERE id = (SELECT min(id) FROM login_failures WHERE username = 'alice')`)
	if err := f.guessFrom("alice", 1000); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Fatalf("a guess once one failure left the window: got %v, want ErrInvalidCredentials", err)
	}
	throttled(t, f.guessFrom("alice", 1001), auth.ScopeAccount)
	if n := f.count(`SELECT count(*) FROM audit_log WHERE action = 'user.login_failed' AND payload->>'scope' = 'account'`); n != 1 {
		t.Errorf("account throttle audit entries after re-reaching the limit in the window: %d, want 1", n)
	}

	// Once the failures leave the window, alice signs in from anywhere again.
	f.exec(`UPDATE login_failures SET at = now() - interval '16 minutes'`)
	f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "198.51.100.210"})
	f.verifyAudit(-1)
}

// An unknown username is throttled the same way (a difference would tell which names
// are users), without an audit entry of its own.
func TestThrottleAcrossAddressesUnknownUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Options{MaxAccountFailuresAnywhere: 3})
	for i := range 3 {
		if err := f.guessFrom("ghost", i); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("guess %d: got %v, want ErrInvalidCredentials", i+1, err)
		}
	}
	throttled(t, f.guessFrom("ghost", 3), auth.ScopeAccount)
	if n := f.count(`SELECT count(*) FROM audit_log WHERE payload->>'scope' = 'account'`); n != 0 {
		t.Errorf("account throttle entries for a name that is nobody's: %d, want 0", n)
	}
}

// The per-address limits still hold for a browser with a device cookie: the cookie
// exempts from the account's limit across addresses only.
func TestDeviceCookieKeepsPerAddressLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Options{MaxAccountFailures: 3, MaxIPFailures: 50})
	f.createUser("alice", auth.RoleToolUser)
	home := f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "203.0.113.1"})
	for i := range 3 {
		_, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: fmt.Sprintf("guess %d", i), IP: "203.0.113.1", Device: home.Device})
		if !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("guess %d: got %v, want ErrInvalidCredentials", i+1, err)
		}
	}
	_, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: testPassword, IP: "203.0.113.1", Device: home.Device})
	throttled(t, err, "account from this address")
}

// A password change or reset ends the user's device cookies: they were proof of a
// sign-in with the password that no longer is. Signing out keeps them.
func TestPasswordChangeEndsDeviceCookies(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Options{MaxAccountFailuresAnywhere: 2})
	alice := f.createUser("alice", auth.RoleToolUser)
	admin := f.createUser("root", auth.RoleAdmin)
	const newPassword = "a brand new passphrase"

	home := f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "192.0.2.1"})
	p := f.mustAuth(home.Token, alice)
	if err := f.svc.Logout(f.ctx, p, p.Actor("192.0.2.1", "")); err != nil {
		t.Fatal(err)
	}
	if n := f.count(`SELECT count(*) FROM login_devices WHERE user_id = $1`, alice.ID); n != 1 {
		t.Fatalf("alice's device cookies after signing out: %d, want 1 (kept)", n)
	}
	// The cookie is stored as its hash only.
	if n := f.count(`SELECT count(*) FROM login_devices WHERE token_hash = $1`, sha(home.Device)); n != 1 {
		t.Fatalf("device cookie rows with the token's hash: %d, want 1", n)
	}
	if n := f.count(`SELECT count(*) FROM login_devices d WHERE strpos(d::text, $1) > 0`, strings.TrimPrefix(home.Device, "twd_")); n != 0 {
		t.Fatalf("device cookie rows holding the token: %d, want 0", n)
	}
	s := f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "192.0.2.1", Device: home.Device})
	changed, err := f.svc.ChangePassword(f.ctx, f.mustAuth(s.Token, alice).Actor("192.0.2.1", ""), f.mustAuth(s.Token, alice), testPassword, newPassword)
	if err != nil {
		t.Fatal(err)
	}
	// The browser that changed it gets a new one; the others' ended.
	if changed.Device == "" || changed.Device == home.Device {
		t.Fatalf("device cookie given by the password change: %q, want a new one", changed.Device)
	}
	if n := f.count(`SELECT count(*) FROM login_devices WHERE user_id = $1 AND token_hash <> $2`, alice.ID, sha(changed.Device)); n != 0 {
		t.Fatalf("alice's other device cookies after a password change: %d, want 0", n)
	}
	// Under attack, the old cookie no longer gets through; the new one does.
	for i := range 2 {
		if err := f.guessFrom("alice", i); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("guess %d: got %v", i+1, err)
		}
	}
	_, err = f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: newPassword, IP: "192.0.2.1", Device: home.Device})
	throttled(t, err, auth.ScopeAccount)
	if _, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: newPassword, IP: "192.0.2.1", Device: changed.Device}); err != nil {
		t.Fatalf("sign-in with the device cookie the password change gave, under attack: %v", err)
	}

	// A reset by an admin ends them too.
	f.exec(`DELETE FROM login_failures`)
	s = f.loginReq(auth.LoginRequest{Username: "alice", Password: newPassword, IP: "192.0.2.1", Device: home.Device})
	if s.Device == home.Device || s.Device == "" {
		t.Fatalf("device cookie after the old one ended: got %q, want a new one", s.Device)
	}
	if _, err := f.svc.ResetPassword(f.ctx, actorOf(admin), alice.ID, testPassword); err != nil {
		t.Fatal(err)
	}
	if n := f.count(`SELECT count(*) FROM login_devices WHERE user_id = $1`, alice.ID); n != 0 {
		t.Fatalf("alice's device cookies after a reset: %d, want 0", n)
	}
	// An admin's reset of alice's does not end the admin's own.
	f.loginReq(auth.LoginRequest{Username: "root", Password: testPassword, IP: "192.0.2.9"})
	if _, err := f.svc.ResetPassword(f.ctx, actorOf(admin), alice.ID, newPassword); err != nil {
		t.Fatal(err)
	}
	if n := f.count(`SELECT count(*) FROM login_devices WHERE user_id = $1`, admin.ID); n != 1 {
		t.Fatalf("root's device cookies after resetting alice's password: %d, want 1", n)
	}
}

// Each user keeps the 20 most recently used device cookies, and Prune drops those
// unused for 180 days.
func TestDeviceCookiesBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Options{MaxIPFailures: 1000})
	alice := f.createUser("alice", auth.RoleToolUser)
	first := f.login("alice", testPassword)
	f.exec(`UPDATE login_devices SET last_used_at = now() - interval '1 day', created_at = now() - interval '1 day'`)
	for range 22 {
		f.login("alice", testPassword)
	}
	if n := f.count(`SELECT count(*) FROM login_devices WHERE user_id = $1`, alice.ID); n != 20 {
		t.Fatalf("alice's device cookies after 23 browsers: %d, want 20", n)
	}
	if n := f.count(`SELECT count(*) FROM login_devices WHERE token_hash = $1`, sha(first.Device)); n != 0 {
		t.Errorf("the least recently used cookie: still kept")
	}
	f.exec(`UPDATE login_devices SET last_used_at = now() - interval '181 days' WHERE token_hash IN (SELECT token_hash FROM login_devices LIMIT 5)`)
	if err := f.svc.Prune(f.ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.count(`SELECT count(*) FROM login_devices WHERE user_id = $1`, alice.ID); n != 15 {
		t.Fatalf("alice's device cookies after Prune: %d, want 15", n)
	}
}

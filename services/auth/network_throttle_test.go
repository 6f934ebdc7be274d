package auth_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/toolwarden/toolwarden/services/auth"
)

// Failed sign-ins from one IPv6 /48 or /56 are counted together as well as per /64:
// past 5 and 3 times the address limit, every /64 in the network is refused without a
// check, whatever the account, and other networks are not. Each /64 was counted alone,
// so a /48 got 65,536 times the address limit.
func TestThrottleWiderIPv6Networks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Options{MaxIPFailures: 2}) // a /56: 6 failures, a /48: 10
	f.createUser("alice", auth.RoleToolUser)
	fail := func(user, ip string) {
		t.Helper()
		if _, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: user, Password: "a wrong guess", IP: ip}); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("sign-in as %s from %s: got %v, want ErrInvalidCredentials", user, ip, err)
		}
	}

	// The /48 2001:db8:aa00::/48: one failure from each of 10 /56s, alice's or nobody's.
	for i := range 10 {
		user := "alice"
		if i%2 == 1 {
			user = fmt.Sprintf("nobody-%d", i)
		}
		fail(user, fmt.Sprintf("2001:db8:aa00:%x00::%x", i, i+1))
	}
	for _, ip := range []string{"2001:db8:aa00:ff00::1", "2001:db8:aa00:ffff:1234::9"} {
		_, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: testPassword, IP: ip})
		throttled(t, err, auth.ScopeNetwork)
		_, err = f.svc.Login(f.ctx, auth.LoginRequest{Username: "someone-else", Password: "x", IP: ip})
		throttled(t, err, auth.ScopeNetwork)
	}
	f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "2001:db8:bb00::1"}) // another /48
	// Alice's own browser (its device cookie, from a sign-in elsewhere) is not refused for
	// her network's failures: a carrier's or an office's /48 is many people's. A cookie
	// that is not hers is.
	home := f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "198.51.100.7"})
	f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "2001:db8:aa00:fe00::1", Device: home.Device})
	_, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: testPassword, IP: "2001:db8:aa00:fe00::2", Device: "twd_made-up"})
	throttled(t, err, auth.ScopeNetwork)
	// The network's rows are not an account's: alice has her 5 failures, no more.
	if n := f.count(`SELECT count(*) FROM login_failures WHERE username = 'alice'`); n != 5 {
		t.Errorf("alice's failures: %d, want 5", n)
	}

	// The /56 2001:db8:cc00:100::/56: 6 failures from 3 /64s; a 4th /64 is refused, a
	// /64 of the next /56 is not.
	for i := range 6 {
		fail("alice", fmt.Sprintf("2001:db8:cc00:1%02x::1", i/2))
	}
	_, err = f.svc.Login(f.ctx, auth.LoginRequest{Username: "alice", Password: testPassword, IP: "2001:db8:cc00:1ff::1"})
	throttled(t, err, auth.ScopeNetwork)
	f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "2001:db8:cc00:200::1"})

	// A sign-in forgives its own /64's failures in its networks' counts too: 4 in the
	// /56, 1 forgiven, 3 more make 6 (7 would have refused the last one).
	for i := range 4 {
		fail("alice", fmt.Sprintf("2001:db8:dd00:1%02x::1", i))
	}
	f.loginReq(auth.LoginRequest{Username: "alice", Password: testPassword, IP: "2001:db8:dd00:100::7"})
	for i := range 3 {
		fail("alice", fmt.Sprintf("2001:db8:dd00:1%02x::1", 4+i))
	}
}

package auth_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/auth"
)

// Parallel failed sign-ins from many /64s of one IPv6 /56 stop at the /56's limit:
// each attempt holds its networks' locks too, not only its /64's, so they cannot all
// pass the check before the first failure is counted (8 at once checked, then all
// counted, overshooting a limit of 3).
func TestWiderIPv6NetworkLimitHoldsUnderParallelAttempts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Options{MaxIPFailures: 1}) // a /56: 3 failures, a /48: 5
	const attempts = 8                                  // as many sign-in transactions as run at once
	errs := make([]error, attempts)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range attempts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// Another /64 and another name each: no other lock is shared.
			_, errs[i] = f.svc.Login(f.ctx, auth.LoginRequest{Username: fmt.Sprintf("nobody-%d", i), Password: "a wrong guess",
				IP: fmt.Sprintf("2001:db8:aa:1%02x::1", i)})
		}()
	}
	close(start)
	wg.Wait()
	failed, refused := 0, 0
	for i, err := range errs {
		switch {
		case errors.Is(err, auth.ErrInvalidCredentials):
			failed++
		case err != nil:
			if th, ok := auth.ThrottleOf(err); ok && th.Scope == auth.ScopeNetwork {
				refused++
				continue
			}
			t.Errorf("attempt %d: %v", i, err)
		default:
			t.Errorf("attempt %d signed in", i)
		}
	}
	if failed != 3 || refused != attempts-3 {
		t.Errorf("parallel attempts from one /56: %d checked and failed, %d refused for the network; want 3 and %d", failed, refused, attempts-3)
	}
	if n := f.count(`SELECT count(*) FROM login_failures WHERE ip = '2001:db8:aa:100::/56'`); n != 3 {
		t.Errorf("failures counted for the /56: %d, want its limit, 3", n)
	}
}

// A network refused for its failures is told to wait until fewer than its limit are
// left in the window: until its limit-th newest failure leaves, not its oldest (which,
// with more than the limit counted, said to come back while it would still be refused).
func TestWiderIPv6NetworkRetryAfter(t *testing.T) {
	t.Parallel()
	f := newFixture(t, &auth.Options{MaxIPFailures: 1, ThrottleWindow: 15 * time.Minute}) // a /56: 3
	for _, ago := range []string{"14 minutes", "13 minutes", "5 minutes", "2 minutes", "1 minute"} {
		f.exec(`INSERT INTO login_failures (username, ip, at) VALUES ('NETWORK x', '2001:db8:bb:100::/56', now() - $1::interval)`, ago)
	}
	_, err := f.svc.Login(f.ctx, auth.LoginRequest{Username: "nobody", Password: "x", IP: "2001:db8:bb:1ff::1"})
	th := throttled(t, err, auth.ScopeNetwork)
	// The third newest failure is 5 minutes old: 10 minutes to go, not the oldest's 1.
	if th.RetryAfter < 9*time.Minute || th.RetryAfter > 10*time.Minute {
		t.Errorf("Retry-After for the /56: %s, want about 10m (its 3rd newest failure leaving the 15m window)", th.RetryAfter)
	}
}

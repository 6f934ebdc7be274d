package auth

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/toolwarden/toolwarden/services/fault"
)

// Sign-in admission: each attempt holds a pool connection for its whole transaction,
// mostly waiting on its address's lock, so without these a flood from one host would
// take every connection (db.DefaultMaxConns) from every other request.
const (
	// loginMaxTx is how many sign-in transactions one process runs at once: a quarter
	// of the default pool.
	loginMaxTx = 8
	// loginMaxPerAddress is how many attempts one address (throttleKey) may have in
	// flight or waiting; only one of them is in a transaction at a time, as the
	// address's lock would serialize them anyway. Enough for an office behind one NAT
	// address signing in at once.
	loginMaxPerAddress = 16
	// loginMaxWaiting is how many attempts may wait overall, so goroutines cannot
	// pile up without bound.
	loginMaxWaiting = 256
	// loginBusyRetry is the Retry-After of an attempt refused by admission.
	loginBusyRetry = time.Second
	// loginDeviceLane is how many attempts bringing a known device cookie may wait
	// beyond loginMaxWaiting, one per cookie, and loginKnownDevices how many cookies
	// the process knows (admission.know).
	loginDeviceLane   = 64
	loginKnownDevices = 10000
)

// admission lets sign-ins into their transactions: waiting happens here, in memory,
// not while holding a database connection.
type admission struct {
	slots                  chan struct{} // one per transaction running
	perAddress, maxWaiting int

	mu      sync.Mutex
	waiting int
	addrs   map[string]*addressTurn
	// known are the hashes of the device cookies this process gave or renewed at a
	// sign-in or password change: a flood of attempts (a /48's names, say) fills the
	// waiters, and the owner's browser that signed in before must still get a turn.
	// Knowing one is checked in memory, so a flood of made-up cookies costs nothing; it
	// lets an attempt wait past loginMaxWaiting only, never past the checks of Login.
	// A browser that signed in through another replica, or before a restart, is not
	// known (looking it up would be a query per refused attempt).
	known map[string]struct{}
	lane  map[string]struct{} // known devices with an attempt waiting past loginMaxWaiting
}

// addressTurn is one address's attempts in flight or waiting.
type addressTurn struct {
	n    int
	turn chan struct{} // holds a token while none of them is in a transaction
}

func newAdmission(maxTx, perAddress, maxWaiting int) *admission {
	return &admission{slots: make(chan struct{}, maxTx), perAddress: perAddress, maxWaiting: maxWaiting, addrs: map[string]*addressTurn{},
		known: map[string]struct{}{}, lane: map[string]struct{}{}}
}

// know remembers the device cookie token (admission.known). Past loginKnownDevices,
// one known before is forgotten, whichever the map gives first.
func (a *admission) know(token string) {
	if token == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.known) >= loginKnownDevices {
		for k := range a.known {
			delete(a.known, k)
			break
		}
	}
	a.known[string(hashToken(token))] = struct{}{}
}

// loginBusy is the throttled fault of an attempt refused by admission; scope is
// "address" (too many from it at once) or "server" (too many overall).
func loginBusy(scope string) *fault.Error {
	msg := "too many sign-ins or password changes at once from this address"
	if scope != "address" {
		msg = "too many sign-ins or password changes at once"
	}
	return fault.RateLimited(fmt.Sprintf("%s; try again in %s", msg, loginBusyRetry), loginBusyRetry).
		WithDetails(Throttle{RetryAfterSeconds: int(loginBusyRetry.Seconds()), RetryAfter: loginBusyRetry, Scope: scope, Busy: true})
}

// admit waits, honouring ctx, until address's attempt may begin its transaction, and
// returns the release to call once it has ended. Beyond the limits it refuses at once
// with loginBusy.
func (a *admission) admit(ctx context.Context, address string) (release func(), err error) {
	return a.admitWith(ctx, address, "")
}

// admitWith is admit for an attempt that brought the device cookie device (or ""): a
// known one (know) may wait past the limit of waiters overall, in a lane of its own.
func (a *admission) admitWith(ctx context.Context, address, device string) (release func(), err error) {
	lane := "" // the known device's key while its attempt is in the lane
	a.mu.Lock()
	q := a.addrs[address]
	switch {
	case q != nil && q.n >= a.perAddress:
		a.mu.Unlock()
		return nil, loginBusy("address")
	case a.waiting >= a.maxWaiting:
		key := string(hashToken(device))
		_, known := a.known[key]
		_, inLane := a.lane[key]
		if device == "" || !known || inLane || len(a.lane) >= loginDeviceLane {
			a.mu.Unlock()
			return nil, loginBusy("server")
		}
		lane = key
		a.lane[key] = struct{}{}
	}
	if q == nil {
		q = &addressTurn{turn: make(chan struct{}, 1)}
		q.turn <- struct{}{}
		a.addrs[address] = q
	}
	q.n++
	a.waiting++
	a.mu.Unlock()

	select {
	case <-q.turn:
	case <-ctx.Done():
		a.leave(address, q, true, lane)
		return nil, ctx.Err()
	}
	select {
	case a.slots <- struct{}{}:
	case <-ctx.Done():
		q.turn <- struct{}{}
		a.leave(address, q, true, lane)
		return nil, ctx.Err()
	}
	a.mu.Lock()
	a.waiting--
	a.mu.Unlock()
	return func() {
		<-a.slots
		q.turn <- struct{}{}
		a.leave(address, q, false, lane)
	}, nil
}

// leave ends one of address's attempts (in the lane of the device lane, if not ""); its
// turn token is back by then.
func (a *admission) leave(address string, q *addressTurn, waiting bool, lane string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if waiting {
		a.waiting--
	}
	if lane != "" {
		delete(a.lane, lane)
	}
	if q.n--; q.n == 0 {
		delete(a.addrs, address)
	}
}

// admitAttempt admits a sign-in or a password change (what, for an error) from address,
// with the device cookie it brought (or ""):
// a refusal is its Throttled fault as it is, not logged (a flood refused here would flood
// the log instead).
func (s *Service) admitAttempt(ctx context.Context, address, device, what string) (release func(), err error) {
	release, err = s.logins.admitWith(ctx, address, device)
	if err != nil {
		if _, ok := ThrottleOf(err); ok {
			return nil, err
		}
		return nil, fmt.Errorf("auth: %s: %w", what, err)
	}
	return release, nil
}

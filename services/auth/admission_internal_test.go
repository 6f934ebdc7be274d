package auth

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAdmissionLimits: beyond an address's allowance, or the waiters overall, attempts
// are refused at once; a waiter whose request ends leaves; nothing is left behind.
func TestAdmissionLimits(t *testing.T) {
	t.Parallel()
	a := newAdmission(1, 2, 3)
	ctx := context.Background()
	waiting := func(want int) {
		t.Helper()
		for bound := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			a.mu.Lock()
			n := a.waiting
			a.mu.Unlock()
			if n == want {
				return
			}
			if time.Now().After(bound) {
				t.Fatalf("waiting attempts: got %d, want %d", n, want)
			}
		}
	}
	refused := func(address, scope string) {
		t.Helper()
		_, err := a.admit(ctx, address)
		if th, ok := ThrottleOf(err); !ok || th.Scope != scope || !th.Busy || th.RetryAfter != loginBusyRetry {
			t.Fatalf("admit %q: got %v, want refused for the %s", address, err, scope)
		}
	}
	type admitted struct {
		release func()
		err     error
	}
	start := func(ctx context.Context, address string) chan admitted {
		ch := make(chan admitted, 1)
		go func() {
			r, err := a.admit(ctx, address)
			ch <- admitted{r, err}
		}()
		return ch
	}

	first, err := a.admit(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	secondA := start(ctx, "a")
	waiting(1)
	refused("a", "address") // the first and second are its allowance
	cctx, cancel := context.WithCancel(ctx)
	b := start(cctx, "b")
	c := start(ctx, "c")
	waiting(3)
	refused("d", "server")

	cancel()
	if r := <-b; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("admit after its request ended: got %v, want context.Canceled", r.err)
	}
	waiting(2)
	first()
	for range 2 {
		var r admitted
		select {
		case r = <-secondA:
		case r = <-c:
		case <-time.After(10 * time.Second):
			t.Fatal("waiters: not admitted within 10s of the slot's release")
		}
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.release()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.waiting != 0 || len(a.addrs) != 0 || len(a.slots) != 0 {
		t.Errorf("after every attempt ended: got %d waiting, addresses %v, %d slots taken; want none", a.waiting, a.addrs, len(a.slots))
	}
}

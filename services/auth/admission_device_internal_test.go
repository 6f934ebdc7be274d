package auth

import (
	"context"
	"testing"
	"time"
)

// With every waiter's place taken (a flood), an attempt bringing a device cookie this
// process gave still waits for its turn, one per cookie; a made-up or unknown cookie is
// refused as before. The flood filled the waiters and refused the owner's browser too.
func TestAdmissionDeviceLane(t *testing.T) {
	t.Parallel()
	a := newAdmission(1, 2, 1)
	ctx := context.Background()
	refused := func(address, device string) {
		t.Helper()
		if _, err := a.admitWith(ctx, address, device); err == nil {
			t.Fatalf("admit %q with %q: admitted, want refused", address, device)
		} else if th, ok := ThrottleOf(err); !ok || th.Scope != "server" {
			t.Fatalf("admit %q with %q: got %v, want refused for the server", address, device, err)
		}
	}
	first, err := a.admit(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	flood := make(chan func(), 1)
	go func() {
		r, err := a.admit(ctx, "b")
		if err != nil {
			t.Error(err)
		}
		flood <- r
	}()
	for bound := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		a.mu.Lock()
		n := a.waiting
		a.mu.Unlock()
		if n == 1 {
			break
		} else if time.Now().After(bound) {
			t.Fatal("the flood's attempt is not waiting")
		}
	}
	refused("c", "")
	refused("c", "twd_made-up")
	a.know("twd_owners")
	owner := make(chan func(), 1)
	go func() {
		r, err := a.admitWith(ctx, "c", "twd_owners")
		if err != nil {
			t.Error(err)
		}
		owner <- r
	}()
	for bound := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		a.mu.Lock()
		n := len(a.lane)
		a.mu.Unlock()
		if n == 1 {
			break
		} else if time.Now().After(bound) {
			t.Fatal("the owner's attempt is not waiting in the lane")
		}
	}
	refused("d", "twd_owners") // one attempt per cookie past the limit
	first()
	for range 2 {
		select {
		case r := <-flood:
			r()
		case r := <-owner:
			r()
		case <-time.After(10 * time.Second):
			t.Fatal("not admitted within 10s of the slot's release")
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.waiting != 0 || len(a.addrs) != 0 || len(a.slots) != 0 || len(a.lane) != 0 {
		t.Errorf("after every attempt ended: %d waiting, addresses %v, %d slots, lane %d; want none", a.waiting, a.addrs, len(a.slots), len(a.lane))
	}
}

package replicahop

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/services/secrets"
)

// One sending replica fills its share of the nonces a Verifier remembers, not all of
// them: a flood of requests through one replica leaves the others' hops passing.
func TestBusyPerSender(t *testing.T) {
	t.Parallel()
	key, err := secrets.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := secrets.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier(keys, "self")
	now := time.Now()
	verify := func(from string) error {
		h := Sign(keys, Hop{From: from, To: "self"}, http.MethodGet, "/terminals/x", nil, now)
		_, err := v.Verify(h, http.MethodGet, "/terminals/x", nil, now)
		return err
	}
	accepted := 0
	for range maxSeen {
		if err := verify("flood"); errors.Is(err, ErrBusy) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		accepted++
	}
	if accepted != maxSeenPerSender {
		t.Fatalf("one replica's hops were accepted %d times before ErrBusy, want %d", accepted, maxSeenPerSender)
	}
	if err := verify("other"); err != nil {
		t.Fatalf("another replica's hop while the first one's share is full: %v", err)
	}
	// Once its nonces are forgotten, the flooding replica passes again.
	later := now.Add(2*MaxSkew + 2*time.Second)
	h := Sign(keys, Hop{From: "flood", To: "self"}, http.MethodGet, "/terminals/x", nil, later)
	if _, err := v.Verify(h, http.MethodGet, "/terminals/x", nil, later); err != nil {
		t.Fatalf("the flooding replica's hop after its nonces expired: %v", err)
	}
	if n := v.Remembered(); n != 1 {
		t.Fatalf("%d nonces remembered after the sweep, want 1", n)
	}
}

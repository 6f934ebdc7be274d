package web

import (
	"testing"

	"github.com/toolwarden/toolwarden/handlers"
)

// Requests about runs on other replicas are bounded per person (each takes a nonce of
// the other replica's): a burst of 20, and one person's flood leaves another's alone.
func TestHopLimits(t *testing.T) {
	var l handlers.PersonLimits
	refused := 0
	for range 40 {
		if !l.Allow("flood") {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("40 forwarded requests at once: none refused, want those past a burst of 20")
	}
	if !l.Allow("someone else") {
		t.Fatal("another person's request was refused")
	}
}

package web

import "testing"

// Forwarded run requests are bounded per person (each takes a nonce of the owner's):
// a burst of 20, and one person's flood leaves another's requests alone.
func TestHopLimits(t *testing.T) {
	var l hopLimits
	refused := 0
	for range 40 {
		if !l.allow("flood") {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("40 forwarded requests at once: none refused, want those past a burst of 20")
	}
	if !l.allow("someone else") {
		t.Fatal("another person's request was refused")
	}
}

package planner

import (
	"math/rand/v2"
	"testing"

	"github.com/toolwarden/toolwarden/internal/textcheck"
)

// boundedDistance agrees with the full edit distance wherever that is within the
// bound, and says "past it" (bound+1) otherwise.
func TestBoundedDistanceAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		b := make([]byte, r.IntN(14))
		for i := range b {
			b[i] = "abc_"[r.IntN(4)]
		}
		return string(b)
	}
	for range 20000 {
		a, b, k := word(), word(), r.IntN(10)
		want := min(textcheck.EditDistance(a, b), k+1)
		if got := boundedDistance(a, b, k); got != want {
			t.Fatalf("boundedDistance(%q, %q, %d) = %d, want %d", a, b, k, got, want)
		}
	}
}

package canonjson_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/toolwarden/toolwarden/internal/canonjson"
	"github.com/toolwarden/toolwarden/internal/canonjson/canonjsontest"
)

// TestIsCanonical: whatever IsCanonical accepts, Canonical returns unchanged; what
// Canonical returns (the corpus, re-encoded) it mostly accepts. Besides the corpus, the
// inputs are the canonical forms cut, with bytes flipped and with bytes inserted.
func TestIsCanonical(t *testing.T) {
	t.Parallel()
	var inputs [][]byte
	var canon [][]byte
	for _, raw := range canonjsontest.Corpus {
		inputs = append(inputs, []byte(raw))
		if c, err := canonjson.Canonical([]byte(raw)); err == nil {
			canon = append(canon, c)
			inputs = append(inputs, c)
		}
	}
	r := rand.New(rand.NewPCG(5, 23))
	insert := []byte(` "\,:{}[]<>&0e.-+aZé` + "\u2028\x01\xff")
	for _, c := range canon {
		for range 200 {
			m := bytes.Clone(c)
			switch n := len(m); {
			case n == 0:
			case r.IntN(3) == 0:
				m = m[:r.IntN(n)]
			case r.IntN(2) == 0:
				m[r.IntN(n)] = insert[r.IntN(len(insert))]
			default:
				at := r.IntN(n + 1)
				m = append(m[:at], append([]byte{insert[r.IntN(len(insert))]}, m[at:]...)...)
			}
			inputs = append(inputs, m)
		}
	}
	accepted := 0
	for _, in := range inputs {
		if !canonjson.IsCanonical(in) {
			continue
		}
		accepted++
		got, err := canonjson.Canonical(in)
		if err != nil || !bytes.Equal(got, in) {
			t.Fatalf("IsCanonical(%q) is true, but Canonical gives %q (%v)", in, got, err)
		}
	}
	acceptedCanon := 0
	for _, c := range canon {
		if canonjson.IsCanonical(c) {
			acceptedCanon++
		}
	}
	if acceptedCanon < len(canon)*3/4 || accepted < 300 {
		t.Fatalf("IsCanonical accepted %d of %d canonical texts and %d inputs in all: too few to be of use", acceptedCanon, len(canon), accepted)
	}
}

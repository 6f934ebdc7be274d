package analytics

import "testing"

// A rollup's histogram survives its encoding; a malformed one is refused, not misread.
func TestHistEncoding(t *testing.T) {
	var h hist
	h[0], h[17], h[100], h[159] = 1, 300, 1<<40, 7
	back, err := decodeHist(h.encode())
	if err != nil || *back != h {
		t.Fatalf("round trip: %v %v", err, back)
	}
	if e, err := decodeHist(nil); err != nil || e.n() != 0 {
		t.Fatalf("empty: %v %v", err, e)
	}
	for _, bad := range [][]byte{{160, 1}, {5, 1, 5, 1}, {7, 1, 3, 1}, {3}, {3, 0x80}} {
		if _, err := decodeHist(bad); err == nil {
			t.Errorf("%v decoded", bad)
		}
	}
}

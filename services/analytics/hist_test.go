package analytics

import (
	"math"
	"testing"
)

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
	for _, bad := range [][]byte{{5, 1, 5, 1}, {7, 1, 3, 1}, {3}, {3, 0x80}} {
		if _, err := decodeHist(bad); err == nil {
			t.Errorf("%v decoded", bad)
		}
	}
}

// A percentile is interpolated between the durations either side of its rank, as
// percentile_cont does, each within its bucket: 1 ms and 100 ms have a p50 of about
// 50.5 ms, not 1 ms.
func TestHistQuantile(t *testing.T) {
	var h hist
	if h.quantile(0.5) != nil {
		t.Fatal("an empty histogram has a p50")
	}
	h[16], h[69] = 1, 1 // 1 ms, 100 ms
	for _, c := range []struct{ p, want float64 }{{0, 1}, {0.5, 50.5}, {0.95, 95.05}, {1, 100}} {
		if got := h.quantile(c.p); math.Abs(*got-c.want)/c.want > 0.05 {
			t.Errorf("p%v: %v, want about %v", c.p*100, *got, c.want)
		}
	}
}

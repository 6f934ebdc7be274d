package analytics

import (
	"encoding/binary"
	"errors"
	"math"
)

// Latencies are kept as histograms: bucket k holds durations in
// [2^((k-16)/8), 2^((k-15)/8)) ms, an eighth of an octave each (about 9% wide), from
// 0.25 ms to about 11 days (the first and last buckets take what lies beyond). Histograms
// add up, so a day's, a tool's, a server's and the period's percentiles all come from
// the daily rollups without reading a call twice; a percentile is interpolated between
// its buckets' middles, so it is within a few percent of the exact one. Buckets are as
// many as a rollup's one-byte bucket number allows: with 160 the last began at 4.4
// minutes, and a call that waited hours for a person showed as 4.4 minutes (rollups
// rolled before then still have such calls in bucket 159).
const histBuckets = 256

// bucketSQL is the bucket of a call's duration_ms, as SQL (NULL when not timed).
const bucketSQL = `least(255, greatest(0, floor(8 * ln(greatest(duration_ms, 0.25)::float8) / ln(2.0)) + 16))::int`

// hist is a latency histogram.
type hist [histBuckets]int64

func (h *hist) add(o *hist) {
	for i := range h {
		h[i] += o[i]
	}
}

func (h *hist) n() int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	return n
}

// quantile is the p-quantile (0..1) of the durations, nil when there are none. As
// percentile_cont does, it takes the rank p*(n-1) and interpolates linearly between the
// durations at the ranks either side, each taken as its bucket's geometric middle (within
// about 4.5% of any duration in the bucket): placing the rank within one bucket alone
// made the p50 of 1 ms and 100 ms come out 1.09 ms.
func (h *hist) quantile(p float64) *float64 {
	n := h.n()
	if n == 0 {
		return nil
	}
	rank := p * float64(n-1)
	lo := math.Floor(rank)
	v := h.at(int64(lo))
	if rank > lo {
		v += (rank - lo) * (h.at(int64(lo)+1) - v)
	}
	v = math.Round(v*1000) / 1000
	return &v
}

// at is the duration of rank i (0 the shortest), as its bucket's geometric middle.
func (h *hist) at(i int64) float64 {
	k := 0
	for ; k < histBuckets-1; k++ {
		if i < h[k] {
			break
		}
		i -= h[k]
	}
	return middle(k)
}

// middle is bucket k's geometric middle, in milliseconds.
func middle(k int) float64 { return math.Pow(2, (float64(k)-15.5)/8) }

// encode is the histogram as stored in a rollup: each non-empty bucket's number (one
// byte) and its count (a uvarint), in bucket order.
func (h *hist) encode() []byte {
	out := make([]byte, 0, 64)
	for k, c := range h {
		if c > 0 {
			out = append(out, byte(k))
			out = binary.AppendUvarint(out, uint64(c))
		}
	}
	return out
}

// decodeHist reads what encode wrote.
func decodeHist(b []byte) (*hist, error) {
	var h hist
	if err := h.addEncoded(b); err != nil {
		return nil, err
	}
	return &h, nil
}

// addEncoded adds what encode wrote to h, in place: a report adds up a rollup row's
// histogram this way without a 2 KB histogram of its own per row. A malformed one
// leaves h part added to.
func (h *hist) addEncoded(b []byte) error {
	prev := -1
	for len(b) > 0 {
		k := int(b[0])
		c, n := binary.Uvarint(b[1:])
		if k >= histBuckets || k <= prev || n <= 0 || c > math.MaxInt64 {
			return errors.New("analytics: a rollup histogram is malformed")
		}
		h[k] += int64(c)
		prev, b = k, b[1+n:]
	}
	return nil
}

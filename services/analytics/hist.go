package analytics

import (
	"encoding/binary"
	"errors"
	"math"
)

// Latencies are kept as histograms: bucket k holds durations in
// [2^((k-16)/8), 2^((k-15)/8)) ms, an eighth of an octave each (about 9% wide), from
// 0.25 ms to about 4.4 minutes (the first and last buckets take what lies beyond). Histograms
// add up, so a day's, a tool's, a server's and the period's percentiles all come from
// the daily rollups without reading a call twice; a percentile is interpolated within
// its bucket, so it is within a few percent of the exact one.
const histBuckets = 160

// bucketSQL is the bucket of a call's duration_ms, as SQL (NULL when not timed).
const bucketSQL = `least(159, greatest(0, floor(8 * ln(greatest(duration_ms, 0.25)::float8) / ln(2.0)) + 16))::int`

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

// quantile is the p-quantile (0..1) of the durations, nil when there are none: the
// rank p*(n-1) as percentile_cont counts it, placed within its bucket geometrically.
func (h *hist) quantile(p float64) *float64 {
	n := h.n()
	if n == 0 {
		return nil
	}
	rank := p * float64(n-1)
	var below int64
	for k, c := range h {
		if c == 0 {
			continue
		}
		if float64(below+c) > rank || k == histBuckets-1 {
			frac := (rank - float64(below) + 0.5) / float64(c)
			frac = math.Max(0, math.Min(1, frac))
			lo := math.Pow(2, float64(k-16)/8)
			v := lo * math.Pow(2, frac/8)
			v = math.Round(v*1000) / 1000
			return &v
		}
		below += c
	}
	return nil
}

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
	prev := -1
	for len(b) > 0 {
		k := int(b[0])
		c, n := binary.Uvarint(b[1:])
		if k >= histBuckets || k <= prev || n <= 0 || c > math.MaxInt64 {
			return nil, errors.New("analytics: a rollup histogram is malformed")
		}
		h[k], prev, b = int64(c), k, b[1+n:]
	}
	return &h, nil
}

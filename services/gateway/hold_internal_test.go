package gateway

import (
	"math"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A client's _meta hold shortens the server's hold and never lengthens it, however
// large: a value past what a Duration holds must not overflow into no hold at all.
func TestHoldFor(t *testing.T) {
	t.Parallel()
	g := &Gateway{opts: Options{Hold: 50 * time.Second}}
	for _, c := range []struct {
		meta any
		want time.Duration
	}{
		{nil, 50 * time.Second},
		{"10", 50 * time.Second},
		{10.0, 10 * time.Second},
		{0.5, 500 * time.Millisecond},
		{50.0, 50 * time.Second},
		{60.0, 50 * time.Second},
		{1e10, 50 * time.Second}, // past math.MaxInt64 nanoseconds
		{1e300, 50 * time.Second},
		{math.Inf(1), 50 * time.Second},
		{0.0, 50 * time.Second},
		{-5.0, 50 * time.Second},
		{math.NaN(), 50 * time.Second},
	} {
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: mcp.Meta{}}}
		if c.meta != nil {
			req.Params.Meta[HoldMeta] = c.meta
		}
		if got := g.holdFor(req); got != c.want {
			t.Errorf("hold for %v: %s, want %s", c.meta, got, c.want)
		}
	}
}

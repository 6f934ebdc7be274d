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

// Of the holds of one execution ending together, exactly one is the last, and a hold
// left twice (abandoned, then its deferred leave) counts once.
func TestHoldingLastLeaves(t *testing.T) {
	var h holding
	for range 200 {
		a, b, other := h.enter("x"), h.enter("x"), h.enter("y")
		lasts := make(chan bool, 2)
		for _, m := range []*holdMark{a, b} {
			go func() { lasts <- m.leave() }()
		}
		if first, second := <-lasts, <-lasts; first == second {
			t.Fatalf("two holds left together: last %v and %v", first, second)
		}
		if !a.leave() && !b.leave() {
			t.Fatal("leaving again changed which hold was last")
		}
		if !other.leave() {
			t.Fatal("the only hold of another execution is not its last")
		}
	}
	if len(h.byID) != 0 {
		t.Fatalf("holds left counted: %v", h.byID)
	}
}

// The approval links answered are forgotten with their session, and after elicitedFor.
func TestElicitedForgotten(t *testing.T) {
	t.Parallel()
	var e elicited
	a, b := elicitKey{"s1", "x"}, elicitKey{"s2", "x"}
	e.mark(a)
	e.mark(b)
	e.forgetSession("s1")
	if e.answered(a) || !e.answered(b) {
		t.Fatalf("after s1 ended: s1 answered %v, s2 answered %v", e.answered(a), e.answered(b))
	}
	e.at[b] = time.Now().Add(-elicitedFor - time.Second)
	if e.answered(b) {
		t.Fatal("an answer older than elicitedFor still counts")
	}
	e.swept = time.Time{}
	e.mark(a)
	if _, ok := e.at[b]; ok || len(e.at) != 1 {
		t.Fatalf("the sweep left %v", e.at)
	}
}

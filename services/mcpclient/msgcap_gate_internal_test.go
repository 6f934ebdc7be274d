package mcpclient

import (
	"testing"
	"time"
)

// LargeReadsOf is what m's large-read slots saw: the most taken at once, how many are
// taken now, and how many messages waited for one.
func LargeReadsOf(m *Manager) (peak, now, waited int) {
	g := m.largeReads
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peak, len(g.holders), g.waited
}

// LargeReadsEvicted is how many messages of m read on without their slot past its limit.
func LargeReadsEvicted(m *Manager) int {
	_, _, _, evicted := m.largeReads.counts()
	return evicted
}

// HoldLargeRead takes one of m's large-read slots, as server's reader would, until
// release is called.
func HoldLargeRead(m *Manager, server string) (release func()) {
	h := &largeHold{g: m.largeReads, server: server}
	h.take(nil, nil)
	return h.drop
}

// SetLargeHoldLimit sets how long a message keeps its large-read slot in m.
func SetLargeHoldLimit(m *Manager, d time.Duration) {
	m.largeReads.mu.Lock()
	m.largeReads.limit = d
	m.largeReads.mu.Unlock()
}

func (g *largeReads) counts() (now, peak, waited, evicted int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.holders), g.peak, g.waited, g.evicted
}

// A wait for a slot ends when the reader is closed or its stream ends; a slot is given
// back once however often it is dropped, and one taken by a reader closed meanwhile
// goes back at once.
func TestLargeHold(t *testing.T) {
	t.Parallel()
	g := newLargeReads(1)
	first := largeHold{g: g, server: "a"}
	if !first.take(nil, nil) || !first.take(nil, nil) {
		t.Fatal("the first reader did not get the free slot")
	}

	ended := make(chan struct{})
	waiting := largeHold{g: g, server: "b"}
	got := make(chan bool, 1)
	go func() { got <- waiting.take(ended, nil) }()
	select {
	case ok := <-got:
		t.Fatalf("a second reader got a slot while the only one was taken (%v)", ok)
	case <-time.After(50 * time.Millisecond):
	}
	close(ended)
	if ok := <-got; ok {
		t.Fatal("a wait whose stream ended took a slot")
	}

	first.drop()
	first.drop() // once only
	if now, _, _, _ := g.counts(); now != 0 {
		t.Fatalf("slots taken after the drop: %d, want 0", now)
	}
	second := largeHold{g: g, server: "b"}
	if !second.take(nil, nil) {
		t.Fatal("the slot dropped twice is not free")
	}
	// Closed while it waits: the wait ends (the body's closed channel), and the slot it
	// might get just then goes back.
	closedCh := make(chan struct{})
	third := largeHold{g: g, server: "c"}
	go func() { got <- third.take(nil, closedCh) }()
	time.Sleep(20 * time.Millisecond)
	third.close()
	close(closedCh)
	if ok := <-got; ok {
		t.Fatal("a closed reader took a slot")
	}
	second.close()
	if third.take(nil, nil) {
		t.Fatal("a closed reader took a slot after its close")
	}
	if now, peak, waited, _ := g.counts(); now != 0 || peak != 1 || waited != 2 {
		t.Errorf("after all: %d taken, peak %d, %d waited; want 0, 1, 2", now, peak, waited)
	}
}

// A message that keeps its slot past the limit (a server that started a large message
// and stopped sending) reads on without it, so the next waits no longer; its later
// drop gives back nothing. One server holds at most two slots, however many are free.
func TestLargeHoldLimits(t *testing.T) {
	t.Parallel()
	g := newLargeReads(4)
	g.limit = 100 * time.Millisecond
	a1, a2, a3 := largeHold{g: g, server: "a"}, largeHold{g: g, server: "a"}, largeHold{g: g, server: "a"}
	if !a1.take(nil, nil) || !a2.take(nil, nil) {
		t.Fatal("a server's first two readers waited")
	}
	other := largeHold{g: g, server: "b"}
	got := make(chan bool, 1)
	go func() { got <- other.take(nil, nil) }()
	if !<-got {
		t.Fatal("another server's reader did not get a free slot")
	}
	start := time.Now()
	if !a3.take(nil, nil) { // waits until a1's and a2's slots run out
		t.Fatal("the third reader of a server never got a slot")
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Errorf("a server's third reader got a slot after %s, while its two others held theirs", waited)
	}
	now, _, _, evicted := g.counts()
	if evicted < 2 {
		t.Errorf("%d slots taken back, want a server's two (and maybe the other's)", evicted)
	}
	a1.drop()
	a2.drop()
	if after, _, _, _ := g.counts(); after != now {
		t.Errorf("dropping slots taken back changed the count: %d → %d", now, after)
	}
	a3.drop()
	other.drop()
	if now, _, _, _ := g.counts(); now != 0 {
		t.Errorf("%d slots still taken at the end", now)
	}
}

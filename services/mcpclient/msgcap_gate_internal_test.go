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
	return g.peak, g.now, g.waited
}

// HoldLargeRead takes one of m's large-read slots until release is called.
func HoldLargeRead(m *Manager) (release func()) {
	h := &largeHold{g: m.largeReads}
	h.take(nil, nil)
	return h.drop
}

// A wait for a slot ends when the reader is closed or its stream ends; a slot is given
// back once however often it is dropped, and one taken by a reader closed meanwhile
// goes back at once.
func TestLargeHold(t *testing.T) {
	t.Parallel()
	g := newLargeReads(1)
	first := largeHold{g: g}
	if !first.take(nil, nil) || !first.take(nil, nil) {
		t.Fatal("the first reader did not get the free slot")
	}

	ended := make(chan struct{})
	waiting := largeHold{g: g}
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
	if _, now, _ := func() (int, int, int) { g.mu.Lock(); defer g.mu.Unlock(); return g.peak, g.now, g.waited }(); now != 0 {
		t.Fatalf("slots taken after the drop: %d, want 0", now)
	}
	second := largeHold{g: g}
	if !second.take(nil, nil) {
		t.Fatal("the slot dropped twice is not free")
	}
	// Closed while it waits: the wait ends (the body's closed channel), and the slot it
	// might get just then goes back.
	closedCh := make(chan struct{})
	third := largeHold{g: g}
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
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.now != 0 || len(g.slots) != 0 || g.peak != 1 || g.waited != 2 {
		t.Errorf("after all: %d taken (%d in the channel), peak %d, %d waited; want 0, 0, 1, 2", g.now, len(g.slots), g.peak, g.waited)
	}
}

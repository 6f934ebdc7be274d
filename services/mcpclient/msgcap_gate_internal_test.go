package mcpclient

import (
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/testkit"
)

// LargeReadsOf is what m's large-read slots saw: the most taken at once, how many are
// taken now, and how many messages waited for one.
func LargeReadsOf(m *Manager) (peak, now, waited int) {
	g := m.largeReads
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peak, g.active(), g.waited
}

// active is how many slots are taken (under mu).
func (g *largeReads) active() int {
	n := 0
	for _, st := range g.holders {
		if !st.evicted {
			n++
		}
	}
	return n
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
	return g.active(), g.peak, g.waited, g.evicted
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
// and stopped sending) gives it up, so another server's waits no longer; it still counts
// against its own server until it ends (two at most from one server, however many slots
// are free). Waiters are served in the order they came.
func TestLargeHoldLimits(t *testing.T) {
	t.Parallel()
	g := newLargeReads(2)
	g.limit = 100 * time.Millisecond
	a1, a2, a3 := &largeHold{g: g, server: "a"}, &largeHold{g: g, server: "a"}, &largeHold{g: g, server: "a"}
	if !a1.take(nil, nil) || !a2.take(nil, nil) {
		t.Fatal("a server's first two readers waited")
	}
	got := make(chan string, 4)
	go func() {
		if a3.take(nil, nil) {
			got <- "a3"
		}
	}()
	time.Sleep(20 * time.Millisecond) // a3 waits first
	b := &largeHold{g: g, server: "b"}
	start := time.Now()
	if !b.take(nil, nil) { // once a1's and a2's slots run out
		t.Fatal("another server's reader never got a slot")
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Errorf("another server's reader got a slot after %s, while two held both", waited)
	}
	select {
	case who := <-got:
		t.Fatalf("%s got a slot while its server's two messages had not ended", who)
	case <-time.After(150 * time.Millisecond):
	}
	a1.drop()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("a server's third reader got no slot after one of its messages ended")
	}
	a2.drop()
	a2.drop()
	a3.drop()
	b.drop()
	if now, peak, _, evicted := g.counts(); now != 0 || evicted < 2 || peak != 2 {
		t.Errorf("at the end: %d taken, %d gave theirs up, peak %d; want 0, 2 or more, 2", now, evicted, peak)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.holders) != 0 || len(g.queue) != 0 {
		t.Errorf("at the end: %d holders, %d waiting; want none", len(g.holders), len(g.queue))
	}
}

// Waiters get slots in the order they came, whichever is woken first.
func TestLargeHoldOrder(t *testing.T) {
	t.Parallel()
	g := newLargeReads(1)
	first := &largeHold{g: g, server: "x"}
	first.take(nil, nil)
	order := make(chan int, 5)
	holds := make([]*largeHold, 5)
	for i := range holds {
		holds[i] = &largeHold{g: g, server: string(rune('a' + i))}
		go func() {
			holds[i].take(nil, nil)
			order <- i
		}()
		testkit.WaitFor(t, 5*time.Second, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.queue) == i+1 }, "the reader never waited")
	}
	first.drop()
	for want := range holds {
		select {
		case got := <-order:
			if got != want {
				t.Fatalf("reader %d got the slot in turn %d", got, want)
			}
			holds[got].drop()
		case <-time.After(5 * time.Second):
			t.Fatalf("turn %d never came", want)
		}
	}
}

package mcpclient

import (
	"errors"
	"slices"
	"sync"
	"time"
)

// largeReadFloor is the size past which a message being read needs one of the
// manager's large-read slots (Options.LargeReads): a message under it never waits.
const largeReadFloor = 1 << 20

// DefaultLargeReads is the default of Options.LargeReads.
const DefaultLargeReads = 4

// errReadGivenUp ends a read that waited for a large-read slot until its stream or
// session ended.
var errReadGivenUp = errors.New("mcpclient: the stream ended while its message waited to be read")

// largeReads bounds the messages over largeReadFloor being read at once, across every
// server's connections. Each message is capped (Options.MaxMessageBytes), but reading
// one costs several times its size before the caller has it (the reader's buffer, the
// SDK's decoding buffers and copies): a 12 MiB answer allocated about 100 MiB. Without
// a bound, many calls answered at once with near-cap messages (one hostile server
// answering every call so) would take that many times over. A message that passes the
// floor waits for a slot, its stream unread meanwhile (the server's writes wait, as on
// any slow reader), and gives it back once the SDK has read it whole; waiters are served
// in the order they came. One server has at most perServer messages past the floor
// being read, and a message that has not been read whole holdLimit after it got its
// slot gives the slot up (it still counts against its server until it ends): a server
// that starts a large message and stops sending cannot keep the others' waiting (their
// pings wait behind a stdio or SSE stream's message).
type largeReads struct {
	n         int           // slots
	perServer int           // messages one server may have past the floor
	limit     time.Duration // how long a message keeps its slot

	mu      sync.Mutex
	holders map[*largeHold]*holding
	queue   []*largeHold  // waiting, in the order they came
	freed   chan struct{} // closed, and replaced, when what a waiter waits for may have changed
	peak    int           // the most slots taken at once, for tests
	waited  int           // messages that waited for one, for tests
	evicted int           // messages that gave their slot up past limit, for tests
}

// holding is a message past the floor: since when it has its slot, or that it gave the
// slot up (limit) and reads on without it.
type holding struct {
	since   time.Time
	evicted bool
}

// largeHoldLimit is how long a message keeps its large-read slot (largeReads.limit):
// a message of the 16 MiB cap is read in a fraction of that from a server that sends
// it as fast as it can.
const largeHoldLimit = 5 * time.Second

// largeReadsPerServer is largeReads.perServer.
const largeReadsPerServer = 2

func newLargeReads(n int) *largeReads {
	if n <= 0 {
		return nil
	}
	return &largeReads{n: n, perServer: min(n, largeReadsPerServer), limit: largeHoldLimit,
		holders: map[*largeHold]*holding{}, freed: make(chan struct{})}
}

// wake tells the waiters to look again (under mu).
func (g *largeReads) wake() {
	close(g.freed)
	g.freed = make(chan struct{})
}

// enter gives h a slot, waiting while every one is taken, its server has its share, or
// a waiter that came before could take the one free; false when a or b (either may be
// nil) is closed first.
func (g *largeReads) enter(h *largeHold, a, b <-chan struct{}) bool {
	queued := false
	defer func() {
		if queued { // gave up waiting: the next in line may take what it left
			g.mu.Lock()
			g.unqueue(h)
			g.mu.Unlock()
		}
	}()
	for {
		g.mu.Lock()
		now := time.Now()
		var next time.Duration // until the next slot runs out
		active := 0
		for _, st := range g.holders {
			if st.evicted {
				continue
			}
			if left := g.limit - now.Sub(st.since); left <= 0 {
				st.evicted = true // it reads on without its slot
				g.evicted++
			} else {
				active++
				if next == 0 || left < next {
					next = left
				}
			}
		}
		can := func(w *largeHold) bool {
			if active >= g.n {
				return false
			}
			mine := 0
			for o := range g.holders {
				if o.server == w.server {
					mine++
				}
			}
			return mine < g.perServer
		}
		first := can(h)
		for _, w := range g.queue {
			if w == h || !first {
				break
			}
			first = !can(w)
		}
		if first {
			g.holders[h] = &holding{since: now}
			g.peak = max(g.peak, active+1)
			if queued { // another slot may be free for the next in line
				g.unqueue(h)
				queued = false
			}
			g.mu.Unlock()
			return true
		}
		if !queued {
			g.queue = append(g.queue, h)
			queued = true
			g.waited++
		}
		freed := g.freed
		g.mu.Unlock()
		var timeout <-chan time.Time
		var timer *time.Timer
		if next > 0 {
			timer = time.NewTimer(next)
			timeout = timer.C
		}
		select {
		case <-freed:
		case <-timeout:
		case <-a:
		case <-b:
		}
		if timer != nil {
			timer.Stop()
		}
		if isClosed(a) || isClosed(b) {
			return false
		}
	}
}

// unqueue takes h out of the waiters and wakes the others (under mu).
func (g *largeReads) unqueue(h *largeHold) {
	if i := slices.Index(g.queue, h); i >= 0 {
		g.queue = slices.Delete(g.queue, i, i+1)
		g.wake()
	}
}

// isClosed reports whether c (maybe nil) is closed.
func isClosed(c <-chan struct{}) bool {
	if c == nil {
		return false
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// leave ends h's message: its slot, if it still has one, is free again.
func (g *largeReads) leave(h *largeHold) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.holders[h]; ok {
		delete(g.holders, h)
		g.wake()
	}
}

// largeHold is one reader's slot: taken when its message passes largeReadFloor, given
// back when the message was handed on, dropped, or the reader closed (from another
// goroutine, which is why it is locked).
type largeHold struct {
	g      *largeReads // nil: no bound
	server string      // whose stream it reads (largeReads.perServer)
	mu     sync.Mutex
	held   bool // taken for the current message (largeReads may have taken it back: limit)
	closed bool
}

// take makes sure the reader has taken a slot for its message; false when the reader
// was closed, or a or b closed while it waited.
func (h *largeHold) take(a, b <-chan struct{}) bool {
	if h.g == nil {
		return true
	}
	h.mu.Lock()
	if h.held || h.closed {
		closed := h.closed
		h.mu.Unlock()
		return !closed
	}
	h.mu.Unlock()
	if !h.g.enter(h, a, b) {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		h.g.leave(h)
		return false
	}
	h.held = true
	return true
}

// drop gives the slot back, if held.
func (h *largeHold) drop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		h.held = false
		h.g.leave(h)
	}
}

// close gives the slot back for good: the reader takes none after.
func (h *largeHold) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.held {
		h.held = false
		h.g.leave(h)
	}
}

// bodyGate is an HTTP body reader's large-read slot: a wait for one ends when the
// request's context ends (ended) or the body is closed.
type bodyGate struct {
	hold   largeHold
	ended  <-chan struct{}
	closed chan struct{}
	once   sync.Once
}

func newBodyGate(lim msgLimit) bodyGate {
	return bodyGate{hold: largeHold{g: lim.reads, server: lim.server}, closed: make(chan struct{})}
}

// take is largeHold.take until the request ends or the body is closed.
func (g *bodyGate) take() bool { return g.hold.take(g.ended, g.closed) }

// close ends a wait for a slot and gives back the one held, for good.
func (g *bodyGate) close() {
	g.once.Do(func() { close(g.closed) })
	g.hold.close()
}

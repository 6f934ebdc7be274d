package mcpclient

import (
	"errors"
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
// any slow reader), and gives it back once the SDK has read it whole. One server holds
// at most perServer slots, and a message that has not been read whole holdLimit after
// it got its slot reads on without it: a server that starts a large message and stops
// sending cannot keep the others' waiting (their pings wait behind a stdio or SSE
// stream's message).
type largeReads struct {
	n         int           // slots
	perServer int           // slots one server may hold
	limit     time.Duration // how long a message keeps its slot

	mu      sync.Mutex
	holders map[*largeHold]time.Time // since when
	freed   chan struct{}            // closed, and replaced, when a slot is given back
	peak    int                      // the most taken at once, for tests
	waited  int                      // messages that waited for one, for tests
	evicted int                      // messages that read on past limit without one, for tests
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
		holders: map[*largeHold]time.Time{}, freed: make(chan struct{})}
}

// enter gives h a slot, waiting while every one is taken (or its server's are); false
// when a or b (either may be nil) is closed first.
func (g *largeReads) enter(h *largeHold, a, b <-chan struct{}) bool {
	counted := false
	for {
		g.mu.Lock()
		now := time.Now()
		var next time.Duration // until the next holder's slot runs out
		mine := 0
		for o, since := range g.holders {
			if left := g.limit - now.Sub(since); left <= 0 {
				delete(g.holders, o) // it reads on without its slot
				g.evicted++
				close(g.freed)
				g.freed = make(chan struct{})
			} else {
				if next == 0 || left < next {
					next = left
				}
				if o.server == h.server {
					mine++
				}
			}
		}
		if len(g.holders) < g.n && mine < g.perServer {
			g.holders[h] = now
			g.peak = max(g.peak, len(g.holders))
			g.mu.Unlock()
			return true
		}
		if !counted {
			g.waited++
			counted = true
		}
		freed := g.freed
		g.mu.Unlock()
		timer := time.NewTimer(next)
		select {
		case <-freed:
		case <-timer.C:
		case <-a:
			timer.Stop()
			return false
		case <-b:
			timer.Stop()
			return false
		}
		timer.Stop()
	}
}

// leave gives back h's slot, if it still has it.
func (g *largeReads) leave(h *largeHold) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.holders[h]; ok {
		delete(g.holders, h)
		close(g.freed)
		g.freed = make(chan struct{})
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

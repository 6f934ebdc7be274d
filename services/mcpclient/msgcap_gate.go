package mcpclient

import (
	"errors"
	"sync"
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
// any slow reader), and gives it back once the SDK has read it whole.
type largeReads struct {
	slots chan struct{}

	mu     sync.Mutex
	now    int // slots taken, for tests
	peak   int // the most taken at once, for tests
	waited int // messages that waited for one, for tests
}

func newLargeReads(n int) *largeReads {
	if n <= 0 {
		return nil
	}
	return &largeReads{slots: make(chan struct{}, n)}
}

// enter takes a slot, waiting while every one is taken; false when a or b (either
// may be nil) is closed first.
func (g *largeReads) enter(a, b <-chan struct{}) bool {
	select {
	case g.slots <- struct{}{}:
	default:
		g.mu.Lock()
		g.waited++
		g.mu.Unlock()
		select {
		case g.slots <- struct{}{}:
		case <-a:
			return false
		case <-b:
			return false
		}
	}
	g.mu.Lock()
	g.now++
	g.peak = max(g.peak, g.now)
	g.mu.Unlock()
	return true
}

func (g *largeReads) leave() {
	g.mu.Lock()
	g.now--
	g.mu.Unlock()
	<-g.slots
}

// largeHold is one reader's slot: taken when its message passes largeReadFloor, given
// back when the message was handed on, dropped, or the reader closed (from another
// goroutine, which is why it is locked).
type largeHold struct {
	g      *largeReads // nil: no bound
	mu     sync.Mutex
	held   bool
	closed bool
}

// take makes sure the reader holds a slot; false when the reader was closed, or a or b
// closed while it waited.
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
	if !h.g.enter(a, b) {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		h.g.leave()
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
		h.g.leave()
	}
}

// close gives the slot back for good: the reader takes none after.
func (h *largeHold) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.held {
		h.held = false
		h.g.leave()
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
	return bodyGate{hold: largeHold{g: lim.reads}, closed: make(chan struct{})}
}

// take is largeHold.take until the request ends or the body is closed.
func (g *bodyGate) take() bool { return g.hold.take(g.ended, g.closed) }

// close ends a wait for a slot and gives back the one held, for good.
func (g *bodyGate) close() {
	g.once.Do(func() { close(g.closed) })
	g.hold.close()
}

package builtin

import "sync"

// ring is a bounded output buffer with absolute indexes: index i is the i-th byte
// ever written; only the last cap bytes are kept.
type ring struct {
	mu   sync.Mutex
	buf  []byte // grows up to cap, then wraps: index i is at buf[i % cap]
	cap  int
	end  int64 // the index after the last byte written
	subs map[chan struct{}]struct{}
}

func newRing(capacity int) *ring {
	return &ring{cap: capacity, subs: map[chan struct{}]struct{}{}}
}

// startLocked is the index of the oldest byte kept.
func (r *ring) startLocked() int64 { return max(0, r.end-int64(r.cap)) }

// Write appends p, dropping the oldest bytes beyond the capacity, and wakes the
// subscribers.
func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	n := len(p)
	if len(p) > r.cap {
		r.end += int64(len(p) - r.cap)
		p = p[len(p)-r.cap:]
	}
	// While it grows, buf holds indexes 0..end-1 in order. A write that would pass the
	// capacity, or that follows bytes skipped above, makes it full size first, so that
	// every index is at buf[i % cap] (appending after a skip put them elsewhere).
	if len(r.buf) < r.cap {
		if int64(len(r.buf)) == r.end && len(r.buf)+len(p) <= r.cap {
			r.buf = append(r.buf, p...)
			r.end += int64(len(p))
			p = nil
		} else {
			r.buf = append(r.buf, make([]byte, r.cap-len(r.buf))...)
		}
	}
	for len(p) > 0 { // full: overwrite the oldest bytes
		at := int(r.end % int64(r.cap))
		k := copy(r.buf[at:], p)
		r.end += int64(k)
		p = p[k:]
	}
	r.wakeLocked()
	r.mu.Unlock()
	return n, nil
}

// From returns the bytes from index from on (from the oldest kept one when from
// is older), the index they start at and the index after them.
func (r *ring) From(from int64) (data []byte, at, next int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := r.startLocked()
	from = min(max(from, start), r.end)
	data = make([]byte, 0, r.end-from)
	for i := from; i < r.end; {
		off := int(i % int64(r.cap))
		chunk := r.buf[off:min(len(r.buf), off+int(r.end-i))]
		data = append(data, chunk...)
		i += int64(len(chunk))
	}
	return data, from, r.end
}

// End is the index after the last byte written.
func (r *ring) End() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.end
}

// Wake tells the watchers something changed though no byte was written (a terminal's
// size): they look again.
func (r *ring) Wake() {
	r.mu.Lock()
	r.wakeLocked()
	r.mu.Unlock()
}

func (r *ring) wakeLocked() {
	for ch := range r.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Notify returns a channel that receives (coalesced) when bytes are written, and its cancel.
func (r *ring) Notify() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	r.mu.Lock()
	r.subs[ch] = struct{}{}
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		delete(r.subs, ch)
		r.mu.Unlock()
	}
}

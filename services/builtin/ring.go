package builtin

import "sync"

// ring is a bounded output buffer with absolute indexes: index i is the i-th byte
// ever written; only the last cap bytes are kept.
type ring struct {
	mu    sync.Mutex
	buf   []byte
	cap   int
	start int64 // the index of buf[0]
	subs  map[chan struct{}]struct{}
}

func newRing(capacity int) *ring {
	return &ring{cap: capacity, subs: map[chan struct{}]struct{}{}}
}

// Write appends p, dropping the oldest bytes beyond the capacity, and wakes the
// subscribers.
func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.buf = append(r.buf, p...)
	if over := len(r.buf) - r.cap; over > 0 {
		r.start += int64(over)
		r.buf = append(r.buf[:0], r.buf[over:]...)
	}
	for ch := range r.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	r.mu.Unlock()
	return len(p), nil
}

// From returns the bytes from index from on (from the oldest kept one when from
// is older), the index they start at and the index after them.
func (r *ring) From(from int64) (data []byte, at, next int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	end := r.start + int64(len(r.buf))
	if from < r.start {
		from = r.start
	}
	if from > end {
		from = end
	}
	return append([]byte(nil), r.buf[from-r.start:]...), from, end
}

// End is the index after the last byte written.
func (r *ring) End() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.start + int64(len(r.buf))
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

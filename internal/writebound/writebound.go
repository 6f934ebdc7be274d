// Package writebound bounds each write and flush of an HTTP response by a write
// deadline: a client that stops reading fails the write and frees the handler (a
// transaction, a rendered page, an MCP stream's lock) instead of holding it for as long
// as TCP keeps the connection. The deadline is per write, so a stream that moves lives
// on however long it lasts, and it is lifted between writes: under HTTP/2 a deadline that
// passes ends the stream even when nothing is being written, and a stream may rightly be
// idle for long.
package writebound

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"time"
)

// Writer is a response writer whose writes and flushes are bounded. A deadline a
// handler sets itself through http.ResponseController (none does today) is kept as
// outer: each write is bounded by the nearer of it and d, and outer is put back after,
// so the two compose instead of one overwriting the other.
type Writer struct {
	http.ResponseWriter
	rc *http.ResponseController

	mu       sync.Mutex
	d        time.Duration
	outer    time.Time
	hijacked bool
}

// Piece is how much of a write one deadline covers: a message of megabytes (a page, a
// 16 MiB tool result) to a client reading slowly but steadily must not be cut; the
// deadline is for one that stopped.
const Piece = 64 << 10

// New wraps w so that each write and flush takes at most d. It reports false, and w
// is to be written as is, when w's connection has no deadlines (a test's recorder).
func New(w http.ResponseWriter, d time.Duration) (*Writer, bool) {
	rc := http.NewResponseController(w)
	if err := rc.SetWriteDeadline(time.Time{}); err != nil {
		return nil, false
	}
	return &Writer{ResponseWriter: w, rc: rc, d: d}, true
}

// Within returns w with its writes bounded by d: the Writer w already goes through (the
// web server's, for every response), its bound lowered to d if d is nearer, or else a
// new one. finish, deferred by the caller, bounds what is written after the handler
// (the server's last flush) when the Writer is the caller's own; the web server's
// finishes its own.
func Within(w http.ResponseWriter, d time.Duration) (_ http.ResponseWriter, finish func()) {
	for x := w; x != nil; {
		if bw, ok := x.(*Writer); ok {
			bw.mu.Lock()
			bw.d = min(bw.d, d)
			bw.mu.Unlock()
			return w, func() {}
		}
		u, ok := x.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		x = u.Unwrap()
	}
	bw, ok := New(w, d)
	if !ok {
		return w, func() {}
	}
	return bw, bw.Finish
}

// bound sets the deadline for the next write; restore puts back the handler's own.
// Errors are ignored: on a connection that is gone the write fails.
func (w *Writer) bound() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hijacked {
		return
	}
	t := time.Now().Add(w.d)
	if !w.outer.IsZero() && w.outer.Before(t) {
		t = w.outer
	}
	_ = w.rc.SetWriteDeadline(t)
}

func (w *Writer) restore() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.hijacked {
		_ = w.rc.SetWriteDeadline(w.outer)
	}
}

// Write writes b in pieces of Piece, each with the whole deadline.
func (w *Writer) Write(b []byte) (int, error) {
	defer w.restore()
	n := 0
	for len(b) > 0 {
		piece := b[:min(len(b), Piece)]
		w.bound()
		m, err := w.ResponseWriter.Write(piece)
		n += m
		if err != nil {
			return n, err
		}
		b = b[len(piece):]
	}
	return n, nil
}

func (w *Writer) FlushError() error {
	w.bound()
	defer w.restore()
	return w.rc.Flush()
}

func (w *Writer) Flush() { _ = w.FlushError() }

// SetWriteDeadline is a handler's own deadline (through http.ResponseController).
func (w *Writer) SetWriteDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.outer = t
	return w.rc.SetWriteDeadline(t)
}

// Hijack hands the connection over without a deadline; after it the connection's owner
// (a websocket) sets its own, and this writer touches it no more.
func (w *Writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.rc.SetWriteDeadline(time.Time{})
	conn, brw, err := w.rc.Hijack()
	if err == nil {
		w.hijacked = true
	}
	return conn, brw, err
}

// Finish bounds what is written once the handler returned: an error handler's answer
// and the server's final flush of its buffer. Go's server lifts the deadline after.
func (w *Writer) Finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hijacked {
		return
	}
	if t := time.Now().Add(w.d); w.outer.IsZero() || t.Before(w.outer) {
		w.outer = t
	}
	_ = w.rc.SetWriteDeadline(w.outer)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

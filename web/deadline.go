package web

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// bodyDeadline bounds the time a client may take to send a request's body (a minute
// unless d says otherwise), against clients that trickle bytes to hold connections. The
// deadline ends with the body: what follows (a stream the handler sends for as long as
// it lasts) is not bounded.
func bodyDeadline(d time.Duration) echo.MiddlewareFunc {
	if d <= 0 {
		d = time.Minute
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.ContentLength == 0 { // no body (-1: one of unknown length)
				return next(c)
			}
			rc := http.NewResponseController(c.Response())
			if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
				return next(c) // not a connection that has deadlines (a test's recorder)
			}
			r.Body = &deadlineBody{ReadCloser: r.Body, clear: func() { _ = rc.SetReadDeadline(time.Time{}) }}
			return next(c)
		}
	}
}

// deadlineBody clears the connection's read deadline once its body is read to the end.
type deadlineBody struct {
	io.ReadCloser
	once  sync.Once
	clear func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.once.Do(b.clear)
	}
	return n, err
}

// writeDeadline bounds each write and flush of a response by d (0: a minute), as the
// gateway's deadlineWriter does for /mcp: a client that stops reading fails the write
// and frees the handler, instead of holding it (a transaction, a rendered page) for as
// long as TCP keeps the connection. The deadline is per write, so a stream that moves
// lives on however long it lasts; what the server writes after the handler (the rest of
// its buffer) is bounded too, and Go's server lifts that deadline afterwards.
func writeDeadline(d time.Duration) echo.MiddlewareFunc {
	if d <= 0 {
		d = time.Minute
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			res := c.Response()
			rc := http.NewResponseController(res.Writer)
			if err := rc.SetWriteDeadline(time.Time{}); err != nil {
				return next(c) // not a connection that has deadlines (a test's recorder)
			}
			w := &deadlineWriter{ResponseWriter: res.Writer, rc: rc, d: d}
			res.Writer = w
			err := next(c)
			w.finish()
			return err
		}
	}
}

// deadlineWriter is writeDeadline's writer. A deadline the handler sets itself (the
// gateway's, an export's) is kept as outer: each write is bounded by the nearer of it
// and d, and outer is put back after, so the two compose.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration

	mu       sync.Mutex
	outer    time.Time
	hijacked bool
}

// writePiece is how much of a write one deadline covers: a page of megabytes to a
// client reading slowly but steadily must not be cut; the deadline is for one that stopped.
const writePiece = 64 << 10

// bound sets the deadline for the next write; restore puts back the handler's own.
// Errors are ignored: on a connection that is gone the write fails.
func (w *deadlineWriter) bound() {
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

func (w *deadlineWriter) restore() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.hijacked {
		_ = w.rc.SetWriteDeadline(w.outer)
	}
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	defer w.restore()
	n := 0
	for len(b) > 0 {
		piece := b[:min(len(b), writePiece)]
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

func (w *deadlineWriter) FlushError() error {
	w.bound()
	defer w.restore()
	return w.rc.Flush()
}

func (w *deadlineWriter) Flush() { _ = w.FlushError() }

// SetWriteDeadline is a handler's own deadline (through http.ResponseController).
func (w *deadlineWriter) SetWriteDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.outer = t
	return w.rc.SetWriteDeadline(t)
}

// Hijack hands the connection over without a deadline; after it the connection's owner
// (a websocket) sets its own, and this writer touches it no more.
func (w *deadlineWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.rc.SetWriteDeadline(time.Time{})
	conn, brw, err := w.rc.Hijack()
	if err == nil {
		w.hijacked = true
	}
	return conn, brw, err
}

// finish bounds what is written once the handler returned: the error handler's answer
// and the server's final flush of its buffer.
func (w *deadlineWriter) finish() {
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
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

package writebound

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// conn records each write that reaches it and each deadline set on it, as a connection
// with deadlines would take them (http.ResponseController finds SetWriteDeadline).
type conn struct {
	*httptest.ResponseRecorder
	sizes     []int
	deadlines []time.Time
}

func (c *conn) Write(b []byte) (int, error) {
	c.sizes = append(c.sizes, len(b))
	return c.ResponseRecorder.Write(b)
}

func (c *conn) SetWriteDeadline(t time.Time) error {
	c.deadlines = append(c.deadlines, t)
	return nil
}

// wrapped is a writer between a handler and a Writer (echo's Response, say).
type wrapped struct{ http.ResponseWriter }

func (w wrapped) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// A message written at once (the SDK writes a whole result so) reaches the connection in
// pieces, each with the whole deadline: a client reading slowly but steadily keeps up.
func TestWritesInPieces(t *testing.T) {
	c := &conn{ResponseRecorder: httptest.NewRecorder()}
	w, ok := New(c, time.Second)
	if !ok {
		t.Fatal("a writer with deadlines was not wrapped")
	}
	msg := bytes.Repeat([]byte("x"), 4*Piece+17)
	if n, err := w.Write(msg); err != nil || n != len(msg) {
		t.Fatalf("wrote %d of %d: %v", n, len(msg), err)
	}
	if len(c.sizes) != 5 || c.sizes[4] != 17 || !bytes.Equal(c.Body.Bytes(), msg) {
		t.Fatalf("pieces %v; want 4 of %d and one of 17, the message whole", c.sizes, Piece)
	}
	// A deadline before each piece, and none left after the write.
	if len(c.deadlines) < 6 || !c.deadlines[len(c.deadlines)-1].IsZero() {
		t.Fatalf("deadlines %v: want one per piece, then none", c.deadlines)
	}
}

// Within reuses the Writer a response already goes through (the web server's), with
// the nearer bound, instead of wrapping it in a second one; without one it wraps; a
// writer without deadlines is left as is.
func TestWithin(t *testing.T) {
	c := &conn{ResponseRecorder: httptest.NewRecorder()}
	outer, _ := New(c, time.Minute)
	w, finish := Within(wrapped{outer}, time.Second)
	if ww, ok := w.(wrapped); !ok || ww.ResponseWriter != outer {
		t.Fatalf("Within wrapped the response again: %T", w)
	}
	finish()
	c.deadlines = nil
	start := time.Now()
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if d := c.deadlines[0].Sub(start); d <= 0 || d > 2*time.Second {
		t.Fatalf("a write was bounded by %s, want the nearer bound, a second", d)
	}
	// A longer bound does not lift the nearer one.
	Within(wrapped{outer}, time.Hour)
	c.deadlines = nil
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if d := time.Until(c.deadlines[0]); d > 2*time.Second {
		t.Fatalf("after a longer bound a write was bounded by %s, want a second", d)
	}

	bare := &conn{ResponseRecorder: httptest.NewRecorder()}
	w, finish = Within(bare, time.Second)
	if _, ok := w.(*Writer); !ok {
		t.Fatalf("Within did not bound a writer that had no bound: %T", w)
	}
	finish()
	if last := bare.deadlines[len(bare.deadlines)-1]; time.Until(last) <= 0 {
		t.Fatalf("finish left deadline %v, want one bounding the server's last flush", last)
	}

	rec := httptest.NewRecorder()
	if w, _ := Within(rec, time.Second); w != http.ResponseWriter(rec) {
		t.Fatalf("a writer without deadlines was wrapped: %T", w)
	}
}

// A deadline the handler sets itself (through http.ResponseController) composes with the
// bound: a write is bounded by the nearer of the two, and the handler's is put back
// after it, not lifted.
func TestHandlersOwnDeadline(t *testing.T) {
	c := &conn{ResponseRecorder: httptest.NewRecorder()}
	w, _ := New(c, time.Minute)
	own := time.Now().Add(time.Second)
	if err := http.NewResponseController(w).SetWriteDeadline(own); err != nil {
		t.Fatal(err)
	}
	c.deadlines = nil
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if len(c.deadlines) != 2 || !c.deadlines[0].Equal(own) || !c.deadlines[1].Equal(own) {
		t.Fatalf("deadlines around a write: %v, want the handler's nearer one for the write and put back after", c.deadlines)
	}
	far := time.Now().Add(time.Hour)
	_ = http.NewResponseController(w).SetWriteDeadline(far)
	c.deadlines = nil
	start := time.Now()
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if d := c.deadlines[0].Sub(start); d > 2*time.Minute || !c.deadlines[len(c.deadlines)-1].Equal(far) {
		t.Fatalf("with a farther deadline of the handler's: %v, want the minute's bound, then the handler's put back", c.deadlines)
	}
}

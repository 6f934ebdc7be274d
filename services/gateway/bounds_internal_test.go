package gateway

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// pieces records the size of each write that reaches it.
type pieces struct {
	*httptest.ResponseRecorder
	sizes []int
}

func (p *pieces) Write(b []byte) (int, error) {
	p.sizes = append(p.sizes, len(b))
	return p.ResponseRecorder.Write(b)
}

// A message written at once (the SDK writes a whole result so) reaches the connection in
// pieces, each with the whole deadline: a client reading slowly but steadily keeps up.
func TestDeadlineWriterWritesInPieces(t *testing.T) {
	p := &pieces{ResponseRecorder: httptest.NewRecorder()}
	w := &deadlineWriter{ResponseWriter: p, rc: http.NewResponseController(p), d: time.Second}
	msg := bytes.Repeat([]byte("x"), 4*writePiece+17)
	if n, err := w.Write(msg); err != nil || n != len(msg) {
		t.Fatalf("wrote %d of %d: %v", n, len(msg), err)
	}
	if len(p.sizes) != 5 || p.sizes[4] != 17 || !bytes.Equal(p.Body.Bytes(), msg) {
		t.Fatalf("pieces %v; want 4 of %d and one of 17, the message whole", p.sizes, writePiece)
	}
}

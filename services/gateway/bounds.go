package gateway

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// batchRefusal is the answer to a JSON-RPC batch. The protocol versions the gateway
// serves (2025-06-18 onward) have none, but the SDK takes a stateful session's POST
// without Mcp-Protocol-Version for 2025-03-26 and would run every request of a batch
// at once, each in a goroutine of its own, with no limit.
var batchRefusal = Refusal(http.StatusBadRequest, "JSON-RPC batches are not supported: send one message per request (MCP 2025-06-18 and later have no batches)")

// Refusal is the JSON-RPC error body of a POST refused before the SDK read it (a body
// too large, a NUL or a duplicate key in it; its id unknown, so null): an MCP client
// reads it as that call refused, where any other body ends its whole session (the
// go-sdk client's checkResponse).
func Refusal(status int, msg string) []byte {
	code := -32600 // invalid request
	if status == http.StatusTooManyRequests {
		code = codeRateLimited
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
	return b
}

// refuseBatch answers 400 and reports true when req's body is a JSON-RPC batch (its
// first byte past whitespace is '['). Otherwise req's body still reads whole.
func refuseBatch(w http.ResponseWriter, req *http.Request) bool {
	if req.Method != http.MethodPost || req.Body == nil || req.Body == http.NoBody {
		return false
	}
	br := bufio.NewReader(req.Body)
	req.Body = struct {
		io.Reader
		io.Closer
	}{br, req.Body}
	for {
		b, err := br.ReadByte()
		if err != nil {
			// An empty or unreadable body is the SDK's to answer.
			return false
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		case '[':
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write(batchRefusal)
			return true
		}
		_ = br.UnreadByte()
		return false
	}
}

// deadlineWriter bounds each write and flush of a response by a write deadline, so
// that a client that stops reading fails the write (and the SDK drops its stream)
// instead of blocking it, with the transport's lock held, for good. The deadline is
// cleared after each: under HTTP/2 a deadline that passes ends the stream even when
// nothing is being written, and a stream may rightly be idle for long.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

// bounded wraps w in a deadlineWriter of the gateway's WriteTimeout.
func (g *Gateway) bounded(w http.ResponseWriter) *deadlineWriter {
	return &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: g.opts.WriteTimeout}
}

// extend sets the deadline d from now. Errors are ignored here and in clear: a writer
// without deadlines is written as is, and on a connection that is gone the write fails.
func (w *deadlineWriter) extend() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

func (w *deadlineWriter) clear() { _ = w.rc.SetWriteDeadline(time.Time{}) }

// Write writes b in pieces of writePiece, each with the whole deadline: the SDK writes
// a message (a 16 MiB result) at once, and a client reading slowly but steadily must
// not lose it; the deadline is for one that stopped.
func (w *deadlineWriter) Write(b []byte) (int, error) {
	defer w.clear()
	n := 0
	for len(b) > 0 {
		piece := b[:min(len(b), writePiece)]
		w.extend()
		m, err := w.ResponseWriter.Write(piece)
		n += m
		if err != nil {
			return n, err
		}
		b = b[len(piece):]
	}
	return n, nil
}

// writePiece is how much of a write one deadline covers (deadlineWriter.Write).
const writePiece = 64 << 10

func (w *deadlineWriter) FlushError() error {
	w.extend()
	defer w.clear()
	return w.rc.Flush()
}

func (w *deadlineWriter) Flush() { _ = w.FlushError() }

// Unwrap lets http.ResponseController reach the connection.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

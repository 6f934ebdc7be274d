package gateway

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
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

package mcpclient

import (
	"runtime"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The MCP SDK is built from third_party/go-sdk, whose JSON decoding works on the
// message's bytes in place: the released SDK allocated a 32 KiB buffer for each value
// it decoded, several per message (third_party/go-sdk/TOOLWARDEN.md). This fails if
// an upgrade brings that back.
func TestSDKDecodesInPlace(t *testing.T) {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`)
	if m, err := jsonrpc.DecodeMessage(msg); err != nil {
		t.Fatal(err)
	} else if r, ok := m.(*jsonrpc.Request); !ok || r.Method != "tools/call" || string(r.Params) != `{"name":"echo","arguments":{"message":"hi"}}` {
		t.Fatalf("decoded %#v", m)
	}
	const n = 1000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		if _, err := jsonrpc.DecodeMessage(msg); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	// About 1 KiB a message in place; 64 KiB or more with a buffer per value.
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 8<<10 {
		t.Errorf("decoding one JSON-RPC message allocates %d bytes: the SDK's per-value read buffer is back", per)
	}
}

// Copyright 2025 The Go MCP SDK Authors. All rights reserved.
// Use of this source code is governed by the license
// that can be found in the LICENSE file.

package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The stdio reader starts a new decoder after a large message (TOOLWARDEN.md, the
// fourteenth change) and goes on from everything the earlier decoders read ahead: large
// messages decoded from a remainder lose no byte of what follows them, whatever sizes
// the source hands over at once.
func TestLargeFramesKeepWhatWasReadAhead(t *testing.T) {
	for _, sizes := range [][]int{
		{1100 << 10, 300 << 10, 300 << 10, 100, 100},
		{1030 << 10, 300 << 10, 300 << 10, 300 << 10, 100},
		{300 << 10, 100, 300 << 10, 100, 300 << 10},
		{100, 100, 100},
	} {
		var stream bytes.Buffer
		for i, n := range sizes {
			params, _ := json.Marshal(map[string]any{"i": i, "data": strings.Repeat("x", n)})
			stream.WriteString(`{"jsonrpc":"2.0","method":"notifications/message","params":`)
			stream.Write(params)
			stream.WriteString("}\n")
		}
		conn := newIOConnLimited(rwc{rc: io.NopCloser(&stream)}, 0)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		for i, n := range sizes {
			msg, err := conn.Read(ctx)
			if err != nil {
				t.Fatalf("sizes %v: message %d: %v", sizes, i, err)
			}
			req, ok := msg.(*jsonrpc.Request)
			var p struct {
				I    int    `json:"i"`
				Data string `json:"data"`
			}
			if !ok || json.Unmarshal(req.Params, &p) != nil || p.I != i || len(p.Data) != n {
				t.Fatalf("sizes %v: message %d is not the one sent (%T, i %d, %d bytes)", sizes, i, msg, p.I, len(p.Data))
			}
		}
		cancel()
	}
}

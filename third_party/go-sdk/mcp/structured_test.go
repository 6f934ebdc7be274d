// Copyright 2025 The Go MCP SDK Authors. All rights reserved.
// Use of this source code is governed by the license
// that can be found in the LICENSE file.

package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"
)

// A client keeps a tool result's structuredContent as the server sent it, so numbers
// past float64's precision keep their digits when the result is encoded again
// (TOOLWARDEN.md); a null or missing structuredContent is nil, as before.
func TestStructuredContentKeepsDigits(t *testing.T) {
	const sc = `{"id":12345678901234567890,"small":9007199254740993,"d":0.1000000000000000055511151231257827,"s":"\u00e9"}`
	var r CallToolResult
	if err := json.Unmarshal([]byte(`{"content":[],"structuredContent":`+sc+`}`), &r); err != nil {
		t.Fatal(err)
	}
	if raw, ok := r.StructuredContent.(json.RawMessage); !ok || string(raw) != sc {
		t.Fatalf("structuredContent decoded as %T %v, want the bytes sent", r.StructuredContent, r.StructuredContent)
	}
	out, err := json.Marshal(&r)
	if err != nil || !bytes.Contains(out, []byte(`"structuredContent":`+sc)) {
		t.Fatalf("encoded again: %s (%v), want %s in it", out, err, sc)
	}
	for _, wire := range []string{`{"content":[],"structuredContent":null}`, `{"content":[]}`} {
		var r CallToolResult
		if err := json.Unmarshal([]byte(wire), &r); err != nil || r.StructuredContent != nil {
			t.Fatalf("%s: structuredContent %#v (%v), want nil", wire, r.StructuredContent, err)
		}
	}

	// And through a session: a server's handler result reaches CallTool digit for digit.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ct, st := NewInMemoryTransports()
	s := NewServer(&Implementation{Name: "s", Version: "1"}, nil)
	s.AddTool(&Tool{Name: "big", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *CallToolRequest) (*CallToolResult, error) {
		return &CallToolResult{Content: []Content{}, StructuredContent: json.RawMessage(sc)}, nil
	})
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := NewClient(&Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &CallToolParams{Name: "big"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(res.StructuredContent); string(b) != sc {
		t.Fatalf("through a session: %s, want %s", b, sc)
	}
}

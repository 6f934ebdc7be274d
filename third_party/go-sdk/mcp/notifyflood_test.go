// Copyright 2025 The Go MCP SDK Authors. All rights reserved.
// Use of this source code is governed by the license
// that can be found in the LICENSE file.

package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/internal/jsonrpc2"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A server flooding a client with notifications faster than the client handles them
// does not fill the client's memory: past a bound (in number and in bytes), the client
// stops reading until its handler is done with one (TOOLWARDEN.md).
func TestClientNotificationFloodBounded(t *testing.T) {
	for _, tc := range []struct {
		name      string
		data      string // params.data of each notifications/message
		wantN     int    // at most this many queued when the reader waits
		wantBytes int    // and at most this many bytes of params
	}{
		{"many", `"ab"`, maxClientQueuedNotifications, maxClientQueuedNotificationBytes},
		{"large", `["` + strings.Repeat("ab", 256<<10) + `"]`, maxClientQueuedNotifications, maxClientQueuedNotificationBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			type full struct{ n, bytes int }
			fullc := make(chan full, 1)
			jsonrpc2.TestHookNotificationsFull = func(n, bytes int) {
				select {
				case fullc <- full{n, bytes}:
				default:
				}
			}
			defer func() { jsonrpc2.TestHookNotificationsFull = nil }()

			// More than the bound in both number and bytes.
			note := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":%s}}`, tc.data)
			fc := newFloodConn(t, note, 10*maxClientQueuedNotifications)
			release := make(chan struct{})
			c := NewClient(&Implementation{Name: "c", Version: "1"}, &ClientOptions{
				LoggingMessageHandler: func(context.Context, *LoggingMessageRequest) { <-release },
			})
			cs, err := c.Connect(ctx, &floodTransport{fc}, &ClientSessionOptions{ProtocolVersion: protocolVersion20251125})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			defer close(release)

			select {
			case f := <-fullc:
				if f.n > tc.wantN || f.bytes > tc.wantBytes {
					t.Fatalf("the reader waited with %d notifications (%d bytes) queued, want at most %d (%d bytes)", f.n, f.bytes, tc.wantN, tc.wantBytes)
				}
			case <-fc.exhausted:
				t.Fatalf("the client read all %d notifications while its handler was blocked: its queue of notifications is unbounded", fc.total)
			case <-ctx.Done():
				t.Fatal("the client neither read all the notifications nor waited for a place")
			}
		})
	}
}

type floodTransport struct{ c *floodConn }

func (t *floodTransport) Connect(context.Context) (Connection, error) { return t.c, nil }

// A floodConn is a server that answers initialize, then sends total copies of a
// notification as fast as the client reads them.
type floodConn struct {
	note      jsonrpc.Message
	total     int
	in        chan jsonrpc.Message
	exhausted chan struct{} // closed once the client has read every notification
	closed    chan struct{}
	closeOnce sync.Once
	floodOnce sync.Once
}

func newFloodConn(t *testing.T, note string, total int) *floodConn {
	msg, err := jsonrpc.DecodeMessage([]byte(note))
	if err != nil {
		t.Fatal(err)
	}
	return &floodConn{note: msg, total: total, in: make(chan jsonrpc.Message),
		exhausted: make(chan struct{}), closed: make(chan struct{})}
}

func (c *floodConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.in:
		return m, nil
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *floodConn) send(m jsonrpc.Message) bool {
	select {
	case c.in <- m:
		return true
	case <-c.closed:
		return false
	}
}

func (c *floodConn) Write(_ context.Context, m jsonrpc.Message) error {
	req, ok := m.(*jsonrpc.Request)
	if !ok {
		return nil
	}
	switch req.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(req.Params, &p)
		res, _ := json.Marshal(map[string]any{"protocolVersion": p.ProtocolVersion, "capabilities": map[string]any{},
			"serverInfo": map[string]any{"name": "flood", "version": "1"}})
		go c.send(&jsonrpc.Response{ID: req.ID, Result: res})
	case "notifications/initialized":
		c.floodOnce.Do(func() {
			go func() {
				for range c.total {
					if !c.send(c.note) {
						return
					}
				}
				close(c.exhausted)
			}()
		})
	}
	return nil
}

func (c *floodConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

func (c *floodConn) SessionID() string { return "" }

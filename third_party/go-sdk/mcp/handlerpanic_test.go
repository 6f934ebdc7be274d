// Copyright 2025 The Go MCP SDK Authors. All rights reserved.
// Use of this source code is governed by the license
// that can be found in the LICENSE file.

package mcp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A client handler that panics does not take the process down: a request is answered
// with an internal error, a notification is dropped, and the session keeps working
// (TOOLWARDEN.md). An elicitation-complete notification without params is dropped.
func TestClientHandlerPanicRecovered(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ct, st := NewInMemoryTransports()
	ss, err := NewServer(&Implementation{Name: "s", Version: "1"}, nil).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	c := NewClient(&Implementation{Name: "c", Version: "1"}, &ClientOptions{
		CreateMessageHandler: func(context.Context, *CreateMessageRequest) (*CreateMessageResult, error) {
			panic("boom")
		},
		ProgressNotificationHandler: func(context.Context, *ProgressNotificationClientRequest) { panic("boom") },
	})
	cs, err := c.Connect(ctx, ct, &ClientSessionOptions{ProtocolVersion: protocolVersion20251125})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	_, err = ss.CreateMessage(ctx, &CreateMessageParams{Messages: []*SamplingMessage{}})
	if werr := (*jsonrpc.Error)(nil); !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInternalError {
		t.Fatalf("a request whose handler panicked: got %v, want an internal error", err)
	}
	if err := ss.NotifyProgress(ctx, &ProgressNotificationParams{ProgressToken: "t", Progress: 1}); err != nil {
		t.Fatal(err)
	}
	if err := handleNotify(ctx, notificationElicitationComplete, newServerRequest(ss, orZero[Params]((*ElicitationCompleteParams)(nil)))); err != nil {
		t.Fatal(err)
	}
	// Answered after the notifications before it were handled.
	if err := ss.Ping(ctx, nil); err != nil {
		t.Fatalf("ping after the panics: %v", err)
	}
	if err := cs.Ping(ctx, nil); err != nil {
		t.Fatalf("ping from the client after the panics: %v", err)
	}
}

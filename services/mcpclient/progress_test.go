package mcpclient_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/services/registry"
)

// A caller that stops taking a call's progress (a gateway client that stopped reading)
// holds up neither the upstream session's other notifications nor memory: the call's
// callback gets the latest progress once it is free again.
func TestStalledProgressConsumer(t *testing.T) {
	t.Parallel()
	const ticks = 100
	finish := make(chan struct{}) // ends the flood call
	seen := make(chan struct{})   // the second call's progress reached its caller
	srv := mcp.NewServer(&mcp.Implementation{Name: "prog", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "flood"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		for i := 1; i <= ticks; i++ {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(),
				Progress: float64(i), Total: ticks})
		}
		select {
		case <-finish:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "flooded"}}}, nil, nil
	})
	// One notification, and the result once the caller saw it (or after a while).
	mcp.AddTool(srv, &mcp.Tool{Name: "one"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(),
			Progress: 1, Total: 1})
		select {
		case <-seen:
		case <-time.After(10 * time.Second):
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "one"}}}, nil, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)

	e := start(t, nil)
	sv := e.create(t, registry.Spec{Name: "prog", Type: registry.TypeStreamableHTTP, URL: hs.URL, Enabled: true})
	e.waitStatus(t, sv.ID, registry.StatusConnected)

	entered, unblock := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(unblock) }) }
	var finishOnce sync.Once
	end := func() { finishOnce.Do(func() { close(finish) }) }
	t.Cleanup(func() { release(); end() })

	var mu sync.Mutex
	var got []float64
	floodDone := make(chan error, 1)
	go func() {
		first := true
		_, err := e.mgr.CallTool(context.Background(), sv.ID, "flood", nil, func(p *mcp.ProgressNotificationParams) {
			mu.Lock()
			got = append(got, p.Progress)
			mu.Unlock()
			if first {
				first = false
				close(entered)
				<-unblock // the caller stops reading
			}
		})
		floodDone <- err
	}()
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no progress reached the flood call")
	}

	// Another call on the same session gets its progress while the first is stuck.
	var seenOnce sync.Once
	oneDone := make(chan error, 1)
	go func() {
		_, err := e.mgr.CallTool(context.Background(), sv.ID, "one", nil, func(*mcp.ProgressNotificationParams) {
			seenOnce.Do(func() { close(seen) })
		})
		oneDone <- err
	}()
	select {
	case <-seen:
	case <-time.After(5 * time.Second):
		t.Fatal("a stalled progress consumer held up the session's other notifications")
	}
	if err := <-oneDone; err != nil {
		t.Fatal(err)
	}

	// Free again, the first call's callback gets the latest progress.
	release()
	deadline := time.After(30 * time.Second)
	for {
		mu.Lock()
		last := got[len(got)-1]
		mu.Unlock()
		if last == ticks {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("the flood call's callback got %v, never %d", last, ticks)
		case <-time.After(10 * time.Millisecond):
		}
	}
	end()
	if err := <-floodDone; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("progress out of order: %v", got)
		}
	}
}

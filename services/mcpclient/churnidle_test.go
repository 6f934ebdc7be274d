package mcpclient_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/audit"
)

// A server that keeps announcing list_changed with nothing changed is discovered back to
// back only ChurnRuns times; then the runs space out (twice the debounce, doubling up to
// ChurnWait), so it cannot have its tools listed, a run recorded and announced four
// times a second for ever. A person's Discover still runs at once.
func TestChattyServerSlowedDown(t *testing.T) {
	t.Parallel()
	e, hs, sv := churning(t, "chatty") // debounce 20 ms, three runs in a row, wait up to 3 s
	spec := mcptest.ToolSpec{Name: "chatty", Description: "the same", InputSchema: json.RawMessage(`{"type":"object"}`)}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(30 * time.Millisecond):
			}
			hs.Server().SetTool(spec) // list_changed; only the first changes anything
		}
	}()
	time.Sleep(4 * time.Second)
	runs := e.runs(t, sv.ID)
	// Without the wait a run every 20–50 ms: dozens in 4 s. With it: the connect's, the
	// one that adds the tool, three in a row, then waits of 40 ms, 80 ms, … 2.56 s.
	if len(runs) > 14 {
		close(stop)
		<-done
		t.Fatalf("%d discoveries in 4 s of a server announcing every 30 ms that nothing changed, want them slowed down: %s",
			len(runs), runStatuses(runs))
	}
	begun := time.Now()
	if _, err := e.mgr.Discover(context.Background(), sv.ID, audit.Actor{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-done
	if took := time.Since(begun); took > 2*time.Second {
		t.Fatalf("a person's Discover of the chatty server took %s, want it run at once", took)
	}
}

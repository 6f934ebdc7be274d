package mcpclient

import (
	"context"
	"encoding/json"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Once a stdio server has left its standard input unread for the write deadline, the
// writes queued behind that one (agents' calls, replies, the health check's ping) fail
// at once: each waiting out its own deadline in turn stalled the session for minutes.
func TestStalledStdinFailsQueuedWritesAtOnce(t *testing.T) {
	lim, _ := testLimit(1 << 20)
	// sleep never reads its standard input.
	tr := &commandTransport{cmd: exec.Command("sleep", "600"), terminate: 100 * time.Millisecond, lim: lim,
		writeWait: 300 * time.Millisecond}
	ctx := context.Background()
	conn, err := tr.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// Each is more than the pipe holds (64 KiB): the first fills it and waits.
	params := json.RawMessage(`{"x":"` + pad(128<<10) + `"}`)
	const writes = 4
	errs := make([]error, writes)
	var wg sync.WaitGroup
	for i := range writes {
		wg.Go(func() {
			id, _ := jsonrpc.MakeID(float64(i + 1))
			errs[i] = conn.Write(ctx, &jsonrpc.Request{ID: id, Method: "tools/call", Params: params})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			t.Errorf("write %d to a server that reads nothing succeeded", i)
		}
	}
	if n := tr.proc.timedOut.Load(); n != 1 {
		t.Fatalf("%d of %d writes waited out the write deadline, want 1: after the first, the stalled stdin must fail the others at once", n, writes)
	}
}

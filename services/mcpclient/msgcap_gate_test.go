package mcpclient_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
)

// bigServer registers and connects test server name, with the big tool, over kind:
// stdio, sse, streamable_http or streamable_http_json (its answers JSON bodies).
func bigServer(t *testing.T, e *env, kind, name string) string {
	t.Helper()
	mo := &mcptest.Options{Name: name, Big: true, JSONResponse: kind == "streamable_http_json"}
	sp := registry.Spec{Name: name, Enabled: true}
	switch kind {
	case "stdio":
		sp.Type = registry.TypeStdio
		sp.Command, sp.Args, sp.Env = mcptest.StdioCommand(mo, filepath.Join(t.TempDir(), "control"))
	case "sse":
		sp.Type, sp.URL = registry.TypeSSE, mcptest.StartHTTP(t, mo).SSEURL()
	default:
		sp.Type, sp.URL = registry.TypeStreamableHTTP, mcptest.StartHTTP(t, mo).URL()
	}
	sv := e.create(t, sp)
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	return sv.ID
}

// Answers of over 1 MiB are read one at a time here (LargeReads 1), across servers and
// on each transport. With the slot held, the large answers wait, their streams unread,
// while small ones pass; once it is given back, each gets its whole answer, and every
// slot is back afterwards.
func TestLargeReadsWaitForASlot(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"stdio", "streamable_http", "streamable_http_json", "sse"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			opts := fast()
			opts.LargeReads = 1
			e := start(t, opts)
			var ids []string
			for i := range 3 {
				ids = append(ids, bigServer(t, e, kind, fmt.Sprintf("big%d", i)))
			}
			mcpclient.SetLargeHoldLimit(e.mgr, time.Minute) // the slot held here is not taken back
			release := mcpclient.HoldLargeRead(e.mgr, "someone else")
			defer release()
			const size = 3 << 20
			var large, small sync.WaitGroup
			var largeDone atomic.Int32
			for i := range 9 {
				wg := &large
				n := size + i
				if i%3 == 2 {
					wg, n = &small, 1000 // small ones, on a server of their own
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := e.mgr.CallTool(context.Background(), ids[i%3], "big", map[string]any{"bytes": n}, nil)
					if n > 1000 {
						largeDone.Add(1)
					}
					if err != nil {
						t.Errorf("call %d: %v", i, err)
						return
					}
					text := ""
					for _, c := range res.Content {
						if tc, ok := c.(*mcp.TextContent); ok {
							text += tc.Text
						}
					}
					if len(text) != n || strings.Trim(text, "x") != "" {
						t.Errorf("call %d: got %d bytes, want %d", i, len(text), n)
					}
				}()
			}
			small.Wait()
			testkit.WaitFor(t, 10*time.Second, func() bool { _, _, waited := mcpclient.LargeReadsOf(e.mgr); return waited > 0 },
				"no large answer waited for the slot held")
			if n := largeDone.Load(); n != 0 {
				t.Fatalf("%d large answers were read while the only slot was held", n)
			}
			release()
			large.Wait()
			if peak, now, _ := mcpclient.LargeReadsOf(e.mgr); peak != 1 || now != 0 {
				t.Errorf("large reads: at most %d at once, %d still taken; want 1, and none", peak, now)
			}
		})
	}
}

// A session keeps nothing of a large answer once its caller has it: not the reader's
// buffer, the SDK's decoding buffer nor its last message (each held as much as twice the
// answer for the rest of the session before: 44 MiB a stdio server after one 12 MiB
// answer). Not parallel: it measures the heap.
func TestLargeAnswerNotKept(t *testing.T) {
	for _, kind := range []string{"stdio", "sse"} {
		t.Run(kind, func(t *testing.T) {
			opts := fast()
			opts.MaxMessageBytes = 64 << 20
			e := start(t, opts)
			id := bigServer(t, e, kind, "big")
			call := func(n int) {
				t.Helper()
				res, err := e.mgr.CallTool(context.Background(), id, "big", map[string]any{"bytes": n}, nil)
				if err != nil || len(res.Content) != 1 {
					t.Fatalf("big %d: %v", n, err)
				}
			}
			call(1000)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			call(24 << 20)
			runtime.GC()
			runtime.ReadMemStats(&after)
			if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 8<<20 {
				t.Errorf("the heap kept %d MiB more after a 24 MiB answer, want under 8", grew>>20)
			}
		})
	}
}

// A server that starts a large answer and sends no more keeps its slot only for the
// hold limit: another server's large answer is read after that, not when the stalled
// session ends.
func TestLargeReadStalledGivesWay(t *testing.T) {
	t.Parallel()
	opts := fast()
	opts.LargeReads = 1
	e := start(t, opts)
	mcpclient.SetLargeHoldLimit(e.mgr, 300*time.Millisecond)
	spec, kv := hostileConn(t, hostileStallLarge)
	hostile := e.create(t, spec)
	e.waitStatus(t, hostile.ID, registry.StatusConnected)
	big := bigServer(t, e, "stdio", "big")

	stalled, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = e.mgr.CallTool(stalled, hostile.ID, "echo", map[string]any{}, nil) }()
	testkit.WaitFor(t, 10*time.Second, func() bool { _, now, _ := mcpclient.LargeReadsOf(e.mgr); return now == 1 },
		"the stalled answer never took the slot")

	ctx, done := context.WithTimeout(context.Background(), 20*time.Second)
	defer done()
	res, err := e.mgr.CallTool(ctx, big, "big", map[string]any{"bytes": 2 << 20}, nil)
	if err != nil {
		killHostile(t, kv, fmt.Sprintf("a large answer behind a stalled one: %v", err))
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || len(tc.Text) != 2<<20 {
		t.Errorf("a large answer behind a stalled one: got %T", res.Content[0])
	}
	if _, now, _ := mcpclient.LargeReadsOf(e.mgr); now != 0 || mcpclient.LargeReadsEvicted(e.mgr) != 1 {
		t.Errorf("%d slots taken after, %d taken back: want none, and the stalled answer's", now, mcpclient.LargeReadsEvicted(e.mgr))
	}
	cancel()
}

// A JSON answer whose wait for a slot its call gave up ends as an error for that call:
// the session goes on, and the server's other calls with it.
func TestLargeReadGivenUpKeepsTheSession(t *testing.T) {
	t.Parallel()
	opts := fast()
	opts.LargeReads = 1
	e := start(t, opts)
	mcpclient.SetLargeHoldLimit(e.mgr, time.Minute)
	big := bigServer(t, e, "streamable_http_json", "big")
	before, err := e.mgr.Session(big)
	if err != nil {
		t.Fatal(err)
	}
	release := mcpclient.HoldLargeRead(e.mgr, "someone else")
	short, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := e.mgr.CallTool(short, big, "big", map[string]any{"bytes": 3 << 20}, nil); err == nil {
		t.Fatal("a large answer was read while the only slot was held")
	}
	time.Sleep(2 * time.Second) // past the read's grace after its call ended
	release()
	if _, err := e.mgr.CallTool(context.Background(), big, "big", map[string]any{"bytes": 1000}, nil); err != nil {
		t.Fatalf("the next call: %v", err)
	}
	if after, err := e.mgr.Session(big); err != nil || after != before {
		t.Errorf("the session was replaced after a read given up (%v)", err)
	}
}

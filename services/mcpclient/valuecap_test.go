package mcpclient_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/mcpclient"
	"github.com/toolwarden/toolwarden/services/registry"
)

// The test binary started with TOOLWARDEN_VALUECAP set is a stdio MCP server
// (valueCapServe) whose tool many answers with a message of manyValues tiny JSON values.
const envValueCap = "TOOLWARDEN_VALUECAP"

// manyValues is how many values the tool many answers with: 3 bytes each, 6 MB in all,
// well under the 16 MiB cap, yet about 125 MiB once the SDK decodes them into Go values.
const manyValues = 2_000_000

// manyObject is a JSON object holding manyValues empty objects.
func manyObject() string { return `{"x":[` + strings.Repeat("{},", manyValues-1) + "{}]}" }

func init() {
	if os.Getenv(envValueCap) != "" {
		valueCapServe(os.Stdin, os.Stdout)
		os.Exit(0)
	}
}

// valueCapServe answers initialize, tools/list (many, noisy, echo), tools/call and ping.
// many answers with manyObject as its structured content; noisy first sends a
// notifications/message whose data is manyObject, then answers as echo does.
func valueCapServe(in io.Reader, out io.Writer) {
	many := manyObject()
	w := bufio.NewWriter(out)
	send := func(format string, args ...any) {
		fmt.Fprintf(w, format+"\n", args...)
		_ = w.Flush()
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil || msg.ID == nil {
			continue // notifications and replies
		}
		switch msg.Method {
		case "server/discover":
			send(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, msg.ID)
		case "initialize":
			send(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{},"logging":{}},"serverInfo":{"name":"valuecap","version":"1"}}}`, msg.ID)
		case "tools/list":
			send(`{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"many","inputSchema":{"type":"object"}},{"name":"noisy","inputSchema":{"type":"object"}},{"name":"echo","inputSchema":{"type":"object"}}]}}`, msg.ID)
		case "tools/call":
			switch msg.Params.Name {
			case "many":
				send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"many"}],"structuredContent":%s}}`, msg.ID, many)
				continue
			case "noisy":
				send(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":%s}}`, many)
			}
			send(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}`, msg.ID)
		case "ping":
			send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, msg.ID)
		default:
			send(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, msg.ID)
		}
	}
}

// addMany adds the tool many to an in-process test server.
func addMany(s *mcptest.Server) {
	many := json.RawMessage(manyObject())
	s.MCP().AddTool(&mcp.Tool{Name: "many", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "many"}}, StructuredContent: many}, nil
		})
}

// withLength answers every POST with a Content-Length, as a server that builds its JSON
// answer before it sends it does.
func withLength(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(rec.Body.Len()))
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// syncBuffer is a log destination the manager's goroutines may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func heapAlloc() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// A message under the byte cap that holds millions of tiny values (which decoded take
// some 20 times their bytes) is refused as an oversized one is, on every transport: the
// call fails with result_too_large, the heap does not grow by the decoded values, and
// the session goes on. Not parallel: it measures the heap.
func TestValueCap(t *testing.T) {
	logs := &syncBuffer{}
	opts := fast()
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	e := start(t, opts)
	if n := len(manyObject()); n >= mcpclient.DefaultMaxMessageBytes-1024 {
		t.Fatalf("the answer of many is %d bytes: it must be under the byte cap", n)
	}

	cmd, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	sse := mcptest.StartHTTP(t, &mcptest.Options{Name: "sse"})
	addMany(sse.Server())
	js := mcptest.StartHTTP(t, &mcptest.Options{Name: "json", JSONResponse: true})
	addMany(js.Server())
	lengthSrv := mcptest.New(&mcptest.Options{Name: "length", JSONResponse: true})
	addMany(lengthSrv)
	hs := httptest.NewServer(withLength(lengthSrv.Handler()))
	t.Cleanup(func() { e.stop(); hs.Close() }) // the sessions first: Close waits for their streams

	for _, tc := range []struct {
		name string
		spec registry.Spec
	}{
		{"stdio", registry.Spec{Type: registry.TypeStdio, Command: cmd, Env: map[string]string{envValueCap: "1"}}},
		{"sse", registry.Spec{Type: registry.TypeStreamableHTTP, URL: sse.URL()}},
		{"json", registry.Spec{Type: registry.TypeStreamableHTTP, URL: js.URL()}},
		{"json with a length", registry.Spec{Type: registry.TypeStreamableHTTP, URL: hs.URL + "/mcp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Name, tc.spec.Enabled = "vc-"+strings.ReplaceAll(tc.name, " ", "-"), true
			sv := e.create(t, tc.spec)
			e.waitStatus(t, sv.ID, registry.StatusConnected)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			before := heapAlloc()
			res, err := e.mgr.CallTool(ctx, sv.ID, "many", nil, nil)
			growth := heapAlloc() - before
			runtime.KeepAlive(res)
			t.Logf("the heap grew by %d KiB over the call", growth>>10)
			if !errors.Is(err, mcpclient.ErrResultTooLarge) {
				t.Errorf("call many: got %v, want result too large", err)
			} else if !strings.Contains(err.Error(), "JSON values") {
				t.Errorf("call many: %v, want it to say the answer held too many values", err)
			}
			if growth > 64<<20 {
				t.Errorf("the heap grew by %d MiB over the call, want less than 64", growth>>20)
			}

			if res, err := e.mgr.CallTool(ctx, sv.ID, "echo", map[string]any{"message": "hi"}, nil); err != nil || res.IsError {
				t.Fatalf("call after it: %v %+v", err, res)
			}
		})
	}

	// A notification of as many values is dropped, and the call it came with answered.
	t.Run("notification", func(t *testing.T) {
		sv := e.create(t, registry.Spec{Name: "vc-notify", Type: registry.TypeStdio, Command: cmd, Enabled: true,
			Env: map[string]string{envValueCap: "1"}})
		e.waitStatus(t, sv.ID, registry.StatusConnected)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if res, err := e.mgr.CallTool(ctx, sv.ID, "noisy", nil, nil); err != nil || res.IsError {
			t.Fatalf("call noisy: %v %+v", err, res)
		}
		// The reader drops the notification before it reads the answer behind it.
		if l := logs.String(); !strings.Contains(l, "dropped an oversized message") || !strings.Contains(l, "method=notifications/message") {
			t.Fatalf("the notification was not dropped; the log:\n%.2000s", l)
		}
	})
}

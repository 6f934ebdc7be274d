package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// echoText calls echo with msg on session sv of e and returns its text.
func echoText(ctx context.Context, e *env, sv registry.Server, msg string) (string, error) {
	cs, err := e.mgr.Session(sv.ID)
	if err != nil {
		return "", err
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
	if err != nil {
		return "", err
	}
	if res.IsError || len(res.Content) != 1 {
		return "", fmt.Errorf("result %+v", res)
	}
	text, _ := res.Content[0].(*mcp.TextContent)
	if text == nil {
		return "", fmt.Errorf("result %+v", res)
	}
	return text.Text, nil
}

// unanswered makes each call of echo with a message in msgs, whose answer the server
// sends in a form the SDK refuses and with no id of ours to answer (the filter makes it
// so): each waits for its own deadline, and the session goes on after them.
func unanswered(t *testing.T, e *env, sv registry.Server, msgs ...string) {
	t.Helper()
	for _, msg := range msgs {
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		text, err := echoText(ctx, e, sv, msg)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("echo %s: %q, %v; want it to wait for its deadline (dropped), the session alive", msg, text, err)
		}
	}
}

// A stdio server's answers that the SDK refuses for their "id", "method" or "error" (here
// made so by a filter on its standard output) end no session: one with an id of ours
// fails its call at once, the others are dropped. A batch, which the SDK's reader ends
// the session on when it cannot decode every element, is passed on as its messages.
func TestStdioRefusedShapesKeepSession(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	cmd, args, envm := mcptest.StdioCommand(&mcptest.Options{Name: "shapes"}, filepath.Join(t.TempDir(), "control"))
	script := `"$0" "$@" | sed -u` +
		` -e '/IDNULL/s/"id":[0-9]*/"id":null/'` +
		` -e '/IDTRUE/s/"id":[0-9]*/"id":true/'` +
		` -e '/IDOBJECT/s/"id":[0-9]*/"id":{}/'` +
		` -e '/IDARRAY/s/"id":[0-9]*/"id":[]/'` +
		` -e '/METHODNUM/s/"jsonrpc":"2.0",/"jsonrpc":"2.0","method":5,/'` +
		` -e '/ERRSTRING/s/"result":/"error":"boom","result":/'` +
		` -e '/ERRCODE/s/"result":/"error":{"code":"E1","message":"boom"},"result":/'` +
		` -e '/BATCHMIXED/s/.*/[1,&,{}]/'` +
		` -e '/BATCHEMPTY/i []'`
	sv := e.create(t, registry.Spec{Name: "shapes", Type: registry.TypeStdio, Command: "sh",
		Args: append([]string{"-c", script, cmd}, args...), Env: envm, Enabled: true})
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	malformedCalls(t, e, sv, map[string]string{
		"ERRSTRING": `its "error" is not a JSON-RPC error object`,
		"ERRCODE":   `its "error" is not a JSON-RPC error object`,
	})
	unanswered(t, e, sv, "IDNULL", "IDTRUE", "IDOBJECT", "IDARRAY", "METHODNUM")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, msg := range []string{"BATCHMIXED", "BATCHEMPTY", "after"} {
		if text, err := echoText(ctx, e, sv, msg); err != nil || text != "Echo: "+msg {
			t.Fatalf("echo %s: %q, %v; want its echo", msg, text, err)
		}
	}
	if got := e.server(t, sv.ID); got.Status != registry.StatusConnected {
		t.Fatalf("status %s, want still connected", got.Status)
	}
	waitStderr(t, e, sv.ID, strayMark+`{"jsonrpc":"2.0","id":null`)
}

// A Streamable HTTP server's answer that the SDK cannot decode, and would end the session
// on, fails its call at once: an application/json answer without a body (Content-Length
// 0), or with an "error" of the wrong type, in a body or an SSE event. A batch in an
// event, which the SDK never takes over HTTP, is passed on as its messages.
func TestStreamableRefusedShapesKeepSession(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	u := interposed(t, &mcptest.Options{Name: "httpshapes"}, func(w http.ResponseWriter, _ *http.Request, method string, id json.RawMessage, body []byte) bool {
		if method != "tools/call" {
			return false
		}
		result := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"batched"}]}}`, id)
		switch {
		case bytes.Contains(body, []byte("EMPTYBODY")):
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusOK)
		case bytes.Contains(body, []byte("ERRBODY")):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":"boom"}`, id)
		case bytes.Contains(body, []byte("ERREVENT")):
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":1.5,\"message\":\"boom\"}}\n\n", id)
		case bytes.Contains(body, []byte("BATCHEVENT")):
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: message\ndata: [1,%s]\n\n", result)
		default:
			return false
		}
		return true
	})
	sv := e.create(t, registry.Spec{Name: "httpshapes", Type: registry.TypeStreamableHTTP, URL: u, Enabled: true})
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if text, err := echoText(ctx, e, sv, "BATCHEVENT"); err != nil || text != "batched" {
		t.Fatalf("echo BATCHEVENT: %q, %v; want the batch's response", text, err)
	}
	malformedCalls(t, e, sv, map[string]string{
		"EMPTYBODY": "not valid JSON",
		"ERRBODY":   `its "error" is not a JSON-RPC error object`,
		"ERREVENT":  `its "error" is not a JSON-RPC error object`,
	})
}

package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// malformedCalls makes each call of echo with a message in bad on session sv of e, and
// wants each to fail at once with a malformed-response error that ends in why; the
// session must go on after them.
func malformedCalls(t *testing.T, e *env, sv registry.Server, bad map[string]string) {
	t.Helper()
	cs, err := e.mgr.Session(sv.ID)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for msg, why := range bad {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
		want := "malformed response: " + sv.Name + " sent an answer that is not a JSON-RPC message the client can read (" + why + ")"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("echo %s: %v %+v, want %q", msg, err, res, want)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("echo %s failed after %s, want at once", msg, d)
		}
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "after"}}); err != nil || res.IsError {
		t.Fatalf("a call after the malformed answers: %v %+v", err, res)
	}
	if got := e.server(t, sv.ID); got.Status != registry.StatusConnected {
		t.Fatalf("status %s, want still connected", got.Status)
	}
}

// A Streamable HTTP server that answers a call with an application/json body the SDK
// cannot decode (not JSON, or a "jsonrpc" other than "2.0") fails that call at once
// with a malformed-response error; the SDK alone would end the session.
func TestMalformedJSONBodyFailsFast(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	u := interposed(t, &mcptest.Options{Name: "jsonbody"}, func(w http.ResponseWriter, _ *http.Request, method string, id json.RawMessage, body []byte) bool {
		if method != "tools/call" {
			return false
		}
		var answer string
		switch {
		case bytes.Contains(body, []byte("MALFORM")):
			answer = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"x"}],}}`, id)
		case bytes.Contains(body, []byte("VERSION1")):
			answer = fmt.Sprintf(`{"jsonrpc":"1.0","id":%s,"result":{"content":[{"type":"text","text":"x"}]}}`, id)
		case bytes.Contains(body, []byte("HTMLPAGE")):
			answer = "<html><body>upstream hiccup</body></html>"
		default:
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(answer))
		return true
	})
	sv := e.create(t, registry.Spec{Name: "jsonbody", Type: registry.TypeStreamableHTTP, URL: u, Enabled: true})
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	malformedCalls(t, e, sv, map[string]string{
		"MALFORM":  "not valid JSON",
		"VERSION1": `its "jsonrpc" is not "2.0"`,
		"HTMLPAGE": "not valid JSON",
	})
}

// A stdio server's answer whose "jsonrpc" is not "2.0", or whose braces do not balance
// (here made so by a filter on its standard output), fails its call at once: the first
// is not taken for a message, the second ends with its line instead of taking the next
// lines with it. The session goes on.
func TestStdioMalformedLinesFailFast(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	cmd, args, envm := mcptest.StdioCommand(&mcptest.Options{Name: "lines"}, filepath.Join(t.TempDir(), "control"))
	script := `"$0" "$@" | sed -u -e '/UNBALANCED/s/}$//' -e '/VERSION1/s/"jsonrpc":"2.0"/"jsonrpc":"1.0"/'`
	sv := e.create(t, registry.Spec{Name: "lines", Type: registry.TypeStdio, Command: "sh",
		Args: append([]string{"-c", script, cmd}, args...), Env: envm, Enabled: true})
	e.waitStatus(t, sv.ID, registry.StatusConnected)
	malformedCalls(t, e, sv, map[string]string{
		"UNBALANCED": "not valid JSON",
		"VERSION1":   `its "jsonrpc" is not "2.0"`,
	})
	waitStderr(t, e, sv.ID, strayMark+`{"jsonrpc":"1.0"`)
}

package router_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
	"github.com/toolwarden/toolwarden/services/verr"
)

// Arguments a server could read otherwise than Toolwarden checked them are refused before
// they reach it, naming where: a name equal to another of its object but for case (a
// case-insensitive server binds the unchecked "ſql" or "PATH"), and strings that are not
// UTF-8 text (checked as U+FFFD, sent as they came).
func TestCallRefusesArgumentsReadOtherwise(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "db"})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "query", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		InputSchema: []byte(`{"type":"object","properties":{"sql":{"type":"string","pattern":"^SELECT "},
			"opts":{"type":"object","properties":{"path":{"type":"string","pattern":"^[^/]*$"}}}}}`)})
	var mu sync.Mutex
	var got [][]byte // the arguments of each call the server received
	hs.Server().MCP().AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && method == "tools/call" {
				mu.Lock()
				got = append(got, bytes.Clone(p.Arguments))
				mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	e.register(registry.Spec{Name: "db", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true, Trusted: true}, "query")

	for _, tc := range []struct{ args, path, says string }{
		{`{"sql":"SELECT 1","ſql":"DROP TABLE users"}`, "/ſql", `"sql" again but for letter case`},
		{`{"sql":"SELECT 1","opts":{"path":"ok","PATH":"/etc/passwd"}}`, "/opts/PATH", `"path" again`},
		{`{"sql":"SELECT 1","opts":{"path":"ok","path":"/etc/passwd"}}`, "/opts/path", "more than once"},
		{"{\"sql\":\"SELECT 1\",\"note\":\"a\xC0\xAFb\"}", "/note", "not valid UTF-8"},
		{`{"sql":"SELECT 1","opts":{"path":"\ud800"}}`, "/opts/path", `\ud800`},
	} {
		_, err := e.call("db__query", tc.args)
		var re *router.Error
		if codeOf(err) != router.CodeInvalidArguments || !errors.As(err, &re) {
			t.Errorf("%s: got %v, want invalid_arguments", tc.args, err)
			continue
		}
		fields, _ := re.Details.([]verr.Field)
		if len(fields) != 1 || fields[0].Field != tc.path || !strings.Contains(fields[0].Message, tc.says) {
			t.Errorf("%s: details %+v, want %s saying %q", tc.args, fields, tc.path, tc.says)
		}
	}
	mu.Lock()
	if len(got) != 0 {
		t.Errorf("the server received refused calls: %q", got)
	}
	mu.Unlock()

	// Arguments as they should be still run, sent as given.
	if res, err := e.call("db__query", `{"sql":"SELECT 1","opts":{"path":"ok","mode":"\ud83d\ude00"}}`); err != nil || res.IsError {
		t.Fatalf("a good call: %v %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || !bytes.Contains(got[0], []byte(`"path":"ok"`)) {
		t.Errorf("the server received %q, want the good call", got)
	}
}

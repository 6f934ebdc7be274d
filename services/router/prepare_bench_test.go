package router_test

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/auth"
	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/router"
)

// BenchmarkPrepare is the router's check of a call (resolve, admit, merge, validate)
// without running it, on a tool with a nested schema.
func BenchmarkPrepare(b *testing.B) {
	e := start(b, nil)
	hs := mcptest.StartHTTP(b, &mcptest.Options{Name: "db"})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "query", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		InputSchema: []byte(`{"type":"object","properties":{"sql":{"type":"string","pattern":"^SELECT "},
			"opts":{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}}}}}`)})
	e.register(registry.Spec{Name: "db", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true, Trusted: true}, "query")
	c := router.Call{Tool: "db__query", Actor: admin, Role: auth.RoleAdmin, Source: router.SourceTestPanel,
		Arguments: json.RawMessage(`{"sql":"SELECT * FROM t WHERE id = $1","opts":{"path":"reports/q1","limit":10},"params":[1,"two",{"three":3}]}`)}
	if _, err := e.r.Prepare(e.ctx, c); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.r.Prepare(e.ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

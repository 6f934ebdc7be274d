package mcpclient_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/internal/testkit"
	"github.com/toolwarden/toolwarden/services/registry"
)

// A server that pages its resources and prompts without end, each with a huge
// description, and describes itself at length, is stored bounded: each list stops at
// its byte budget and says it was cut, each text is shortened and marked so, a
// resource whose URI is too long to keep whole is left out, and so are the
// instructions and the server's name, title and version shortened.
func TestHostileListsBounded(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "hoard"})
	huge := strings.Repeat("d", 16<<10)
	long := strings.Repeat("n", 1<<10)
	page := func(req mcp.Request) int {
		var cursor string
		switch p := req.GetParams().(type) {
		case *mcp.ListResourcesParams:
			cursor = p.Cursor
		case *mcp.ListPromptsParams:
			cursor = p.Cursor
		}
		var n int
		fmt.Sscanf(cursor, "p%d", &n)
		return n
	}
	hs.Server().MCP().AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "initialize":
				res, err := next(ctx, method, req)
				if err == nil {
					ir := res.(*mcp.InitializeResult)
					ir.Instructions = strings.Repeat("i", 1<<20)
					ir.ServerInfo = &mcp.Implementation{Name: "hoard", Title: long, Version: long}
					ir.Capabilities.Experimental = map[string]any{"hoard": strings.Repeat("x", 1<<20)}
				}
				return res, err
			case "resources/list":
				n := page(req)
				rs := []*mcp.Resource{{URI: fmt.Sprintf("test://r/%d", n), Name: long, Title: long, Description: huge, MIMEType: long}}
				if n == 0 {
					rs = append(rs, &mcp.Resource{URI: "test://long/" + strings.Repeat("u", 10<<10), Name: "long-uri"})
				}
				return &mcp.ListResourcesResult{Resources: rs, NextCursor: fmt.Sprintf("p%d", n+1)}, nil
			case "prompts/list":
				n := page(req)
				args := make([]*mcp.PromptArgument, 500)
				for i := range args {
					args[i] = &mcp.PromptArgument{Name: fmt.Sprintf("arg%d-%s", i, long[:40])}
				}
				return &mcp.ListPromptsResult{Prompts: []*mcp.Prompt{{Name: fmt.Sprintf("p%d", n), Title: long, Description: huge, Arguments: args}},
					NextCursor: fmt.Sprintf("p%d", n+1)}, nil
			}
			return next(ctx, method, req)
		}
	})
	sv := e.create(t, registry.Spec{Name: "hoard", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true})
	e.waitRuns(t, sv.ID, 1)

	// The budget is 1 MiB of items as Go encodes them; PostgreSQL's text adds a space
	// after each colon and comma.
	const bound = 1<<20 + 64<<10
	for _, col := range []string{"resources", "prompts"} {
		size := testkit.Count(t, e.pool, `SELECT coalesce(octet_length(`+col+`::text), 0) FROM mcp_servers WHERE id = $1`, sv.ID)
		if size > bound || size < 512<<10 {
			t.Errorf("stored %s: %d bytes, want between 512 KiB and %d", col, size, bound)
		}
	}
	got := e.server(t, sv.ID)
	if len(got.Resources) < 2 || len(got.Prompts) < 2 {
		t.Fatalf("stored %d resources and %d prompts", len(got.Resources), len(got.Prompts))
	}
	rs, cut := got.Resources[:len(got.Resources)-1], got.Resources[len(got.Resources)-1]
	if cut.URI != "" || !strings.Contains(cut.Description, "list cut") || !strings.Contains(cut.Description, "1 left out") {
		t.Errorf("the last resource does not say the list was cut: URI %.80q, description %.80q", cut.URI, cut.Description)
	}
	for _, r := range rs {
		if len(r.URI) > 100 || r.URI == "" {
			t.Fatalf("stored the resource %.60q", r.URI)
		}
		for _, s := range []string{r.Name, r.Title, r.MIMEType, r.Description} {
			if len(s) > 4200 || !strings.HasSuffix(s, "(cut)") {
				t.Fatalf("resource %s: a text of %d bytes, not shortened and marked", r.URI, len(s))
			}
		}
	}
	ps, pcut := got.Prompts[:len(got.Prompts)-1], got.Prompts[len(got.Prompts)-1]
	if pcut.Name != "" || !strings.Contains(pcut.Description, "list cut") {
		t.Errorf("the last prompt does not say the list was cut: name %.80q, description %.80q", pcut.Name, pcut.Description)
	}
	for _, p := range ps {
		if len(p.Description) > 4200 || len(p.Title) > 300 || len(p.Arguments) > 101 {
			t.Fatalf("prompt %s: description %d bytes, title %d, %d arguments", p.Name, len(p.Description), len(p.Title), len(p.Arguments))
		}
	}
	in := got.Info
	if len(in.Instructions) > 16<<10+16 || !strings.HasSuffix(in.Instructions, "(cut)") {
		t.Errorf("instructions: %d bytes, not shortened and marked", len(in.Instructions))
	}
	if len(in.Title) > 256 || len(in.Version) > 256 || !strings.HasSuffix(in.Title, "(cut)") || in.Name != "hoard" {
		t.Errorf("server info: name %q, title %d bytes, version %d bytes", in.Name, len(in.Title), len(in.Version))
	}
	if len(in.Capabilities) > 16<<10 || !strings.Contains(string(in.Capabilities), `"hoard": {}`) {
		t.Errorf("capabilities: %d bytes: %.200s", len(in.Capabilities), in.Capabilities)
	}
}

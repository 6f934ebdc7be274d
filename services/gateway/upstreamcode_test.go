package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// An upstream's error on a read is passed on with its message, and with its code unless
// the code is one of those that speak of the client's exchange with Toolwarden: a
// 2026-07-28 client told -32022 would think Toolwarden refused its protocol version,
// -32029 its rate, and -32601 would reach it as HTTP 404. Those become -32603.
func TestUpstreamErrorCodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := webtest.Start(t, nil)
	hs := mcptest.StartHTTP(t, &mcptest.Options{Name: "mt"})
	codes := map[int64]int64{
		mcp.CodeUnsupportedProtocolVersion: jsonrpc.CodeInternalError, -32029: jsonrpc.CodeInternalError,
		mcp.CodeURLElicitationRequired: jsonrpc.CodeInternalError, jsonrpc.CodeMethodNotFound: jsonrpc.CodeInternalError,
		jsonrpc.CodeInvalidRequest: jsonrpc.CodeInternalError,
		jsonrpc.CodeInvalidParams:  jsonrpc.CodeInvalidParams, -32002: -32002, -32000: -32000, 1234: 1234,
	}
	for code := range codes {
		hs.Server().MCP().AddResource(&mcp.Resource{URI: fmt.Sprintf("test://code/%d", code), Name: fmt.Sprintf("code%d", code)},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return nil, &jsonrpc.Error{Code: code, Message: fmt.Sprintf("upstream says %d", code)}
			})
	}
	srv.RegisterServer(t, registry.Spec{Name: "mt", Type: registry.TypeStreamableHTTP, URL: hs.URL(), Enabled: true, Trusted: true}, "echo")
	token := srv.Token(t, "admin")
	for _, era := range eras {
		cs := mustConnect(t, srv, token, era)
		for code, want := range codes {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: fmt.Sprintf("toolwarden://mt/test://code/%d", code)})
			// (The upstream's SDK words its -32601 itself.)
			var we *jsonrpc.Error
			if !errors.As(err, &we) || we.Code != want || !strings.HasPrefix(we.Message, "server mt: ") {
				t.Errorf("%s: the upstream's %d came as %v, want code %d and its message", era, code, err, want)
			}
		}
		// The session still serves.
		if _, err := cs.ListResources(ctx, nil); err != nil {
			t.Fatalf("%s: after the errors: %v", era, err)
		}
	}
}

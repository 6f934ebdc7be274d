package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/app/webtest"
	"github.com/toolwarden/toolwarden/services/risk"
)

// A call whose body Toolwarden refuses before the MCP handler reads it (a NUL or a
// duplicate key in its arguments, or a body past 4 MB) is answered with a JSON-RPC
// error, which an MCP client reads as that call refused: the released go-sdk client
// ended its whole session on the API's error body (Toolwarden's own fork of it does
// not, and goes on here either way).
func TestMCPRefusedBodyKeepsSession(t *testing.T) {
	t.Parallel()
	srv := webtest.Start(t, nil)
	srv.LiveServer(t, "live", true, "echo")
	srv.App.SetRisk(t, "live__echo", risk.Low)
	ctx := context.Background()
	agent := &http.Client{Transport: bearerTransport(srv.Token(t, "admin"))}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"live__echo","arguments":{"message":"a\u0000b"}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"live__echo","arguments":{"message":"a","message":"b"}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"live__echo","arguments":{"message":"` + strings.Repeat("x", 5<<20) + `"}}}`,
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		res, err := agent.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		err = json.NewDecoder(res.Body).Decode(&got)
		res.Body.Close()
		if res.StatusCode < 400 || err != nil || got.JSONRPC != "2.0" || string(got.ID) != "null" || got.Error == nil ||
			got.Error.Code != -32600 || got.Error.Message == "" {
			t.Errorf("a refused body (%.60s…): HTTP %d, %v %+v; want a JSON-RPC error", body, res.StatusCode, err, got)
		}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "refusal-agent", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: agent}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, args := range []map[string]any{{"message": "a\x00b"}, {"message": strings.Repeat("x", 5<<20)}} {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "live__echo", Arguments: args})
		if err == nil {
			t.Fatalf("a call of %.20q… was not refused", args["message"])
		}
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "live__echo", Arguments: map[string]any{"message": "still here"}}); err != nil || res.IsError {
			t.Fatalf("the next call on the session after a refused one (%.20q…): %v %+v", args["message"], err, res)
		}
	}
}

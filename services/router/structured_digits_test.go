package router_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwarden/toolwarden/internal/mcptest"
	"github.com/toolwarden/toolwarden/services/router"
)

// bigStructured has numbers float64 cannot hold: decoded into any and encoded again
// they came back as 12345678901234567000, 9007199254740992 and 0.1.
const bigStructured = `{"id":12345678901234567890,"small":9007199254740993,"d":0.1000000000000000055511151231257827}`

// A server's structured content reaches the caller and the usage row digit for digit,
// and the output schema is checked against the number the server sent, not a rounded one.
func TestStructuredContentKeepsDigits(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	hs := e.server("num", true)
	hs.Server().SetTool(mcptest.ToolSpec{Name: "big", Description: "Answers with numbers past float64's precision.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}, Structured: json.RawMessage(bigStructured)})
	hs.Server().SetTool(mcptest.ToolSpec{Name: "capped", Description: "Answers with a number one past its schema's maximum.",
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"small":{"type":"integer","maximum":9007199254740992}},"required":["small"]}`),
		Structured:   json.RawMessage(`{"small":9007199254740993}`)})
	e.enable("num__big")
	e.enable("num__capped")

	res, err := e.call("num__big", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.StructuredContent) != bigStructured {
		t.Errorf("structured content: got %s, want %s", res.StructuredContent, bigStructured)
	}
	e.flush()
	if n := e.count(`SELECT count(*) FROM tool_usage_logs WHERE metadata->>'call_id' = $1
		AND response->'structured_content'->>'id' = '12345678901234567890' AND response->'structured_content'->>'small' = '9007199254740993'`, res.CallID); n != 1 {
		t.Errorf("usage rows with the digits sent: %d, want 1", n)
	}

	_, err = e.call("num__capped", `{}`)
	if codeOf(err) != router.CodeUpstream || !strings.Contains(err.Error(), "does not match its output schema") {
		t.Fatalf("9007199254740993 against a maximum of 9007199254740992: %v, want it refused as not matching", err)
	}
}

package mcpclient

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool's schemas and annotations are the bytes they encode to on their own, taken
// from the encoding of the whole tool.
func TestToolDefParts(t *testing.T) {
	for _, tl := range []*mcp.Tool{
		{Name: "a", Description: "<b>&</b> \u2028", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"q": map[string]any{"type": "string", "description": "inputSchema \"quoted\" <x>", "default": "é"}}}},
		{Name: "b", InputSchema: map[string]any{"type": "object"}, OutputSchema: map[string]any{"type": "object", "x": []any{1.5, nil, true}},
			Annotations: &mcp.ToolAnnotations{Title: "B", ReadOnlyHint: true}},
		{Name: "inputSchema", Title: "annotations", InputSchema: json.RawMessage(`{"type":"object","properties":{"inputSchema":{}}}`)},
	} {
		d := toolDef(tl)
		if !bytes.Equal(d.Raw, mustJSON(tl)) {
			t.Errorf("%s: raw %s", tl.Name, d.Raw)
		}
		for _, c := range []struct {
			name      string
			got       json.RawMessage
			v         any
			isPresent bool
		}{{"inputSchema", d.InputSchema, tl.InputSchema, tl.InputSchema != nil},
			{"outputSchema", d.OutputSchema, tl.OutputSchema, tl.OutputSchema != nil},
			{"annotations", d.Annotations, tl.Annotations, tl.Annotations != nil}} {
			switch {
			case !c.isPresent && c.got != nil:
				t.Errorf("%s: %s is %s, want none", tl.Name, c.name, c.got)
			case c.isPresent && !bytes.Equal(c.got, mustJSON(c.v)):
				t.Errorf("%s: %s is %s, want %s", tl.Name, c.name, c.got, mustJSON(c.v))
			}
		}
	}
	if member([]byte(`[1]`), "a") != nil || member([]byte(`{"a":`), "a") != nil || member([]byte(`{"b":1}`), "a") != nil {
		t.Error("member found a value that is not there")
	}
	if got := string(member([]byte(`{"a":1,"b":{"c":[2,"}"]},"d":3}`), "b")); got != `{"c":[2,"}"]}` {
		t.Errorf("member b: %q", got)
	}
	// The parts are slices of the whole encoding, not encoded again.
	d := toolDef(&mcp.Tool{Name: "s", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{Title: "S"}})
	for i := range d.Raw {
		d.Raw[i] = 'x'
	}
	if strings.Trim(string(d.InputSchema), "x") != "" || strings.Trim(string(d.Annotations), "x") != "" {
		t.Errorf("the parts do not share the tool's encoding: %s %s", d.InputSchema, d.Annotations)
	}
}

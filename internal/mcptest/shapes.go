package mcptest

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ShapesSchema is the input schema of the tool shapes (Options.Shapes): the parts of
// JSON Schema that need more than one input per value — a oneOf of objects told
// apart by a constant property, nullable values (anyOf with null, and a type list
// with "null"), an anyOf of a number and choices, and maps (additionalProperties,
// with and without a key pattern).
const ShapesSchema = `{
	"type": "object",
	"properties": {
		"shape": {
			"description": "The shape to draw.",
			"oneOf": [
				{"type": "object", "title": "Circle", "properties": {"kind": {"const": "circle"}, "radius": {"type": "number", "minimum": 0}}, "required": ["kind", "radius"]},
				{"type": "object", "properties": {"kind": {"const": "rect"}, "width": {"type": "number"}, "height": {"type": "number"}}, "required": ["kind", "width", "height"]}
			]
		},
		"label": {"description": "A caption, or null for none.", "anyOf": [{"type": "string"}, {"type": "null"}]},
		"color": {"type": ["string", "null"]},
		"size": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "enum": ["small", "large"]}]},
		"tags": {"description": "Free key/value tags.", "type": "object", "additionalProperties": {"type": "string"}},
		"limits": {"type": "object", "additionalProperties": {"type": "integer"}, "propertyNames": {"pattern": "^[a-z]+$"}}
	},
	"required": ["shape"]
}`

// addShapesTool registers shapes, which answers with the arguments it received as
// JSON text, so a test can see exactly what a client sent.
func (s *Server) addShapesTool() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mcp.AddTool(&mcp.Tool{
		Name:        "shapes",
		Description: "Draws nothing: answers with the arguments it received, as JSON.",
		InputSchema: json.RawMessage(ShapesSchema),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := req.Params.Arguments
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		return textResult(string(args)), nil
	})
	s.names["shapes"] = struct{}{}
}

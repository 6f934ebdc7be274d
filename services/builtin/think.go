package builtin

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Think is the tool think (seed 000): the agent writes a thought down, and gets it back;
// it changes nothing, and the thought stays in the call's records.
func Think() Tool {
	return Tool{
		Name:        "think",
		Title:       "Think",
		Description: "Write down a thought (reasoning, a plan, a note to self). Nothing is changed; the thought is returned and kept in the call's record.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)},
		Operations: []Operation{{
			Properties: map[string]any{"thought": map[string]any{"type": "string", "minLength": 1, "maxLength": 100000,
				"description": "the thought"}},
			Required: []string{"thought"},
			Display:  func(a map[string]any) string { return "Thinking: " + clip(str(a["thought"]), 60) },
			Run: func(_ context.Context, _ Call, args json.RawMessage) (*mcp.CallToolResult, error) {
				var in struct {
					Thought string `json:"thought"`
				}
				if err := json.Unmarshal(args, &in); err != nil {
					return errorResult("thought: " + err.Error()), nil
				}
				return textResult(in.Thought), nil
			},
		}},
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// clip cuts s to n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

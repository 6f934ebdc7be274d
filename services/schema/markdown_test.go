package schema

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestMarkdown(t *testing.T) {
	t.Parallel()
	tl := Tool{
		Name:        "read_file",
		Title:       "Read file",
		Description: "Reads a text file from the workspace.\nReturns its contents | as text.",
		InputSchema: json.RawMessage(nestedSchema),
		OutputSchema: json.RawMessage(`{"type": "object", "properties": {
			"content": {"type": "string", "description": "The text."},
			"size": {"type": "integer", "description": "Bytes read."}
		}, "required": ["content"]}`),
		Annotations: json.RawMessage(`{"readOnlyHint": true, "openWorldHint": false}`),
	}
	md := Markdown(tl, "fs__read_file")
	for _, want := range []string{
		"# Read file\n",
		"Tool `fs__read_file` (`read_file` on its server).",
		"Reads a text file from the workspace.\nReturns its contents | as text.",
		"## Parameters",
		"| Parameter | Type | Required | Description |",
		"| `path` | string | yes | File to read. Length: 1 to 4096 characters. |",
		"| `mode` | string | no | How to read it. Default: `\"text\"`. One of: `\"text\"`, `\"binary\"`. |",
		"| `limit` | integer | yes | Lines to return. Range: ≥ 1 and ≤ 1000. |",
		"| `ratio` | number | yes | Sampling ratio. Range: > 0 and < 1. |",
		"| `since` | string \\| null | no | Only changes after this time. Format: `date-time`. |",
		"| `code` | string | yes | Ticket code. Pattern: `^[A-Z]{3}-[0-9]{4}$`. |",
		"| `options.follow` | boolean | yes | Follow symlinks. |",
		"| `filters[].op` | string | yes | Operator. One of: `\"eq\"`, `\"lt\"`, `\"gt\"`. |",
		"| `kind` | string | yes | Always file. Always `\"file\"`. |",
		"## Output",
		"| Field | Type | Required | Description |",
		"| `content` | string | yes | The text. |",
		"| `size` | integer | no | Bytes read. |",
		"## Behaviour",
		"- Read-only: yes",
		"- Destructive: not stated (MCP assumes yes)",
		"- Open world: no",
		"## Example call",
		"`POST /api/v1/tools/call`",
		"```json\n{\n  \"tool\": \"fs__read_file\",\n  \"arguments\": {\n",
		`"path": "<path>"`,
		`"code": "AAA-0000"`,
		"invalid_arguments",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}

	// The example call in the document is the one ExampleArguments builds,
	// and it passes the tool's own schema.
	start := strings.Index(md, "```json\n") + len("```json\n")
	end := strings.Index(md[start:], "```")
	var call struct {
		Tool      string         `json:"tool"`
		Arguments map[string]any `json:"arguments"`
	}
	if err := json.Unmarshal([]byte(md[start:start+end]), &call); err != nil {
		t.Fatalf("example call is not JSON: %v", err)
	}
	if call.Tool != "fs__read_file" {
		t.Errorf("got tool %q, want fs__read_file", call.Tool)
	}
	s, err := CompileSchema(tl.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateArguments(s, call.Arguments); err != nil {
		t.Errorf("example call does not validate: %v", err)
	}
}

func TestMarkdownMinimal(t *testing.T) {
	t.Parallel()
	md := Markdown(Tool{Name: "ping", Description: "Checks that the server answers.\u200b", InputSchema: json.RawMessage(`{"type": "object"}`)}, "")
	for _, want := range []string{
		"# ping\n",
		"Tool `ping`.",
		"answers.<U+200B>",
		"This tool takes no parameters.",
		"the tool declares no output schema",
		"no behaviour hints",
		"\"tool\": \"ping\"",
		"\"arguments\": {}",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "\u200b") {
		t.Error("markdown contains a raw zero-width space; hidden characters must be made visible")
	}
}

package schema

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// cleanTool is a definition with no findings at all; tests change one thing.
func cleanTool() Tool {
	return Tool{
		Name:        "read_file",
		Title:       "Read file",
		Description: "Reads a text file from the workspace and returns its contents.",
		InputSchema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"path": {"type": "string", "description": "Path of the file, relative to the workspace."}
			},
			"required": ["path"]
		}`),
		Annotations: json.RawMessage(`{"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}`),
	}
}

func find(fs []Finding, code, path string) (Finding, bool) {
	for _, f := range fs {
		if f.Code == code && (path == "" || f.Path == path) {
			return f, true
		}
	}
	return Finding{}, false
}

// everythingTools are tools/list entries of @modelcontextprotocol/server-everything
// 2026.8.31, captured once over stdio and stored so tests need no Node.
func everythingTools(t testing.TB) []Tool {
	t.Helper()
	raw, err := os.ReadFile("testdata/everything_tools.json")
	if err != nil {
		t.Fatal(err)
	}
	var tools []Tool
	if err := json.Unmarshal(raw, &tools); err != nil {
		t.Fatal(err)
	}
	return tools
}

// strictCompile compiles like CompileSchema but asserts formats, so examples
// are held to "format" in 2020-12 schemas too.
func strictCompile(t *testing.T, raw json.RawMessage) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(refusingLoader{})
	if err := c.AddResource(baseURL, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(baseURL)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// roundTrip sends v through JSON, as arguments arrive at the API.
func roundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// formTools are hand-written schemas for the test panel's form (views/form) (testdata/form_schemas.json):
// the in-repo test server's tools (internal/mcptest, as the Go SDK infers
// them) and nested, array, enum, format and unsupported cases.
func formTools(t testing.TB) []Tool {
	t.Helper()
	raw, err := os.ReadFile("testdata/form_schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	var tools []Tool
	if err := json.Unmarshal(raw, &tools); err != nil {
		t.Fatal(err)
	}
	return tools
}

// formCorpus is every schema the form is held to: server-everything's tools
// and formTools.
func formCorpus(t testing.TB) []Tool {
	return append(everythingTools(t), formTools(t)...)
}

package registry_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/toolwarden/toolwarden/internal/canonjson"
	"github.com/toolwarden/toolwarden/internal/canonjson/canonjsontest"
	"github.com/toolwarden/toolwarden/services/registry"
)

// TestDefinitionHashPinned pins the definition hash over a varied corpus: the hashes are
// stored (mcp_tools.definition_hash, tool_schemas, approved plans), so the canonical form
// they are taken over must never change. The digest was taken from the implementation
// that predates internal/canonjson.
func TestDefinitionHashPinned(t *testing.T) {
	t.Parallel()
	all := sha256.New()
	for _, raw := range canonjsontest.Corpus {
		d := registry.ToolDef{Name: "t<&>", Title: "Tïtle \u2028", Description: raw,
			InputSchema: json.RawMessage(raw), OutputSchema: json.RawMessage(raw), Annotations: json.RawMessage(raw)}
		h := registry.DefinitionHash(d)
		all.Write([]byte(h + "\n"))
	}
	const want = "95b41a71a5560be2f137f06653d3ea41fb69fce91664ad4b4c7e6f09f129dd6e"
	if got := hex.EncodeToString(all.Sum(nil)); got != want {
		t.Fatalf("definition hashes over the corpus: got digest %s, want %s", got, want)
	}
}

// legacyHash is DefinitionHash as it was written first: the map of the six fields,
// each schema decoded (empty: null, not JSON: the text as a string), through Marshal.
func legacyHash(d registry.ToolDef) string {
	canonical := func(raw json.RawMessage) any {
		if len(bytes.TrimSpace(raw)) == 0 {
			return nil
		}
		v, err := canonjson.Decode(raw)
		if err != nil {
			return string(raw)
		}
		return v
	}
	b, _ := canonjson.Marshal(map[string]any{"name": d.Name, "title": d.Title, "description": d.Description,
		"inputSchema": canonical(d.InputSchema), "outputSchema": canonical(d.OutputSchema),
		"annotations": canonical(d.Annotations)})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestDefinitionHashForm: DefinitionHash, which copies schemas already in canonical form,
// hashes the same bytes as the map it replaces, on the corpus, on its canonical forms
// and on tool lists as an MCP client writes them.
func TestDefinitionHashForm(t *testing.T) {
	t.Parallel()
	var raws []string
	for _, raw := range canonjsontest.Corpus {
		raws = append(raws, raw)
		if c, err := canonjson.Canonical([]byte(raw)); err == nil {
			raws = append(raws, string(c))
		}
	}
	for i, raw := range raws {
		next := raws[(i+1)%len(raws)]
		for _, d := range []registry.ToolDef{
			{Name: "t<&>", Title: "Tïtle \u2028", Description: raw, InputSchema: json.RawMessage(raw)},
			{Name: raw, InputSchema: json.RawMessage(next), OutputSchema: json.RawMessage(raw), Annotations: json.RawMessage(next)},
			{Name: "n", Description: "d\n\"q\"", InputSchema: json.RawMessage(raw), Annotations: json.RawMessage(raw)},
		} {
			if got, want := registry.DefinitionHash(d), legacyHash(d); got != want {
				t.Fatalf("DefinitionHash(%+v) = %s, the map gives %s", d, got, want)
			}
		}
	}
	for _, d := range benchTools(50) {
		if got, want := registry.DefinitionHash(d), legacyHash(d); got != want {
			t.Fatalf("DefinitionHash(%+v) = %s, the map gives %s", d, got, want)
		}
	}
}

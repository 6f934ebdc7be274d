package registry_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

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

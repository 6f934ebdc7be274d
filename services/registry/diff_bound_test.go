package registry_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/registry"
)

// A server chooses its tools' titles and parameter names, of any length and number: the
// change messages stored with each version quote them clipped, and a version keeps a
// bounded number of them, the rest counted in one last message.
func TestDiffBounded(t *testing.T) {
	t.Parallel()
	props := func(typ string) json.RawMessage {
		p := map[string]any{}
		for i := range 500 {
			p[fmt.Sprintf("%04d%s", i, strings.Repeat("n", 1000))] = map[string]any{"type": typ}
		}
		b, _ := json.Marshal(map[string]any{"type": "object", "properties": p})
		return b
	}
	old := registry.ToolDef{Name: "t", Title: strings.Repeat("a", 10_000), InputSchema: props("string")}
	new := registry.ToolDef{Name: "t", Title: strings.Repeat("b", 10_000), InputSchema: props("integer")}
	changes := registry.Diff(old, new)
	if n := len(changes); n < 2 || n > 51 {
		t.Errorf("got %d changes, want 2 to 51", n)
	}
	for i, c := range changes {
		if len(c.Message) > 1024 || len(c.Path) > 256 {
			t.Errorf("change %d: message of %d bytes and path of %d, want at most 1024 and 256", i, len(c.Message), len(c.Path))
			break
		}
	}
	if c := changes[0]; c.Kind != "title" || !strings.Contains(c.Message, "aaa") || !strings.Contains(c.Message, "bbb") {
		t.Errorf("first change %q (%s), want the title's, quoting both", short(c.Message), c.Kind)
	}
	last := changes[len(changes)-1]
	if want := fmt.Sprintf("and %d more changes", 501-(len(changes)-1)); last.Message != want || !last.Breaking {
		t.Errorf("last change %q (breaking %v), want %q, breaking (retyped parameters are among them)", short(last.Message), last.Breaking, want)
	}
	if again := registry.ClipChanges(changes); !slices.Equal(again, changes) {
		t.Errorf("bounding the changes again gives %d changes ending %q, want the same %d", len(again), short(again[len(again)-1].Message), len(changes))
	}
	if b, _ := json.Marshal(changes); len(b) > 64<<10 {
		t.Errorf("the changes take %d bytes as JSON, want at most 64 KB", len(b))
	}
}

// short keeps a failure message readable.
func short(s string) string {
	if len(s) > 80 {
		return fmt.Sprintf("%s… (%d bytes)", s[:80], len(s))
	}
	return s
}

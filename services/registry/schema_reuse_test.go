package registry_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// A server flipping a tool between two definitions stores a version each time, but
// each definition once: a version whose definition the tool had before refers to the
// stored one (tool_schemas is append-only, and one definition may take megabytes).
func TestFlippedDefinitionStoredOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("flip"))
	a := tool("echo", "A "+strings.Repeat("a", 4000), map[string]string{"text": `{"type":"string"}`})
	b := tool("echo", "B", map[string]string{"text": `{"type":"string"}`})
	for i := range 5 {
		d := a
		if i%2 == 1 {
			d = b
		}
		f.discover(sv.ID, discovery("list_changed", d))
	}
	tl := f.toolsByName(sv.ID)["echo"]
	if n := f.count(`SELECT count(*) FROM tool_schemas WHERE tool_id = $1`, tl.ID); n != 5 {
		t.Fatalf("%d versions after A→B→A→B→A, want 5", n)
	}
	if n := f.count(`SELECT count(*) FROM tool_schemas WHERE tool_id = $1 AND definition IS NOT NULL`, tl.ID); n != 2 {
		t.Fatalf("definitions stored after A→B→A→B→A: %d, want 2 (each once)", n)
	}
	// Every version still reads its own definition.
	vs, err := f.reg.ToolVersions(f.ctx, tl.ID)
	if err != nil || len(vs) != 5 {
		t.Fatalf("versions: %d (%v), want 5", len(vs), err)
	}
	for _, v := range vs {
		def, err := f.reg.ToolDefinition(f.ctx, tl.ID, v.VersionMajor, v.VersionMinor)
		want := b.Description
		if v.VersionMinor%2 == 0 {
			want = a.Description
		}
		var got struct{ Description string }
		if err == nil {
			err = json.Unmarshal(def, &got)
		}
		if err != nil || got.Description != want {
			t.Fatalf("definition of v%d.%d: %.60s (%v), want description %.10s…", v.VersionMajor, v.VersionMinor, def, err, want)
		}
	}
}

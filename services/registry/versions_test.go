package registry_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolwarden/toolwarden/services/registry"
)

// A server flipping between two definitions stores a version every time (tool_schemas
// is append-only): thousands a day. Listing a tool's versions, which anyone who may see
// the tool can ask for, reads a bounded number of rows and none of their definitions.
func TestToolVersionsBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("flip"))
	f.discover(sv.ID, discovery("connect", threeTools()...))
	tl := f.toolsByName(sv.ID)["echo"]
	// Versions 0.1 … 0.5000, older than the discovered 1.0, each a distinct definition.
	f.exec(`INSERT INTO tool_schemas (tool_id, version_major, version_minor, definition_hash, definition)
		SELECT $1, 0, g, md5(g::text), jsonb_build_object('name', 'echo', 'description', repeat('x', 2000) || g)
		FROM generate_series(1, 5000) g`, tl.ID)

	vs, err := f.reg.ToolVersions(f.ctx, tl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != registry.MaxToolVersions {
		t.Fatalf("got %d versions, want %d", len(vs), registry.MaxToolVersions)
	}
	if len(vs) == 0 || vs[0].DefinitionHash != tl.DefinitionHash || vs[0].Definition != nil {
		t.Fatalf("newest: got %+v, want the current version first, without its definition", vs[:min(1, len(vs))])
	}
	if last := vs[len(vs)-1]; last.VersionMajor != 0 || last.VersionMinor != 5000-registry.MaxToolVersions+2 {
		t.Errorf("oldest listed: got v%d.%d, want v0.%d (newest first)", last.VersionMajor, last.VersionMinor, 5000-registry.MaxToolVersions+2)
	}

	// A page says whether older versions exist.
	page, older, err := f.reg.ToolVersionsPage(f.ctx, tl.ID, 10)
	if err != nil || len(page) != 10 || !older {
		t.Fatalf("page of 10: got %d versions, older %v (%v), want 10 and true", len(page), older, err)
	}
	if page, older, err = f.reg.ToolVersionsPage(f.ctx, f.toolsByName(sv.ID)["add"].ID, 10); err != nil || len(page) != 1 || older {
		t.Fatalf("a tool with one version: got %d versions, older %v (%v), want 1 and false", len(page), older, err)
	}

	// A version too old to be listed is found by its hash; definitions are read one by one.
	v, found, err := f.reg.ToolVersionOf(f.ctx, tl.ID, "c4ca4238a0b923820dcc509a6f75849b") // md5("1")
	if err != nil || !found || v.VersionMajor != 0 || v.VersionMinor != 1 || v.Definition != nil {
		t.Fatalf("version of md5(1): got %+v found %v (%v), want v0.1 without its definition", v, found, err)
	}
	if _, found, err := f.reg.ToolVersionOf(f.ctx, tl.ID, "nope"); err != nil || found {
		t.Fatalf("an unknown hash: got found %v (%v), want not found", found, err)
	}
	def, err := f.reg.ToolDefinition(f.ctx, tl.ID, 0, 1)
	if err != nil || !strings.HasSuffix(string(def), `x1"}`) {
		t.Fatalf("definition of v0.1: got %.40s… (%v), want the stored one", def, err)
	}
	if _, err := f.reg.ToolDefinition(f.ctx, tl.ID, 7, 7); !errors.Is(err, registry.ErrToolVersionNotFound) {
		t.Fatalf("definition of v7.7: got %v, want ErrToolVersionNotFound", err)
	}
}

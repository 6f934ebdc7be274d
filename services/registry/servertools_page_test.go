package registry_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/toolwarden/toolwarden/services/registry"
	"github.com/toolwarden/toolwarden/services/verr"
)

// ServerToolsPage reads a bounded page of a server's tools in ServerTools' order
// (available first, by name), with the server's total; its cursor walks them all.
func TestServerToolsPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sv := f.create(stdioSpec("paged"))
	var defs []registry.ToolDef
	for _, n := range []string{"e", "d", "c", "b", "a"} {
		defs = append(defs, tool(n, "tool "+n, nil))
	}
	f.discover(sv.ID, discovery("connect", defs...))
	f.discover(sv.ID, discovery("connect", defs[:4]...)) // "a" is now unavailable: last
	all, err := f.reg.ServerTools(f.ctx, sv.ID)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, tl := range all {
		want = append(want, tl.Name)
	}

	var got []string
	cursor := ""
	for range 10 {
		p, err := f.reg.ServerToolsPage(f.ctx, sv.ID, 2, cursor)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Tools) > 2 || p.Total != 5 {
			t.Fatalf("page after %q: got %d tools, total %d; want at most 2, total 5", cursor, len(p.Tools), p.Total)
		}
		for _, tl := range p.Tools {
			got = append(got, tl.Name)
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if !slices.Equal(got, want) || !slices.Equal(want, []string{"b", "c", "d", "e", "a"}) {
		t.Fatalf("pages: got %v, ServerTools %v; want both b c d e a", got, want)
	}

	empty := f.create(stdioSpec("empty"))
	if p, err := f.reg.ServerToolsPage(f.ctx, empty.ID, 2, ""); err != nil || len(p.Tools) != 0 || p.Total != 0 || p.NextCursor != "" {
		t.Fatalf("a server without tools: got %+v, %v; want an empty page, total 0", p, err)
	}
	var ve *verr.Error
	if _, err := f.reg.ServerToolsPage(f.ctx, sv.ID, 2, "not-a-cursor"); !errors.As(err, &ve) || ve.For("cursor") == "" {
		t.Fatalf("a bad cursor: got %v, want an invalid input naming cursor", err)
	}
}

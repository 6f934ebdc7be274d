package tools_test

import (
	"encoding/json"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/toolwarden/toolwarden/services/risk"
	"github.com/toolwarden/toolwarden/services/tools"
)

const mib = 1 << 20

// pages follows q's pages to the end and returns the names on each.
func (f *fixture) pages(q tools.Query) [][]string {
	f.t.Helper()
	var out [][]string
	for range 20 {
		p, err := f.svc.List(f.ctx, q)
		if err != nil {
			f.t.Fatal(err)
		}
		var names []string
		for _, it := range p.Items {
			names = append(names, it.Name)
		}
		out = append(out, names)
		if p.NextCursor == "" {
			return out
		}
		q.Cursor = p.NextCursor
	}
	f.t.Fatalf("more than 20 pages: %v", out)
	return nil
}

// A page of large tools stops at the byte budget (8 MiB of their large columns) with a
// cursor that continues where it stopped; a tool larger than the budget comes alone.
func TestListPageBytes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("big", true)
	sizes := map[string]int{"a": 3, "b": 3, "c": 9, "d": 3, "e": 3} // MiB
	for name, size := range sizes {
		id := f.tool(toolSpec{server: srv, name: name})
		f.exec(`UPDATE mcp_tools SET description = repeat('x', $2) WHERE id = $1`, id, size*mib)
	}
	want := [][]string{{"a", "b"}, {"c"}, {"d", "e"}}
	if got := f.pages(tools.Query{Limit: tools.MaxLimit}); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("pages by name: %v, want %v", got, want)
	}
	if got := f.pages(tools.Query{Limit: tools.MaxLimit, Sort: tools.SortServer}); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("pages by server: %v, want %v", got, want)
	}
	// Every order pages the same way: each tool once, no page past the budget unless it
	// holds one tool.
	f.exec(`UPDATE mcp_tools SET title = 'Large tool' WHERE server_id = $1`, srv)
	for _, q := range []tools.Query{{Sort: tools.SortUpdated}, {Q: "large"}, {Q: "large", Sort: tools.SortName}} {
		q.Limit = tools.MaxLimit
		pages := f.pages(q)
		var all []string
		for _, pg := range pages {
			n := 0
			for _, name := range pg {
				n += sizes[name]
			}
			if n > 8 && len(pg) > 1 {
				t.Errorf("%+v: page %v holds %d MiB", q, pg, n)
			}
			all = append(all, pg...)
		}
		slices.Sort(all)
		if !slices.Equal(all, []string{"a", "b", "c", "d", "e"}) || len(pages) < 3 {
			t.Errorf("%+v: pages %v", q, pages)
		}
	}

	// The items are whole: the budget shortens the page, not the tools on it.
	p, err := f.svc.List(f.ctx, tools.Query{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 1 || len(p.Items[0].Description) != 3*mib || p.NextCursor == "" {
		t.Errorf("limit=1: %d items, cursor %q", len(p.Items), p.NextCursor)
	}

	// Schemas that compress well are small on disk but not on the wire: the budget
	// counts what the page reads.
	other := f.server("squeezed", true)
	for _, name := range []string{"f", "g", "h"} {
		id := f.tool(toolSpec{server: other, name: name})
		f.exec(`UPDATE mcp_tools SET input_schema = jsonb_build_object('type', 'object', 'description', repeat('y', $2)) WHERE id = $1`, id, 3*mib)
	}
	want = [][]string{{"f", "g"}, {"h"}}
	if got := f.pages(tools.Query{Limit: tools.MaxLimit, Server: "squeezed"}); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("compressed schemas: %v, want %v", got, want)
	}
}

// The list page's brief items carry what the cards show: the first characters of the
// title and description (one more than shown, so the card still marks them cut) and the
// annotations the risk is decided from.
func TestListBriefBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	srv := f.server("wordy", true)
	id := f.tool(toolSpec{server: srv, name: "talk", annotations: `{"readOnlyHint":true}`})
	f.exec(`UPDATE mcp_tools SET title = repeat('é', 5000), description = repeat('ü', $2),
		annotations = jsonb_build_object('readOnlyHint', true, 'destructiveHint', 'no', 'notes', repeat('n', $2)) WHERE id = $1`, id, mib)
	full, err := f.svc.Get(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.svc.List(f.ctx, tools.Query{Limit: 10, Brief: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 1 {
		t.Fatalf("%d items", len(p.Items))
	}
	it := p.Items[0]
	if n := utf8.RuneCountInString(it.Title); n != 201 {
		t.Errorf("title: %d characters, want 201", n)
	}
	if n := utf8.RuneCountInString(it.Description); n != 2001 {
		t.Errorf("description: %d characters, want 2001", n)
	}
	if len(it.Annotations) > 100 {
		t.Errorf("annotations: %d bytes: %.100s", len(it.Annotations), it.Annotations)
	}
	if got, want := it.Risk(), full.Risk(); got != want || got.Level != risk.Low {
		t.Errorf("risk from the brief annotations %+v, from the whole %+v", got, want)
	}
	// Annotations that are no object decide as they did.
	for _, ann := range []string{`[1,2]`, `"x"`, `null`, `{}`, `{"destructiveHint":false}`, `{"readOnlyHint":"yes"}`} {
		f.exec(`UPDATE mcp_tools SET annotations = $2::jsonb WHERE id = $1`, id, ann)
		full, err := f.svc.Get(f.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		p, err := f.svc.List(f.ctx, tools.Query{Limit: 10, Brief: true})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := p.Items[0].Risk(), full.Risk(); got != want {
			t.Errorf("annotations %s: brief risk %+v, whole %+v (brief %s)", ann, got, want, json.RawMessage(p.Items[0].Annotations))
		}
	}
}
